"""Mamba-2's structured state space duality (SSD) in its chunked matmul form, in pure torch.

Per head the state is a ``(headdim, state)`` matrix with a scalar decay: ``h_t = exp(dt_t A) h_{t-1} +
dt_t x_t B_t^T``, ``y_t = h_t C_t + D x_t``. The chunked form splits the sequence into chunks of ``chunk_size``:
inside a chunk the output is a masked (decay-weighted) attention-like matmul ``(C B^T * L) (dt x)``; across chunks
only the chunk-end states are carried by a short recurrence. Everything is torch ops, so autograd is free.
:func:`ssd_ref` is the sequential recurrence it must equal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._common import REAL_DTYPES, check_tensor
from ._numba.ssd_stages import numba_stage

__all__ = ["HOOK_POINTS", "ssd", "ssd_bmm", "ssd_chunk_cumsum", "ssd_chunk_scan", "ssd_chunk_state", "ssd_ref",
           "ssd_state_passing"]

HALF_DTYPES = (torch.float16, torch.bfloat16)


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


# --------------------------------------------------------------------------------------------------------------------
# The stages (state-spaces/mamba's SSD split, in torch): each takes and returns plain tensors, so a caller can
# quantise or inspect what flows between them (the ``hooks`` of :func:`ssd`).
# --------------------------------------------------------------------------------------------------------------------
#: the tensors :func:`ssd` offers to ``hooks``, in the order it makes them
HOOK_POINTS = ("x", "B", "C", "CB", "chunk_states", "states")


def _pad_len(t: torch.Tensor, pad: int, dim: int = 1) -> torch.Tensor:
    if not pad:
        return t
    widths = [0, 0] * (t.dim() - dim - 1) + [0, pad]
    return F.pad(t, widths)


def ssd_chunk_cumsum(dt, A, chunk_size, dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf)):
    """Stage 1: the step sizes and the cumulative log decay inside each chunk.

    Arguments:
        dt: ``(batch, length, heads)`` raw step sizes. A: ``(heads,)``.
        dt_bias: ``(heads,)`` or None; dt_softplus: apply softplus to ``dt + dt_bias``; dt_limit: clamp range.

    Returns:
        ``(dt, dA_cumsum)``, both ``(batch, heads, chunks, chunk_size)``; the tail past ``length`` has ``dt = 0``
        (it leaves the state unchanged).
    """
    bsz, length, heads = dt.shape
    q = int(chunk_size)
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = F.softplus(dt)
    lo, hi = dt_limit
    if lo > 0.0 or hi < math.inf:
        dt = dt.clamp(min=lo, max=hi)
    pad = (-length) % q
    dt = _pad_len(dt, pad).reshape(bsz, (length + pad) // q, q, heads).permute(0, 3, 1, 2)  # (b, h, c, q)
    return dt, torch.cumsum(dt * A[None, :, None, None], dim=-1)


def ssd_bmm(C, B, chunk_size, *, backend="torch"):
    """Stage 2: ``C_i . B_j`` inside each chunk, per group (heads of a group share it).

    Arguments:
        C, B: ``(batch, length, groups, state)``. backend: ``torch`` or ``numba`` (as for every stage below).

    Returns:
        ``(batch, chunks, groups, chunk_size, chunk_size)``.
    """
    if _numba(backend):
        return _on_numba("bmm", chunk_size, C, B)
    bsz, length, groups, state = B.shape
    q = int(chunk_size)
    pad = (-length) % q
    Bc = _pad_len(B, pad).reshape(bsz, -1, q, groups, state)
    Cc = _pad_len(C, pad).reshape(bsz, -1, q, groups, state)
    return torch.einsum("bcign,bcjgn->bcgij", Cc, Bc)


def _same_seq(seq_idx, chunk_size):
    """``(b, c, q, q)``: positions i, j of a chunk belong to the same packed sequence (seq_idx padded with -1)."""
    bsz, length = seq_idx.shape
    pad = (-length) % chunk_size
    s = F.pad(seq_idx, (0, pad), value=-1).reshape(bsz, -1, chunk_size)
    return s, s[..., :, None] == s[..., None, :]


def ssd_chunk_state(B, x, dt, dA_cumsum, seq_idx=None, *, backend="torch"):
    """Stage 3: the state each chunk leaves at its end, starting from zero.

    Arguments:
        B: ``(batch, length, groups, state)``; x: ``(batch, length, heads, headdim)``; dt, dA_cumsum: from stage 1.
        seq_idx: ``(batch, length)`` packed-sequence index, or None: positions of an earlier sequence than the
            chunk's last position do not reach its end state.

    Returns:
        ``(batch, chunks, heads, headdim, state)``.
    """
    if _numba(backend, seq_idx):
        return _on_numba("chunk_state", dt.shape[-1], B, x, dt, dA_cumsum)
    bsz, length, heads, headdim = x.shape
    groups, q = B.shape[2], dt.shape[-1]
    pad = (-length) % q
    xc = _pad_len(x, pad).reshape(bsz, -1, q, heads, headdim)
    Bh = _pad_len(B, pad).reshape(bsz, -1, q, groups, B.shape[3]).repeat_interleave(heads // groups, dim=3)
    to_end = torch.exp(dA_cumsum[..., -1:] - dA_cumsum) * dt  # (b, h, c, q)
    if seq_idx is not None:
        s, _ = _same_seq(seq_idx, q)
        valid_last = (s >= 0).sum(-1, keepdim=True) - 1  # the last real position (padding is -1)
        last = torch.gather(s, -1, valid_last.clamp(min=0))
        to_end = to_end * (s == last)[:, None].to(to_end.dtype)
    return torch.einsum("bcjhn,bhcj,bcjhp->bchpn", Bh, to_end, xc)


def ssd_state_passing(chunk_states, dA_cumsum, initial_states=None, seq_idx=None, chunk_size=None, *,
                      backend="torch"):
    """Stage 4: carry the states across chunks (a short recurrence over the chunks).

    Arguments:
        chunk_states: ``(batch, chunks, heads, headdim, state)`` from stage 3; dA_cumsum: from stage 1.
        initial_states: ``(batch, heads, headdim, state)`` or None (zeros).
        seq_idx, chunk_size: packed sequences: a chunk in which a new sequence starts does not pass on the state
            that entered it.

    Returns:
        ``(states, final)``: the state entering each chunk ``(batch, chunks, heads, headdim, state)`` and the final
        state ``(batch, heads, headdim, state)``.
    """
    if _numba(backend, seq_idx):
        return _on_numba("state_passing", dA_cumsum.shape[-1], chunk_states, dA_cumsum, initial_states)
    bsz, n_c, heads, headdim, state = chunk_states.shape
    h = (chunk_states.new_zeros(bsz, heads, headdim, state) if initial_states is None
         else initial_states.to(chunk_states.dtype))
    decay = torch.exp(dA_cumsum[..., -1])  # (b, h, c)
    if seq_idx is not None:
        s, _ = _same_seq(seq_idx, chunk_size)
        first = s[..., 0]
        valid_last = (s >= 0).sum(-1) - 1
        last = torch.gather(s, -1, valid_last.clamp(min=0)[..., None])[..., 0]
        prev_last = torch.cat([first[:, :1], last[:, :-1]], dim=1)  # the sequence that ran into each chunk
        keep = (last == prev_last).to(decay.dtype)  # no boundary inside the chunk (or at its start)
        decay = decay * keep[:, None, :]
    starts = []
    for c in range(n_c):
        starts.append(h)
        h = decay[:, :, c, None, None] * h + chunk_states[:, c]
    states = torch.stack(starts, dim=1) if starts else chunk_states
    return states, h


def ssd_chunk_scan(CB, x, dt, dA_cumsum, C, states, D=None, z=None, seq_idx=None, *, backend="torch"):
    """Stage 5: the outputs: the masked intra-chunk product plus what the entering state gives, then D and z.

    Arguments:
        CB: ``(batch, chunks, groups, q, q)`` (stage 2); x: ``(batch, length, heads, headdim)``; dt, dA_cumsum:
            stage 1; C: ``(batch, length, groups, state)``; states: entering states (stage 4).
        D: ``(heads,)`` or ``(heads, headdim)``; z: ``(batch, length, heads, headdim)`` gate, or None.
        seq_idx: packed sequences: no position sees an earlier sequence.

    Returns:
        ``(batch, length, heads, headdim)``.
    """
    if _numba(backend, seq_idx):
        y = _on_numba("chunk_scan", dt.shape[-1], CB, x, dt, dA_cumsum, C, states) + _skip(x, D)
        return y if z is None else y * F.silu(z)
    bsz, length, heads, headdim = x.shape
    groups, q = C.shape[2], dt.shape[-1]
    rep = heads // groups
    pad = (-length) % q
    xc = _pad_len(x, pad).reshape(bsz, -1, q, heads, headdim)
    Cc = _pad_len(C, pad).reshape(bsz, -1, q, groups, C.shape[3])
    decay = torch.exp(_segsum_from_cumsum(dA_cumsum))  # (b, h, c, q, q): exp(a_{j+1} + ... + a_i), 0 above
    from_start = torch.exp(dA_cumsum)  # (b, h, c, q)
    if seq_idx is not None:
        s, same = _same_seq(seq_idx, q)
        decay = decay * same[:, None].to(decay.dtype)
        valid_first = s[..., :1]
        # the state entering a chunk belongs to the sequence that ran into it: seen only by that sequence's positions
        ran_in = torch.cat([s[:, :1, :1], s[:, :-1, -1:]], dim=1)
        ran_in = torch.where(ran_in < 0, valid_first, ran_in)
        from_start = from_start * (s == ran_in)[:, None].to(from_start.dtype)
    scores = CB.repeat_interleave(rep, dim=2).permute(0, 2, 1, 3, 4) * decay  # (b, h, c, q, q)
    y = torch.einsum("bhcij,bhcj,bcjhp->bcihp", scores, dt, xc)
    Ch = Cc.repeat_interleave(rep, dim=3)  # (b, c, q, h, n)
    y = y + torch.einsum("bcihn,bchpn,bhci->bcihp", Ch, states, from_start)
    y = y.reshape(bsz, -1, heads, headdim)[:, :length] + _skip(x, D)
    if z is not None:
        y = y * F.silu(z)
    return y


def _numba(backend: str, seq_idx=None) -> bool:
    """Whether a stage runs on the Numba kernels (``backend`` checked; packed sequences are torch-only)."""
    if backend not in ("torch", "numba"):
        raise ValueError(f"backend={backend!r} is not allowed for an SSD stage; allowed: 'torch', 'numba'")
    if backend == "numba" and seq_idx is not None:
        raise ValueError("seq_idx is not supported by backend='numba' for ssd yet; allowed backends: 'torch'")
    return backend == "numba"


def _on_numba(name: str, q: int, *tensors):
    """Stage ``name`` on the Numba kernels, forward and backward (:mod:`kernels._numba.ssd_stages`)."""
    return numba_stage(name, q, *tensors)


def _segsum_from_cumsum(a_cum: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = a_cum[i] - a_cum[j]`` for ``i >= j``, ``-inf`` above the diagonal."""
    q = a_cum.shape[-1]
    diff = a_cum[..., :, None] - a_cum[..., None, :]
    keep = torch.tril(torch.ones(q, q, dtype=torch.bool, device=a_cum.device))
    return diff.masked_fill(~keep, float("-inf"))


