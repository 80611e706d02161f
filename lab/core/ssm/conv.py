"""Pieces shared by the selective layers (:mod:`.mamba`, :mod:`.mamba2`): the causal depthwise convolution in its
parallel and step forms, and the inverse softplus of the Δ bias initialisation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import kernels

__all__ = ["causal_conv", "conv_step", "inverse_softplus"]


def causal_conv(x: torch.Tensor, conv: nn.Conv1d, prefix: torch.Tensor | None,
                activation: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal convolution of ``x`` ``(b, c, L)`` after ``prefix`` ``(b, c, k-1)`` (zeros if None).

    With ``activation="silu"`` the convolution and its SiLU run in one fused kernel (:func:`kernels.causal_conv1d`,
    which also returns a contiguous output); without, ``F.conv1d``.

    Returns the output ``(b, c, L)`` and the last ``k - 1`` inputs (the next prefix).
    """
    k = conv.kernel_size[0]
    length = x.shape[-1]
    if activation is not None:
        y = kernels.causal_conv1d(x, conv.weight[:, 0, :], conv.bias, prefix, activation)
        full = x if prefix is None or length >= k - 1 else torch.cat([prefix, x], dim=-1)
        if full.shape[-1] < k - 1:
            full = torch.cat([x.new_zeros(x.shape[0], x.shape[1], k - 1 - full.shape[-1]), full], dim=-1)
        return y, full[..., full.shape[-1] - (k - 1):]
    if prefix is None and length >= k - 1:
        # zero padding inside the convolution instead of a concatenated copy of x; the k - 1 outputs past the end
        # are dropped (the output is a view; the next element-wise op makes it dense)
        y = F.conv1d(x, conv.weight, conv.bias, padding=k - 1, groups=conv.groups)[..., :length]
        return y, x[..., length - (k - 1):]
    if prefix is None:
        prefix = x.new_zeros(x.shape[0], x.shape[1], k - 1)
    full = torch.cat([prefix, x], dim=-1)  # (b, c, k-1+L)
    y = F.conv1d(full, conv.weight, conv.bias, groups=conv.groups)
    return y, full[..., full.shape[-1] - (k - 1):]


def conv_step(x_t: torch.Tensor, conv: nn.Conv1d, prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of :func:`causal_conv`: ``x_t`` ``(b, c)``, ``prefix`` ``(b, c, k-1)``."""
    window = torch.cat([prefix, x_t[..., None]], dim=-1)  # (b, c, k)
    y = (window * conv.weight[:, 0, :]).sum(-1) + conv.bias
    return y, window[..., 1:]


def inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))
