"""Numba CPU kernels for the first-order linear recurrence ``h_t = a_t * h_{t-1} + b_t`` and its adjoint.

Every kernel works on views ``(N, T, M)`` prepared by :mod:`kernels.linear_scan`: ``N`` independent outer rows, the
scan axis ``T`` and ``M`` inner channels (the dims that sit *inside* the scan axis in memory). Two loop orders cover
every layout without copies:

* ``M > 1`` (channels last, e.g. ``(batch, time, channels)``): the inner loop runs over the contiguous channel axis,
  so every time step is one vectorised multiply-add over a block of channels; the parallel tasks are
  (row, channel block) pairs.
* ``M == 1`` (time contiguous, e.g. ``(batch, channels, time)``, passed as 2-D ``(N, T)``): a row is a single chain
  of dependent multiply-adds, capped by the multiply-add latency (~4 cycles an element). The kernel breaks the chain
  into blocks of ``_K`` steps: inside a block it scans from zero while accumulating the product of the coefficients,
  ``(A_j, B_j)``, which does not depend on the incoming state, and then ``h = A_j * h_in + B_j``. Only one
  multiply-add per block sits on the loop-carried chain; the out-of-order core overlaps the blocks, so one row
  streams at close to memory bandwidth. Each row is read as one contiguous stream, so power-of-two row pitches do
  not make interleaved streams collide (4K aliasing), and traffic stays 12 bytes per float32 element. Contiguous
  float32/float64 rows take a vector form of the same idea, forward and adjoint: the elements of a vector register
  are combined by a Hillis-Steele scan in registers, and one vector multiply-add carries the state on
  (:func:`_make_vec_scan`, :func:`_make_vec_adjoint`); complex and strided rows, and every row on a CPU without
  AVX-512, take the scalar blocked chains.

The row kernels take 1-D views in *processing order*: a reverse scan passes ``x[::-1]`` views (a negative stride),
so one body serves both directions.

Memory direction matters on this lab's CPUs: streaming memory backwards ran 2-3x slower than forwards (hardware
prefetchers). A row that runs backwards therefore issues software prefetches: for its own lines below (a long row)
or for the *next* row in ascending order (a short one). The channels-last kernels prefetch whole rows ahead of their
sweep, upwards or downwards.

All kernels accept float32/64 and complex64/128 (the adjoint conjugates, as PyTorch's complex autograd expects).
Compiled with ``cache=True``: a new process loads machine code from ``__pycache__`` instead of recompiling.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

# Steps per block in the time-contiguous kernels (8 measured best on AVX-512 EPYC: 4 leaves the chain visible,
# 16 spills the product/partial-sum pair of a fully unrolled block).
_K = 8
# Channel block of the channels-last kernels (elements): enough tasks for all threads, long enough vectors.
_CBLK = 512

# How far ahead the forward row kernels prefetch their own row (2 KiB, 512 float32; 1 and 4 KiB measured the same).
_AHEAD_BYTES = 2048
# Chunk of the vector row kernel between two rounds of prefetches (256 B: 64 float32, 4 vectors; 128 B-1 KiB chunks
# measured alike, 1 KiB bursts of prefetches and no prefetch at all 3-10 points of bandwidth worse).
_VCHUNK_BYTES = 256
# Rows at least this long prefetch their own lines when scanned in reverse; shorter ones the next row (see
# _row_forward_vec: 16 KiB rows ran 94-99% of the bandwidth with the next row, 86-94% with their own lines; 256 KiB
# rows 72-92% with the next row, 95-105% with their own lines).
_OWN_ROW_BYTES = 65536

_FLAGS = {"nsz", "contract", "arcp"}  # no 'nnan'/'ninf': NaN and inf must propagate exactly


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


_prefetch_r = _make_prefetch(0)
_prefetch_w = _make_prefetch(1)


def _vector_bytes() -> int:
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
_VEC_BYTES = _vector_bytes()


def _width(dtype, vec_bytes: int) -> int:
    """Lanes of ``dtype`` in a vector of ``vec_bytes``; 0 for dtypes without a vector kernel (complex) and for
    ``vec_bytes == 0`` (no vector kernel on this CPU)."""
    return vec_bytes // (dtype.bitwidth // 8) if dtype in (types.float32, types.float64) else 0


@intrinsic
def _lanes(typingctx, arr):
    """Elements of ``arr``'s dtype in a vector of the row kernels (:data:`_VEC_BYTES`: 16 float32 or 8 float64 with
    AVX-512), 0 for dtypes without a vector row kernel (complex) or CPUs without one: a compile-time constant, so
    the branch it selects costs nothing."""
    if not isinstance(arr, types.Array):
        return None
    width = _width(arr.dtype, _VEC_BYTES)

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


def _make_vec_scan(descending: bool, vec_bytes: int = _VEC_BYTES):
    @intrinsic
    def vec_scan(typingctx, av, bv, ov, start, n_vec, h):
        """Scan ``n_vec`` whole vectors of a contiguous row from state ``h``; returns the last state.

        Ascending: elements ``start .. start + n_vec * W``; descending: ``start - n_vec * W .. start`` from the top
        down (``h_t = a_t h_{t+1} + b_t``), so a reverse scan streams whole vectors too. Per vector of ``W`` elements
        (one register, :data:`_VEC_BYTES`) the affine maps ``(a, b)`` are combined by a Hillis-Steele scan
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


