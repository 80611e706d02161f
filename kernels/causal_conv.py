"""The depthwise causal 1-D convolution of Mamba's blocks, ``y_t = act(bias + sum_k w_k x_{t - (K-1) + k})``.

:func:`causal_conv1d` runs a fused Numba kernel on the CPU (the convolution and its SiLU in one pass over each row,
forward and backward; the backward recomputes the pre-activation instead of saving it). On this lab's CPUs oneDNN's
depthwise convolution took 7 ms for Mamba's (8, 256, 1024) width-4 case, and SiLU plus a copy of its strided output
another 3 ms; the kernel does all of it in one pass over each row. :func:`causal_conv1d_ref` is the torch reference
(``F.conv1d`` over the prefixed input), the path for CUDA tensors and for ``backend="torch"``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._common import HALF_DTYPES, REAL_DTYPES, check_tensor, numba_threads_for, resolve_backend, upcast_half

__all__ = ["causal_conv1d", "causal_conv1d_ref"]

ACTIVATIONS = (None, "silu")


def _check(x, weight, bias, initial_state, activation):
    """Validate the arguments; return ``(batch, channels, length, width)``."""
    check_tensor("x", x, REAL_DTYPES)
    if x.dim() != 3:
        raise ValueError(f"x must be (batch, channels, length); got shape {tuple(x.shape)}")
    bsz, dim, length = x.shape
    check_tensor("weight", weight, REAL_DTYPES)
    if weight.dim() != 2 or weight.shape[0] != dim or weight.shape[1] < 1:
        raise ValueError(f"weight must be (channels, width) = ({dim}, K >= 1); got shape {tuple(weight.shape)}")
    width = weight.shape[1]
    for name, t, shape in (("bias", bias, (dim,)), ("initial_state", initial_state, (bsz, dim, width - 1))):
        if t is None:
            continue
        check_tensor(name, t, REAL_DTYPES)
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but {shape} is required (x {tuple(x.shape)}, "
                             f"weight {tuple(weight.shape)})")
    for name, t in (("weight", weight), ("bias", bias), ("initial_state", initial_state)):
        if t is not None and t.dtype != x.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but x has dtype {x.dtype}; they must match")
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}; got {activation!r}")
    return bsz, dim, length, width


def causal_conv1d_ref(x, weight, bias=None, initial_state=None, activation=None):
    """Reference causal depthwise convolution (``F.conv1d`` over ``[initial_state, x]``), arguments as in
    :func:`causal_conv1d`."""
    bsz, dim, length, width = _check(x, weight, bias, initial_state, activation)
    if initial_state is None:
        initial_state = x.new_zeros(bsz, dim, width - 1)
    y = F.conv1d(torch.cat([initial_state, x], dim=-1), weight[:, None, :], bias, groups=dim)
    return F.silu(y) if activation == "silu" else y


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``x`` ``(batch, channels, length)`` as a C-contiguous ``(rows, length)`` tensor whose row
    ``b * pitch + c`` is ``x[b, c]``, and ``pitch``: a view when ``x``'s rows are contiguous and a whole number of
    rows apart (a channel slice of a contiguous tensor), else a contiguous copy (``pitch = channels``)."""
    bsz, dim, length = x.shape
    st = x.stride()
    if length > 0 and st[2] == 1 and st[1] == length and st[0] % length == 0 and st[0] >= dim * length:
        pitch = st[0] // length
        return x.as_strided(((bsz - 1) * pitch + dim, length), (length, 1)), pitch
    return x.contiguous().view(bsz * dim, length), dim