def ssd(x, dt, A, B, C, chunk_size, D=None, initial_states=None, return_final_states=False, *, z=None,
        dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf), seq_idx=None, hooks=None, backend="auto"):
    """Chunked SSD (Mamba-2) in stages, equal to :func:`ssd_ref`.

    Arguments:
        x: ``(batch, length, heads, headdim)`` input.
        dt: ``(batch, length, heads)`` step sizes (raw when ``dt_bias``/``dt_softplus`` are given).
        A: ``(heads,)`` scalar decay rate per head (negative for a decaying state).
        B, C: ``(batch, length, groups, state)``; heads are split evenly over the groups.
        chunk_size: chunk length; ``length`` need not be a multiple of it (the tail is padded with ``dt = 0``).
        D: ``(heads,)`` or ``(heads, headdim)`` skip weight, or None.
        initial_states: ``(batch, heads, headdim, state)``, or None (zeros).
        return_final_states: also return the final state.
        z: ``(batch, length, heads, headdim)`` gate: ``y = (C h + D x) * silu(z)``, or None.
        dt_bias, dt_softplus, dt_limit: ``dt <- clamp(softplus(dt + dt_bias), *dt_limit)``.
        seq_idx: ``(batch, length)`` integer index of packed sequences (non-decreasing); the state resets to zero
            where it changes (the initial state belongs to the first sequence).
        hooks: ``{point: fn}`` applied to the tensor at each point of :data:`HOOK_POINTS` (``x``, ``B``, ``C``, the
            group products ``CB``, the ``chunk_states`` and the entering ``states``), e.g. to quantise them.
        backend: ``torch`` (the stages as torch ops), ``numba`` (stages 2-5 on Numba kernels, forward and
            backward; no ``seq_idx``) or ``auto`` (``torch``: see :mod:`kernels._numba.ssd_stages`).

    Returns:
        ``y`` ``(batch, length, heads, headdim)`` in x's dtype (float16/bfloat16 are computed in float32), and the
        final state ``(batch, heads, headdim, state)`` if ``return_final_states``. A NaN in ``x`` at step ``t``
        makes that channel NaN from ``t`` on, and also at the earlier steps of ``t``'s chunk (the masked intra-chunk
        matmul multiplies it by zero).
    """
    if backend not in ("auto", "torch", "numba"):
        raise ValueError(f"backend={backend!r} is not allowed for ssd; allowed: 'auto', 'torch', 'numba'")
    stage = "torch" if backend == "auto" else backend
    out_dtype = x.dtype
    if out_dtype in HALF_DTYPES:
        x, dt, A, B, C, D, initial_states, z, dt_bias = (
            None if t is None else t.float() for t in (x, dt, A, B, C, D, initial_states, z, dt_bias))
    bsz, length, heads, headdim, groups, state = _check(x, dt, A, B, C, D, initial_states)
    if isinstance(chunk_size, bool) or int(chunk_size) < 1:
        raise ValueError(f"chunk_size={chunk_size!r} is not allowed; allowed: a positive integer")
    if z is not None and tuple(z.shape) != tuple(x.shape):
        raise ValueError(f"z has shape {tuple(z.shape)}; x's shape {tuple(x.shape)} is required")
    if seq_idx is not None and (tuple(seq_idx.shape) != (bsz, length) or seq_idx.dtype.is_floating_point):
        raise ValueError(f"seq_idx must be an integer tensor of shape {(bsz, length)}; got "
                         f"{tuple(seq_idx.shape)} {seq_idx.dtype}")
    unknown = set(hooks or ()) - set(HOOK_POINTS)
    if unknown:
        raise ValueError(f"hooks={sorted(unknown)!r} is not allowed; allowed points: {', '.join(HOOK_POINTS)}")
    hook = (lambda name, t: hooks[name](t) if name in hooks else t) if hooks else (lambda name, t: t)
    q = int(chunk_size)
    x, B, C = hook("x", x), hook("B", B), hook("C", C)
    dtc, dA_cumsum = ssd_chunk_cumsum(dt, A, q, dt_bias, dt_softplus, dt_limit)
    CB = hook("CB", ssd_bmm(C, B, q, backend=stage))
    chunk_states = hook("chunk_states", ssd_chunk_state(B, x, dtc, dA_cumsum, seq_idx, backend=stage))
    states, final = ssd_state_passing(chunk_states, dA_cumsum, initial_states, seq_idx, q, backend=stage)
    states = hook("states", states)
    y = ssd_chunk_scan(CB, x, dtc, dA_cumsum, C, states, D, z, seq_idx, backend=stage).to(out_dtype)
    if return_final_states:
        return y, final.to(out_dtype)
    return y


