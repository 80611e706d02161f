"""Numba CPU kernels of SSDi8's INT8 SSD path (:func:`lab.methods.ssdi8.model.ssd_int8`, backend ``int``): int8
operands, int32 accumulation, and the float tail fused into the loop that makes each output row.

Three kernels, on chunk-padded contiguous arrays (``q`` the chunk size, ``nc`` the chunks, ``r`` heads per group):

1. :func:`int8_chunk_states` (parallel over batch, chunk, group): quantises x, B and C, forms ``Q(C B^T)`` (int32
   sums requantised to int8 with the CB scale; the lower triangle only: the causal mask zeroes the rest), then each
   head's chunk state ``Q(Q(x dt e^(cum_end - cum)) ^T Q(B))``, the int32 sums requantised on the states' scale;
2. :func:`int8_state_passing` (parallel over batch, head): ``S <- ((S g_c + 2^(k-1)) >> k) + Q(chunk state)`` in
   int32, the states entering each chunk clamped to int8;
3. :func:`int8_chunk_scan` (parallel over batch, chunk, group): per head and row ``i``
   ``y_i = sum_{j <= i} (Q(CB)_ij s_CB e^(cum_i - cum_j) dt_j) xd_j + (Q(C)_i Q(S)^T s_C s_S) e^(cum_i) + D xd_i``
   with ``xd = Q(x) s_x``: no score, decay or dequantised tensor is formed.

Every code (x, B, C, CB, the chunk states, the passed states) is bit-identical to the torch path's
(:mod:`lab.methods.ssdi8.quant`): kernels 1 and 2 do the same float32 operations in the same order without fastmath
(a true division before ``rint``, which rounds half to even as ``torch.round``), and the int32 sums are exact. Only
kernel 3, the float tail (fastmath, a polynomial ``exp``), differs from the torch ops, by float rounding. No exact
helper is called from kernel 3: when the CB codes were made there (by a helper compiled without fastmath), one code
at FULL bench shapes rounded the other way (83.499985 -> 84; the same helper compiled on its own gave 83).

The integer products keep the output index innermost over contiguous rows and multiply int16 copies of the codes:
a product of two codes (at most 127^2) and the sum of two of them fit in int16, so each pair of terms is formed in
16 bits and widened once into the int32 sum (what AVX2 without VNNI does well: 16 lanes of ``vpmullw``).

Layouts: ``x`` ``(batch, nc, q, heads, headdim)``; ``B``, ``C`` ``(batch, nc, q, groups, state)``; ``qB``, ``qC``
``(batch, nc, groups, q, state)``; ``cum``, ``dt`` and the other per-position factors ``(batch, heads, nc, q)``;
chunk states and passed states ``(batch, nc, heads, state, headdim)`` (headdim innermost: the layout the y product
reads); ``qCB`` ``(batch, nc, groups, q, q)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import FAST_FLAGS, STEP, NoAliasCompiler, chunk_task, fast_exp

__all__ = ["int8_chunk_scan", "int8_chunk_states", "int8_state_passing"]

#: the exact kernels: IEEE float32 (no reciprocal for a division, no contraction into FMA), as the torch ops
EXACT = dict(parallel=True, cache=True, error_model="numpy")
#: the integer product helpers: no float, and ``noalias`` on their buffers (what lets LLVM vectorise their loops)
INT_STEP = dict(cache=True, error_model="numpy", pipeline_class=NoAliasCompiler)


@njit(inline="always", cache=True)
def _code(v, s):
    """``clamp(rint(v / s), -127, 127)`` as an int16 (``v``, ``s`` float32; torch's :func:`quantize`)."""
    return np.int16(min(max(np.rint(v / s), np.float32(-127.0)), np.float32(127.0)))


@njit(**EXACT)
def int8_chunk_states(x, B, C, s_x, s_xs, s_B, s_C, s_CB, s_S, to_end, qx, qB, qC, qCB, q_chunk):
    """Codes of x, B, C, of ``C B^T`` (:func:`int8_cb_codes`) and each chunk's own int8 state.

    Arguments:
        x: ``(b, nc, q, h, p)`` float32; B, C: ``(b, nc, q, g, n)`` float32. s_x, s_xs: ``(nc, h, p)``;
        s_B, s_C, s_CB: ``(g,)``; s_S: ``(h, p)``; to_end: ``(b, h, nc, q)`` ``e^(cum_end - cum) dt``.
        qx: ``(b, nc, q, h, p)`` int8 out; qB, qC: ``(b, nc, g, q, n)`` int8 out; qCB: ``(b, nc, g, q, q)`` int8
        out; q_chunk: ``(b, nc, h, n, p)`` int8 out.
    """
    n_b, n_c, q, n_h, n_p = x.shape
    n_g, n_s = B.shape[3], B.shape[4]
    rep = n_h // n_g
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        sb, sc = s_B[g], s_C[g]
        b16 = np.empty((q, n_s), dtype=np.int16)
        for j in range(q):
            for n in range(n_s):
                vb = _code(B[b, c, j, g, n], sb)
                b16[j, n] = vb
                qB[b, c, g, j, n] = vb
                qC[b, c, g, j, n] = _code(C[b, c, j, g, n], sc)
        int8_cb_codes(qC[b, c, g], qB[b, c, g], sc, sb, s_CB[g], np.empty((q, n_s), dtype=np.int16),
                      np.empty((n_s, q), dtype=np.int16), np.empty((q, q), dtype=np.int32), qCB[b, c, g])
        xs16 = np.empty((q, n_p), dtype=np.int16)
        acc = np.empty((n_s, n_p), dtype=np.int32)
        for hh in range(rep):
            h = g * rep + hh
            sx, sxs = s_x[c, h], s_xs[c, h]
            for j in range(q):
                te = to_end[b, h, c, j]
                for p in range(n_p):
                    vx = _code(x[b, c, j, h, p], sx[p])
                    qx[b, c, j, h, p] = vx
                    xs16[j, p] = _code((np.float32(vx) * sx[p]) * te, sxs[p])
            _pair_products(b16, xs16, acc)
            ss = s_S[h]
            for n in range(n_s):
                for p in range(n_p):
                    q_chunk[b, c, h, n, p] = _code((np.float32(acc[n, p]) * sxs[p]) * sb, ss[p])


@njit(**INT_STEP)
def _pair_products(a16, b16, acc):
    """``acc[n, p] = sum_j a16[j, n] b16[j, p]`` (int16 codes, int32 sums), two ``j`` per int16 step."""
    q, n_s = a16.shape
    n_p = b16.shape[1]
    acc[:, :] = 0
    for j in range(0, q - 1, 2):
        for n in range(n_s):
            a0, a1 = a16[j, n], a16[j + 1, n]
            row = acc[n]
            for p in range(n_p):
                row[p] += np.int32(np.int16(a0 * b16[j, p] + a1 * b16[j + 1, p]))
    if q % 2:
        j = q - 1
        for n in range(n_s):
            a0 = a16[j, n]
            row = acc[n]
            for p in range(n_p):
                row[p] += np.int32(np.int16(a0 * b16[j, p]))


@njit(**EXACT)
def int8_state_passing(q_chunk, gate, decay_bits, q_states):
    """``q_states[b, c]`` = the int8 state entering chunk ``c`` (zeros for the first);
    ``S <- ((S gate[c] + 2^(k-1)) >> k) + q_chunk[c]`` in int32, clamped to +-127 when stored.

    Arguments:
        q_chunk: ``(b, nc, h, n, p)`` int8. gate: ``(b, h, nc)`` int32. decay_bits: ``k``. q_states: like q_chunk.
    """
    n_b, n_c, n_h, n_s, n_p = q_chunk.shape
    k = np.int32(decay_bits)
    half = np.int32(1 << (decay_bits - 1))
    for task in prange(n_b * n_h):
        b, h = task // n_h, task % n_h
        s = np.zeros((n_s, n_p), dtype=np.int32)
        for c in range(n_c):
            gc = gate[b, h, c]
            out, add = q_states[b, c, h], q_chunk[b, c, h]
            for n in range(n_s):
                for p in range(n_p):
                    v = s[n, p]
                    out[n, p] = np.int8(min(max(v, np.int32(-127)), np.int32(127)))
                    s[n, p] = np.int32((np.int32(v * gc + half) >> k) + np.int32(add[n, p]))


@njit(**INT_STEP)
def _cb_sums(c16, b16t, acc):
    """``acc[i, j] = sum_n c16[i, n] b16t[n, j]`` for ``j <= i`` (int16 codes, int32 sums, two ``n`` per step)."""
    q, n_s = c16.shape
    for i in range(q):
        row = acc[i]
        row[: i + 1] = 0
        for n in range(0, n_s - 1, 2):
            a0, a1 = c16[i, n], c16[i, n + 1]
            for j in range(i + 1):
                row[j] += np.int32(np.int16(a0 * b16t[n, j] + a1 * b16t[n + 1, j]))
        if n_s % 2:
            a0 = c16[i, n_s - 1]
            for j in range(i + 1):
                row[j] += np.int32(np.int16(a0 * b16t[n_s - 1, j]))


@njit(cache=True, error_model="numpy")  # called from an exact kernel only: a fastmath caller's flags reach it
def int8_cb_codes(qC, qB, s_C, s_B, s_CB, c16, b16t, acc, qcb):
    """``qcb[i, j] = Q(C B^T)`` for ``j <= i`` (zeros above) of one (batch, chunk, group): int32 sums of int16 pairs
    (``acc`` ``(q, q)``), then ``rint(((sum s_C) s_B) / s_CB)`` clamped, as the torch path. ``c16``, ``b16t``:
    ``(q, n)``, ``(n, q)`` int16 work buffers."""
    q, n_s = qC.shape
    for j in range(q):
        for n in range(n_s):
            c16[j, n] = qC[j, n]
            b16t[n, j] = qB[j, n]
    _cb_sums(c16, b16t, acc)
    for i in range(q):
        for j in range(i + 1):
            qcb[i, j] = _code((np.float32(acc[i, j]) * s_C) * s_B, s_CB)
        qcb[i, i + 1:] = 0


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def int8_chunk_scan(qx, qC, qCB, q_states, s_x, s_C, s_CB, s_S, dt, cum, exp_cum, D, out):
    """``out[b, c, i, h]``: the SSD output of each position (module docstring, kernel 3).

    Arguments:
        qx: ``(b, nc, q, h, p)`` int8; qC: ``(b, nc, g, q, n)`` int8; qCB: ``(b, nc, g, q, q)`` int8;
        q_states: ``(b, nc, h, n, p)`` int8. s_x: ``(nc, h, p)``; s_C, s_CB: ``(g,)``; s_S: ``(h, p)``;
        dt, cum, exp_cum: ``(b, h, nc, q)``; D: ``(h,)``. out: ``(b, nc, q, h, p)`` float32 out.
    """
    n_b, n_c, q, n_h, n_p = qx.shape
    n_g, n_s = qC.shape[2], qC.shape[4]
    rep = n_h // n_g
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        c16 = np.empty((q, n_s), dtype=np.int16)
        qc = qC[b, c, g]
        for j in range(q):
            for n in range(n_s):
                c16[j, n] = qc[j, n]
        qcb = qCB[b, c, g]
        scb, sc = s_CB[g], s_C[g]
        xd = np.empty((q, n_p), dtype=np.float32)
        st16 = np.empty((n_s, n_p), dtype=np.int16)
        acc = np.empty(n_p, dtype=np.int32)
        w = np.empty(q, dtype=np.float32)
        y = np.empty((q, n_p), dtype=np.float32)
        for hh in range(rep):
            h = g * rep + hh
            sx = s_x[c, h]
            for j in range(q):
                for p in range(n_p):
                    xd[j, p] = np.float32(qx[b, c, j, h, p]) * sx[p]
            st = q_states[b, c, h]
            for n in range(n_s):
                for p in range(n_p):
                    st16[n, p] = st[n, p]
            _scan_rows(c16, qcb, st16, xd, cum[b, h, c], dt[b, h, c], exp_cum[b, h, c], s_S[h], scb, sc, D[h], w,
                       acc, y)
            for i in range(q):
                out[b, c, i, h] = y[i]


@njit(**STEP)
def _scan_rows(c16, qcb, st16, xd, cum, dt, exp_cum, ss, scb, sc, d, w, acc, y):
    """One head's rows of one chunk: ``y[i] = sum_{j <= i} (qcb[i, j] scb e^(cum_i - cum_j) dt_j) xd[j]
    + (c16[i] st16 sc ss) e^(cum_i) + d xd[i]`` (``w`` ``(q,)``, ``acc`` ``(p,)`` work buffers)."""
    q, n_s = c16.shape
    n_p = xd.shape[1]
    for i in range(q):
        # the entering state's part: Q(C_i) Q(S)^T in int32, rescaled, times the decay from the chunk start
        acc[:] = 0
        for n in range(0, n_s - 1, 2):
            a0, a1 = c16[i, n], c16[i, n + 1]
            for p in range(n_p):
                acc[p] += np.int32(np.int16(a0 * st16[n, p] + a1 * st16[n + 1, p]))
        if n_s % 2:
            a0 = c16[i, n_s - 1]
            for p in range(n_p):
                acc[p] += np.int32(np.int16(a0 * st16[n_s - 1, p]))
        ci = cum[i]
        for j in range(i + 1):
            w[j] = (np.float32(qcb[i, j]) * scb) * fast_exp(ci - cum[j]) * dt[j]
        yi = y[i]
        e = exp_cum[i] * sc
        for p in range(n_p):
            yi[p] = np.float32(acc[p]) * (e * ss[p]) + d * xd[i, p]
        for j in range(i + 1):
            wj = w[j]
            xj = xd[j]
            for p in range(n_p):
                yi[p] += wj * xj[p]
