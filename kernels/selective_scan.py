"""Mamba-1's selective scan: ``h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t``, ``y_t = C_t . h_t + D u_t``.

:func:`selective_scan` runs fused kernels (Numba on CPU, Triton on GPU) that discretise inside the loop and never
form a ``(batch, channels, length, state)`` tensor, with a fused backward that recomputes states from chunk-end
checkpoints. :func:`selective_scan_ref` is the readable reference with the semantics of ``selective_scan_ref`` in
state-spaces/mamba (it does materialise ``exp(delta A)`` and ``delta B u`` over ``(batch, channels, length, state)``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._common import HALF_DTYPES, REAL_DTYPES, check_tensor, numba_threads_for, resolve_backend, upcast_half

__all__ = ["selective_scan", "selective_scan_ref"]


def _check(u, delta, A, B, C, D, z, delta_bias, h0):
    """Validate the selective-scan arguments; return ``(batch, channels, length, state, groups)``."""
    check_tensor("u", u, REAL_DTYPES)
    if u.dim() != 3:
        raise ValueError(f"u must be (batch, channels, length); got shape {tuple(u.shape)}")
    bsz, dim, length = u.shape
    named = {"delta": delta, "A": A, "B": B, "C": C, "D": D, "z": z, "delta_bias": delta_bias, "h0": h0}
    for name, t in named.items():
        if t is None:
            continue
        check_tensor(name, t, REAL_DTYPES)
        if t.dtype != u.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but u has dtype {u.dtype}; they must match")
        if t.device != u.device:
            raise ValueError(
                f"{name} is on {t.device} but u is on {u.device} "
                f"({name} shape {tuple(t.shape)}, u shape {tuple(u.shape)})"
            )

    def need(name, t, shape):
        if t is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but {tuple(shape)} is required (u has shape {tuple(u.shape)})"
            )

    need("delta", delta, u.shape)
    need("z", z, u.shape)
    if A.dim() != 2 or A.shape[0] != dim:
        raise ValueError(
            f"A must be (channels, state) = ({dim}, N); got shape {tuple(A.shape)} (u shape {tuple(u.shape)})"
        )
    state = A.shape[1]
    if B.dim() == 3:
        groups = 1
        need("B", B, (bsz, state, length))
    elif B.dim() == 4:
        groups = B.shape[1]
        need("B", B, (bsz, groups, state, length))
        if groups == 0 or dim % groups:
            raise ValueError(
                f"B has {groups} groups, which must divide the {dim} channels (B shape {tuple(B.shape)})"
            )
    else:
        raise ValueError(f"B must be (batch, state, length) or (batch, groups, state, length); got {tuple(B.shape)}")
    if tuple(C.shape) != tuple(B.shape):
        raise ValueError(f"C has shape {tuple(C.shape)} but B has shape {tuple(B.shape)}; they must match")
    need("D", D, (dim,))
    need("delta_bias", delta_bias, (dim,))
    need("h0", h0, (bsz, dim, state))
    return bsz, dim, length, state, groups


def selective_scan_ref(
    u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, h0=None, return_last_state=False,
    seq_idx=None,
):
    """Reference selective scan (a loop over time on materialised ``(batch, channels, length, state)`` tensors).

    Arguments:
        u: ``(batch, channels, length)`` input.
        delta: ``(batch, channels, length)`` step sizes (before ``delta_bias`` and softplus).
        A: ``(channels, state)`` real state matrix (diagonal per channel).
        B, C: ``(batch, state, length)`` or grouped ``(batch, groups, state, length)`` (channels split evenly).
        D: ``(channels,)`` skip weight, or None.
        z: ``(batch, channels, length)`` gate: the output is multiplied by ``silu(z)``; or None.
        delta_bias: ``(channels,)`` added to ``delta``; or None.
        delta_softplus: apply softplus to ``delta (+ delta_bias)``.
        h0: ``(batch, channels, state)`` initial state; zeros if None.
        return_last_state: also return the final state.
        seq_idx: ``(batch, length)`` packed-sequence index; the state resets to zero where it changes.

    Returns:
        ``y`` ``(batch, channels, length)``, and the final state ``(batch, channels, state)`` if
        ``return_last_state``.
    """
    bsz, dim, length, state, groups = _check(u, delta, A, B, C, D, z, delta_bias, h0)
    keep = _keep(seq_idx, u)
    if delta_bias is not None:
        delta = delta + delta_bias[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    delta_a = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    if seq_idx is not None:
        delta_a = delta_a * keep[:, None, :, None]
    if B.dim() == 3:
        delta_b_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
    else:
        b_full = B.repeat_interleave(dim // groups, dim=1)  # (batch, channels, state, length)
        delta_b_u = torch.einsum("bdl,bdnl,bdl->bdln", delta, b_full, u)
    c_full = C if C.dim() == 3 else C.repeat_interleave(dim // groups, dim=1)
    x = torch.zeros(bsz, dim, state, dtype=u.dtype, device=u.device) if h0 is None else h0
    ys = []
    # unbind (not indexing) so that autograd stacks the per-step gradients once instead of scattering each step
    # into a zero tensor of the full (batch, channels, length, state) shape
    c_steps = c_full.unbind(-1)
    for da_t, dbu_t, c_t in zip(delta_a.unbind(2), delta_b_u.unbind(2), c_steps):
        x = da_t * x + dbu_t
        if c_full.dim() == 3:
            ys.append(torch.einsum("bdn,bn->bd", x, c_t))
        else:
            ys.append(torch.einsum("bdn,bdn->bd", x, c_t))
    y = torch.stack(ys, dim=2) if ys else u * 0
    out = y if D is None else y + u * D[:, None]
    if z is not None:
        out = out * F.silu(z)
    return (out, x) if return_last_state else out


def _keep(seq_idx, u):
    """``(batch, length)`` of u's dtype: 0 where a packed sequence starts (after the first step), else 1."""
    bsz, _, length = u.shape
    if seq_idx is None:
        return torch.ones(bsz, length, dtype=u.dtype, device=u.device)
    if not isinstance(seq_idx, torch.Tensor) or seq_idx.dtype.is_floating_point or tuple(seq_idx.shape) != (
            bsz, length):
        raise ValueError(f"seq_idx must be an integer tensor of shape {(bsz, length)}; got "
                         f"{getattr(seq_idx, 'shape', seq_idx)}")
    keep = torch.ones(bsz, length, dtype=u.dtype, device=u.device)
    keep[:, 1:] = (seq_idx[:, 1:] == seq_idx[:, :-1]).to(u.dtype)
    return keep


