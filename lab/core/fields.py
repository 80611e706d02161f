"""The Config fields shared by the methods that train sequence models: bounded field types and
:class:`SequenceTaskConfig`. Light on purpose (no torch): every method's ``config.py`` may import it, and
``lab list``, ``lab --help`` and ``lab run SLUG --fields`` read the configs without importing torch.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from lab.checks import Choices, Range
from lab.core.runtime import RuntimeConfig
from lab.datasets.sequences import TASKS

__all__ = ["Layers", "ModelWidth", "Rate", "Seeds", "SequenceTaskConfig", "States", "WeightDecay"]

#: bounded field types, for a method that changes a field's quick default (``n_layers: Layers = 1``)
Layers = Annotated[int, Range(1, 16)]
ModelWidth = Annotated[int, Range(2, 1024)]
States = Annotated[int, Range(1, 4096)]
Rate = Annotated[float, Range(0.0, 1.0, lo_open=True)]
WeightDecay = Annotated[float, Range(0.0, 1.0)]
Seeds = Annotated[int, Range(1, 100)]


@dataclasses.dataclass(frozen=True)
class SequenceTaskConfig(RuntimeConfig):
    """Config fields of a method that trains sequence classifiers (mix into a ``BaseConfig`` subclass)."""

    dataset: Annotated[str, Choices(*TASKS)] = "digits"
    """Sequence task (lab.datasets.sequences.TASKS): sklearn digits read pixel by pixel (length 64) or MNIST-1D
    (length 40)."""
    permuted: bool = False
    """Apply a fixed random permutation of the time steps (the permuted variant of the task)."""
    n_train: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_train training sequences (0: all)."""
    n_test: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_test test sequences (0: all)."""
    n_layers: Layers = 4
    """Residual SSM blocks per model."""
    d_model: ModelWidth = 32
    """Features H of each block."""
    d_state: States = 64
    """Complex states per layer at the start (each one a conjugate pair of the real system)."""
    epochs: Annotated[int, Range(1, 10_000)] = 20
    """Training epochs."""
    batch_size: Annotated[int, Range(1, 100_000)] = 64
    """Mini-batch size."""
    lr: Rate = 5e-3
    """Peak learning rate (AdamW, warm-up then cosine decay: lab.core.train.lr_factor)."""
    ssm_lr: Rate = 2e-3
    """Learning rate of the recurrence parameters (eigenvalues, step sizes), without weight decay."""
    weight_decay: WeightDecay = 0.05
    """AdamW weight decay of the matrices."""
    n_seeds: Seeds = 1
    """Independently trained models per variant (seeds seed, seed+1, ...)."""

    #: the fields that determine a model's trained weights (with the seed and the mixer)
    TRAINING_FIELDS = ("dataset", "permuted", "n_train", "n_layers", "d_model", "d_state", "epochs", "batch_size",
                       "lr", "ssm_lr", "weight_decay")

    @property
    def seeds(self) -> tuple[int, ...]:
        """The training seeds: ``seed, seed + 1, ..., seed + n_seeds - 1`` (``seed`` is BaseConfig's)."""
        return tuple(self.seed + k for k in range(self.n_seeds))  # type: ignore[attr-defined]

    def training_key(self, **extra: Any) -> dict[str, Any]:
        """Everything of this config that determines trained weights, plus ``extra`` (mixer, seed, a format
        version): the key of :func:`lab.cache.cached_model`."""
        return {**{n: getattr(self, n) for n in self.TRAINING_FIELDS}, **extra}

    def model_size(self) -> dict[str, int]:
        """``d_model``, ``n_layers``, ``d_state`` as keywords of :func:`build_classifier`."""
        return {"d_model": self.d_model, "n_layers": self.n_layers, "d_state": self.d_state}
