"""Triton kernel for the linear recurrence ``h_t = a_t h_{t-1} + b_t`` on ``(N, T, M)`` views.

One program owns ``BLOCK_R`` rows (flattened ``(n, m)`` pairs) and walks the scan axis in tiles of ``BLOCK_T``
steps: inside a tile ``tl.associative_scan`` with the linear-recurrence combine ``(a1, b1), (a2, b2) ->
(a1 a2, a2 b1 + b2)`` gives every step's ``(prod a, partial h)`` from zero, then ``h = A * carry + B``; the last
column is the carry into the next tile. Out-of-range steps load the identity ``(1, 0)``, so the last column is the
last valid state. Complex tensors run on their real views with the complex combine.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _combine_complex(ar1, ai1, br1, bi1, ar2, ai2, br2, bi2):
    return (
        ar1 * ar2 - ai1 * ai2,
        ar1 * ai2 + ai1 * ar2,
        ar2 * br1 - ai2 * bi1 + br2,
        ar2 * bi1 + ai2 * br1 + bi2,
    )


@triton.jit
def _last_col(x, j, BLOCK_T: tl.constexpr):
    return tl.sum(tl.where(j[None, :] == BLOCK_T - 1, x, 0.0), axis=1)


@triton.jit
def _scan_kernel(
    a_ptr, b_ptr, h0_ptr, out_ptr, n_rows, T, M,
    sa_n, sa_t, sa_m, sb_n, sb_t, sb_m, so_n, so_t, so_m, sh_n, sh_m,
    REVERSE: tl.constexpr, COMPLEX: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    n = rows // M
    m = rows % M
    a_row = n * sa_n + m * sa_m
    b_row = n * sb_n + m * sb_m
    o_row = n * so_n + m * so_m
    h_off = n * sh_n + m * sh_m
    hr = tl.load(h0_ptr + h_off, mask=rmask, other=0.0)
    if COMPLEX:
        hi = tl.load(h0_ptr + h_off + 1, mask=rmask, other=0.0)
    j = tl.arange(0, BLOCK_T)
    for t0 in range(0, T, BLOCK_T):
        s = t0 + j
        if REVERSE:
            t = T - 1 - s
        else:
            t = s
        mask = rmask[:, None] & (s < T)[None, :]
        a_off = a_row[:, None] + t[None, :] * sa_t
        b_off = b_row[:, None] + t[None, :] * sb_t
        o_off = o_row[:, None] + t[None, :] * so_t
        ar = tl.load(a_ptr + a_off, mask=mask, other=1.0)
        br = tl.load(b_ptr + b_off, mask=mask, other=0.0)
        if COMPLEX:
            ai = tl.load(a_ptr + a_off + 1, mask=mask, other=0.0)
            bi = tl.load(b_ptr + b_off + 1, mask=mask, other=0.0)
            Ar, Ai, Br, Bi = tl.associative_scan((ar, ai, br, bi), 1, _combine_complex)
            outr = Ar * hr[:, None] - Ai * hi[:, None] + Br
            outi = Ar * hi[:, None] + Ai * hr[:, None] + Bi
            tl.store(out_ptr + o_off, outr, mask=mask)
            tl.store(out_ptr + o_off + 1, outi, mask=mask)
            hr = _last_col(outr, j, BLOCK_T)
            hi = _last_col(outi, j, BLOCK_T)
        else:
            A, B = tl.associative_scan((ar, br), 1, _combine)
            out = A * hr[:, None] + B
            tl.store(out_ptr + o_off, out, mask=mask)
            hr = _last_col(out, j, BLOCK_T)


def _real_view(x: torch.Tensor):
    """(pointer tensor, strides of the first dims in real elements) of a possibly complex tensor."""
    if x.is_complex():
        xr = torch.view_as_real(x.resolve_conj())
        return xr, [s for s in xr.stride()[:-1]]
    return x, list(x.stride())


def scan_forward(a3: torch.Tensor, b3: torch.Tensor, h02: torch.Tensor, out3: torch.Tensor, reverse: bool,
                 block_r: int = 16, block_t: int = 64) -> None:  # fmt: skip
    """Fill ``out3`` (N, T, M) with the scan of ``a3``, ``b3`` (N, T, M) from ``h02`` (N, M) along axis 1."""
    n, t, m = b3.shape
    if n * t * m == 0:
        return
    complex_ = b3.is_complex()
    a_, sa = _real_view(a3)
    b_, sb = _real_view(b3)
    o_, so = _real_view(out3)
    h_, sh = _real_view(h02)
    rows = n * m
    block_r = min(block_r, triton.next_power_of_2(rows))
    block_t = min(block_t, triton.next_power_of_2(t))
    grid = (triton.cdiv(rows, block_r),)
    _scan_kernel[grid](
        a_, b_, h_, o_, rows, t, m, sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], so[0], so[1], so[2], sh[0], sh[1],
        REVERSE=bool(reverse), COMPLEX=complex_, BLOCK_R=block_r, BLOCK_T=block_t,
    )  # fmt: skip
