"""A small shared training loop for the lab's sequence classifiers: seeded, Adam(W), warm-up + cosine, tqdm.

:func:`fit` trains in mini-batches over in-memory tensors and calls an optional ``on_step(step, model, optimizer)``
after each optimiser step (CompreSSM reduces its layers there). The recurrence parameters of the SSM layers (each
layer's ``RECURRENT`` names: eigenvalues, step sizes) get their own learning rate and no weight decay, as in the
LRU and S5 papers. Wall time counts training steps and callbacks, not evaluations.

:func:`cached_weights` keeps trained weights under ``<data>/<folder>/<name>-<key16>.pt``, where ``key`` hashes
everything that determines them; files are written atomically and read with ``weights_only=True``; a file that
cannot be read, carries another key or does not fit the model is deleted with a warning and the model retrained.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from lab.datasets.cache import config_hash, data_root
from lab.io import atomic_write_bytes

__all__ = ["TrainResult", "cached_weights", "evaluate", "fit", "param_groups", "seed_everything", "torch_threads",
           "weights_path"]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads and at most ``n`` Numba threads (the kernels' CPU backend),
    then restore both (None: leave them as they are)."""
    if not n:
        yield
        return
    import numba

    saved, saved_numba = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(int(n))
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        torch.set_num_threads(saved)
        numba.set_num_threads(saved_numba)


