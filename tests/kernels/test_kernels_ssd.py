"""ssd (chunked, pure torch) against the sequential recurrence and against selective_scan."""

import pytest
import torch

from kernels import selective_scan, ssd, ssd_ref


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


def _inputs(bsz=2, length=16, heads=4, headdim=3, groups=1, state=5, dtype=torch.float64):
    x = torch.randn(bsz, length, heads, headdim, dtype=dtype)
    dt = torch.rand(bsz, length, heads, dtype=dtype)
    A = -torch.rand(heads, dtype=dtype) - 0.1
    B = torch.randn(bsz, length, groups, state, dtype=dtype)
    C = torch.randn(bsz, length, groups, state, dtype=dtype)
    return x, dt, A, B, C


@pytest.mark.parametrize("length,chunk", [(16, 4), (13, 4), (7, 8), (1, 4), (0, 4), (40, 16)])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("d_shape", [None, "heads", "heads_headdim"])
def test_matches_sequential(length, chunk, groups, d_shape):
    x, dt, A, B, C = _inputs(length=length, groups=groups)
    D = {None: None, "heads": torch.randn(4, dtype=x.dtype), "heads_headdim": torch.randn(4, 3, dtype=x.dtype)}[
        d_shape
    ]
    h0 = torch.randn(2, 4, 3, 5, dtype=x.dtype)
    y, s = ssd(x, dt, A, B, C, chunk, D=D, initial_states=h0, return_final_states=True)
    yr, sr = ssd_ref(x, dt, A, B, C, D=D, initial_states=h0, return_final_states=True)
    assert y.shape == x.shape and s.shape == h0.shape
    assert rel_err(y, yr) < 1e-12 and rel_err(s, sr) < 1e-12
    y2 = ssd(x, dt, A, B, C, chunk, D=D, initial_states=h0)
    assert torch.equal(y, y2)


def test_float32():
    x, dt, A, B, C = _inputs(length=100, dtype=torch.float32, headdim=8, state=16)
    y = ssd(x, dt, A, B, C, 32)
    yr = ssd_ref(*[t.double() for t in (x, dt, A, B, C)])
    assert rel_err(y.double(), yr) < 1e-5


def test_gradcheck():
    ins = [t.requires_grad_() for t in _inputs(bsz=1, length=6, heads=2, headdim=2, state=3)]
    h0 = torch.randn(1, 2, 2, 3, dtype=torch.float64, requires_grad=True)
    D = torch.randn(2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, dt, A, B, C, D, h0: ssd(x, dt, A, B, C, 4, D=D, initial_states=h0, return_final_states=True),
        (*ins, D, h0),
    )


def test_equals_selective_scan_with_scalar_A_per_head():
    """Mamba-2's case: channels = heads * headdim, A[d, :] = A[head], delta = dt[head], groups share B and C."""
    b, L, h, p, n, g = 2, 21, 4, 3, 5, 2
    x, dt, A, B, C = _inputs(bsz=b, length=L, heads=h, headdim=p, groups=g, state=n)
    D = torch.randn(h, dtype=x.dtype)
    h0 = torch.randn(b, h, p, n, dtype=x.dtype)
    y, s = ssd(x, dt, A, B, C, 8, D=D, initial_states=h0, return_final_states=True)
    u = x.permute(0, 2, 3, 1).reshape(b, h * p, L)
    delta = dt.permute(0, 2, 1).repeat_interleave(p, dim=1)
    A_s = A.repeat_interleave(p)[:, None].expand(h * p, n).contiguous()
    ys, ls = selective_scan(
        u, delta, A_s, B.permute(0, 2, 3, 1), C.permute(0, 2, 3, 1), D=D.repeat_interleave(p),
        h0=h0.reshape(b, h * p, n), return_last_state=True,
    )  # fmt: skip
    assert rel_err(ys.reshape(b, h, p, L).permute(0, 3, 1, 2), y) < 1e-12
    assert rel_err(ls.reshape(b, h, p, n), s) < 1e-12


