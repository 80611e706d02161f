"""What the Numba kernels share: compile flags, the ``noalias`` pipeline, cache prefetch hints and fast float32 math.

* :data:`SCAN_FLAGS` (the linear scan: no reassociation, so its order of operations is the one written) and
  :data:`FAST_FLAGS` (the selective scan and the causal convolution: reassociation and approximate functions too).
  Neither has ``nnan``/``ninf``: NaN and inf propagate.
* :class:`NoAliasCompiler` and :data:`STEP`: the options of the small per-chunk helpers whose array arguments never
  share an element (LLVM's ``noalias``: what lets their loops vectorise on AVX2 too).
* :func:`prefetch_r`, :func:`prefetch_w` (``llvm.prefetch`` on an array element) and the loops over them:
  :func:`prefetch_span`, :func:`prefetch_next`, :func:`prefetch_rows` (the linear scan's row kernels, the selective
  scan's backward).
* :func:`chunk_task`: a parallel task's (batch, chunk, group) in the SSD kernels (``prange`` over their product).
* :func:`fast_exp`, :func:`fast_exp2`, :func:`fast_exp2_nonpos`, :func:`fast_sigmoid`, :func:`softplus_sigmoid`:
  float32 forms built from bits and short polynomials (``math`` in float64), with element-wise array forms for the
  tests. Constants are typed in the input's precision: numba types ``float32 op 1`` (or ``op 1.0``) as float64, which
  halves the vector width and adds conversions.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.extending import intrinsic, overload

__all__ = [
    "FAST_FLAGS",
    "SCAN_FLAGS",
    "STEP",
    "NoAliasCompiler",
    "chunk_task",
    "fast_exp",
    "fast_exp2",
    "fast_exp2_nonpos",
    "fast_exp2_sigmoid_array",
    "fast_exp_array",
    "fast_sigmoid",
    "prefetch_next",
    "prefetch_r",
    "prefetch_rows",
    "prefetch_span",
    "prefetch_w",
    "softplus_sigmoid",
    "softplus_sigmoid_array",
]

SCAN_FLAGS = {"nsz", "contract", "arcp"}  # no 'nnan'/'ninf': NaN and inf must propagate exactly
FAST_FLAGS = {"nsz", "contract", "arcp", "reassoc", "afn"}  # no 'nnan'/'ninf': NaN and inf propagate


class NoAliasCompiler(CompilerBase):
    """Numba's nopython pipeline with LLVM's ``noalias`` on every pointer argument (numba's ``noalias`` flag, which
    ``@njit`` does not expose).

    The kernels' step helpers (a chunk's work, called once per chunk) take work buffers that never share an element.
    Said so, LLVM vectorises their 16-lane loops with no runtime alias checks; without it (the loops inside the
    kernels), on AVX2 (Zen 3) it left the adjoint loop scalar (checks it could not form, or that failed over the whole
    outer loop), 8x slower.
    """

    def define_pipelines(self):
        self.state.flags.noalias = True
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]


STEP = dict(cache=True, error_model="numpy", fastmath=FAST_FLAGS, pipeline_class=NoAliasCompiler)


# ---------------------------------------------------------------------------------------------------------------
# cache prefetch hints
def _make_prefetch(write: int, locality: int = 3):
    @intrinsic
    def prefetch(typingctx, arr, idx):
        """Hint the cache to fetch ``arr[idx]`` (``llvm.prefetch``; a no-op for the program's meaning)."""
        if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", fnty=fnty)
            builder.call(
                fn,
                [builder.bitcast(ptr, i8p), ir.Constant(i32, write), ir.Constant(i32, locality), ir.Constant(i32, 1)],
            )
            return context.get_dummy_value()

        return types.void(arr, idx), codegen

    return prefetch


prefetch_r = _make_prefetch(0)
prefetch_w = _make_prefetch(1)


@njit(cache=True, error_model="numpy", inline="always")
def prefetch_span(r1, r2, r3, w1, w2, lo, hi, line):
    """Prefetch elements ``lo .. hi`` (a line apart) of three arrays to read and two to write; the row kernels of
    three arrays name one twice (a second prefetch of a line costs next to nothing)."""
    for k in range(lo, hi, line):
        prefetch_r(r1, k)
        prefetch_r(r2, k)
        prefetch_r(r3, k)
        prefetch_w(w1, k)
        prefetch_w(w2, k)


@njit(cache=True, error_model="numpy", inline="always")
def prefetch_next(r1, r2, r3, w1, w2, p, n_lines, line):
    """Prefetch the next ``n_lines`` lines of a row from element ``p`` on, within ``r1``'s length; returns where the
    next call goes on."""
    for _ in range(n_lines):
        if p < r1.shape[0]:
            prefetch_span(r1, r2, r3, w1, w2, p, p + 1, line)
            p += line
    return p


@njit(cache=True, error_model="numpy", inline="always")
def prefetch_rows(r1, r2, r3, w1, w2):
    """Prefetch every cache line of three rows to read and two to write."""
    prefetch_span(r1, r2, r3, w1, w2, 0, r1.shape[0], max(1, 64 // r1.itemsize))


# ---------------------------------------------------------------------------------------------------------------
# fast float32 math
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


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS, inline="always")
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


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS, inline="always")
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


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def fast_exp_array(x, out):
    """Element-wise :func:`fast_exp` (for tests)."""
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS)
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


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def softplus_sigmoid_array(x, sp, sig):
    """Element-wise :func:`softplus_sigmoid` (for tests)."""
    for i in range(x.shape[0]):
        sp[i], sig[i] = softplus_sigmoid(x[i])


@njit(inline="always", cache=True)
def chunk_task(task, n_c, n_g):
    """The (batch, chunk, group) of parallel task ``task`` of ``batch * n_c * n_g`` (group fastest)."""
    return task // (n_c * n_g), (task // n_g) % n_c, task % n_g
