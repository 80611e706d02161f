"""Task streams for continual learning, and replay buffers that hold a set share of past data.

Two ways to cut a classification data set into a sequence of tasks (van de Ven, Tuytelaars & Tolias 2022, "Three
types of incremental learning"):

* **permuted** (domain-incremental): every task holds the whole data set with its input features reordered by a fixed
  random permutation of its own (task 0 keeps the identity when ``identity_first``); the labels stay the same ten
  classes. The network must learn a new input mapping per task without forgetting the old ones (pMNIST).
* **split** (class-incremental): the classes are dealt out in groups of ``classes_per_task`` (ten digits -> five
  tasks of two), in ``class_order`` (default: a seeded shuffle, or 0..9 with ``class_seed=None``). Labels stay global,
  so a single head must tell apart every class seen so far.

The data come from :mod:`lab.datasets.sequences` (``mnist1d``: the ``mnist1d`` package's own generator, length 40;
``digits``: scikit-learn's 8 x 8 digits, 64 pixels), flattened to feature vectors and standardised with the training
set's mean and standard deviation. A stream is assembled once and cached as a NetCDF file by
:func:`lab.cache.cached_dataset` (key: every argument and a format version), and memoised in the process.

:class:`ReplayBuffer` keeps a share ``replay_share`` in [0, 1] of every task's training data once the task is done,
chosen at random (``policy="reservoir"``; with a fixed ``capacity`` it is Vitter's reservoir sampling over all the
examples seen) or class by class (``policy="exemplar"``: the same number per class, the examples nearest their
class mean first, as iCaRL's herding does in spirit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import xarray as xr

from lab.cache import cached_dataset, data_root, memo
from lab.checks import bad_value, check_choice, check_int, check_real

__all__ = ["KINDS", "POLICIES", "SOURCES", "ReplayBuffer", "StreamTask", "TaskStream", "task_stream"]

#: bump when the stream builder changes (invalidates the cache)
VERSION = 1
#: the ways to cut a data set into tasks
KINDS = ("permuted", "split")
#: the data sets a stream can come from (both 10 classes)
SOURCES = ("mnist1d", "digits")
#: how a replay buffer chooses what to keep
POLICIES = ("reservoir", "exemplar")
N_CLASSES = 10


@dataclass(frozen=True)
class StreamTask:
    """One task of a stream.

    Attributes:
        index: the task's place in the stream (0-based).
        classes: the classes it contains (all ten for a permuted stream).
        x_train, x_test: ``(n, d_input)`` float32 inputs. y_train, y_test: ``(n,)`` int64 global labels.
        permutation: ``(d_input,)`` the feature order of a permuted task (None for a split task).
    """

    index: int
    classes: tuple[int, ...]
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    permutation: np.ndarray | None = None


@dataclass(frozen=True)
class TaskStream:
    """A sequence of classification tasks sharing one input space and one label space.

    Attributes:
        name: e.g. ``permuted-mnist1d`` or ``split-digits``.
        kind: ``permuted`` (domain-incremental) or ``split`` (class-incremental).
        tasks: the tasks in training order.
        n_classes: size of the label space (10).
    """

    name: str
    kind: str
    tasks: tuple[StreamTask, ...]
    n_classes: int = N_CLASSES

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, i: int) -> StreamTask:
        return self.tasks[i]

    def __iter__(self):
        return iter(self.tasks)

    @property
    def d_input(self) -> int:
        return int(self.tasks[0].x_train.shape[1])

    def seen_classes(self, i: int) -> tuple[int, ...]:
        """The classes of tasks ``0..i`` (sorted)."""
        return tuple(sorted({c for t in self.tasks[: i + 1] for c in t.classes}))


# --------------------------------------------------------------------------------------------------------------------
# Building and caching a stream
# --------------------------------------------------------------------------------------------------------------------
def _base(source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The source's flattened, standardised data: ``x_train (n, d)``, ``y_train (n,)``, ``x_test``, ``y_test``."""
    from lab.datasets.sequences import sequence_dataset

    ds = sequence_dataset(source)
    x_tr, x_te = ds.x_train.values.astype(np.float64), ds.x_test.values.astype(np.float64)
    mean, std = x_tr.mean(), x_tr.std()
    return ((x_tr - mean) / std).astype(np.float32), ds.y_train.values.astype(np.int64), \
        ((x_te - mean) / std).astype(np.float32), ds.y_test.values.astype(np.int64)


