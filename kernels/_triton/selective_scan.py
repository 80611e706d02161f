"""Triton kernels for the selective scan core ``(u, dt, A, B, C, D, h0) -> (y, last)`` and its backward.

One program per (batch, channel). The state is walked in tiles of at most ``MAX_BLOCK_N`` entries (a larger tile
spills registers: state 64 did) and, for each, the length in chunks of ``CHUNK`` steps; a chunk is a
``(CHUNK, state tile)`` block: ``dA = exp(dt A)`` and ``dB u = dt B u`` are formed in registers,
``tl.associative_scan`` with the linear-recurrence combine scans the block along time, and the last row is the carry
into the next chunk (and the checkpoint the backward restarts from). The output sums over state tiles (the first
tile stores, the others add: one program owns its row). The backward walks the chunks in reverse: it recomputes the
chunk's states from the checkpoint (a second scan on inputs shifted by one step gives the previous states), runs
the adjoint recurrence with a reverse scan, and adds ``dB``/``dC`` (sums over channels) with relaxed atomics (the
order of the additions does not matter, only that each happens once).

Offsets are 64-bit (``batch * channels * length`` may pass 2^31); every launch runs under a guard for the tensors'
device; ``num_warps`` is autotuned per state size on a GPU (not under the interpreter).
"""

from __future__ import annotations

import contextlib
import os

import torch
import triton
import triton.language as tl

CHUNK = 64  # steps per tile, also the checkpoint spacing (a power of two)
MAX_BLOCK_N = 16  # state entries per tile: a (64, 16) float32 block, a few of them live, fits in registers
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _tuned(kernel, **options):
    """Autotune num_warps per state size on a GPU; the interpreter runs the kernel as it is. ``options``: what
    autotune must reset or restore between its trial runs (accumulators, in-out arguments)."""
    if _INTERPRET:
        return kernel
    configs = [triton.Config({}, num_warps=w) for w in (2, 4, 8)]
    return triton.autotune(configs=configs, key=["NS"], **options)(kernel)


