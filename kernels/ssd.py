"""Mamba-2's structured state space duality (SSD) in its chunked matmul form, in pure torch.

Per head the state is a ``(headdim, state)`` matrix with a scalar decay: ``h_t = exp(dt_t A) h_{t-1} +
dt_t x_t B_t^T``, ``y_t = h_t C_t + D x_t``. The chunked form splits the sequence into chunks of ``chunk_size``:
inside a chunk the output is a masked (decay-weighted) attention-like matmul ``(C B^T * L) (dt x)``; across chunks
only the chunk-end states are carried by a short recurrence. Everything is torch ops, so autograd is free.
:func:`ssd_ref` is the sequential recurrence it must equal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._common import REAL_DTYPES, check_tensor

__all__ = ["ssd", "ssd_ref"]


def _check(x, dt, A, B, C, D, initial_states):
    check_tensor("x", x, REAL_DTYPES)
    if x.dim() != 4:
        raise ValueError(f"x must be (batch, length, heads, headdim); got shape {tuple(x.shape)}")
    bsz, length, heads, headdim = x.shape
    for name, t in {"dt": dt, "A": A, "B": B, "C": C, "D": D, "initial_states": initial_states}.items():
        if t is None:
            continue
        check_tensor(name, t, REAL_DTYPES)
        if t.dtype != x.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but x has dtype {x.dtype}; they must match")
        if t.device != x.device:
            raise ValueError(
                f"{name} is on {t.device} but x is on {x.device} "
                f"({name} shape {tuple(t.shape)}, x shape {tuple(x.shape)})"
            )
    if tuple(dt.shape) != (bsz, length, heads):
        raise ValueError(
            f"dt has shape {tuple(dt.shape)} but {(bsz, length, heads)} is required (x shape {tuple(x.shape)})"
        )
    if tuple(A.shape) != (heads,):
        raise ValueError(f"A has shape {tuple(A.shape)} but ({heads},) is required (x shape {tuple(x.shape)})")
    if B.dim() != 4 or B.shape[:2] != (bsz, length) or B.shape[2] == 0 or heads % B.shape[2]:
        raise ValueError(
            f"B has shape {tuple(B.shape)}; (batch, length, groups, state) with groups dividing {heads} heads "
            f"is required (x shape {tuple(x.shape)})"
        )
    if tuple(C.shape) != tuple(B.shape):
        raise ValueError(f"C has shape {tuple(C.shape)} but B has shape {tuple(B.shape)}; they must match")
    state = B.shape[3]
    if D is not None and tuple(D.shape) not in ((heads,), (heads, headdim)):
        raise ValueError(f"D has shape {tuple(D.shape)}; ({heads},) or ({heads}, {headdim}) is required")
    if initial_states is not None and tuple(initial_states.shape) != (bsz, heads, headdim, state):
        raise ValueError(
            f"initial_states has shape {tuple(initial_states.shape)} but {(bsz, heads, headdim, state)} is required"
        )
    return bsz, length, heads, headdim, B.shape[2], state


def _skip(x, D):
    if D is None:
        return 0
    return x * (D[:, None] if D.dim() == 1 else D)


def _segsum(v: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = v[..., j+1] + ... + v[..., i]`` for ``i >= j``, ``-inf`` above the diagonal.

    Built from a masked cumulative sum (not a difference of prefix sums) so long chunks do not lose precision.
    """
    q = v.shape[-1]
    rep = v[..., None].expand(*v.shape, q)  # rep[..., i, j] = v[..., i]
    below = torch.tril(torch.ones(q, q, dtype=torch.bool, device=v.device), diagonal=-1)
    rep = rep.masked_fill(~below, 0)
    out = torch.cumsum(rep, dim=-2)
    keep = torch.tril(torch.ones(q, q, dtype=torch.bool, device=v.device), diagonal=0)
    return out.masked_fill(~keep, float("-inf"))


