"""causal_conv1d (fused Numba kernel) against causal_conv1d_ref: values, gradients, float64 gradcheck, half
precision, strided inputs and bad input."""

import pytest
import torch

from kernels import causal_conv1d, causal_conv1d_ref


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    if ref.numel() == 0:
        return 0.0 if out.shape == ref.shape else float("inf")
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


def _inputs(bsz=2, dim=6, length=37, width=4, dtype=torch.float64, bias=True, state=False):
    x = torch.randn(bsz, dim, length, dtype=dtype)
    w = torch.randn(dim, width, dtype=dtype)
    b = torch.randn(dim, dtype=dtype) if bias else None
    s = torch.randn(bsz, dim, width - 1, dtype=dtype) if state else None
    return x, w, b, s


@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize(("bias", "state"), [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize(("length", "width"), [(37, 4), (2, 4), (1, 1), (9, 2)])
def test_values_and_gradients_match_reference(activation, bias, state, length, width):
    x, w, b, s = _inputs(length=length, width=width, bias=bias, state=state)
    ins = [t for t in (x, w, b, s) if t is not None]
    for t in ins:
        t.requires_grad_()
    y = causal_conv1d(x, w, b, s, activation, backend="numba")
    yr = causal_conv1d_ref(x, w, b, s, activation)
    assert y.shape == yr.shape and rel_err(y, yr) < 1e-12
    gy = torch.randn_like(y)
    got = torch.autograd.grad((y * gy).sum(), ins)
    want = torch.autograd.grad((yr * gy).sum(), ins)
    for g, r in zip(got, want):
        assert rel_err(g, r) < 1e-11


@pytest.mark.parametrize("activation", [None, "silu"])
def test_gradcheck_float64(activation):
    x, w, b, s = _inputs(bsz=1, dim=3, length=7, width=3, state=True)
    ins = tuple(t.requires_grad_() for t in (x, w, b, s))
    assert torch.autograd.gradcheck(lambda *a: causal_conv1d(*a, activation, backend="numba"), ins)


def test_float32_and_a_strided_view_as_the_mamba_block_passes():
    xz = torch.randn(3, 2 * 16, 300)
    x = xz[:, :16]  # a channel slice of the in-projection: not contiguous
    w, b = torch.randn(16, 4), torch.randn(16)
    y = causal_conv1d(x, w, b, activation="silu", backend="numba")
    assert y.is_contiguous()
    assert rel_err(y, causal_conv1d_ref(x, w, b, activation="silu")) < 1e-6


def test_conv_layer_weights_give_nn_conv1d_output():
    conv = torch.nn.Conv1d(8, 8, 4, groups=8, padding=3)
    x = torch.randn(2, 8, 50)
    want = torch.nn.functional.silu(conv(x)[..., :50])
    got = causal_conv1d(x, conv.weight[:, 0, :], conv.bias, activation="silu")
    assert rel_err(got, want) < 1e-6


def test_chunks_chained_through_the_state_equal_one_call():
    x, w, b, _ = _inputs(length=40)
    whole = causal_conv1d(x, w, b, activation="silu")
    first = causal_conv1d(x[..., :25], w, b, activation="silu")
    second = causal_conv1d(x[..., 25:], w, b, x[..., 22:25], activation="silu")
    assert rel_err(torch.cat([first, second], -1), whole) < 1e-12


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_half_precision_is_computed_in_float32(dtype, tol):
    x, w, b, _ = _inputs(dtype=torch.float32)
    y = causal_conv1d(x.to(dtype), w.to(dtype), b.to(dtype), activation="silu")
    assert y.dtype == dtype
    ref = causal_conv1d_ref(*(t.to(dtype).float() for t in (x, w, b)), activation="silu")
    assert rel_err(y.float(), ref) < tol


def test_bad_input_names_the_field():
    x, w, b, _ = _inputs()
    with pytest.raises(ValueError, match="weight must be"):
        causal_conv1d(x, w[:3], b)
    with pytest.raises(ValueError, match="bias has shape"):
        causal_conv1d(x, w, b[:2])
    with pytest.raises(ValueError, match="initial_state has shape"):
        causal_conv1d(x, w, b, torch.zeros(2, 6, 5, dtype=x.dtype))
    with pytest.raises(ValueError, match="activation must be one of"):
        causal_conv1d(x, w, b, activation="relu")
    with pytest.raises(TypeError, match="weight has dtype"):
        causal_conv1d(x, w.float(), b)
    with pytest.raises(ValueError, match="unknown backend"):
        causal_conv1d(x, w, b, backend="cuda")
