"""LWAIL experiments: the ICVF metric against geodesic distance, every maze variant over seeds, and TD3 imitators on
MuJoCo's InvertedPendulum."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.lwail.config import PENDULUM_VARIANTS, VARIANTS, Config
from lab.methods.lwail.maze import make_maze
from lab.methods.lwail.train import encoder, expert_move_rate, expert_success, maze_agent, maze_icvf

__all__ = ["run"]

#: the distances compared with the geodesic one: ICVF's latent distance ||φ(s) - φ(g)||, ICVF's value -V(s, g, g)
#: (the steps-to-go it was trained to predict), the identity (Euclidean), a random frozen φ
METRICS = ("icvf", "icvf_value", "euclid", "random_phi")


def _spearman(cfg: Config, maze, seed: int) -> list[float]:
    """Spearman correlation of each metric's distance with the geodesic over all ordered pairs of distinct free
    cells (the latent distances are symmetric, so ordered pairs rank like unordered ones)."""
    geo = maze.geodesic_matrix()
    n = len(maze.cells)
    off = ~np.eye(n, dtype=bool)
    x = torch.from_numpy(maze.obs(maze.cells))
    icvf = maze_icvf(cfg, maze, seed)
    dist = {}
    with torch.no_grad():
        for metric, variant in (("icvf", "lwail"), ("euclid", "euclid"), ("random_phi", "no_icvf")):
            z = encoder(variant, icvf, 2, cfg.hidden, cfg.d_latent, seed)(x).numpy()
            dist[metric] = np.linalg.norm(z[:, None] - z[None], axis=-1)
        s, g = x.repeat_interleave(n, 0), x.repeat(n, 1)
        dist["icvf_value"] = -icvf(s, g, g).mean(0).numpy().reshape(n, n)
    return [float(spearmanr(dist[m][off], geo[off])[0]) for m in METRICS]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """ICVF and every variant of :data:`lab.methods.lwail.config.VARIANTS` in the maze on each seed, then the
    pendulum's TD3 imitators (each environment only when it is in ``cfg.envs``; the other's variables are NaN).

    Returns:
        Dataset with dims seed, variant, metric, checkpoint (the maze) and pendulum_seed, pendulum_variant,
        pendulum_checkpoint.
    """
    S, V, C = cfg.n_seeds, len(VARIANTS), cfg.eval_points
    PS, PV = cfg.pendulum_seeds, len(PENDULUM_VARIANTS)
    success, curve = np.full((S, V), np.nan), np.full((S, V, C), np.nan)
    prog, moves, crashed = np.full((S, V), np.nan), np.full((S, V), np.nan), np.full((S, V), np.nan)
    steps, expert, rho = np.zeros(C, np.int64), np.full(S, np.nan), np.full((S, len(METRICS)), np.nan)
    p_ret, p_curve = np.full((PS, PV), np.nan), np.full((PS, PV, C), np.nan)
    p_steps, p_expert, p_random = np.zeros(C, np.int64), np.full(PS, np.nan), np.full(PS, np.nan)
    seconds = {"maze_cpu_s": 0.0, "pendulum_cpu_s": 0.0}
    total = (S * V if "maze" in cfg.envs else 0) + (PS * PV if "pendulum" in cfg.envs else 0)
    bar = tqdm(total=total, desc="LWAIL agents", disable=not progress)
    with threads(cfg.threads):
        if "maze" in cfg.envs:
            t0 = time.process_time()
            maze = make_maze(cfg.resolution)
            for s, seed in enumerate(cfg.seeds):
                expert[s] = expert_success(cfg, maze, seed)
                rho[s] = _spearman(cfg, maze, seed)
                for v, variant in enumerate(VARIANTS):
                    agent = maze_agent(cfg, variant, seed)
                    success[s, v], curve[s, v] = agent["success"], agent["curve"]
                    prog[s, v], crashed[s, v] = agent["progress"], agent["crashed"]
                    moves[s, v] = expert_move_rate(maze, agent["q"])
                    steps = agent["curve_steps"]
                    bar.update(1)
            seconds["maze_cpu_s"] = time.process_time() - t0
        if "pendulum" in cfg.envs:
            from lab.methods.lwail.pendulum import pendulum_agent, random_return

            t0 = time.process_time()
            for s in range(PS):
                seed = cfg.seed + s
                p_random[s] = random_return(cfg, seed)
                for v, variant in enumerate(PENDULUM_VARIANTS):
                    agent = pendulum_agent(cfg, variant, seed)
                    p_ret[s, v], p_curve[s, v] = agent["return"], agent["curve"]
                    p_expert[s], p_steps = agent["expert_return"], agent["curve_steps"]
                    bar.update(1)
            seconds["pendulum_cpu_s"] = time.process_time() - t0
    bar.close()
    maze_info = make_maze(cfg.resolution)
    return xr.Dataset(
        {
            "success": (("seed", "variant"), success,
                        {"long_name": "goal-reach rate of the greedy agent at the end of training (slipping "
                                      "dynamics, n_eval episodes)", "units": "1"}),
            "progress": (("seed", "variant"), prog,
                         {"long_name": "1 - the closest geodesic distance to the goal in an episode / the start's, "
                                       "greedy agent at the end of training, mean of n_eval episodes", "units": "1"}),
            "expert_move_rate": (("seed", "variant"), moves,
                                 {"long_name": "share of the expert's path states at which the greedy agent moves to "
                                               "the expert's next state (its one demonstration replayed from the "
                                               "demonstration's own states; a random policy: 1/8)", "units": "1"}),
            "crashed": (("seed", "variant"), crashed,
                        {"long_name": "share of evaluation episodes that end with a chosen move into a wall (the "
                                      "terminating variants; NaN where episodes do not end)", "units": "1"}),
            "success_curve": (("seed", "variant", "checkpoint"), curve,
                              {"long_name": "goal-reach rate along training", "units": "1"}),
            "expert_success": (("seed",), expert,
                               {"long_name": "the shortest-path expert's goal-reach rate, same evaluation",
                                "units": "1"}),
            "spearman": (("seed", "metric"), rho,
                         {"long_name": "Spearman correlation of the metric's distance with the geodesic distance "
                                       "over all pairs of free maze cells", "units": "1"}),
            "pendulum_return": (("pendulum_seed", "pendulum_variant"), p_ret,
                                {"long_name": "InvertedPendulum-v5 return of the TD3 imitator (task reward, one "
                                              "evaluation episode)", "units": "return"}),
            "pendulum_curve": (("pendulum_seed", "pendulum_variant", "checkpoint"), p_curve,
                               {"long_name": "pendulum return along training", "units": "return"}),
            "pendulum_expert_return": (("pendulum_seed",), p_expert,
                                       {"long_name": "the PD expert's return on its state-only episode",
                                        "units": "return"}),
            "pendulum_random_return": (("pendulum_seed",), p_random,
                                       {"long_name": "the uniform random policy's return (mean of 5 episodes)",
                                        "units": "return"}),
        },
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "variant": ("variant", list(VARIANTS), {"long_name": "imitation variant"}),
            "metric": ("metric", list(METRICS)),
            "checkpoint": ("checkpoint", np.arange(C)),
            "env_steps": ("checkpoint", steps, {"long_name": "maze env steps at the evaluation", "units": "steps"}),
            "pendulum_steps": ("checkpoint", p_steps, {"long_name": "pendulum env steps at the evaluation",
                                                       "units": "steps"}),
            "pendulum_seed": ("pendulum_seed", [cfg.seed + s for s in range(PS)]),
            "pendulum_variant": ("pendulum_variant", list(PENDULUM_VARIANTS)),
        },
        attrs={"envs": ",".join(cfg.envs), "maze_free_cells": int(len(maze_info.cells)),
               "expert_length": int(len(maze_info.expert_path()) - 1), **seconds},
    )
