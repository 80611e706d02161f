"""MiniGrid-Memory (``minigrid``'s ``MemoryEnv``): a scripted oracle for the offline data, trained agents, tests.

The agent starts in a hallway; an object (a key or a ball) lies in the room behind it; at the hallway's far end a
junction leads to a key (one side) and a ball (the other). Reaching the object that matches the room's ends the
episode with a reward; the other one ends it with none. The observation is minigrid's egocentric 7 x 7 x 3 view
(its object types one-hot): the room's object is only in view near the room, so the final choice needs memory.

The oracle reads the environment's internals (the agent's position, ``success_pos``): turn round, walk into the
room until the object is in view, turn back, walk to the junction, turn to the matching side, step onto the target.
Actions: 0 left, 1 right, 2 forward (minigrid's first three). The last two actions (the turn and the step) weigh
``turn_weight`` in the loss. Agents are the T-Maze's (:mod:`.model`) with this observation and
K = ``minigrid_segment_length``.
"""

from __future__ import annotations

import numpy as np
import torch

from lab.cache import Trained, cached_model, cached_state
from lab.checks import bad_value
from lab.core.train import seed_everything
from lab.methods.rate.config import Config
from lab.methods.rate.env import Trajectories

__all__ = ["N_ACTIONS", "OBS_DIM", "episode", "evaluate", "make_env", "oracle_actions", "oracle_data", "trained"]

LEFT, RIGHT, FORWARD = 0, 1, 2
N_ACTIONS = 3
N_TYPES = 11  # minigrid's object types
OBS_DIM = 7 * 7 * N_TYPES
SIZES = (7, 11, 13)


def make_env(size: int):
    """``MiniGrid-MemoryS{size}-v0``'s environment (size 7, 11 or 13)."""
    if size not in SIZES:
        raise bad_value("minigrid_size", size, "one of 7, 11, 13")
    from minigrid.envs.memory import MemoryEnv

    return MemoryEnv(size=size)


def _obs(obs: dict) -> np.ndarray:
    """The view's object types, one-hot per cell: ``(7 * 7 * 11,)`` (colours and states carry nothing here)."""
    return np.eye(N_TYPES, dtype=np.float32)[obs["image"][..., 0]].reshape(-1)