def _make_vec_adjoint(descending: bool, vec_bytes: int = _VEC_BYTES):
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


_vec_scan_up = _make_vec_scan(False)
_vec_scan_down = _make_vec_scan(True)
_vec_adjoint_up = _make_vec_adjoint(False)
_vec_adjoint_down = _make_vec_adjoint(True)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_span(r1, r2, r3, w1, w2, lo, hi, line):
    """Prefetch elements ``lo .. hi`` (a line apart) of three arrays to read and two to write; the row kernels of
    three arrays name one twice (a second prefetch of a line costs next to nothing)."""
    for k in range(lo, hi, line):
        _prefetch_r(r1, k)
        _prefetch_r(r2, k)
        _prefetch_r(r3, k)
        _prefetch_w(w1, k)
        _prefetch_w(w2, k)


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_next(r1, r2, r3, w1, w2, p, n_lines, line):
    """Prefetch the next ``n_lines`` lines of a row from element ``p`` on, within ``r1``'s length; returns where the
    next call goes on."""
    for _ in range(n_lines):
        if p < r1.shape[0]:
            _prefetch_span(r1, r2, r3, w1, w2, p, p + 1, line)
            p += line
    return p


@njit(cache=True, error_model="numpy", inline="always")
def _prefetch_rows(r1, r2, r3, w1, w2):
    """Prefetch every cache line of three rows to read and two to write."""
    _prefetch_span(r1, r2, r3, w1, w2, 0, r1.shape[0], max(1, 64 // r1.itemsize))


# ---------------------------------------------------------------------------------------------------------------
# time contiguous: one row (1-D views in processing order)
@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
def _row_forward(av, bv, ov, h, pa, pb, po, prefetch, ahead):
    """Scan one row: ``ov[s] = av[s] * ov[s-1] + bv[s]`` from state ``h``; returns the last state.

    With ``prefetch`` (a row that runs backwards through memory) it also prefetches the next row ``pa, pb, po``
    in ascending order, as :func:`_row_backward` does. With ``ahead`` (a row that runs forwards) it prefetches
    its own lines :data:`_AHEAD_BYTES` ahead (past the row's end: the next row's start when rows are contiguous):
    with three streams per thread the hardware prefetchers alone left ``lab bench scan``'s time-contiguous cases at
    63-85% of the bandwidth, 79-96% with it.
    """
    n_t = bv.shape[0]
    n_full = n_t - n_t % _K
    n_pf = pb.shape[0]
    line = max(1, 64 // bv.itemsize)
    dist = _AHEAD_BYTES // bv.itemsize
    every = max(line, _K)
    p = 0
    for t0 in range(0, n_full, _K):
        if prefetch and p < n_pf:
            _prefetch_r(pa, p)
            _prefetch_r(pb, p)
            _prefetch_w(po, p)
            p += line
        if ahead and t0 % every == 0:  # once per cache line (float32, float64); past the row's end this is the
            # next row's start when rows are contiguous (a prefetch never faults, whatever the address)
            _prefetch_r(av, t0 + dist)
            _prefetch_r(bv, t0 + dist)
            _prefetch_w(ov, t0 + dist)
        acc_a = av[t0]
        acc_b = bv[t0]
        ov[t0] = acc_a * h + acc_b
        for j in range(1, _K):
            x = av[t0 + j]
            acc_a = acc_a * x
            acc_b = x * acc_b + bv[t0 + j]
            ov[t0 + j] = acc_a * h + acc_b
        h = acc_a * h + acc_b
    for t in range(n_full, n_t):
        h = av[t] * h + bv[t]
        ov[t] = h
    return h


@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
def _row_forward_vec(av, bv, ov, h, pa, pb, po, reverse, prefetch):
    """Scan one contiguous float row with the vector kernel (:func:`_make_vec_scan`); returns the last state.

    ``av, bv, ov`` are ascending views (positive unit stride); ``reverse`` scans from the end. Every
    :data:`_VCHUNK_BYTES` chunk first issues prefetches for the memory it will need :data:`_AHEAD_BYTES` later:

    * ascending: the row's own lines ahead (past its end that is the next row's start when rows are contiguous);
    * descending, in a row of :data:`_OWN_ROW_BYTES` or more: its own lines below;
    * descending, in a shorter row, with ``prefetch``: the next row ``pa, pb, po``, ascending, a line for each line
      of this row (own lines left the short rows' first 2 KiB cold: 50-70% of the bandwidth at 1 KiB rows).

    Side by side in one process on this lab's Xeon, against the scalar blocked kernel (:func:`_row_forward`), in %
    of the same run's bandwidth reference: forward float32 95-107 (70-100 before), reverse float32 79-97 (49-87),
    float64 alike or better.
    """
    n_t = bv.shape[0]
    width = _lanes(ov)
    line = max(1, 64 // bv.itemsize)
    chunk = max(width, _VCHUNK_BYTES // bv.itemsize)
    dist = _AHEAD_BYTES // bv.itemsize
    if reverse:
        own = n_t * bv.itemsize >= _OWN_ROW_BYTES
        p = 0
        e = n_t
        while e >= chunk:
            if own:  # a long row: its own lines, `dist` below, descending
                _prefetch_span(av, bv, bv, ov, ov, max(0, e - chunk - dist), max(0, e - dist), line)
            elif prefetch:  # a short one: the next row, ascending, a line of it for each line of this one
                p = _prefetch_next(pa, pb, pb, po, po, p, chunk // line, line)
            h = _vec_scan_down(av, bv, ov, e, chunk // width, h)
            e -= chunk
        n_vec = e // width
        h = _vec_scan_down(av, bv, ov, e, n_vec, h)
        for t in range(e - n_vec * width - 1, -1, -1):
            h = av[t] * h + bv[t]
            ov[t] = h
        return h
    t0 = 0
    while t0 + chunk <= n_t:
        _prefetch_span(av, bv, bv, ov, ov, t0 + dist, t0 + dist + chunk, line)  # never faults, whatever the address
        h = _vec_scan_up(av, bv, ov, t0, chunk // width, h)
        t0 += chunk
    n_vec = (n_t - t0) // width
    h = _vec_scan_up(av, bv, ov, t0, n_vec, h)
    for t in range(t0 + n_vec * width, n_t):
        h = av[t] * h + bv[t]
        ov[t] = h
    return h


@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
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
    while s + _K <= n_mid:
        if prefetch and p < n_pf:  # one cache line of each next-row array per block
            _prefetch_r(pa, p)
            _prefetch_r(ph, p)
            _prefetch_r(pg, p)
            _prefetch_w(pda, p)
            _prefetch_w(pdb, p)
            p += line
        acc_a = np.conj(av[s - 1])
        acc_b = gv[s]
        v = acc_a * d + acc_b
        dbv[s] = v
        dav[s] = v * np.conj(hv[s + 1])
        for j in range(1, _K):
            x = np.conj(av[s + j - 1])
            acc_a = acc_a * x
            acc_b = x * acc_b + gv[s + j]
            v = acc_a * d + acc_b
            dbv[s + j] = v
            dav[s + j] = v * np.conj(hv[s + j + 1])
        d = acc_a * d + acc_b
        s += _K
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


@njit(cache=True, error_model="numpy", fastmath=_FLAGS, inline="always")
def _row_backward_vec(av, hv, gv, dav, dbv, h0, pa, ph, pg, pda, pdb, reverse, prefetch):
    """Adjoint of one contiguous float row with the vector kernel (:func:`_make_vec_adjoint`); returns ``dh0``.

    Views are ascending (positive unit stride); ``reverse`` is the direction of the *forward* scan, so its adjoint
    runs ascending and a forward scan's adjoint descending. The element at each end of the row, whose shifted
    neighbour lies outside it, and the tail that fills no whole vector run in scalar code. Prefetches as in
    :func:`_row_forward_vec`: ascending, the row's own lines :data:`_AHEAD_BYTES` ahead; descending, a long row's
    own lines below, a short row's next row ``pa .. pdb`` ascending (with ``prefetch``).
    """
    n_t = gv.shape[0]
    if n_t == 0:
        return h0 * 0
    width = _lanes(gv)
    line = max(1, 64 // gv.itemsize)
    chunk = max(width, _VCHUNK_BYTES // gv.itemsize)
    dist = _AHEAD_BYTES // gv.itemsize
    if reverse:  # forward h_t = a_t h_{t+1} + b_t: d_t = a_{t-1} d_{t-1} + g_t, da_t = d_t h_{t+1}, h_T = h0
        d = gv[0]
        dbv[0] = d
        dav[0] = d * (hv[1] if n_t > 1 else h0)
        s = 1
        while s + chunk <= n_t - 1:
            _prefetch_span(av, hv, gv, dav, dbv, s + dist, s + dist + chunk, line)
            d = _vec_adjoint_up(av, hv, gv, dav, dbv, s, chunk // width, d)
            s += chunk
        n_vec = max(0, n_t - 1 - s) // width
        d = _vec_adjoint_up(av, hv, gv, dav, dbv, s, n_vec, d)
        for t in range(s + n_vec * width, n_t):
            d = av[t - 1] * d + gv[t]
            dbv[t] = d
            dav[t] = d * (hv[t + 1] if t + 1 < n_t else h0)
        return av[n_t - 1] * d
    # forward h_t = a_t h_{t-1} + b_t: d_t = a_{t+1} d_{t+1} + g_t, da_t = d_t h_{t-1}, h_{-1} = h0
    d = gv[n_t - 1]
    dbv[n_t - 1] = d
    dav[n_t - 1] = d * (hv[n_t - 2] if n_t > 1 else h0)
    own = n_t * gv.itemsize >= _OWN_ROW_BYTES
    p = 0
    e = n_t - 1
    while e - chunk >= 1:
        if own:  # a long row: its own lines, `dist` below, descending
            _prefetch_span(av, hv, gv, dav, dbv, max(0, e - chunk - dist), max(0, e - dist), line)
        elif prefetch:  # a short one: the next row, ascending, a line of it for each line of this one
            p = _prefetch_next(pa, ph, pg, pda, pdb, p, chunk // line, line)
        d = _vec_adjoint_down(av, hv, gv, dav, dbv, e, chunk // width, d)
        e -= chunk
    n_vec = (e - 1) // width if e >= 1 else 0
    d = _vec_adjoint_down(av, hv, gv, dav, dbv, e, n_vec, d)
    for t in range(e - n_vec * width - 1, -1, -1):
        d = av[t + 1] * d + gv[t]
        dbv[t] = d
        dav[t] = d * (hv[t - 1] if t > 0 else h0)
    return av[0] * d


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
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
    vec = _lanes(out) > 0 and a.strides[1] == size and b.strides[1] == size and out.strides[1] == size
    for n in prange(n_rows):
        m = min(n + 1, n_rows - 1)  # the row this thread most likely processes next
        if vec:
            _row_forward_vec(a[n], b[n], out[n], h0[n], a[m], b[m], out[m], reverse, m != n)
        elif reverse:
            _row_forward(a[n, ::-1], b[n, ::-1], out[n, ::-1], h0[n], a[m], b[m], out[m], m != n, False)
        else:
            _row_forward(a[n], b[n], out[n], h0[n], a[m], b[m], out[m], False, True)


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
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
    vec = _lanes(g) > 0 and a.strides[1] == size and h.strides[1] == size and g.strides[1] == size
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


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
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
@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
def scan_channels_forward(a, b, h0, out, reverse):
    """Scan ``(N, T, M)`` arrays along axis 1, vectorised over the channel axis ``M``.

    Arguments:
        a, b: ``(N, T, M)`` coefficients and inputs (any strides; stride 0 for a broadcast ``a`` is fine).
        h0: ``(N, M)`` initial states.
        out: ``(N, T, M)`` output, written in place.
        reverse: scan from ``t = T - 1`` down to ``0``.

    Every step prefetches the row about :data:`_AHEAD_BYTES` ahead in its direction (a reverse scan straight
    downwards ran 1.6x faster than one staged through ascending block copies; forwards it added 3-8 points of
    bandwidth).
    """
    n_rows, n_t, n_ch = b.shape
    n_blk = (n_ch + _CBLK - 1) // _CBLK
    for task in prange(n_rows * n_blk):
        n = task // n_blk
        c0 = (task % n_blk) * _CBLK
        c1 = min(c0 + _CBLK, n_ch)
        cw = c1 - c0
        prev = h0[n, c0:c1].copy()  # each step reads its state from the previous output row (in L1)
        line = max(1, 64 // out.itemsize)
        ahead = max(1, _AHEAD_BYTES // (cw * out.itemsize))  # rows ahead, about _AHEAD_BYTES
        step = -1 if reverse else 1
        for s in range(n_t):
            t = n_t - 1 - s if reverse else s
            q = t + step * ahead
            if 0 <= q < n_t:  # prefetch a row ahead, the output with write intent
                _prefetch_span(a[n, q, c0:c1], b[n, q, c0:c1], b[n, q, c0:c1], out[n, q, c0:c1], out[n, q, c0:c1],
                               0, cw, line)  # fmt: skip
            ar = a[n, t, c0:c1]
            br = b[n, t, c0:c1]
            orow = out[n, t, c0:c1]
            for c in range(cw):
                orow[c] = ar[c] * prev[c] + br[c]
            prev = orow


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
def scan_channels_backward(a, h, g, h0, da, db, dh0, reverse):
    """Adjoint of :func:`scan_channels_forward` (arguments as in :func:`scan_rows_backward`, with a trailing
    channel axis: ``(N, T, M)`` arrays and ``(N, M)`` states). The adjoint of a forward scan streams memory
    downwards with software prefetches ahead of it."""
    n_rows, n_t, n_ch = g.shape
    n_blk = (n_ch + _CBLK - 1) // _CBLK
    for task in prange(n_rows * n_blk):
        n = task // n_blk
        c0 = (task % n_blk) * _CBLK
        c1 = min(c0 + _CBLK, n_ch)
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
        else:  # the adjoint descends through memory, a row of each array prefetched about _AHEAD_BYTES below
            # (on this lab's Xeon 1.3-1.45x faster than two ascending passes over blocks, which read a and g twice)
            cw = c1 - c0
            line = max(1, 64 // g.itemsize)
            ahead = max(1, _AHEAD_BYTES // (cw * g.itemsize))
            for t in range(n_t - 1, -1, -1):
                q = t - ahead
                if q >= 1:
                    _prefetch_span(a[n, q, c0:c1], g[n, q, c0:c1], h[n, q - 1, c0:c1], da[n, q, c0:c1],
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


@njit(parallel=True, cache=True, error_model="numpy", fastmath=_FLAGS)
def axpy_rows(a, b, out):
    """Element-wise ``out = a * b + b`` over ``(N, T)`` rows: the bandwidth reference (the scan's access pattern)."""
    for n in prange(b.shape[0]):
        ar = a[n]
        br = b[n]
        orow = out[n]
        for t in range(b.shape[1]):
            orow[t] = ar[t] * br[t] + br[t]
