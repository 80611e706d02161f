"""WSC's training runs: one stream of tasks per variant on :func:`lab.core.continual.train_task`, with the
:class:`.model.Consolidation` hook, a replay buffer, and the same optimiser steps on every task.

Task 0 has no previous task to reset toward or to consolidate against, so every variant of a seed starts from the
same model trained on task 0 (:func:`first_task`); the variants differ from task 1 on. Nothing is cached on disk:
the runs' times are part of what is measured (the dashboard's single matrices are cached by :mod:`.live`).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from lab.core.continual import MLP, Compute, evaluate_stream, train_task
from lab.core.train import seed_everything
from lab.datasets.streams import ReplayBuffer, TaskStream, task_stream
from lab.methods.wsc.config import Config
from lab.methods.wsc.model import VARIANTS, Consolidation, snapshot

__all__ = ["BATCH_B_OFFSET", "HEAD", "First", "first_task", "joint_training", "stream_for", "train_stream"]

#: one head over the classes seen so far (PyCIL's growing classifier), for training and testing
HEAD = "seen"
#: ``replay_b`` draws its mini-batches from seeds shifted by this much: another batch order, the rest the same
BATCH_B_OFFSET = 7919


def stream_for(cfg: Config, seed: int) -> TaskStream:
    """The seed's task stream (its class order or permutations depend on the seed)."""
    per = cfg.classes_per_task if cfg.kind == "split" else 10
    return task_stream(cfg.kind, cfg.source, n_tasks=cfg.n_tasks, classes_per_task=per, seed=seed)


def _batch_seed(seed: int, task: int, variant: str) -> int:
    return seed * 1000 + task + (BATCH_B_OFFSET if variant == "replay_b" else 0)  # the others share the order


class First:
    """The model after task 0 of a seed (shared by every variant) and its row of the accuracy matrix."""

    def __init__(self, model: torch.nn.Module, row: np.ndarray, compute: Compute):
        self.model, self.row, self.compute = model, row, compute


def first_task(cfg: Config, stream: TaskStream, seed: int) -> First:
    """Build the MLP from ``seed`` and train it on task 0."""
    seed_everything(seed)
    model = MLP(stream.d_input, cfg.hidden, stream.n_classes, bias=True)
    compute = Compute()
    compute += train_task(model, stream, 0, steps=cfg.steps_per_task, batch_size=cfg.batch_size, lr=cfg.lr,
                          seed=_batch_seed(seed, 0, "replay"), head=HEAD, device=cfg.device)
    return First(model, evaluate_stream(model, stream, HEAD, after=0), compute)


def train_stream(cfg: Config, stream: TaskStream, seed: int, first: First, variant: str, share: float,
                 progress: bool = False) -> dict:
    """Train ``variant`` with a buffer of ``share`` over tasks 1.. of ``stream``, from the task-0 model.

    Returns:
        a dict: ``R`` ``(T, T)`` the accuracy matrix (%; row i after task i, row 0 from ``first``); ``compute``
        (:class:`lab.core.continual.Compute` of tasks 1..); ``kept``, ``moved``, ``mass`` ``(T,)`` what each task's
        reset did (NaN: none); ``loss`` ``(steps_per_task,)`` the training loss on the last task; ``model``.
    """
    spec = VARIANTS[variant]
    model = copy.deepcopy(first.model)
    buffer = ReplayBuffer(share, policy=cfg.policy, seed=seed)
    buffer.add_task(stream[0])
    T = len(stream)
    R = np.zeros((T, T))
    R[0] = first.row
    kept, moved, mass = (np.full(T, np.nan) for _ in range(3))
    compute, loss = Compute(), np.zeros(cfg.steps_per_task)
    for t in range(1, T):
        hook = Consolidation(snapshot(model), cfg.steps_per_task, reset=spec.reset, average=spec.average,
                             reset_at=cfg.reset_at, keep=cfg.keep, alpha=cfg.alpha, every=cfg.swa_every,
                             swa_lr=cfg.swa_lr * cfg.lr if spec.rewarm else None)
        res = train_task(model, stream, t, steps=cfg.steps_per_task, batch_size=cfg.batch_size, lr=cfg.lr,
                         seed=_batch_seed(seed, t, variant), replay=buffer, head=HEAD, on_step=hook,
                         device=cfg.device, progress=progress)
        compute += res
        buffer.add_task(stream[t])
        R[t] = evaluate_stream(model, stream, HEAD, after=t)
        if hook.record is not None:
            kept[t], moved[t], mass[t] = hook.record.kept, hook.record.moved, hook.record.score_mass_kept
        loss = res.loss
    return {"R": R, "compute": compute, "kept": kept, "moved": moved, "mass": mass, "loss": loss, "model": model}


def joint_training(cfg: Config, stream: TaskStream, seed: int) -> np.ndarray:
    """Full retraining: a fresh MLP on every task's training data at once, with the stream's total step budget.

    Returns:
        ``(T,)`` test accuracy (%) on each task, with the head over all the stream's classes.
    """
    seed_everything(seed)
    model = MLP(stream.d_input, cfg.hidden, stream.n_classes, bias=True)
    last = len(stream) - 1
    # train_task mixes the buffer into the last task's data; the last task itself is then in it twice, so the
    # buffer holds the tasks before it only
    before = ReplayBuffer(1.0, seed=seed)
    for t in list(stream)[:-1]:
        before.add_task(t)
    train_task(model, stream, last, steps=cfg.steps_per_task * len(stream), batch_size=cfg.batch_size, lr=cfg.lr,
               seed=_batch_seed(seed, last, "joint"), replay=before, head=HEAD, device=cfg.device)
    return evaluate_stream(model, stream, HEAD, after=last)
