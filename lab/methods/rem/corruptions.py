"""Corruptions of a training set, from irregular to regular, and the discovered part of each.

* ``random``: a ``fraction`` of the examples get a label drawn uniformly from the other nine classes: nothing is
  shared between corrupted examples, so the model can only memorise them one by one.
* ``pair``: examples of paired classes, e.g. 3 and 8, swap labels (a share of each class of the pairs, in total
  ``fraction`` of the training set): a systematic confusion, regular within each pair.
* ``backdoor``: a ``fraction`` of random exemplars of every class carry a trigger (a patch of bright inputs at a
  fixed place) and the target label: one shared concept, learned from any of them.

A corruption never touches the test set; Healed is measured on the corrupted training examples (their inputs as
corrupted, their true labels). :func:`discover` draws the known part ``D_f`` of the corrupted set ``D_c`` for a
discovery rate; the retain set is everything else (clean examples and the undiscovered corrupted ones).

These generators live here because REM is the lab's only method that unlearns corrupted data; move them to
``lab/datasets`` when a second method needs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lab.checks import bad_value, check_int, check_real

__all__ = ["FLIP_PAIRS", "Corrupted", "corrupt", "discover", "patch"]

#: the class pairs of the pair-flip corruption, in the order they are used
FLIP_PAIRS = ((1, 7), (3, 8), (4, 9), (5, 6), (0, 2))
#: how many inputs the backdoor patch sets (the last ones: the bottom-right corner of a digit, the end of MNIST-1D)
PATCH_SIZE = 4


@dataclass(frozen=True)
class Corrupted:
    """A corrupted training set.

    Attributes:
        kind: ``random``, ``pair`` or ``backdoor``.
        x: ``(n, d)`` float32 inputs (backdoor examples patched). y: ``(n,)`` int64 training labels (corrupted
            where ``index`` says). y_true: ``(n,)`` the true labels.
        index: ``(k,)`` int64 positions of the corrupted examples, in a random order (the discovery order).
    """

    kind: str
    x: torch.Tensor
    y: torch.Tensor
    y_true: torch.Tensor
    index: torch.Tensor

    @property
    def corrupted(self) -> torch.Tensor:
        """``(n,)`` bool: which examples are corrupted."""
        out = torch.zeros(len(self.y), dtype=torch.bool)
        out[self.index] = True
        return out


def patch(x: torch.Tensor, value: float) -> torch.Tensor:
    """``x`` ``(n, d)`` with the trigger: its last :data:`PATCH_SIZE` inputs set to ``value`` (a copy)."""
    out = x.clone()
    out[:, -PATCH_SIZE:] = value
    return out


def corrupt(kind: str, x: torch.Tensor, y: torch.Tensor, *, fraction: float, seed: int, n_pairs: int = 2,
            target: int = 0, n_classes: int = 10) -> Corrupted:
    """Corrupt ``fraction`` of a training set ``(x (n, d), y (n,))``.

    Arguments:
        kind: ``random`` (labels drawn from the other classes), ``pair`` (the first ``n_pairs`` of
            :data:`FLIP_PAIRS` swap labels), ``backdoor`` (a patch and the label ``target``, on examples of the
            other classes).
        fraction: share of the whole set to corrupt, in (0, 0.5].
        seed: the draw.
    """
    check_real("fraction", fraction, 0.0, 0.5, lo_open=True)
    check_int("n_pairs", n_pairs, 1, len(FLIP_PAIRS))
    check_int("target", target, 0, n_classes - 1)
    rng = np.random.default_rng([seed, 17])
    n = len(y)
    k = max(1, int(round(fraction * n)))
    labels = y.numpy()
    x_new, y_new = x.clone(), y.clone()
    if kind == "random":
        index = rng.choice(n, size=k, replace=False)
        shift = rng.integers(1, n_classes, size=k)  # never the true label
        y_new[index] = torch.from_numpy((labels[index] + shift) % n_classes)
    elif kind == "pair":
        pairs = FLIP_PAIRS[:n_pairs]
        partner = {a: b for p in pairs for a, b in (p, p[::-1])}
        pool = np.flatnonzero(np.isin(labels, list(partner)))
        if k > len(pool):
            raise bad_value("fraction", fraction, f"at most {len(pool) / n:.3f} for {n_pairs} pair(s) of classes")
        index = rng.choice(pool, size=k, replace=False)
        y_new[index] = torch.tensor([partner[int(c)] for c in labels[index]], dtype=y.dtype)
    elif kind == "backdoor":
        pool = np.flatnonzero(labels != target)
        index = rng.choice(pool, size=min(k, len(pool)), replace=False)
        bright = float(x.max())
        x_new[index] = patch(x[index], bright)
        y_new[index] = target
    else:
        raise bad_value("corruption", kind, "one of 'random', 'pair', 'backdoor'")
    return Corrupted(kind, x_new, y_new, y.clone(), torch.from_numpy(rng.permutation(index)).long())


def discover(data: Corrupted, rate: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The discovered corrupted examples ``D_f`` (the first ``ceil(rate k)`` of the discovery order, at least one)
    and the retain set (every other example), as index tensors.

    Arguments:
        rate: the discovery rate, in (0, 1].
    Returns:
        ``(forget (m,), retain (n - m,))`` int64 indices into the training set.
    """
    check_real("discovery_rate", rate, 0.0, 1.0, lo_open=True)
    k = len(data.index)
    m = min(k, max(1, int(np.ceil(rate * k - 1e-9))))
    forget = data.index[:m]
    keep = torch.ones(len(data.y), dtype=torch.bool)
    keep[forget] = False
    return forget, torch.nonzero(keep).ravel()