def _build(kind: str, source: str, n_tasks: int, classes_per_task: int, seed: int, identity_first: bool,
           class_order: tuple[int, ...], n_train: int, n_test: int) -> xr.Dataset:
    x_tr, y_tr, x_te, y_te = _base(source)
    rng = np.random.default_rng([seed, 7])
    d = x_tr.shape[1]
    if kind == "permuted":
        keep_tr = np.sort(rng.permutation(len(x_tr))[:n_train]) if n_train else np.arange(len(x_tr))
        keep_te = np.sort(rng.permutation(len(x_te))[:n_test]) if n_test else np.arange(len(x_te))
        perms = np.stack([np.arange(d) if (t == 0 and identity_first) else rng.permutation(d)
                          for t in range(n_tasks)])  # (task, feature)
        xs_tr = np.stack([x_tr[keep_tr][:, p] for p in perms])  # (task, n, d)
        xs_te = np.stack([x_te[keep_te][:, p] for p in perms])
        ys_tr, ys_te = np.tile(y_tr[keep_tr], (n_tasks, 1)), np.tile(y_te[keep_te], (n_tasks, 1))
        classes = np.tile(np.arange(N_CLASSES), (n_tasks, 1))
    else:
        perms = np.tile(np.arange(d), (n_tasks, 1))
        classes = np.asarray(class_order[: n_tasks * classes_per_task]).reshape(n_tasks, classes_per_task)
        parts_tr, parts_te = [], []
        for cls in classes:
            idx_tr = np.flatnonzero(np.isin(y_tr, cls))
            idx_te = np.flatnonzero(np.isin(y_te, cls))
            parts_tr.append(np.sort(rng.permutation(idx_tr)[: n_train or None]))
            parts_te.append(np.sort(rng.permutation(idx_te)[: n_test or None]))
        # tasks may differ in size: pad with -1 labels, cut on load
        m_tr, m_te = max(map(len, parts_tr)), max(map(len, parts_te))
        xs_tr, ys_tr = np.zeros((n_tasks, m_tr, d), np.float32), np.full((n_tasks, m_tr), -1, np.int64)
        xs_te, ys_te = np.zeros((n_tasks, m_te, d), np.float32), np.full((n_tasks, m_te), -1, np.int64)
        for t, (a, b) in enumerate(zip(parts_tr, parts_te)):
            xs_tr[t, : len(a)], ys_tr[t, : len(a)] = x_tr[a], y_tr[a]
            xs_te[t, : len(b)], ys_te[t, : len(b)] = x_te[b], y_te[b]
    return xr.Dataset(
        {
            "x_train": (("task", "train", "feature"), xs_tr, {"long_name": "training inputs", "units": "1"}),
            "y_train": (("task", "train"), ys_tr, {"long_name": "class (-1: padding)", "units": "1"}),
            "x_test": (("task", "test", "feature"), xs_te, {"long_name": "test inputs", "units": "1"}),
            "y_test": (("task", "test"), ys_te, {"long_name": "class (-1: padding)", "units": "1"}),
            "permutation": (("task", "feature"), perms, {"long_name": "feature order of each task", "units": "1"}),
            "classes": (("task", "slot"), classes, {"long_name": "classes of each task", "units": "1"}),
        },
        attrs={"kind": kind, "source": source},
    )


def _check_stream(n_tasks: int, d: int):
    def validate(ds: xr.Dataset) -> None:
        if ds.sizes["task"] != n_tasks or ds.sizes["feature"] != d:
            raise ValueError(f"expected {n_tasks} tasks of {d} features, found {dict(ds.sizes)}")
        if not np.isfinite(ds.x_train.values).all():
            raise ValueError("non-finite inputs")

    return validate


