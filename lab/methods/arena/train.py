"""The arena's only training: every model of :mod:`lab.core.zoo` at the width closest to ``cfg.budget`` parameters,
trained with :func:`lab.core.train.fit` on per-token cross-entropy (positions labelled
:data:`lab.datasets.tokens.IGNORE` skipped), weights cached by :func:`lab.cache.cached_model` under ``data/arena/``.
:func:`train_all` trains the cells not cached yet side by side in worker processes (:mod:`lab.core.parallel`), so that
the experiment then reads every model from the cache, bit for bit the weights a training here gives.
"""

from __future__ import annotations

import time
from functools import cache

import torch
import torch.nn.functional as F

from lab.cache import Trained, cached_model, state_path
from lab.core import zoo
from lab.core.runtime import threads
from lab.core.tasks import accuracy_by_position  # noqa: F401  re-exported for the experiment
from lab.core.train import fit, seed_everything
from lab.datasets.tokens import IGNORE, TokenTask
from lab.methods.arena.config import Config

__all__ = ["WEIGHTS_VERSION", "accuracy_by_position", "stream_tokens_per_s", "token_loss", "train_all",
           "trained_model", "untrained_model", "width"]

#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1
#: relative CPU cost of a training step per model (one thread, quick's sizes): the order run_jobs starts them in
STEP_COST = {"lru": 1.6, "s5": 1.6, "mamba": 2.5, "mamba2": 2.5, "gla": 1.0, "gla_neg": 1.0, "deltanet": 2.0,
             "deltanet_neg": 2.0, "gru": 1.2, "lstm": 1.2, "transformer": 1.0, "transformer_rope": 1.1,
             "psm": 3.0, "chaingpt": 3.0}
#: estimated CPU seconds under which train_all trains in this process (a worker's start costs about 4 s)
SERIAL_BELOW_S = 20.0


@cache
def _width(kind: str, vocab_size: int, n_classes: int, budget: int, n_layers: int) -> int:
    return zoo.build_matched(kind, vocab_size, n_classes, budget, n_layers=n_layers).d_model


def width(cfg: Config, kind: str, task: TokenTask) -> int:
    """The width at which ``kind`` comes closest to ``cfg.budget`` parameters on ``task``'s vocabulary."""
    return _width(kind, task.vocab_size, task.n_classes, cfg.budget, cfg.n_layers)


def token_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the labelled positions of a batch ``(tokens (b, L), targets (b, L))``."""
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)


def training_key(cfg: Config, task: TokenTask, kind: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    fields = ("budget", "n_layers", "n_train", "batch_size", "lr")
    return {**{f: getattr(cfg, f) for f in fields}, "train_length": cfg.length_of(task.name),
            "steps": cfg.steps_of(task.name), "task": task.name, "options": task.options, "model": kind,
            "vocab": task.vocab_size, "length": task.length, "seed": seed, "version": WEIGHTS_VERSION}


def trained_model(cfg: Config, task: TokenTask, kind: str, seed: int, *, progress: bool = False) -> Trained:
    """``kind`` trained on ``task`` (the training split) with ``seed``: from the weight cache or trained now.

    Returns:
        :class:`lab.cache.Trained` with ``curves["loss"]`` and ``meta["train_time_s"]``.
    """
    x, y = task.tensors()
    d = width(cfg, kind, task)

    def train(model):
        res = fit(model, x, y, loss=token_loss, steps=cfg.steps_of(task.name), epochs=None,
                  batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=0.01, seed=seed, progress=progress,
                  desc=f"{kind} {task.name} ({seed})", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "steps": res.steps}}

    with threads(cfg.threads):
        seed_everything(seed)
        return cached_model("arena", f"{task.name}-{kind}", training_key(cfg, task, kind, seed),
                            lambda: zoo.build(kind, task.vocab_size, task.n_classes, d_model=d,
                                              n_layers=cfg.n_layers), train, use_cache=cfg.use_cache)


def untrained_model(cfg: Config, task: TokenTask, kind: str) -> zoo.TokenModel:
    """``kind`` at its matched width on ``task``, untrained: the size of a cell the run does not train."""
    return zoo.build(kind, task.vocab_size, task.n_classes, d_model=width(cfg, kind, task), n_layers=cfg.n_layers)


def _cached(cfg: Config, task: TokenTask, kind: str, seed: int) -> bool:
    return state_path("arena", f"{task.name}-{kind}", training_key(cfg, task, kind, seed)).exists()


def _train_job(cfg: Config, task: TokenTask, kind: str, seed: int) -> dict:
    """One training of :func:`train_all` (in a worker process): the weights go to the cache; returns their meta."""
    return trained_model(cfg, task, kind, seed).meta


def train_all(cfg: Config, tasks: list[TokenTask], progress: bool = True) -> list:
    """Train every (task, model, seed) of ``cfg`` whose weights are not cached yet, side by side in worker processes
    (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores, ``cfg.threads`` threads each); a failed cell
    raises with its name. Nothing to do without the cache.

    Returns:
        the :class:`lab.core.parallel.JobResult` of each cell, in the order (task, model, seed).
    """
    from lab.core.parallel import Job, run_jobs

    if not cfg.use_cache:
        return []
    jobs = []
    for task in tasks:
        for kind in cfg.models_of(task.name):
            cost = (cfg.steps_of(task.name) * STEP_COST[kind] * 0.01 * (cfg.budget / 10_000) ** 0.5
                    * cfg.batch_size / 32)
            jobs += [Job(f"{kind} {task.name} seed {seed}", _train_job, (cfg, task, kind, seed), cost=cost,
                         cached=_cached(cfg, task, kind, seed)) for seed in cfg.seeds]
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_S
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="arena trainings")


@torch.no_grad()
def stream_tokens_per_s(model: zoo.TokenModel, tokens: torch.Tensor, repeats: int = 3) -> float:
    """Tokens per second read one at a time (the fastest of ``repeats``): the step form of a recurrent model, and
    for a transformer, without a key-value cache in the lab, one forward pass over the prefix per new token."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        if model.has_step:
            state = model.initial_state(tokens.shape[0])
            for t in range(tokens.shape[1]):
                _, state = model.step(tokens[:, t], state)
        else:
            for t in range(1, tokens.shape[1] + 1):
                model(tokens[:, :t])
        best = min(best, time.perf_counter() - start)
    return tokens.numel() / best
