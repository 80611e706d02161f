"""The Mamba-2 block (Dao & Gu 2024): structured state space duality on ``kernels.ssd``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import kernels

from .conv import causal_conv, conv_step, inverse_softplus

__all__ = ["Mamba2"]


class Mamba2(nn.Module):
    """Mamba-2 block (SSD): scalar decay per head, matrix state ``(headdim, N)``, gated RMS norm.

    Per head ``h_t = exp(Δ_t A) h_{t-1} + Δ_t x_t B_tᵀ``, ``y_t = h_t C_t + D x_t``; then
    ``out_proj(rmsnorm(y · silu(z)))``. The scan is ``kernels.ssd`` (chunked).

    Arguments:
        d_model: features. d_state: ``N``. headdim: channels per head (``d_inner`` must be a multiple).
        d_conv: causal conv width. expand: ``d_inner / d_model``. ngroups: groups of heads sharing B and C.
        chunk_size: SSD chunk length.
    """

    RECURRENT = ("A_log", "D", "dt_bias")

    def __init__(self, d_model: int, d_state: int = 16, *, headdim: int = 16, d_conv: int = 4, expand: int = 2,
                 ngroups: int = 1, chunk_size: int = 32, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = expand * d_model
        if self.d_inner % headdim:
            raise ValueError(f"d_inner = {self.d_inner} must be a multiple of headdim = {headdim}")
        self.headdim, self.nheads, self.ngroups = headdim, self.d_inner // headdim, ngroups
        if self.nheads % ngroups:
            raise ValueError(f"ngroups = {ngroups} must divide the {self.nheads} heads")
        self.chunk_size = chunk_size
        self.conv_dim = self.d_inner + 2 * ngroups * d_state
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner + 2 * ngroups * d_state + self.nheads, bias=False)
        self.conv = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim)
        dt = torch.exp(torch.rand(self.nheads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(inverse_softplus(dt))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nheads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.norm = nn.RMSNorm(self.d_inner, eps=1e-5)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def initial_state(self, batch: int):
        w = self.D
        return (w.new_zeros(batch, self.conv_dim, self.d_conv - 1),
                w.new_zeros(batch, self.nheads, self.headdim, self.d_state))

    def _split(self, proj: torch.Tensor):
        return torch.split(proj, [self.d_inner, self.conv_dim, self.nheads], dim=-1)

    def _split_xbc(self, xbc: torch.Tensor):
        gn = self.ngroups * self.d_state
        x, B, C = torch.split(xbc, [self.d_inner, gn, gn], dim=-1)
        return x, B, C

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """Parallel form. ``x`` ``(batch, length, d_model)``; ``state`` as from :meth:`initial_state` or None."""
        z, xbc, dt = self._split(self.in_proj(x))
        conv_prefix, h0 = (None, None) if state is None else state
        xbc, conv_next = causal_conv(rearrange(xbc, "b l c -> b c l"), self.conv, conv_prefix)
        xs, B, C = self._split_xbc(F.silu(rearrange(xbc, "b c l -> b l c")))
        dt = F.softplus(dt + self.dt_bias)  # (b, L, heads)
        A = -torch.exp(self.A_log)
        out = kernels.ssd(
            rearrange(xs, "b l (h p) -> b l h p", p=self.headdim), dt, A,
            rearrange(B, "b l (g n) -> b l g n", g=self.ngroups),
            rearrange(C, "b l (g n) -> b l g n", g=self.ngroups),
            self.chunk_size, D=self.D, initial_states=h0, return_final_states=return_state,
        )
        y, h_last = out if return_state else (out, None)
        y = rearrange(y, "b l h p -> b l (h p)")
        y = self.out_proj(self.norm(y * F.silu(z)))
        return (y, (conv_next, h_last)) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        """One step: ``x_t`` ``(batch, d_model)``; ``state = (conv prefix, h (b, heads, headdim, N))``."""
        conv_prefix, h = state
        z, xbc, dt = self._split(self.in_proj(x_t))
        xbc, conv_prefix = conv_step(xbc, self.conv, conv_prefix)
        xs, B, C = self._split_xbc(F.silu(xbc))
        xs = rearrange(xs, "b (h p) -> b h p", p=self.headdim)
        y, h = kernels.ssd_step(h, xs, dt, -torch.exp(self.A_log),
                                rearrange(B, "b (g n) -> b g n", g=self.ngroups),
                                rearrange(C, "b (g n) -> b g n", g=self.ngroups),
                                D=self.D, dt_bias=self.dt_bias, dt_softplus=True)  # y (b, heads, headdim)
        y = rearrange(y, "b h p -> b (h p)")
        return self.out_proj(self.norm(y * F.silu(z))), (conv_prefix, h)