def oracle_actions(env) -> list[int]:
    """The oracle's actions for the episode ``env`` has just been reset to (reads its internals)."""
    x = int(env.agent_pos[0])
    room = min(x, 3)  # inside the room the object is in view
    acts = [LEFT, LEFT] + [FORWARD] * (x - room) + [LEFT, LEFT]
    acts += [FORWARD] * (int(env.success_pos[0]) - room)
    acts += [LEFT if env.success_pos[1] < env.height // 2 else RIGHT, FORWARD]
    return acts


def _clue(env) -> int:
    from minigrid.core.world_object import Key

    return 1 if isinstance(env.grid.get(1, env.height // 2 - 1), Key) else -1


def oracle_data(cfg: Config, seed: int) -> dict[int, Trajectories]:
    """``minigrid_episodes`` oracle episodes (environment seeds from ``seed``), grouped by length."""
    env = make_env(cfg.minigrid_size)
    groups: dict[int, list] = {}
    for i in range(cfg.minigrid_episodes):
        obs, _ = env.reset(seed=int(seed) * 100_003 + i)
        clue, acts, seen = _clue(env), oracle_actions(env), []
        for a in acts:
            seen.append(_obs(obs))
            obs, reward, terminated, truncated, _ = env.step(a)
        if reward <= 0:
            raise RuntimeError(f"the oracle failed on seed {int(seed) * 100_003 + i}")
        groups.setdefault(len(acts), []).append((np.stack(seen), np.array(acts), clue))
    out = {}
    for T, eps in groups.items():
        weights = np.ones((len(eps), T), np.float32)
        weights[:, -2:] = cfg.turn_weight
        out[T] = Trajectories(torch.ones(len(eps), T), torch.from_numpy(np.stack([e[0] for e in eps])),
                              torch.from_numpy(np.stack([e[1] for e in eps]).astype(np.int64)),
                              torch.from_numpy(weights), torch.tensor([e[2] for e in eps]))
    return out


def _key(cfg: Config, variant: str, seed: int) -> dict:
    form = ({"valve_form": cfg.valve_form, "detach": cfg.detach_memory or variant == "rate_detached"}
            if variant.startswith("rate") else {})
    return {"format": 2, **form, "variant": variant, "seed": seed, "size": cfg.minigrid_size,
            "K": cfg.minigrid_segment_length, "n_memory": cfg.n_memory, "d_model": cfg.d_model,
            "n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "steps": cfg.minigrid_steps,
            "batch_size": cfg.batch_size, "lr": cfg.lr, "weight_decay": cfg.weight_decay,
            "turn_weight": cfg.turn_weight, "episodes": cfg.minigrid_episodes}


def trained(cfg: Config, variant: str, seed: int) -> Trained:
    """Agent ``variant`` trained on MiniGrid-Memory's oracle data (cached); K is ``minigrid_segment_length``, the
    long DT's context covers the longest oracle episode."""
    from lab.methods.rate.train import build, fit_agent, train_sampler

    data = oracle_data(cfg, seed)
    longest = max(data)

    def make():
        seed_everything(seed)
        return build(cfg, variant, OBS_DIM, N_ACTIONS, context=longest, segment=cfg.minigrid_segment_length)

    def train(model):
        window = cfg.minigrid_segment_length if variant == "dt_short" else None
        return fit_agent(cfg, model, train_sampler(data, cfg.batch_size, seed, window), cfg.minigrid_steps, seed,
                         f"minigrid-{variant}")

    return cached_model("rate", f"minigrid-{variant}", _key(cfg, variant, seed), make, train)


@torch.no_grad()
def episode(model, size: int, env_seeds: list[int], max_steps: int) -> dict:
    """Closed-loop episodes (one per environment seed, batched through the agent): ``success (n,)``,
    ``positions`` (list of ``(T_i, 2)``), ``actions`` (list), ``clues (n,)``."""
    envs = [make_env(size) for _ in env_seeds]
    obs = [_obs(e.reset(seed=int(s))[0]) for e, s in zip(envs, env_seeds)]
    n = len(envs)
    done, success = np.zeros(n, bool), np.zeros(n, bool)
    positions = [[tuple(int(v) for v in e.agent_pos)] for e in envs]
    actions: list[list[int]] = [[] for _ in envs]
    clues = np.array([_clue(e) for e in envs])
    state = model.start(n)
    for _ in range(max_steps):
        logits = model.act(state, torch.ones(n), torch.from_numpy(np.stack(obs)))
        a = logits.argmax(-1)
        model.observe(state, a)
        for i, e in enumerate(envs):
            if done[i]:
                continue
            o, reward, terminated, truncated, _ = e.step(int(a[i]))
            obs[i] = _obs(o)
            actions[i].append(int(a[i]))
            positions[i].append(tuple(int(v) for v in e.agent_pos))
            success[i] = reward > 0
            done[i] = terminated or truncated
        if done.all():
            break
    return {"success": success, "positions": [np.array(p) for p in positions], "actions": actions, "clues": clues}


def evaluate(cfg: Config, variant: str, seed: int) -> float:
    """Success (%) of the trained agent on ``minigrid_eval`` new episodes (cached)."""
    key = {**_key(cfg, variant, seed), "eval": cfg.minigrid_eval}

    def make():
        agent = trained(cfg, variant, seed)
        seeds = [10_000_000 + int(seed) * 1_000 + i for i in range(cfg.minigrid_eval)]
        out = episode(agent.model, cfg.minigrid_size, seeds, max_steps=6 * cfg.minigrid_size)
        return {"success": np.array([100.0 * out["success"].mean()])}

    state, _ = cached_state("rate", f"minigrid-eval-{variant}", key, make)
    return float(np.asarray(state["success"])[0])


def weights_path(cfg: Config, variant: str, seed: int):
    """Where the MiniGrid-Memory agent ``variant`` of seed ``seed`` is cached (whether or not it exists)."""
    from lab.cache import state_path

    return state_path("rate", f"minigrid-{variant}", _key(cfg, variant, seed))
