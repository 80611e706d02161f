"""ssd's Numba chunk stages (backend='numba') against the torch stages and the sequential ssd_ref."""

import pytest
import torch

from kernels import ssd, ssd_ref
from kernels.ssd import ssd_bmm, ssd_chunk_cumsum, ssd_chunk_scan, ssd_chunk_state, ssd_state_passing


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    if ref.numel() == 0:
        return 0.0
    return (out - ref).abs().max().item() / (ref.abs().max().item() or 1.0)


def _inputs(bsz=2, length=16, heads=4, headdim=3, groups=1, state=5, dtype=torch.float64):
    g = torch.Generator().manual_seed(length * 7 + groups)
    x = torch.randn(bsz, length, heads, headdim, dtype=dtype, generator=g)
    dt = torch.rand(bsz, length, heads, dtype=dtype, generator=g)
    A = -torch.rand(heads, dtype=dtype, generator=g) - 0.1
    B = torch.randn(bsz, length, groups, state, dtype=dtype, generator=g)
    C = torch.randn(bsz, length, groups, state, dtype=dtype, generator=g)
    return x, dt, A, B, C


@pytest.mark.parametrize("length,chunk", [(16, 4), (13, 4), (7, 8), (1, 4), (0, 4), (40, 16)])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_float64_matches_reference_and_torch_stages(length, chunk, groups):
    x, dt, A, B, C = _inputs(length=length, groups=groups)
    D, h0 = torch.randn(4, 3, dtype=x.dtype), torch.randn(2, 4, 3, 5, dtype=x.dtype)
    z = torch.randn_like(x)
    kw = dict(D=D, initial_states=h0, return_final_states=True, z=z, dt_bias=torch.randn(4, dtype=x.dtype),
              dt_softplus=True)
    y, s = ssd(x, dt, A, B, C, chunk, backend="numba", **kw)
    yt, st = ssd(x, dt, A, B, C, chunk, backend="torch", **kw)
    yr, sr = ssd_ref(x, dt, A, B, C, **kw)
    assert y.shape == x.shape and s.shape == h0.shape
    assert rel_err(y, yr) < 1e-12 and rel_err(s, sr) < 1e-12
    assert rel_err(y, yt) < 1e-12 and rel_err(s, st) < 1e-12


def test_float32_matches_float64_reference():
    x, dt, A, B, C = _inputs(length=200, heads=4, headdim=16, state=16, groups=2)
    y32 = ssd(*(t.float() for t in (x, dt, A, B, C)), 64, backend="numba")
    assert y32.dtype == torch.float32
    assert rel_err(y32.double(), ssd_ref(x, dt, A, B, C)) < 1e-5


def test_gradients_equal_the_torch_stages():
    x, dt, A, B, C = _inputs(length=21, groups=2)
    D, h0 = torch.randn(4, dtype=x.dtype), torch.randn(2, 4, 3, 5, dtype=x.dtype)
    ins = [x, dt, A, B, C, D, h0]
    for t in ins:
        t.requires_grad_()
    grads = {}
    for backend in ("numba", "torch"):
        y, s = ssd(x, dt, A, B, C, 8, D=D, initial_states=h0, return_final_states=True, backend=backend)
        loss = (y * torch.cos(y.detach())).sum() + (s * s.detach()).sum()
        grads[backend] = torch.autograd.grad(loss, ins)
    for got, want in zip(grads["numba"], grads["torch"]):
        assert rel_err(got, want) < 1e-12


def test_gradcheck():
    x, dt, A, B, C = _inputs(bsz=1, length=6, heads=2, headdim=2, state=3)
    h0 = torch.randn(1, 2, 2, 3, dtype=x.dtype)
    ins = [t.clone().requires_grad_() for t in (x, dt, A, B, C, h0)]

    def fn(x, dt, A, B, C, h0):
        return ssd(x, dt, A, B, C, 4, initial_states=h0, return_final_states=True, backend="numba")

    assert torch.autograd.gradcheck(fn, ins)


def test_each_stage_equals_its_torch_form():
    x, dt, A, B, C = _inputs(length=19, groups=2, state=4)
    q = 8
    dtc, cum = ssd_chunk_cumsum(dt, A, q)
    for backend in ("torch", "numba"):
        CB = ssd_bmm(C, B, q, backend=backend)
        cs = ssd_chunk_state(B, x, dtc, cum, backend=backend)
        states, final = ssd_state_passing(cs, cum, None, backend=backend)
        y = ssd_chunk_scan(CB, x, dtc, cum, C, states, backend=backend)
        if backend == "torch":
            want = (CB, cs, states, final, y)
        else:
            for got, ref in zip((CB, cs, states, final, y), want):
                assert got.shape == ref.shape and rel_err(got, ref) < 1e-12


