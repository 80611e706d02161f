"""The linear scan's vector row kernels, written as LLVM IR: one vector register of a contiguous float row at a time.

Per vector of ``W`` elements the affine maps ``(a_t, b_t)`` are combined by a Hillis-Steele scan in registers
(``log2(W)`` rounds of lane shifts), then one vector multiply-add carries the state on: only that multiply-add and a
lane broadcast sit on the loop-carried chain. :func:`make_vec_scan` builds the forward (ascending or descending),
:func:`make_vec_adjoint` the adjoint; the row kernels of :mod:`kernels._numba.linear_scan` and
:mod:`kernels._numba.linear_scan_backward` call them on whole vectors and finish the ends in scalar code.

The vectors are one AVX-512 register (:data:`VEC_BYTES`); on a CPU without AVX-512 the width is 0 and the row
kernels take their scalar blocked chains (:func:`vector_lanes` is a compile-time constant, so the branch costs
nothing).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["VEC_BYTES", "make_vec_adjoint", "make_vec_scan", "vec_adjoint_down", "vec_adjoint_up", "vec_scan_down",
           "vec_scan_up", "vector_bytes", "vector_lanes"]


def vector_bytes() -> int:
    """Bytes in the vector row kernels' vectors: 64 where the CPU numba compiles for has AVX-512, else 0 (no vector
    kernel: the scalar blocked chains). Numba's cache is keyed by the CPU's name and features, so machine code
    compiled for one choice never loads on a machine that makes the other."""
    from llvmlite import binding as llvm
    from numba.core import config

    if config.CPU_FEATURES is not None:
        feats = config.CPU_FEATURES
    elif config.CPU_NAME:  # a named target (e.g. 'generic' for portable caches): no host features assumed
        feats = ""
    else:
        feats = llvm.get_host_cpu_features().flatten()
    return 64 if "+avx512f" in feats.split(",") else 0


# Bytes of the vector row kernels' vectors: one AVX-512 register (16 float32, 8 float64 lanes). Without AVX-512 the
# rows take the scalar blocked chains: 32-byte vectors, measured on this lab's Xeon, ran the forward 4-5x slower
# than the scalar chains (for a reason not found; the adjoint ran near its 64-byte speed), and a 64-byte vector
# split across two AVX2 registers would cross their halves in every lane shift; neither was measured on an AVX2
# machine.
VEC_BYTES = vector_bytes()


def _width(dtype, vec_bytes: int) -> int:
    """Lanes of ``dtype`` in a vector of ``vec_bytes``; 0 for dtypes without a vector kernel (complex) and for
    ``vec_bytes == 0`` (no vector kernel on this CPU)."""
    return vec_bytes // (dtype.bitwidth // 8) if dtype in (types.float32, types.float64) else 0


@intrinsic
def vector_lanes(typingctx, arr):
    """Elements of ``arr``'s dtype in a vector of the row kernels (:data:`VEC_BYTES`: 16 float32 or 8 float64 with
    AVX-512), 0 for dtypes without a vector row kernel (complex) or CPUs without one: a compile-time constant, so
    the branch it selects costs nothing."""
    if not isinstance(arr, types.Array):
        return None
    width = _width(arr.dtype, VEC_BYTES)

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, width)

    return types.intp(arr), codegen


def _vec_parts(context, builder, dtype, width, descending):
    """LLVM pieces shared by the vector row kernels: the vector type, the Hillis-Steele rounds (shuffle mask and
    kept lanes per round), the fused multiply-add and the shuffle that broadcasts the lane carrying the state on."""
    i32 = ir.IntType(32)
    vty = ir.VectorType(context.get_value_type(dtype), width)
    rounds = []
    d = 1
    while d < width:  # lane i combines with lane i - d (ascending) or i + d (descending)
        src = [i + d if descending else i - d for i in range(width)]
        keep = [0 <= j < width for j in src]
        mask = ir.Constant(ir.VectorType(i32, width), [j if k else width for j, k in zip(src, keep)])
        rounds.append((mask, ir.Constant(ir.VectorType(ir.IntType(1), width), keep)))
        d *= 2
    fma_fn = builder.module.declare_intrinsic(
        f"llvm.fma.v{width}f{dtype.bitwidth}", fnty=ir.FunctionType(vty, [vty, vty, vty])
    )
    edge = 0 if descending else width - 1  # the lane that carries the state to the next vector
    splat_edge = ir.Constant(ir.VectorType(i32, width), [edge] * width)
    return vty, rounds, fma_fn, splat_edge


def _vec_combine(builder, a, b, rounds, fma_fn):
    """Prefix-combine the affine maps ``(a_i, b_i)`` of one vector in registers: returns ``(A, B)`` with lane ``i``
    the composition of the lanes before it (in scan order) and itself. Lanes with nothing ``d`` before them are
    kept as they are (a select, not a shifted-in identity, so ``inf * 0`` cannot make a NaN the sequential scan
    would not)."""
    zero = ir.Constant(a.type, None)
    for mask, keep in rounds:
        b_sh = builder.shuffle_vector(b, zero, mask)
        a_sh = builder.shuffle_vector(a, zero, mask)
        b = builder.select(keep, builder.call(fma_fn, [a, b_sh, b]), b)
        a = builder.select(keep, builder.fmul(a, a_sh), a)
    return a, b


def _vec_state_slot(builder, vty, h_v):
    """A stack slot (promoted to a register by LLVM) holding ``h_v`` broadcast to every lane."""
    i32 = ir.IntType(32)
    undef = ir.Constant(vty, ir.Undefined)
    slot = cgutils.alloca_once(builder, vty)
    first = builder.insert_element(undef, h_v, ir.Constant(i32, 0))
    builder.store(builder.shuffle_vector(first, undef, ir.Constant(ir.VectorType(i32, vty.count), [0] * vty.count)),
                  slot)  # fmt: skip
    return slot


def _vec_typing(arrs, start, n_vec, h):
    """The element type of the vector kernels' 1-D arrays of one dtype, or None where they do not type."""
    if not all(isinstance(x, types.Array) and x.ndim == 1 for x in arrs) or len({x.dtype for x in arrs}) != 1:
        return None
    if not isinstance(start, types.Integer) or not isinstance(n_vec, types.Integer):
        return None
    return arrs[0].dtype if h == arrs[0].dtype else None


