"""linear_scan: forward/backward against float64 references over layouts, dtypes, directions and backends."""

import os
import sys

import pytest
import torch

from kernels import linear_scan, linear_scan_pscan, linear_scan_ref
from kernels._common import empty_offset


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
HI = {torch.float32: torch.float64, torch.float64: torch.float64, torch.complex64: torch.complex128,
      torch.complex128: torch.complex128}  # fmt: skip
TOL = {torch.float32: 1e-5, torch.complex64: 1e-5, torch.float64: 1e-12, torch.complex128: 1e-12}


def _coef(shape, dtype):
    """Decays in (0.5, 1) (complex: random phase), so long scans neither explode nor vanish."""
    mag = torch.rand(shape, dtype=torch.float64) * 0.5 + 0.5
    if dtype.is_complex:
        mag = mag * torch.exp(1j * 2 * torch.pi * torch.rand(shape, dtype=torch.float64))
    return mag.to(dtype)


def _layout(kind, dtype):
    """(a, b, h0_shape, dim) for a named layout; views are built without copies."""
    if kind == "time_contiguous":
        shape, dim = (3, 5, 67), -1
    elif kind == "channels_last":
        shape, dim = (3, 67, 5), 1
    elif kind == "time_first":
        shape, dim = (67, 3, 5), 0
    elif kind == "wide_channels":  # more channels than one channel block of the kernel
        shape, dim = (2, 20, 600), 1
    a = _coef(shape, dtype)
    b = torch.randn(shape, dtype=dtype)
    return a, b, dim


def _views(kind, a, b, dim):
    if kind == "contiguous":
        return a, b, dim
    if kind == "strided":  # every other element along the last axis
        a2 = torch.cat([a, a], dim=-1)[..., ::2]
        b2 = torch.cat([b, b], dim=-1)[..., ::2]
        return a2, b2, dim
    if kind == "transposed":  # swap the last two axes: layout flips between time-contiguous and channels-last
        d = dim % a.dim()
        nd = {a.dim() - 1: a.dim() - 2, a.dim() - 2: a.dim() - 1}.get(d, d)
        return a.transpose(-1, -2), b.transpose(-1, -2), nd
    raise ValueError(kind)


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["time_contiguous", "channels_last", "time_first"])
@pytest.mark.parametrize("view", ["contiguous", "strided", "transposed"])
def test_forward_matches_float64_reference(backend, dtype, layout, view):
    a, b, dim = _layout(layout, dtype)
    a, b, dim = _views(view, a, b, dim)
    for reverse in (False, True):
        for with_h0 in (False, True):
            state = list(b.shape)
            del state[dim]
            h0 = torch.randn(state, dtype=dtype) if with_h0 else None
            out = linear_scan(a, b, h0, dim=dim, reverse=reverse, backend=backend)
            hi = HI[dtype]
            ref = linear_scan_ref(a.to(hi), b.to(hi), None if h0 is None else h0.to(hi), dim=dim, reverse=reverse)
            assert out.shape == b.shape and out.dtype == b.dtype
            assert rel_err(out.to(hi), ref) < TOL[dtype], (reverse, with_h0)


def test_wide_channels_and_output_layout():
    a, b, dim = _layout("wide_channels", torch.float32)
    out = linear_scan(a, b, dim=dim)
    ref = linear_scan_ref(a.double(), b.double(), dim=dim)
    assert rel_err(out.double(), ref) < 1e-5
    assert out.stride() == b.stride()  # same memory order as b
    t = b.transpose(1, 2)  # (2, 600, 20) scanned over dim 2: channels-last in memory
    out_t = linear_scan(a.transpose(1, 2), t, dim=2)
    assert out_t.stride() == t.stride()
    assert rel_err(out_t.double(), linear_scan_ref(a.transpose(1, 2).double(), t.double(), dim=2)) < 1e-5