def _device_guard(t: torch.Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


@triton.jit
def _combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _fwd_kernel(
    u_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, D_ptr, h0_ptr, y_ptr, last_ptr, ckpt_ptr,
    DIM, L, NS, PER_GROUP,
    sB_b, sB_g, sB_n, sB_l, n_chunks,
    SAVE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    b = pid // DIM
    d = pid % DIM
    g = d // PER_GROUP
    j = tl.arange(0, BLOCK_L)
    skip = tl.load(D_ptr + d)
    row = pid * L
    bc = b * sB_b + g * sB_g
    for k in range(0, NS, BLOCK_N):
        ns = k + tl.arange(0, BLOCK_N)
        nmask = ns < NS
        a_row = tl.load(A_ptr + d * NS + ns, mask=nmask, other=0.0)
        h = tl.load(h0_ptr + pid * NS + ns, mask=nmask, other=0.0)
        for c in range(0, n_chunks):
            ls = c * BLOCK_L + j
            lmask = ls < L
            x = tl.load(u_ptr + row + ls, mask=lmask, other=0.0)
            step = tl.load(dt_ptr + row + ls, mask=lmask, other=0.0)
            m2 = lmask[:, None] & nmask[None, :]
            off = bc + ns[None, :] * sB_n + ls[:, None].to(tl.int64) * sB_l
            Bv = tl.load(B_ptr + off, mask=m2, other=0.0)
            Cv = tl.load(C_ptr + off, mask=m2, other=0.0)
            dA = tl.exp(step[:, None] * a_row[None, :])
            dBu = (step * x)[:, None] * Bv
            P, Q = tl.associative_scan((dA, dBu), 0, _combine)
            hs = P * h[None, :] + Q
            part = tl.sum(hs * Cv, axis=1)
            if k == 0:
                y = part + skip * x
            else:
                y = part + tl.load(y_ptr + row + ls, mask=lmask, other=0.0)
            tl.store(y_ptr + row + ls, y, mask=lmask)
            h = tl.sum(tl.where(j[:, None] == BLOCK_L - 1, hs, 0.0), axis=0)
            if SAVE:
                tl.store(ckpt_ptr + (pid * n_chunks + c) * NS + ns, h, mask=nmask)
        tl.store(last_ptr + pid * NS + ns, h, mask=nmask)


@triton.jit
def _bwd_kernel(
    u_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, D_ptr, h0_ptr, ckpt_ptr, dy_ptr,
    du_ptr, ddt_ptr, dA_ptr, dB_ptr, dC_ptr, dD_ptr, dh_ptr,
    DIM, L, NS, PER_GROUP,
    sB_b, sB_g, sB_n, sB_l, n_chunks,
    BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    b = pid // DIM
    d = pid % DIM
    g = d // PER_GROUP
    j = tl.arange(0, BLOCK_L)
    skip = tl.load(D_ptr + d)
    row = pid * L
    bc = b * sB_b + g * sB_g
    for k in range(0, NS, BLOCK_N):
        ns = k + tl.arange(0, BLOCK_N)
        nmask = ns < NS
        a_row = tl.load(A_ptr + d * NS + ns, mask=nmask, other=0.0)
        carry = tl.load(dh_ptr + pid * NS + ns, mask=nmask, other=0.0)  # gradient of the final state
        da_acc = tl.zeros([BLOCK_N], dtype=a_row.dtype)
        dd_acc = tl.sum(tl.zeros([BLOCK_L], dtype=a_row.dtype), axis=0)
        for i in range(0, n_chunks):
            c = n_chunks - 1 - i
            if c == 0:
                hstart = tl.load(h0_ptr + pid * NS + ns, mask=nmask, other=0.0)
            else:
                hstart = tl.load(ckpt_ptr + (pid * n_chunks + c - 1) * NS + ns, mask=nmask, other=0.0)
            ls = c * BLOCK_L + j
            lmask = ls < L
            m2 = lmask[:, None] & nmask[None, :]
            x = tl.load(u_ptr + row + ls, mask=lmask, other=0.0)
            step = tl.load(dt_ptr + row + ls, mask=lmask, other=0.0)
            off = bc + ns[None, :] * sB_n + ls[:, None].to(tl.int64) * sB_l
            Bv = tl.load(B_ptr + off, mask=m2, other=0.0)
            Cv = tl.load(C_ptr + off, mask=m2, other=0.0)
            dA = tl.exp(step[:, None] * a_row[None, :])
            P, Q = tl.associative_scan((dA, (step * x)[:, None] * Bv), 0, _combine)
            hs = P * hstart[None, :] + Q
            # previous states: the same scan on inputs shifted one step later (identity at the chunk start)
            lp = ls - 1
            pmask = lmask & (j > 0)
            xp = tl.load(u_ptr + row + lp, mask=pmask, other=0.0)
            sp = tl.load(dt_ptr + row + lp, mask=pmask, other=0.0)
            Bp = tl.load(B_ptr + bc + ns[None, :] * sB_n + lp[:, None].to(tl.int64) * sB_l,
                         mask=pmask[:, None] & nmask[None, :], other=0.0)  # fmt: skip
            Pp, Qp = tl.associative_scan((tl.exp(sp[:, None] * a_row[None, :]), (sp * xp)[:, None] * Bp), 0,
                                         _combine)  # fmt: skip
            hprev = Pp * hstart[None, :] + Qp
            # adjoint: dh_l = gy_l C_l + exp(dt_{l+1} A) dh_{l+1}; the chunk's last row takes the carry
            gy = tl.load(dy_ptr + row + ls, mask=lmask, other=0.0)
            ln = ls + 1
            nxt_mask = (ln < L) & (j < BLOCK_L - 1)
            sn = tl.load(dt_ptr + row + ln, mask=nxt_mask, other=0.0)
            coef = tl.exp(sn[:, None] * a_row[None, :])
            val = gy[:, None] * Cv + tl.where(j[:, None] == BLOCK_L - 1, carry[None, :], 0.0)
            _, dh = tl.associative_scan((coef, val), 0, _combine, reverse=True)
            t1 = dh * hprev * dA
            ddt = tl.sum(t1 * a_row[None, :] + dh * Bv * x[:, None], axis=1)
            dux = tl.sum(dh * Bv, axis=1)
            if k == 0:
                du = gy * skip + dux * step
            else:
                du = dux * step + tl.load(du_ptr + row + ls, mask=lmask, other=0.0)
                ddt += tl.load(ddt_ptr + row + ls, mask=lmask, other=0.0)
            tl.store(du_ptr + row + ls, du, mask=lmask)
            tl.store(ddt_ptr + row + ls, ddt, mask=lmask)
            da_acc += tl.sum(t1 * step[:, None], axis=0)
            dd_acc += tl.sum(gy * x, axis=0)
            tl.atomic_add(dB_ptr + off, dh * (step * x)[:, None], mask=m2, sem="relaxed")
            tl.atomic_add(dC_ptr + off, gy[:, None] * hs, mask=m2, sem="relaxed")
            carry = tl.sum(tl.where(j[:, None] == 0, dh * dA, 0.0), axis=0)
        tl.store(dh_ptr + pid * NS + ns, carry, mask=nmask)
        tl.store(dA_ptr + pid * NS + ns, da_acc, mask=nmask)
        if k == 0:
            tl.store(dD_ptr + pid, dd_acc)


_fwd = _tuned(_fwd_kernel)
_bwd = _tuned(_bwd_kernel, reset_to_zero=["dB_ptr", "dC_ptr"], restore_value=["dh_ptr"])


def _block_n(ns: int) -> int:
    return min(triton.next_power_of_2(ns), MAX_BLOCK_N)


def forward(u, dt, A, Bg, Cg, Dv, h0, y, last, ckpt, save):
    """Launch the forward. ``Bg``/``Cg`` are contiguous ``(batch, groups, state, length)``; ``u``, ``dt``, ``y``
    ``(batch, channels, length)`` and ``h0``, ``last`` ``(batch, channels, state)`` are contiguous."""
    bsz, dim, length = u.shape
    ns = A.shape[1]
    n_chunks = triton.cdiv(length, CHUNK)
    if bsz * dim == 0:
        return
    if length == 0:
        last.copy_(h0)
        return
    with _device_guard(u):
        _fwd[(bsz * dim,)](
            u, dt, A, Bg, Cg, Dv, h0, y, last, ckpt, dim, length, ns, dim // Bg.shape[1],
            Bg.stride(0), Bg.stride(1), Bg.stride(2), Bg.stride(3), n_chunks,
            SAVE=bool(save), BLOCK_L=CHUNK, BLOCK_N=_block_n(ns),
        )  # fmt: skip


def backward(u, dt, A, Bg, Cg, Dv, h0, ckpt, gy, du, ddt, dh0):
    """Launch the backward; ``dh0`` holds the final-state gradient on entry. Returns ``dA, dB, dC, dD``."""
    bsz, dim, length = u.shape
    ns = A.shape[1]
    n_chunks = triton.cdiv(length, CHUNK)
    dB = torch.zeros_like(Bg)
    dC = torch.zeros_like(Cg)
    dA_part = torch.zeros(bsz, dim, ns, dtype=u.dtype, device=u.device)
    dD_part = torch.zeros(bsz, dim, dtype=u.dtype, device=u.device)
    if bsz * dim and length:
        with _device_guard(u):
            _bwd[(bsz * dim,)](
                u, dt, A, Bg, Cg, Dv, h0, ckpt, gy, du, ddt, dA_part, dB, dC, dD_part, dh0,
                dim, length, ns, dim // Bg.shape[1],
                Bg.stride(0), Bg.stride(1), Bg.stride(2), Bg.stride(3), n_chunks,
                BLOCK_L=CHUNK, BLOCK_N=_block_n(ns),
            )  # fmt: skip
    else:
        du.zero_()
        ddt.zero_()
    return dA_part.sum(0), dB, dC, dD_part.sum(0)