def _vec_pointers(context, builder, signature, args, start_v):
    """Pointers to element ``start_v`` of each array argument (all leading arguments that are arrays)."""
    ptrs = []
    for arty, arr_v in zip(signature.args, args):
        if not isinstance(arty, types.Array):
            break
        ary = context.make_array(arty)(context, builder, arr_v)
        ptrs.append(cgutils.get_item_pointer(context, builder, arty, ary, [start_v], wraparound=False))
    return ptrs


def _vec_offset(builder, index, width, descending):
    """Element offset of the ``index``-th vector from the start: ``index * W`` up, ``-(index + 1) * W`` down."""
    i64 = ir.IntType(64)
    if descending:
        return builder.mul(builder.add(index, ir.Constant(i64, 1)), ir.Constant(i64, -width))
    return builder.mul(index, ir.Constant(i64, width))


def _vec_loop(dtype, descending: bool, n_arrays: int, body, vec_bytes: int):
    """Codegen of a vector row kernel whose arguments are ``n_arrays`` 1-D arrays, ``start``, ``n_vec`` and a
    state: a loop over ``n_vec`` whole vectors from element ``start`` (up, or down from it), the state kept
    broadcast in a register. ``body(builder, ptr, state, fma_fn, rounds, align)`` emits one vector's work
    (``ptr(i, shift)`` points array ``i`` at the vector's first element plus ``shift``) and returns the vector whose
    edge lane carries the state on. Vectors hold ``vec_bytes``; dtypes without a vector width process nothing and
    return the state."""
    width = _width(dtype, vec_bytes)

    def codegen(context, builder, signature, args):
        if width == 0:
            return args[n_arrays + 2]
        i32, i64 = ir.IntType(32), ir.IntType(64)
        start_v = context.cast(builder, args[n_arrays], signature.args[n_arrays], types.int64)
        nvec_v = context.cast(builder, args[n_arrays + 1], signature.args[n_arrays + 1], types.int64)
        ptrs = _vec_pointers(context, builder, signature, args, start_v)
        vty, rounds, fma_fn, splat_edge = _vec_parts(context, builder, dtype, width, descending)
        undef = ir.Constant(vty, ir.Undefined)
        slot = _vec_state_slot(builder, vty, args[n_arrays + 2])
        with cgutils.for_range(builder, nvec_v) as loop:
            off = _vec_offset(builder, loop.index, width, descending)

            def ptr(i, shift=0):
                at = builder.add(off, ir.Constant(i64, shift)) if shift else off
                return builder.bitcast(builder.gep(ptrs[i], [at]), vty.as_pointer())

            carry = body(builder, ptr, builder.load(slot), fma_fn, rounds, dtype.bitwidth // 8)
            builder.store(builder.shuffle_vector(carry, undef, splat_edge), slot)
        return builder.extract_element(builder.load(slot), ir.Constant(i32, 0))

    return codegen


def make_vec_scan(descending: bool, vec_bytes: int = VEC_BYTES):
    @intrinsic
    def vec_scan(typingctx, av, bv, ov, start, n_vec, h):
        """Scan ``n_vec`` whole vectors of a contiguous row from state ``h``; returns the last state.

        Ascending: elements ``start .. start + n_vec * W``; descending: ``start - n_vec * W .. start`` from the top
        down (``h_t = a_t h_{t+1} + b_t``), so a reverse scan streams whole vectors too. Per vector of ``W`` elements
        (one register, :data:`VEC_BYTES`) the affine maps ``(a, b)`` are combined by a Hillis-Steele scan
        (:func:`_vec_combine`: log2(W) rounds of lane shifts, ``b_i <- a_i b_{i-d} + b_i`` then
        ``a_i <- a_i a_{i-d}``), then ``out = A h + B`` and ``h`` becomes the vector's last lane. Only that
        multiply-add and a lane broadcast sit on the loop-carried chain: 0.46 ns an element against 0.63 for the
        scalar blocked chain, in cache, on this lab's AVX-512 Xeon. Any other dtype processes nothing and returns
        ``h``.
        """
        dtype = _vec_typing((av, bv, ov), start, n_vec, h)
        if dtype is None:
            return None

        def body(builder, ptr, h_vec, fma_fn, rounds, align):
            a = builder.load(ptr(0), align=align)
            b = builder.load(ptr(1), align=align)
            a, b = _vec_combine(builder, a, b, rounds, fma_fn)
            o = builder.call(fma_fn, [a, h_vec, b])
            builder.store(o, ptr(2), align=align)
            return o

        return dtype(av, bv, ov, start, n_vec, h), _vec_loop(dtype, descending, 3, body, vec_bytes)

    return vec_scan


def make_vec_adjoint(descending: bool, vec_bytes: int = VEC_BYTES):
    @intrinsic
    def vec_adjoint(typingctx, av, hv, gv, dav, dbv, start, n_vec, d):
        """The adjoint of a scan over ``n_vec`` whole vectors of a contiguous float row, in memory coordinates;
        returns the last gradient state.

        Descending (the adjoint of an ascending scan ``h_t = a_t h_{t-1} + b_t``), elements
        ``start - n_vec * W .. start`` from the top down: ``d_t = a_{t+1} d_{t+1} + g_t``, ``db_t = d_t``,
        ``da_t = d_t h_{t-1}``. Ascending (the adjoint of a reverse scan): ``d_t = a_{t-1} d_{t-1} + g_t``,
        ``da_t = d_t h_{t+1}``. The caller keeps the shifted loads of ``a`` and ``h`` inside the row (``start`` and
        the last vector one element away from either end) and finishes the ends in scalar code. Each vector is one
        :func:`_vec_combine` of ``(a shifted, g)``, one multiply-add with the carried state, and one product.
        """
        dtype = _vec_typing((av, hv, gv, dav, dbv), start, n_vec, d)
        if dtype is None:
            return None
        shift = 1 if descending else -1  # a_{t+1} / a_{t-1}: the coefficient of the step that consumed d_t

        def body(builder, ptr, d_vec, fma_fn, rounds, align):
            a_sh = builder.load(ptr(0, shift), align=align)
            a, b = _vec_combine(builder, a_sh, builder.load(ptr(2), align=align), rounds, fma_fn)
            dv = builder.call(fma_fn, [a, d_vec, b])
            builder.store(dv, ptr(4), align=align)
            h_prev = builder.load(ptr(1, -shift), align=align)
            builder.store(builder.fmul(dv, h_prev), ptr(3), align=align)
            return dv

        return dtype(av, hv, gv, dav, dbv, start, n_vec, d), _vec_loop(dtype, descending, 5, body, vec_bytes)

    return vec_adjoint


vec_scan_up = make_vec_scan(False)
vec_scan_down = make_vec_scan(True)
vec_adjoint_up = make_vec_adjoint(False)
vec_adjoint_down = make_vec_adjoint(True)
