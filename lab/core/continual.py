r"""Continual learning in one place: the accuracy matrix and its metrics, the compute a method spends, a small MLP
classifier, and one task's training on :func:`lab.core.train.fit`; shared by the continual and unlearning methods.

**The accuracy matrix.** After training task ``i`` of a stream of ``T`` tasks, the model is tested on every task
``j``: ``R[i, j]``. From it (Lopez-Paz & Ranzato 2017, GEM; Chaudhry et al. 2018):

    ACC = (1/T) Σ_j R[T-1, j]                                   average accuracy at the end
    BWT = (1/(T-1)) Σ_{j<T-1} (R[T-1, j] - R[j, j])            backward transfer (negative: forgetting)
    FWT = (1/(T-1)) Σ_{j>0} (R[j-1, j] - b_j)                   forward transfer, b_j: a random-init model on task j
    plasticity_j = R[j, j]                                      accuracy on the newest task right after training it
    forgetting = (1/(T-1)) Σ_{j<T-1} max_{i<T-1} (R[i, j] - R[T-1, j])

**Compute**: optimiser steps and wall / CPU time of training (:class:`Compute`, summed over tasks).

**Training a task**: :func:`train_task` trains on one task of a :class:`lab.datasets.streams.TaskStream` (optionally
with a replay buffer's data mixed in, and the logits restricted to the task's or the seen classes), with the lab's
AdamW + warm-up + cosine schedule, its ``on_step`` hook and its ``device``. :func:`evaluate_stream` fills a row of
``R``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lab.checks import check_choice, check_int
from lab.core.train import TrainResult, fit

__all__ = ["HEADS", "MLP", "Compute", "ContinualMetrics", "acc", "bwt", "evaluate_stream", "evaluate_task",
           "forgetting", "fwt", "metrics", "plasticity", "train_task"]

#: which logits a task trains and is tested on: all classes, the task's own (task-incremental), or the classes seen
HEADS = ("all", "task", "seen")


# --------------------------------------------------------------------------------------------------------------------
# Metrics of the accuracy matrix
# --------------------------------------------------------------------------------------------------------------------
def _square(R: np.ndarray) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"R must be a square (tasks, tasks) matrix, got shape {R.shape}")
    return R


def acc(R: np.ndarray) -> float:
    """Average accuracy after the last task: the mean of ``R``'s last row. ``R``: ``(T, T)``."""
    return float(_square(R)[-1].mean())


def bwt(R: np.ndarray) -> float:
    """Backward transfer: mean over the tasks but the last of ``R[T-1, j] - R[j, j]`` (0 for one task)."""
    R = _square(R)
    T = len(R)
    if T < 2:
        return 0.0
    return float(np.mean(R[-1, :-1] - np.diag(R)[:-1]))


def fwt(R: np.ndarray, baseline: Sequence[float]) -> float:
    """Forward transfer: mean over the tasks but the first of ``R[j-1, j] - b_j``; ``baseline`` ``(T,)``: accuracy
    of a randomly initialised model on each task (0 for one task)."""
    R = _square(R)
    b = np.asarray(baseline, dtype=float)
    if b.shape != (len(R),):
        raise ValueError(f"baseline must have one value per task ({len(R)}), got shape {b.shape}")
    if len(R) < 2:
        return 0.0
    return float(np.mean([R[j - 1, j] - b[j] for j in range(1, len(R))]))


def plasticity(R: np.ndarray) -> np.ndarray:
    """Accuracy on each task right after training it: the diagonal of ``R``, ``(T,)``."""
    return np.diag(_square(R)).copy()


def forgetting(R: np.ndarray) -> float:
    """Average forgetting: mean over the tasks but the last of the drop from their best earlier accuracy to the
    final one (0 for one task)."""
    R = _square(R)
    T = len(R)
    if T < 2:
        return 0.0
    return float(np.mean([R[:-1, j][j:].max() - R[-1, j] for j in range(T - 1)]))


@dataclass(frozen=True)
class ContinualMetrics:
    """The metrics of one accuracy matrix (in its units, e.g. %)."""

    acc: float
    bwt: float
    fwt: float
    forgetting: float
    plasticity: float
    """mean over tasks of ``R[j, j]``"""


def metrics(R: np.ndarray, baseline: Sequence[float] | None = None) -> ContinualMetrics:
    """Every metric of ``R`` ``(T, T)``; FWT is NaN without a ``baseline`` ``(T,)``."""
    return ContinualMetrics(acc=acc(R), bwt=bwt(R), fwt=fwt(R, baseline) if baseline is not None else float("nan"),
                            forgetting=forgetting(R), plasticity=float(plasticity(R).mean()))


@dataclass
class Compute:
    """Compute spent on training: optimiser steps, wall and CPU seconds (evaluations excluded); add
    :class:`lab.core.train.TrainResult` s with ``+=``, or time extra work with :meth:`timed`."""

    steps: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def __iadd__(self, other: TrainResult | Compute) -> Compute:
        if isinstance(other, TrainResult):
            self.steps += other.steps
            self.wall_s += other.wall_time_s
            self.cpu_s += other.cpu_time_s
        else:
            self.steps += other.steps
            self.wall_s += other.wall_s
            self.cpu_s += other.cpu_s
        return self

    def timed(self, fn: Callable[[], object]):
        """Run ``fn()`` and add its wall and CPU time (work between tasks: a memory update, a consolidation)."""
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            return fn()
        finally:
            self.wall_s += time.perf_counter() - start
            self.cpu_s += time.process_time() - start_cpu


