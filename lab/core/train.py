"""The lab's one trainer: seeded mini-batch training with AdamW, linear warm-up and cosine decay, and a tqdm bar.

:func:`fit` serves every kind of model in the lab: a classifier on in-memory tensors (the default cross-entropy
loss), a regressor (``loss="mse"``), a simulator whose batches are drawn by a sampler and whose loss is a callable
(RecurrSim's random depth), and the losses of the coming methods (denoising score matching, adversarial, TD), all
through ``loss(model, batch) -> scalar tensor``. It calls an optional ``on_step(step, model, optimizer)`` after each
optimiser step (CompreSSM reduces its layers there). The recurrence parameters of the SSM layers (each layer's
``RECURRENT`` names: eigenvalues, step sizes) get their own learning rate and no weight decay, as in the LRU and S5
papers. Wall time counts training steps and callbacks, not evaluations.

Trained weights are cached by :func:`lab.cache.cached_model`; threads are set by :func:`lab.core.runtime.threads`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

__all__ = ["LOSSES", "TrainResult", "evaluate", "fit", "lr_factor", "param_groups", "seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (under :data:`lab.core.runtime.GLOBAL_RNG_LOCK`, so
    never in the middle of another thread's generator that seeds and draws from them)."""
    from lab.core.runtime import GLOBAL_RNG_LOCK

    with GLOBAL_RNG_LOCK:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)


def lr_factor(step: int, total: int, warmup: float = 0.1) -> float:
    """The lab's one learning-rate schedule: linear warm-up over ``max(1, round(warmup * total))`` steps, then
    cosine decay to zero at ``total``. Multiply the peak learning rate by it."""
    warm = max(1, int(round(warmup * total)))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


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


Batch = tuple[torch.Tensor, ...]
Loss = str | Callable[[nn.Module, Batch], torch.Tensor]


def _cross_entropy(model: nn.Module, batch: Batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _mse(model: nn.Module, batch: Batch) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


#: named losses of :func:`fit`; any ``loss(model, batch) -> scalar`` callable works too
LOSSES: dict[str, Callable[[nn.Module, Batch], torch.Tensor]] = {"cross_entropy": _cross_entropy, "mse": _mse}


def fit(
    model: nn.Module,
    *data: torch.Tensor | Callable[[int], Batch],
    loss: Loss = "cross_entropy",
    epochs: int | None = None,
    steps: int | None = None,
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
    callback: Callable[[int, int, float], None] | None = None,
    eval_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    eval_every: int = 0,
    device: str | None = None,
) -> TrainResult:
    """Train ``model`` with AdamW, linear warm-up and cosine decay (:func:`lr_factor`).

    Arguments:
        model: the model; ``loss`` decides how it is called.
        data: either tensors ``(n, ...)`` sharing their first dimension (e.g. ``x, y``), drawn in mini-batches of
            ``batch_size`` reshuffled every epoch by a generator seeded with ``seed``; or one sampler
            ``sample(step) -> batch`` (a tuple of tensors) called once per step, with ``steps``.
        loss: ``"cross_entropy"`` (a classifier on ``(x, y)``), ``"mse"`` (a regressor), or
            ``loss(model, batch) -> scalar tensor``.
        epochs: passes over tensor data. steps: optimiser steps (a sampler needs it).
        lr, ssm_lr, weight_decay: see :func:`param_groups`.
        warmup: fraction of the steps spent warming the learning rate up linearly.
        clip: gradient-norm clip (None: off).
        on_step: called as ``on_step(step, model, optimizer)`` after every optimiser step (``step`` from 1).
        callback: called as ``callback(step, total, loss)`` after every step (a dashboard's progress bar).
        eval_data, eval_every: classification accuracy every ``eval_every`` steps and at the end.
        device: where to train (``auto``, ``cpu``, ``cuda``: :func:`lab.core.runtime.resolve_device`; None: the
            CPU). The model and every batch move there for training; the model comes back to the CPU at the end.
            A ``loss`` callable gets its batch on the device; tensors it captures itself must follow
            ``next(model.parameters()).device``.

    Returns:
        :class:`TrainResult`.
    """
    if isinstance(loss, str):
        from lab.checks import check_choice

        check_choice("loss", loss, tuple(LOSSES))
    loss_fn = LOSSES[loss] if isinstance(loss, str) else loss
    sampler = data[0] if len(data) == 1 and callable(data[0]) and not isinstance(data[0], torch.Tensor) else None
    if sampler is not None:
        if not steps:
            raise ValueError("steps=None is not allowed with a sampler; allowed: a positive number of steps")
        total, n, per_epoch, epochs = int(steps), 0, int(steps), 1
    else:
        if not data:
            raise ValueError("fit() needs data: tensors (x, y, ...) or a sampler")
        n = len(data[0])
        per_epoch = math.ceil(n / batch_size)
        if epochs is None:
            if not steps:
                raise ValueError("give epochs or steps")
            epochs = math.ceil(steps / per_epoch)
        total = epochs * per_epoch if steps is None else min(int(steps), epochs * per_epoch)
    from lab.cache.watch import working
    from lab.core.runtime import resolve_device

    working(f"training {desc}" if desc else "training")  # a dashboard says "training" only when it does
    dev = resolve_device(device)
    on_device = dev.type != "cpu"
    if on_device:
        model.to(dev)
    # foreach: one call per group, not one per tensor: the same per-element arithmetic (bit for bit, tested), a third
    # of the optimiser's CPU on the lab's small models (the PSM's step 5.1 -> 2.1 ms on one thread)
    opt = torch.optim.AdamW(param_groups(model, lr, ssm_lr, weight_decay), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, total, warmup))
    gen = torch.Generator().manual_seed(seed)
    losses, step_wall, step_cpu = np.empty(total), np.zeros(total), np.zeros(total)
    result = TrainResult(steps=0, loss=losses, wall_time_s=0.0, step_wall=step_wall, step_cpu=step_cpu)
    model.train()
    step, elapsed, cpu = 0, 0.0, 0.0
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)

    def batches():
        if sampler is not None:
            for i in range(total):
                yield sampler(i)
            return
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen)
            for i in range(0, n, batch_size):
                idx = order[i: i + batch_size]
                yield tuple(t[idx] for t in data)

    for batch in batches():
        if step >= total:
            break
        start, start_cpu = time.perf_counter(), time.process_time()
        if on_device:
            batch = tuple(t.to(dev, non_blocking=True) if isinstance(t, torch.Tensor) else t for t in batch)
        value = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        value.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses[step] = value.item()
        step += 1
        if on_step is not None:
            on_step(step, model, opt)
        step_wall[step - 1] = time.perf_counter() - start
        step_cpu[step - 1] = time.process_time() - start_cpu
        elapsed += step_wall[step - 1]
        cpu += step_cpu[step - 1]
        bar.update(1)
        if callback is not None:
            callback(step, total, float(losses[step - 1]))
        if eval_data is not None and eval_every and (step % eval_every == 0 or step == total):
            acc, _ = evaluate(model, *(t.to(dev) for t in eval_data))
            result.eval_steps.append(step)
            result.eval_accuracy.append(acc)
            bar.set_postfix(acc=f"{acc:.3f}")
        elif step % 20 == 0:
            bar.set_postfix(loss=f"{losses[step - 1]:.3g}")
    bar.close()
    model.eval()
    if on_device:
        model.to("cpu")
    result.steps, result.wall_time_s, result.cpu_time_s = step, elapsed, cpu
    return result