def test_hooks_run_on_the_numba_stages():
    x, dt, A, B, C = _inputs(length=12)
    seen = []
    hooks = {p: (lambda t, p=p: seen.append(p) or t) for p in ("x", "CB", "chunk_states", "states")}
    y = ssd(x, dt, A, B, C, 4, hooks=hooks, backend="numba")
    assert seen == ["x", "CB", "chunk_states", "states"]
    assert rel_err(y, ssd_ref(x, dt, A, B, C)) < 1e-12


def test_bad_backend_and_packed_sequences_are_named():
    x, dt, A, B, C = _inputs(length=8)
    with pytest.raises(ValueError, match="allowed: 'auto', 'torch', 'numba'"):
        ssd(x, dt, A, B, C, 4, backend="cuda")
    with pytest.raises(ValueError, match="seq_idx"):
        ssd(x, dt, A, B, C, 4, seq_idx=torch.zeros(2, 8, dtype=torch.long), backend="numba")
    with pytest.raises(ValueError, match="allowed: 'torch', 'numba'"):
        ssd_bmm(C, B, 4, backend="triton")


@pytest.mark.parametrize("name", ["bmm", "chunk_state", "state_passing", "chunk_scan"])
@pytest.mark.parametrize("length,groups", [(19, 2), (16, 1), (5, 4)])
def test_each_stage_backward_equals_torch_autograd(name, length, groups):
    """Every stage's Numba backward against autograd through its torch form (float64, random output gradients,
    one output's gradient left out for the state passing)."""
    x, dt, A, B, C = _inputs(length=length, groups=groups, state=4)
    q = 8
    dtc, cum = ssd_chunk_cumsum(dt, A, q)
    CB = ssd_bmm(C, B, q)
    cs = ssd_chunk_state(B, x, dtc, cum)
    states, _ = ssd_state_passing(cs, cum, None)
    h0 = torch.randn(2, 4, 3, 4, dtype=x.dtype)
    args = {"bmm": (C, B), "chunk_state": (B, x, dtc, cum), "state_passing": (cs, cum, h0),
            "chunk_scan": (CB, x, dtc, cum, C, states)}[name]
    fns = {"bmm": lambda be, C, B: ssd_bmm(C, B, q, backend=be),
           "chunk_state": lambda be, *a: ssd_chunk_state(*a, backend=be),
           "state_passing": lambda be, *a: ssd_state_passing(*a, backend=be),
           "chunk_scan": lambda be, *a: ssd_chunk_scan(*a, backend=be)}
    g = torch.Generator().manual_seed(3)
    grads = {}
    for be in ("torch", "numba"):
        ins = [t.detach().clone().requires_grad_() for t in args]
        out = fns[name](be, *ins)
        outs = out if isinstance(out, tuple) else (out,)
        g.manual_seed(3)
        loss = sum((o * torch.randn(o.shape, dtype=o.dtype, generator=g)).sum() for o in outs)
        grads[be] = torch.autograd.grad(loss, ins, retain_graph=True)
        if name == "state_passing":  # only the final state's gradient reaches the stage
            grads[be + "_final"] = torch.autograd.grad(outs[1].sum(), ins)
    for key in ("numba", "numba_final") if name == "state_passing" else ("numba",):
        for got, want in zip(grads[key], grads[key.replace("numba", "torch")]):
            assert got.shape == want.shape and rel_err(got, want) < 1e-12


def test_float32_gradients_match_float64():
    """float32 gradients of backend='numba' against the float64 torch stages' (Mamba-2-like sizes)."""
    x, dt, A, B, C = _inputs(bsz=1, length=150, heads=4, headdim=16, state=16, groups=2)
    dt = dt * 0.2
    grads = {}
    for dtype, be in ((torch.float32, "numba"), (torch.float64, "torch")):
        ins = [t.detach().to(dtype).requires_grad_() for t in (x, dt, A, B, C)]
        y, s = ssd(*ins, 64, return_final_states=True, backend=be)
        (y.square().sum() + s.sum()).backward()
        grads[be] = [t.grad.double() for t in ins]
    for got, want in zip(grads["numba"], grads["torch"]):
        assert rel_err(got, want) < 1e-4


def test_gradcheck_groups_and_padding():
    """gradcheck through every Numba stage: two groups, a length that pads its last chunk, D, z and h0."""
    x, dt, A, B, C = _inputs(bsz=1, length=7, heads=4, headdim=2, state=3, groups=2)
    h0 = torch.randn(1, 4, 2, 3, dtype=x.dtype)
    z = torch.randn_like(x)
    ins = [t.clone().requires_grad_() for t in (x, dt, A, B, C, h0, z)]

    def fn(x, dt, A, B, C, h0, z):
        return ssd(x, dt, A, B, C, 3, D=torch.ones(4, dtype=x.dtype), initial_states=h0, z=z,
                   return_final_states=True, backend="numba")

    assert torch.autograd.gradcheck(fn, ins)
