"""Numba CPU kernels for the first-order linear recurrence ``h_t = a_t * h_{t-1} + b_t`` and its adjoint.

Every kernel works on views ``(N, T, M)`` prepared by :mod:`kernels.linear_scan`: ``N`` independent outer rows, the
scan axis ``T`` and ``M`` inner channels (the dims that sit *inside* the scan axis in memory). Two loop orders cover
every layout without copies:

* ``M > 1`` (channels last, e.g. ``(batch, time, channels)``): the inner loop runs over the contiguous channel axis,
  so every time step is one vectorised multiply-add over a block of channels; the parallel tasks are
  (row, channel block) pairs.
* ``M == 1`` (time contiguous, e.g. ``(batch, channels, time)``, passed as 2-D ``(N, T)``): a row is a single chain of
  dependent multiply-adds, capped by the multiply-add latency (~4 cycles an element). The kernel breaks the chain into
  blocks of ``K_BLOCK`` steps: inside a block it scans from zero while accumulating the product of the coefficients,
  ``(A_j, B_j)``, which does not depend on the incoming state, and then ``h = A_j * h_in + B_j``. Only one
  multiply-add per block sits on the loop-carried chain; the out-of-order core overlaps the blocks, so one row streams
  at close to memory bandwidth. Each row is read as one contiguous stream, so power-of-two row pitches do not make
  interleaved streams collide (4K aliasing), and traffic stays 12 bytes per float32 element. Contiguous
  float32/float64 rows take a vector form of the same idea, forward and adjoint: the elements of a vector register are
  combined by a Hillis-Steele scan in registers, and one vector multiply-add carries the state on
  (:func:`make_vec_scan`, :func:`make_vec_adjoint`); complex and strided rows, and every row on a CPU without AVX-512,
  take the scalar blocked chains.

The row kernels take 1-D views in *processing order*: a reverse scan passes ``x[::-1]`` views (a negative stride),
so one body serves both directions.

Memory direction matters on this lab's CPUs: streaming memory backwards ran 2-3x slower than forwards (hardware
prefetchers). A row that runs backwards therefore issues software prefetches: for its own lines below (a long row)
or for the *next* row in ascending order (a short one). The channels-last kernels prefetch whole rows ahead of their
sweep, upwards or downwards.

All kernels accept float32/64 and complex64/128 (the adjoint conjugates, as PyTorch's complex autograd expects).
Compiled with ``cache=True``: a new process loads machine code from ``__pycache__`` instead of recompiling.

This module holds the forward kernels; the adjoint kernels are in :mod:`kernels._numba.linear_scan_backward`, the
vector intrinsics both use in :mod:`kernels._numba.vector_scan`, the prefetch hints in :mod:`kernels._numba.common`.
"""

from __future__ import annotations

from numba import njit, prange

from .common import SCAN_FLAGS, prefetch_next, prefetch_r, prefetch_span, prefetch_w
from .vector_scan import vec_scan_down, vec_scan_up, vector_lanes

__all__ = ["axpy_rows", "scan_channels_forward", "scan_rows_forward", "scan_rows_simple"]

# Steps per block in the time-contiguous kernels (8 measured best on AVX-512 EPYC: 4 leaves the chain visible,
# 16 spills the product/partial-sum pair of a fully unrolled block).
K_BLOCK = 8
# Channel block of the channels-last kernels (elements): enough tasks for all threads, long enough vectors.
C_BLOCK = 512

# How far ahead the forward row kernels prefetch their own row (2 KiB, 512 float32; 1 and 4 KiB measured the same).
AHEAD_BYTES = 2048
# Chunk of the vector row kernel between two rounds of prefetches (256 B: 64 float32, 4 vectors; 128 B-1 KiB chunks
# measured alike, 1 KiB bursts of prefetches and no prefetch at all 3-10 points of bandwidth worse).
VCHUNK_BYTES = 256
# Rows at least this long prefetch their own lines when scanned in reverse; shorter ones the next row (see
# _row_forward_vec: 16 KiB rows ran 94-99% of the bandwidth with the next row, 86-94% with their own lines; 256 KiB
# rows 72-92% with the next row, 95-105% with their own lines).
OWN_ROW_BYTES = 65536


