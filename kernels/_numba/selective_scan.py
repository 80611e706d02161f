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
helpers, one call per chunk, compiled with LLVM's ``noalias`` on their array arguments (:class:`_NoAliasCompiler`):
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
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.extending import intrinsic, overload

from .linear_scan import _prefetch_rows

CHUNK = 64  # steps between stored states (checkpoints) and the length of the backward's recompute buffer
LANES = 16  # channels run in lockstep (the innermost, vectorised loop of the forward and of the backward)
CHANNEL_BLOCK = LANES  # the backward's channel block (the wrapper sizes its channel slices by it)

_FLAGS = {"nsz", "contract", "arcp", "reassoc", "afn"}  # no 'nnan'/'ninf': NaN and inf propagate
_LOG2E = 1.4426950408889634


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


@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
def _horner6(x, c5, c4, c3, c2, c1, c0):
    """``c5 x^5 + c4 x^4 + ... + c0`` by Horner's rule (the exponentials' polynomials)."""
    return ((((c5 * x + c4) * x + c3) * x + c2) * x + c1) * x + c0


def fast_exp(x):
    """``exp(x)``; float32: a degree-6 polynomial on ``[-ln2/2, ln2/2]`` times ``2**k`` built from its bits."""
    return math.exp(x)


@overload(fast_exp, inline="always")
def _fast_exp_impl(x):
    if x == types.float32:

        def impl(x):
            xc = min(max(x, np.float32(-87.3)), np.float32(88.3))
            kf = np.floor(xc * np.float32(1.4426950408889634) + np.float32(0.5))
            k = np.int32(kf)  # a 32-bit conversion (math.floor's int64 took two 512-bit conversions per vector)
            r = xc - kf * np.float32(0.693359375) - kf * np.float32(-2.12194440e-4)
            p = _horner6(r, np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3),
                         np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1))
            p = p * r * r + r + np.float32(1.0)
            res = p * _bits_to_f32((k + np.int32(127)) << np.int32(23))
            res = res if x > np.float32(-87.3) else np.float32(0.0)
            return res if x == x else x  # NaN in, NaN out (a select: an early return broke numba's SSA check)

        return impl
    if isinstance(x, types.Float):
        return lambda x: math.exp(x)
    return None


def fast_exp2(x):
    """``2**x``; float32: ``2**round(x)`` from its bits times a degree-5 polynomial of the rest (in [-1/2, 1/2]),
    relative error < 2e-7 (about 1.4 ulp).

    Cheaper than :func:`fast_exp` (no two-constant argument reduction): the recurrences fold ``log2(e)`` into ``A``.
    Below -127 it is exactly 0; NaN propagates.
    """
    return 2.0 ** x


@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
def _pow2_poly(xc):
    """``2**xc`` for a float32 ``xc`` in ``[-127, 127]`` (or NaN): the body of :func:`fast_exp2`."""
    kf = np.rint(xc)  # one rounding instruction (floor(x + 1/2) took an add and a constant more)
    f = xc - kf
    # degree 5, fitted for relative error on [-1/2, 1/2] (Lawson's iteration): < 1.7e-7 in float32. Degree 6 gave
    # < 1e-7 but cost an FMA and a constant more per update; AVX2's 16 registers spilled its constants (state loop
    # 10-18% faster this way, interleaved A/B on Zen 3)
    p = _horner6(f, np.float32(1.3264616619788755e-3), np.float32(9.671475373075493e-3),
                 np.float32(5.550733676531183e-2), np.float32(2.4022242674771233e-1),
                 np.float32(6.931469778836442e-1), np.float32(1.0))
    return p * _bits_to_f32((np.int32(kf) + np.int32(127)) << np.int32(23))


