"""SSD's chunk stages on the Numba kernels of :mod:`kernels._numba.ssd` (``backend="numba"`` of :func:`kernels.ssd`
and its stage functions).

Each stage is an autograd function: the forward runs the Numba kernel, the backward the stage's gradient written
out as Numba kernels (:mod:`kernels._numba.ssd_backward`: nothing is recomputed; the state passing saves the
entering states it returned, the other stages only their inputs). An earlier backward recomputed each stage on torch
ops and differentiated it: forward+backward was then 0.75-0.85x the torch stages' (1 thread). The tests compare
these gradients with the torch stages' autograd and with gradcheck. Packed sequences (``seq_idx``) are served by the
torch path only.
"""

from __future__ import annotations

from types import SimpleNamespace

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


def _grad(g, like: torch.Tensor, q: int | None = None):
    """An output's gradient as a contiguous array (zeros where autograd passes None), chunk-padded when ``q``."""
    g = torch.zeros(like.shape, dtype=like.dtype) if g is None else g
    return _pad_chunks(g, q) if q else g.contiguous()


def _unpad(t: torch.Tensor, length: int) -> torch.Tensor:
    """``(batch, chunks, q, ...)`` -> ``(batch, length, ...)``."""
    return t.reshape(t.shape[0], -1, *t.shape[3:])[:, :length]


def _bmm_backward(q, saved, outs, grads):
    from . import ssd_backward as nk

    C, B = saved
    Bc, Cc = _pad_chunks(B, q), _pad_chunks(C, q)
    dC, dB = torch.empty_like(Cc), torch.empty_like(Bc)
    nk.ssd_bmm_backward(_np(Cc), _np(Bc), _np(_grad(grads[0], outs[0])), dC.numpy(), dB.numpy())
    return _unpad(dC, C.shape[1]), _unpad(dB, B.shape[1])


def _chunk_state_backward(q, saved, outs, grads):
    from . import ssd_backward as nk

    B, x, dt, cum = saved
    xc, Bc = _pad_chunks(x, q), _pad_chunks(B, q)
    dB, dx = torch.empty_like(Bc), torch.empty_like(xc)
    ddt, dcum = torch.empty_like(cum), torch.empty_like(cum)
    nk.ssd_chunk_state_backward(_np(Bc), _np(xc), _np(dt), _np(cum), _np(_grad(grads[0], outs[0])), dB.numpy(),
                                dx.numpy(), ddt.numpy(), dcum.numpy())
    return _unpad(dB, B.shape[1]), _unpad(dx, x.shape[1]), ddt.to(dt.dtype), dcum


def _state_passing_backward(q, saved, outs, grads):
    from . import ssd_backward as nk

    chunk_states, cum, h0 = saved
    states, final = outs
    dcs = torch.empty_like(chunk_states)
    dcum = torch.zeros_like(cum, dtype=chunk_states.dtype)
    dh0 = torch.empty_like(final)
    nk.ssd_state_passing_backward(_np(states), _np(cum), _np(_grad(grads[0], states)), _np(_grad(grads[1], final)),
                                  dcs.numpy(), dcum.numpy(), dh0.numpy())
    return dcs, dcum.to(cum.dtype), None if h0 is None else dh0.to(h0.dtype)


def _chunk_scan_backward(q, saved, outs, grads):
    from . import ssd_backward as nk

    CB, x, dt, cum, C, states = saved
    xc, Cc = _pad_chunks(x, q), _pad_chunks(C, q)
    dCB, dx, dC = torch.empty_like(CB), torch.empty_like(xc), torch.empty_like(Cc)
    ddt, dcum, dstates = torch.empty_like(dt), torch.empty_like(cum), torch.empty_like(states)
    nk.ssd_chunk_scan_backward(_np(CB), _np(xc), _np(dt), _np(cum), _np(Cc), _np(states),
                               _np(_grad(grads[0], outs[0], q)), dCB.numpy(), dx.numpy(), ddt.numpy(), dcum.numpy(),
                               dC.numpy(), dstates.numpy())
    return dCB, _unpad(dx, x.shape[1]), ddt, dcum, _unpad(dC, C.shape[1]), dstates


_BACKWARD = {"bmm": _bmm_backward, "chunk_state": _chunk_state_backward, "state_passing": _state_passing_backward,
             "chunk_scan": _chunk_scan_backward}


class _Stage(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, q, *tensors):
        ctx.name, ctx.q = name, q
        out = _NUMBA[name](q, *tensors)
        outs = out if isinstance(out, tuple) else (out,)
        ctx.n_in = len(tensors)
        ctx.save_for_backward(*tensors, *(outs if name == "state_passing" else ()))
        ctx.out_like = [SimpleNamespace(shape=o.shape, dtype=o.dtype) for o in outs]  # for the grads autograd omits
        return out

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        tensors, outs = saved[: ctx.n_in], saved[ctx.n_in:] or ctx.out_like
        need = ctx.needs_input_grad[2:]
        if not any(need):
            return (None,) * (2 + len(tensors))
        gs = _BACKWARD[ctx.name](ctx.q, tensors, outs, grads)
        return (None, None, *[g if n else None for g, n in zip(gs, need)])


def numba_stage(name: str, q: int, *tensors):
    """Run stage ``name`` (``bmm``, ``chunk_state``, ``state_passing``, ``chunk_scan``) on the Numba kernels;
    differentiable: the backward runs the stage's Numba backward kernel (:mod:`kernels._numba.ssd_backward`)."""
    for t in tensors:
        if t is not None and t.device.type != "cpu":
            raise ValueError(f"backend 'numba' runs on CPU tensors only; got a tensor on {t.device} "
                             "(use backend 'torch')")
    return _Stage.apply(name, int(q), *tensors)