def task_stream(kind: Literal["permuted", "split"] = "permuted", source: Literal["mnist1d", "digits"] = "mnist1d", *,
                n_tasks: int | None = None, classes_per_task: int = 2, seed: int = 0, identity_first: bool = True,
                class_order: tuple[int, ...] | None = None, n_train: int = 0, n_test: int = 0,
                root=None) -> TaskStream:
    """A stream of tasks (cached on disk, memoised in the process).

    Arguments:
        kind: ``permuted`` (domain-incremental) or ``split`` (class-incremental).
        source: ``mnist1d`` (40 features) or ``digits`` (64 features).
        n_tasks: tasks in the stream (default: 10 permuted, ``10 // classes_per_task`` split).
        classes_per_task: classes per split task (must divide into the ten classes at least ``n_tasks`` times).
        seed: seeds the permutations, the class order (unless given) and the subsets.
        identity_first: a permuted stream's first task keeps the original feature order.
        class_order: the ten classes in the order a split stream deals them (default: a seeded shuffle).
        n_train, n_test: a permuted task's training and test examples (a seeded subset; 0: all); for a split
            task, at most that many per task.
        root: cache directory.

    Returns:
        :class:`TaskStream`.
    """
    check_choice("kind", kind, KINDS)
    check_choice("source", source, SOURCES)
    check_int("seed", seed, 0)
    check_int("n_train", n_train, 0)
    check_int("n_test", n_test, 0)
    if kind == "split":
        check_int("classes_per_task", classes_per_task, 1, N_CLASSES)
        most = N_CLASSES // classes_per_task
        n_tasks = most if n_tasks is None else check_int("n_tasks", n_tasks, 1, most)
        if class_order is None:
            class_order = tuple(int(c) for c in np.random.default_rng([seed, 3]).permutation(N_CLASSES))
        elif sorted(class_order) != list(range(N_CLASSES)):
            raise bad_value("class_order", class_order, "a permutation of 0..9")
    else:
        n_tasks = 10 if n_tasks is None else check_int("n_tasks", n_tasks, 1, 1000)
        classes_per_task, class_order = N_CLASSES, tuple(range(N_CLASSES))
    # the memo is keyed by the data folder too: a stream read from one folder (a test's LAB_DATA_DIR) is not handed
    # to a caller who reads another
    return _stream(kind, source, int(n_tasks), int(classes_per_task), int(seed), bool(identity_first),
                   tuple(int(c) for c in class_order), int(n_train), int(n_test), str(data_root(root)))


@memo(16)
def _stream(kind, source, n_tasks, classes_per_task, seed, identity_first, class_order, n_train, n_test, root):
    cfg = {"kind": kind, "source": source, "n_tasks": n_tasks, "classes_per_task": classes_per_task, "seed": seed,
           "identity_first": identity_first, "class_order": list(class_order), "n_train": n_train,
           "n_test": n_test, "version": VERSION}
    d = {"mnist1d": 40, "digits": 64}[source]
    ds = cached_dataset(f"stream-{kind}-{source}", cfg,
                        lambda: _build(kind, source, n_tasks, classes_per_task, seed, identity_first, class_order,
                                       n_train, n_test),
                        root=root, validate=_check_stream(n_tasks, d))
    tasks = []
    for t in range(n_tasks):
        y_tr, y_te = ds.y_train.values[t], ds.y_test.values[t]
        k_tr, k_te = y_tr >= 0, y_te >= 0
        tasks.append(StreamTask(
            index=t,
            classes=tuple(int(c) for c in ds.classes.values[t]),
            x_train=torch.from_numpy(np.ascontiguousarray(ds.x_train.values[t][k_tr])),
            y_train=torch.from_numpy(y_tr[k_tr].astype(np.int64)),
            x_test=torch.from_numpy(np.ascontiguousarray(ds.x_test.values[t][k_te])),
            y_test=torch.from_numpy(y_te[k_te].astype(np.int64)),
            permutation=ds.permutation.values[t].copy() if kind == "permuted" else None,
        ))
    return TaskStream(name=f"{kind}-{source}", kind=kind, tasks=tuple(tasks))