@overload(fast_exp2)
def _fast_exp2_impl(x):
    if x == types.float32:

        def impl(x):
            # clamped by compares that a NaN fails, so it stays NaN to the end (NaN * anything): no final select.
            # (min/max would turn a NaN into a bound.) Same values as a clamp plus a NaN select; 5% off the state loop
            xc = np.float32(-127.0) if x < np.float32(-127.0) else x
            xc = np.float32(127.0) if xc > np.float32(127.0) else xc
            return _pow2_poly(xc)

        return impl
    if isinstance(x, types.Float):
        return lambda x: 2.0 ** x
    return None


def fast_exp2_nonpos(x):
    """:func:`fast_exp2` for ``x <= 0`` (or NaN), where it gives the same values with one clamp fewer.

    The decays ``2**(dt A log2 e)`` of a block whose ``A`` is all ``<= 0``, with ``dt = softplus(...) >= 0``, are
    such arguments; the state loops take this form then (12% faster than :func:`fast_exp2` in a standalone chunk
    loop on Zen 3). Exact up to 127 too, but above that the exponent bits wrap (to signed zeros and finite
    garbage, where :func:`fast_exp2` saturates at ``2**127``): callers must know the sign.
    """
    return 2.0 ** x


@overload(fast_exp2_nonpos)
def _fast_exp2_nonpos_impl(x):
    if x == types.float32:
        return lambda x: _pow2_poly(np.float32(-127.0) if x < np.float32(-127.0) else x)
    if isinstance(x, types.Float):
        return lambda x: 2.0 ** x
    return None


def fast_sigmoid(x):
    """``1 / (1 + exp(-x))`` in the input's precision (an integer literal ``1`` would promote float32 to float64)."""
    return 1.0 / (1.0 + math.exp(-x))


@overload(fast_sigmoid, inline="always")
def _fast_sigmoid_impl(x):
    if x == types.float32:
        return lambda x: np.float32(1.0) / (np.float32(1.0) + fast_exp(-x))
    if isinstance(x, types.Float):
        return lambda x: 1.0 / (1.0 + math.exp(-x))
    return None


@njit(cache=True, error_model="numpy", fastmath=_FLAGS)
def fast_exp_array(x, out):
    """Element-wise :func:`fast_exp` (for tests)."""
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


@njit(cache=True, error_model="numpy", fastmath=_FLAGS)
def fast_exp2_sigmoid_array(x, e2, sig, e2n):
    """Element-wise :func:`fast_exp2`, :func:`fast_sigmoid` and :func:`fast_exp2_nonpos` (for tests)."""
    for i in range(x.shape[0]):
        e2[i] = fast_exp2(x[i])
        sig[i] = fast_sigmoid(x[i])
        e2n[i] = fast_exp2_nonpos(x[i])


def softplus_sigmoid(x):
    """``(softplus(x), sigmoid(x))``, both from one ``exp(-|x|)``."""
    e = math.exp(-abs(x))
    return max(x, 0.0) + math.log1p(e), (1.0 if x >= 0 else e) / (1.0 + e)


@overload(softplus_sigmoid, inline="always")
def _softplus_sigmoid_impl(x):
    if x == types.float32:

        def impl(x):
            # log1p(e) for e = exp(-|x|) in (0, 1] as 2 atanh(t), t = e / (2 + e) <= 1/3: an odd series in t whose
            # terms shrink 9x each (truncation error < 2e-8), accurate down to tiny e (no 1 + e rounding)
            e = fast_exp(-abs(x))
            t = e / (np.float32(2.0) + e)
            t2 = t * t
            p = np.float32(1.0 / 13.0)
            p = p * t2 + np.float32(1.0 / 11.0)
            p = p * t2 + np.float32(1.0 / 9.0)
            p = p * t2 + np.float32(1.0 / 7.0)
            p = p * t2 + np.float32(1.0 / 5.0)
            p = p * t2 + np.float32(1.0 / 3.0)
            p = p * t2 + np.float32(1.0)
            r = np.float32(1.0) / (np.float32(1.0) + e)
            sig = r if x >= np.float32(0.0) else e * r
            return max(x, np.float32(0.0)) + np.float32(2.0) * t * p, sig

        return impl
    if isinstance(x, types.Float):

        def impl(x):
            e = math.exp(-abs(x))
            return max(x, 0.0) + math.log1p(e), (1.0 if x >= 0 else e) / (1.0 + e)

        return impl
    return None


