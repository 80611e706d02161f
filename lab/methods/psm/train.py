"""The PSM method's models and their only training: the two PSMs and the matched-size baselines from
:mod:`lab.core`, trained with :func:`lab.core.train.fit` on per-token cross-entropy (positions labelled
:data:`lab.datasets.tokens.IGNORE` skipped) on ``cfg.device``, weights cached by :func:`lab.cache.cached_model` under
``data/psm/``; the trained models come back to the CPU, where every evaluation runs. :func:`train_all` trains the
models not cached yet side by side in worker processes (:mod:`lab.core.parallel`: the cores, one thread each), so
that the experiment then reads every model from the cache: the same weights, bit for bit, as trained one after
another (each training seeds itself; quick's 24 trainings, 3 seeds: the same 24 files and the same claims table).

Matched sizes: every model's width is chosen so that its trainable parameters come closest to the Transformer-PSM's
(:func:`widths`); the counts are recorded in the run's Dataset.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from lab.cache import Trained, cached_model, state_path
from lab.core.models import SSMStack
from lab.core.psm import PSM
from lab.core.runtime import threads
from lab.core.tasks import accuracy_by_position  # noqa: F401  re-exported: the experiment reads it here
from lab.core.train import fit, seed_everything
from lab.core.transformer import TokenTagger, Transformer, n_params
from lab.datasets.tokens import IGNORE, TokenTask
from lab.methods.psm.config import Config

__all__ = ["WEIGHTS_VERSION", "accuracy_by_position", "build", "mixed_lengths", "regime", "token_loss",
           "train_all", "trained_model", "training_steps", "widths"]

#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 2
#: CPU milliseconds of one training step per model at quick's training length and widths, one thread (measured on
#: the 2-core AMD EPYC, the affine PSM guessed): the order in which :func:`train_all` starts the jobs, and whether a
#: pool is worth starting
STEP_MS = {"psm": 32.0, "psm_affine": 24.0, "transformer": 15.0, "lru": 17.0, "mamba": 30.0}
#: estimated CPU seconds under which :func:`train_all` trains in this process: a worker's start (torch and the lab
#: imported afresh) costs about 4 s of CPU, more than the pool saves on a few short trainings (ci)
SERIAL_BELOW_S = 20.0
#: baseline SSM settings: LRU states per layer (and its ring initialisation), Mamba states per channel
LRU_STATES, LRU_KWARGS, MAMBA_STATES = 32, {"r_min": 0.5, "r_max": 0.99}, 8


def build(name: str, cfg: Config, vocab_size: int, n_classes: int, d_model: int | None = None) -> nn.Module:
    """A freshly initialised model (torch's global generator: seed it first, after :func:`widths`, whose search
    builds models and draws from that generator).

    Arguments:
        name: one of :data:`lab.methods.psm.config.MODELS`.
        d_model: its width (default: the matched width of :func:`widths`).
    """
    d = d_model or widths(cfg, vocab_size, n_classes)[name]
    psm = dict(d_model=d, chunk=cfg.chunk, n_heads=cfg.n_heads, enc_layers=cfg.psm_layers,
               agg_layers=cfg.psm_layers, inf_layers=cfg.psm_layers)
    if name == "psm":
        return PSM(vocab_size, n_classes, aggregator="transformer", **psm)
    if name == "psm_affine":
        return PSM(vocab_size, n_classes, aggregator="affine", **psm)
    if name == "transformer":
        body = Transformer(d, cfg.baseline_layers, cfg.n_heads, causal=True)
    elif name == "lru":
        body = SSMStack("lru", d, cfg.baseline_layers, LRU_STATES, mixer_kwargs=LRU_KWARGS)
    elif name == "mamba":
        body = SSMStack("mamba", d, cfg.baseline_layers, MAMBA_STATES)
    else:
        raise ValueError(f"model={name!r} is not allowed; allowed: psm, psm_affine, transformer, lru, mamba")
    return TokenTagger(vocab_size, n_classes, d, body)


@cache
def _widths(cfg_json: str, vocab_size: int, n_classes: int) -> dict[str, int]:
    cfg = Config.from_json(cfg_json)
    rng = torch.get_rng_state()
    target = n_params(build("psm", cfg, vocab_size, n_classes, cfg.d_model))
    out = {"psm": cfg.d_model}
    for name in cfg.models:
        if name == "psm":
            continue
        step = cfg.n_heads if name in ("psm_affine", "transformer") else 1
        candidates = list(range(step, 8 * cfg.d_model + 1, step))
        count = cache(lambda d, name=name: n_params(build(name, cfg, vocab_size, n_classes, d)))
        lo, hi = 0, len(candidates) - 1  # the count grows with the width: bisect to the first at or above target
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if count(candidates[mid]) < target else (lo, mid)
        near = candidates[max(lo - 1, 0): lo + 1]
        out[name] = min(near, key=lambda d: (abs(count(d) - target), d))
    torch.set_rng_state(rng)  # the search leaves the global generator as it found it
    return out


def widths(cfg: Config, vocab_size: int, n_classes: int) -> dict[str, int]:
    """Each model's width: the Transformer-PSM at ``cfg.d_model``, every other model at the width whose parameter
    count is closest to the Transformer-PSM's (multiples of ``n_heads`` for the transformers)."""
    return dict(_widths(cfg.to_json(), vocab_size, n_classes))