def test_broadcast_coefficients_and_h0():
    b = torch.randn(2, 4, 33, dtype=torch.float64, requires_grad=True)
    a = (torch.rand(1, 4, 1, dtype=torch.float64) * 0.5 + 0.5).requires_grad_()
    h0 = torch.randn(4, dtype=torch.float64, requires_grad=True)  # broadcast over the batch
    for backend in ("numba", "torch"):
        out = linear_scan(a, b, h0, backend=backend)
        ref = linear_scan_ref(a, b, h0)
        assert rel_err(out, ref) < 1e-12
        g = torch.randn_like(out)
        got = torch.autograd.grad(out, (a, b, h0), g)
        want = torch.autograd.grad(ref, (a, b, h0), g)
        for x, y in zip(got, want):
            assert x.shape == y.shape and rel_err(x, y) < 1e-10


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("layout", ["time_contiguous", "channels_last"])
def test_gradcheck(backend, dtype, layout):
    shape, dim = ((2, 3, 11), -1) if layout == "time_contiguous" else ((2, 11, 3), 1)
    a = _coef(shape, dtype).requires_grad_()
    b = torch.randn(shape, dtype=dtype, requires_grad=True)
    h0 = torch.randn(2, 3, dtype=dtype, requires_grad=True)
    for reverse in (False, True):

        def fn(a, b, h0, reverse=reverse):
            return linear_scan(a, b, h0, dim=dim, reverse=reverse, backend=backend)

        assert torch.autograd.gradcheck(fn, (a, b, h0))


