"""Configuration of the REM experiments: corrupted training sets, discovery rates, unlearning methods."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.budget import Budget, mlp_weights, task_sizes, train_bytes, train_ops
from lab.config import BaseConfig, Choices, Each, Range
from lab.core.fields import Rate, Seeds, WeightDecay
from lab.core.runtime import RuntimeConfig

#: the corruptions, from the least to the most regular (the grid's regularity axis)
CORRUPTIONS = ("random", "pair", "backdoor")


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """REM: redirect the discovered corrupted data into extra units, then discard them (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(corruptions=("random", "backdoor"), discovery_rates=(0.5, 1.0), hidden=32, extra_units=16,
                   epochs=6, unlearn_epochs=2, n_train=400, n_test=200, n_seeds=1),
        "quick": {},
        "full": dict(discovery_rates=(0.1, 0.25, 0.5, 0.75, 1.0), dataset="mnist1d", hidden=256, extra_units=128,
                     epochs=200, unlearn_epochs=30, n_seeds=5),
    }

    dataset: Literal["digits", "mnist1d"] = "digits"
    """Training data, flattened for an MLP: sklearn's 8 x 8 digits (64 inputs) or MNIST-1D (40 inputs)."""
    n_train: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_train training examples (0: all)."""
    n_test: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_test test examples (0: all)."""
    corruptions: Annotated[tuple[str, ...], Choices(*CORRUPTIONS), Each(unique=True)] = CORRUPTIONS
    """Corruptions of the training set (the grid's regularity axis): random labels (no shared structure), class-pair
    flips (a systematic confusion), a backdoor patch (random exemplars of every class carry a trigger and the target
    label: one shared concept)."""
    corrupt_fraction: Annotated[float, Range(0.0, 0.5, lo_open=True)] = 0.2
    """Share of the training set that is corrupted (pair flips draw it from the paired classes only)."""
    flip_pairs: Annotated[int, Range(1, 5)] = 2
    """Class pairs of the pair-flip corruption: (1, 7), (3, 8), (4, 9), (5, 6), (0, 2), the first flip_pairs."""
    backdoor_target: Annotated[int, Range(0, 9)] = 0
    """Label the backdoor patch teaches."""
    discovery_rates: Annotated[tuple[float, ...], Range(0.0, 1.0, lo_open=True), Each(increasing=True)] = (
        0.1, 0.5, 1.0)
    """Shares of the corrupted data known at unlearning time (the grid's other axis; each in (0, 1])."""
    hidden: Annotated[int, Range(4, 4096)] = 128
    """Units of each hidden layer of the MLP."""
    n_hidden: Annotated[int, Range(1, 8)] = 2
    """Hidden layers of the MLP."""
    extra_units: Annotated[int, Range(1, 4096)] = 64
    """Units REM adds to each hidden layer at unlearning time (discarded afterwards)."""
    mask_density: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 0.2
    """Share of the extra units each example's fixed mask opens (example-tied dropout); the discovered corrupted
    examples share one mask of this density."""
    epochs: Annotated[int, Range(1, 10_000)] = 60
    """Epochs of the original model (trained on the corrupted set) and of the retrained one."""
    unlearn_epochs: Annotated[int, Range(1, 10_000)] = 10
    """Epochs over the training set of every unlearning method (fine-tuning, GA, NPO, REM: equal step budgets)."""
    batch_size: Annotated[int, Range(1, 100_000)] = 64
    """Mini-batch size (retain batches; forget batches have at most as many)."""
    lr: Rate = 3e-3
    """Peak learning rate of the original and retrained models (AdamW, warm-up then cosine decay)."""
    unlearn_lr: Rate = 1e-3
    """Peak learning rate of the unlearning methods."""
    weight_decay: WeightDecay = 0.0
    """AdamW weight decay (none: the original model memorises its corrupted labels, as large models do)."""
    npo_beta: Annotated[float, Range(0.0, 100.0, lo_open=True)] = 1.0
    """β of NPO's loss (2/β) log(1 + (π_θ/π_ref)^β) on the forget set."""
    forget_weight: Annotated[float, Range(0.0, 100.0)] = 1.0
    """Weight of the forget term (NPO, gradient ascent) against the retain cross-entropy."""
    n_seeds: Seeds = 3
    """Seeds (seed, seed+1, ...): each draws its own corruption, initial weights, masks and batches; the claims
    are means over seeds, with their spread."""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds of the run: ``seed, ..., seed + n_seeds - 1``."""
        return tuple(self.seed + k for k in range(self.n_seeds))

    def run_budget(self) -> Budget:
        """Work: per seed and corruption the original MLP (epochs over n_train), and per discovery rate a
        retrained one (epochs) and 7 unlearning runs of unlearn_epochs (fine-tuning, GA, NPO, REM, its schedule
        without expansion, without redirection and with other masks; REM's with extra_units more per hidden layer),
        6 operations per weight and example, and every model scored on the training and test sets. Memory: the
        model with AdamW's moments, a batch's activations, the data set."""
        n_train, n_test, d_in = task_sizes(self.dataset, self.n_train, self.n_test)
        widths = [d_in, *[self.hidden + self.extra_units] * self.n_hidden, 10]
        weights = mlp_weights(widths)
        rates = len(self.discovery_rates)
        examples = n_train * (self.epochs * (1 + rates) + 7 * rates * self.unlearn_epochs)
        cells = self.n_seeds * len(self.corruptions)
        work = cells * (train_ops(weights, examples, examples / self.batch_size)
                        + 9 * rates * 2.0 * weights * (n_train + n_test) * 3)
        memory = train_bytes(weights, 8.0 * self.batch_size * sum(widths)) + 4.0 * 8 * (n_train + n_test) * (
            d_in + sum(widths))
        return Budget(memory, work, "rem's trainings: n_seeds x corruptions x (1 + discovery rates) models of epochs "
                      "and 7 unlearning runs of unlearn_epochs over n_train examples",
                      ("epochs", "unlearn_epochs", "hidden", "n_hidden", "extra_units", "n_seeds", "n_train",
                       "discovery_rates", "batch_size"))
