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
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from ._common import (
    HALF_DTYPES,
    SCAN_DTYPES,
    check_tensor,
    empty_offset,
    numba_threads_for,
    resolve_backend,
    shape_without,
    upcast_half,
)

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


def _plain(x: torch.Tensor) -> torch.Tensor:
    """Detached, with lazy conjugation/negation materialised (NumPy cannot see those bits)."""
    return x.detach().resolve_conj().resolve_neg()


# ----------------------------------------------------------------------------------------------------------------
# backends, all on (N, T, M) tensors: forward(a3, b3, h02, out3, reverse) fills out3;
# backward(a3, h3, g3, h02, da3, db3, dh02, reverse) fills the gradients
def _numba_forward(a3, b3, h02, out3, reverse):
    from ._numba import linear_scan as nk

    a3, b3, h02 = _plain(a3), _plain(b3), _plain(h02)
    with numba_threads_for(b3.numel()):
        if b3.shape[2] == 1:
            nk.scan_rows_forward(  # the 2-D views taken in NumPy (torch's slicing costs ~2.5 us a tensor)
                a3.numpy()[:, :, 0], b3.numpy()[:, :, 0], h02.numpy()[:, 0], out3.numpy()[:, :, 0], reverse
            )
        else:
            nk.scan_channels_forward(a3.numpy(), b3.numpy(), h02.numpy(), out3.numpy(), reverse)


def _numba_backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
    from ._numba import linear_scan as nk

    a3, h3, g3, h02 = _plain(a3), _plain(h3), _plain(g3), _plain(h02)
    with numba_threads_for(2 * g3.numel()):
        if g3.shape[2] == 1:
            nk.scan_rows_backward(
                a3.numpy()[:, :, 0], h3.numpy()[:, :, 0], g3.numpy()[:, :, 0], h02.numpy()[:, 0],
                da3.numpy()[:, :, 0], db3.numpy()[:, :, 0], dh02.numpy()[:, 0], reverse,
            )  # fmt: skip
        else:
            nk.scan_channels_backward(
                a3.numpy(), h3.numpy(), g3.numpy(), h02.numpy(), da3.numpy(), db3.numpy(), dh02.numpy(), reverse
            )


_ZEROS: dict = {}  # NumPy dtype -> a zeros vector, grown on demand: the fast path's h0, which the kernel only
# reads (not flagged read-only: numba would compile a second specialisation for a read-only array)


def _zeros(n: int, dtype):
    z = _ZEROS.get(dtype)
    if z is None or z.shape[0] < n:
        z = np.zeros(max(n, 1024), dtype)
        _ZEROS[dtype] = z
    return z[:n]


def _numba_rows_out(a, b, h0, out, dim, reverse) -> bool:
    """``linear_scan(..., out=)`` on the Numba backend for the common layout (``a``, ``b`` and ``out`` contiguous,
    ``a`` of ``b``'s shape, the scan axis last, no ``h0``): straight to the row kernel on NumPy views. Returns False
    (nothing done) for any other layout, which takes the general path.

    The general path's layout plan, permuted views, ``h0`` zeros and detaching are ~15 small torch calls; with the
    caches cold (as after another kernel has streamed memory) they took ~0.3 ms together, 13% of a 256x64x256 scan
    (``lab bench scan``'s ``short`` case), against ~0.1 ms for this path.
    """
    if dim != b.dim() - 1 or h0 is not None or a.shape != b.shape or b.numel() == 0:
        return False
    if not (a.is_contiguous() and b.is_contiguous() and out.is_contiguous()):
        return False
    if a.is_conj() or b.is_conj() or a.is_neg() or b.is_neg():
        return False
    from ._numba import linear_scan as nk

    t = b.shape[-1]
    bn = b.detach().numpy().reshape(-1, t)
    with numba_threads_for(bn.size):
        nk.scan_rows_forward(a.detach().numpy().reshape(-1, t), bn, _zeros(bn.shape[0], bn.dtype),
                             out.numpy().reshape(-1, t), reverse)  # fmt: skip
    return True


def _torch_forward(a3, b3, h02, out3, reverse):
    h = h02
    steps = range(b3.shape[1] - 1, -1, -1) if reverse else range(b3.shape[1])
    for t in steps:
        h = torch.addcmul(b3[:, t], a3[:, t], h)
        out3[:, t] = h


def _triton_forward(a3, b3, h02, out3, reverse):
    from ._triton import linear_scan as tk

    tk.scan_forward(a3, b3, h02, out3, reverse)