def ssd(x, dt, A, B, C, chunk_size, D=None, initial_states=None, return_final_states=False):
    """Chunked SSD (Mamba-2), equal to :func:`ssd_ref`.

    Arguments:
        x: ``(batch, length, heads, headdim)`` input.
        dt: ``(batch, length, heads)`` step sizes (already positive: apply softplus/bias before).
        A: ``(heads,)`` scalar decay rate per head (negative for a decaying state).
        B, C: ``(batch, length, groups, state)``; heads are split evenly over the groups.
        chunk_size: chunk length; ``length`` need not be a multiple of it (the tail is padded with ``dt = 0``,
            which leaves the state unchanged).
        D: ``(heads,)`` or ``(heads, headdim)`` skip weight, or None.
        initial_states: ``(batch, heads, headdim, state)``, or None (zeros).
        return_final_states: also return the final state.

    Returns:
        ``y`` ``(batch, length, heads, headdim)``, and the final state ``(batch, heads, headdim, state)`` if
        ``return_final_states``. A NaN in ``x`` at step ``t`` makes that channel NaN from ``t`` on, and also at the
        earlier steps of ``t``'s chunk (the masked intra-chunk matmul multiplies it by zero).
    """
    bsz, length, heads, headdim, groups, state = _check(x, dt, A, B, C, D, initial_states)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer; got {chunk_size}")
    q = int(chunk_size)
    pad = (-length) % q
    xp, dtp, Bp, Cp = x, dt, B, C
    if pad:
        xp = F.pad(x, (0, 0, 0, 0, 0, pad))
        dtp = F.pad(dt, (0, 0, 0, pad))
        Bp = F.pad(B, (0, 0, 0, 0, 0, pad))
        Cp = F.pad(C, (0, 0, 0, 0, 0, pad))
    n_c = (length + pad) // q
    rep = heads // groups
    # (batch, chunks, q, groups, rep, ...) so that heads = groups * rep and B/C broadcast over rep
    xc = (xp * dtp[..., None]).reshape(bsz, n_c, q, groups, rep, headdim)
    Bc = Bp.reshape(bsz, n_c, q, groups, state)
    Cc = Cp.reshape(bsz, n_c, q, groups, state)
    a = (dtp * A).reshape(bsz, n_c, q, groups, rep).permute(0, 3, 4, 1, 2)  # (b, g, r, c, q)
    a_cum = torch.cumsum(a, dim=-1)

    # 1. inside each chunk: y = (C B^T * L) (dt x), L[i, j] = exp(a_{j+1} + ... + a_i)
    decay = torch.exp(_segsum(a))  # (b, g, r, c, q, q)
    scores = torch.einsum("bcign,bcjgn->bgcij", Cc, Bc)  # (b, g, c, q, q)
    y_diag = torch.einsum("bgcij,bgrcij,bcjgrp->bcigrp", scores, decay, xc)

    # 2. state contributed by each chunk at its end
    to_end = torch.exp(a_cum[..., -1:] - a_cum)  # (b, g, r, c, q)
    chunk_states = torch.einsum("bcjgn,bgrcj,bcjgrp->bcgrpn", Bc, to_end, xc)

    # 3. carry the states across chunks (a short sequential recurrence over n_c chunks)
    h = (
        torch.zeros(bsz, groups, rep, headdim, state, dtype=x.dtype, device=x.device)
        if initial_states is None
        else initial_states.reshape(bsz, groups, rep, headdim, state)
    )
    chunk_decay = torch.exp(a_cum[..., -1])  # (b, g, r, c)
    starts = []
    for c in range(n_c):
        starts.append(h)
        h = chunk_decay[..., c, None, None] * h + chunk_states[:, c]
    prev = torch.stack(starts, dim=1) if starts else chunk_states  # (b, c, g, r, p, n): state entering each chunk

    # 4. output from the state entering the chunk
    from_start = torch.exp(a_cum)  # (b, g, r, c, q)
    y_off = torch.einsum("bcign,bcgrpn,bgrci->bcigrp", Cc, prev, from_start)

    y = (y_diag + y_off).reshape(bsz, n_c * q, heads, headdim)[:, :length]
    y = y + _skip(x, D)
    if return_final_states:
        return y, h.reshape(bsz, heads, headdim, state)
    return y


def ssd_ref(x, dt, A, B, C, D=None, initial_states=None, return_final_states=False):
    """Sequential SSD recurrence (the definition :func:`ssd` must equal).

    Arguments:
        x: ``(batch, length, heads, headdim)``.
        dt: ``(batch, length, heads)``.
        A: ``(heads,)``.
        B, C: ``(batch, length, groups, state)``.
        D: ``(heads,)`` or ``(heads, headdim)``, or None.
        initial_states: ``(batch, heads, headdim, state)``, or None.
        return_final_states: also return the final state.

    Returns:
        ``y`` ``(batch, length, heads, headdim)`` with ``h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T``,
        ``y_t = h_t C_t + D x_t``; and the final state if asked.
    """
    bsz, length, heads, headdim, groups, state = _check(x, dt, A, B, C, D, initial_states)
    rep = heads // groups
    Bh = B.repeat_interleave(rep, dim=2)  # (b, l, heads, n)
    Ch = C.repeat_interleave(rep, dim=2)
    h = (
        torch.zeros(bsz, heads, headdim, state, dtype=x.dtype, device=x.device)
        if initial_states is None
        else initial_states
    )
    ys = []
    # unbind (not indexing) so that autograd stacks the per-step gradients once
    for x_t, dt_t, b_t, c_t in zip(x.unbind(1), dt.unbind(1), Bh.unbind(1), Ch.unbind(1)):
        decay = torch.exp(dt_t * A)[:, :, None, None]  # (b, heads, 1, 1)
        h = decay * h + (dt_t[:, :, None] * x_t)[..., None] * b_t[:, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", h, c_t))
    y = torch.stack(ys, dim=1) if ys else x * 0
    y = y + _skip(x, D)
    return (y, h) if return_final_states else y