def test_gradcheck_pscan():
    a = _coef((2, 9, 3), torch.float64).requires_grad_()
    b = torch.randn(2, 9, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: linear_scan_pscan(a, b, dim=1, reverse=True), (a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("layout", ["time_contiguous", "channels_last"])
def test_float32_gradients_match_float64_reference(dtype, layout):
    a, b, dim = _layout(layout, dtype)
    h0 = torch.randn(3, 5, dtype=dtype)
    g = torch.randn(b.shape, dtype=dtype)
    ins = [x.clone().requires_grad_() for x in (a, b, h0)]
    got = torch.autograd.grad(linear_scan(*ins, dim=dim), ins, g)
    hi = [x.to(HI[dtype]).requires_grad_() for x in (a, b, h0)]
    want = torch.autograd.grad(linear_scan_ref(*hi, dim=dim), hi, g.to(HI[dtype]))
    for x, y in zip(got, want):
        assert rel_err(x.to(HI[dtype]), y) < 1e-5


def test_pscan_matches_reference():
    for shape, dim in [((3, 4, 37), -1), ((3, 64, 4), 1), ((1,), 0)]:
        a, b = _coef(shape, torch.float64), torch.randn(shape, dtype=torch.float64)
        for reverse in (False, True):
            assert (
                rel_err(
                    linear_scan_pscan(a, b, dim=dim, reverse=reverse), linear_scan_ref(a, b, dim=dim, reverse=reverse)
                )
                < 1e-12
            )


@pytest.mark.parametrize("length", [0, 1, 2, 9])
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_short_lengths(length, backend):
    a = _coef((2, 3, length), torch.float64).requires_grad_()
    b = torch.randn(2, 3, length, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    out = linear_scan(a, b, h0, backend=backend)
    assert out.shape == (2, 3, length)
    assert rel_err(out, linear_scan_ref(a, b, h0)) < 1e-12
    da, db, dh0 = torch.autograd.grad(out.sum() + 0 * h0.sum(), (a, b, h0))
    assert da.shape == a.shape and db.shape == b.shape and dh0.shape == h0.shape
    if length == 0:
        assert torch.all(dh0 == 0)
    else:
        assert torch.autograd.gradcheck(lambda a, b, h0: linear_scan(a, b, h0, backend=backend), (a, b, h0))


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("layout", ["time_contiguous", "channels_last"])
def test_nan_propagates(backend, layout):
    a, b, dim = _layout(layout, torch.float32)
    idx = [1, 2, 2]
    # put a NaN at time 10 of one channel
    sel = [slice(None)] * 3
    sel[0], sel[dim % 3] = 1, 10
    other = 2 if dim % 3 == 1 else 1
    sel[other] = idx[other]
    b = b.clone()
    b[tuple(sel)] = float("nan")
    out = linear_scan(a, b, dim=dim, backend=backend)
    nan = torch.isnan(out)
    chan = out.select(0, 1).select(other - 1, idx[other])  # the poisoned channel, shape (T,)
    assert torch.isnan(chan[10:]).all() and not torch.isnan(chan[:10]).any()
    assert nan.sum() == chan.numel() - 10  # nothing else is touched


def test_out_argument():
    a, b, dim = _layout("channels_last", torch.float32)
    out = torch.empty_like(b)
    res = linear_scan(a, b, dim=dim, out=out)
    assert res is out
    assert rel_err(out.double(), linear_scan_ref(a.double(), b.double(), dim=dim)) < 1e-5
    with pytest.raises(RuntimeError, match="autograd"):
        linear_scan(a.requires_grad_(), b, dim=dim, out=out)
    with pytest.raises(ValueError, match="out has shape"):
        linear_scan(a.detach(), b, dim=dim, out=torch.empty(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("reverse", [False, True])
def test_out_argument_row_fast_path(monkeypatch, dtype, reverse):
    """out= with rows contiguous along the last axis and no h0 goes straight to the row kernel; it gives the
    allocating path's values, and every other layout (h0 given, a broadcast, the scan axis inner) falls back."""
    ls_mod = sys.modules["kernels.linear_scan"]  # the module (the package exports the function under this name)
    taken = []
    fast = ls_mod.numba_rows_out  # from kernels._linear_backends
    monkeypatch.setattr(ls_mod, "numba_rows_out", lambda *args: taken.append(fast(*args)) or taken[-1])
    torch.manual_seed(0)
    a = (torch.rand(3, 5, 37) * 0.5 + 0.5).to(dtype)
    b = torch.randn(3, 5, 37).to(dtype)
    out = torch.full_like(b, float("nan"))
    assert linear_scan(a, b, reverse=reverse, backend="numba", out=out) is out
    assert taken == [True]
    assert torch.equal(out, linear_scan(a, b, reverse=reverse, backend="numba"))
    assert rel_err(out.to(torch.complex128 if dtype.is_complex else torch.float64),
                   linear_scan_ref(a.to(out.dtype), b.to(out.dtype), reverse=reverse)) < 1e-5  # fmt: skip
    h0 = torch.randn(3, 5).to(dtype)
    for args, kw in [((a, b, h0), {}), ((a[:, :, :1], b), {}), ((a.transpose(1, 2), b.transpose(1, 2)), {"dim": 1})]:
        taken.clear()
        got = linear_scan(*args, reverse=reverse, backend="numba", out=torch.empty_like(args[1]), **kw)
        assert taken in ([], [False])
        assert torch.equal(got, linear_scan(*args, reverse=reverse, backend="numba", **kw))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reverse", [False, True])
def test_row_kernel_lengths_around_vectors_and_chunks(dtype, reverse):
    """The time-contiguous row kernel runs whole 64-byte vectors in chunks, then a scalar tail: lengths on both sides
    of a vector (16 float32, 8 float64), of a chunk (64 float32) and of several chunks match a float64 sequential
    scan from a non-zero h0, and the scalar blocked kernel (which a strided row takes) gives the same values."""
    import numpy as np

    from kernels._numba import linear_scan as nk

    rng = np.random.default_rng(1)
    tol = TOL[dtype]
    for n_t in (1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 130, 1000):
        a = (rng.random((3, n_t)) * 0.5 + 0.5).astype(np.float64)
        b = rng.standard_normal((3, n_t))
        h0 = rng.standard_normal(3)
        ref = np.empty_like(b)
        nk.scan_rows_simple(a, b, h0, ref, reverse)
        np_dtype = np.float32 if dtype == torch.float32 else np.float64
        a_, b_, h0_ = a.astype(np_dtype), b.astype(np_dtype), h0.astype(np_dtype)
        out = np.full_like(b_, np.nan)
        nk.scan_rows_forward(a_, b_, h0_, out, reverse)
        assert np.abs(out - ref).max() <= tol * np.abs(ref).max(), n_t
        out2 = np.full((3, 2 * n_t), np.nan, np_dtype)[:, ::2]  # a strided output row: the scalar blocked kernel
        nk.scan_rows_forward(a_, b_, h0_, out2, reverse)
        assert np.abs(out2 - ref).max() <= tol * np.abs(ref).max(), n_t


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_adjoint_lengths_around_vectors_and_chunks(dtype, reverse):
    """The time-contiguous adjoint runs whole vectors with shifted loads of ``a`` and ``h``, its end elements and its
    tail in scalar code: at lengths around a vector, a chunk and several chunks, da, db and dh0 match a float64
    adjoint written out step by step, and the scalar blocked adjoint (which strided rows take) agrees."""
    import numpy as np

    from kernels._numba import linear_scan as nk
    from kernels._numba import linear_scan_backward as nb

    rng = np.random.default_rng(2)
    tol = TOL[dtype]
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    for n_t in (1, 2, 7, 8, 9, 15, 16, 17, 18, 63, 64, 65, 66, 127, 128, 130, 1000):
        a = rng.random((3, n_t)) * 0.5 + 0.5
        b = rng.standard_normal((3, n_t))
        g = rng.standard_normal((3, n_t))
        h0 = rng.standard_normal(3)
        h = np.empty_like(b)
        nk.scan_rows_simple(a, b, h0, h, reverse)
        da_ref, db_ref, dh0_ref = np.empty_like(b), np.empty_like(b), np.empty(3)
        order = range(n_t) if reverse else range(n_t - 1, -1, -1)  # the adjoint runs against the scan
        for r in range(3):
            d = 0.0
            nxt = None  # the step after t in scan order, whose coefficient carries d back to t
            for t in order:
                d = g[r, t] + (a[r, nxt] * d if nxt is not None else 0.0)
                prev = t + 1 if reverse else t - 1
                db_ref[r, t] = d
                da_ref[r, t] = d * (h[r, prev] if 0 <= prev < n_t else h0[r])
                nxt = t
            dh0_ref[r] = a[r, nxt] * d
        a_, h_, g_, h0_ = (x.astype(np_dtype) for x in (a, h, g, h0))
        outs = []
        for pitch in (1, 2):  # unit stride (vector kernel), then strided rows (scalar blocked kernel)
            da = np.full((3, pitch * n_t), np.nan, np_dtype)[:, ::pitch]
            db = np.full((3, pitch * n_t), np.nan, np_dtype)[:, ::pitch]
            dh0 = np.full(3, np.nan, np_dtype)
            nb.scan_rows_backward(a_, h_, g_, h0_, da, db, dh0, reverse)
            for x, ref in ((da, da_ref), (db, db_ref), (dh0, dh0_ref)):
                assert np.abs(x - ref).max() <= tol * np.abs(ref).max(), (n_t, pitch)
            outs.append((da, db, dh0))
        for x, y in zip(*outs):
            assert np.abs(x - y).max() <= tol * np.abs(y).max(), n_t


def test_vector_kernels_called_directly():
    """The vector intrinsics (64-byte vectors; the row kernels take them on AVX-512 CPUs, and LLVM splits them
    elsewhere, so this runs on any CPU), called directly on an unaligned run of whole vectors, scan up and down and
    run both adjoints as the step-by-step recurrences do, and return the carried state."""
    import numpy as np
    from numba import njit

    from kernels._numba import vector_scan as vs

    vec_bytes = 64
    scan_up, scan_down = vs.make_vec_scan(False, vec_bytes), vs.make_vec_scan(True, vec_bytes)
    adj_up, adj_down = vs.make_vec_adjoint(False, vec_bytes), vs.make_vec_adjoint(True, vec_bytes)
    run = {
        "scan_up": njit(lambda a, b, o, s, n, h: scan_up(a, b, o, s, n, h)),
        "scan_down": njit(lambda a, b, o, s, n, h: scan_down(a, b, o, s, n, h)),
        "adj_up": njit(lambda a, h, g, da, db, s, n, d: adj_up(a, h, g, da, db, s, n, d)),
        "adj_down": njit(lambda a, h, g, da, db, s, n, d: adj_down(a, h, g, da, db, s, n, d)),
    }
    rng = np.random.default_rng(3)
    for np_dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        w = vec_bytes // np.dtype(np_dtype).itemsize
        n_vec, size = 5, 5 * w + 6
        a = (rng.random(size) * 0.5 + 0.5).astype(np_dtype)
        b, hh = rng.standard_normal(size).astype(np_dtype), rng.standard_normal(size).astype(np_dtype)
        x0 = np_dtype(rng.standard_normal())
        for name, start, idx in (
            ("scan_up", 2, range(2, 2 + n_vec * w)),
            ("scan_down", size - 3, range(size - 4, size - 4 - n_vec * w, -1)),
            ("adj_up", 2, range(2, 2 + n_vec * w)),
            ("adj_down", size - 3, range(size - 4, size - 4 - n_vec * w, -1)),
        ):
            out, da = np.full(size, np.nan, np_dtype), np.full(size, np.nan, np_dtype)
            ref, da_ref = np.full(size, np.nan), np.full(size, np.nan)
            x = float(x0)
            step = 1 if idx.step > 0 else -1
            for t in idx:
                if name.startswith("scan"):
                    x = float(a[t]) * x + float(b[t])
                else:  # the coefficient of the step that consumed d_t; da from the forward predecessor
                    x = float(a[t - step]) * x + float(b[t])
                    da_ref[t] = x * float(hh[t + step])
                ref[t] = x
            if name.startswith("scan"):
                last = run[name](a, b, out, start, n_vec, x0)
            else:
                last = run[name](a, hh, b, da, out, start, n_vec, x0)
                np.testing.assert_allclose(da, da_ref, rtol=tol, atol=tol, equal_nan=True, err_msg=name)
            np.testing.assert_allclose(out, ref, rtol=tol, atol=tol, equal_nan=True, err_msg=name)
            assert abs(last - x) <= tol * max(1.0, abs(x)), name


def test_vector_width_follows_the_compile_target(monkeypatch):
    """Vector row kernels only where numba compiles for AVX-512 (a named target such as 'generic' assumes none)."""
    from numba.core import config

    from kernels._numba import vector_scan as vs

    for name, feats, want in (("", "+avx,+avx2,+avx512f", 64), ("", "+avx,+avx2,-avx512f", 0), ("generic", None, 0)):
        monkeypatch.setattr(config, "CPU_NAME", name)
        monkeypatch.setattr(config, "CPU_FEATURES", feats)
        assert vs.vector_bytes() == want, (name, feats)


def test_bad_inputs():
    a, b = torch.rand(2, 3, 8), torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"\(2, 4, 8\).*\(2, 3, 8\)"):
        linear_scan(torch.rand(2, 4, 8), b)
    with pytest.raises(ValueError, match=r"\(5,\).*\(2, 3\)"):
        linear_scan(a, b, torch.zeros(5))  # h0 must be b's shape without the scan axis
    with pytest.raises(TypeError, match="int64"):
        linear_scan(a, b.long())
    with pytest.raises(TypeError, match="must match"):
        linear_scan(a.double(), b)
    assert linear_scan(a.half(), b.half()).dtype == torch.float16  # half precision: computed in float32
    with pytest.raises(ValueError, match="out= is not allowed with float16"):
        linear_scan(a.half(), b.half(), out=torch.empty_like(b.half()))
    with pytest.raises(ValueError, match="numba.*triton.*torch|auto.*numba.*triton.*torch"):
        linear_scan(a, b, backend="cuda")
    with pytest.raises(ValueError, match="meta"):
        linear_scan(a, torch.empty(2, 3, 8, device="meta"))
    with pytest.raises(ValueError, match="out of range"):
        linear_scan(a, b, dim=3)
    with pytest.raises(ValueError, match="0-d"):
        linear_scan(torch.tensor(1.0), torch.tensor(1.0))
    with pytest.raises(TypeError):
        linear_scan([1.0], b)


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1", reason="interpreter enabled: triton accepts CPU tensors"
)
def test_triton_on_cpu_without_interpreter_is_a_clear_error():
    a, b = torch.rand(2, 3, 8), torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        linear_scan(a, b, backend="triton")


def test_outputs_avoid_input_page_offsets():
    a = torch.empty(1 << 20)
    b = torch.empty(1 << 20)
    out = empty_offset((1 << 20,), torch.float32, "cpu", avoid=(a, b))
    offs = [a.data_ptr() % 4096, b.data_ptr() % 4096]
    o = out.data_ptr() % 4096
    assert all(min((o - x) % 4096, (x - o) % 4096) >= 256 for x in offs)
    assert out.is_contiguous() and out.shape == (1 << 20,)
