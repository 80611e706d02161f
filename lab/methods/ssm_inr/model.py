"""LPNet-S3K and its baselines: one network per datum, overfitted to reconstruct it.

Every model maps a datum batch ``x`` ``(frames, channels, H, W)`` (an image is one frame) to its reconstruction of
the same shape. The LPNet family is an encoder-decoder: an encoder compresses the datum (or each level of its
Laplacian pyramid) into a latent grid ``(frames, latent_channels, H / F, W / F)`` and a light deconvolution decoder
reconstructs the datum from it. SIREN maps pixel coordinates to colours.

* :class:`S3K`: the structured state-space kernel, an SSM folded into one explicit strided kernel (``decays=False``:
  the control without the state-space structure, every decay at 1).
* :func:`laplacian_pyramid`, :func:`gaussian_pyramid`: the levels the LPNet encoders read.
* encoders: :class:`S3KEncoder`, :class:`ConvEncoder`, :class:`MambaEncoder` (lab.core's Mamba over the patch
  sequence), :class:`ConvNeXtEncoder`; :class:`Decoder`; :class:`LPNet`; :class:`Siren`.
* :func:`build`: a variant storing a budget of numbers (latent values + decoder; SIREN: its parameters), the
  encoder's width searched so that every encoder has the same parameter count; :func:`stored` counts them.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lab.core.ssm import Mamba
from lab.methods.ssm_inr.config import ENCODERS, INPUTS, VARIANTS

__all__ = ["ENCODERS", "INPUTS", "VARIANTS", "ConvEncoder", "ConvNeXtEncoder", "Decoder", "LPNet", "MambaEncoder",
           "S3K", "S3KEncoder", "Siren", "build", "decoder_width", "gaussian_pyramid", "laplacian_pyramid",
           "n_params", "split_channels", "stored"]

def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------------------------------------------------
# Pyramids
# ------------------------------------------------------------------------------------------------------------------
def _down(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 2)


def _up(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


def gaussian_pyramid(x: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """``[x, down(x), down²(x), ...]`` (``levels`` entries), ``x`` ``(b, c, H, W)``; level i is ``H / 2^i``."""
    out = [x]
    for _ in range(levels - 1):
        out.append(_down(out[-1]))
    return out


def laplacian_pyramid(x: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """Band-pass levels ``g_i - up(g_{i+1})`` and the low-pass ``g_{levels-1}`` last; summing back up
    (``g_i = l_i + up(g_{i+1})``) recovers ``x`` exactly."""
    g = gaussian_pyramid(x, levels)
    return [g[i] - _up(g[i + 1]) for i in range(levels - 1)] + [g[-1]]


# ------------------------------------------------------------------------------------------------------------------
# The S3K kernel
# ------------------------------------------------------------------------------------------------------------------
class S3K(nn.Module):
    """Structured state-space kernel: a diagonal real SSM run over each window of ``L`` samples per axis, keeping
    only its final state, as one strided convolution.

    In 1-D, ``h_k = Ā h_{k-1} + B̄ u_k`` over a window ``u_0..u_{L-1}`` ends in
    ``h_{L-1} = Σ_k Ā^{L-1-k} B̄ u_k``: a convolution with ``K = [Ā^{L-1}B̄ … ĀB̄ B̄]`` ``(N, C, L)`` at stride ``L``.
    In n-D the kernel is the outer product of one such decay per axis,
    ``K[n, c, k_1..k_d] = B̄[n, c] Π_j ā_{j,n}^{L-1-k_j}`` (a separable n-D scan's final corner state).
    ``ā_{j,n} = exp(Δ_{j,n} A_n)`` with real ``A_n = -exp(a_n) < 0`` (zero-order hold per axis,
    ``B̄ = B Π_j (1 - ā_{j,n}) / -A_n``). Input-adaptive B: each window's ``B̄`` is scaled per state by
    ``2 σ(W mean(window) + b)`` (our design: the gate is constant over a window, so it factors out of the sum).

    Arguments:
        c_in: channels C. n_state: states N (output channels). window: L (also the stride). ndim: 1, 2 or 3.
        adaptive: use the input-adaptive B. decays: ``False`` removes the state-space structure (the control):
        every ``ā = 1``, so the kernel is ``B`` constant over the window (a window mean, ``B / L^ndim``, then a 1x1
        map), with no decay or step size to learn.
    Shapes: ``x`` ``(b, C, *spatial)`` with every spatial size a multiple of L -> ``(b, N, *spatial / L)``.
    """

    def __init__(self, c_in: int, n_state: int, window: int, ndim: int = 2, adaptive: bool = True,
                 decays: bool = True):
        super().__init__()
        self.c_in, self.n_state, self.window, self.ndim = c_in, n_state, window, ndim
        self.structured = decays
        if decays:  # decays |ā| spread over (0.37, 0.97) per unit step: short and long memories across states
            self.a_log = nn.Parameter(torch.log(torch.linspace(0.03, 1.0, n_state)))
            self.dt_log = nn.Parameter(torch.zeros(ndim, n_state))
        self.B = nn.Parameter(torch.randn(n_state, c_in) / math.sqrt(c_in))
        self.gate = nn.Conv2d(c_in, n_state, 1) if adaptive and ndim == 2 else None
        if self.gate is not None:
            nn.init.zeros_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)

    def decays(self) -> torch.Tensor:
        """``ā`` ``(ndim, N)`` in (0, 1) (all ones without the state-space structure)."""
        if not self.structured:
            return torch.ones(self.ndim, self.n_state, dtype=self.B.dtype, device=self.B.device)
        A = -torch.exp(self.a_log)  # (N,)
        return torch.exp(torch.exp(self.dt_log) * A)

    def kernel(self) -> torch.Tensor:
        """The explicit kernel ``(N, C, L, ..., L)`` (``ndim`` trailing axes)."""
        if not self.structured:  # ā = 1: the same weight everywhere in the window
            return (self.B / self.window ** self.ndim).view(*self.B.shape, *([1] * self.ndim)).expand(
                *self.B.shape, *([self.window] * self.ndim))
        A = -torch.exp(self.a_log)  # (N,)
        abar = self.decays()  # (ndim, N)
        Bbar = self.B * torch.prod((1 - abar) / -A, dim=0)[:, None]  # (N, C)
        powers = torch.arange(self.window - 1, -1, -1, dtype=abar.dtype, device=abar.device)  # L-1 .. 0
        K = Bbar
        for j in range(self.ndim):
            decay = abar[j][:, None] ** powers  # (N, L): ā^{L-1-k}
            K = K[..., None] * decay.view(self.n_state, *([1] * (K.dim() - 1)), self.window)
        return K

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = (F.conv1d, F.conv2d, F.conv3d)[self.ndim - 1]
        h = conv(x, self.kernel(), stride=self.window)  # (b, N, *spatial / L)
        if self.gate is not None:
            h = h * 2 * torch.sigmoid(self.gate(F.avg_pool2d(x, self.window)))
        return h


class ChannelRMSNorm(nn.Module):
    """RMSNorm over the channels of ``(b, c, h, w)``."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels, 1, 1))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + self.eps) * self.weight


class InvertedBottleneck(nn.Module):
    """``x + W_2 SiLU(W_1 RMSNorm(x))`` with 1x1 convolutions ``d -> expand d -> d``."""

    def __init__(self, d: int, expand: int = 2):
        super().__init__()
        self.norm = ChannelRMSNorm(d)
        self.up = nn.Conv2d(d, expand * d, 1)
        self.down = nn.Conv2d(expand * d, d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.silu(self.up(self.norm(x))))


# ------------------------------------------------------------------------------------------------------------------
# Encoders: one branch per input level, each (b, C, H / 2^i, W / 2^i) -> (b, d_out, H / F, W / F)
# ------------------------------------------------------------------------------------------------------------------
class S3KEncoder(nn.Module):
    """S3K (stride ``L``) -> trailing 1x1 conv -> inverted bottleneck -> 1x1 to ``d_out``; ``stack`` > 1 splits the
    stride over several S3K layers (``L / 2^(stack-1)``, then 2, 2, ...). ``decays=False``: the control without
    the state-space structure (:class:`S3K` with every ``ā = 1``)."""

    def __init__(self, c_in: int, width: int, d_out: int, stride: int, stack: int = 1, decays: bool = True):
        super().__init__()
        strides = [stride // 2 ** (stack - 1)] + [2] * (stack - 1)
        layers: list[nn.Module] = []
        c = c_in
        for s in strides:
            layers += [S3K(c, width, s, decays=decays), nn.Conv2d(width, width, 1), InvertedBottleneck(width)]
            c = width
        self.body = nn.Sequential(*layers, nn.Conv2d(width, d_out, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class ConvEncoder(nn.Module):
    """A plain strided convolution (kernel = stride ``L``) -> inverted bottleneck -> 1x1 to ``d_out``."""

    def __init__(self, c_in: int, width: int, d_out: int, stride: int, stack: int = 1):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c_in, width, stride, stride=stride), InvertedBottleneck(width),
                                  nn.Conv2d(width, d_out, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class MambaEncoder(nn.Module):
    """Patches of ``L x L`` -> linear to ``width`` -> a residual Mamba block over the patch sequence (raster order)
    -> RMSNorm -> linear to ``d_out``."""

    def __init__(self, c_in: int, width: int, d_out: int, stride: int, stack: int = 1, d_state: int = 8):
        super().__init__()
        self.stride = stride
        self.embed = nn.Linear(c_in * stride * stride, width)
        self.norm_in = nn.RMSNorm(width)
        self.mamba = Mamba(width, d_state)
        self.norm_out = nn.RMSNorm(width)
        self.out = nn.Linear(width, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2] // self.stride, x.shape[-1] // self.stride
        tokens = rearrange(x, "b c (h p) (w q) -> b (h w) (c p q)", p=self.stride, q=self.stride)
        z = self.embed(tokens)  # (b, h w, width)
        z = z + self.mamba(self.norm_in(z))
        z = self.out(self.norm_out(z))  # (b, h w, d_out)
        return rearrange(z, "b (h w) d -> b d h w", h=h, w=w)


class ConvNeXtBlock(nn.Module):
    """``x + W_2 GELU(W_1 LayerNorm(dwconv7x7(x)))`` (ConvNeXt's block, expansion 4)."""

    def __init__(self, d: int):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.GroupNorm(1, d)
        self.up = nn.Conv2d(d, 4 * d, 1)
        self.down = nn.Conv2d(4 * d, d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(self.dw(x)))))


class ConvNeXtEncoder(nn.Module):
    """ConvNeXt-style: per factor 2 of the stride, a 2x2 stride-2 downsampling conv and a ConvNeXt block."""

    def __init__(self, c_in: int, width: int, d_out: int, stride: int, stack: int = 1):
        super().__init__()
        layers: list[nn.Module] = []
        c = c_in
        for _ in range(int(math.log2(stride))):
            layers += [nn.Conv2d(c, width, 2, stride=2), ConvNeXtBlock(width)]
            c = width
        self.body = nn.Sequential(*layers, nn.Conv2d(c, d_out, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


_ENCODER_CLASSES = {"s3k": S3KEncoder, "s3k_nodecay": partial(S3KEncoder, decays=False), "conv": ConvEncoder,
                    "mamba": MambaEncoder, "convnext": ConvNeXtEncoder}


def split_channels(total: int, parts: int) -> list[int]:
    """``total`` channels over ``parts`` branches, as evenly as possible (the first get the remainder)."""
    return [total // parts + (i < total % parts) for i in range(parts)]


class Decoder(nn.Module):
    """Light deconvolution decoder: 1x1 to ``width``, ``log2 F`` x [4x4 stride-2 transposed conv, SiLU], 3x3 conv to
    the datum's channels. ``(b, latent, H / F, W / F) -> (b, C, H, W)``."""

    def __init__(self, latent: int, width: int, c_out: int, factor: int):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(latent, width, 1)]
        for _ in range(int(math.log2(factor))):
            layers += [nn.ConvTranspose2d(width, width, 4, stride=2, padding=1), nn.SiLU()]
        layers.append(nn.Conv2d(width, c_out, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(z) + 0.5


class LPNet(nn.Module):
    """Encoder branches over the pyramid's levels, their latents concatenated, one decoder.

    Arguments:
        encoder: ``s3k``, ``s3k_nodecay``, ``conv``, ``mamba`` or ``convnext``. inputs: ``laplacian``,
        ``gaussian`` or ``none``.
        levels: pyramid levels (``none``: one branch on the datum). factor: F, the latent grid is ``H / F``.
        latent: latent channels in all (split over the branches). width: encoder width. dec_width: decoder width.
    Shapes: ``x`` ``(b, C, H, W)`` -> ``(b, C, H, W)``; :meth:`encode` -> ``(b, latent, H / F, W / F)``.
    """

    def __init__(self, encoder: str, inputs: str, *, channels: int, levels: int, factor: int, latent: int,
                 width: int, dec_width: int, stack: int = 1, d_state: int = 8):
        super().__init__()
        self.inputs = inputs
        self.levels = 1 if inputs == "none" else levels
        kwargs = {"d_state": d_state} if encoder == "mamba" else {}
        self.branches = nn.ModuleList(
            _ENCODER_CLASSES[encoder](channels, width, d, factor // 2 ** i, stack, **kwargs)
            for i, d in enumerate(split_channels(latent, self.levels)))
        self.decoder = Decoder(latent, dec_width, channels, factor)

    def pyramid(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.inputs == "laplacian":
            return laplacian_pyramid(x, self.levels)
        if self.inputs == "gaussian":
            return gaussian_pyramid(x, self.levels)
        return [x]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([enc(level) for enc, level in zip(self.branches, self.pyramid(x))], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encode(x))

    def encoder_params(self) -> int:
        """Parameters of the encoder branches (not stored: they only produce the latent)."""
        return sum(n_params(b) for b in self.branches)


class Siren(nn.Module):
    """Coordinate MLP with sine activations (Sitzmann et al. 2020): ``(t, y, x)`` or ``(y, x)`` in [-1, 1] ->
    colour, ``sin(ω0 (W h + b))`` in every hidden layer, a linear output. ``forward(x)`` reads only ``x``'s shape
    ``(frames, C, H, W)`` and returns the reconstruction of that shape."""

    def __init__(self, channels: int, width: int, *, depth: int = 3, omega: float = 30.0, video: bool = False):
        super().__init__()
        self.omega, self.video = omega, video
        d_in = 3 if video else 2
        self.hidden = nn.ModuleList([nn.Linear(d_in, width)] + [nn.Linear(width, width) for _ in range(depth - 1)])
        self.out = nn.Linear(width, channels)
        with torch.no_grad():
            self.hidden[0].weight.uniform_(-1 / d_in, 1 / d_in)
            bound = math.sqrt(6 / width) / omega
            for layer in [*self.hidden[1:], self.out]:
                layer.weight.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, _, H, W = x.shape
        axes = [torch.linspace(-1, 1, n, device=x.device) for n in (t, H, W)]
        grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # (t, H, W, 3)
        coords = grid if self.video else grid[..., 1:]
        h = coords
        for layer in self.hidden:
            h = torch.sin(self.omega * layer(h))
        return rearrange(self.out(h), "t h w c -> t c h w") + 0.5


# ------------------------------------------------------------------------------------------------------------------
# Building a variant at a parameter budget
# ------------------------------------------------------------------------------------------------------------------
def decoder_width(budget: int, latent: int, channels: int, factor: int) -> int:
    """The largest decoder width whose decoder has at most ``budget`` parameters (at least 2)."""
    width = 2
    while n_params(Decoder(latent, width + 1, channels, factor)) <= budget:
        width += 1
    return width


def stored(model: nn.Module, latent_values: int) -> int:
    """Numbers needed to reproduce the datum: the decoder's parameters and the latent's values (LPNet), all of the
    parameters (SIREN)."""
    return n_params(model.decoder) + latent_values if isinstance(model, LPNet) else n_params(model)


def build(variant: str, budget: int, *, channels: int, levels: int, factor: int, latent: int, latent_values: int,
          enc_budget: int, d_state: int = 8, video: bool = False, omega: float = 30.0) -> nn.Module:
    """The ``variant``'s model storing about ``budget`` numbers.

    LPNet: what is stored is the latent (``latent_values`` numbers: ``latent`` channels on the grid, every frame)
    and the decoder, the largest that fits in ``budget - latent_values`` (the same decoder for every LPNet
    variant, so their stored counts are equal); the encoder is not stored, and its width is chosen so that it has
    about ``enc_budget`` parameters (the same for every encoder; one step of three Mamba encoders' width costs
    ~1000 parameters, so at ~1500 it lands ~11% off). SIREN stores its parameters: its width fills what the
    LPNet variants store (``budget`` less the decoder's last incomplete width step).
    Draws initial weights from torch's global generator (seed it first)."""
    encoder, inputs, stack = VARIANTS[variant]
    if budget - latent_values < n_params(Decoder(latent, 2, channels, factor)):
        raise ValueError(f"budget={budget} leaves no decoder beside the {latent_values} latent values")
    dec = decoder_width(budget - latent_values, latent, channels, factor)
    if encoder == "siren":  # as many numbers as every LPNet stores (the decoder's width steps are coarse)
        target = n_params(Decoder(latent, dec, channels, factor)) + latent_values
        return _fill(target, lambda w: Siren(channels, w, omega=omega, video=video), n_params,
                     key=("siren", channels, video, target))
    return _fill(enc_budget, lambda w: LPNet(encoder, inputs, channels=channels, levels=levels, factor=factor,
                                             latent=latent, width=w, dec_width=dec, stack=stack, d_state=d_state),
                 lambda m: m.encoder_params(),
                 key=(encoder, inputs, channels, levels, factor, latent, dec, stack, d_state, enc_budget))


#: the width each search found, by what determines it (a run builds each model again when it loads its weights)
_WIDTHS: dict[tuple, int] = {}


def _fill(budget: int, make, count, key: tuple | None = None) -> nn.Module:
    """``make(w)`` at the width whose ``count`` is closest to ``budget`` (the search remembered under ``key``:
    every parameter count ``make`` depends on, and ``budget``)."""
    if key is not None and key in _WIDTHS:
        return make(_WIDTHS[key])
    with torch.random.fork_rng(devices=[]):  # the search leaves the global generator where it was
        lo, hi = 1, 2
        while count(make(hi)) < budget and hi < 4096:
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # the smallest width at or above the budget, then the closer of it and the one below
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if count(make(mid)) < budget else (lo, mid)
        best = min((lo, hi), key=lambda w: abs(count(make(w)) - budget))
    if key is not None:
        _WIDTHS[key] = best
    return make(best)
