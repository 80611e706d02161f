"""Triton kernels under the interpreter (TRITON_INTERPRET=1 on CPU tensors), tiny shapes.

The interpreter must be switched on before triton is imported, so the checks run in a fresh subprocess: the rest of
the test session keeps a normal triton (or none).
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECKS = textwrap.dedent(
    r"""
    import os, sys
    assert os.environ["TRITON_INTERPRET"] == "1"
    sys.path.insert(0, ROOT)
    import time
    import torch
    from kernels import linear_scan, linear_scan_ref, selective_scan, selective_scan_ref
    torch.manual_seed(0)

    def rel(o, r):
        return ((o - r).abs().max() / r.abs().max().clamp_min(1e-30)).item() if r.numel() else 0.0

    hi = {torch.float32: torch.float64, torch.float64: torch.float64,
          torch.complex64: torch.complex128, torch.complex128: torch.complex128}
    t00 = time.time()
    # linear_scan: dtypes x layouts x directions x h0, including a length that is not a multiple of the tile
    for dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        for shape, dim in (((2, 3, 37), -1), ((2, 37, 3), 1), ((5,), 0), ((2, 3, 1), -1), ((2, 3, 0), -1)):
            for reverse in (False, True):
                a = (torch.rand(shape, dtype=torch.float64) * 0.5 + 0.5).to(dtype)
                b = torch.randn(shape, dtype=dtype)
                state = list(shape); del state[dim]
                h0 = torch.randn(state, dtype=dtype)
                out = linear_scan(a, b, h0, dim=dim, reverse=reverse, backend="triton")
                ref = linear_scan_ref(a.to(hi[dtype]), b.to(hi[dtype]), h0.to(hi[dtype]), dim=dim, reverse=reverse)
                err = rel(out.to(hi[dtype]), ref)
                assert err < 1e-5, (dtype, shape, reverse, err)
    print("linear fwd", time.time() - t00)
    b = torch.randn(2, 3, 20)
    v = linear_scan(torch.rand(2, 3, 40)[..., ::2], b.transpose(1, 2).contiguous().transpose(1, 2), backend="triton")
    assert v.shape == (2, 3, 20)
    nan_b = torch.randn(1, 2, 9); nan_b[0, 1, 4] = float("nan")
    o = linear_scan(torch.rand(1, 2, 9), nan_b, backend="triton")
    assert torch.isnan(o[0, 1, 4:]).all() and not torch.isnan(o[0, 0]).any() and not torch.isnan(o[0, 1, :4]).any()
    import time; t0 = time.time()
    for dtype, reverse in ((torch.float64, False), (torch.float64, True), (torch.complex128, False)):
        a = (torch.rand(1, 2, 5, dtype=torch.float64) * 0.5 + 0.5).to(dtype).requires_grad_()
        b = torch.randn(1, 2, 5, dtype=dtype, requires_grad=True)
        h0 = torch.randn(1, 2, dtype=dtype, requires_grad=True)
        fn = lambda a, b, h0, r=reverse: linear_scan(a, b, h0, reverse=r, backend="triton")
        assert torch.autograd.gradcheck(fn, (a, b, h0))
    # channels-contiguous layout (the coalesced kernel) and the fused real backward, both directions
    for reverse in (False, True):
        for shape, dim in (((2, 9, 40), 1), ((2, 3, 70), -1)):
            a = (torch.rand(shape, dtype=torch.float64) * 0.5 + 0.5).requires_grad_()
            b = torch.randn(shape, dtype=torch.float64, requires_grad=True)
            state = list(shape); del state[dim]
            h0 = torch.randn(state, dtype=torch.float64, requires_grad=True)
            out = linear_scan(a, b, h0, dim=dim, reverse=reverse, backend="triton")
            ref = linear_scan_ref(a, b, h0, dim=dim, reverse=reverse)
            assert rel(out, ref) < 1e-12, (shape, reverse)
            gy = torch.randn_like(out)
            got = torch.autograd.grad((out * gy).sum(), (a, b, h0))
            want = torch.autograd.grad((ref * gy).sum(), (a, b, h0))
            for g1, g2 in zip(got, want):
                assert rel(g1, g2) < 1e-12, (shape, reverse)
    print("linear_scan ok", time.time() - t0)

    t0 = time.time()
    # selective_scan: all options, groups, lengths around the chunk size; gradients of every input
    for groups, length, ns in ((None, 70, 3), (2, 5, 3), (None, 1, 3), (2, 66, 40)):  # 40 states: three tiles
        d = torch.float64
        u = torch.randn(2, 4, length, dtype=d); delta = torch.rand(2, 4, length, dtype=d) * 0.5
        A = -torch.rand(4, ns, dtype=d)
        shp = (2, ns, length) if groups is None else (2, groups, ns, length)
        B = torch.randn(shp, dtype=d); C = torch.randn(shp, dtype=d)
        kw = dict(D=torch.randn(4, dtype=d), z=torch.randn_like(u), delta_bias=torch.randn(4, dtype=d) * 0.1,
                  delta_softplus=True, h0=torch.randn(2, 4, ns, dtype=d))
        ins = [u, delta, A, B, C] + [kw[k] for k in ("D", "z", "delta_bias", "h0")]
        for x in ins: x.requires_grad_()
        y, last = selective_scan(u, delta, A, B, C, return_last_state=True, backend="triton", **kw)
        yr, lr = selective_scan_ref(u, delta, A, B, C, return_last_state=True, **kw)
        assert rel(y, yr) < 1e-12 and rel(last, lr) < 1e-12
        gy, gl = torch.randn_like(y), torch.randn_like(last)
        got = torch.autograd.grad((y * gy).sum() + (last * gl).sum(), ins)
        want = torch.autograd.grad((yr * gy).sum() + (lr * gl).sum(), ins)
        for g1, g2 in zip(got, want):
            assert rel(g1, g2) < 1e-10
    u = torch.randn(1, 2, 6)
    B32, C32 = torch.randn(1, 4, 6), torch.randn(1, 4, 6)
    y32 = selective_scan(u, torch.rand(1, 2, 6), -torch.rand(2, 4), B32, C32, backend="triton")
    assert y32.dtype == torch.float32 and y32.shape == (1, 2, 6)
    print("selective_scan ok", time.time() - t0)
    """
)


def test_triton_kernels_under_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    code = f"ROOT = {ROOT!r}\n" + CHECKS
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "linear_scan ok" in out.stdout and "selective_scan ok" in out.stdout
