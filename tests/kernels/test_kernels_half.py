"""Every op takes float16 and bfloat16 inputs, computes in float32 and returns the input's dtype."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels import delta_rule, delta_rule_ref, linear_scan, selective_scan, selective_scan_ref, ssd, ssd_ref

HALF = [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)]


def rel(out, ref):
    return float((out.double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize(("dtype", "tol"), HALF)
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_linear_scan(dtype, tol, backend):
    a = torch.rand(2, 8, 50, dtype=torch.float64) * 0.9
    b = torch.randn(2, 8, 50, dtype=torch.float64)
    ref = linear_scan(a, b, backend="torch")
    out = linear_scan(a.to(dtype), b.to(dtype), backend=backend)
    assert out.dtype == dtype and rel(out, ref) < tol


@pytest.mark.parametrize(("dtype", "tol"), HALF)
def test_linear_scan_gradients_flow_back_in_half(dtype, tol):
    a = (torch.rand(2, 4, 30) * 0.9).to(dtype).requires_grad_()
    b = torch.randn(2, 4, 30).to(dtype).requires_grad_()
    linear_scan(a, b).sum().backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype and torch.isfinite(b.grad.float()).all()


@pytest.mark.parametrize(("dtype", "tol"), HALF)
def test_selective_scan(dtype, tol):
    g = torch.Generator().manual_seed(0)
    u, delta = torch.randn(2, 8, 40, generator=g, dtype=torch.float64), torch.randn(2, 8, 40, generator=g,
                                                                                    dtype=torch.float64)
    A = -torch.rand(8, 4, generator=g, dtype=torch.float64)
    B, C = torch.randn(2, 4, 40, generator=g, dtype=torch.float64), torch.randn(2, 4, 40, generator=g,
                                                                               dtype=torch.float64)
    ref = selective_scan_ref(u, delta, A, B, C, delta_softplus=True)
    out = selective_scan(*(t.to(dtype) for t in (u, delta, A, B, C)), delta_softplus=True)
    assert out.dtype == dtype and rel(out, ref) < 2 * tol


@pytest.mark.parametrize(("dtype", "tol"), HALF)
def test_ssd_and_delta_rule(dtype, tol):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 24, 4, 3, generator=g, dtype=torch.float64)
    dt = torch.rand(2, 24, 4, generator=g, dtype=torch.float64)
    A = -torch.rand(4, generator=g, dtype=torch.float64)
    B, C = torch.randn(2, 24, 1, 5, generator=g, dtype=torch.float64), torch.randn(2, 24, 1, 5, generator=g,
                                                                                  dtype=torch.float64)
    out = ssd(*(t.to(dtype) for t in (x, dt, A, B, C)), 8)
    assert out.dtype == dtype and rel(out, ssd_ref(x, dt, A, B, C)) < 2 * tol
    q = torch.randn(1, 2, 20, 4, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(1, 2, 20, 4, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 2, 20, 3, generator=g, dtype=torch.float64)
    beta = torch.rand(1, 2, 20, generator=g, dtype=torch.float64)
    o = delta_rule(*(t.to(dtype) for t in (q, k, v, beta)), chunk_size=8)
    assert o.dtype == dtype and rel(o, delta_rule_ref(q, k, v, beta)) < 2 * tol
