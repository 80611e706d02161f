"""First-order linear recurrence ``h_t = a_t * h_{t-1} + b_t`` along one axis, with autograd.

The public entry point is :func:`linear_scan`; :func:`linear_scan_ref` is the readable reference (a Python loop
differentiated by autograd) and :func:`linear_scan_pscan` a log-depth Blelloch scan in torch (a baseline in the
style of mamba.py's ``pscan``).

Layouts. The scan axis may sit anywhere in memory. The input is viewed, without copying, as ``(N, T, M)``: the
non-scan axes whose strides are larger than the scan axis's form ``N`` (outer rows), those with smaller strides
form ``M`` (inner channels). ``(batch, channels, time)`` scanned over time is ``(B*D, T, 1)`` (time contiguous);
``(batch, time, channels)`` is ``(B, T, D)`` (channels last). Each backend picks its loop order from that, so both
layouts stream memory once. The output has ``b``'s shape and the same memory order as ``b``.

Gradients. The backward of ``h_t = a_t h_{t-1} + b_t`` is itself a linear scan running the other way:
``d_t = g_t + conj(a_{t+1}) d_{t+1}``, ``db_t = d_t``, ``da_t = d_t conj(h_{t-1})``, ``dh0 = conj(a_first) d_first``
(``conj`` is PyTorch's convention for complex gradients; it is the identity for real dtypes).

The backends (Numba, Triton, the torch loop, the Blelloch scan) are in :mod:`kernels._linear_backends`.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from ._common import HALF_DTYPES, SCAN_DTYPES, check_tensor, empty_offset, resolve_backend, shape_without, upcast_half
from ._linear_backends import BACKWARD, FORWARD, numba_rows_out

__all__ = ["linear_scan", "linear_scan_ref", "linear_scan_pscan"]


# ----------------------------------------------------------------------------------------------------------------
# layout planning
class _Plan:
    """How a tensor of shape ``shape`` scanned along ``dim`` maps onto ``(N, T, M)`` views."""

    def __init__(self, b: torch.Tensor, dim: int):
        nd = b.dim()
        self.dim = dim
        self.shape = tuple(b.shape)
        self.T = b.shape[dim]
        st = abs(b.stride(dim)) if self.T > 1 else math.inf
        others = [d for d in range(nd) if d != dim]
        by_stride = sorted(others, key=lambda d: -abs(b.stride(d)))
        inner = [d for d in by_stride if b.shape[d] > 1 and abs(b.stride(d)) < st]
        outer = [d for d in by_stride if d not in inner]
        self.perm = outer + [dim] + inner
        self.inv = [self.perm.index(d) for d in range(nd)]
        self.N = math.prod(b.shape[d] for d in outer)
        self.M = math.prod(b.shape[d] for d in inner)
        # the state (h0) has the non-scan axes, in the order outer + inner
        state_axes = outer + inner
        self.state_shape = shape_without(b.shape, dim)
        self.state_perm = [d if d < dim else d - 1 for d in state_axes]
        self.state_inv = [self.state_perm.index(d) for d in range(nd - 1)]

    def ntm(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (shape ``self.shape``) as an ``(N, T, M)`` view (a copy only if its strides cannot merge)."""
        return x.permute(self.perm).reshape(self.N, self.T, self.M)

    def from_ntm(self, x3: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`ntm` for a contiguous ``(N, T, M)`` tensor: a view with shape ``self.shape``."""
        return x3.view([self.shape[d] for d in self.perm]).permute(self.inv)

    def state_nm(self, h: torch.Tensor) -> torch.Tensor:
        """A state tensor (shape ``self.state_shape``) as an ``(N, M)`` view."""
        return h.permute(self.state_perm).reshape(self.N, self.M)

    def state_from_nm(self, h2: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`state_nm` for a contiguous ``(N, M)`` tensor."""
        return h2.view([self.state_shape[d] for d in self.state_perm]).permute(self.state_inv)



# ----------------------------------------------------------------------------------------------------------------
class _LinearScanFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, h0, dim, reverse, backend):
        plan = _Plan(b, dim)
        a3 = plan.ntm(a.expand(b.shape))
        b3 = plan.ntm(b)
        if h0 is None:
            h02 = torch.zeros(plan.N, plan.M, dtype=b.dtype, device=b.device)
        else:
            h02 = plan.state_nm(h0.expand(plan.state_shape))
        out3 = empty_offset((plan.N, plan.T, plan.M), b.dtype, b.device, avoid=(a3, b3))
        if out3.numel():
            FORWARD[backend](a3, b3, h02, out3, reverse)
        h = plan.from_ntm(out3)
        ctx.plan, ctx.reverse, ctx.backend = plan, reverse, backend
        ctx.a_shape, ctx.h0_shape = a.shape, None if h0 is None else h0.shape
        ctx.save_for_backward(a, h0, h)
        return h

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, h0, h = ctx.saved_tensors
        plan = ctx.plan
        a3 = plan.ntm(a.expand(plan.shape))
        h3 = plan.ntm(h)
        g3 = plan.ntm(g)
        h02 = (
            torch.zeros(plan.N, plan.M, dtype=h.dtype, device=h.device)
            if h0 is None
            else plan.state_nm(h0.expand(plan.state_shape))
        )
        da3 = empty_offset(g3.shape, g.dtype, g.device, avoid=(a3, h3, g3))
        db3 = empty_offset(g3.shape, g.dtype, g.device, avoid=(a3, h3, g3, da3))
        dh02 = torch.empty(plan.N, plan.M, dtype=g.dtype, device=g.device)
        if plan.N * plan.M:
            if plan.T:
                BACKWARD[ctx.backend](a3, h3, g3, h02, da3, db3, dh02, ctx.reverse)
            else:
                dh02.zero_()
        da = plan.from_ntm(da3).sum_to_size(ctx.a_shape) if ctx.needs_input_grad[0] else None
        db = plan.from_ntm(db3) if ctx.needs_input_grad[1] else None
        dh0 = None
        if h0 is not None and ctx.needs_input_grad[2]:
            dh0 = plan.state_from_nm(dh02).sum_to_size(ctx.h0_shape)
        return da, db, dh0, None, None, None


