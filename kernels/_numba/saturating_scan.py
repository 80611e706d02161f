"""Numba CPU kernel of :func:`kernels.saturating_scan`: ``h_t = clamp(a_t h_{t-1} + b_t, lo, hi)`` in int64.

One task per row (a sequence): the state stays in a register and the row is read once, in order. The recurrence is
not associative (saturation forgets), so nothing runs across time in parallel; rows run in parallel when there are
enough of them (the caller picks the thread count, see ``kernels._common.numba_threads_for``). The products wrap on
int64 overflow as torch's do, so the kernel gives the torch loop's results bit for bit.
"""

from __future__ import annotations

from numba import njit, prange


@njit(cache=True, parallel=True)
def saturating_rows(a, b, h0, lo, hi, out):
    """``out[r, t] = clamp(a[r, t] out[r, t - 1] + b[r, t], lo, hi)`` with ``out[r, -1] = h0[r]``.

    Arguments:
        a, b, out: C-contiguous int64 ``(rows, length)``. h0: int64 ``(rows,)``, already inside ``[lo, hi]``.
        lo, hi: the range (int64).
    """
    rows, length = a.shape
    for r in prange(rows):
        h = h0[r]
        ar, br, orow = a[r], b[r], out[r]
        for t in range(length):
            h = ar[t] * h + br[t]
            h = lo if h < lo else (hi if h > hi else h)
            orow[t] = h
