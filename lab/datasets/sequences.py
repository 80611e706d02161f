"""Sequence classification tasks from data that ships inside packages, cached under ``data/``.

* ``digits``: scikit-learn's 8 x 8 handwritten digits (1797 images, 10 classes) read pixel by pixel in raster order:
  sequences of length 64 with one feature (intensity / 16, then standardised with the training set's mean and
  standard deviation). A stratified split (``test_fraction``, ``split_seed``).
* ``mnist1d``: MNIST-1D (Greydanus 2020), produced by the ``mnist1d`` package's own generator
  (``mnist1d.data.make_dataset`` with its default arguments: 4000 training and 1000 test sequences of length 40,
  10 classes), never downloaded.

Permuted variants (``permuted=True``) apply one fixed random permutation of the time steps (``permutation_seed``)
to every sequence, which destroys locality: the classic pMNIST-style test of long-range memory. The unpermuted data
are cached (:func:`lab.cache.cached_dataset`); the permutation is applied on load.

:data:`TASKS` is the one registry of task names (name -> loader); :func:`load_sequence_task` returns a
:class:`SequenceTask` with float32 inputs ``(n, length, 1)`` and int64 labels. The sequence-task config fields and
model builder shared by the methods are in :mod:`lab.core.tasks`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from lab.cache import cached_dataset
from lab.checks import bad_value

if TYPE_CHECKING:  # torch is imported when a task is loaded: the task names stay light for the configs
    import torch

__all__ = ["TASKS", "SequenceTask", "digits_dataset", "load_sequence_task", "mnist1d_dataset",
           "sequence_dataset"]

#: bump when a builder changes (invalidates the cache)
VERSION = 1


@dataclass(frozen=True)
class SequenceTask:
    """A classification task on sequences.

    Attributes:
        name: ``digits``, ``mnist1d`` (``p``-prefixed when permuted).
        x_train, x_test: ``(n, length, 1)`` float32 tensors. y_train, y_test: ``(n,)`` int64 tensors.
        n_classes: number of classes. permutation: the time permutation applied, or None.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    permutation: np.ndarray | None = None

    @property
    def length(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def d_input(self) -> int:
        return int(self.x_train.shape[2])

    def subset(self, n_train: int | None = None, n_test: int | None = None) -> SequenceTask:
        """The first ``n_train`` training and ``n_test`` test examples (for quick tests)."""
        return SequenceTask(self.name, self.x_train[:n_train], self.y_train[:n_train], self.x_test[:n_test],
                            self.y_test[:n_test], self.n_classes, self.permutation)


def _split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split: per class, a ``test_fraction`` share (rounded) goes to the test set."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        k = int(round(test_fraction * len(idx)))
        test.append(idx[:k])
        train.append(idx[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _build_digits(test_fraction: float, split_seed: int) -> xr.Dataset:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = data.images.reshape(len(data.images), 64).astype(np.float64) / 16.0  # raster order
    y = data.target.astype(np.int64)
    tr, te = _split(y, test_fraction, split_seed)
    mean, std = x[tr].mean(), x[tr].std()
    x = (x - mean) / std
    return _as_dataset(x[tr], y[tr], x[te], y[te], source="sklearn.datasets.load_digits, pixels in raster order")


def _build_mnist1d() -> xr.Dataset:
    from mnist1d.data import get_dataset_args, make_dataset

    from lab.rng import GLOBAL_RNG_LOCK

    # make_dataset seeds Python's and NumPy's global generators and draws from them: keep the caller's streams
    # untouched, and hold the lock so that no other thread (a dashboard's background job calling seed_everything)
    # reseeds them halfway, which would silently change the data set
    with GLOBAL_RNG_LOCK:
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            d = make_dataset(get_dataset_args())
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
    return _as_dataset(d["x"], d["y"], d["x_test"], d["y_test"],
                       source="mnist1d.data.make_dataset with get_dataset_args() defaults")


def _as_dataset(x_tr, y_tr, x_te, y_te, *, source: str) -> xr.Dataset:
    return xr.Dataset(
        {
            "x_train": (("train", "time"), np.asarray(x_tr, np.float32), {"long_name": "input sequence",
                                                                          "units": "1"}),
            "y_train": (("train",), np.asarray(y_tr, np.int64), {"long_name": "class", "units": "1"}),
            "x_test": (("test", "time"), np.asarray(x_te, np.float32), {"long_name": "input sequence",
                                                                        "units": "1"}),
            "y_test": (("test",), np.asarray(y_te, np.int64), {"long_name": "class", "units": "1"}),
        },
        attrs={"source": source},
    )


def _validator(length: int, n_classes: int = 10):
    def validate(ds: xr.Dataset) -> None:
        if ds.sizes["time"] != length:
            raise ValueError(f"expected sequences of length {length}, found {ds.sizes['time']}")
        for part in ("train", "test"):
            y = ds[f"y_{part}"].values
            if y.min() < 0 or y.max() >= n_classes:
                raise ValueError(f"labels outside [0, {n_classes})")
            if not np.isfinite(ds[f"x_{part}"].values).all():
                raise ValueError("non-finite inputs")

    return validate


def digits_dataset(*, test_fraction: float = 0.25, split_seed: int = 0, root=None) -> xr.Dataset:
    """sklearn's 8 x 8 digits read pixel by pixel, split stratified (``test_fraction``, ``split_seed``)."""
    if not 0.0 < test_fraction < 1.0:
        raise bad_value("test_fraction", test_fraction, "a number in (0, 1)")
    cfg = {"task": "digits", "test_fraction": float(test_fraction), "split_seed": int(split_seed), "version": VERSION}
    return cached_dataset("seq-digits", cfg, lambda: _build_digits(test_fraction, split_seed), root=root,
                          validate=_validator(64))


def mnist1d_dataset(*, root=None, **_split) -> xr.Dataset:
    """MNIST-1D from its own generator (length 40, its own fixed split: the split arguments do not apply)."""
    cfg = {"task": "mnist1d", "generator": "mnist1d.data.make_dataset", "args": "defaults", "version": VERSION}
    return cached_dataset("seq-mnist1d", cfg, _build_mnist1d, root=root, validate=_validator(40))


#: The lab's sequence classification tasks: name -> loader of its cached, unpermuted data
#: (``loader(test_fraction=..., split_seed=..., root=...) -> xarray.Dataset``). Config fields, the CLI and the
#: dashboards take their choices from here; a new task is one entry.
TASKS: dict[str, Callable[..., xr.Dataset]] = {"digits": digits_dataset, "mnist1d": mnist1d_dataset}


def sequence_dataset(name: str, *, test_fraction: float = 0.25, split_seed: int = 0, root=None) -> xr.Dataset:
    """The cached, unpermuted data of task ``name`` (one of :data:`TASKS`) as an xarray Dataset (dims ``train``,
    ``test``, ``time``).

    Arguments:
        name: a key of :data:`TASKS`.
        test_fraction, split_seed: the split, for tasks that make their own (digits).
        root: cache directory (default ``data/``).
    """
    if name not in TASKS:
        raise ValueError(f"unknown sequence task {name!r}; allowed: {', '.join(TASKS)}")
    return TASKS[name](test_fraction=test_fraction, split_seed=split_seed, root=root)


def load_sequence_task(name: str, *, permuted: bool = False, permutation_seed: int = 0, test_fraction: float = 0.25,
                       split_seed: int = 0, root=None) -> SequenceTask:
    """Load a sequence classification task (from the cache, building it on first use).

    Arguments:
        name: a key of :data:`TASKS`: ``digits`` (length 64) or ``mnist1d`` (length 40).
        permuted: apply a fixed random permutation of the time steps.
        permutation_seed: seed of that permutation.
        test_fraction, split_seed: the digits train/test split.
        root: cache directory.

    Returns:
        :class:`SequenceTask` with inputs ``(n, length, 1)``.
    """
    import torch

    ds = sequence_dataset(name, test_fraction=test_fraction, split_seed=split_seed, root=root)
    x_tr, x_te = ds.x_train.values, ds.x_test.values
    perm = None
    if permuted:
        perm = np.random.default_rng(permutation_seed).permutation(x_tr.shape[1])
        x_tr, x_te = x_tr[:, perm], x_te[:, perm]
    return SequenceTask(
        name=("p" if permuted else "") + name,
        x_train=torch.from_numpy(np.ascontiguousarray(x_tr))[..., None],
        y_train=torch.from_numpy(ds.y_train.values.astype(np.int64)),
        x_test=torch.from_numpy(np.ascontiguousarray(x_te))[..., None],
        y_test=torch.from_numpy(ds.y_test.values.astype(np.int64)),
        n_classes=10,
        permutation=perm,
    )