def token_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the labelled positions of a batch ``(tokens (b, L), targets (b, L))``."""
    x, y = batch
    logits = model(x)  # (b, L, k)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)


def mixed_lengths(cfg: Config, task: TokenTask, name: str) -> tuple[int, ...] | None:
    """The training lengths of the mixed-length regime (multiples of chunk in [min_train_length, train_length]) when
    ``name`` trains that way on ``task`` (``cfg.mixed_models``, state-tracking tasks only), else None (fixed)."""
    if name not in cfg.mixed_models or task.name == "mqar":
        return None
    c = cfg.chunk
    return tuple(range(-(-cfg.min_train_length // c) * c, cfg.train_length + 1, c))


def training_steps(cfg: Config, name: str, task: str = "state") -> int:
    """Optimiser steps of ``name`` on ``task`` (a task name or kind): :meth:`Config.model_steps` (``mqar_steps`` on
    MQAR, ``transformer_steps`` / ``lru_steps`` for those baselines on the state task, else ``steps``)."""
    return cfg.model_steps(name, _kind(task))


def _kind(task: str) -> str:
    """The task kind of a task name or kind: 'recall' (MQAR) or 'state'."""
    return "recall" if task in ("mqar", "recall") else "state"


def regime(cfg: Config, task: TokenTask, name: str) -> str:
    """A model's training regime in words (lengths and steps)."""
    lengths = mixed_lengths(cfg, task, name)
    where = (f"lengths {lengths[0]}-{lengths[-1]} (one per batch)" if lengths else f"length {cfg.train_length}")
    return f"{where}, {training_steps(cfg, name, task.name)} steps"


