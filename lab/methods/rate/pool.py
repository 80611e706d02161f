"""RATE's trainings on both cores: :func:`train_all` trains the agents not cached yet side by side in worker processes
(:func:`lab.core.parallel.run_jobs`), so that the experiment then reads every agent from the cache."""

from __future__ import annotations

from lab.core.parallel import Job, run_jobs
from lab.methods.rate import minigrid, train
from lab.methods.rate.config import VARIANTS, Config

__all__ = ["SERIAL_BELOW_STEPS", "train_all"]

#: training steps in all under which :func:`train_all` trains here: a worker's start costs about 4 s of CPU (ci)
SERIAL_BELOW_STEPS = 2000


def _tmaze_job(cfg: Config, variant: str, seed: int) -> dict:
    return train.trained(cfg, variant, seed).meta


def _minigrid_job(cfg: Config, variant: str, seed: int) -> dict:
    return minigrid.trained(cfg, variant, seed).meta


def train_all(cfg: Config, progress: bool = True) -> list:
    """Train every agent of every seed (T-Maze, and MiniGrid-Memory where ``cfg.envs`` has it) whose weights are not
    cached yet, side by side in worker processes (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores,
    ``cfg.threads`` threads each); :func:`lab.methods.rate.train.trained` then loads each from the cache, the same
    weights bit for bit (each training seeds itself). Agents whose weights are one cache entry (``rate_detached`` and
    ``rate`` when ``detach_memory`` is set) are one job. Below :data:`SERIAL_BELOW_STEPS` training steps in all (ci)
    it trains here.

    Returns:
        the :class:`lab.core.parallel.JobResult` of each training.
    """
    jobs, seen = [], set()
    for seed in cfg.seeds:
        for variant in VARIANTS:
            path = train.weights_path(cfg, variant, seed)
            if path not in seen:
                seen.add(path)
                jobs.append(Job(f"T-Maze {variant} seed {seed}", _tmaze_job, (cfg, variant, seed), cost=cfg.steps,
                                cached=path.exists()))
            if "minigrid" in cfg.envs:
                jobs.append(Job(f"MiniGrid {variant} seed {seed}", _minigrid_job, (cfg, variant, seed),
                                cost=cfg.minigrid_steps, cached=minigrid.weights_path(cfg, variant, seed).exists()))
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_STEPS
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="RATE trainings")