# ----------------------------------------------------------------------------------------------------------------
def _any_strides(a):
    """``a`` (a NumPy array) as one that Numba types with any strides (layout 'A'): ``a`` itself when it is not
    contiguous, else its values in a buffer one column wider. The gate ``z`` is a strided view of the Mamba block's
    in-projection, except at batch 1 or when there is none: one compiled kernel serves them all (each layout is a
    separate compilation of the kernels, about 35 s of CPU on a fresh clone)."""
    import numpy as np

    if a.size == 0:  # no element is read
        return _no_gate(a)
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        return a
    buf = np.empty((*a.shape[:-1], a.shape[-1] + 1), a.dtype)
    view = buf[..., : a.shape[-1]]
    view[...] = a
    return view


def _no_gate(like):
    """A stand-in for the gate where there is none (the kernels read no element of it), typed as
    :func:`_any_strides` types the gate: every element aliases one float, at least two along each axis (an array
    with an axis of one or none counts as contiguous)."""
    import numpy as np

    one = np.empty(1, like.dtype)
    shape = tuple(max(2, n) for n in like.shape)
    return np.lib.stride_tricks.as_strided(one, shape=shape, strides=(0,) * like.ndim, writeable=True)


def _bc_transposed(X: torch.Tensor) -> torch.Tensor:
    """``(batch, [groups,] state, length)`` -> contiguous ``(batch, groups, length, state)``."""
    if X.dim() == 3:
        X = X.unsqueeze(1)
    return X.transpose(2, 3).contiguous()


def _n_slices(bsz: int, groups: int, per_group: int) -> int:
    """Channel slices per (batch, group): enough tasks for the threads, each at least a channel block wide, and so
    at most ``4 * threads`` partial ``(length, state)`` buffers of dB and dC in all."""
    import numba

    from ._numba.selective_scan import CHANNEL_BLOCK

    want = math.ceil(4 * numba.get_num_threads() / max(1, bsz * groups))
    return max(1, min(math.ceil(per_group / CHANNEL_BLOCK), want))


