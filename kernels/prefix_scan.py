"""Prefix scans for combines that need not be associative, and a saturating fixed-width linear scan.

A prefix-scannable model (Sequential-Parallel Duality, arXiv 2506.10918) aggregates chunk states with a learned
``combine(a, b)`` that is not associative, so the bracketing is part of the model. This module fixes one bracketing,
the static Blelloch tree with power-of-two blocks, and computes it two ways that agree exactly:

* :func:`prefix_scan` (training, parallel): an up-sweep reduces every aligned block of ``2^j`` chunks as
  ``T = combine(T(left half), T(right half))``; the prefix of the first ``n`` chunks is then
  ``P(n) = combine(P(n - low(n)), T(block ending at n))`` with ``low(n)`` the lowest set bit of ``n``: a fold over the
  blocks of ``n``'s binary digits, largest first (what Blelloch's down-sweep computes). Level by level the combines
  are independent, so a combine that takes stacks (``batched=True``) runs each level as one call, on strided
  slices and one gather per level (:func:`prefix_scan_stacked`, whose index plan is computed once per ``n``): no
  Python loop over chunks, ``O(log n)`` tensor calls. The list form (``batched=False``) is the reference it is
  tested against.
* :class:`StreamingPrefix` (inference, one chunk at a time): a binary counter of blocks. ``push(x)`` returns the
  prefix before ``x`` with the same bracketing, keeps at most ``floor(log2 n) + 1`` blocks (each holding its reduced
  state and the prefix before it) and makes at most two combine calls per chunk, amortised.

The identity is a flag, not a zero tensor: ``identity=None`` means the combine has none, and the exclusive prefix of
the first chunk is ``None``; a given identity is returned there and never passed to ``combine``.

:func:`saturating_scan` is ``h_t = clamp(a_t h_{t-1} + b_t)`` in a fixed-width integer range (int8 by default): the
saturating arithmetic of the temporal-logic expressiveness method, not associative either, so it runs in order:
a Numba kernel over rows (``backend="numba"``, the default on CPU), a torch loop over time (``backend="torch"``),
and :func:`saturating_scan_ref` in Python integers, the oracle both are tested against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from ._common import numba_threads_for

__all__ = ["StreamingPrefix", "prefix_scan", "prefix_scan_stacked", "saturating_scan", "saturating_scan_ref"]


def prefix_scan(combine: Callable[[Any, Any], Any], xs: Sequence[Any] | torch.Tensor, identity: Any = None, *,
                exclusive: bool = True, batched: bool = False) -> list[Any]:
    """Prefix states of ``xs`` under ``combine`` with the static power-of-two bracketing (module docstring).

    Arguments:
        combine: ``combine(a, b) -> state``; with ``batched=True`` it takes stacks ``(k, ...)`` and returns a stack.
        xs: the chunk states, a sequence, or a tensor ``(n, ...)`` (``batched=True`` needs a tensor).
        identity: returned as the exclusive prefix of the first chunk (None: the combine has no identity).
        exclusive: prefix before each chunk (``exclusive``) or through it.
        batched: run each level of the tree as one call of ``combine`` on stacked states.

    Returns:
        a list of ``n`` prefix states.
    """
    n = len(xs)
    if batched and not isinstance(xs, torch.Tensor):
        raise TypeError("batched=True needs xs as a tensor (n, ...) of stacked chunk states")
    if batched:
        inclusive = list(prefix_scan_stacked(combine, xs).unbind(0)) if n else []
        return [identity, *inclusive[:-1]] if exclusive and n else inclusive
    # up-sweep: T[(start, size)] for every aligned block of size 2^j inside [0, n)
    blocks: dict[tuple[int, int], Any] = {(i, 1): xs[i] for i in range(n)}
    size = 1
    while 2 * size <= n:
        for s in range(0, n - 2 * size + 1, 2 * size):
            blocks[(s, 2 * size)] = combine(blocks[(s, size)], blocks[(s + size, size)])
        size *= 2
    # down-sweep: P(m) = combine(P(m - low(m)), T(m - low(m), low(m))), in order of decreasing low(m)
    prefix: dict[int, Any] = {}
    for j in reversed(range(max(n, 1).bit_length())):
        for m in range(1 << j, n + 1, 2 << j):  # lowbit(m) = 2^j
            start = m - (1 << j)
            block = blocks[(start, 1 << j)]
            prefix[m] = block if start == 0 else combine(prefix[start], block)
    if exclusive:
        return [identity if i == 0 else prefix[i] for i in range(n)]
    return [prefix[i + 1] for i in range(n)]


@lru_cache(maxsize=256)
def _plan(n: int) -> tuple[tuple[tuple[torch.Tensor, int], ...], torch.Tensor]:
    """The down-sweep's gathers for ``n`` chunks.

    Level ``j`` (from the top) holds ``P(m)`` for ``m = 2^j (2k + 1) <= n``; its ``k``-th entry for ``k >= 1`` is
    ``combine(P(2^(j+1) k), T_j[2k])``. With the levels computed so far concatenated (top first), returns per level
    ``j`` (top first) the index of ``P(2^(j+1) k)`` for ``k = 1 .. K_j - 1`` in that concatenation and ``K_j``; and
    the permutation that puts the concatenation of every level in the order ``m = 1 .. n``.
    """
    top = n.bit_length() - 1
    where: dict[int, int] = {}  # m -> position in the concatenation of the levels done
    levels, done = [], 0
    for j in range(top, -1, -1):
        ms = np.arange(1 << j, n + 1, 2 << j)
        gather = torch.as_tensor([where[int(m) - (1 << j)] for m in ms[1:]], dtype=torch.long)
        levels.append((gather, len(ms)))
        where.update({int(m): done + i for i, m in enumerate(ms)})
        done += len(ms)
    order = torch.as_tensor([where[m] for m in range(1, n + 1)], dtype=torch.long)
    return tuple(levels), order


def prefix_scan_stacked(combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], xs: torch.Tensor
                        ) -> torch.Tensor:
    """The inclusive prefixes of :func:`prefix_scan` (same bracketing) as one tensor, level by level.

    Arguments:
        combine: takes stacks ``(k, ...)`` of left and right states and returns the stack of their combines.
        xs: the chunk states ``(n, ...)``, ``n >= 1``.

    Returns:
        ``(n, ...)``: entry ``i`` is the state through chunk ``i``. ``O(log n)`` calls of ``combine`` (one per
        level of the up-sweep, one per level of the down-sweep that has a combine), on strided slices and gathers
        whose indices are computed once per ``n``.
    """
    n = int(xs.shape[0])
    if n < 1:
        raise ValueError("xs must hold at least one chunk state (n >= 1)")
    ups = [xs]  # ups[j][i]: the block of 2^j chunks starting at i 2^j
    while ups[-1].shape[0] >= 2:
        t = ups[-1]
        k = t.shape[0] // 2
        ups.append(combine(t[0: 2 * k: 2], t[1: 2 * k: 2]))
    plan, order = _plan(n)
    done: list[torch.Tensor] = []
    for j, (gather, count) in zip(range(len(ups) - 1, -1, -1), plan):
        blocks = ups[j][0: 2 * count: 2]  # T_j[2k], k = 0 .. count - 1: the block ending at each m
        level = blocks[:1]
        if count > 1:
            before = torch.cat(done).index_select(0, gather)
            level = torch.cat([level, combine(before, blocks[1:])])
        done.append(level)
    return torch.cat(done).index_select(0, order)


class StreamingPrefix:
    """The prefix before each chunk, one chunk at a time, with :func:`prefix_scan`'s bracketing.

    Arguments:
        combine: ``combine(a, b) -> state``.
        identity: returned before the first chunk (None: the combine has no identity).

    Attributes:
        calls: combine calls so far. live_states: blocks held now (at most ``floor(log2 n) + 1``).
        max_live_states: the most blocks held at any time. count: chunks pushed.
    """

    def __init__(self, combine: Callable[[Any, Any], Any], identity: Any = None):
        self.combine = combine
        self.identity = identity
        self._blocks: list[list[Any]] = []  # [size, reduced state, prefix before the block (None: empty)]
        self._full: Any = None  # prefix through every chunk pushed
        self.count = 0
        self.calls = 0
        self.max_live_states = 0

    def _call(self, a, b):
        self.calls += 1
        return self.combine(a, b)

    @property
    def live_states(self) -> int:
        return len(self._blocks)

    def push(self, x: Any) -> Any:
        """Add chunk state ``x``; return the prefix of the chunks before it."""
        out = self.identity if self.count == 0 else self._full
        self._blocks.append([1, x, None if self.count == 0 else self._full])
        self.count += 1
        while len(self._blocks) >= 2 and self._blocks[-1][0] == self._blocks[-2][0]:
            size, right, _ = self._blocks.pop()
            _, left, before = self._blocks.pop()
            self._blocks.append([2 * size, self._call(left, right), before])
        self.max_live_states = max(self.max_live_states, len(self._blocks))
        _, last, before = self._blocks[-1]
        self._full = last if before is None else self._call(before, last)
        return out


def _check_saturating(a, b, h0, bits):
    if not isinstance(bits, int) or isinstance(bits, bool) or not 2 <= bits <= 32:
        raise ValueError(f"bits={bits!r} is not allowed; allowed: an integer in [2, 32]")
    for name, t in {"a": a, "b": b, "h0": h0}.items():
        if t is None:
            continue
        integer = isinstance(t, torch.Tensor) and not (t.dtype.is_floating_point or t.dtype.is_complex)
        if not integer or t.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if a.shape != b.shape or a.dim() < 1:
        raise ValueError(f"a has shape {tuple(a.shape)} and b {tuple(b.shape)}; equal shapes (..., length) required")
    if h0 is not None and tuple(h0.shape) != tuple(a.shape[:-1]):
        raise ValueError(f"h0 has shape {tuple(h0.shape)}; {tuple(a.shape[:-1])} is required")
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def saturating_scan(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None, *, bits: int = 8,
                    backend: str = "auto") -> torch.Tensor:
    """``h_t = clamp(a_t h_{t-1} + b_t, -2^(bits-1), 2^(bits-1) - 1)`` along the last axis, exactly, in integers.

    Arguments:
        a, b: integer tensors ``(..., length)``. h0: ``(...)`` or None (zeros). bits: the width (8: int8's range).
        backend: ``"numba"`` (a compiled loop per sequence, CPU), ``"torch"`` (a loop over time on whole tensors,
            any device) or ``"auto"`` (numba for CPU tensors, torch otherwise). Both give the same integers.

    Returns:
        h ``(..., length)`` as int64 (every value inside the ``bits``-wide range).
    """
    lo, hi = _check_saturating(a, b, h0, bits)
    if backend not in ("auto", "numba", "torch"):
        raise ValueError(f"backend={backend!r} is not allowed; allowed: auto, numba, torch")
    if backend == "auto":
        backend = "torch" if a.is_cuda else "numba"
    a64, b64 = a.to(torch.int64), b.to(torch.int64)
    h = torch.zeros(a.shape[:-1], dtype=torch.int64, device=a.device) if h0 is None else \
        h0.to(device=a.device, dtype=torch.int64).clamp(lo, hi)
    if backend == "numba":
        if a.is_cuda:
            raise ValueError("backend 'numba' runs on CPU tensors only; got CUDA tensors (use 'torch')")
        from ._numba.saturating_scan import saturating_rows

        rows, length = h.numel(), a.shape[-1]
        ra, rb = a64.reshape(rows, length).contiguous(), b64.reshape(rows, length).contiguous()
        out = torch.empty_like(ra)
        with numba_threads_for(ra.numel() * 4):
            saturating_rows(ra.numpy(), rb.numpy(), h.reshape(-1).contiguous().numpy(), lo, hi, out.numpy())
        return out.reshape(a.shape)
    out = torch.empty_like(a64)
    for t in range(a.shape[-1]):
        h = (a64[..., t] * h + b64[..., t]).clamp_(lo, hi)
        out[..., t] = h
    return out


def saturating_scan_ref(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None, *, bits: int = 8
                        ) -> torch.Tensor:
    """:func:`saturating_scan` one sequence and one step at a time in Python integers (the reference)."""
    lo, hi = _check_saturating(a, b, h0, bits)
    rows = a.shape[:-1].numel()
    flat_a, flat_b = a.reshape(rows, a.shape[-1]).tolist(), b.reshape(rows, b.shape[-1]).tolist()
    starts = [0] * rows if h0 is None else h0.reshape(-1).tolist()
    rows = []
    for ra, rb, h in zip(flat_a, flat_b, starts):
        h, row = min(max(int(h), lo), hi), []
        for x, y in zip(ra, rb):
            h = min(max(x * h + y, lo), hi)
            row.append(h)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int64).reshape(a.shape)
