"""Numba CPU kernels for Mamba-1's selective scan, forward and backward, fused.

Both directions run a block of ``LANES`` channels of one (batch, group) in lockstep, the channels innermost: the
state is a ``(state, lanes)`` array, so the innermost loop has a fixed trip count and compiles to whole vector
registers. The discretisation ``dA = exp(delta * A)``, ``dB u = delta * B * u`` happens inside the loop, so no
``(batch, channels, length, state)`` tensor is ever formed. ``B`` and ``C`` arrive transposed to
``(batch, groups, length, state)``; their entries are broadcast to the lanes.

Both directions work in chunks of ``CHUNK`` steps: a chunk's per-channel inputs (``delta``, ``u``, ``z``, and
``dy`` in the backward) are transposed into ``[step, lane]`` buffers, 8x8 blocks at a time
in vector registers (:func:`_transpose8`, LLVM shuffles; contiguous row reads instead of a 16-address gather per
step, whose addresses a power-of-two row pitch apart all fall in one L1 set), the element-wise work happens there
with the lanes innermost (``dt = softplus(delta + bias)``, the ``silu(z)`` gate and, backward, their derivatives),
and the chunk's outputs are transposed back into rows. So no element-wise pass runs outside the kernels, forward or
backward.

The forward stores the state at the end of every chunk (``(batch, channels, n_chunks, state)``, 1/CHUNK of the
full state history). The backward walks the chunks from last to first, prefetching the chunk before (no hardware
prefetcher follows rows read in descending chunks): it recomputes the chunk's states and ``exp(dt A)`` from its
checkpoint (and, gated, the output before the gate, which the forward does not store), runs the adjoint recurrence
backwards through them, and writes the chunk's ``du``, ``d delta`` and ``dz``.

The backward parallelises over (batch, group, slice of channel blocks) tasks: every task owns its slice of
channels, so it can accumulate ``dB`` and ``dC`` (sums over channels) into its own ``(length, state)`` partial
without atomics; the caller adds the partials.

A chunk's work (the forward's steps, the backward's recompute and adjoint, the element-wise passes) runs in small
helpers, one call per chunk, compiled with LLVM's ``noalias`` on their array arguments (:class:`NoAliasCompiler`):
their buffers never share an element, and saying so is what lets LLVM vectorise the 16-lane loops on AVX2 too
(checked on Zen 3). Written inside the kernels, the same loops were fast on the AVX-512 (Emerald Rapids) machines
of earlier sessions but scalar on AVX2 (Zen 3), where LLVM could not prove the buffers disjoint.

The decay ``exp(dt A)`` is ``2**(dt A log2 e)`` with ``log2 e`` folded into ``A`` once per block
(:func:`fast_exp2`: a rounding and a degree-5 polynomial, relative error < 2e-7, no two-constant argument
reduction). With ``softplus`` and a block's ``A`` all ``<= 0`` every exponent is ``<= 0``, and the state loops use
:func:`fast_exp2_nonpos`, the same values without the upper clamp (12% off the state loop). The gates use
:func:`fast_exp` (relative error ~2e-7). Float64 uses ``math`` throughout. Constants are
typed in the input's precision: numba types ``float32 op 1`` (or ``op 1.0``) as float64, which halves the vector
width and adds conversions.

All kernels use ``error_model="numpy"``: with numba's default ("python") every float division checks for zero to
raise ``ZeroDivisionError``, and that branch keeps a loop from vectorising.

This module holds the forward kernel, the chunk transposes and the forward's chunk helpers; the backward is in
:mod:`kernels._numba.selective_scan_backward`, the fast exponentials and the ``noalias`` pipeline in
:mod:`kernels._numba.common`.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .common import FAST_FLAGS, STEP, fast_exp2, fast_exp2_nonpos, fast_sigmoid, softplus_sigmoid

__all__ = ["CHANNEL_BLOCK", "CHUNK", "LANES", "selective_scan_forward", "transpose_chunk"]

CHUNK = 64  # steps between stored states (checkpoints) and the length of the backward's recompute buffer
LANES = 16  # channels run in lockstep (the innermost, vectorised loop of the forward and of the backward)
CHANNEL_BLOCK = LANES  # the backward's channel block (the wrapper sizes its channel slices by it)

LOG2E = 1.4426950408889634


def _lanes8(idx):
    """A shufflevector mask of eight lane indices."""
    return ir.Constant(ir.VectorType(ir.IntType(32), 8), [ir.Constant(ir.IntType(32), i) for i in idx])


@intrinsic
def _transpose8(typingctx, src, si, sj, dst, di, dj):
    """``dst[di + k, dj + r] = src[si + r, sj + k]`` for ``r, k`` in ``0..7``: an 8x8 block transposed in vector
    registers (8 row loads, 24 shuffles, 8 row stores; LLVM lowers the shuffles to unpack/shuffle/lane-permute
    instructions on AVX2 and AVX-512 alike). numba has no vector type, so this is written as LLVM IR.

    ``src`` and ``dst``: 2-D float arrays of one dtype whose rows are contiguous (inner stride = itemsize; not
    checked here, the callers check it) and that hold the whole block (no bounds check).
    """
    if not (isinstance(src, types.Array) and isinstance(dst, types.Array) and src.ndim == 2 and dst.ndim == 2
            and src.dtype == dst.dtype and isinstance(src.dtype, types.Float)):
        return None

    def codegen(context, builder, signature, args):
        sty, dty = signature.args[0], signature.args[3]
        elem = context.get_data_type(sty.dtype)
        vec, align = ir.VectorType(elem, 8), context.get_abi_sizeof(elem)
        i0, j0, k0, l0 = (context.cast(builder, args[a], signature.args[a], types.intp) for a in (1, 2, 4, 5))

        def row(ty, value, i, j, r):  # a pointer to 8 elements of ``value[i + r, j:]``
            arr = context.make_array(ty)(context, builder, value)
            p = cgutils.get_item_pointer2(
                context, builder, arr.data, cgutils.unpack_tuple(builder, arr.shape, 2),
                cgutils.unpack_tuple(builder, arr.strides, 2), ty.layout,
                [builder.add(i, ir.Constant(i.type, r)), j],
            )  # fmt: skip
            return builder.bitcast(p, vec.as_pointer())

        def shuf(a, b, idx):
            return builder.shuffle_vector(a, b, _lanes8(idx))

        r = [builder.load(row(sty, args[0], i0, j0, k), align=align) for k in range(8)]
        t = []  # pairs of rows interleaved by element: t[2q], t[2q + 1] from rows 2q, 2q + 1
        for q in range(0, 8, 2):
            t += [shuf(r[q], r[q + 1], [0, 8, 1, 9, 4, 12, 5, 13]),
                  shuf(r[q], r[q + 1], [2, 10, 3, 11, 6, 14, 7, 15])]
        lo, hi = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]  # then by pairs: four rows interleaved
        u = [shuf(t[0], t[2], lo), shuf(t[0], t[2], hi), shuf(t[1], t[3], lo), shuf(t[1], t[3], hi),
             shuf(t[4], t[6], lo), shuf(t[4], t[6], hi), shuf(t[5], t[7], lo), shuf(t[5], t[7], hi)]
        for k in range(4):  # then by 128-bit halves: column k from u[k]'s and u[k + 4]'s low halves, k + 4 from highs
            builder.store(shuf(u[k], u[k + 4], [0, 1, 2, 3, 8, 9, 10, 11]), row(dty, args[3], k0, l0, k), align=align)
            builder.store(shuf(u[k], u[k + 4], [4, 5, 6, 7, 12, 13, 14, 15]), row(dty, args[3], k0, l0, k + 4),
                          align=align)  # fmt: skip
        return context.get_dummy_value()

    return types.none(src, si, sj, dst, di, dj), codegen


@njit(**STEP)
def transpose_chunk(src, dst, n, k):
    """``dst[j, i] = src[i, j]`` for ``i < n``, ``j < k``: a chunk's rows (channels, steps; a view of a
    ``(batch, channels, length)`` array) into a ``[step, lane]`` buffer, or back. Whole 8x8 blocks go through
    :func:`_transpose8` when both arrays' rows are contiguous (4x faster than element by element on Zen 3); the
    rest, element by element."""
    i8 = j8 = 0
    if src.strides[1] == src.itemsize and dst.strides[1] == dst.itemsize:
        i8, j8 = n - n % 8, k - k % 8
        for i0 in range(0, i8, 8):
            for j0 in range(0, j8, 8):
                _transpose8(src, i0, j0, dst, j0, i0)
    for i in range(i8, n):
        for j in range(j8):
            dst[j, i] = src[i, j]
    for i in range(n):
        for j in range(j8, k):
            dst[j, i] = src[i, j]


@njit(**STEP)
def _forward_chunk(h, a, dt, x, dtx, out, sk, Bc, Cc, kc, m, nonpos):
    """A chunk's ``m`` forward steps of a ``(state, LANES)`` block: per step ``h <- 2**(dt A log2 e) h + dt u B``
    (``h`` zeroed first where ``kc`` is 0), ``out = D u + C . h``.

    ``h``, ``a``: ``(state, LANES)``; ``dt``, ``x``, ``dtx`` (dt u), ``out``: the chunk's ``[step, lane]``
    buffers; ``sk``: ``(LANES,)`` the D skip; ``Bc``, ``Cc``: ``(m, state)``; ``kc``: ``(m,)`` keep flags;
    ``nonpos``: every ``dt a`` is ``<= 0`` (:func:`fast_exp2_nonpos` then; a loop-invariant flag: LLVM compiles
    the loop for both values). No two arguments share an element (see :class:`NoAliasCompiler`); one call per
    chunk, not per step.
    """
    n_s = h.shape[0]
    for j in range(m):
        if kc[j] == 0:
            for n in range(n_s):
                for c in range(LANES):
                    h[n, c] = 0
        for c in range(LANES):
            out[j, c] = sk[c] * x[j, c]
        for n in range(n_s):
            bn = Bc[j, n]
            cn = Cc[j, n]
            for c in range(LANES):
                x2 = dt[j, c] * a[n, c]
                hn = (fast_exp2_nonpos(x2) if nonpos else fast_exp2(x2)) * h[n, c] + dtx[j, c] * bn
                h[n, c] = hn
                out[j, c] += hn * cn


@njit(**STEP)
def _dt_step(dt, x, dtx, bl, m, softplus):
    """Over a chunk's ``[step, lane]`` buffers: ``dt <- softplus(dt + bias)`` (or ``dt + bias``), ``dtx = dt x``."""
    for j in range(m):
        for c in range(LANES):
            v = dt[j, c] + bl[c]
            if softplus:
                v = softplus_sigmoid(v)[0]
            dt[j, c] = v
            dtx[j, c] = v * x[j, c]