# ---------------------------------------------------------------------------------------------------------------
# time contiguous: one row (1-D views in processing order)
@njit(cache=True, error_model="numpy", fastmath=SCAN_FLAGS, inline="always")
def _row_forward(av, bv, ov, h, pa, pb, po, prefetch, ahead):
    """Scan one row: ``ov[s] = av[s] * ov[s-1] + bv[s]`` from state ``h``; returns the last state.

    With ``prefetch`` (a row that runs backwards through memory) it also prefetches the next row ``pa, pb, po``
    in ascending order, as :func:`_row_backward` does. With ``ahead`` (a row that runs forwards) it prefetches
    its own lines :data:`AHEAD_BYTES` ahead (past the row's end: the next row's start when rows are contiguous):
    with three streams per thread the hardware prefetchers alone left ``lab bench scan``'s time-contiguous cases at
    63-85% of the bandwidth, 79-96% with it.
    """
    n_t = bv.shape[0]
    n_full = n_t - n_t % K_BLOCK
    n_pf = pb.shape[0]
    line = max(1, 64 // bv.itemsize)
    dist = AHEAD_BYTES // bv.itemsize
    every = max(line, K_BLOCK)
    p = 0
    for t0 in range(0, n_full, K_BLOCK):
        if prefetch and p < n_pf:
            prefetch_r(pa, p)
            prefetch_r(pb, p)
            prefetch_w(po, p)
            p += line
        if ahead and t0 % every == 0:  # once per cache line (float32, float64); past the row's end this is the
            # next row's start when rows are contiguous (a prefetch never faults, whatever the address)
            prefetch_r(av, t0 + dist)
            prefetch_r(bv, t0 + dist)
            prefetch_w(ov, t0 + dist)
        acc_a = av[t0]
        acc_b = bv[t0]
        ov[t0] = acc_a * h + acc_b
        for j in range(1, K_BLOCK):
            x = av[t0 + j]
            acc_a = acc_a * x
            acc_b = x * acc_b + bv[t0 + j]
            ov[t0 + j] = acc_a * h + acc_b
        h = acc_a * h + acc_b
    for t in range(n_full, n_t):
        h = av[t] * h + bv[t]
        ov[t] = h
    return h


@njit(cache=True, error_model="numpy", fastmath=SCAN_FLAGS, inline="always")
def _row_forward_vec(av, bv, ov, h, pa, pb, po, reverse, prefetch):
    """Scan one contiguous float row with the vector kernel (:func:`make_vec_scan`); returns the last state.

    ``av, bv, ov`` are ascending views (positive unit stride); ``reverse`` scans from the end. Every
    :data:`VCHUNK_BYTES` chunk first issues prefetches for the memory it will need :data:`AHEAD_BYTES` later:

    * ascending: the row's own lines ahead (past its end that is the next row's start when rows are contiguous);
    * descending, in a row of :data:`OWN_ROW_BYTES` or more: its own lines below;
    * descending, in a shorter row, with ``prefetch``: the next row ``pa, pb, po``, ascending, a line for each line
      of this row (own lines left the short rows' first 2 KiB cold: 50-70% of the bandwidth at 1 KiB rows).

    Side by side in one process on this lab's Xeon, against the scalar blocked kernel (:func:`_row_forward`), in %
    of the same run's bandwidth reference: forward float32 95-107 (70-100 before), reverse float32 79-97 (49-87),
    float64 alike or better.
    """
    n_t = bv.shape[0]
    width = vector_lanes(ov)
    line = max(1, 64 // bv.itemsize)
    chunk = max(width, VCHUNK_BYTES // bv.itemsize)
    dist = AHEAD_BYTES // bv.itemsize
    if reverse:
        own = n_t * bv.itemsize >= OWN_ROW_BYTES
        p = 0
        e = n_t
        while e >= chunk:
            if own:  # a long row: its own lines, `dist` below, descending
                prefetch_span(av, bv, bv, ov, ov, max(0, e - chunk - dist), max(0, e - dist), line)
            elif prefetch:  # a short one: the next row, ascending, a line of it for each line of this one
                p = prefetch_next(pa, pb, pb, po, po, p, chunk // line, line)
            h = vec_scan_down(av, bv, ov, e, chunk // width, h)
            e -= chunk
        n_vec = e // width
        h = vec_scan_down(av, bv, ov, e, n_vec, h)
        for t in range(e - n_vec * width - 1, -1, -1):
            h = av[t] * h + bv[t]
            ov[t] = h
        return h
    t0 = 0
    while t0 + chunk <= n_t:
        prefetch_span(av, bv, bv, ov, ov, t0 + dist, t0 + dist + chunk, line)  # never faults, whatever the address
        h = vec_scan_up(av, bv, ov, t0, chunk // width, h)
        t0 += chunk
    n_vec = (n_t - t0) // width
    h = vec_scan_up(av, bv, ov, t0, n_vec, h)
    for t in range(t0 + n_vec * width, n_t):
        h = av[t] * h + bv[t]
        ov[t] = h
    return h


@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def scan_rows_forward(a, b, h0, out, reverse):
    """Scan every row of ``(N, T)`` arrays along axis 1, rows in parallel: float rows with unit stride by the vector
    kernel (:func:`_row_forward_vec`) on AVX-512 CPUs, others (complex, strided, a broadcast ``a``, or any row on
    other CPUs) by blocked scalar chains.

    Arguments:
        a, b: ``(N, T)`` coefficients and inputs (any strides).
        h0: ``(N,)`` initial states.
        out: ``(N, T)`` output, written in place.
        reverse: scan from ``t = T - 1`` down to ``0``.
    """
    n_rows = b.shape[0]
    size = out.itemsize
    vec = vector_lanes(out) > 0 and a.strides[1] == size and b.strides[1] == size and out.strides[1] == size
    for n in prange(n_rows):
        m = min(n + 1, n_rows - 1)  # the row this thread most likely processes next
        if vec:
            _row_forward_vec(a[n], b[n], out[n], h0[n], a[m], b[m], out[m], reverse, m != n)
        elif reverse:
            _row_forward(a[n, ::-1], b[n, ::-1], out[n, ::-1], h0[n], a[m], b[m], out[m], m != n, False)
        else:
            _row_forward(a[n], b[n], out[n], h0[n], a[m], b[m], out[m], False, True)


@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def scan_rows_simple(a, b, h0, out, reverse):
    """One plain dependent chain per row (latency-bound reference loop order; used by the benchmark)."""
    n_t = b.shape[1]
    for n in prange(b.shape[0]):
        h = h0[n]
        for s in range(n_t):
            t = n_t - 1 - s if reverse else s
            h = a[n, t] * h + b[n, t]
            out[n, t] = h


# ---------------------------------------------------------------------------------------------------------------
# channels last
@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def scan_channels_forward(a, b, h0, out, reverse):
    """Scan ``(N, T, M)`` arrays along axis 1, vectorised over the channel axis ``M``.

    Arguments:
        a, b: ``(N, T, M)`` coefficients and inputs (any strides; stride 0 for a broadcast ``a`` is fine).
        h0: ``(N, M)`` initial states.
        out: ``(N, T, M)`` output, written in place.
        reverse: scan from ``t = T - 1`` down to ``0``.

    Every step prefetches the row about :data:`AHEAD_BYTES` ahead in its direction (a reverse scan straight
    downwards ran 1.6x faster than one staged through ascending block copies; forwards it added 3-8 points of
    bandwidth).
    """
    n_rows, n_t, n_ch = b.shape
    n_blk = (n_ch + C_BLOCK - 1) // C_BLOCK
    for task in prange(n_rows * n_blk):
        n = task // n_blk
        c0 = (task % n_blk) * C_BLOCK
        c1 = min(c0 + C_BLOCK, n_ch)
        cw = c1 - c0
        prev = h0[n, c0:c1].copy()  # each step reads its state from the previous output row (in L1)
        line = max(1, 64 // out.itemsize)
        ahead = max(1, AHEAD_BYTES // (cw * out.itemsize))  # rows ahead, about AHEAD_BYTES
        step = -1 if reverse else 1
        for s in range(n_t):
            t = n_t - 1 - s if reverse else s
            q = t + step * ahead
            if 0 <= q < n_t:  # prefetch a row ahead, the output with write intent
                prefetch_span(a[n, q, c0:c1], b[n, q, c0:c1], b[n, q, c0:c1], out[n, q, c0:c1], out[n, q, c0:c1],
                               0, cw, line)  # fmt: skip
            ar = a[n, t, c0:c1]
            br = b[n, t, c0:c1]
            orow = out[n, t, c0:c1]
            for c in range(cw):
                orow[c] = ar[c] * prev[c] + br[c]
            prev = orow


@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def axpy_rows(a, b, out):
    """Element-wise ``out = a * b + b`` over ``(N, T)`` rows: the bandwidth reference (the scan's access pattern)."""
    for n in prange(b.shape[0]):
        ar = a[n]
        br = b[n]
        orow = out[n]
        for t in range(b.shape[1]):
            orow[t] = ar[t] * br[t] + br[t]