# --------------------------------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------------------------------
@dataclass
class ReplayBuffer:
    """Past training data kept for replay.

    Arguments:
        replay_share: the share in [0, 1] of every finished task's training data to keep (0: no replay, 1: all).
        policy: ``reservoir`` (a uniform random choice) or ``exemplar`` (the same number per class, nearest the
            class mean first).
        capacity: a fixed number of examples instead of a share (reservoir: Vitter's algorithm R over every example
            seen; exemplar: ``capacity // classes seen`` per class). None: ``replay_share`` of each task.
        seed: seeds the random choices.

    Attributes:
        x: ``(m, d)`` kept inputs; y: ``(m,)`` their labels; task: ``(m,)`` the task each came from.
    """

    replay_share: float = 0.1
    policy: str = "reservoir"
    capacity: int | None = None
    seed: int = 0
    x: torch.Tensor = field(default=None, repr=False)  # type: ignore[assignment]
    y: torch.Tensor = field(default=None, repr=False)  # type: ignore[assignment]
    task: torch.Tensor = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.replay_share = check_real("replay_share", self.replay_share, 0.0, 1.0)
        check_choice("policy", self.policy, POLICIES)
        if self.capacity is not None:
            self.capacity = check_int("capacity", self.capacity, 0)
        self._rng = np.random.default_rng([self.seed, 11])
        self._seen = 0  # examples offered so far (reservoir with a fixed capacity)
        self._ranked: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # exemplar: class -> (x ranked, task)
        if self.x is None:
            self.x, self.y, self.task = torch.zeros(0, 0), torch.zeros(0, dtype=torch.int64), torch.zeros(
                0, dtype=torch.int64)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def add(self, x: torch.Tensor, y: torch.Tensor, task: int) -> None:
        """Offer a finished task's training data ``x (n, d)``, ``y (n,)``; keep what the policy chooses."""
        if self.policy == "reservoir":
            self._add_reservoir(x, y, task)
        else:
            self._add_exemplars(x, y, task)

    def add_task(self, t: StreamTask) -> None:
        """:meth:`add` a stream task's training data."""
        self.add(t.x_train, t.y_train, t.index)

    def _append(self, x, y, task) -> None:
        if len(self) == 0:
            self.x, self.y, self.task = x.clone(), y.clone(), task.clone()
        else:
            self.x, self.y, self.task = torch.cat([self.x, x]), torch.cat([self.y, y]), torch.cat([self.task, task])

    def _add_reservoir(self, x, y, task) -> None:
        n = len(y)
        tags = torch.full((n,), task, dtype=torch.int64)
        if self.capacity is None:
            keep = torch.from_numpy(np.sort(self._rng.permutation(n)[: int(round(self.replay_share * n))]))
            self._append(x[keep], y[keep], tags[keep])
            return
        for i in range(n):  # algorithm R: the i-th example seen replaces a random slot with probability cap / seen
            self._seen += 1
            if len(self) < self.capacity:
                self._append(x[i: i + 1], y[i: i + 1], tags[i: i + 1])
                continue
            j = int(self._rng.integers(self._seen))
            if j < self.capacity:
                self.x[j], self.y[j], self.task[j] = x[i], y[i], task

    def _add_exemplars(self, x, y, task) -> None:
        for c in torch.unique(y).tolist():
            xc = x[y == c]
            order = torch.argsort(torch.linalg.norm(xc - xc.mean(0), dim=1))  # nearest the class mean first
            if self.capacity is None:
                order = order[: int(round(self.replay_share * len(xc)))]
            self._ranked[int(c)] = (xc[order], torch.full((len(order),), task, dtype=torch.int64))
        per = None if self.capacity is None else self.capacity // max(1, len(self._ranked))
        xs, ys, ts = [], [], []
        for c, (xc, tc) in sorted(self._ranked.items()):
            xs.append(xc[:per])
            ys.append(torch.full((len(xs[-1]),), c, dtype=torch.int64))
            ts.append(tc[:per])
        self.x, self.y, self.task = torch.cat(xs), torch.cat(ys), torch.cat(ts)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept ``x (m, d)`` and ``y (m,)``."""
        return self.x, self.y

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A uniform mini-batch (with replacement) of the kept data: ``x (b, d)``, ``y (b,)``."""
        if len(self) == 0:
            raise ValueError("the replay buffer is empty")
        idx = torch.randint(len(self), (batch_size,), generator=generator)
        return self.x[idx], self.y[idx]
