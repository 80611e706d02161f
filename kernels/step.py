"""Step forms of the scans, for inference one token at a time (the decode path).

Each equals its parallel form token by token after a prefill (the tests check it):

* :func:`linear_scan_step`: ``h <- a * h + b`` (:func:`kernels.linear_scan`).
* :func:`selective_state_update`: Mamba-1's selective scan for one token, and the Mamba-2 head form, with
  state-spaces/mamba's semantics: the state is updated **in place** and the output returned
  (:func:`kernels.selective_scan`).
* :func:`ssd_step`: Mamba-2's SSD for one token, scalar decay per head (:func:`kernels.ssd`); returns the output and
  the new state.
* :func:`kernels.delta_rule_step` (in :mod:`kernels.delta_rule`): the delta rule.

Half-precision inputs are computed in float32; outputs come back in the input's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["linear_scan_step", "selective_state_update", "ssd_step"]


def linear_scan_step(h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One step of ``h_t = a_t h_{t-1} + b_t``.

    Arguments:
        h: the state ``(...)``; a, b: this step's coefficients and input, broadcastable to ``h``.

    Returns:
        the new state, ``h``'s shape.
    """
    return a * h + b


def _work(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False):
    """One token of the selective scan; updates ``state`` in place and returns the output.

    Two layouts, as in state-spaces/mamba:

    * Mamba-1: state ``(batch, dim, dstate)``; x, dt, z ``(batch, dim)``; A ``(dim, dstate)``; B, C
      ``(batch, dstate)``; D, dt_bias ``(dim,)``.
    * Mamba-2 heads: state ``(batch, nheads, headdim, dstate)``; x, dt, z ``(batch, nheads, headdim)``; A
      ``(nheads, headdim, dstate)``; B, C ``(batch, ngroups, dstate)`` (heads split evenly over groups); D, dt_bias
      ``(nheads, headdim)``.

    ``dt <- softplus(dt + dt_bias)`` (bias and softplus optional), ``state <- exp(dt A) state + dt B x``,
    ``out = state . C + D x``, then ``out *= silu(z)``.

    Returns:
        out, ``x``'s shape and dtype.
    """
    heads = state.dim() == 4
    if not heads and state.dim() != 3:
        raise ValueError(f"state has shape {tuple(state.shape)}; (batch, dim, dstate) or "
                         "(batch, nheads, headdim, dstate) is required")
    if tuple(x.shape) != tuple(state.shape[:-1]) or tuple(dt.shape) != tuple(x.shape):
        raise ValueError(f"x {tuple(x.shape)} and dt {tuple(dt.shape)} must both be {tuple(state.shape[:-1])}")
    if tuple(A.shape) != tuple(state.shape[1:]):
        raise ValueError(f"A has shape {tuple(A.shape)}; {tuple(state.shape[1:])} is required")
    dstate = state.shape[-1]
    if heads:
        nheads, groups = state.shape[1], B.shape[1] if B.dim() == 3 else 0
        if B.dim() != 3 or B.shape[-1] != dstate or groups == 0 or nheads % groups:
            raise ValueError(f"B has shape {tuple(B.shape)}; (batch, ngroups, {dstate}) with ngroups dividing "
                             f"{nheads} heads is required")
    elif tuple(B.shape) != (state.shape[0], dstate):
        raise ValueError(f"B has shape {tuple(B.shape)}; {(state.shape[0], dstate)} is required")
    if C.shape != B.shape:
        raise ValueError(f"C has shape {tuple(C.shape)} but B has {tuple(B.shape)}; they must match")
    s = _work(state)
    xw, dtw, Aw, Bw, Cw = _work(x), _work(dt), _work(A), _work(B), _work(C)
    if dt_bias is not None:
        dtw = dtw + _work(dt_bias)
    if dt_softplus:
        dtw = F.softplus(dtw)
    if heads:
        rep = state.shape[1] // Bw.shape[1]
        Bw = Bw.repeat_interleave(rep, dim=1)[:, :, None, :]  # (batch, nheads, 1, dstate)
        Cw = Cw.repeat_interleave(rep, dim=1)[:, :, None, :]
    else:
        Bw, Cw = Bw[:, None, :], Cw[:, None, :]  # (batch, 1, dstate)
    new = torch.exp(dtw[..., None] * Aw) * s + (dtw * xw)[..., None] * Bw
    state.copy_(new.to(state.dtype))
    out = (new * Cw).sum(-1)
    if D is not None:
        out = out + xw * _work(D)
    if z is not None:
        out = out * F.silu(_work(z))
    return out.to(x.dtype)


def ssd_step(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False):
    """One token of Mamba-2's SSD: a scalar decay per head.

    Arguments:
        state: ``(batch, heads, headdim, dstate)``.
        x: ``(batch, heads, headdim)``; dt: ``(batch, heads)``; A: ``(heads,)``.
        B, C: ``(batch, groups, dstate)``; D: ``(heads,)`` or ``(heads, headdim)``; z: like x; dt_bias: ``(heads,)``.

    Returns:
        ``(y, new_state)``: y like x (``y = state . C + D x``, times ``silu(z)`` if given), the new state.
    """
    if state.dim() != 4 or tuple(x.shape) != tuple(state.shape[:3]):
        raise ValueError(f"state {tuple(state.shape)} and x {tuple(x.shape)}: (batch, heads, headdim, dstate) and "
                         "(batch, heads, headdim) are required")
    bsz, heads, headdim, dstate = state.shape
    if tuple(dt.shape) != (bsz, heads) or tuple(A.shape) != (heads,):
        raise ValueError(f"dt {tuple(dt.shape)} and A {tuple(A.shape)}: {(bsz, heads)} and {(heads,)} are required")
    dtw = _work(dt) + (0 if dt_bias is None else _work(dt_bias))
    if dt_softplus:
        dtw = F.softplus(dtw)
    Dw = None
    if D is not None:
        Dw = _work(D)[:, None].expand(heads, headdim) if D.dim() == 1 else _work(D)
    new = _work(state).clone()
    y = selective_state_update(new, x, dtw[..., None].expand(bsz, heads, headdim).contiguous(),
                               _work(A)[:, None, None].expand(heads, headdim, dstate), B, C, D=Dw, z=z)
    return y, new.to(state.dtype)
