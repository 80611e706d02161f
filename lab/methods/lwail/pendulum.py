"""LWAIL on gymnasium's MuJoCo InvertedPendulum-v5: a hand-written PD expert (one state-only episode), ICVF on
random-policy transitions, and TD3 on the critic's reward (the task's own reward is never seen by the learner; it
only scores the evaluation).

The task terminates when the pole falls, so the sign of the reward matters here: a positive reward pays the agent
for every step it keeps the episode alive, a negative one for ending it early. The ``negative`` variant
(``sigmoid(-f) - 1``, the same shape shifted below zero) isolates that.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from lab.cache import cached_state
from lab.methods.lwail import model as M
from lab.methods.lwail.config import PENDULUM_VARIANTS, Config
from lab.methods.lwail.train import FORMAT, REWARD, Imitator, StateData, encoder, train_icvf

__all__ = ["ENV_ID", "GAINS", "expert_action", "make_env", "pendulum_agent", "pendulum_icvf", "random_return",
           "run_episode"]

ENV_ID = "InvertedPendulum-v5"
#: the PD expert's gains on (cart position, pole angle, cart velocity, pole angular velocity): it balances for the
#: whole 1000 steps from every start we tried
GAINS = np.array([1.0, 10.0, 1.0, 1.0])


def make_env():
    import gymnasium as gym

    return gym.make(ENV_ID)


def expert_action(obs: np.ndarray) -> np.ndarray:
    """The PD balance controller: force ``clip(K · obs, -3, 3)``."""
    return np.clip([float(GAINS @ obs)], -3.0, 3.0).astype(np.float32)


def run_episode(policy, seed: int, max_steps: int) -> tuple[np.ndarray, float]:
    """One episode of ``policy(obs) -> action``: its states ``(T + 1, 4)`` and its return (the task's reward)."""
    env = make_env()
    obs, _ = env.reset(seed=seed)
    states, ret = [obs], 0.0
    for _ in range(max_steps):
        obs, r, term, trunc, _ = env.step(policy(obs))
        states.append(obs)
        ret += float(r)
        if term or trunc:
            break
    env.close()
    return np.asarray(states, np.float32), ret


def random_return(cfg: Config, seed: int) -> float:
    """The return of the uniform random policy (mean of 5 episodes)."""
    rng = np.random.default_rng([seed, 21])
    return float(np.mean([run_episode(lambda o: rng.uniform(-3, 3, 1).astype(np.float32), seed * 10 + k,
                                      cfg.pendulum_eval_steps)[1] for k in range(5)]))


def _random_data(cfg: Config, seed: int) -> StateData:
    rng = np.random.default_rng([seed, 22])
    trajs, n, k = [], 0, 0
    while n < max(cfg.pendulum_start, 200):
        states, _ = run_episode(lambda o: rng.uniform(-3, 3, 1).astype(np.float32), seed * 1000 + k, 1000)
        trajs.append(states)
        n += len(states) - 1
        k += 1
    return StateData(trajs)


def pendulum_icvf(cfg: Config, seed: int) -> M.ICVF:
    """ICVF on the pendulum's random-policy transitions (cached)."""
    return train_icvf(cfg, _random_data(cfg, seed), cfg.pendulum_icvf_steps, seed, "icvf-pendulum")


def _evaluate(cfg: Config, actor, seed: int) -> float:
    def act(obs):
        with torch.no_grad():
            return actor(torch.from_numpy(np.asarray(obs, np.float32))[None])[0].numpy()
    return run_episode(act, 10_000 + seed, cfg.pendulum_eval_steps)[1]


def _td3(cfg: Config, variant: str, seed: int) -> dict:
    icvf = pendulum_icvf(cfg, seed)
    enc = encoder(variant, icvf, 4, cfg.hidden, cfg.d_latent, seed)
    expert_states, expert_return = run_episode(expert_action, seed, 1000)
    ex = torch.from_numpy(expert_states)
    agent_seed = seed * 100 + 50 + PENDULUM_VARIANTS.index(variant)
    data = _random_data(cfg, seed)
    critic = Imitator(cfg, enc, cfg.d_latent, (ex[:-1], ex[1:]), REWARD[variant], agent_seed, ref=data.states)
    if cfg.critic_pretrain:
        critic.update(data.transitions(), cfg.critic_pretrain)
    torch.manual_seed(agent_seed)
    actor, q = M.TD3Actor(4, 1, 3.0, cfg.hidden), M.TD3Critic(4, 1, cfg.hidden)
    actor_t, q_t = copy.deepcopy(actor), copy.deepcopy(q)
    opt_a = torch.optim.Adam(actor.parameters(), lr=cfg.td3_lr)
    opt_q = torch.optim.Adam(q.parameters(), lr=cfg.td3_lr)
    n = cfg.pendulum_steps
    S, S2, A = torch.zeros(n, 4), torch.zeros(n, 4), torch.zeros(n, 1)
    R, D = torch.zeros(n), torch.zeros(n)
    rng = np.random.default_rng([seed, 23, PENDULUM_VARIANTS.index(variant)])
    gen = torch.Generator().manual_seed(agent_seed)
    env = make_env()
    obs, _ = env.reset(seed=seed + 77)
    since, curve, steps_at = 0, [], []
    checks = set(np.linspace(n / cfg.eval_points, n, cfg.eval_points).round().astype(int).tolist())
    for t in range(n):
        if t < cfg.pendulum_start:
            a = rng.uniform(-3, 3, 1).astype(np.float32)
        else:
            with torch.no_grad():
                a = actor(torch.from_numpy(obs.astype(np.float32))[None])[0].numpy()
            a = np.clip(a + rng.normal(0, 0.3, 1), -3, 3).astype(np.float32)
        nxt, _, term, trunc, _ = env.step(a)
        s, s2 = torch.from_numpy(obs.astype(np.float32)), torch.from_numpy(nxt.astype(np.float32))
        S[t], S2[t], A[t], D[t] = s, s2, torch.from_numpy(a), float(term)
        R[t] = critic.rewards(s[None], s2[None])[0]
        obs = nxt
        if term or trunc:
            obs, _ = env.reset(seed=seed + 77 + t)
        since += 1
        size = t + 1
        if since >= cfg.pendulum_critic_every:
            since = 0
            critic.update((S[:size], S2[:size]), cfg.critic_steps)
            R[:size] = critic.rewards(S[:size], S2[:size])  # relabel the whole buffer
        if size >= cfg.batch_size and t >= min(cfg.pendulum_start, n // 2):
            j = torch.randint(size, (cfg.batch_size,), generator=gen)
            with torch.no_grad():
                noise = (torch.randn(len(j), 1, generator=gen) * 0.6).clamp(-1.5, 1.5)
                a2 = (actor_t(S2[j]) + noise).clamp(-3, 3)
                y = R[j] + 0.99 * (1 - D[j]) * torch.min(*q_t(S2[j], a2))
            q1, q2 = q(S[j], A[j])
            loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
            opt_q.zero_grad()
            loss.backward()
            opt_q.step()
            if t % 2 == 0:
                pi = -q(S[j], actor(S[j]))[0].mean()
                opt_a.zero_grad()
                pi.backward()
                opt_a.step()
                with torch.no_grad():
                    for net, tgt in ((actor, actor_t), (q, q_t)):
                        for p, pt in zip(net.parameters(), tgt.parameters()):
                            pt.lerp_(p, cfg.target_rate)
        if t + 1 in checks:
            curve.append(_evaluate(cfg, actor, seed))
            steps_at.append(t + 1)
    env.close()
    return {"actor": actor.state_dict(), "curve": np.array(curve, np.float64),
            "curve_steps": np.array(steps_at, np.int64), "return": float(curve[-1]),
            "expert_return": float(expert_return)}


def pendulum_agent(cfg: Config, variant: str, seed: int) -> dict:
    """A TD3 imitator of ``variant`` on the pendulum (cached on disk): ``actor``, ``curve``, ``curve_steps``,
    ``return`` (last evaluation) and ``expert_return``."""
    fields = ("hidden", "d_latent", "icvf_batch", "icvf_lr", "expectile", "gamma", "target_rate", "icvf_target_rate",
              "p_random", "p_trajectory", "gp", "critic_lr", "critic_pretrain", "critic_steps", "batch_size",
              "eval_points",
              "pendulum_steps", "pendulum_start", "pendulum_icvf_steps", "pendulum_critic_every",
              "pendulum_eval_steps", "td3_lr")
    key = {"format": FORMAT, "variant": variant, "seed": seed, **{k: getattr(cfg, k) for k in fields}}
    state, _ = cached_state("lwail", f"pendulum-{variant}", key, lambda: _td3(cfg, variant, seed))
    actor = M.TD3Actor(4, 1, 3.0, cfg.hidden)
    actor.load_state_dict(state["actor"])
    return {"actor": actor.eval(), "curve": np.asarray(state["curve"]),
            "curve_steps": np.asarray(state["curve_steps"]), "return": float(state["return"]),
            "expert_return": float(state["expert_return"])}
