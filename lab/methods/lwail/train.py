"""LWAIL's training: ICVF pretraining (cached), the critic (pretrained expert vs random, then online, the whole
replay buffer relabelled after each update), and DQN in the U-maze (cached per variant and seed).

The pendulum's TD3 learner lives in :mod:`lab.methods.lwail.pendulum`; both use the pieces here
(:func:`train_icvf`, :class:`Imitator`).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lab.cache import cached_model, cached_state
from lab.checks import check_choice
from lab.core.runtime import resolve_device
from lab.core.train import fit, seed_everything
from lab.methods.lwail import model as M
from lab.methods.lwail.config import TERMINATING, VARIANTS, Config
from lab.methods.lwail.maze import Maze, make_maze

__all__ = ["FORMAT", "REWARD", "Imitator", "StateData", "demonstration", "encoder", "expert_move_rate",
           "expert_success", "maze_agent", "maze_data", "maze_icvf", "maze_policy", "train_all", "train_icvf"]

#: bump when training changes (invalidates cached models)
FORMAT = 4
#: the reward of each variant's critic output
REWARD = {"lwail": "sigmoid", "lwail_b": "sigmoid", "euclid": "sigmoid", "no_icvf": "sigmoid", "gaifo": "gaifo",
          "negative": "negative", "raw": "raw", "lwail_end": "sigmoid", "lwail_b_end": "sigmoid",
          "negative_end": "negative", "oracle": "sigmoid"}
#: DQN's soft target rate (faster than ICVF's: DQN takes a few thousand updates here)
DQN_TAU = 0.02


class StateData:
    """State-only trajectories for ICVF: ``states (M, d)`` with trajectories stored one after another;
    ``idx (N,)`` the transitions' first states (``idx + 1`` their next states) and ``last (N,)`` the last state of
    each transition's trajectory."""

    def __init__(self, trajectories: list[np.ndarray]):
        states, idx, last, start = [], [], [], 0
        for traj in trajectories:
            n = len(traj)
            states.append(np.asarray(traj, np.float32))
            idx.append(np.arange(start, start + n - 1))
            last.append(np.full(n - 1, start + n - 1))
            start += n
        self.states = torch.from_numpy(np.concatenate(states))
        self.idx = torch.from_numpy(np.concatenate(idx))
        self.last = torch.from_numpy(np.concatenate(last))

    def transitions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every transition: ``(s (N, d), s' (N, d))``."""
        return self.states[self.idx], self.states[self.idx + 1]

    def sampler(self, batch: int, p_random: float, p_trajectory: float, seed: int):
        """``sample(step) -> (s, s', g, z)``: goals and intents drawn at random from the data (p_random), later in
        the same trajectory (p_trajectory) or the current state (the rest), independently."""
        gen = torch.Generator().manual_seed(seed)
        n, m = len(self.idx), len(self.states)

        def goals(i: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
            u = torch.rand(len(i), generator=gen)
            rand = torch.randint(m, (len(i),), generator=gen)
            span = (last - i).clamp(min=1)
            later = i + 1 + (torch.rand(len(i), generator=gen) * span).long().clamp(max=span - 1)
            pick = torch.where(u < p_random, rand, torch.where(u < p_random + p_trajectory, later, i))
            return self.states[pick]

        def sample(step: int):
            j = torch.randint(n, (batch,), generator=gen)
            i, last = self.idx[j], self.last[j]
            return self.states[i], self.states[i + 1], goals(i, last), goals(i, last)

        return sample


def train_icvf(cfg: Config, data: StateData, steps: int, seed: int, name: str, n_freq: int = 0) -> M.ICVF:
    """ICVF on ``data`` (cached by the settings, the data's checksum and the seed), its networks reading
    ``n_freq`` octaves of Fourier features of the state; returns the model (φ = .phi)."""
    key = {"format": FORMAT, "hidden": cfg.hidden, "d_latent": cfg.d_latent, "steps": steps, "n_freq": n_freq,
           "batch": cfg.icvf_batch, "lr": cfg.icvf_lr, "tau": cfg.expectile, "gamma": cfg.gamma,
           "target": cfg.icvf_target_rate, "p": [cfg.p_random, cfg.p_trajectory], "seed": seed,
           "data": float(data.states.double().sum()), "n": int(len(data.states))}
    d = data.states.shape[1]

    def build():
        seed_everything(seed)
        return M.ICVF(d, cfg.hidden, cfg.d_latent, n_freq=n_freq)

    def train(model: M.ICVF) -> dict:
        target = copy.deepcopy(model).requires_grad_(False)

        def loss(m, batch):
            target.to(batch[0].device)
            return M.icvf_loss(m, target, batch, cfg.gamma, cfg.expectile)

        def soft(step, m, opt):
            with torch.no_grad():
                for p, q in zip(m.parameters(), target.parameters()):
                    q.lerp_(p, cfg.icvf_target_rate)

        res = fit(model, data.sampler(cfg.icvf_batch, cfg.p_random, cfg.p_trajectory, seed), steps=steps,
                  loss=loss, lr=cfg.icvf_lr, warmup=0.02, seed=seed, progress=False, desc="icvf", on_step=soft,
                  device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"seconds": res.wall_time_s, "cpu_s": res.cpu_time_s}}

    return cached_model("lwail", name, key, build, train).model.requires_grad_(False)


def encoder(variant: str, icvf: M.ICVF, d_state: int, hidden: int, d_latent: int, seed: int,
            maze: Maze | None = None) -> nn.Module:
    """The frozen state encoder of a variant: ICVF's φ, the identity (Euclidean WAIL, GAIfO), a random φ or (the
    ``oracle``, which needs ``maze``) the multidimensional scaling of the maze's geodesic distances."""
    if variant in ("euclid", "gaifo"):
        return nn.Identity()
    if variant == "oracle":
        if maze is None:
            raise ValueError("encoder('oracle') needs the maze")
        return M.GeodesicEmbedding(torch.from_numpy(maze.obs(maze.cells)),
                                   torch.from_numpy(maze.geodesic_matrix()), d_latent)
    if variant == "no_icvf":  # φ's architecture, its input features included, with nothing learned
        torch.manual_seed(seed + 999)
        return M.encoder_net(d_state, hidden, d_latent, icvf.n_freq).requires_grad_(False)
    return icvf.phi


class Imitator:
    """The adversarial part shared by every learner: a critic (or GAIfO's discriminator) on
    ``[enc(s), enc(s')]``, its pretraining, its online updates and the reward.

    Arguments:
        enc: the frozen encoder. d_enc: its output size. expert: the expert's ``(s, s')`` ``(T, d)`` each.
        reward: one of :data:`lab.methods.lwail.model.REWARDS`. ref: states ``(n, d)`` (the random data) that fix
        the encoder's scale: the critic reads ``(enc(s) - m) / r`` with ``m`` the mean of ``enc(ref)`` and ``r``
        its root-mean-square distance to ``m``, so that the gradient penalty's unit (1 per latent unit) means the
        same for every encoder (ICVF's latent spans tens of units, the identity's about one); None: no scaling.
    """

    def __init__(self, cfg: Config, enc: nn.Module, d_enc: int, expert: tuple[torch.Tensor, torch.Tensor],
                 reward: str, seed: int, ref: torch.Tensor | None = None):
        torch.manual_seed(seed)
        self.cfg, self.enc, self.reward = cfg, enc, reward
        self.mu, self.scale = torch.zeros(()), torch.ones(())
        if ref is not None:
            with torch.no_grad():
                z = enc(ref)
                self.mu = z.mean(0)
                self.scale = ((z - self.mu) ** 2).sum(-1).mean().sqrt().clamp(min=1e-6)
        self.f = M.mlp(2 * d_enc, cfg.hidden, 1)
        self.opt = torch.optim.Adam(self.f.parameters(), lr=cfg.critic_lr)
        self.gen = torch.Generator().manual_seed(seed + 5)
        with torch.no_grad():
            self.x_expert = self.features(*expert)

    @torch.no_grad()
    def features(self, s: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
        return torch.cat([(self.enc(s) - self.mu) / self.scale, (self.enc(s2) - self.mu) / self.scale], -1)

    def update(self, agent: tuple[torch.Tensor, torch.Tensor], steps: int) -> float:
        """``steps`` critic steps, the expert's transitions against ``agent``'s (``(s, s')``, sampled)."""
        x_agent = self.features(*agent)
        b = self.cfg.batch_size
        loss = torch.zeros(())
        for _ in range(steps):
            xe = self.x_expert[torch.randint(len(self.x_expert), (b,), generator=self.gen)]
            xa = x_agent[torch.randint(len(x_agent), (b,), generator=self.gen)]
            if self.reward == "gaifo":
                loss = M.gaifo_loss(lambda x: self.f(x).squeeze(-1), xe, xa)
            else:
                loss = M.critic_loss(lambda x: self.f(x).squeeze(-1), xe, xa, self.cfg.gp, self.gen)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return float(loss.detach())

    @torch.no_grad()
    def rewards(self, s: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
        """The reward of transitions ``(s, s')`` ``(n, d)`` each: ``(n,)``."""
        return M.reward_from(self.f(self.features(s, s2)).squeeze(-1), self.reward)


def maze_data(cfg: Config, maze: Maze, seed: int) -> dict:
    """The maze's random-policy trajectories (cells, ``(n_traj, horizon + 1, 2)``) of ``seed``."""
    return maze.random_walks(cfg.random_traj, cfg.random_length, cfg.slip, np.random.default_rng([seed, 1]))


def maze_icvf(cfg: Config, maze: Maze, seed: int) -> M.ICVF:
    """ICVF trained on the maze's random trajectories of ``seed`` (cached)."""
    cells = maze_data(cfg, maze, seed)["cells"]
    return train_icvf(cfg, StateData(list(maze.obs(cells))), cfg.icvf_steps, seed, f"icvf-maze-r{cfg.resolution}",
                      cfg.icvf_fourier)


def expert_success(cfg: Config, maze: Maze, seed: int) -> float:
    """The shortest-path expert's goal-reach rate under the same slipping dynamics and evaluation."""
    cells = maze.rollout(maze.expert_actions, cfg.n_eval, cfg.horizon, cfg.slip, np.random.default_rng([seed, 3]))
    return float(maze.reached(cells.reshape(-1, 2)).reshape(cfg.n_eval, -1).any(1).mean())


def demonstration(cfg: Config, maze: Maze) -> np.ndarray:
    """The one state-only expert episode the imitators see, as network inputs ``(T + 1, 2)``: the shortest path,
    then (``cfg.expert_dwell``) dwelling at the goal until the episode has ``cfg.horizon`` moves."""
    return maze.obs(maze.expert_episode(cfg.horizon if cfg.expert_dwell else 0))


def maze_policy(maze: Maze, q: nn.Module):
    """The greedy policy of a Q network: ``cells (n, 2) -> actions (n,)``."""
    def act(cells: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return q(torch.from_numpy(maze.onehot(cells))).argmax(-1).numpy()
    return act


def _evaluate(cfg: Config, maze: Maze, q: nn.Module, seed: int, crash: bool = False) -> tuple[float, float, float]:
    """The greedy policy's goal-reach rate, progress (1 - (closest geodesic distance to the goal in the episode) /
    (the start's)) and the share of episodes that end in a crash (NaN without ``crash``), means over n_eval
    episodes."""
    rng = np.random.default_rng([seed, 4])
    out = maze.rollout(maze_policy(maze, q), cfg.n_eval, cfg.horizon, cfg.slip, rng, crash=crash)
    cells, crashed = out if crash else (out, np.full(cfg.n_eval, np.nan))
    reached = maze.reached(cells.reshape(-1, 2)).reshape(cfg.n_eval, -1).any(1)
    dist = maze.distances(maze.goal)
    closest = dist[cells[..., 0], cells[..., 1]].min(1)
    return float(reached.mean()), float(np.mean(1.0 - closest / dist[maze.start])), float(np.mean(crashed))


def expert_move_rate(maze: Maze, q: nn.Module) -> float:
    """The share of the expert's path states (the goal excepted) at which the greedy action of ``q`` moves to the
    expert's next state: the imitator replaying its one demonstration from the demonstration's own states (a
    uniform random policy: 1/8, one move of the 8 leads there)."""
    path = maze.expert_path()
    nxt = maze.moves(path[:-1], maze_policy(maze, q)(path[:-1]))
    return float(np.mean(np.all(nxt == path[1:], axis=1)))


def _dqn_update(cfg: Config, q: nn.Module, q_t: nn.Module, opt, buffer: tuple, j: torch.Tensor, size: int) -> None:
    """One double-DQN step with ``cfg.n_step`` returns on the buffer rows ``j``; ``buffer = (S, A, R, S2)`` or
    ``(S, A, R, S2, D)``, ``S``, ``S2`` the policy's one-hot inputs and ``D (rows,)`` bool the terminal rows (a
    crash in the :data:`TERMINATING` variants: the sum stops there and nothing is bootstrapped). The time limit is a
    truncation: the target bootstraps at the episode's end.

    The buffer holds the ``n_envs`` environments' transitions vector step by vector step (row ``v * n_envs + e``),
    and every environment resets together every ``horizon`` steps, so row ``j``'s k-th successor in its episode is
    ``j + k * n_envs`` while ``(j // n_envs) % horizon + k < horizon`` and the row exists."""
    S, A, R, S2 = buffer[:4]
    D = buffer[4] if len(buffer) > 4 else torch.zeros(len(R), dtype=torch.bool)
    with torch.no_grad():
        t = (j // cfg.n_envs) % cfg.horizon
        ret, disc, last = torch.zeros(len(j)), torch.ones(len(j)), j.clone()
        alive = torch.ones(len(j), dtype=torch.bool)
        for k in range(cfg.n_step):
            row = j + k * cfg.n_envs
            ok = alive & (t + k < cfg.horizon) & (row < size)
            ret += torch.where(ok, disc * R[row.clamp(max=size - 1)], torch.zeros(()))
            disc = torch.where(ok, disc * cfg.dqn_gamma, disc)
            last = torch.where(ok, row, last)
            alive = alive & ~(ok & D[row.clamp(max=size - 1)])
        a2 = q(S2[last]).argmax(-1, keepdim=True)
        y = ret + disc * (~D[last]).float() * q_t(S2[last]).gather(1, a2).squeeze(1)
    loss = F.smooth_l1_loss(q(S[j]).gather(1, A[j, None]).squeeze(1), y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(q.parameters(), 10.0)
    opt.step()
    with torch.no_grad():
        for p, pt in zip(q.parameters(), q_t.parameters()):
            pt.lerp_(p, DQN_TAU)


def _imitate_maze(cfg: Config, maze: Maze, variant: str, seed: int) -> dict:
    """One agent: critic pretraining, then DQN with the critic's reward, relabelling the whole buffer after each
    critic update. In the :data:`TERMINATING` variants a chosen move into a wall ends the environment's episode
    (a terminal transition; the environment restarts and runs to the common time limit). Returns the Q network's and
    critic's weights, the success curve and facts."""
    dev = resolve_device(cfg.device)
    if dev.type != "cpu":  # a few thousand tiny steps: the CPU is faster than a transfer per step
        dev = torch.device("cpu")
    icvf = maze_icvf(cfg, maze, seed)
    enc = encoder(variant, icvf, 2, cfg.hidden, cfg.d_latent, seed, maze)
    d_enc = 2 if variant in ("euclid", "gaifo") else cfg.d_latent
    path = demonstration(cfg, maze)
    expert = (torch.from_numpy(path[:-1]), torch.from_numpy(path[1:]))
    agent_seed = seed * 100 + VARIANTS.index(variant) + 1
    rand = torch.from_numpy(maze.obs(maze_data(cfg, maze, seed)["cells"]))
    critic = Imitator(cfg, enc, d_enc, expert, REWARD[variant], agent_seed, ref=rand.reshape(-1, 2))
    if cfg.critic_pretrain:
        critic.update((rand[:, :-1].reshape(-1, 2), rand[:, 1:].reshape(-1, 2)), cfg.critic_pretrain)
    rng = np.random.default_rng([seed, 10 + VARIANTS.index(variant)])
    torch.manual_seed(agent_seed)
    q = M.QNet(len(maze.cells), 8, cfg.hidden)
    q_t = copy.deepcopy(q).requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=cfg.dqn_lr)
    n_vec = max(1, cfg.env_steps // cfg.n_envs)
    cap = n_vec * cfg.n_envs
    S = torch.zeros(cap, 2)
    S2 = torch.zeros(cap, 2)
    A = torch.zeros(cap, dtype=torch.long)
    I, I2 = torch.zeros(cap, len(maze.cells)), torch.zeros(cap, len(maze.cells))
    R = torch.zeros(cap)
    D = torch.zeros(cap, dtype=torch.bool)
    crash = variant in TERMINATING
    size, t, since = 0, 0, 0
    def starts() -> np.ndarray:
        if cfg.random_starts:
            return maze.cells[rng.integers(0, len(maze.cells), cfg.n_envs)]
        return np.repeat(np.array([maze.start]), cfg.n_envs, 0)

    cells = starts()
    checks = set(np.linspace(n_vec / cfg.eval_points, n_vec, cfg.eval_points).round().astype(int).tolist())
    curve, steps_at = [], []
    gen = torch.Generator().manual_seed(agent_seed)
    for v in range(1, n_vec + 1):
        eps = max(0.05, 1.0 - v / (0.5 * n_vec))
        obs = torch.from_numpy(maze.obs(cells))
        with torch.no_grad():
            greedy = q(torch.from_numpy(maze.onehot(cells))).argmax(-1).numpy()
        act = np.where(rng.random(cfg.n_envs) < eps, rng.integers(0, 8, cfg.n_envs), greedy)
        ended = maze.blocked(cells, act) if crash else np.zeros(cfg.n_envs, bool)
        nxt = maze.step(cells, act, cfg.slip, rng)
        obs2 = torch.from_numpy(maze.obs(nxt))
        sl = slice(size, size + cfg.n_envs)
        S[sl], S2[sl], A[sl], R[sl] = obs, obs2, torch.from_numpy(act), critic.rewards(obs, obs2)
        I[sl], I2[sl], D[sl] = torch.from_numpy(maze.onehot(cells)), torch.from_numpy(maze.onehot(nxt)), \
            torch.from_numpy(ended)
        size += cfg.n_envs
        since += cfg.n_envs
        if ended.any():  # a crash: a terminal transition, that environment starts again
            nxt = np.where(ended[:, None], starts(), nxt)
        cells, t = nxt, t + 1
        if t == cfg.horizon:  # time limit: a truncation, the value is still bootstrapped
            cells, t = starts(), 0
        if since >= cfg.critic_every:
            since = 0
            lo = max(0, size - cfg.critic_window) if cfg.critic_window else 0
            critic.update((S[lo:size], S2[lo:size]), cfg.critic_steps)
            R[:size] = critic.rewards(S[:size], S2[:size])  # relabel the whole buffer
        for _ in range(cfg.updates_per_step):
            _dqn_update(cfg, q, q_t, opt, (I, A, R, I2, D),
                        torch.randint(size, (cfg.batch_size,), generator=gen), size)
        if v in checks:
            success, progress, crashed = _evaluate(cfg, maze, q, seed, crash)
            curve.append(success)
            steps_at.append(v * cfg.n_envs)
    return {"q": q.state_dict(), "critic": critic.f.state_dict(), "curve": np.array(curve, np.float64),
            "curve_steps": np.array(steps_at, np.int64), "success": float(curve[-1]),
            "progress": progress, "crashed": crashed}


_AGENT_FIELDS = ("resolution", "slip", "random_starts", "horizon", "hidden", "d_latent", "random_traj",
                 "random_length", "expert_dwell", "icvf_steps", "icvf_fourier", "icvf_batch", "icvf_lr", "expectile",
                 "gamma", "icvf_target_rate", "p_random", "p_trajectory", "gp", "critic_lr", "critic_pretrain",
                 "critic_every", "critic_window", "critic_steps", "batch_size", "env_steps", "n_envs", "dqn_lr",
                 "updates_per_step", "dqn_gamma", "n_step", "n_eval", "eval_points")


def _agent_key(cfg: Config, variant: str, seed: int) -> dict:
    return {"format": FORMAT, "variant": variant, "seed": seed, **{k: getattr(cfg, k) for k in _AGENT_FIELDS}}


def _icvf_job(cfg: Config, seed: int) -> None:
    maze_icvf(cfg, make_maze(cfg.resolution), seed)


def _agent_job(cfg: Config, variant: str, seed: int) -> None:
    maze_agent(cfg, variant, seed)


def train_all(cfg: Config, stage: str, progress: bool = True) -> float:
    """Train the maze's ICVF of every seed (``stage="icvf"``) or every (variant, seed) agent not cached yet
    (``"agents"``), side by side in worker processes (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the
    cores); :func:`maze_icvf` and :func:`maze_agent` then load each from the cache. Each training seeds itself, so its
    weights are those of a training here, bit for bit. Returns the CPU seconds of the jobs that ran."""
    from lab.cache import state_path
    from lab.core.parallel import Job, run_jobs

    check_choice("stage", stage, ("icvf", "agents"))
    if stage == "icvf":
        done = run_jobs([Job(f"icvf seed {seed}", _icvf_job, (cfg, seed)) for seed in cfg.seeds],
                        threads_per_worker=cfg.threads, progress=progress, desc="LWAIL ICVF")
        return float(sum(r.cpu_s for r in done))
    jobs = [Job(f"{variant} seed {seed}", _agent_job, (cfg, variant, seed),
                cached=state_path("lwail", f"maze-{variant}", _agent_key(cfg, variant, seed)).exists())
            for seed in cfg.seeds for variant in VARIANTS]
    done = run_jobs(jobs, threads_per_worker=cfg.threads, progress=progress, desc="LWAIL agents")
    return float(sum(r.cpu_s for r in done))


def maze_agent(cfg: Config, variant: str, seed: int) -> dict:
    """A trained maze agent of ``variant`` and ``seed`` (cached on disk): ``q`` (QNet), ``critic`` (the reward
    function as an :class:`Imitator`), ``maze``, ``curve``/``curve_steps`` (success along training), ``success``,
    ``progress`` (the final policy's mean 1 - closest geodesic distance to the goal / the start's), ``crashed``
    (the share of evaluation episodes that end in a wall; NaN where episodes do not end)."""
    maze = make_maze(cfg.resolution)
    state, _ = cached_state("lwail", f"maze-{variant}", _agent_key(cfg, variant, seed),
                            lambda: _imitate_maze(cfg, maze, variant, seed))
    q = M.QNet(len(maze.cells), 8, cfg.hidden)
    q.load_state_dict(state["q"])
    icvf = maze_icvf(cfg, maze, seed)
    enc = encoder(variant, icvf, 2, cfg.hidden, cfg.d_latent, seed, maze)
    d_enc = 2 if variant in ("euclid", "gaifo") else cfg.d_latent
    path = demonstration(cfg, maze)
    rand = torch.from_numpy(maze.obs(maze_data(cfg, maze, seed)["cells"])).reshape(-1, 2)
    critic = Imitator(cfg, enc, d_enc, (torch.from_numpy(path[:-1]), torch.from_numpy(path[1:])), REWARD[variant],
                      0, ref=rand)
    critic.f.load_state_dict(state["critic"])
    return {"q": q.eval(), "critic": critic, "maze": maze, "icvf": icvf,
            "curve": np.asarray(state["curve"]), "curve_steps": np.asarray(state["curve_steps"]),
            "success": float(state["success"]), "progress": float(state["progress"]),
            "crashed": float(state.get("crashed", np.nan))}