class _CausalConvFn(torch.autograd.Function):
    """The Numba kernels (width 4; a narrower convolution is padded with zero taps on the left)."""

    @staticmethod
    def forward(ctx, x, weight, bias, initial_state, silu):
        from ._numba import causal_conv as nk

        bsz, dim, length = x.shape
        width = weight.shape[1]
        pad = nk.WIDTH - width
        w = F.pad(weight.detach(), (pad, 0)).contiguous()
        b = torch.zeros(dim, dtype=x.dtype) if bias is None else bias.detach().contiguous()
        pre = x.new_zeros(bsz, dim, nk.WIDTH - 1)
        if initial_state is not None and width > 1:
            pre[..., pad:] = initial_state.detach()
        xd, pitch = _rows(x.detach())  # a channel slice of a contiguous tensor is read in place
        y = torch.empty(bsz, dim, length, dtype=x.dtype)
        with numba_threads_for(x.numel() * nk.WIDTH):
            nk.conv_forward(xd.numpy(), pitch, w.numpy(), b.numpy(), pre.numpy(), y.numpy(), silu)
        ctx.pitch = pitch
        ctx.silu, ctx.pad, ctx.flags = silu, pad, (bias is not None, initial_state is not None)
        ctx.save_for_backward(xd, w, b, pre)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy):
        from ._numba import causal_conv as nk

        x, w, b, pre = ctx.saved_tensors
        has_bias, has_state = ctx.flags
        bsz, dim, length = gy.shape
        gy = gy.contiguous()
        dx = torch.empty(bsz, dim, length, dtype=x.dtype)
        dw_part = torch.empty(bsz, dim, nk.WIDTH, dtype=x.dtype)
        db_part = torch.empty(bsz, dim, dtype=x.dtype)
        dpre = torch.empty(bsz, dim, nk.WIDTH - 1, dtype=x.dtype)
        with numba_threads_for(x.numel() * nk.WIDTH * 2):
            nk.conv_backward(x.numpy(), ctx.pitch, w.numpy(), b.numpy(), pre.numpy(), gy.numpy(), ctx.silu,
                             dx.numpy(), dw_part.numpy(), db_part.numpy(), dpre.numpy())
        dw = dw_part.sum(0)[:, ctx.pad:]
        return dx, dw, db_part.sum(0) if has_bias else None, dpre[..., ctx.pad:] if has_state else None, None


def causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    activation: str | None = None,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Depthwise causal convolution, ``y_t = act(bias + sum_k weight[:, k] * x_{t - (K-1) + k})``, differentiable in
    every tensor argument.

    Arguments:
        x: ``(batch, channels, length)``, any strides; float32 or float64 (float16/bfloat16 are computed in float32
            and returned in their dtype).
        weight: ``(channels, width)`` taps (an ``nn.Conv1d(groups=channels)`` weight is ``weight[:, 0, :]``).
        bias: ``(channels,)`` or None.
        initial_state: ``(batch, channels, width - 1)``, the inputs before ``x`` (zeros if None).
        activation: None or ``"silu"`` (fused).
        backend: ``"numba"`` (CPU; widths up to 4, Mamba's; wider ones run the reference), ``"torch"``
            (:func:`causal_conv1d_ref`) or ``"auto"`` (numba on CPU, torch on CUDA); ``"triton"`` runs the
            reference on the device (this op has no Triton kernel).

    Returns:
        ``y`` ``(batch, channels, length)``, contiguous. The next call's ``initial_state`` is the last
        ``width - 1`` inputs of ``[initial_state, x]``.
    """
    if isinstance(x, torch.Tensor) and x.dtype in HALF_DTYPES:
        x32, w32, b32, s32 = upcast_half(x, weight, bias, initial_state)
        return causal_conv1d(x32, w32, b32, s32, activation, backend=backend).to(x.dtype)
    _check(x, weight, bias, initial_state, activation)
    backend = resolve_backend(backend, x, weight, bias, initial_state)
    if backend == "triton":  # no Triton kernel: the reference runs on the device
        backend = "torch"
    if backend == "torch" or x.shape[-1] == 0 or weight.shape[1] > 4:  # the Numba kernels have width <= 4
        return causal_conv1d_ref(x, weight, bias, initial_state, activation)
    return _CausalConvFn.apply(x, weight, bias, initial_state, activation == "silu")
