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
from lab.methods.lwail.train import (
    demonstration,
    encoder,
    expert_move_rate,
    expert_success,
    maze_agent,
    maze_icvf,
    train_all,
)
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: the distances compared with the geodesic one: ICVF's latent distance ||φ(s) - φ(g)||, ICVF's value -V(s, g, g)
#: (the steps-to-go it was trained to predict), the identity (Euclidean), a random frozen φ, the oracle (the
#: multidimensional scaling of the geodesic distances: the positive control's metric)
METRICS = ("icvf", "icvf_value", "euclid", "random_phi", "oracle")

_NO_MAZE = "NaN when the maze is not in cfg.envs"
_NO_PENDULUM = "NaN when the pendulum is not in cfg.envs"

#: the results; env_steps and pendulum_steps become coordinates on ``checkpoint`` (0 when their env does not run)
SCHEMA = Schema(
    Var("success", ("seed", "variant"), "goal-reach rate of the greedy agent at the end of training (slipping "
        "dynamics, n_eval episodes)", missing=_NO_MAZE),
    Var("progress", ("seed", "variant"), "1 - the closest geodesic distance to the goal in an episode / the "
        "start's, greedy agent at the end of training, mean of n_eval episodes", missing=_NO_MAZE),
    Var("expert_move_rate", ("seed", "variant"), "share of the expert's path states at which the greedy agent "
        "moves to the expert's next state (its one demonstration replayed from the demonstration's own states; a "
        "random policy: 1/8)", missing=_NO_MAZE),
    Var("crashed", ("seed", "variant"), "share of evaluation episodes that end with a chosen move into a wall (the "
        "terminating variants; NaN where episodes do not end)", missing=_NO_MAZE),
    Var("success_curve", ("seed", "variant", "checkpoint"), "goal-reach rate along training", missing=_NO_MAZE),
    Var("expert_success", ("seed",), "the shortest-path expert's goal-reach rate, same evaluation",
        missing=_NO_MAZE),
    Var("spearman", ("seed", "metric"), "Spearman correlation of the metric's distance with the geodesic distance "
        "over all pairs of free maze cells", missing=_NO_MAZE),
    Var("pendulum_return", ("pendulum_seed", "pendulum_variant"), "InvertedPendulum-v5 return of the TD3 imitator "
        "(task reward, one evaluation episode)", "return", missing=_NO_PENDULUM),
    Var("pendulum_curve", ("pendulum_seed", "pendulum_variant", "checkpoint"), "pendulum return along training",
        "return", missing=_NO_PENDULUM),
    Var("pendulum_expert_return", ("pendulum_seed",), "the PD expert's return on its state-only episode", "return",
        missing=_NO_PENDULUM),
    Var("pendulum_random_return", ("pendulum_seed",), "the uniform random policy's return (mean of 5 episodes)",
        "return", missing=_NO_PENDULUM),
    Var("env_steps", ("checkpoint",), "maze env steps at the evaluation", "steps", dtype=int,
        missing="0 when the maze is not in cfg.envs", fill=0),
    Var("pendulum_steps", ("checkpoint",), "pendulum env steps at the evaluation", "steps", dtype=int,
        missing="0 when the pendulum is not in cfg.envs", fill=0),
    coords={"variant": Coord("imitation variant")},
)


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
        for metric, variant in (("icvf", "lwail"), ("euclid", "euclid"), ("random_phi", "no_icvf"),
                                ("oracle", "oracle")):
            z = encoder(variant, icvf, 2, cfg.hidden, cfg.d_latent, seed, maze)(x).numpy()
            dist[metric] = np.linalg.norm(z[:, None] - z[None], axis=-1)
        s, g = x.repeat_interleave(n, 0), x.repeat(n, 1)
        dist["icvf_value"] = -icvf(s, g, g).mean(0).numpy().reshape(n, n)
    return [float(spearmanr(dist[m][off], geo[off])[0]) for m in METRICS]


