"""Token tasks: the one format of the lab's synthetic sequence tasks (state tracking, associative recall, formal
languages), so a model, a trainer and a plot serve every task alike.

A :class:`TokenTask` holds integer inputs ``(n, length)`` and per-position integer targets ``(n, length)`` where
:data:`IGNORE` (-100, PyTorch's ``ignore_index``) marks positions that carry no label. Length-generalisation
experiments build one task per length (:func:`length_splits`): train at one length, test at several.

The generators live in :mod:`lab.datasets.state_tracking`, :mod:`lab.datasets.recall` and
:mod:`lab.datasets.languages`; :func:`lab.datasets.synthetic.make_task` is the one entry point by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:
    import torch

__all__ = ["IGNORE", "TokenTask", "length_splits", "with_start_token"]

#: target value of a position without a label (``torch.nn.functional.cross_entropy``'s default ``ignore_index``)
IGNORE = -100


@dataclass(frozen=True)
class TokenTask:
    """Integer sequences with per-position labels.

    Attributes:
        name: the task's name (a key of :data:`lab.datasets.synthetic.TASKS`).
        inputs: ``(n, length)`` int64 token ids in ``[0, vocab_size)``.
        targets: ``(n, length)`` int64 labels in ``[0, n_classes)``, or :data:`IGNORE` where a position has none.
        vocab_size: number of input tokens. n_classes: number of output classes.
        options: the generator's settings (for plots and cache keys).
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray
    vocab_size: int
    n_classes: int
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.inputs.shape != self.targets.shape or self.inputs.ndim != 2:
            raise ValueError(f"inputs {self.inputs.shape} and targets {self.targets.shape} must both be (n, length)")

    @property
    def n(self) -> int:
        return int(self.inputs.shape[0])

    @property
    def length(self) -> int:
        return int(self.inputs.shape[1])

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(inputs, targets)`` as int64 tensors, ready for :func:`lab.core.train.fit`."""
        import torch

        return torch.as_tensor(self.inputs, dtype=torch.long), torch.as_tensor(self.targets, dtype=torch.long)

    def to_dataset(self) -> xr.Dataset:
        """The task as an :class:`xarray.Dataset` (for :func:`lab.cache.cached_dataset`)."""
        attrs = {"name": self.name, "vocab_size": self.vocab_size, "n_classes": self.n_classes}
        attrs.update({f"option_{k}": v for k, v in self.options.items()})
        return xr.Dataset({"inputs": (("example", "position"), self.inputs.astype(np.int64)),
                           "targets": (("example", "position"), self.targets.astype(np.int64))}, attrs=attrs)

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> TokenTask:
        options = {k[len("option_"):]: v for k, v in ds.attrs.items() if k.startswith("option_")}
        return cls(str(ds.attrs["name"]), ds["inputs"].values.astype(np.int64), ds["targets"].values.astype(np.int64),
                   int(ds.attrs["vocab_size"]), int(ds.attrs["n_classes"]), options)


def length_splits(train_length: int, factors: tuple[int, ...] = (1, 2, 4)) -> dict[str, int]:
    """Named lengths of a length-generalisation experiment: ``{"train": L, "x2": 2L, "x4": 4L, ...}``."""
    out = {"train": int(train_length)}
    out.update({f"x{f}": int(train_length * f) for f in factors if f != 1})
    return out


def with_start_token(task: TokenTask) -> TokenTask:
    """``task`` with a start token (a new id, ``vocab_size``, unlabelled) before every sequence: a causal transformer
    without positions can count from it. Its options record ``start_token=True``."""
    n = task.n
    return TokenTask(task.name, np.concatenate([np.full((n, 1), task.vocab_size), task.inputs], 1),
                     np.concatenate([np.full((n, 1), IGNORE), task.targets], 1), task.vocab_size + 1,
                     task.n_classes, {**task.options, "start_token": True})
