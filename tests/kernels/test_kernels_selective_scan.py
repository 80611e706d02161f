"""selective_scan (Numba fused kernels) against selective_scan_ref."""

import itertools
import math

import numpy as np
import pytest
import torch

from kernels import selective_scan, selective_scan_ref


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


OPTIONS = ["D", "z", "delta_bias", "softplus", "h0"]


def _inputs(bsz=2, dim=4, length=70, state=5, groups=None, dtype=torch.float64, opts=()):
    u = torch.randn(bsz, dim, length, dtype=dtype)
    delta = torch.rand(bsz, dim, length, dtype=dtype) * 0.5
    A = -torch.rand(dim, state, dtype=dtype) * 2
    shp = (bsz, state, length) if groups is None else (bsz, groups, state, length)
    B, C = torch.randn(shp, dtype=dtype), torch.randn(shp, dtype=dtype)
    kw = {}
    if "D" in opts:
        kw["D"] = torch.randn(dim, dtype=dtype)
    if "z" in opts:
        kw["z"] = torch.randn(bsz, dim, length, dtype=dtype)
    if "delta_bias" in opts:
        kw["delta_bias"] = torch.randn(dim, dtype=dtype) * 0.3
    if "softplus" in opts:
        kw["delta_softplus"] = True
        delta = delta * 4 - 2
    if "h0" in opts:
        kw["h0"] = torch.randn(bsz, dim, state, dtype=dtype)
    return [u, delta, A, B, C], kw