def _check_scan_args(a, b, h0, dim):
    check_tensor("b", b, SCAN_DTYPES)
    check_tensor("a", a, SCAN_DTYPES)
    if a.dtype != b.dtype:
        raise TypeError(f"a has dtype {a.dtype} but b has dtype {b.dtype}; they must match")
    if a.device != b.device:
        raise ValueError(
            f"a is on {a.device} but b is on {b.device} (a shape {tuple(a.shape)}, b shape {tuple(b.shape)})"
        )
    if b.dim() == 0:
        raise ValueError("b must have at least one dimension (the scan axis); got a 0-d tensor")
    if not -b.dim() <= dim < b.dim():
        raise ValueError(f"dim {dim} is out of range for b with shape {tuple(b.shape)}")
    dim %= b.dim()
    try:  # (torch.broadcast_shapes costs ~15 us a call: skipped for the common equal shapes)
        ok = a.shape == b.shape or torch.broadcast_shapes(a.shape, b.shape) == b.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"a with shape {tuple(a.shape)} does not match (or broadcast to) b with shape {tuple(b.shape)}"
        )
    if h0 is not None:
        check_tensor("h0", h0, SCAN_DTYPES)
        if h0.dtype != b.dtype:
            raise TypeError(f"h0 has dtype {h0.dtype} but b has dtype {b.dtype}; they must match")
        if h0.device != b.device:
            raise ValueError(f"h0 is on {h0.device} but b is on {b.device}")
        state = shape_without(b.shape, dim)
        try:
            ok = torch.broadcast_shapes(h0.shape, state) == state
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"h0 with shape {tuple(h0.shape)} does not match the state shape {state} "
                f"(b with shape {tuple(b.shape)} without axis {dim})"
            )
    return dim


