"""Triton kernels for the linear recurrence ``h_t = a_t h_{t-1} + b_t`` on ``(N, T, M)`` views, and its backward.

* Time-contiguous rows (``M == 1`` or strided channels): one program owns ``BLOCK_R`` rows (flattened ``(n, m)``
  pairs) and walks the scan axis in tiles of ``BLOCK_T`` steps: inside a tile ``tl.associative_scan`` with the
  linear-recurrence combine ``(a1, b1), (a2, b2) -> (a1 a2, a2 b1 + b2)`` gives every step's ``(prod a, partial h)``
  from zero, then ``h = A * carry + B``; the last column is the carry into the next tile. Out-of-range steps load the
  identity ``(1, 0)``, so the last column is the last valid state. Complex tensors run on their real views with the
  complex combine.
* Channels-contiguous (``channels_last``: the ``M`` axis has stride 1): one program owns ``BLOCK_M`` neighbouring
  channels and steps through time; each step loads ``BLOCK_M`` contiguous values, so every access is coalesced.
* The backward of a real scan is one fused pass (:func:`scan_backward`): the adjoint ``d_t = g_t + a_next d_next``
  runs the other way with the same tiles, and ``da = d * h_prev``, ``db = d`` and ``dh0`` are written as it goes:
  three reads and two writes, instead of building shifted copies first.

Offsets are 64-bit (``N * T * M`` may pass 2^31), and every launch runs under a guard for the tensors' device.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl


def _device_guard(t: torch.Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


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
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
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
            t = (T - 1 - s).to(tl.int64)
        else:
            t = s.to(tl.int64)
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


@triton.jit
def _scan_channels_kernel(
    a_ptr, b_ptr, h0_ptr, out_ptr, T, M,
    sa_n, sa_t, sb_n, sb_t, so_n, so_t, sh_n,
    REVERSE: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    n = tl.program_id(1).to(tl.int64)
    m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mmask = m < M
    h = tl.load(h0_ptr + n * sh_n + m, mask=mmask, other=0.0)
    for s in range(0, T):
        if REVERSE:
            t = (T - 1 - s).to(tl.int64)
        else:
            t = tl.full([], s, tl.int64)
        a = tl.load(a_ptr + n * sa_n + t * sa_t + m, mask=mmask, other=1.0)
        b = tl.load(b_ptr + n * sb_n + t * sb_t + m, mask=mmask, other=0.0)
        h = a * h + b
        tl.store(out_ptr + n * so_n + t * so_t + m, h, mask=mmask)


@triton.jit
def _backward_kernel(
    a_ptr, h_ptr, g_ptr, h0_ptr, da_ptr, db_ptr, dh0_ptr, n_rows, T, M,
    sa_n, sa_t, sa_m, sh_n, sh_t, sh_m, sg_n, sg_t, sg_m, s0_n, s0_m,
    sd_n, sd_t, sd_m, se_n, se_t, se_m, sz_n, sz_m,
    REVERSE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    """Adjoint of a scan that ran forward (``REVERSE`` False: t = 0..T-1) or backward. In processing order ``s``
    (the forward's order reversed), ``d_s = g_s + c_s d_{s-1}`` with ``c_s`` the coefficient ``a`` of the step
    processed just before (the forward's next step); ``da = d * h_prev`` (the forward's previous state, ``h0`` at
    its first step), ``db = d``, ``dh0 = a_first * d_first``."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    n = rows // M
    m = rows % M
    carry = tl.zeros([BLOCK_R], dtype=tl.float32).to(h0_ptr.dtype.element_ty)
    h0 = tl.load(h0_ptr + n * s0_n + m * s0_m, mask=rmask, other=0.0)
    j = tl.arange(0, BLOCK_T)
    for t0 in range(0, T, BLOCK_T):
        s = t0 + j
        valid = s < T
        if REVERSE:  # the forward ran T-1..0, so the adjoint runs 0..T-1; next = t - 1, previous = t + 1
            t = s.to(tl.int64)
            t_next = t - 1
            t_prev = t + 1
            has_prev = t_prev < T
        else:
            t = (T - 1 - s).to(tl.int64)
            t_next = t + 1
            t_prev = t - 1
            has_prev = t_prev >= 0
        mask = rmask[:, None] & valid[None, :]
        next_ok = mask & ((t_next >= 0) & (t_next < T))[None, :]
        c = tl.load(a_ptr + n[:, None] * sa_n + t_next[None, :] * sa_t + m[:, None] * sa_m, mask=next_ok, other=0.0)
        c = tl.where(mask, c, 1.0)  # past the end: the identity, so the last column carries the last valid d
        gv = tl.load(g_ptr + n[:, None] * sg_n + t[None, :] * sg_t + m[:, None] * sg_m, mask=mask, other=0.0)
        C, G = tl.associative_scan((c, gv), 1, _combine)
        d = C * carry[:, None] + G
        prev_ok = mask & has_prev[None, :]
        hp = tl.load(h_ptr + n[:, None] * sh_n + t_prev[None, :] * sh_t + m[:, None] * sh_m, mask=prev_ok,
                     other=0.0)  # fmt: skip
        hp = tl.where(has_prev[None, :], hp, h0[:, None])
        tl.store(da_ptr + n[:, None] * sd_n + t[None, :] * sd_t + m[:, None] * sd_m, d * hp, mask=mask)
        tl.store(db_ptr + n[:, None] * se_n + t[None, :] * se_t + m[:, None] * se_m, d, mask=mask)
        carry = _last_col(d, j, BLOCK_T)
    # the forward's first step is the adjoint's last: dh0 = a_first * d_first
    first = T - 1 if REVERSE else 0
    a_first = tl.load(a_ptr + n * sa_n + first * sa_t + m * sa_m, mask=rmask, other=0.0)
    tl.store(dh0_ptr + n * sz_n + m * sz_m, a_first * carry, mask=rmask)


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
    if not complex_ and m >= 32 and sa[2] == sb[2] == so[2] == sh[1] == 1:  # channels contiguous: coalesced steps
        block_m = min(128, triton.next_power_of_2(m))
        with _device_guard(b3):
            _scan_channels_kernel[(triton.cdiv(m, block_m), n)](
                a_, b_, h_, o_, t, m, sa[0], sa[1], sb[0], sb[1], so[0], so[1], sh[0],
                REVERSE=bool(reverse), BLOCK_M=block_m,
            )  # fmt: skip
        return
    block_r = min(block_r, triton.next_power_of_2(rows))
    block_t = min(block_t, triton.next_power_of_2(t))
    grid = (triton.cdiv(rows, block_r),)
    with _device_guard(b3):
        _scan_kernel[grid](
            a_, b_, h_, o_, rows, t, m, sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], so[0], so[1], so[2], sh[0], sh[1],
            REVERSE=bool(reverse), COMPLEX=complex_, BLOCK_R=block_r, BLOCK_T=block_t,
        )  # fmt: skip


def scan_backward(a3, h3, g3, h02, da3, db3, dh02, reverse, block_r: int = 16, block_t: int = 64) -> None:
    """The fused backward of a real scan on ``(N, T, M)`` views: fill ``da3``, ``db3`` and ``dh02``."""
    n, t, m = g3.shape
    rows = n * m
    block_r = min(block_r, triton.next_power_of_2(rows))
    block_t = min(block_t, triton.next_power_of_2(t))
    st = [x.stride() for x in (a3, h3, g3)]
    with _device_guard(g3):
        _backward_kernel[(triton.cdiv(rows, block_r),)](
            a3, h3, g3, h02, da3, db3, dh02, rows, t, m,
            *st[0], *st[1], *st[2], *h02.stride(), *da3.stride(), *db3.stride(), *dh02.stride(),
            REVERSE=bool(reverse), BLOCK_R=block_r, BLOCK_T=block_t,
        )  # fmt: skip
