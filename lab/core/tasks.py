"""Shared building blocks of the methods that train sequence models on the lab's sequence tasks.

* :class:`SequenceTaskConfig`: the config fields every such method has (the task, its size, the model's size, the
  training schedule, seeds; threads and device from :class:`lab.core.runtime.RuntimeConfig`), each with its bounds
  and doc. A method's Config subclasses it together with :class:`lab.config.BaseConfig`::

      @dataclasses.dataclass(frozen=True)
      class Config(SequenceTaskConfig, BaseConfig):
          n_layers: Layers = 1        # another quick default: one line, bounds and doc inherited
          tau: Annotated[float, Range(0, 1, lo_open=True)] = 0.02
          '''The method's own field.'''

* :func:`load_task`: the config's task (from :data:`lab.datasets.sequences.TASKS`), permuted and cut to size;
* :func:`build_classifier`: a :class:`lab.core.models.SequenceClassifier` for a task with one of the SSM mixers,
  whose layer settings (:data:`MIXER_KWARGS`) live here only;
* :func:`fit_classifier`, :func:`accuracy_on_test`, :func:`total_steps`: the config's training schedule on
  :func:`lab.core.train.fit`, and the test accuracy in percent;
* :meth:`SequenceTaskConfig.training_key`: the fields that determine trained weights (a cache key);
* :data:`REFERENCE_ACCURACY`, :data:`REFERENCE_MARGIN`: a standard classifier's published accuracy on each task,
  the bar of the claims' competence checks ("this model learned its task").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lab.checks import check_choice
from lab.core.fields import (  # re-exported: the sequence methods' config fields
    Layers,
    ModelWidth,
    Rate,
    Seeds,
    SequenceTaskConfig,
    States,
    WeightDecay,
)
from lab.core.models import SequenceClassifier
from lab.core.train import TrainResult, evaluate, fit
from lab.datasets.sequences import SequenceTask, load_sequence_task
from lab.datasets.tokens import IGNORE, TokenTask

__all__ = ["accuracy_by_position", "MIXERS", "MIXER_KWARGS", "Layers", "ModelWidth", "Rate", "Seeds",
           "SequenceTaskConfig", "States",
           "WeightDecay", "build_classifier", "fit_classifier", "load_task", "accuracy_on_test", "total_steps"]

#: per-mixer layer settings of the sequence classifiers: LRU's ring initialisation |λ| in [0.5, 0.99] suits the
#: tasks' lengths (40-64 steps); S5 keeps its HiPPO initialisation
MIXER_KWARGS: dict[str, dict[str, Any]] = {"lru": {"r_min": 0.5, "r_max": 0.99}, "s5": {}}
#: the mixers :func:`build_classifier` offers (see :mod:`lab.core.ssm`)
MIXERS = ("lru", "s5", "mamba", "mamba2")

def load_task(cfg: SequenceTaskConfig) -> SequenceTask:
    """The config's task: loaded (cached), permuted when asked, cut to ``n_train`` / ``n_test`` (0: all)."""
    task = load_sequence_task(cfg.dataset, permuted=cfg.permuted)
    return task.subset(cfg.n_train or None, cfg.n_test or None)


def build_classifier(task: SequenceTask, mixer: str = "lru", *, d_model: int = 32, n_layers: int = 2,
                     d_state: int | list[int] = 64, mixer_kwargs: dict[str, Any] | None = None,
                     **options: Any) -> SequenceClassifier:
    """A sequence classifier for ``task``: linear encoder, ``n_layers`` residual blocks of ``mixer``, mean pooling,
    linear head. Draws its initial weights from torch's global generator (seed it first).

    Arguments:
        task: gives the input features and the number of classes.
        mixer: one of :data:`MIXERS`; its settings come from :data:`MIXER_KWARGS`, updated by ``mixer_kwargs``.
        d_model, n_layers, d_state: the model's size (``d_state`` may be one size per layer).
        options: further keywords of :class:`lab.core.models.SequenceClassifier` (``dropout``, ``pooling``).
    """
    check_choice("mixer", mixer, MIXERS)
    kwargs = {**MIXER_KWARGS.get(mixer, {}), **(mixer_kwargs or {})}
    return SequenceClassifier(task.d_input, task.n_classes, kind=mixer, d_model=d_model, n_layers=n_layers,
                              d_state=d_state, mixer_kwargs=kwargs, **options)


def total_steps(cfg: SequenceTaskConfig, task: SequenceTask) -> int:
    """Optimiser steps of a training run: ``epochs`` times the mini-batches per epoch."""
    return cfg.epochs * math.ceil(len(task.x_train) / cfg.batch_size)


def fit_classifier(model: torch.nn.Module, task: SequenceTask, cfg: SequenceTaskConfig, seed: int,
                   **options: Any) -> TrainResult:
    """Train ``model`` on the task's training set with the config's schedule (:func:`lab.core.train.fit`).

    Arguments:
        seed: the mini-batch order's seed.
        options: further keywords of :func:`lab.core.train.fit` (``progress``, ``desc``, ``on_step``,
            ``callback``, ``eval_every``; ``eval_data`` defaults to nothing).
    """
    return fit(model, task.x_train, task.y_train, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
               ssm_lr=cfg.ssm_lr, weight_decay=cfg.weight_decay, seed=seed, device=cfg.device, **options)


def accuracy_on_test(model: torch.nn.Module, task: SequenceTask) -> float:
    """Test accuracy of a classifier on ``task``, in percent (the whole test set in one batch)."""
    return 100.0 * evaluate(model, task.x_test, task.y_test, batch_size=max(1, len(task.x_test)))[0]


#: a standard classifier's published test accuracy per task (%), with its source: what a competence check holds a
#: trained classifier to (within :data:`REFERENCE_MARGIN`); permuting the time steps leaves an SVM on the pixels
#: unchanged, and is MNIST-1D's "shuffle" row
REFERENCE_ACCURACY: dict[str, tuple[float, str]] = {
    "digits": (97.0, "an RBF SVM, scikit-learn's 'Recognizing hand-written digits' example"),
    "pdigits": (97.0, "an RBF SVM, scikit-learn's 'Recognizing hand-written digits' example"),
    "mnist1d": (91.0, "a GRU, the mnist1d README (Greydanus 2020)"),
    "pmnist1d": (57.0, "a GRU on shuffled MNIST-1D, the mnist1d README (Greydanus 2020)"),
}

#: how far below its task's reference a small untuned model may be and still count as having learned the task (pt)
REFERENCE_MARGIN = 10.0


@torch.no_grad()
def accuracy_by_position(model: torch.nn.Module, task: TokenTask, batch_size: int = 256) -> np.ndarray:
    """Share of correct per-position predictions of ``model`` (tokens -> logits ``(b, L, classes)``) on a token task,
    over its labelled examples at each position (NaN where none is labelled).

    Returns:
        ``(length,)`` in [0, 1].
    """
    x, y = task.tensors()
    correct, labelled = torch.zeros(task.length), torch.zeros(task.length)
    for i in range(0, len(x), batch_size):
        pred = model(x[i: i + batch_size]).argmax(-1)  # (b, L)
        yb = y[i: i + batch_size]
        mask = yb != IGNORE
        correct += ((pred == yb) & mask).sum(0)
        labelled += mask.sum(0)
    out = (correct / labelled.clamp_min(1)).numpy().astype(float)
    out[labelled.numpy() == 0] = np.nan
    return out
