r"""Fourier neural operator (FNO) building blocks in 1-D and 2-D, channels first.

Li et al., "Fourier Neural Operator for Parametric Partial Differential Equations" (ICLR 2021). A Fourier layer
maps a field with ``width`` channels on a periodic grid to another:

    v' = σ( F^{-1}[ W_k · F[v]_k ]  +  P v + b ),      k in the lowest ``modes`` Fourier modes per axis,

where ``W_k`` is a learned complex ``width x width`` matrix per kept mode (the *spectral convolution*), ``P`` a
pointwise (1 x 1) linear map and σ the GELU. An FNO is a pointwise *lift* to ``width`` channels, a stack of Fourier
layers and a pointwise *projection* back to the output channels.

Shapes (``d`` = 1 or 2 spatial dimensions, fields indexed ``[..., y, x]`` as in :mod:`lab.datasets.pde`):

* :class:`SpectralConv`: ``(batch, in_channels, *spatial) -> (batch, out_channels, *spatial)``
* :class:`FourierLayer`: ``(batch, width, *spatial) -> (batch, width, *spatial)``
* :class:`FNO`:          ``(batch, in_channels, *spatial) -> (batch, out_channels, *spatial)``

The kept modes in 2-D are the two corners ``[:m, :m]`` and ``[-m:, :m]`` of the ``rfft2`` spectrum (positive and
negative ``y`` frequencies, non-negative ``x`` frequencies). Modes beyond the grid's Nyquist limit are dropped, so one
set of weights runs on any grid at least as fine as ``2 * modes`` points per axis.
"""

from __future__ import annotations

import torch
from torch import nn

from lab.checks import bad_value

__all__ = ["FNO", "FourierLayer", "SpectralConv", "count_parameters", "pointwise"]


def _check_dim(dim: int) -> int:
    if dim not in (1, 2):
        raise bad_value("dim", dim, "1 or 2")
    return dim


def pointwise(in_channels: int, out_channels: int, dim: int, *, bias: bool = True) -> nn.Module:
    """A 1 x 1 convolution: the same linear map at every grid point. ``(b, in, *s) -> (b, out, *s)``."""
    conv = nn.Conv1d if _check_dim(dim) == 1 else nn.Conv2d
    return conv(in_channels, out_channels, kernel_size=1, bias=bias)


class SpectralConv(nn.Module):
    """Spectral convolution: multiply the lowest ``modes`` Fourier modes by learned complex matrices.

    Arguments:
        in_channels, out_channels: channels.
        modes: Fourier modes kept per axis (``m``; in 2-D ``2m x m`` modes of the rfft2 spectrum).
        dim: spatial dimensions, 1 or 2.

    Shapes: ``(batch, in_channels, *spatial) -> (batch, out_channels, *spatial)``.
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int, dim: int = 1) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.modes, self.dim = in_channels, out_channels, modes, _check_dim(dim)
        if modes < 1:
            raise bad_value("modes", modes, "an integer >= 1")
        scale = 1.0 / (in_channels * out_channels)
        # real and imaginary parts in the last axis (complex parameters trip some optimisers and serialisers)
        corners = 1 if dim == 1 else 2  # 2-D: positive and negative y frequencies
        shape = (corners, in_channels, out_channels) + (modes,) * dim + (2,)
        self.weight = nn.Parameter(scale * torch.rand(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spatial = x.shape[-self.dim :]
        x_hat = torch.fft.rfftn(x, dim=tuple(range(-self.dim, 0)))  # (b, in, *fourier)
        w = torch.view_as_complex(self.weight)  # (corners, in, out, *modes)
        out = torch.zeros(x.shape[0], self.out_channels, *x_hat.shape[2:], dtype=x_hat.dtype, device=x.device)
        if self.dim == 1:
            m = min(self.modes, x_hat.shape[-1])
            out[..., :m] = torch.einsum("bix,iox->box", x_hat[..., :m], w[0, ..., :m])
        else:
            my = min(self.modes, spatial[0] // 2)
            mx = min(self.modes, x_hat.shape[-1])
            out[..., :my, :mx] = torch.einsum("biyx,ioyx->boyx", x_hat[..., :my, :mx], w[0, ..., :my, :mx])
            out[..., -my:, :mx] = torch.einsum("biyx,ioyx->boyx", x_hat[..., -my:, :mx], w[1, ..., :my, :mx])
        return torch.fft.irfftn(out, s=spatial, dim=tuple(range(-self.dim, 0)))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}, dim={self.dim}"


class FourierLayer(nn.Module):
    """One FNO layer: ``σ(SpectralConv(v) + pointwise(v))``; no activation when ``activation=False``.

    Shapes: ``(batch, width, *spatial) -> (batch, width, *spatial)``.
    """

    def __init__(self, width: int, modes: int, dim: int = 1, *, activation: bool = True) -> None:
        super().__init__()
        self.spectral = SpectralConv(width, width, modes, dim)
        self.linear = pointwise(width, width, dim)
        self.activation = nn.GELU() if activation else nn.Identity()

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return self.activation(self.spectral(v) + self.linear(v))


class FNO(nn.Module):
    """Fixed-depth FNO: lift, ``depth`` Fourier layers, a two-layer pointwise projection.

    Arguments:
        in_channels, out_channels: channels of the input and output fields.
        width: channels of the hidden fields.
        modes: Fourier modes kept per axis.
        depth: number of Fourier layers (the last one without activation, as in Li et al.).
        dim: spatial dimensions, 1 or 2.
        projection: hidden channels of the projection (default ``2 * width``).

    Shapes: ``(batch, in_channels, *spatial) -> (batch, out_channels, *spatial)``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        width: int,
        modes: int,
        depth: int,
        dim: int = 1,
        projection: int | None = None,
    ) -> None:
        super().__init__()
        if depth < 1:
            raise bad_value("depth", depth, "an integer >= 1")
        hidden = 2 * width if projection is None else projection
        self.lift = pointwise(in_channels, width, dim)
        self.layers = nn.ModuleList(
            FourierLayer(width, modes, dim, activation=i < depth - 1) for i in range(depth)
        )
        self.project = nn.Sequential(pointwise(width, hidden, dim), nn.GELU(), pointwise(hidden, out_channels, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.lift(x)  # (b, width, *s)
        for layer in self.layers:
            v = layer(v)
        return self.project(v)  # (b, out, *s)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars (a complex weight stored as two reals counts twice)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