def _tensors(args, kw):
    return args + [v for v in kw.values() if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize("groups", [None, 1, 2])
@pytest.mark.parametrize("opts", [(), tuple(OPTIONS), ("D", "z"), ("delta_bias", "softplus"), ("h0",)])
def test_forward_and_gradients_match_reference(groups, opts):
    args, kw = _inputs(groups=groups, opts=opts)
    ins = _tensors(args, kw)
    for x in ins:
        x.requires_grad_()
    y, last = selective_scan(*args, return_last_state=True, backend="numba", **kw)
    yr, lr = selective_scan_ref(*args, return_last_state=True, **kw)
    assert rel_err(y, yr) < 1e-12 and rel_err(last, lr) < 1e-12
    gy, gl = torch.randn_like(y), torch.randn_like(last)  # the final state's gradient flows too
    got = torch.autograd.grad((y * gy).sum() + (last * gl).sum(), ins)
    want = torch.autograd.grad((yr * gy).sum() + (lr * gl).sum(), ins)
    for x, w in zip(got, want):
        assert x.shape == w.shape and rel_err(x, w) < 1e-10


@pytest.mark.parametrize("decay", ["nonpositive", "some_positive_A", "no_softplus"])
def test_float32_matches_float64_reference(decay):
    """float32 against the float64 reference, forward and gradients, on both forms of the kernels' decay: with
    ``softplus`` and ``A <= 0`` every exponent ``dt A`` is ``<= 0`` and the state loops use ``fast_exp2_nonpos``;
    a channel block with a positive ``A`` entry (a growing state), or no softplus, takes the clamped ``fast_exp2``."""
    torch.manual_seed(0)
    opts = tuple(OPTIONS) if decay != "no_softplus" else ("D", "z", "h0")
    args, kw = _inputs(bsz=2, dim=40, length=300, state=16, dtype=torch.float32, opts=opts)
    if decay == "some_positive_A":
        args[2][20, 3] = 0.05  # the second 16-channel block only
    ins = [x.requires_grad_() for x in _tensors(args, kw)]
    y = selective_scan(*args, backend="numba", **kw)
    ins64 = [x.detach().double().requires_grad_() for x in ins]
    n = len(args)
    kw64 = dict(zip([k for k, v in kw.items() if isinstance(v, torch.Tensor)], ins64[n:]))
    yr = selective_scan_ref(*ins64[:n], **{**kw, **kw64})
    assert rel_err(y.double(), yr) < 1e-5
    gy = torch.randn_like(yr)
    got = torch.autograd.grad((y * gy.float()).sum(), ins)
    want = torch.autograd.grad((yr * gy).sum(), ins64)
    for name, a, b in zip(["u", "delta", "A", "B", "C", *kw], got, want):
        if isinstance(b, torch.Tensor):
            assert rel_err(a.double(), b) < 1e-4, name


def test_growing_state_overflows_as_the_reference_does():
    """A positive ``A`` entry with a large step: the decay ``2**(dt A log2 e)`` passes float32's range, and the
    state must overflow to the reference's infinities. The kernels' unclamped ``fast_exp2_nonpos`` would wrap the
    exponent bits there (to signed zeros and finite garbage), so a block holding such an entry must not use it."""
    torch.manual_seed(0)
    u, delta = torch.randn(1, 40, 50), torch.rand(1, 40, 50) * 4 - 2
    A, B, C = -torch.rand(40, 16) * 2, torch.randn(1, 16, 50), torch.randn(1, 16, 50)
    A[20, 3] = 100.0  # the second 16-channel block
    y = selective_scan(u, delta, A, B, C, delta_softplus=True, backend="numba")
    yr = selective_scan_ref(u, delta, A, B, C, delta_softplus=True)
    assert not torch.isfinite(yr[0, 20]).all()
    fin = torch.isfinite(yr)
    assert torch.equal(torch.isfinite(y), fin) and torch.equal(y[~fin], yr[~fin])
    assert rel_err(y[fin], yr[fin]) < 1e-5


@pytest.mark.parametrize("opts", [(), tuple(OPTIONS)])
def test_gradcheck(opts):
    args, kw = _inputs(bsz=1, dim=2, length=7, state=3, groups=None, opts=opts)
    names = list(kw)
    ins = _tensors(args, kw)
    for x in ins:
        x.requires_grad_()

    def fn(*xs):
        tens = dict(zip([k for k in names if isinstance(kw[k], torch.Tensor)], xs[5:]))
        extra = {k: (tens[k] if k in tens else kw[k]) for k in names}
        y, last = selective_scan(*xs[:5], return_last_state=True, backend="numba", **extra)
        return y, last

    assert torch.autograd.gradcheck(fn, tuple(ins))


@pytest.mark.parametrize("length", [0, 1, 2, 65])
def test_short_and_chunk_boundary_lengths(length):
    args, kw = _inputs(length=length, opts=("D", "h0"))
    y, last = selective_scan(*args, return_last_state=True, **kw)
    yr, lr = selective_scan_ref(*args, return_last_state=True, **kw)
    assert y.shape == (2, 4, length)
    assert rel_err(y, yr) < 1e-12 and rel_err(last, lr) < 1e-12


@pytest.mark.parametrize("where,softplus", [("u", False), ("delta", False), ("delta", True)])
def test_nan_propagates(where, softplus):
    """A NaN in ``u`` or in ``delta`` (through the decay: the clamped ``fast_exp2`` without softplus, the
    ``fast_exp2_nonpos`` form with it) poisons that channel from its step on, and nothing else."""
    args, _ = _inputs(dtype=torch.float32)
    i = 0 if where == "u" else 1
    args[i] = args[i].clone()
    args[i][1, 2, 10] = float("nan")
    y = selective_scan(*args, delta_softplus=softplus)
    assert torch.isnan(y[1, 2, 10:]).all() and not torch.isnan(y[1, 2, :10]).any()
    assert torch.isnan(y).sum() == y.shape[2] - 10


def test_bad_inputs():
    args, _ = _inputs()
    u, delta, A, B, C = args
    with pytest.raises(ValueError, match=r"\(2, 4, 69\).*\(2, 4, 70\)"):
        selective_scan(u, delta[..., 1:], A, B, C)
    with pytest.raises(ValueError, match="C has shape"):
        selective_scan(u, delta, A, B, C[:, :2])
    with pytest.raises(ValueError, match="groups"):
        selective_scan(u, delta, A, B.unsqueeze(1).expand(2, 3, 5, 70), C.unsqueeze(1).expand(2, 3, 5, 70))
    with pytest.raises(TypeError, match="complex"):
        selective_scan(u.to(torch.complex128), delta, A, B, C)
    with pytest.raises(TypeError, match="must match"):
        selective_scan(u.float(), delta, A, B, C)
    with pytest.raises(ValueError, match="allowed"):
        selective_scan(u, delta, A, B, C, backend="gpu")
    with pytest.raises(ValueError, match="meta"):
        selective_scan(u, delta, A.to("meta"), B, C)


def test_no_state_sized_allocation():
    """The fused path allocates O(batch * channels * length) and O(B, C) memory, never (B, D, L, N)."""
    args, kw = _inputs(bsz=2, dim=64, length=512, state=16, dtype=torch.float32, opts=("D",))
    bdln = 2 * 64 * 512 * 16
    seen = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, a=(), k=None):
            out = func(*a, **(k or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    seen.append(t.numel())
            return out

    ins = _tensors(args, kw)
    for x in ins:
        x.requires_grad_()
    with Spy():
        y = selective_scan(*args, backend="numba", **kw)
        y.sum().backward()
    assert seen and max(seen) < bdln / 4
    with Spy():
        seen.clear()
        selective_scan_ref(*args, **kw)
    assert max(seen) >= bdln  # the reference does materialise it


def test_fast_exp_accuracy():
    from kernels._numba.common import fast_exp_array

    x = np.concatenate([np.linspace(-90, 89, 20001), [0.0, -1e-8, 1e-8, -87.0, 88.0]]).astype(np.float32)
    out = np.empty_like(x)
    fast_exp_array(x, out)
    ref = np.exp(x.astype(np.float64))
    ok = (x > -87.3) & (x < 88.3)
    assert np.max(np.abs(out[ok] - ref[ok]) / ref[ok]) < 3e-7
    assert np.all(out[x < -87.3] == 0)
    nan = np.array([np.nan], np.float32)
    fast_exp_array(nan, out[:1])
    assert math.isnan(out[0])


def test_fast_exp2_and_sigmoid_accuracy():
    """float32 ``2**x`` (the scans' decay, with log2(e) folded into A) and the gates' sigmoid against float64:
    < 2e-7 relative for 2**x over its normal range (its degree-5 polynomial: about 1.4 ulp), exactly 0 below -127,
    NaN in NaN out; the sigmoid stays in float32 (a literal 1 would have promoted it) within 1e-6 relative."""
    from kernels._numba.common import fast_exp2_sigmoid_array

    x = np.concatenate([np.linspace(-130, 126.9, 40001), [0.0, -1e-8, 1e-8, -0.5, 0.5, -np.inf, np.nan]])
    x = x.astype(np.float32)
    e2, sig, e2n = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    fast_exp2_sigmoid_array(x, e2, sig, e2n)
    nonpos = ~(x > 0)  # fast_exp2_nonpos: the same values wherever x <= 0 (NaN and -inf included)
    assert np.array_equal(e2n[nonpos], e2[nonpos], equal_nan=True) and e2[-2] == 0
    x64 = x.astype(np.float64)
    ok = (x > -126) & (x < 127)
    ref = np.exp2(x64[ok])
    assert np.max(np.abs(e2[ok] - ref) / ref) < 2e-7
    assert np.all(e2[x < -127] == 0)
    assert math.isnan(e2[-1]) and math.isnan(sig[-1])
    fin = np.isfinite(x) & (x > -80)  # sigmoid's relative error grows where it underflows toward 0
    ref_sig = 1 / (1 + np.exp(-x64[fin]))
    assert np.max(np.abs(sig[fin] - ref_sig) / ref_sig) < 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunk_transpose_blocks_and_edges(dtype):
    """The kernels' chunk transpose (8x8 blocks in vector registers, the edges element by element) equals ``.T``:
    whole and partial blocks, rows that are not contiguous (element by element then), both directions."""
    from kernels._numba.selective_scan import transpose_chunk

    rng = np.random.default_rng(0)
    big = rng.standard_normal((40, 300)).astype(dtype)
    for n, k in [(16, 64), (13, 61), (8, 8), (7, 5), (16, 1)]:
        for src in (big[3:3 + n, 17:17 + k], big[:2 * n:2, 1:2 * k:2]):  # contiguous rows; strided rows
            dst = np.full((k + 2, n + 3), np.nan, dtype)
            transpose_chunk(src, dst, n, k)
            assert np.array_equal(dst[:k, :n], src.T) and np.isnan(dst[k:]).all() and np.isnan(dst[:, n:]).all()
            back = np.full((n, k), np.nan, dtype)
            transpose_chunk(dst, back, k, n)
            assert np.array_equal(back, src)


@pytest.mark.parametrize("combo", list(itertools.combinations(OPTIONS, 2))[:3])
def test_torch_backend_is_the_reference(combo):
    args, kw = _inputs(opts=combo)
    assert torch.equal(selective_scan(*args, backend="torch", **kw), selective_scan_ref(*args, **kw))


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_packed_sequences_reset_the_state(backend):
    """seq_idx: sequences packed in one row equal separate runs, forward and backward (h0 for the first only)."""
    g = torch.Generator().manual_seed(3)
    b, d, n, L = 1, 4, 3, 70  # crosses the backward's 64-step recompute chunk
    cuts = [0, 30, 31, 70]
    u, delta = torch.randn(b, d, L, generator=g, dtype=torch.float64), torch.randn(b, d, L, generator=g,
                                                                                   dtype=torch.float64)
    A = -torch.rand(d, n, generator=g, dtype=torch.float64)
    B, C = torch.randn(b, n, L, generator=g, dtype=torch.float64), torch.randn(b, n, L, generator=g,
                                                                              dtype=torch.float64)
    h0 = torch.randn(b, d, n, generator=g, dtype=torch.float64)
    seq_idx = torch.tensor([[i for i in range(3) for _ in range(cuts[i + 1] - cuts[i])]])
    leaves = [t.clone().requires_grad_() for t in (u, delta, A, B, C, h0)]
    y, last = selective_scan(*leaves[:5], h0=leaves[5], delta_softplus=True, return_last_state=True,
                             seq_idx=seq_idx, backend=backend)
    (y.sum() + last.sum()).backward()
    parts = [t.clone().requires_grad_() for t in (u, delta, A, B, C, h0)]
    total = 0
    for i in range(3):
        s = slice(cuts[i], cuts[i + 1])
        yi, li = selective_scan_ref(parts[0][..., s], parts[1][..., s], parts[2], parts[3][..., s], parts[4][..., s],
                                    delta_softplus=True, h0=parts[5] if i == 0 else None, return_last_state=True)
        torch.testing.assert_close(y[..., s], yi)
        total = total + yi.sum()
    torch.testing.assert_close(last, li)
    (total + li.sum()).backward()
    for a, r in zip(leaves, parts):
        torch.testing.assert_close(a.grad, r.grad)


def test_fused_gate_takes_a_strided_z_and_matches_the_reference():
    # the Numba kernel applies silu(z) itself; the Mamba block passes z as a view of its in-projection
    args, kw = _inputs(dim=20, length=70, opts=("D", "delta_bias", "softplus"))
    zbig = torch.randn(2, 70, 40, dtype=torch.float64)
    z = zbig[..., 20:].transpose(1, 2)  # (batch, channels, length), not contiguous
    assert not z.is_contiguous()
    ins = _tensors(args, kw) + [zbig]
    for t in ins:
        t.requires_grad_()
    z = zbig[..., 20:].transpose(1, 2)
    y = selective_scan(*args, z=z, backend="numba", **kw)
    yr = selective_scan_ref(*args, z=z, **kw)
    assert rel_err(y, yr) < 1e-12
    gy = torch.randn_like(y)
    got = torch.autograd.grad((y * gy).sum(), ins)
    want = torch.autograd.grad((yr * gy).sum(), ins)
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-10


def test_one_compiled_kernel_for_every_gate_layout():
    # a gate view (the Mamba block at batch > 1), a contiguous gate (batch 1) and no gate: one compilation of the
    # forward and one of the backward per dtype, not one per layout (each costs about 35 s of CPU on a fresh clone)
    from kernels._numba import selective_scan as fwd
    from kernels._numba import selective_scan_backward as bwd

    g = torch.Generator().manual_seed(3)
    for batch, gate in itertools.product((1, 2), ("view", "contiguous", None)):
        u, delta, z2 = (torch.randn(batch, 6, 9, generator=g, dtype=torch.float64) for _ in range(3))
        z = {"view": torch.randn(batch, 12, 9, generator=g, dtype=torch.float64)[:, 6:], "contiguous": z2,
             None: None}[gate]
        A = -torch.rand(6, 3, generator=g, dtype=torch.float64)
        B, C = (torch.randn(batch, 3, 9, generator=g, dtype=torch.float64) for _ in range(2))
        leaves = [t.requires_grad_() for t in (u, delta, B, C) + ((z,) if z is not None else ())]
        y = selective_scan(u, delta, A, B, C, torch.ones(6, dtype=torch.float64), z=z, delta_softplus=True,
                           backend="numba")
        yr = selective_scan_ref(u, delta, A, B, C, torch.ones(6, dtype=torch.float64), z=z, delta_softplus=True)
        assert rel_err(y, yr) < 1e-12
        got, want = (torch.autograd.grad(out.sum(), leaves) for out in (y, yr))
        assert all(rel_err(a, b) < 1e-10 for a, b in zip(got, want))
    for kernel in (fwd.selective_scan_forward, bwd.selective_scan_backward):
        float64 = [sig for sig in kernel.signatures if "float64" in str(sig[0])]
        assert len(float64) == 1, "\n".join(str(sig) for sig in float64)


@pytest.mark.parametrize("n_slices", [1, 3])
def test_backward_over_several_channel_blocks_and_slices(monkeypatch, n_slices):
    # 2 groups of 37 channels: full 16-channel blocks, a partial block (padding lanes) and, with 3 slices, tasks
    # whose slices start mid-group or hold no channel; 2 chunks plus a partial one; packed-sequence resets
    import sys

    ss = sys.modules["kernels.selective_scan"]  # the module (the package exports the function under its name)
    monkeypatch.setattr(ss, "_n_slices", lambda bsz, groups, per_group: n_slices)
    args, kw = _inputs(bsz=2, dim=74, length=150, state=6, groups=2, opts=tuple(OPTIONS))
    seq_idx = torch.tensor([[0] * 90 + [1] * 60, [0] * 150])
    ins = _tensors(args, kw)
    for x in ins:
        x.requires_grad_()
    y, last = selective_scan(*args, return_last_state=True, seq_idx=seq_idx, backend="numba", **kw)
    yr, lr = selective_scan_ref(*args, return_last_state=True, seq_idx=seq_idx, **kw)
    assert rel_err(y, yr) < 1e-12
    gy, gl = torch.randn_like(y), torch.randn_like(last)
    got = torch.autograd.grad((y * gy).sum() + (last * gl).sum(), ins)
    want = torch.autograd.grad((yr * gy).sum() + (lr * gl).sum(), ins)
    for x, w in zip(got, want):
        assert x.shape == w.shape and rel_err(x, w) < 1e-10


def test_softplus_sigmoid_accuracy():
    """The kernels' float32 softplus (a log1p series) and sigmoid, against float64, tiny and large inputs included;
    NaN and infinities propagate."""
    from kernels._numba.common import softplus_sigmoid_array

    x = np.concatenate([np.linspace(-90, 90, 20001), [0.0, -1e-8, 1e-8, -30.0, 30.0]]).astype(np.float32)
    sp, sig = np.empty_like(x), np.empty_like(x)
    softplus_sigmoid_array(x, sp, sig)
    x64 = x.astype(np.float64)
    sp_ref = np.logaddexp(0.0, x64)
    sig_ref = 1.0 / (1.0 + np.exp(-x64))
    ok = x > -87  # below, exp(x) underflows float32's normal range: softplus is 0 instead of a ~1e-38 denormal
    assert np.max(np.abs(sp[ok] - sp_ref[ok]) / sp_ref[ok]) < 1e-6  # relative, down to softplus(-87) ~ 1.6e-38
    assert np.all(np.abs(sp[~ok]) < 2e-38)
    assert np.max(np.abs(sig - sig_ref) / np.maximum(sig_ref, 1e-30)) < 1e-6
    odd = np.array([np.nan, np.inf, -np.inf], np.float32)
    sp3, sig3 = np.empty_like(odd), np.empty_like(odd)
    softplus_sigmoid_array(odd, sp3, sig3)
    assert math.isnan(sp3[0]) and sp3[1] == np.inf and sp3[2] == 0.0
    assert sig3[1] == 1.0 and sig3[2] == 0.0