def training_key(cfg: Config, task: TokenTask, name: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    fields = ("train_length", "n_train", "chunk", "d_model", "n_heads", "psm_layers", "baseline_layers",
              "batch_size", "lr")
    key = {**{f: getattr(cfg, f) for f in fields}, "steps": training_steps(cfg, name, task.name), "task": task.name,
           "options": task.options, "model": name, "vocab": task.vocab_size, "length": task.length,
           "seed": seed, "models": sorted(cfg.models), "version": WEIGHTS_VERSION}
    lr = cfg.model_lr(name, _kind(task.name))
    if lr != cfg.lr:  # a baseline's own rate (keys without it name the runs at `lr`, as before the field)
        key["lr"] = lr
    lengths = mixed_lengths(cfg, task, name)
    return key if lengths is None else {**key, "mixed_lengths": list(lengths)}


def _sampler(x: torch.Tensor, y: torch.Tensor, lengths: tuple[int, ...], batch_size: int, seed: int, start: int):
    """``sample(step) -> (x, y)``: ``batch_size`` training sequences drawn with replacement, cut to one length drawn
    uniformly from ``lengths`` (plus the ``start`` token columns), by a generator seeded with ``seed``."""
    gen = torch.Generator().manual_seed(seed)

    def sample(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        length = lengths[int(torch.randint(len(lengths), (1,), generator=gen))]
        idx = torch.randint(len(x), (batch_size,), generator=gen)
        return x[idx, : start + length], y[idx, : start + length]

    return sample


def trained_model(cfg: Config, task: TokenTask, name: str, seed: int, *, progress: bool = False) -> Trained:
    """A model trained on ``task`` (the training split): from the weight cache or trained now and cached.

    Returns:
        :class:`lab.cache.Trained` with ``curves["loss"]`` and ``meta["train_time_s"]``.
    """
    x, y = task.tensors()
    lengths = mixed_lengths(cfg, task, name)
    data = (x, y) if lengths is None else (_sampler(x, y, lengths, cfg.batch_size, seed,
                                                    int(task.options.get("start_token", False))),)

    def train(model):
        res = fit(model, *data, loss=token_loss, steps=training_steps(cfg, name, task.name), epochs=None,
                  batch_size=cfg.batch_size, lr=cfg.model_lr(name, _kind(task.name)), weight_decay=0.01, seed=seed,
                  progress=progress, desc=f"{name} {task.name} ({seed})", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "steps": res.steps}}

    d = widths(cfg, task.vocab_size, task.n_classes)[name]  # before seeding: the search builds models
    with threads(cfg.threads):
        seed_everything(seed)
        return cached_model("psm", f"{task.name}-{name}", training_key(cfg, task, name, seed),
                            lambda: build(name, cfg, task.vocab_size, task.n_classes, d), train,
                            use_cache=cfg.use_cache)


def _cached(cfg: Config, task: TokenTask, name: str, seed: int) -> bool:
    """Whether the weights of ``(task, name, seed)`` are in the cache (a file that turns out unreadable is retrained
    where it is read)."""
    return state_path("psm", f"{task.name}-{name}", training_key(cfg, task, name, seed)).exists()


def _train_job(cfg: Config, task: TokenTask, name: str, seed: int) -> dict:
    """One training of :func:`train_all` (in a worker process): the weights go to the cache; returns their meta."""
    return trained_model(cfg, task, name, seed).meta


def train_all(cfg: Config, tasks: list[TokenTask], progress: bool = True) -> list:
    """Train every model of ``cfg.models`` on each training split of ``tasks`` over ``cfg.seeds`` whose weights are
    not cached yet, side by side in worker processes (:func:`lab.core.parallel.run_jobs`, ``LAB_WORKERS`` or the
    cores, ``cfg.threads`` threads each); :func:`trained_model` then loads each from the cache. Each training seeds
    itself, so its weights are those of a training here, bit for bit. Nothing to do without the cache.

    Returns:
        the :class:`lab.core.parallel.JobResult` of each (task, model, seed), in that order.
    """
    from lab.core.parallel import Job, run_jobs

    if not cfg.use_cache:
        return []
    jobs = []
    for task in tasks:
        for name in cfg.models:
            lengths = mixed_lengths(cfg, task, name)
            length = sum(lengths) / len(lengths) if lengths else cfg.train_length
            scale = (length + 1) / 17 * (cfg.d_model / 64) ** 2 * cfg.batch_size / 32  # as quick: 17 tokens, 64 wide
            cost = training_steps(cfg, name, task.name) * STEP_MS[name] / 1000 * scale
            jobs += [Job(f"{name} {task.name} seed {seed}", _train_job, (cfg, task, name, seed), cost=cost,
                         cached=_cached(cfg, task, name, seed)) for seed in cfg.seeds]
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_S
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="PSM trainings")