# --------------------------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------------------------
class MLP(nn.Module):
    """A ReLU multilayer perceptron classifier: ``d_input -> hidden... -> n_classes`` (GPM's pMNIST network is
    ``784-100-100-10`` without biases).

    Arguments:
        d_input: input features. hidden: widths of the hidden layers. n_classes: outputs.
        bias: biases in the linear layers (GPM uses none: a bias is a weight on a constant input outside the
            representation matrices).

    ``forward(x)``: ``x (batch, d_input) -> logits (batch, n_classes)``. :meth:`layer_inputs` returns each linear
    layer's input, the rows of GPM's representation matrices.
    """

    def __init__(self, d_input: int, hidden: Sequence[int] = (100, 100), n_classes: int = 10, bias: bool = False):
        super().__init__()
        widths = [check_int("d_input", d_input, 1), *[check_int("hidden", h, 1) for h in hidden],
                  check_int("n_classes", n_classes, 1)]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = torch.relu(x)
        return x

    @torch.no_grad()
    def layer_inputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The input of every linear layer: ``[(batch, d_in of layer k) for k]`` (the first is ``x`` itself)."""
        out = []
        for k, layer in enumerate(self.layers):
            out.append(x)
            x = layer(x)
            if k < len(self.layers) - 1:
                x = torch.relu(x)
        return out


# --------------------------------------------------------------------------------------------------------------------
# Training and testing on a stream
# --------------------------------------------------------------------------------------------------------------------
def _allowed(stream, task: int, head: str) -> tuple[int, ...] | None:
    check_choice("head", head, HEADS)
    if head == "all":
        return None
    return tuple(stream[task].classes) if head == "task" else stream.seen_classes(task)


def _masked(model: nn.Module, classes: tuple[int, ...] | None, n_classes: int) -> Callable:
    """A cross-entropy loss over the ``classes`` logits only (the others set to -inf)."""
    if classes is None:
        return lambda m, batch: nn.functional.cross_entropy(m(batch[0]), batch[1])
    keep = torch.zeros(n_classes, dtype=torch.bool)
    keep[list(classes)] = True

    def loss(m: nn.Module, batch) -> torch.Tensor:
        logits = m(batch[0])
        return nn.functional.cross_entropy(logits.masked_fill(~keep.to(logits.device), float("-inf")), batch[1])

    return loss


def train_task(model: nn.Module, stream, task: int, *, epochs: int = 3, steps: int | None = None,
               batch_size: int = 64, lr: float = 1e-3, weight_decay: float = 0.0, seed: int = 0,
               replay=None, head: str = "all", on_step: Callable | None = None, device: str | None = "cpu",
               progress: bool = False, clip: float | None = 1.0, warmup: float = 0.1) -> TrainResult:
    """Train ``model`` on task ``task`` of ``stream`` with :func:`lab.core.train.fit` (AdamW, warm-up, cosine).

    Arguments:
        model: a classifier ``(batch, d_input) -> (batch, n_classes)``.
        stream: a :class:`lab.datasets.streams.TaskStream`.
        task: the task's index.
        epochs / steps: passes over the data, or optimiser steps (``steps`` wins: an equal step budget).
        replay: a :class:`lab.datasets.streams.ReplayBuffer` whose kept data join the task's (None: none).
        head: ``all`` logits, the ``task``'s own classes, or the classes ``seen`` so far (the others masked).
        on_step: ``on_step(step, model, optimizer)`` after every optimiser step (a projection, a reset).
        device: where to train (the model comes back to the CPU).
        seed: the mini-batch order.

    Returns:
        :class:`lab.core.train.TrainResult` (its ``steps``, ``wall_time_s``, ``cpu_time_s`` add to a
        :class:`Compute`).
    """
    t = stream[task]
    x, y = t.x_train, t.y_train
    if replay is not None and len(replay):
        rx, ry = replay.tensors()
        x, y = torch.cat([x, rx]), torch.cat([y, ry])
    loss = _masked(model, _allowed(stream, task, head), stream.n_classes)
    return fit(model, x, y, loss=loss, epochs=None if steps else epochs, steps=steps, batch_size=batch_size,
               lr=lr, weight_decay=weight_decay, seed=seed, on_step=on_step, device=device, progress=progress,
               desc=f"task {task}", clip=clip, warmup=warmup)


@torch.no_grad()
def evaluate_task(model: nn.Module, stream, j: int, head: str = "all", after: int | None = None) -> float:
    """Test accuracy (%) of ``model`` on task ``j`` of ``stream``; with ``head="seen"`` the logits are restricted to
    the classes seen up to task ``after`` (default ``j``), with ``head="task"`` to task ``j``'s."""
    t = stream[j]
    was = model.training
    model.eval()
    logits = model(t.x_test)  # (n, n_classes)
    classes = _allowed(stream, j if after is None or head == "task" else after, head)
    if classes is not None:
        keep = torch.zeros(logits.shape[1], dtype=torch.bool)
        keep[list(classes)] = True
        logits = logits.masked_fill(~keep, float("-inf"))
    model.train(was)
    return 100.0 * float((logits.argmax(-1) == t.y_test).float().mean())


def evaluate_stream(model: nn.Module, stream, head: str = "all", after: int | None = None) -> np.ndarray:
    """One row of the accuracy matrix: the test accuracy (%) on every task of ``stream``, ``(T,)``; ``after`` is the
    task just trained (for ``head="seen"``)."""
    return np.array([evaluate_task(model, stream, j, head, after) for j in range(len(stream))])
