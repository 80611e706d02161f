"""Numba CPU kernel for the backward of Mamba-1's selective scan (:func:`selective_scan_backward`), fused, and the
per-chunk helpers it runs: recompute a chunk's states from its checkpoint, run the adjoint recurrence backwards
through them, and finish the chunk's element-wise gradients. The layout and the chunking are those of the forward
(:mod:`kernels._numba.selective_scan`, whose docstring describes both directions).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import FAST_FLAGS, STEP, fast_exp2, fast_exp2_nonpos, fast_sigmoid, prefetch_rows, softplus_sigmoid
from .selective_scan import CHUNK, LANES, LOG2E, transpose_chunk

__all__ = ["selective_scan_backward"]


@njit(**STEP)
def _recompute_chunk(hist, eb, a2, dt, dtx, Bc, kc, m, Cc, yc, gate, nonpos):
    """The backward's recompute of a chunk's ``m`` steps: ``eb[j] = 2**(dt A log2 e) keep``,
    ``hist[j + 1] = eb[j] hist[j] + dt u B`` (``hist[0]``, the chunk's entering state, is given); with ``gate``,
    also ``yc[j] += C_j . hist[j + 1]`` (the output before the gate, which the gate's backward needs: recomputed
    here rather than stored by the forward and read back).

    ``hist``: ``(CHUNK + 1, state, LANES)``; ``eb``: ``(CHUNK, state, LANES)``; ``a2``: ``(state, LANES)``;
    ``dt``, ``dtx`` (dt u), ``yc``: ``[step, lane]``; ``Bc``, ``Cc``: ``(m, state)``; ``kc``: ``(m,)`` keep flags;
    ``nonpos``: every ``dt a2`` is ``<= 0`` (:func:`fast_exp2_nonpos` then; a loop-invariant flag: LLVM compiles
    each loop for both values).
    """
    n_s = a2.shape[0]
    for j in range(m):
        kp = kc[j]
        for n in range(n_s):
            bn = Bc[j, n]
            if gate:
                cn = Cc[j, n]
                for c in range(LANES):
                    x2 = dt[j, c] * a2[n, c]
                    e = (fast_exp2_nonpos(x2) if nonpos else fast_exp2(x2)) * kp
                    eb[j, n, c] = e
                    hn = e * hist[j, n, c] + dtx[j, c] * bn
                    hist[j + 1, n, c] = hn
                    yc[j, c] += hn * cn
            else:
                for c in range(LANES):
                    x2 = dt[j, c] * a2[n, c]
                    e = (fast_exp2_nonpos(x2) if nonpos else fast_exp2(x2)) * kp
                    eb[j, n, c] = e
                    hist[j + 1, n, c] = e * hist[j, n, c] + dtx[j, c] * bn


@njit(**STEP)
def _adjoint_chunk(adj, dA, av, hist, eb, dt, dtx, gy, gus, ggs, Bc, Cc, dbc, dcc, m):
    """The adjoint recurrence backwards through a chunk's ``m`` steps, over a ``(state, LANES)`` block.

    ``adj`` (the state's adjoint) and ``dA`` (the ``dA`` sum) carry over steps; a step's ``dB`` and ``dC`` terms are
    summed over the lanes within the lane loop and added to ``dbc``, ``dcc`` ``(m, state)``. ``av``: ``A``;
    ``hist``, ``eb``: the chunk's states and ``exp(dt A)`` (from :func:`_recompute_chunk`); ``dt``, ``dtx``,
    ``gy`` (dy): ``[step, lane]`` inputs; ``Bc``, ``Cc``: ``(m, state)``.

    Outputs, ``[step, lane]``: ``gus[j] = sum_n dh_n B_n`` and ``ggs[j] = sum_n A_n d(dt A_n)`` (the parts of ``du``
    and ``d dt`` that need the states), summed in place; :func:`_finish_chunk` turns them into ``du`` and
    ``d delta`` over the whole chunk. Summing straight into these rows, rather than into per-step ``(LANES,)``
    arrays finished inside the step loop, keeps every loop here vectorised: that per-step finish (and ``dD``'s sum)
    compiled to scalar code on both AVX2 and AVX-512 (backward 11-15% slower on Emerald Rapids, side by side).
    """
    n_s = av.shape[0]
    for j in range(m - 1, -1, -1):
        for c in range(LANES):
            gus[j, c] = 0
            ggs[j, c] = 0
        for n in range(n_s):
            bn = Bc[j, n]
            cn = Cc[j, n]
            sb = dbc[j, n]
            sc = dcc[j, n]
            for c in range(LANES):
                gyc = gy[j, c]
                dhn = adj[n, c] + gyc * cn
                e = eb[j, n, c]
                t = dhn * hist[j, n, c] * e  # d(loss)/d(dt * A[n])
                dA[n, c] += t * dt[j, c]
                ggs[j, c] += t * av[n, c]
                gus[j, c] += dhn * bn
                adj[n, c] = dhn * e
                sb += dhn * dtx[j, c]  # dB and dC: sums over the lanes
                sc += gyc * hist[j + 1, n, c]
            dbc[j, n] = sb
            dcc[j, n] = sc


@njit(**STEP)
def _dt_gate_backward(dt, x, dtx, slope, gy, z, yc, skip, bl, m, softplus, gate, one):
    """The backward's element-wise prologue over a chunk's ``[step, lane]`` buffers: ``dt``, its softplus
    ``slope`` and ``dtx = dt x`` as in the forward; with ``gate``, ``z <- dy silu'(z)`` (times the pre-gate output
    once :func:`_recompute_chunk` has formed it, in :func:`_finish_chunk`: ``dz``), ``gy <- dy silu(z)`` (the gradient
    reaching the pre-gate output) and ``yc <- D u`` (the pre-gate output's skip term; the recompute adds
    ``C . h``)."""
    for j in range(m):
        for c in range(LANES):
            v = dt[j, c] + bl[c]
            sl = one
            if softplus:
                v, sl = softplus_sigmoid(v)
            dt[j, c] = v
            dtx[j, c] = v * x[j, c]
            slope[j, c] = sl
            if gate:
                zc = z[j, c]
                sg = fast_sigmoid(zc)
                silu = zc * sg
                gj = gy[j, c]
                z[j, c] = gj * (sg + silu - silu * sg)  # silu'(z) = sg (1 + z (1 - sg))
                gy[j, c] = gj * silu
                yc[j, c] = skip[c] * x[j, c]


@njit(**STEP)
def _finish_chunk(gdu, gdt, gy, x, dt, skip, slope, dd, dbl, gz, yc, m):
    """The backward's element-wise epilogue over a chunk's ``[step, lane]`` buffers, after :func:`_adjoint_chunk`:
    ``du = dy D + gus dt`` (into ``gdu``, which holds ``gus``), ``d delta = (ggs + gus u) slope`` (into ``gdt``,
    which holds ``ggs``); their sums over the steps go to ``dd`` (``dD``: ``sum dy u``) and ``dbl`` (``d bias``).
    ``gz <- gz * yc``: gated, that is ``dz``, ``dy silu'(z)`` times the recomputed pre-gate output; ungated, both
    buffers are unused zeros (done either way: under a ``gate`` flag, in this loop or a loop of its own, the product
    compiled to scalar code). ``gy`` is ``dy`` (times ``silu(z)`` when gated), ``x`` is ``u``."""
    for j in range(m):
        for c in range(LANES):
            us = gdu[j, c]
            g = gy[j, c]
            xc = x[j, c]
            gdu[j, c] = g * skip[c] + us * dt[j, c]
            v = (gdt[j, c] + us * xc) * slope[j, c]
            gdt[j, c] = v
            dbl[c] += v
            dd[c] += g * xc
            gz[j, c] *= yc[j, c]


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def selective_scan_backward(
    u, delta, A, Bt, Ct, Dv, bias, softplus, h0, keep, ckpt, z, gate, dy, du, ddelta, dz, dA_part, dB_part,
    dC_part, dD_part, dbias_part, dh0, n_slices,
):
    """Backward of :func:`selective_scan_forward` (same inputs; ``dy`` is the gradient of the output).

    Like the forward, a task runs blocks of ``LANES`` channels in lockstep with the channels innermost (a fixed trip
    count, whole vector registers; ``B_l[n]``, ``C_l[n]`` broadcast), and a chunk's inputs are copied along the
    length into ``[step, lane]`` buffers: there the step ``dt`` and its softplus slope are recomputed from ``delta``,
    and the gate's backward is applied (``dy`` times ``silu(z)`` kept, ``dy silu'(z)`` set aside), so no
    element-wise pass runs outside the kernel. The chunk's states, ``exp(dt A)`` and (gated) the output before the
    gate are then recomputed from its checkpoint, the adjoint recurrence runs backwards through them, ``dz`` is the
    set-aside ``dy silu'(z)`` times that output, and the chunk's ``du``, ``d delta`` and ``dz`` go back along the
    length.

    The per-(state, lane) quantities the adjoint carries (the state's adjoint, the ``dA`` sum) are separate
    ``(state, LANES)`` arrays handed to :func:`_adjoint_chunk`, whose ``noalias`` arguments let LLVM vectorise
    without runtime alias checks (inside the kernel, as rows of one ``[n, k, lane]`` array, the loop stayed scalar
    on AVX2: 2.6 against 0.35 ns per update in a standalone test on Zen 3). ``dB_l[n]`` and ``dC_l[n]`` are sums
    over the lanes, summed inside the lane loop. On Zen 3 LLVM unrolls that 16-lane loop fully and leaves it scalar,
    and that measured fastest: storing the step's terms to ``(state, LANES)`` arrays and summing them in a second
    loop (the loop vectorised) made the backward kernel 14-16% slower; a run-time trip count (vectorised, with the
    sums in the loop or through ``llvm.vector.reduce.fadd``) was slower in 5 of 6 interleaved standalone rounds; a
    column-wise bulk sum per chunk was 2x slower. On Emerald Rapids (AVX-512VL) LLVM vectorises the sums, with a
    horizontal add per state and step; storing the terms and summing 8 states at once through a shuffle tree (an
    LLVM IR transpose-and-add) made the backward 3-10% slower there. The per-step sums over the states that ``du``
    and ``d delta`` need go straight into ``[step, lane]`` rows, finished for the whole chunk by
    :func:`_finish_chunk`. Padding lanes (past a group's last channel) run on zeros and add nothing.

    Arguments:
        u, delta, A, Bt, Ct, Dv, bias, softplus, h0, keep: as in the forward.
        ckpt: the forward's chunk-end states. z, gate: the gate (the output before it is recomputed with the states).
        dy: ``(batch, channels, length)`` gradient of the output.
        du, ddelta: ``(batch, channels, length)`` gradients, written in place; dz: likewise when ``gate``.
        dA_part: ``(batch, channels, state)`` per-batch partial of ``dA``; dD_part, dbias_part: ``(batch, channels)``.
        dB_part, dC_part: ``(batch, groups, n_slices, length, state)`` per-slice partials (caller sums axis 2).
        dh0: ``(batch, channels, state)``: on entry the gradient w.r.t. the final state, on exit w.r.t. ``h0``.
        n_slices: channel slices per group (parallel tasks per (batch, group)).
    """
    n_b, n_d, n_l = u.shape
    n_s = A.shape[1]
    n_g = Bt.shape[1]
    per_group = n_d // n_g
    per_slice = ((per_group + n_slices - 1) // n_slices + LANES - 1) // LANES * LANES
    n_chunks = (n_l + CHUNK - 1) // CHUNK
    L = LANES
    one = np.ones(1, dtype=u.dtype)[0]  # 1 in u's precision (a literal 1 would promote float32 arithmetic to float64)
    for task in prange(n_b * n_g * n_slices):
        b = task // (n_g * n_slices)
        g = (task // n_slices) % n_g
        sl = task % n_slices
        g1 = (g + 1) * per_group
        d0 = min(g * per_group + sl * per_slice, g1)
        d1 = min(d0 + per_slice, g1)
        hist = np.zeros((CHUNK + 1, n_s, L), dtype=u.dtype)  # state entering step j of the chunk
        adj = np.zeros((n_s, L), dtype=u.dtype)  # the state's adjoint
        dAs = np.zeros((n_s, L), dtype=u.dtype)  # the dA sum
        av = np.zeros((n_s, L), dtype=u.dtype)  # A
        av2 = np.zeros((n_s, L), dtype=u.dtype)  # A log2(e), for fast_exp2
        eb = np.zeros((CHUNK, n_s, L), dtype=u.dtype)  # exp(dt * A) of step j (times keep)
        io = np.zeros((9, CHUNK, L), dtype=u.dtype)  # [step, lane]: dt, u, dt*u, dy, du, d dt, dt', z, C.h+Du
        bl = np.zeros(L, dtype=u.dtype)  # delta's bias
        dbl = np.zeros(L, dtype=u.dtype)  # d bias
        dd = np.zeros(L, dtype=u.dtype)
        skip = np.zeros(L, dtype=u.dtype)
        dbp = dB_part[b, g, sl]
        dcp = dC_part[b, g, sl]
        dbp[:, :] = 0
        dcp[:, :] = 0
        for db0 in range(d0, d1, L):
            nb = min(L, d1 - db0)
            adj[:, :] = 0
            dAs[:, :] = 0
            av[:, :] = 0
            av2[:, :] = 0
            io[:, :, :] = 0
            dd[:] = 0
            skip[:] = 0
            hist[:, :, :] = 0
            dbl[:] = 0
            bl[:] = 0
            nonpos = softplus  # as in the forward: every decay exponent is <= 0
            for c in range(nb):
                skip[c] = Dv[db0 + c]
                bl[c] = bias[db0 + c]
                for n in range(n_s):
                    av[n, c] = A[db0 + c, n]
                    av2[n, c] = A[db0 + c, n] * LOG2E
                    if A[db0 + c, n] > 0:
                        nonpos = False
                    adj[n, c] = dh0[b, db0 + c, n]  # the caller preloads dh0 with the final state's gradient
            for ch in range(n_chunks - 1, -1, -1):
                s0 = ch * CHUNK
                m = min(n_l, s0 + CHUNK) - s0
                transpose_chunk(delta[b, db0:db0 + nb, s0:s0 + m], io[0], nb, m)  # the chunk's inputs to [step, lane]
                transpose_chunk(u[b, db0:db0 + nb, s0:s0 + m], io[1], nb, m)
                transpose_chunk(dy[b, db0:db0 + nb, s0:s0 + m], io[3], nb, m)
                if gate:
                    transpose_chunk(z[b, db0:db0 + nb, s0:s0 + m], io[7], nb, m)
                for c in range(nb):
                    for n in range(n_s):
                        hist[0, n, c] = h0[b, db0 + c, n] if ch == 0 else ckpt[b, db0 + c, ch - 1, n]
                    if ch > 0:  # prefetch the chunk before (the next one processed): no hardware prefetcher follows
                        # 16+ rows read in descending chunks, and waiting on those lines cost ~15% of the backward
                        p0 = s0 - CHUNK
                        prefetch_rows(delta[b, db0 + c, p0:s0], u[b, db0 + c, p0:s0], dy[b, db0 + c, p0:s0],
                                       du[b, db0 + c, p0:s0], ddelta[b, db0 + c, p0:s0])  # fmt: skip
                        if gate:
                            prefetch_rows(z[b, db0 + c, p0:s0], z[b, db0 + c, p0:s0], z[b, db0 + c, p0:s0],
                                           dz[b, db0 + c, p0:s0], dz[b, db0 + c, p0:s0])  # fmt: skip
                # dt, its softplus slope, dt * u and the gate's backward, over [step, lane]
                _dt_gate_backward(io[0], io[1], io[2], io[6], io[3], io[7], io[8], skip, bl, m, softplus, gate, one)
                # recompute the chunk's states (and the output before the gate), then the adjoint backwards
                _recompute_chunk(hist, eb, av2, io[0], io[2], Bt[b, g, s0:s0 + m], keep[b, s0:s0 + m], m,
                                 Ct[b, g, s0:s0 + m], io[8], gate, nonpos)
                _adjoint_chunk(adj, dAs, av, hist, eb, io[0], io[2], io[3], io[4], io[5], Bt[b, g, s0:s0 + m],
                               Ct[b, g, s0:s0 + m], dbp[s0:s0 + m], dcp[s0:s0 + m], m)
                # du, d delta, their sums (dD, d bias) and dz
                _finish_chunk(io[4], io[5], io[3], io[1], io[0], skip, io[6], dd, dbl, io[7], io[8], m)
                transpose_chunk(io[4], du[b, db0:db0 + nb, s0:s0 + m], m, nb)  # du, d delta (and dz), back to rows
                transpose_chunk(io[5], ddelta[b, db0:db0 + nb, s0:s0 + m], m, nb)
                if gate:
                    transpose_chunk(io[7], dz[b, db0:db0 + nb, s0:s0 + m], m, nb)
            for c in range(nb):
                d = db0 + c
                for n in range(n_s):
                    dh0[b, d, n] = adj[n, c]
                    dA_part[b, d, n] = dAs[n, c]
                dD_part[b, d] = dd[c]
                dbias_part[b, d] = dbl[c]