def test_nan_and_bad_inputs():
    x, dt, A, B, C = _inputs(length=12)
    x = x.clone()
    x[0, 5, 1, 0] = float("nan")
    y = ssd(x, dt, A, B, C, 4)
    # NaN reaches every later step of that (head, headdim) channel and nothing in other channels or batches; inside
    # its own chunk it also reaches the earlier steps (a masked matmul multiplies the NaN by zero)
    assert torch.isnan(y[0, 5:, 1, 0]).all() and not torch.isnan(y[0, :4, 1, 0]).any()
    assert torch.isnan(y).sum() == 8 and not torch.isnan(y[1]).any()
    assert torch.isnan(ssd_ref(x, dt, A, B, C)).sum() == 7
    with pytest.raises(ValueError, match=r"\(2, 11, 4\)"):
        ssd(x, dt[:, :11], A, B, C, 4)
    with pytest.raises(ValueError, match="groups"):
        ssd(x, dt, A, torch.randn(2, 12, 3, 5, dtype=x.dtype), torch.randn(2, 12, 3, 5, dtype=x.dtype), 4)
    with pytest.raises(ValueError, match="chunk_size"):
        ssd(x, dt, A, B, C, 0)
    with pytest.raises(TypeError):
        ssd(x.long(), dt, A, B, C, 4)


def test_gate_bias_softplus_and_limits_match_the_reference():
    x, dt, A, B, C = _inputs(length=19, groups=2)
    z = torch.randn_like(x)
    bias = torch.randn(4, dtype=x.dtype)
    kw = dict(z=z, dt_bias=bias, dt_softplus=True, dt_limit=(0.05, 0.8))
    D = torch.randn(4, dtype=x.dtype)
    y, s = ssd(x, dt - 0.5, A, B, C, 4, D=D, return_final_states=True, **kw)
    yr, sr = ssd_ref(x, dt - 0.5, A, B, C, D=D, return_final_states=True, **kw)
    assert rel_err(y, yr) < 1e-12 and rel_err(s, sr) < 1e-12


@pytest.mark.parametrize("chunk", [3, 4, 16])
def test_packed_sequences_reset_the_state(chunk):
    """seq_idx: three sequences packed in one row equal three separate runs (the first keeps the initial state)."""
    x, dt, A, B, C = _inputs(bsz=1, length=14, groups=2)
    h0 = torch.randn(1, 4, 3, 5, dtype=x.dtype)
    cuts = [0, 5, 6, 14]
    seq_idx = torch.tensor([[i for i in range(3) for _ in range(cuts[i + 1] - cuts[i])]])
    y, s = ssd(x, dt, A, B, C, chunk, initial_states=h0, return_final_states=True, seq_idx=seq_idx)
    yr, sr = ssd_ref(x, dt, A, B, C, initial_states=h0, return_final_states=True, seq_idx=seq_idx)
    assert rel_err(y, yr) < 1e-12 and rel_err(s, sr) < 1e-12
    for i in range(3):
        part = slice(cuts[i], cuts[i + 1])
        alone, last = ssd(x[:, part], dt[:, part], A, B[:, part], C[:, part], chunk,
                          initial_states=h0 if i == 0 else None, return_final_states=True)
        assert rel_err(y[:, part], alone) < 1e-12
    assert rel_err(s, last) < 1e-12


def test_hooks_see_every_stage_and_can_change_it():
    x, dt, A, B, C = _inputs(length=10)
    seen = {}

    def spy(name):
        def f(t):
            seen[name] = tuple(t.shape)
            return t
        return f

    from kernels.ssd import HOOK_POINTS

    y = ssd(x, dt, A, B, C, 4, hooks={p: spy(p) for p in HOOK_POINTS})
    assert set(seen) == set(HOOK_POINTS) and seen["CB"] == (2, 3, 1, 4, 4) and seen["states"] == (2, 3, 4, 3, 5)
    assert rel_err(y, ssd_ref(x, dt, A, B, C)) < 1e-12
    rounded = ssd(x, dt, A, B, C, 4, hooks={"x": lambda t: torch.round(t * 4) / 4})
    assert rel_err(rounded, ssd_ref(torch.round(x * 4) / 4, dt, A, B, C)) < 1e-12
    with pytest.raises(ValueError, match="hooks=\\['nope'\\] is not allowed"):
        ssd(x, dt, A, B, C, 4, hooks={"nope": spy("nope")})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(dtype):
    x, dt, A, B, C = _inputs(length=24, dtype=torch.float64)
    ref = ssd_ref(x, dt, A, B, C)
    y = ssd(*(t.to(dtype) for t in (x, dt, A, B, C)), 8)
    assert y.dtype == dtype and rel_err(y.double(), ref) < (2e-2 if dtype == torch.bfloat16 else 5e-3)
