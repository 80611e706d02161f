"""Numba CPU kernels for Mamba-1's selective scan, forward and backward, fused.

The forward runs a block of channels of one (batch, group) in lockstep, the channels innermost: the state is a
``(state, lanes)`` array, so the innermost loop has a fixed trip count and compiles to whole vector registers. The
backward processes blocks of ``CHANNEL_BLOCK`` channels with the state innermost (a lane-innermost backward was tried:
with its eleven per-lane arrays LLVM gave up on the runtime alias checks and left it scalar, 2x slower). The
discretisation ``dA = exp(delta * A)``, ``dB u = delta * B * u`` happens inside the loop, so no
``(batch, channels, length, state)`` tensor is ever formed. ``B`` and ``C`` arrive transposed to
``(batch, groups, length, state)``; their entries are broadcast to the lanes.

The forward stores the state at the end of every ``CHUNK`` steps (``(batch, channels, n_chunks, state)``, 1/CHUNK of
the full state history). The backward walks the chunks from last to first, recomputes the chunk's states from its
checkpoint into a ``(CHUNK, state)`` buffer per channel, then runs the adjoint recurrence backwards through it.

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
LANES = 16  # channels the forward runs in lockstep (the innermost, vectorised loop)
CHANNEL_BLOCK = 8  # channels the backward processes together (one read of B_l, C_l and the dB/dC rows for all)

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

    Channels are processed in blocks of ``CHANNEL_BLOCK``: for every step the block's channels share one read of
    ``B_l``, ``C_l`` and one read-modify-write of the ``dB``/``dC`` partial rows, which then stay in L1, instead of
    one per channel.

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
    per_slice = (per_group + n_slices - 1) // n_slices
    n_chunks = (n_l + CHUNK - 1) // CHUNK
    cb = CHANNEL_BLOCK
    for task in prange(n_b * n_g * n_slices):
        b = task // (n_g * n_slices)
        g = (task // n_slices) % n_g
        sl = task % n_slices
        d0 = g * per_group + sl * per_slice
        d1 = min(d0 + per_slice, (g + 1) * per_group)
        hs = np.empty((cb, CHUNK, n_s), dtype=u.dtype)  # states after each step of the chunk, per channel
        das = np.empty((cb, CHUNK, n_s), dtype=u.dtype)  # exp(dt * A) of each step
        hst = np.empty((cb, n_s), dtype=u.dtype)  # the state entering the chunk
        dh = np.empty((cb, n_s), dtype=u.dtype)
        da_acc = np.empty((cb, n_s), dtype=u.dtype)
        dd_acc = np.empty(cb, dtype=u.dtype)
        dbp = dB_part[b, g, sl]
        dcp = dC_part[b, g, sl]
        dbp[:, :] = 0
        dcp[:, :] = 0
        for db0 in range(d0, d1, cb):
            nb = min(cb, d1 - db0)
            for ci in range(nb):
                dh[ci] = dh0[b, db0 + ci]  # the caller preloads dh0 with the gradient of the final state
                da_acc[ci] = 0
                dd_acc[ci] = 0
            for c in range(n_chunks - 1, -1, -1):
                s0 = c * CHUNK
                s1 = min(n_l, s0 + CHUNK)
                for ci in range(nb):
                    hst[ci] = h0[b, db0 + ci] if c == 0 else ckpt[b, db0 + ci, c - 1]
                # recompute the chunk's states
                for j in range(s1 - s0):
                    l = s0 + j
                    brow = Bt[b, g, l]
                    kp = keep[b, l]
                    for ci in range(nb):
                        d = db0 + ci
                        a_row = A[d]
                        step = dt[b, d, l]
                        dtx = step * u[b, d, l]
                        prev = hst[ci] if j == 0 else hs[ci, j - 1]
                        cur = hs[ci, j]
                        ea = das[ci, j]
                        for n in range(n_s):
                            e = fast_exp(step * a_row[n]) * kp
                            ea[n] = e
                            cur[n] = e * prev[n] + dtx * brow[n]
                # adjoint, backwards through the chunk
                for j in range(s1 - s0 - 1, -1, -1):
                    l = s0 + j
                    brow = Bt[b, g, l]
                    crow = Ct[b, g, l]
                    dbrow = dbp[l]
                    dcrow = dcp[l]
                    for ci in range(nb):
                        d = db0 + ci
                        a_row = A[d]
                        skip = Dv[d]
                        gy = dy[b, d, l]
                        x = u[b, d, l]
                        dd_acc[ci] += gy * x
                        step = dt[b, d, l]
                        prev = hst[ci] if j == 0 else hs[ci, j - 1]
                        cur = hs[ci, j]
                        ea = das[ci, j]
                        dhc = dh[ci]
                        dac = da_acc[ci]
                        gstep = x * 0
                        dux = x * 0
                        for n in range(n_s):
                            dhn = dhc[n] + gy * crow[n]
                            dcrow[n] += gy * cur[n]
                            t1 = dhn * prev[n] * ea[n]  # d(loss)/d(dt * A[n])
                            gstep += t1 * a_row[n] + dhn * brow[n] * x
                            dac[n] += t1 * step
                            dbrow[n] += dhn * step * x
                            dux += dhn * brow[n]
                            dhc[n] = dhn * ea[n]
                        du[b, d, l] = gy * skip + dux * step
                        ddt[b, d, l] = gstep
            for ci in range(nb):
                d = db0 + ci
                dh0[b, d] = dh[ci]
                dA_part[b, d] = da_acc[ci]
                dD_part[b, d] = dd_acc[ci]