def linear_scan(
    a: torch.Tensor,
    b: torch.Tensor,
    h0: torch.Tensor | None = None,
    *,
    dim: int = -1,
    reverse: bool = False,
    backend: str = "auto",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Linear recurrence ``h_t = a_t * h_{t-1} + b_t`` along ``dim`` (``h_{-1} = h0``), differentiable.

    Arguments:
        a: coefficients, shape of ``b`` or broadcastable to it (e.g. ``(1, D, 1)`` for a per-channel decay).
        b: inputs, any shape ``(..., T, ...)`` with the scan axis ``T`` at ``dim``; float32, float64, complex64 or
            complex128 (``a`` and ``h0`` must have the same dtype); float16 and bfloat16 are computed in float32 and
            returned in ``b``'s dtype. Packed sequences: put ``a = 0`` at the first step of each sequence, which
            resets the state there.
        h0: initial state, ``b``'s shape without ``dim`` (or broadcastable to it); zeros if None.
        dim: the scan axis.
        reverse: run from the last step to the first (``h_t = a_t h_{t+1} + b_t``, ``h_T = h0``).
        backend: ``"numba"`` (CPU), ``"triton"`` (CUDA, or CPU under ``TRITON_INTERPRET=1``), ``"torch"``
            (a readable loop) or ``"auto"`` (triton for CUDA tensors, numba otherwise).
        out: optional preallocated output of ``b``'s shape and dtype, written in place (no autograd).

    Returns:
        ``h``, shape of ``b``, same dtype and memory order as ``b``. Gradients flow to ``a``, ``b`` and ``h0``
        through a custom autograd Function whose backward is the reverse scan.
    """
    if any(isinstance(t, torch.Tensor) and t.dtype in HALF_DTYPES for t in (a, b)):  # in float32, b's dtype back
        if out is not None:
            raise ValueError("out= is not allowed with float16/bfloat16 inputs (they are computed in float32)")
        a32, b32, h032 = upcast_half(a, b, h0)
        return linear_scan(a32, b32, h032, dim=dim, reverse=reverse, backend=backend).to(b.dtype)
    dim = _check_scan_args(a, b, h0, dim)
    backend = resolve_backend(backend, a, b, h0)
    if out is not None:
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or (h0 is not None and h0.requires_grad)):
            raise RuntimeError("linear_scan(out=...) does not support autograd; call it under torch.no_grad()")
        if out.shape != b.shape or out.dtype != b.dtype or out.device != b.device:
            raise ValueError(
                f"out has shape {tuple(out.shape)} ({out.dtype}, {out.device}) but b has shape "
                f"{tuple(b.shape)} ({b.dtype}, {b.device})"
            )
        if backend == "numba" and numba_rows_out(a, b, h0, out, dim, reverse):
            return out
        plan = _Plan(b, dim)
        out3 = out.permute(plan.perm).view(plan.N, plan.T, plan.M)  # raises if out cannot be viewed that way
        h02 = (
            torch.zeros(plan.N, plan.M, dtype=b.dtype, device=b.device)
            if h0 is None
            else plan.state_nm(h0.expand(plan.state_shape))
        )
        if out3.numel():
            FORWARD[backend](plan.ntm(a.expand(b.shape)), plan.ntm(b), h02, out3, reverse)
        return out
    return _LinearScanFn.apply(a, b, h0, dim, bool(reverse), backend)


def linear_scan_pscan(
    a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None, *, dim: int = -1, reverse: bool = False
) -> torch.Tensor:
    """Log-depth Blelloch scan in torch (up-sweep/down-sweep over strided views); same contract as
    :func:`linear_scan`. A baseline: every level is another pass over memory, so on a CPU it loses to a
    sequential sweep. Differentiable (its backward is a reverse Blelloch scan).

    Arguments:
        a, b, h0, dim, reverse: as in :func:`linear_scan`.

    Returns:
        ``h`` with ``b``'s shape.
    """
    dim = _check_scan_args(a, b, h0, dim)
    return _LinearScanFn.apply(a, b, h0, dim, bool(reverse), "pscan")



def linear_scan_ref(
    a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None, *, dim: int = -1, reverse: bool = False
) -> torch.Tensor:
    """Readable reference: a Python loop over ``dim``, differentiated by autograd.

    Arguments:
        a: coefficients, ``b``'s shape or broadcastable to it.
        b: inputs ``(..., T, ...)``, scan axis at ``dim``.
        h0: initial state, ``b``'s shape without ``dim``; zeros if None.
        dim: the scan axis.
        reverse: scan from the last step to the first.

    Returns:
        ``h`` with ``b``'s shape: ``h_t = a_t * h_{t-1} + b_t``.
    """
    dim = _check_scan_args(a, b, h0, dim)
    a_t = a.expand(b.shape).movedim(dim, 0)
    b_t = b.movedim(dim, 0)
    if b_t.shape[0] == 0:
        return b * 0  # empty along dim (keeps autograd connected)
    h = torch.zeros_like(b_t[0]) if h0 is None else h0.expand(b_t.shape[1:])
    # unbind (not indexing): autograd then stacks the per-step gradients once instead of scattering every step
    # into a zero tensor of the full shape (quadratic in the length)
    a_steps, b_steps = a_t.unbind(0), b_t.unbind(0)
    steps = range(b_t.shape[0] - 1, -1, -1) if reverse else range(b_t.shape[0])
    hs = [None] * b_t.shape[0]
    for t in steps:
        h = a_steps[t] * h + b_steps[t]
        hs[t] = h
    return torch.stack(hs, 0).movedim(0, dim)