class _SelectiveScanFn(torch.autograd.Function):
    """The fused core: ``(u, delta, A, B, C, D, bias, h0[, z]) -> (y, last_state)`` with ``y = C . h + D u``, times
    ``silu(z)`` when ``z`` is given.

    Numba forms ``dt = softplus(delta + bias)`` and applies the gate inside its kernels, forward and backward (the
    backward recomputes ``y`` before the gate along with the states, so nothing the size of ``u`` is saved beyond
    the inputs). The Triton path receives ``dt`` itself (``bias`` None,
    ``softplus`` False, no ``z``): the caller's element-wise ops are differentiated by autograd.
    """

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, bias, h0, keep, backend, softplus=False, z=None):
        bsz, dim, length = u.shape
        state = A.shape[1]
        groups = 1 if B.dim() == 3 else B.shape[1]
        Dv = torch.zeros(dim, dtype=u.dtype, device=u.device) if D is None else D.detach()
        bv = torch.zeros(dim, dtype=u.dtype, device=u.device) if bias is None else bias.detach().contiguous()
        h0v = torch.zeros(bsz, dim, state, dtype=u.dtype, device=u.device) if h0 is None else h0.detach()
        h0v = h0v.contiguous()
        u_, dt_, A_ = u.detach().contiguous(), delta.detach().contiguous(), A.detach().contiguous()
        save = any(ctx.needs_input_grad)
        n_chunks = max(1, math.ceil(length / _chunk(backend)))
        y = torch.empty_like(u_)
        last = torch.empty(bsz, dim, state, dtype=u.dtype, device=u.device)
        ckpt = torch.empty(bsz, dim, n_chunks if save else 1, state, dtype=u.dtype, device=u.device)
        gate = z is not None  # numba only: y *= silu(z) inside the kernel (its backward recomputes y before the gate)
        z_ = z.detach() if gate else None  # any strides (the Mamba block passes a view of its in-projection)
        if backend == "numba":
            from ._numba import selective_scan as nk

            Bx, Cx = _bc_transposed(B.detach()), _bc_transposed(C.detach())
            with numba_threads_for(u.numel() * state * 4):
                nk.selective_scan_forward(
                    u_.numpy(), dt_.numpy(), A_.numpy(), Bx.numpy(), Cx.numpy(), Dv.numpy(), bv.numpy(), softplus,
                    h0v.numpy(), keep.numpy(), y.numpy(), last.numpy(), ckpt.numpy(), save,
                    _any_strides(z_.numpy()) if gate else _no_gate(y.numpy()), gate,
                )  # fmt: skip
        else:
            from ._triton import selective_scan as tk

            Bx = (B.detach().unsqueeze(1) if B.dim() == 3 else B.detach()).contiguous()
            Cx = (C.detach().unsqueeze(1) if C.dim() == 3 else C.detach()).contiguous()
            tk.forward(u_, dt_, A_, Bx, Cx, Dv, h0v, y, last, ckpt, save)
        ctx.backend, ctx.groups, ctx.softplus = backend, groups, softplus
        ctx.flags = (D is not None, h0 is not None, B.dim(), bias is not None)
        ctx.save_for_backward(u_, dt_, A_, Bx, Cx, Dv, bv, h0v, keep, ckpt, z_ if gate else None)
        return y, last

    @staticmethod
    @once_differentiable
    def backward(ctx, gy, glast):
        u, delta, A, Bx, Cx, Dv, bv, h0v, keep, ckpt, z = ctx.saved_tensors
        has_d, has_h0, b_dim, has_bias = ctx.flags
        bsz, dim, length = u.shape
        state, groups = A.shape[1], ctx.groups
        gy = torch.zeros_like(u) if gy is None else gy.contiguous()
        dz = None
        dbias = None
        dh0 = torch.zeros_like(h0v) if glast is None else glast.clone(memory_format=torch.contiguous_format)
        du, ddelta = torch.empty_like(u), torch.empty_like(u)
        if ctx.backend == "numba":
            from ._numba import selective_scan_backward as nk

            gate = z is not None
            dz = torch.empty_like(u) if gate else None
            n_sl = _n_slices(bsz, groups, dim // groups)
            dA_part = torch.empty(bsz, dim, state, dtype=u.dtype)
            dD_part = torch.empty(bsz, dim, dtype=u.dtype)
            dbias_part = torch.empty(bsz, dim, dtype=u.dtype)
            dB_part = torch.empty(bsz, groups, n_sl, length, state, dtype=u.dtype)
            dC_part = torch.empty(bsz, groups, n_sl, length, state, dtype=u.dtype)
            with numba_threads_for(u.numel() * state * 8):
                nk.selective_scan_backward(
                    u.numpy(), delta.numpy(), A.numpy(), Bx.numpy(), Cx.numpy(), Dv.numpy(), bv.numpy(),
                    ctx.softplus, h0v.numpy(), keep.numpy(), ckpt.numpy(),
                    _any_strides(z.numpy()) if gate else _no_gate(u.numpy()), gate,
                    gy.numpy(), du.numpy(), ddelta.numpy(),
                    (dz if gate else du).numpy(), dA_part.numpy(), dB_part.numpy(), dC_part.numpy(), dD_part.numpy(),
                    dbias_part.numpy(), dh0.numpy(), n_sl,
                )  # fmt: skip
            dA = dA_part.sum(0)
            dD = dD_part.sum(0)
            dbias = dbias_part.sum(0) if has_bias else None
            dB = dB_part.sum(2).transpose(2, 3)  # (batch, groups, state, length)
            dC = dC_part.sum(2).transpose(2, 3)
        else:
            from ._triton import selective_scan as tk

            dA, dB, dC, dD = tk.backward(u, delta, A, Bx, Cx, Dv, h0v, ckpt, gy, du, ddelta, dh0)
        if b_dim == 3:
            dB, dC = dB[:, 0], dC[:, 0]
        return (du, ddelta, dA, dB, dC, dD if has_d else None, dbias, dh0 if has_h0 else None, None, None, None,
                dz)


def _chunk(backend: str) -> int:
    if backend == "numba":
        from ._numba.selective_scan import CHUNK

        return CHUNK
    from ._triton.selective_scan import CHUNK

    return CHUNK


def selective_scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    h0: torch.Tensor | None = None,
    return_last_state: bool = False,
    *,
    seq_idx: torch.Tensor | None = None,
    backend: str = "auto",
):
    """Fused selective scan (Mamba-1), differentiable in every tensor argument.

    ``dt = softplus(delta + delta_bias)`` (softplus and bias optional), ``h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t``
    per channel (``h`` has ``state`` entries), ``y_t = C_t . h_t + D u_t``, then ``y *= silu(z)`` if ``z`` is given.

    Arguments:
        u: ``(batch, channels, length)`` input; float32 or float64 (every tensor must share the dtype); float16 and
            bfloat16 are computed in float32 and returned in their dtype.
        delta: ``(batch, channels, length)`` raw step sizes.
        A: ``(channels, state)`` real diagonal state matrix (negative entries for a decaying state).
        B, C: ``(batch, state, length)`` or grouped ``(batch, groups, state, length)``, same shape.
        D: ``(channels,)`` skip weight, or None.
        z: ``(batch, channels, length)`` gate, or None.
        delta_bias: ``(channels,)``, or None.
        delta_softplus: apply softplus to ``delta + delta_bias``.
        h0: ``(batch, channels, state)`` initial state, or None (zeros).
        return_last_state: also return the final state.
        seq_idx: ``(batch, length)`` integer index of packed sequences (non-decreasing), or None: the state resets
            to zero where it changes (``h0`` belongs to the first sequence). Numba and torch backends.
        backend: ``"numba"`` (CPU), ``"triton"`` (CUDA; CPU under ``TRITON_INTERPRET=1``), ``"torch"``
            (:func:`selective_scan_ref` differentiated by autograd) or ``"auto"``.

    Returns:
        ``y`` ``(batch, channels, length)``, plus the final state ``(batch, channels, state)`` if
        ``return_last_state``.
    """
    if isinstance(u, torch.Tensor) and u.dtype in HALF_DTYPES:  # computed in float32, returned in u's dtype
        u32, delta32, A32, B32, C32, D32, z32, bias32, h032 = upcast_half(u, delta, A, B, C, D, z, delta_bias, h0)
        out = selective_scan(u32, delta32, A32, B32, C32, D32, z32, bias32, delta_softplus, h032,
                             return_last_state, seq_idx=seq_idx, backend=backend)
        return tuple(t.to(u.dtype) for t in out) if return_last_state else out.to(u.dtype)
    _check(u, delta, A, B, C, D, z, delta_bias, h0)
    backend = resolve_backend(backend, u, delta, A, B, C, D, z, delta_bias, h0)
    keep = _keep(seq_idx, u)
    if backend == "torch":
        return selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus, h0, return_last_state,
                                  seq_idx)
    if backend == "triton" and seq_idx is not None:
        raise ValueError("seq_idx is not supported by backend='triton' yet; allowed backends: 'numba', 'torch'")
    if backend == "numba":  # bias, softplus and the gate are fused into the kernels
        y, last = _SelectiveScanFn.apply(u, delta, A, B, C, D, delta_bias, h0, keep, backend, delta_softplus, z)
        return (y, last) if return_last_state else y
    dt = delta if delta_bias is None else delta + delta_bias[:, None]
    if delta_softplus:
        dt = F.softplus(dt)
    y, last = _SelectiveScanFn.apply(u, dt, A, B, C, D, None, h0, keep, backend)
    if z is not None:
        y = y * F.silu(z)
    return (y, last) if return_last_state else y