@njit(cache=True, error_model="numpy", fastmath=_FLAGS)
def softplus_sigmoid_array(x, sp, sig):
    """Element-wise :func:`softplus_sigmoid` (for tests)."""
    for i in range(x.shape[0]):
        sp[i], sig[i] = softplus_sigmoid(x[i])


class _NoAliasCompiler(CompilerBase):
    """Numba's nopython pipeline with LLVM's ``noalias`` on every pointer argument (numba's ``noalias`` flag, which
    ``@njit`` does not expose).

    The step helpers below take work buffers that never share an element. Said so, LLVM vectorises their 16-lane
    loops with no runtime alias checks; without it (the loops inside the kernels), on AVX2 (Zen 3) it left the
    adjoint loop scalar (checks it could not form, or that failed over the whole outer loop), 8x slower.
    """

    def define_pipelines(self):
        self.state.flags.noalias = True
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]


_STEP = dict(cache=True, error_model="numpy", fastmath=_FLAGS, pipeline_class=_NoAliasCompiler)


@njit(**_STEP)
def _transpose(src, dst, n, k):
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


@njit(**_STEP)
def _forward_chunk(h, a, dt, x, dtx, out, sk, Bc, Cc, kc, m, nonpos):
    """A chunk's ``m`` forward steps of a ``(state, LANES)`` block: per step ``h <- 2**(dt A log2 e) h + dt u B``
    (``h`` zeroed first where ``kc`` is 0), ``out = D u + C . h``.

    ``h``, ``a``: ``(state, LANES)``; ``dt``, ``x``, ``dtx`` (dt u), ``out``: the chunk's ``[step, lane]``
    buffers; ``sk``: ``(LANES,)`` the D skip; ``Bc``, ``Cc``: ``(m, state)``; ``kc``: ``(m,)`` keep flags;
    ``nonpos``: every ``dt a`` is ``<= 0`` (:func:`fast_exp2_nonpos` then; a loop-invariant flag: LLVM compiles
    the loop for both values). No two arguments share an element (see :class:`_NoAliasCompiler`); one call per
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


@njit(**_STEP)
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


@njit(**_STEP)
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


@njit(**_STEP)
def _dt_step(dt, x, dtx, bl, m, softplus):
    """Over a chunk's ``[step, lane]`` buffers: ``dt <- softplus(dt + bias)`` (or ``dt + bias``), ``dtx = dt x``."""
    for j in range(m):
        for c in range(LANES):
            v = dt[j, c] + bl[c]
            if softplus:
                v = softplus_sigmoid(v)[0]
            dt[j, c] = v
            dtx[j, c] = v * x[j, c]


@njit(**_STEP)
def _gate_forward(out, z, ypre, m):
    """``out = ypre * silu(z)`` over a chunk's ``[step, lane]`` buffers."""
    for j in range(m):
        for c in range(LANES):
            zc = z[j, c]
            out[j, c] = ypre[j, c] * zc * fast_sigmoid(zc)


@njit(**_STEP)
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


