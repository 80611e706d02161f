"""SSD's chunk stages on the Numba kernels of :mod:`kernels._numba.ssd` (``backend="numba"`` of :func:`kernels.ssd`
and its stage functions).

Each stage is an autograd function: the forward runs the Numba kernel; the backward recomputes that stage on torch
ops under autograd and differentiates it (the stages are small next to the model around them, and the gradient is
then exactly the torch path's). The caller hands in that torch form of the stage (``torch_stage``), so this module
needs nothing from :mod:`kernels.ssd`, which imports it. Packed sequences (``seq_idx``) are served by the torch path
only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["numba_stage"]


def _pad_chunks(t: torch.Tensor, q: int) -> torch.Tensor:
    """``(batch, length, ...)`` -> contiguous ``(batch, chunks, q, ...)``, the tail padded with zeros."""
    pad = (-t.shape[1]) % q
    if pad:
        t = F.pad(t, [0, 0] * (t.dim() - 2) + [0, pad])
    return t.reshape(t.shape[0], -1, q, *t.shape[2:]).contiguous()


def _np(t: torch.Tensor):
    return t.detach().contiguous().numpy()


def _bmm(q, C, B):
    from . import ssd as nk

    Bc, Cc = _pad_chunks(B, q), _pad_chunks(C, q)
    bsz, n_c, _, groups, _ = Bc.shape
    out = torch.empty(bsz, n_c, groups, q, q, dtype=B.dtype)
    nk.ssd_bmm(_np(Cc), _np(Bc), out.numpy())
    return out


def _chunk_state(q, B, x, dt, cum):
    from . import ssd as nk

    xc, Bc = _pad_chunks(x, q), _pad_chunks(B, q)
    bsz, n_c, _, heads, headdim = xc.shape
    out = torch.empty(bsz, n_c, heads, headdim, B.shape[3], dtype=x.dtype)
    nk.ssd_chunk_state(_np(Bc), _np(xc), _np(dt), _np(cum), out.numpy())
    return out


def _state_passing(q, chunk_states, cum, h0):
    from . import ssd as nk

    bsz, n_c, heads, headdim, state = chunk_states.shape
    h0 = chunk_states.new_zeros(bsz, heads, headdim, state) if h0 is None else h0
    states = torch.empty_like(chunk_states)
    final = torch.empty(bsz, heads, headdim, state, dtype=chunk_states.dtype)
    nk.ssd_state_passing(_np(chunk_states), _np(cum), _np(h0.to(chunk_states.dtype)), states.numpy(),
                         final.numpy())
    return states, final


def _chunk_scan(q, CB, x, dt, cum, C, states):
    from . import ssd as nk

    xc, Cc = _pad_chunks(x, q), _pad_chunks(C, q)
    out = torch.empty_like(xc)
    nk.ssd_chunk_scan(_np(CB), _np(xc), _np(dt), _np(cum), _np(Cc), _np(states), out.numpy())
    return out.reshape(x.shape[0], -1, *x.shape[2:])[:, : x.shape[1]]


_NUMBA = {"bmm": _bmm, "chunk_state": _chunk_state, "state_passing": _state_passing, "chunk_scan": _chunk_scan}


class _Stage(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, q, torch_stage, *tensors):
        ctx.name, ctx.q, ctx.torch_stage = name, q, torch_stage
        ctx.save_for_backward(*tensors)
        return _NUMBA[name](q, *tensors)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        need = ctx.needs_input_grad[3:]
        with torch.enable_grad():
            ins = [None if t is None else t.detach().requires_grad_(bool(n)) for t, n in zip(saved, need)]
            out = ctx.torch_stage(ctx.q, *ins)
            outs = out if isinstance(out, tuple) else (out,)
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
            wrt = [t for t, n in zip(ins, need) if n and t is not None]
            gs = (torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                  if pairs and wrt else [None] * len(wrt))
        it = iter(gs)
        return (None, None, None, *[next(it) if n and t is not None else None for t, n in zip(saved, need)])


def numba_stage(name: str, q: int, torch_stage, *tensors):
    """Run stage ``name`` (``bmm``, ``chunk_state``, ``state_passing``, ``chunk_scan``) on the Numba kernels;
    differentiable: the backward differentiates ``torch_stage(q, *tensors)``, the same stage on torch ops."""
    for t in tensors:
        if t is not None and t.device.type != "cpu":
            raise ValueError(f"backend 'numba' runs on CPU tensors only; got a tensor on {t.device} "
                             "(use backend 'torch')")
    return _Stage.apply(name, int(q), torch_stage, *tensors)
