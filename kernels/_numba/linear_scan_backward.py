"""Numba CPU kernels for the adjoint of the linear recurrence ``h_t = a_t * h_{t-1} + b_t`` (the backward of
:mod:`kernels._numba.linear_scan`, whose docstring describes the layouts, loop orders and prefetching both share).

With ``d_t`` the total gradient reaching state ``t``, the adjoint is itself a linear scan running the other way:
``d_t = g_t + conj(a_{t+1}) d_{t+1}``, ``db_t = d_t``, ``da_t = d_t conj(h_{t-1})``, ``dh0 = conj(a_first) d_first``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import SCAN_FLAGS, prefetch_next, prefetch_r, prefetch_span, prefetch_w
from .linear_scan import AHEAD_BYTES, C_BLOCK, K_BLOCK, OWN_ROW_BYTES, VCHUNK_BYTES
from .vector_scan import vec_adjoint_down, vec_adjoint_up, vector_lanes

__all__ = ["scan_channels_backward", "scan_rows_backward"]


@njit(cache=True, error_model="numpy", fastmath=SCAN_FLAGS, inline="always")
def _row_backward(av, hv, gv, dav, dbv, h0, pa, ph, pg, pda, pdb, prefetch):
    """Adjoint of one row (complex, strided, or any row without AVX-512; contiguous float rows on AVX-512 take
    :func:`_row_backward_vec`), 1-D views in *backward* processing order (the forward order reversed).

    With ``d_s`` the total gradient reaching state ``s``: ``d_s = g_s + conj(a_{s-1}) d_{s-1}`` (``a_{s-1}`` is the
    coefficient of the step that consumed state ``s``), ``db_s = d_s``, ``da_s = d_s conj(h_prev)`` where ``h_prev``
    is ``hv[s+1]`` (the forward predecessor) or ``h0`` at the end. Returns ``dh0``.

    When the views run backwards through memory (a forward scan's adjoint), hardware prefetchers stream them poorly
    on this lab's CPUs (0.9 vs 0.5 ns an element). With ``prefetch`` the loop therefore also issues software
    prefetches, in *ascending* order, for the next row (``pa, ph, pg`` read, ``pda, pdb`` written), which the same
    thread processes next; that row then streams from L2.
    """
    n_t = gv.shape[0]
    if n_t == 0:
        return h0 * 0
    d = gv[0]
    dbv[0] = d
    dav[0] = d * np.conj(hv[1] if n_t > 1 else h0)
    n_mid = n_t - 1  # elements 1 .. n_t-2 have a predecessor inside the row; the last one uses h0
    n_pf = pg.shape[0]
    line = max(1, 64 // gv.itemsize)  # elements in a 64-byte cache line
    p = 0
    s = 1
    while s + K_BLOCK <= n_mid:
        if prefetch and p < n_pf:  # one cache line of each next-row array per block
            prefetch_r(pa, p)
            prefetch_r(ph, p)
            prefetch_r(pg, p)
            prefetch_w(pda, p)
            prefetch_w(pdb, p)
            p += line
        acc_a = np.conj(av[s - 1])
        acc_b = gv[s]
        v = acc_a * d + acc_b
        dbv[s] = v
        dav[s] = v * np.conj(hv[s + 1])
        for j in range(1, K_BLOCK):
            x = np.conj(av[s + j - 1])
            acc_a = acc_a * x
            acc_b = x * acc_b + gv[s + j]
            v = acc_a * d + acc_b
            dbv[s + j] = v
            dav[s + j] = v * np.conj(hv[s + j + 1])
        d = acc_a * d + acc_b
        s += K_BLOCK
    while s < n_mid:
        d = np.conj(av[s - 1]) * d + gv[s]
        dbv[s] = d
        dav[s] = d * np.conj(hv[s + 1])
        s += 1
    if n_t > 1:
        d = np.conj(av[n_t - 2]) * d + gv[n_t - 1]
        dbv[n_t - 1] = d
        dav[n_t - 1] = d * np.conj(h0)
    return np.conj(av[n_t - 1]) * d


@njit(cache=True, error_model="numpy", fastmath=SCAN_FLAGS, inline="always")
def _row_backward_vec(av, hv, gv, dav, dbv, h0, pa, ph, pg, pda, pdb, reverse, prefetch):
    """Adjoint of one contiguous float row with the vector kernel (:func:`make_vec_adjoint`); returns ``dh0``.

    Views are ascending (positive unit stride); ``reverse`` is the direction of the *forward* scan, so its adjoint
    runs ascending and a forward scan's adjoint descending. The element at each end of the row, whose shifted
    neighbour lies outside it, and the tail that fills no whole vector run in scalar code. Prefetches as in
    :func:`_row_forward_vec`: ascending, the row's own lines :data:`AHEAD_BYTES` ahead; descending, a long row's
    own lines below, a short row's next row ``pa .. pdb`` ascending (with ``prefetch``).
    """
    n_t = gv.shape[0]
    if n_t == 0:
        return h0 * 0
    width = vector_lanes(gv)
    line = max(1, 64 // gv.itemsize)
    chunk = max(width, VCHUNK_BYTES // gv.itemsize)
    dist = AHEAD_BYTES // gv.itemsize
    if reverse:  # forward h_t = a_t h_{t+1} + b_t: d_t = a_{t-1} d_{t-1} + g_t, da_t = d_t h_{t+1}, h_T = h0
        d = gv[0]
        dbv[0] = d
        dav[0] = d * (hv[1] if n_t > 1 else h0)
        s = 1
        while s + chunk <= n_t - 1:
            prefetch_span(av, hv, gv, dav, dbv, s + dist, s + dist + chunk, line)
            d = vec_adjoint_up(av, hv, gv, dav, dbv, s, chunk // width, d)
            s += chunk
        n_vec = max(0, n_t - 1 - s) // width
        d = vec_adjoint_up(av, hv, gv, dav, dbv, s, n_vec, d)
        for t in range(s + n_vec * width, n_t):
            d = av[t - 1] * d + gv[t]
            dbv[t] = d
            dav[t] = d * (hv[t + 1] if t + 1 < n_t else h0)
        return av[n_t - 1] * d
    # forward h_t = a_t h_{t-1} + b_t: d_t = a_{t+1} d_{t+1} + g_t, da_t = d_t h_{t-1}, h_{-1} = h0
    d = gv[n_t - 1]
    dbv[n_t - 1] = d
    dav[n_t - 1] = d * (hv[n_t - 2] if n_t > 1 else h0)
    own = n_t * gv.itemsize >= OWN_ROW_BYTES
    p = 0
    e = n_t - 1
    while e - chunk >= 1:
        if own:  # a long row: its own lines, `dist` below, descending
            prefetch_span(av, hv, gv, dav, dbv, max(0, e - chunk - dist), max(0, e - dist), line)
        elif prefetch:  # a short one: the next row, ascending, a line of it for each line of this one
            p = prefetch_next(pa, ph, pg, pda, pdb, p, chunk // line, line)
        d = vec_adjoint_down(av, hv, gv, dav, dbv, e, chunk // width, d)
        e -= chunk
    n_vec = (e - 1) // width if e >= 1 else 0
    d = vec_adjoint_down(av, hv, gv, dav, dbv, e, n_vec, d)
    for t in range(e - n_vec * width - 1, -1, -1):
        d = av[t + 1] * d + gv[t]
        dbv[t] = d
        dav[t] = d * (hv[t - 1] if t > 0 else h0)
    return av[0] * d


@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def scan_rows_backward(a, h, g, h0, da, db, dh0, reverse):
    """Adjoint of :func:`scan_rows_forward`.

    Arguments:
        a: ``(N, T)`` forward coefficients.
        h: ``(N, T)`` forward output (the states).
        g: ``(N, T)`` gradient of the loss w.r.t. the output.
        h0: ``(N,)`` forward initial states.
        da, db: ``(N, T)`` gradients w.r.t. ``a`` and ``b``, written in place.
        dh0: ``(N,)`` gradient w.r.t. ``h0``, written in place.
        reverse: the direction of the *forward* scan.
    """
    n_rows = g.shape[0]
    size = g.itemsize
    vec = vector_lanes(g) > 0 and a.strides[1] == size and h.strides[1] == size and g.strides[1] == size
    vec = vec and da.strides[1] == size and db.strides[1] == size
    for n in prange(n_rows):
        m = min(n + 1, n_rows - 1)  # the row this thread most likely processes next
        if vec:
            dh0[n] = _row_backward_vec(
                a[n], h[n], g[n], da[n], db[n], h0[n], a[m], h[m], g[m], da[m], db[m], reverse, m != n
            )
        elif reverse:  # the adjoint runs forwards through memory: hardware prefetch is enough
            dh0[n] = _row_backward(a[n], h[n], g[n], da[n], db[n], h0[n], a[m], h[m], g[m], da[m], db[m], False)
        else:
            dh0[n] = _row_backward(
                a[n, ::-1], h[n, ::-1], g[n, ::-1], da[n, ::-1], db[n, ::-1], h0[n],
                a[m], h[m], g[m], da[m], db[m], m != n,
            )  # fmt: skip


@njit(parallel=True, cache=True, error_model="numpy", fastmath=SCAN_FLAGS)
def scan_channels_backward(a, h, g, h0, da, db, dh0, reverse):
    """Adjoint of :func:`scan_channels_forward` (arguments as in :func:`scan_rows_backward`, with a trailing
    channel axis: ``(N, T, M)`` arrays and ``(N, M)`` states). The adjoint of a forward scan streams memory
    downwards with software prefetches ahead of it."""
    n_rows, n_t, n_ch = g.shape
    n_blk = (n_ch + C_BLOCK - 1) // C_BLOCK
    for task in prange(n_rows * n_blk):
        n = task // n_blk
        c0 = (task % n_blk) * C_BLOCK
        c1 = min(c0 + C_BLOCK, n_ch)
        carry = np.zeros(c1 - c0, dtype=g.dtype)
        if reverse:  # the forward ran t = T-1 .. 0, so the adjoint ascends: stream directly
            for t in range(n_t):
                hp = h0[n, c0:c1] if t == n_t - 1 else h[n, t + 1, c0:c1]
                ar = a[n, t, c0:c1]
                gr = g[n, t, c0:c1]
                dar = da[n, t, c0:c1]
                dbr = db[n, t, c0:c1]
                for c in range(c1 - c0):
                    d = gr[c] + carry[c]
                    dbr[c] = d
                    dar[c] = d * np.conj(hp[c])
                    carry[c] = np.conj(ar[c]) * d
        else:  # the adjoint descends through memory, a row of each array prefetched about AHEAD_BYTES below
            # (on this lab's Xeon 1.3-1.45x faster than two ascending passes over blocks, which read a and g twice)
            cw = c1 - c0
            line = max(1, 64 // g.itemsize)
            ahead = max(1, AHEAD_BYTES // (cw * g.itemsize))
            for t in range(n_t - 1, -1, -1):
                q = t - ahead
                if q >= 1:
                    prefetch_span(a[n, q, c0:c1], g[n, q, c0:c1], h[n, q - 1, c0:c1], da[n, q, c0:c1],
                                   db[n, q, c0:c1], 0, cw, line)  # fmt: skip
                hp = h[n, t - 1, c0:c1] if t > 0 else h0[n, c0:c1]
                ar = a[n, t, c0:c1]
                gr = g[n, t, c0:c1]
                dar = da[n, t, c0:c1]
                dbr = db[n, t, c0:c1]
                for c in range(cw):
                    d = gr[c] + carry[c]
                    dbr[c] = d
                    dar[c] = d * np.conj(hp[c])
                    carry[c] = np.conj(ar[c]) * d
        dh0[n, c0:c1] = carry