@njit(**_STEP)
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


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
def selective_scan_forward(u, delta, A, Bt, Ct, Dv, bias, softplus, h0, keep, y, last, ckpt, save, z, gate):
    """Forward selective scan; the step ``dt = softplus(delta + bias)`` (softplus if ``softplus``) is formed here.

    Each task runs ``LANES`` channels of one (batch, group) in lockstep: the state is a ``(state, LANES)`` block and
    the innermost loop runs over the channels, a fixed trip count that LLVM turns into whole vector registers with
    no remainder (vectorising over the state instead left 16 states in 4-wide pieces plus a horizontal sum per
    step). ``B_l[n]`` and ``C_l[n]`` are scalars broadcast to all lanes; ``y`` needs no horizontal sum. Lanes past
    the last channel of a group run on zeros and are never written.

    The length runs in chunks of ``CHUNK`` steps. A chunk's ``delta`` and ``u`` are transposed into ``[step, lane]``
    buffers (:func:`_transpose`; the step's bias and softplus are then computed there), and its output goes back the
    same way (the gate applied before). Reading the 16 channels of one
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
                a[n, c] = A[d0 + c, n] * _LOG2E  # exp(dt A) = 2**(dt A log2(e)): fast_exp2's cheaper reduction
                h[n, c] = h0[b, d0 + c, n]
                if A[d0 + c, n] > 0:
                    nonpos = False
        for s0 in range(0, n_l, CHUNK):
            m = min(n_l, s0 + CHUNK) - s0
            _transpose(delta[b, d0:d0 + nb, s0:s0 + m], io[0], nb, m)  # the chunk's inputs to [step, lane]
            _transpose(u[b, d0:d0 + nb, s0:s0 + m], io[1], nb, m)
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
                _transpose(z[b, d0:d0 + nb, s0:s0 + m], io[1], nb, m)
                _gate_forward(io[0], io[1], io[3], m)
            _transpose(io[res], y[b, d0:d0 + nb, s0:s0 + m], m, nb)  # the chunk's output, back along the length
        for c in range(nb):
            for n in range(n_s):
                last[b, d0 + c, n] = h[n, c]


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
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
                    av2[n, c] = A[db0 + c, n] * _LOG2E
                    if A[db0 + c, n] > 0:
                        nonpos = False
                    adj[n, c] = dh0[b, db0 + c, n]  # the caller preloads dh0 with the final state's gradient
            for ch in range(n_chunks - 1, -1, -1):
                s0 = ch * CHUNK
                m = min(n_l, s0 + CHUNK) - s0
                _transpose(delta[b, db0:db0 + nb, s0:s0 + m], io[0], nb, m)  # the chunk's inputs to [step, lane]
                _transpose(u[b, db0:db0 + nb, s0:s0 + m], io[1], nb, m)
                _transpose(dy[b, db0:db0 + nb, s0:s0 + m], io[3], nb, m)
                if gate:
                    _transpose(z[b, db0:db0 + nb, s0:s0 + m], io[7], nb, m)
                for c in range(nb):
                    for n in range(n_s):
                        hist[0, n, c] = h0[b, db0 + c, n] if ch == 0 else ckpt[b, db0 + c, ch - 1, n]
                    if ch > 0:  # prefetch the chunk before (the next one processed): no hardware prefetcher follows
                        # 16+ rows read in descending chunks, and waiting on those lines cost ~15% of the backward
                        p0 = s0 - CHUNK
                        _prefetch_rows(delta[b, db0 + c, p0:s0], u[b, db0 + c, p0:s0], dy[b, db0 + c, p0:s0],
                                       du[b, db0 + c, p0:s0], ddelta[b, db0 + c, p0:s0])  # fmt: skip
                        if gate:
                            _prefetch_rows(z[b, db0 + c, p0:s0], z[b, db0 + c, p0:s0], z[b, db0 + c, p0:s0],
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
                _transpose(io[4], du[b, db0:db0 + nb, s0:s0 + m], m, nb)  # du, d delta (and dz), back to rows
                _transpose(io[5], ddelta[b, db0:db0 + nb, s0:s0 + m], m, nb)
                if gate:
                    _transpose(io[7], dz[b, db0:db0 + nb, s0:s0 + m], m, nb)
            for c in range(nb):
                d = db0 + c
                for n in range(n_s):
                    dh0[b, d, n] = adj[n, c]
                    dA_part[b, d, n] = dAs[n, c]
                dD_part[b, d] = dd[c]
                dbias_part[b, d] = dbl[c]