def _maze(cfg: Config, res: Results, bar) -> float:
    """The expert and the metrics' Spearman correlations on each seed (ICVF trained first), then every maze variant
    on each seed (the agents trained side by side in worker processes, then read from the cache). Returns the
    worker processes' CPU seconds."""
    maze = make_maze(cfg.resolution)
    worker_cpu = train_all(cfg, "icvf", progress=not bar.disable)  # worker processes
    for s, seed in enumerate(cfg.seeds):  # the metric's competence, measured before any imitation
        res["expert_success"][s] = expert_success(cfg, maze, seed)
        res["spearman"][s] = _spearman(cfg, maze, seed)
    worker_cpu += train_all(cfg, "agents", progress=not bar.disable)
    for s, seed in enumerate(cfg.seeds):
        for v, variant in enumerate(VARIANTS):
            agent = maze_agent(cfg, variant, seed)
            res["success"][s, v], res["success_curve"][s, v] = agent["success"], agent["curve"]
            res["progress"][s, v], res["crashed"][s, v] = agent["progress"], agent["crashed"]
            res["expert_move_rate"][s, v] = expert_move_rate(maze, agent["q"])
            res["env_steps"] = agent["curve_steps"]
            bar.update(1)
    return worker_cpu


def _pendulum(cfg: Config, res: Results, bar) -> float:
    """The random policy and the TD3 imitators of every pendulum variant, on each pendulum seed."""
    from lab.methods.lwail.pendulum import pendulum_agent, random_return

    for s in range(cfg.pendulum_seeds):
        seed = cfg.seed + s
        res["pendulum_random_return"][s] = random_return(cfg, seed)
        for v, variant in enumerate(PENDULUM_VARIANTS):
            agent = pendulum_agent(cfg, variant, seed)
            res["pendulum_return"][s, v], res["pendulum_curve"][s, v] = agent["return"], agent["curve"]
            res["pendulum_expert_return"][s], res["pendulum_steps"] = agent["expert_return"], agent["curve_steps"]
            bar.update(1)
    return 0.0


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """ICVF and every variant of :data:`lab.methods.lwail.config.VARIANTS` in the maze on each seed, then the
    pendulum's TD3 imitators (each environment only when it is in ``cfg.envs``; the other's variables are NaN).

    Returns:
        Dataset with dims seed, variant, metric (the maze), pendulum_seed, pendulum_variant (the pendulum) and
        checkpoint (both, with the coordinates env_steps and pendulum_steps).
    """
    res = SCHEMA.new(seed=list(cfg.seeds), variant=list(VARIANTS), metric=list(METRICS),
                     checkpoint=np.arange(cfg.eval_points),
                     pendulum_seed=[cfg.seed + s for s in range(cfg.pendulum_seeds)],
                     pendulum_variant=list(PENDULUM_VARIANTS))
    seconds = {"maze_cpu_s": 0.0, "pendulum_cpu_s": 0.0}
    total = ((cfg.n_seeds * len(VARIANTS) if "maze" in cfg.envs else 0)
             + (cfg.pendulum_seeds * len(PENDULUM_VARIANTS) if "pendulum" in cfg.envs else 0))
    bar = tqdm(total=total, desc="LWAIL agents", disable=not progress)
    with threads(cfg.threads):
        for env, part in (("maze", _maze), ("pendulum", _pendulum)):
            if env in cfg.envs:
                t0 = time.process_time()
                workers = part(cfg, res, bar)  # CPU seconds of worker processes, beside this process's
                seconds[f"{env}_cpu_s"] = time.process_time() - t0 + workers
    bar.close()
    maze_info = make_maze(cfg.resolution)
    return res.build(attrs={"envs": ",".join(cfg.envs), "maze_free_cells": int(len(maze_info.cells)),
                            "expert_length": int(len(maze_info.expert_path()) - 1),
                            "demonstration_length": int(len(demonstration(cfg, maze_info)) - 1), **seconds}
                     ).set_coords(["env_steps", "pendulum_steps"])
