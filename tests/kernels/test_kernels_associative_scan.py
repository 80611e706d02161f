"""associative_scan: a generic log-depth scan over pytrees."""

import pytest
import torch

from kernels import associative_scan, linear_scan


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


def linear_combine(left, right):
    return left[0] * right[0], right[0] * left[1] + right[1]


@pytest.mark.parametrize("length", [0, 1, 2, 3, 8, 37])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reverse", [False, True])
def test_linear_recurrence_matches_linear_scan(length, dim, reverse):
    shape = [3, 4, 5]
    shape[dim] = length
    a = torch.rand(shape, dtype=torch.float64)
    b = torch.randn(shape, dtype=torch.float64)
    _, h = associative_scan(linear_combine, (a, b), dim=dim, reverse=reverse)
    assert h.shape == b.shape
    assert rel_err(h, linear_scan(a, b, dim=dim, reverse=reverse)) < 1e-12


def test_complex_and_pytrees():
    a = torch.randn(2, 17, dtype=torch.complex128) * 0.5
    b = torch.randn(2, 17, dtype=torch.complex128)
    out = associative_scan(
        lambda l, r: {"a": l["a"] * r["a"], "b": r["a"] * l["b"] + r["b"]}, {"a": a, "b": b}, dim=1
    )
    assert set(out) == {"a", "b"}
    assert rel_err(out["b"], linear_scan(a, b)) < 1e-12
    x = torch.arange(1.0, 11.0)
    assert torch.equal(associative_scan(lambda l, r: l + r, x), torch.cumsum(x, 0))
    assert torch.equal(
        associative_scan(torch.maximum, torch.tensor([1.0, 3, 2, 5, 4])), torch.tensor([1.0, 3, 3, 5, 5])
    )
    nested = associative_scan(lambda l, r: [l[0] + r[0], (l[1][0] * r[1][0],)], [x, (x,)])
    assert torch.equal(nested[1][0], torch.cumprod(x, 0))


def test_gradcheck():
    a = torch.rand(2, 9, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: associative_scan(linear_combine, (a, b), dim=1)[1], (a, b))


def test_bad_inputs():
    with pytest.raises(ValueError, match="same size"):
        associative_scan(linear_combine, (torch.rand(3), torch.rand(4)))
    with pytest.raises(ValueError, match="out of range"):
        associative_scan(lambda l, r: l + r, torch.rand(3), dim=2)
    with pytest.raises(TypeError, match="tensors"):
        associative_scan(lambda l, r: l + r, [1.0, 2.0])