def _triton_backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
    if g3.is_complex():  # the complex adjoint is built from forward scans
        return _generic_backward(_triton_forward)(a3, h3, g3, h02, da3, db3, dh02, reverse)
    from ._triton import linear_scan as tk

    tk.scan_backward(a3, h3, g3.contiguous(), h02, da3, db3, dh02, reverse)


def _pscan_forward(a3, b3, h02, out3, reverse):
    out3.copy_(_blelloch(a3, b3, h02, reverse))


def _generic_backward(forward):
    """Backward built from a forward scan: the adjoint scan runs the other way with shifted coefficients."""

    def backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
        n, t, m = g3.shape
        if t == 0:
            dh02.zero_()
            return
        coef = torch.zeros_like(g3)  # coefficient of d_{next} in d_t = g_t + conj(a_next) d_next
        hprev = torch.empty_like(g3)
        if reverse:  # forward ran t = T-1 .. 0: the "next" step is t-1, the predecessor state is h_{t+1}
            coef[:, 1:] = a3[:, :-1].conj()
            hprev[:, :-1] = h3[:, 1:]
            hprev[:, -1] = h02
            first = t - 1
        else:
            coef[:, :-1] = a3[:, 1:].conj()
            hprev[:, 1:] = h3[:, :-1]
            hprev[:, 0] = h02
            first = 0
        zeros = torch.zeros_like(h02)
        forward(coef, g3.contiguous(), zeros, db3, not reverse)
        torch.mul(db3, hprev.conj(), out=da3)
        torch.mul(a3[:, first].conj(), db3[:, first], out=dh02)

    return backward


_FORWARD = {"numba": _numba_forward, "torch": _torch_forward, "triton": _triton_forward, "pscan": _pscan_forward}
_BACKWARD = {
    "numba": _numba_backward,
    "torch": _generic_backward(_torch_forward),
    "triton": _triton_backward,
    "pscan": _generic_backward(_pscan_forward),
}


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
            _FORWARD[backend](a3, b3, h02, out3, reverse)
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
                _BACKWARD[ctx.backend](a3, h3, g3, h02, da3, db3, dh02, ctx.reverse)
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
        if backend == "numba" and _numba_rows_out(a, b, h0, out, dim, reverse):
            return out
        plan = _Plan(b, dim)
        out3 = out.permute(plan.perm).view(plan.N, plan.T, plan.M)  # raises if out cannot be viewed that way
        h02 = (
            torch.zeros(plan.N, plan.M, dtype=b.dtype, device=b.device)
            if h0 is None
            else plan.state_nm(h0.expand(plan.state_shape))
        )
        if out3.numel():
            _FORWARD[backend](plan.ntm(a.expand(b.shape)), plan.ntm(b), h02, out3, reverse)
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


def _blelloch(a3: torch.Tensor, b3: torch.Tensor, h02: torch.Tensor, reverse: bool) -> torch.Tensor:
    """Inclusive scan of ``(N, T, M)`` tensors along axis 1 by Blelloch's up-sweep/down-sweep, in place on copies.

    The length is padded to a power of two with identity elements ``(a, b) = (1, 0)`` at the end.
    """
    if reverse:
        return _blelloch(a3.flip(1), b3.flip(1), h02, False).flip(1)
    n, t, m = b3.shape
    size = 1 << max(0, (t - 1).bit_length())
    A = torch.ones(n, size, m, dtype=b3.dtype, device=b3.device)
    B = torch.zeros(n, size, m, dtype=b3.dtype, device=b3.device)
    A[:, :t] = a3
    B[:, :t] = b3
    B[:, 0] += A[:, 0] * h02  # fold the initial state into the first input
    # up-sweep: after level k, position i (with i+1 a multiple of 2^(k+1)) holds the combine of its block
    step = 1
    while step < size:
        right = slice(2 * step - 1, size, 2 * step)
        left = slice(step - 1, size, 2 * step)
        B[:, right] += A[:, right] * B[:, left]
        A[:, right] *= A[:, left]
        step *= 2
    # down-sweep (inclusive form): fill the middle of every block from the prefix ending just before it
    step = size // 4
    while step >= 1:
        mid = slice(3 * step - 1, size, 2 * step)
        prev = slice(2 * step - 1, size - step, 2 * step)
        B[:, mid] += A[:, mid] * B[:, prev]
        A[:, mid] *= A[:, prev]
        step //= 2
    return B[:, :t]


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
