"""What the ``agents`` dashboard (and the notebook) calls besides ``run``: one episode of a trained agent, the
learned φ-distance map and the critic's reward map over the maze.

Agents come from the disk cache that the profile's run fills (:func:`lab.methods.lwail.train.maze_agent`); a
variant or seed the run did not train is trained on first use (seconds to a minute at quick). Positions are in maze
units with x to the right and y up; ``extent = (left, bottom, right, top)``.
"""

from __future__ import annotations

import numpy as np
import torch

from lab.cache import memo
from lab.checks import bad_value, check_choice, check_int
from lab.methods.lwail.config import ENVS, PENDULUM_VARIANTS, TERMINATING, VARIANTS, Config
from lab.methods.lwail.maze import Maze
from lab.methods.lwail.train import maze_agent, maze_policy

__all__ = ["VARIANTS", "agent", "phi_distance_map", "reward_map", "rollout"]


def _plot_xy(maze: Maze, cells: np.ndarray) -> np.ndarray:
    """Fine cells ``(n, 2)`` -> plot positions ``(n, 2)``: x = column, y up."""
    h, _ = maze.shape
    cells = np.asarray(cells, float)
    return np.column_stack([cells[:, 1] + 0.5, h - cells[:, 0] - 0.5]) / maze.resolution


def _info(maze: Maze, goal: tuple[int, int]) -> dict:
    h, w = maze.shape
    return {"extent": (0.0, 0.0, w / maze.resolution, h / maze.resolution),
            "goal": tuple(float(v) for v in _plot_xy(maze, np.array([goal]))[0]),
            "geodesic": np.where(maze.free, maze.distances(goal), np.nan)}


@memo(maxsize=64)
def agent(profile: str, variant: str, seed: int = 0) -> dict:
    """The maze agent of ``variant`` on the run's seed ``seed`` (an offset from the profile's seed)."""
    check_choice("variant", variant, VARIANTS)
    check_int("seed", seed, 0, 10_000)
    cfg = Config.from_profile(profile)
    return maze_agent(cfg, variant, cfg.seed + seed)


def _pendulum_rollout(profile: str, variant: str, seed: int) -> dict:
    from lab.methods.lwail.pendulum import pendulum_agent, run_episode

    check_choice("variant", variant, PENDULUM_VARIANTS)
    cfg = Config.from_profile(profile)
    a = pendulum_agent(cfg, variant, cfg.seed + seed)

    def act(obs):
        with torch.no_grad():
            return a["actor"](torch.from_numpy(np.asarray(obs, np.float32))[None])[0].numpy()

    states, ret = run_episode(act, 20_000 + seed, cfg.pendulum_eval_steps)
    return {"variant": variant, "xy": states[:, :2], "rewards": np.ones(len(states) - 1), "return": float(ret),
            "success": bool(ret >= 0.9 * a["expert_return"]), "env": "pendulum"}


@memo(maxsize=64)
def rollout(profile: str, variant: str, seed: int = 0, env: str = "maze") -> dict:
    """One episode of a trained agent (greedy, slipping dynamics; the same episode for the same arguments).

    Arguments:
        profile: whose Config. variant: one of :data:`VARIANTS` (the pendulum: ``lwail`` or ``negative``).
        seed: the run's seed offset. env: ``maze`` or ``pendulum``.
    Returns:
        ``{"variant", "env", "xy": (T, 2) positions (the pendulum: cart position and pole angle), "rewards": (T-1,)
        the critic's reward of each step (the pendulum: the task's), "success": bool (goal reached; the pendulum:
        90% of the expert's return), "return": float (the sum of "rewards")}``.
    """
    check_choice("env", env, ENVS)
    if env == "pendulum":
        return _pendulum_rollout(profile, variant, seed)
    a = agent(profile, variant, seed)
    maze, cfg = a["maze"], Config.from_profile(profile)
    out = maze.rollout(maze_policy(maze, a["q"]), 1, cfg.horizon, cfg.slip, np.random.default_rng([seed, 99]),
                       crash=variant in TERMINATING)
    cells = (out[0] if variant in TERMINATING else out)[0]  # a crashed episode stays where it crashed
    obs = torch.from_numpy(maze.obs(cells))
    rewards = a["critic"].rewards(obs[:-1], obs[1:]).numpy()
    if variant in TERMINATING and out[1][0]:  # no reward after the crash (its step is the last that counts)
        rewards[int(np.argmax(maze.blocked(cells[:-1], maze_policy(maze, a["q"])(cells[:-1])))) + 1:] = 0.0
    return {"variant": variant, "env": "maze", "xy": _plot_xy(maze, cells), "rewards": rewards,
            "success": bool(maze.reached(cells).any()), "return": float(rewards.sum())}


def _goal_cell(maze: Maze, goal) -> tuple[int, int]:
    if goal is None:
        return maze.goal
    x, y = (float(v) for v in goal)
    h, w = maze.shape
    cell = (int(np.floor(h - y * maze.resolution)), int(np.floor(x * maze.resolution)))
    if not (0 <= cell[0] < h and 0 <= cell[1] < w) or not maze.free[cell]:
        raise bad_value("goal", goal, "a position (x, y) on a free cell of the maze")
    return cell


@memo(maxsize=32)
def phi_distance_map(profile: str, seed: int = 0, goal=None) -> dict:
    """``||φ(s) - φ(goal)||`` of the run's ICVF over the maze's free cells, beside the geodesic distance.

    Returns:
        ``{"grid": (H, W) φ-distance (NaN on walls), "geodesic": (H, W) moves (NaN on walls), "extent", "goal":
        (x, y), "seed"}``.
    """
    a = agent(profile, "lwail", seed)
    maze = a["maze"]
    target = _goal_cell(maze, goal)
    with torch.no_grad():
        z = a["icvf"].phi(torch.from_numpy(maze.obs(maze.cells))).numpy()
        zg = a["icvf"].phi(torch.from_numpy(maze.obs(np.array([target])))).numpy()
    grid = np.full(maze.shape, np.nan)
    grid[maze.free] = np.linalg.norm(z - zg, axis=-1)
    return {"grid": grid, **_info(maze, target), "seed": seed}


@memo(maxsize=64)
def reward_map(profile: str, variant: str, seed: int = 0) -> dict:
    """The critic's reward ``r(s, s')`` of the shortest-path step ``s -> s'`` toward the goal from every free cell.

    Returns:
        ``{"grid": (H, W) (NaN on walls and at the goal), "geodesic", "extent", "goal", "variant", "seed",
        "expert_xy": (T, 2) the expert's path}``.
    """
    a = agent(profile, variant, seed)
    maze = a["maze"]
    nxt = maze.moves(maze.cells, maze.expert_actions(maze.cells))
    r = a["critic"].rewards(torch.from_numpy(maze.obs(maze.cells)), torch.from_numpy(maze.obs(nxt))).numpy()
    grid = np.full(maze.shape, np.nan)
    grid[maze.free] = r
    grid[maze.goal] = np.nan
    return {"grid": grid, **_info(maze, maze.goal), "variant": variant, "seed": seed,
            "expert_xy": _plot_xy(maze, maze.expert_path())}