@njit(**STEP)
def _gate_forward(out, z, ypre, m):
    """``out = ypre * silu(z)`` over a chunk's ``[step, lane]`` buffers."""
    for j in range(m):
        for c in range(LANES):
            zc = z[j, c]
            out[j, c] = ypre[j, c] * zc * fast_sigmoid(zc)


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def selective_scan_forward(u, delta, A, Bt, Ct, Dv, bias, softplus, h0, keep, y, last, ckpt, save, z, gate):
    """Forward selective scan; the step ``dt = softplus(delta + bias)`` (softplus if ``softplus``) is formed here.

    Each task runs ``LANES`` channels of one (batch, group) in lockstep: the state is a ``(state, LANES)`` block and
    the innermost loop runs over the channels, a fixed trip count that LLVM turns into whole vector registers with
    no remainder (vectorising over the state instead left 16 states in 4-wide pieces plus a horizontal sum per
    step). ``B_l[n]`` and ``C_l[n]`` are scalars broadcast to all lanes; ``y`` needs no horizontal sum. Lanes past
    the last channel of a group run on zeros and are never written.

    The length runs in chunks of ``CHUNK`` steps. A chunk's ``delta`` and ``u`` are transposed into ``[step, lane]``
    buffers (:func:`transpose_chunk`; the step's bias and softplus are then computed there), and its output goes back
    the same way (the gate applied before). Reading the 16 channels of one
    step directly (16 addresses a row pitch apart, every one in the same L1 set when the pitch is a multiple of
    4 KiB) cost more than the recurrence.

    Arguments:
        u, delta: ``(batch, channels, length)`` (any strides); ``delta`` before bias and softplus.
        A: ``(channels, state)`` (real).
        Bt, Ct: ``(batch, groups, length, state)`` (transposed from Mamba's ``(batch, groups, state, length)``).
        Dv: ``(channels,)`` skip weight (zeros when absent). bias: ``(channels,)`` added to ``delta`` (zeros when
            absent). softplus: apply softplus to ``delta + bias``.
        h0: ``(batch, channels, state)`` initial state.
        keep: ``(batch, length)`` 1 where the state carries over, 0 where a packed sequence starts (reset).
        y: ``(batch, channels, length)`` output ``C . h + D u``, times ``silu(z)`` if ``gate``; written in place.
        last: ``(batch, channels, state)`` final state, written in place.
        ckpt: ``(batch, channels, ceil(length / CHUNK), state)`` states after every chunk (written if ``save``).
        save: write ``ckpt`` (for the backward, which recomputes the states and the output before the gate from it).
        z: ``(batch, channels, length)`` gate (read if ``gate``; any strides).
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
        io = np.zeros((4, CHUNK, LANES), dtype=u.dtype)  # the chunk's dt, u, dt * u, output, [step, lane]
        sk = np.zeros(LANES, dtype=u.dtype)
        bl = np.zeros(LANES, dtype=u.dtype)
        nonpos = softplus  # dt = softplus(...) >= 0 and A <= 0: every decay exponent is <= 0 (fast_exp2_nonpos)
        for c in range(nb):
            sk[c] = Dv[d0 + c]
            bl[c] = bias[d0 + c]
            for n in range(n_s):
                a[n, c] = A[d0 + c, n] * LOG2E  # exp(dt A) = 2**(dt A log2(e)): fast_exp2's cheaper reduction
                h[n, c] = h0[b, d0 + c, n]
                if A[d0 + c, n] > 0:
                    nonpos = False
        for s0 in range(0, n_l, CHUNK):
            m = min(n_l, s0 + CHUNK) - s0
            transpose_chunk(delta[b, d0:d0 + nb, s0:s0 + m], io[0], nb, m)  # the chunk's inputs to [step, lane]
            transpose_chunk(u[b, d0:d0 + nb, s0:s0 + m], io[1], nb, m)
            _dt_step(io[0], io[1], io[2], bl, m, softplus)  # dt = softplus(delta + bias), dt * u
            _forward_chunk(h, a, io[0], io[1], io[2], io[3], sk, Bt[b, g, s0:s0 + m], Ct[b, g, s0:s0 + m],
                           keep[b, s0:s0 + m], m, nonpos)
            if save:
                for c in range(nb):
                    for n in range(n_s):
                        ckpt[b, d0 + c, s0 // CHUNK, n] = h[n, c]
            res = 3  # the [step, lane] buffer that holds the output
            if gate:  # y = (C . h + D u) * silu(z), over [step, lane] (u's buffer takes z, dt's the gated output)
                res = 0
                transpose_chunk(z[b, d0:d0 + nb, s0:s0 + m], io[1], nb, m)
                _gate_forward(io[0], io[1], io[3], m)
            transpose_chunk(io[res], y[b, d0:d0 + nb, s0:s0 + m], m, nb)  # the chunk's output, back along the length
        for c in range(nb):
            for n in range(n_s):
                last[b, d0 + c, n] = h[n, c]