def param_groups(model: nn.Module, lr: float, ssm_lr: float | None = None, weight_decay: float = 0.0) -> list[dict]:
    """Adam parameter groups: the SSM recurrence parameters at ``ssm_lr`` without decay, the rest at ``lr``.

    Biases, norm weights and other 1-D parameters get no weight decay either.
    """
    recurrent: set[int] = set()
    for module in model.modules():
        for name in getattr(module, "RECURRENT", ()):
            recurrent.add(id(getattr(module, name)))
    rec, decay, no_decay = [], [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if id(p) in recurrent:
            rec.append(p)
        elif p.dim() >= 2:
            decay.append(p)
        else:
            no_decay.append(p)
    groups = [
        {"params": decay, "lr": lr, "weight_decay": weight_decay},
        {"params": no_decay, "lr": lr, "weight_decay": 0.0},
        {"params": rec, "lr": lr if ssm_lr is None else ssm_lr, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of a classifier on ``(x, y)``, in eval mode (the mode is restored)."""
    was_training = model.training
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(x), batch_size):
        logits = model(x[i: i + batch_size])
        yb = y[i: i + batch_size]
        correct += int((logits.argmax(-1) == yb).sum())
        loss += float(F.cross_entropy(logits, yb, reduction="sum"))
    model.train(was_training)
    n = max(len(x), 1)
    return correct / n, loss / n


@dataclass
class TrainResult:
    """What :func:`fit` returns.

    Attributes:
        steps: optimiser steps taken.
        loss: training loss at every step ``(steps,)``.
        wall_time_s: seconds spent in training steps and ``on_step`` callbacks (evaluations excluded).
        cpu_time_s: the process's CPU time over the same spans (with one thread, close to the wall time the run
            would take on an otherwise idle machine).
        step_wall, step_cpu: wall and CPU seconds of every step (``(steps,)``, callbacks included).
        eval_steps, eval_accuracy: periodic test accuracy (when ``eval_every`` and ``eval_data`` are given).
    """

    steps: int
    loss: np.ndarray
    wall_time_s: float
    cpu_time_s: float = 0.0
    step_wall: np.ndarray = field(default_factory=lambda: np.zeros(0))
    step_cpu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eval_steps: list[int] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)


def fit(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    ssm_lr: float | None = None,
    weight_decay: float = 0.0,
    warmup: float = 0.1,
    clip: float | None = 1.0,
    seed: int = 0,
    progress: bool = True,
    desc: str = "train",
    on_step: Callable[[int, nn.Module, torch.optim.Optimizer], None] | None = None,
    eval_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    eval_every: int = 0,
) -> TrainResult:
    """Train a classifier with AdamW, linear warm-up and cosine decay, cross-entropy loss.

    Arguments:
        model: maps ``x`` ``(batch, ...)`` to logits ``(batch, classes)``.
        x, y: training inputs ``(n, ...)`` and integer labels ``(n,)``.
        epochs: passes over the data (mini-batches reshuffled each epoch by a generator seeded with ``seed``).
        lr, ssm_lr, weight_decay: see :func:`param_groups`.
        warmup: fraction of the steps spent warming the learning rate up linearly.
        clip: gradient-norm clip (None: off).
        on_step: called as ``on_step(step, model, optimizer)`` after every optimiser step (``step`` from 1).
        eval_data, eval_every: test accuracy every ``eval_every`` steps and at the end.

    Returns:
        :class:`TrainResult`.
    """
    n = len(x)
    per_epoch = math.ceil(n / batch_size)
    total = epochs * per_epoch
    opt = torch.optim.AdamW(param_groups(model, lr, ssm_lr, weight_decay), lr=lr)
    warm = max(1, int(round(warmup * total)))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    gen = torch.Generator().manual_seed(seed)
    losses, step_wall, step_cpu = np.empty(total), np.zeros(total), np.zeros(total)
    result = TrainResult(steps=0, loss=losses, wall_time_s=0.0, step_wall=step_wall, step_cpu=step_cpu)
    model.train()
    step, elapsed, cpu = 0, 0.0, 0.0
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            start, start_cpu = time.perf_counter(), time.process_time()
            idx = order[i: i + batch_size]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            sched.step()
            losses[step] = loss.item()
            step += 1
            if on_step is not None:
                on_step(step, model, opt)
            step_wall[step - 1] = time.perf_counter() - start
            step_cpu[step - 1] = time.process_time() - start_cpu
            elapsed += step_wall[step - 1]
            cpu += step_cpu[step - 1]
            bar.update(1)
            if eval_data is not None and eval_every and (step % eval_every == 0 or step == total):
                acc, _ = evaluate(model, *eval_data)
                result.eval_steps.append(step)
                result.eval_accuracy.append(acc)
                bar.set_postfix(acc=f"{acc:.3f}")
    bar.close()
    model.eval()
    result.steps, result.wall_time_s, result.cpu_time_s = step, elapsed, cpu
    return result


# ------------------------------------------------------------------------------------------------------------------
def weights_path(folder: str, name: str, config: Mapping[str, Any], root=None) -> Path:
    """Where the weights of ``(name, config)`` live (whether or not they exist)."""
    return data_root(root) / folder / f"{name}-{config_hash(config, name)[:16]}.pt"


def cached_weights(model: nn.Module, folder: str, name: str, config: Mapping[str, Any],
                   train: Callable[[nn.Module], Any], *, root=None, use_cache: bool = True) -> tuple[nn.Module, bool]:
    """Load ``model``'s trained weights from the cache, or train it with ``train(model)`` and store them.

    Arguments:
        model: a freshly built model (its parameter shapes are those of the cached state dict).
        folder, name: the file is ``<data>/<folder>/<name>-<key16>.pt``.
        config: JSON-serialisable; everything that determines the weights.
        train: trains ``model`` in place (called only on a miss).
        root: data directory (default :func:`lab.datasets.cache.data_root`).
        use_cache: False trains without reading or writing the cache.

    Returns:
        ``(model, loaded)``: ``loaded`` is True when the weights came from the cache.
    """
    if not use_cache:
        train(model)
        return model, False
    key = config_hash(config, name)
    path = weights_path(folder, name, config, root)
    if path.exists():
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            if blob.get("key") != key:
                raise ValueError("key does not match the config")
            model.load_state_dict(blob["state_dict"], strict=True)
            return model, True
        except Exception as exc:  # noqa: BLE001 - any bad file is rebuilt
            warnings.warn(f"cached weights {path} rejected ({type(exc).__name__}: {exc}); retraining",
                          RuntimeWarning, stacklevel=2)
            path.unlink(missing_ok=True)
    train(model)
    buffer = io.BytesIO()
    torch.save({"key": key, "config": dict(config), "state_dict": model.state_dict()}, buffer)
    atomic_write_bytes(path, buffer.getvalue())
    return model, False