def ssd_ref(x, dt, A, B, C, D=None, initial_states=None, return_final_states=False, *, z=None, dt_bias=None,
            dt_softplus=False, dt_limit=(0.0, math.inf), seq_idx=None):
    """Sequential SSD recurrence (the definition :func:`ssd` must equal).

    Arguments:
        x: ``(batch, length, heads, headdim)``.
        dt: ``(batch, length, heads)``.
        A: ``(heads,)``.
        B, C: ``(batch, length, groups, state)``.
        D: ``(heads,)`` or ``(heads, headdim)``, or None.
        initial_states: ``(batch, heads, headdim, state)``, or None.
        return_final_states: also return the final state.
        z, dt_bias, dt_softplus, dt_limit, seq_idx: as for :func:`ssd`.

    Returns:
        ``y`` ``(batch, length, heads, headdim)`` with ``h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T`` (``h`` reset
        to zero where ``seq_idx`` changes), ``y_t = (h_t C_t + D x_t) * silu(z_t)``; and the final state if asked.
    """
    bsz, length, heads, headdim, groups, state = _check(x, dt, A, B, C, D, initial_states)
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = F.softplus(dt)
    dt = dt.clamp(min=dt_limit[0], max=dt_limit[1]) if (dt_limit[0] > 0 or dt_limit[1] < math.inf) else dt
    rep = heads // groups
    Bh = B.repeat_interleave(rep, dim=2)  # (b, l, heads, n)
    Ch = C.repeat_interleave(rep, dim=2)
    h = (
        torch.zeros(bsz, heads, headdim, state, dtype=x.dtype, device=x.device)
        if initial_states is None
        else initial_states
    )
    ys = []
    for t in range(length):
        if seq_idx is not None and t > 0:
            same = (seq_idx[:, t] == seq_idx[:, t - 1]).to(x.dtype)[:, None, None, None]
            h = h * same
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]  # (b, heads, 1, 1)
        h = decay * h + (dt[:, t, :, None] * x[:, t])[..., None] * Bh[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", h, Ch[:, t]))
    y = torch.stack(ys, dim=1) if ys else x * 0
    y = y + _skip(x, D)
    if z is not None:
        y = y * F.silu(z)
    return (y, h) if return_final_states else y
