"""Step forms equal their parallel forms token by token after a prefill (Mamba-1, Mamba-2 heads, SSD, linear)."""

from __future__ import annotations

import pytest
import torch

from kernels import linear_scan, selective_scan, ssd
from kernels.step import linear_scan_step, selective_state_update, ssd_step

P = 12  # prefill length


def test_linear_scan_step_continues_the_scan():
    a, b = torch.rand(3, 5, 20, dtype=torch.float64), torch.randn(3, 5, 20, dtype=torch.float64)
    full = linear_scan(a, b)
    h = linear_scan(a[..., :P], b[..., :P])[..., -1]
    for t in range(P, 20):
        h = linear_scan_step(h, a[..., t], b[..., t])
        torch.testing.assert_close(h, full[..., t])


@pytest.mark.parametrize("grouped", [False, True])
def test_selective_state_update_continues_the_selective_scan(grouped):
    b, d, n, L = 2, 6, 4, 20
    g = torch.Generator().manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    u, delta, z = rnd(b, d, L), rnd(b, d, L), rnd(b, d, L)
    A, D, bias = -torch.rand(d, n, generator=g, dtype=torch.float64), rnd(d), rnd(d)
    B, C = rnd(b, n, L), rnd(b, n, L)
    y, h = selective_scan(u, delta, A, B, C, D, z, bias, True, return_last_state=True, backend="torch")
    _, state = selective_scan(u[..., :P], delta[..., :P], A, B[..., :P], C[..., :P], D, z[..., :P], bias, True,
                              return_last_state=True, backend="torch")
    state = state.clone()
    for t in range(P, L):
        out = selective_state_update(state, u[..., t], delta[..., t], A, B[..., t], C[..., t], D, z[..., t], bias,
                                     True)
        torch.testing.assert_close(out, y[..., t])
    torch.testing.assert_close(state, h)


def test_ssd_step_and_the_head_form_continue_the_chunked_ssd():
    g = torch.Generator().manual_seed(1)
    bsz, L, H, p, groups, N = 2, 17, 4, 3, 2, 5
    x = torch.randn(bsz, L, H, p, generator=g, dtype=torch.float64)
    dt = torch.rand(bsz, L, H, generator=g, dtype=torch.float64)
    A = -torch.rand(H, generator=g, dtype=torch.float64)
    B = torch.randn(bsz, L, groups, N, generator=g, dtype=torch.float64)
    C = torch.randn(bsz, L, groups, N, generator=g, dtype=torch.float64)
    D = torch.randn(H, generator=g, dtype=torch.float64)
    y, h = ssd(x, dt, A, B, C, 4, D=D, return_final_states=True)
    _, s = ssd(x[:, :9], dt[:, :9], A, B[:, :9], C[:, :9], 4, D=D, return_final_states=True)
    heads_state = s.clone()
    for t in range(9, L):
        y_t, s = ssd_step(s, x[:, t], dt[:, t], A, B[:, t], C[:, t], D=D)
        torch.testing.assert_close(y_t, y[:, t])
        out = selective_state_update(heads_state, x[:, t], dt[:, t, :, None].expand(bsz, H, p),
                                     A[:, None, None].expand(H, p, N), B[:, t], C[:, t],
                                     D=D[:, None].expand(H, p))
        torch.testing.assert_close(out, y[:, t])
    torch.testing.assert_close(s, h)
    torch.testing.assert_close(heads_state, h)


def test_half_precision_step_returns_its_dtype():
    state = torch.zeros(2, 3, 4, dtype=torch.bfloat16)
    x = torch.randn(2, 3).to(torch.bfloat16)
    out = selective_state_update(state, x, torch.rand(2, 3).to(torch.bfloat16), -torch.rand(3, 4).bfloat16(),
                                 torch.randn(2, 4).bfloat16(), torch.randn(2, 4).bfloat16())
    assert out.dtype == torch.bfloat16 and state.abs().sum() > 0


def test_bad_shapes_name_the_argument():
    with pytest.raises(ValueError, match="A has shape"):
        selective_state_update(torch.zeros(2, 3, 4), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3, 5),
                               torch.zeros(2, 4), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="ngroups dividing 4 heads"):
        selective_state_update(torch.zeros(2, 4, 3, 5), torch.zeros(2, 4, 3), torch.zeros(2, 4, 3),
                               torch.zeros(4, 3, 5), torch.zeros(2, 3, 5), torch.zeros(2, 3, 5))
