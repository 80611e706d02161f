"""Numba CPU kernels for Mamba-1's selective scan, forward and backward, fused.

Both directions run a block of ``LANES`` channels of one (batch, group) in lockstep, the channels innermost: the
state is a ``(state, lanes)`` array, so the innermost loop has a fixed trip count and compiles to whole vector
registers. The discretisation ``dA = exp(delta * A)``, ``dB u = delta * B * u`` happens inside the loop, so no
``(batch, channels, length, state)`` tensor is ever formed. ``B`` and ``C`` arrive transposed to
``(batch, groups, length, state)``; their entries are broadcast to the lanes.

The forward stores the state at the end of every ``CHUNK`` steps (``(batch, channels, n_chunks, state)``, 1/CHUNK of
the full state history). The backward walks the chunks from last to first: it copies the chunk's ``dt``, ``u`` and
``dy`` of the block's channels to ``[step, lane]`` buffers (contiguous reads along the length instead of a gather
per step), recomputes the chunk's states and ``exp(dt A)`` from its checkpoint, runs the adjoint recurrence
backwards through them, and writes the chunk's ``du`` and ``d dt`` back along the length.

The backward parallelises over (batch, group, slice of channel blocks) tasks: every task owns its slice of
channels, so it can accumulate ``dB`` and ``dC`` (sums over channels) into its own ``(length, state)`` partial
without atomics; the caller adds the partials.

``exp`` of float32 uses a vectorisable polynomial (:func:`fast_exp`, relative error ~2e-7); float64 uses ``math.exp``.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

CHUNK = 64  # steps between stored states (checkpoints) and the length of the backward's recompute buffer
LANES = 16  # channels run in lockstep (the innermost, vectorised loop of the forward and of the backward)
CHANNEL_BLOCK = LANES  # the backward's channel block (the wrapper sizes its channel slices by it)

_FLAGS = {"nsz", "contract", "arcp", "reassoc", "afn"}  # no 'nnan'/'ninf': NaN and inf propagate


@intrinsic
def _bits_to_f32(typingctx, k):
    """Reinterpret the low 32 bits of an integer as a float32 (an LLVM bitcast; vectorises)."""
    if not isinstance(k, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if v.type.width != 32:
            v = builder.trunc(v, ir.IntType(32)) if v.type.width > 32 else builder.sext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(k), codegen


def fast_exp(x):
    """``exp(x)``; float32: a degree-6 polynomial on ``[-ln2/2, ln2/2]`` times ``2**k`` built from its bits."""
    return math.exp(x)


@overload(fast_exp, inline="always")
def _fast_exp_impl(x):
    if x == types.float32:

        def impl(x):
            if x != x:  # NaN in, NaN out
                return x
            xc = min(max(x, np.float32(-87.3)), np.float32(88.3))
            kf = np.floor(xc * np.float32(1.4426950408889634) + np.float32(0.5))
            k = np.int32(kf)  # a 32-bit conversion (math.floor's int64 took two 512-bit conversions per vector)
            r = xc - kf * np.float32(0.693359375) - kf * np.float32(-2.12194440e-4)
            p = np.float32(1.9875691500e-4)
            p = p * r + np.float32(1.3981999507e-3)
            p = p * r + np.float32(8.3334519073e-3)
            p = p * r + np.float32(4.1665795894e-2)
            p = p * r + np.float32(1.6666665459e-1)
            p = p * r + np.float32(5.0000001201e-1)
            p = p * r * r + r + np.float32(1.0)
            res = p * _bits_to_f32((k + np.int32(127)) << np.int32(23))
            return res if x > np.float32(-87.3) else np.float32(0.0)

        return impl
    if isinstance(x, types.Float):
        return lambda x: math.exp(x)
    return None


@njit(cache=True, fastmath=_FLAGS)
def fast_exp_array(x, out):
    """Element-wise :func:`fast_exp` (for tests)."""
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


@njit(parallel=True, cache=True, fastmath=_FLAGS)
def selective_scan_forward(u, dt, A, Bt, Ct, Dv, h0, keep, y, last, ckpt, save, z, ypre, gate):
    """Forward selective scan on discretisation steps ``dt`` (softplus and bias already applied by the caller).

    Each task runs ``LANES`` channels of one (batch, group) in lockstep: the state is a ``(state, LANES)`` block and
    the innermost loop runs over the channels, a fixed trip count that LLVM turns into whole vector registers with
    no remainder (vectorising over the state instead left 16 states in 4-wide pieces plus a horizontal sum per
    step). ``B_l[n]`` and ``C_l[n]`` are scalars broadcast to all lanes; ``y`` needs no horizontal sum. Lanes past
    the last channel of a group run on zeros and are never written.

    Arguments:
        u, dt: ``(batch, channels, length)``.
        A: ``(channels, state)`` (real).
        Bt, Ct: ``(batch, groups, length, state)`` (transposed from Mamba's ``(batch, groups, state, length)``).
        Dv: ``(channels,)`` skip weight (zeros when absent).
        h0: ``(batch, channels, state)`` initial state.
        keep: ``(batch, length)`` 1 where the state carries over, 0 where a packed sequence starts (reset).
        y: ``(batch, channels, length)`` output ``C . h + D u``, times ``silu(z)`` if ``gate``; written in place.
        last: ``(batch, channels, state)`` final state, written in place.
        ckpt: ``(batch, channels, ceil(length / CHUNK), state)`` states after every chunk (written if ``save``).
        save: write ``ckpt``, and ``ypre`` when gated.
        z: ``(batch, channels, length)`` gate (read if ``gate``); ypre: ``(batch, channels, length)``, the output
            before the gate (written if ``gate`` and ``save``, for the backward).
        gate: multiply the output by ``silu(z)`` (fused: no separate passes over ``y`` and ``z``).
    """
    n_b, n_d, n_l = u.shape
    n_s = A.shape[1]
    n_g = Bt.shape[1]
    per_group = n_d // n_g
    n_blk = (per_group + LANES - 1) // LANES
    for task in prange(n_b * n_g * n_blk):
        b = task // (n_g * n_blk)
        g = (task // n_blk) % n_g
        k = task % n_blk
        d0 = g * per_group + k * LANES
        nb = min(LANES, per_group - k * LANES)
        h = np.zeros((n_s, LANES), dtype=u.dtype)
        a = np.zeros((n_s, LANES), dtype=u.dtype)
        stp = np.zeros(LANES, dtype=u.dtype)
        x = np.zeros(LANES, dtype=u.dtype)
        dtx = np.zeros(LANES, dtype=u.dtype)
        acc = np.zeros(LANES, dtype=u.dtype)
        zl = np.zeros(LANES, dtype=u.dtype)
        sk = np.zeros(LANES, dtype=u.dtype)
        for c in range(nb):
            sk[c] = Dv[d0 + c]
            for n in range(n_s):
                a[n, c] = A[d0 + c, n]
                h[n, c] = h0[b, d0 + c, n]
        for l in range(n_l):
            if keep[b, l] == 0:
                h[:, :] = 0
            for c in range(nb):
                stp[c] = dt[b, d0 + c, l]
                x[c] = u[b, d0 + c, l]
            for c in range(LANES):
                dtx[c] = stp[c] * x[c]
                acc[c] = 0
            brow = Bt[b, g, l]
            crow = Ct[b, g, l]
            for n in range(n_s):
                bn = brow[n]
                cn = crow[n]
                hr = h[n]
                ar = a[n]
                for c in range(LANES):
                    hn = fast_exp(stp[c] * ar[c]) * hr[c] + dtx[c] * bn
                    hr[c] = hn
                    acc[c] += hn * cn
            for c in range(LANES):
                acc[c] += sk[c] * x[c]
            if gate:
                for c in range(nb):
                    zl[c] = z[b, d0 + c, l]
                if save:
                    for c in range(nb):
                        ypre[b, d0 + c, l] = acc[c]
                for c in range(LANES):
                    zc = zl[c]
                    e = fast_exp(-zc)
                    acc[c] = acc[c] * zc / (1 + e)
            for c in range(nb):
                y[b, d0 + c, l] = acc[c]
            if save and ((l + 1) % CHUNK == 0 or l == n_l - 1):
                for c in range(nb):
                    for n in range(n_s):
                        ckpt[b, d0 + c, l // CHUNK, n] = h[n, c]
        for c in range(nb):
            for n in range(n_s):
                last[b, d0 + c, n] = h[n, c]


@njit(parallel=True, cache=True, fastmath=_FLAGS)
def selective_scan_backward(
    u, dt, A, Bt, Ct, Dv, h0, keep, ckpt, dy, du, ddt, dA_part, dB_part, dC_part, dD_part, dh0, n_slices
):
    """Backward of :func:`selective_scan_forward` (same inputs; ``dy`` is the gradient of ``y``).

    Like the forward, a task runs blocks of ``LANES`` channels in lockstep with the channels innermost (a fixed trip
    count, whole vector registers; ``B_l[n]``, ``C_l[n]`` broadcast). The per-(state, lane) quantities the adjoint
    loop writes (the state's adjoint, the ``dA`` sum, the step's ``dB`` and ``dC`` terms) are rows of ONE work
    array ``w[n, k, lane]``, taken as views at compile-time-constant distances, so LLVM proves them disjoint and
    needs few runtime alias checks (eleven separate arrays exceeded its check limit and stayed scalar; flat indices
    ``n * K + c`` defeated it too: numba's negative-index wraparound makes such addresses non-affine).
    ``exp(dt A)`` is computed once, in the recompute pass, and kept for the chunk. ``dB_l[n]`` and ``dC_l[n]`` are
    sums over the lanes (one short reduction per state and step; a column-wise bulk sum per chunk was 2x slower).
    Padding lanes (past a group's last channel) run on zeros and add nothing.

    Arguments:
        u, dt, A, Bt, Ct, Dv, h0, keep: as in the forward.
        ckpt: the forward's chunk-end states.
        dy: ``(batch, channels, length)`` gradient of the output.
        du, ddt: ``(batch, channels, length)`` gradients, written in place.
        dA_part: ``(batch, channels, state)`` per-batch partial of ``dA``; dD_part: ``(batch, channels)``.
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
    for task in prange(n_b * n_g * n_slices):
        b = task // (n_g * n_slices)
        g = (task // n_slices) % n_g
        sl = task % n_slices
        g1 = (g + 1) * per_group
        d0 = min(g * per_group + sl * per_slice, g1)
        d1 = min(d0 + per_slice, g1)
        hist = np.zeros((CHUNK + 1, n_s, L), dtype=u.dtype)  # state entering step j of the chunk
        w = np.zeros((n_s, 4, L), dtype=u.dtype)  # [n, k, lane]: adjoint, dA sum, dB and dC terms of the step
        av = np.zeros((n_s, L), dtype=u.dtype)  # A
        eb = np.zeros((CHUNK, n_s, L), dtype=u.dtype)  # exp(dt * A) of step j (times keep)
        io = np.zeros((6, CHUNK, L), dtype=u.dtype)  # the chunk's dt, u, dt * u, dy, du, d dt, [step, lane]
        gs = np.zeros(L, dtype=u.dtype)
        us = np.zeros(L, dtype=u.dtype)
        dd = np.zeros(L, dtype=u.dtype)
        skip = np.zeros(L, dtype=u.dtype)
        dbp = dB_part[b, g, sl]
        dcp = dC_part[b, g, sl]
        dbp[:, :] = 0
        dcp[:, :] = 0
        for db0 in range(d0, d1, L):
            nb = min(L, d1 - db0)
            w[:, :, :] = 0
            av[:, :] = 0
            io[:, :, :] = 0
            dd[:] = 0
            skip[:] = 0
            hist[:, :, :] = 0
            for c in range(nb):
                skip[c] = Dv[db0 + c]
                for n in range(n_s):
                    av[n, c] = A[db0 + c, n]
                    w[n, 0, c] = dh0[b, db0 + c, n]  # the caller preloads dh0 with the final state's gradient
            for ch in range(n_chunks - 1, -1, -1):
                s0 = ch * CHUNK
                m = min(n_l, s0 + CHUNK) - s0
                for c in range(nb):  # the chunk's inputs, transposed to [step, lane] (contiguous reads along l)
                    t_in = dt[b, db0 + c, s0:s0 + m]
                    x_in = u[b, db0 + c, s0:s0 + m]
                    g_in = dy[b, db0 + c, s0:s0 + m]
                    for j in range(m):
                        io[0, j, c] = t_in[j]
                        io[1, j, c] = x_in[j]
                        io[2, j, c] = t_in[j] * x_in[j]
                        io[3, j, c] = g_in[j]
                    for n in range(n_s):
                        hist[0, n, c] = h0[b, db0 + c, n] if ch == 0 else ckpt[b, db0 + c, ch - 1, n]
                for j in range(m):  # recompute the chunk's states
                    kp = keep[b, s0 + j]
                    stp = io[0, j]
                    dtx = io[2, j]
                    brow = Bt[b, g, s0 + j]
                    for n in range(n_s):
                        bn = brow[n]
                        hp = hist[j, n]
                        hc = hist[j + 1, n]
                        ar = av[n]
                        er = eb[j, n]
                        for c in range(L):
                            e = fast_exp(stp[c] * ar[c]) * kp
                            er[c] = e
                            hc[c] = e * hp[c] + dtx[c] * bn
                for j in range(m - 1, -1, -1):  # adjoint, backwards through the chunk
                    l = s0 + j
                    stp = io[0, j]
                    xv = io[1, j]
                    dtx = io[2, j]
                    gyv = io[3, j]
                    for c in range(L):
                        dd[c] += gyv[c] * xv[c]
                        gs[c] = 0
                        us[c] = 0
                    brow = Bt[b, g, l]
                    crow = Ct[b, g, l]
                    dbrow = dbp[l]
                    dcrow = dcp[l]
                    for n in range(n_s):
                        bn = brow[n]
                        cn = crow[n]
                        hp = hist[j, n]
                        hc = hist[j + 1, n]
                        ar = av[n]
                        w0 = w[n, 0]
                        w1 = w[n, 1]
                        w2 = w[n, 2]
                        w3 = w[n, 3]
                        er = eb[j, n]
                        for c in range(L):
                            an = ar[c]
                            dhn = w0[c] + gyv[c] * cn
                            e = er[c]
                            t = dhn * hp[c] * e  # d(loss)/d(dt * A[n])
                            w1[c] += t * stp[c]
                            gs[c] += t * an
                            us[c] += dhn * bn
                            w0[c] = dhn * e
                            w2[c] = dhn * dtx[c]
                            w3[c] = gyv[c] * hc[c]
                        sb = dbrow[n]
                        sc = dcrow[n]
                        for c in range(L):
                            sb += w2[c]
                            sc += w3[c]
                        dbrow[n] = sb
                        dcrow[n] = sc
                    gdu = io[4, j]
                    gdt = io[5, j]
                    for c in range(L):
                        gdu[c] = gyv[c] * skip[c] + us[c] * stp[c]
                        gdt[c] = gs[c] + us[c] * xv[c]
                for c in range(nb):  # the chunk's du and d dt, back to (channel, length)
                    du_out = du[b, db0 + c, s0:s0 + m]
                    dt_out = ddt[b, db0 + c, s0:s0 + m]
                    for j in range(m):
                        du_out[j] = io[4, j, c]
                        dt_out[j] = io[5, j, c]
            for c in range(nb):
                d = db0 + c
                for n in range(n_s):
                    dh0[b, d, n] = w[n, 0, c]
                    dA_part[b, d, n] = w[n, 1, c]
                dD_part[b, d] = dd[c]
