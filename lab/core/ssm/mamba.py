"""The Mamba block (Gu & Dao 2023): a selective SSM on ``kernels.selective_scan``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import kernels

from .conv import causal_conv, conv_step, inverse_softplus

__all__ = ["Mamba"]


def _per_batch(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``weight @ x[i]`` for every batch element: ``(out, in)`` and ``(b, in, L)`` -> a contiguous ``(b, out, L)``.

    (``torch.matmul`` folds this case into one GEMM over a transposed copy of ``x`` and returns a transposed view;
    a batched GEMM over the broadcast weight reads ``x`` in place and writes the scan's layout.)
    """
    return torch.bmm(weight.expand(x.shape[0], -1, -1), x)


class _OutProj(torch.autograd.Function):
    """``y`` ``(b, d_inner, L)`` and ``weight`` ``(d_model, d_inner)`` -> ``(b, L, d_model)``: the out-projection
    straight into the block's output layout, each GEMM reading its transposed operand in place.

    (Autograd's own backward of ``bmm(y.transpose(1, 2), weight.t())`` returns ``dy`` as a transposed view, which
    the scan's backward then copies; this one writes ``dy`` in the scan's ``(b, d_inner, L)`` layout.)
    """

    @staticmethod
    def forward(ctx, y, weight):
        ctx.save_for_backward(y, weight)
        return torch.bmm(y.transpose(1, 2), weight.t().expand(y.shape[0], -1, -1))

    @staticmethod
    def backward(ctx, g):
        y, weight = ctx.saved_tensors
        gt = g.transpose(1, 2)  # (b, d_model, L), read in place
        dy = torch.bmm(weight.t().expand(y.shape[0], -1, -1), gt) if ctx.needs_input_grad[0] else None
        dw = torch.bmm(gt, y.transpose(1, 2)).sum(0) if ctx.needs_input_grad[1] else None
        return dy, dw


class Mamba(nn.Module):
    """Mamba (selective SSM) block: in-projection, causal conv, selective scan, SiLU gate, out-projection.

    ``dt, B, C`` depend on the input; per channel ``h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t``,
    ``y_t = (C_t · h_t + D u_t) · silu(z_t)``. The scan is ``kernels.selective_scan``.

    Arguments:
        d_model: features. d_state: ``N`` per channel. d_conv: causal conv width. expand: ``d_inner / d_model``.
        dt_rank: rank of the Δ projection (default ``ceil(d_model / 16)``).
        dt_min, dt_max: Δ initialised log-uniformly in this range (through the bias).
    """

    RECURRENT = ("A_log", "D")

    def __init__(self, d_model: int, d_state: int = 16, *, d_conv: int = 4, expand: int = 2,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = expand * d_model
        self.dt_rank = dt_rank or math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=False)
        self.conv = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=False)
        dt = torch.exp(torch.rand(self.d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(inverse_softplus(dt))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(
            self.d_inner, 1))  # (d_inner, N): S4D-real initialisation A = -(1..N)
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def initial_state(self, batch: int):
        w = self.D
        return (w.new_zeros(batch, self.d_inner, self.d_conv - 1), w.new_zeros(batch, self.d_inner, self.d_state))

    def _dt_B_C(self, u: torch.Tensor):
        """From the conv output ``u`` ``(..., d_inner)``: raw Δ ``(..., d_inner)``, B and C ``(..., N)``."""
        dbc = self.x_proj(u)
        dt, B, C = torch.split(dbc, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        return self.dt_proj(dt), B, C

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """Parallel form. ``x`` ``(batch, length, d_model)``; ``state`` as from :meth:`initial_state` or None.

        Everything runs in the scan's ``(batch, channels, length)`` layout: the four projections are ``W @ x``
        products per batch element (:func:`_per_batch`), which read their operand in place and write that layout, so
        no ``(batch, length, d_inner)`` activation is transposed into a copy, forward or backward; the out-projection
        reads the scan's output transposed and writes ``(batch, length, d_model)`` directly.
        """
        xz = _per_batch(self.in_proj.weight, x.transpose(1, 2))  # (b, 2 d_inner, L)
        u, z = xz.chunk(2, dim=1)  # (b, d_inner, L) each
        conv_prefix, h0 = (None, None) if state is None else state
        u, conv_next = causal_conv(u, self.conv, conv_prefix, "silu")  # fused conv and SiLU, contiguous
        dbc = _per_batch(self.x_proj.weight, u)  # (b, dt_rank + 2N, L)
        dt, B, C = torch.split(dbc, [self.dt_rank, self.d_state, self.d_state], dim=1)
        dt = _per_batch(self.dt_proj.weight, dt)  # (b, d_inner, L), before its bias and softplus
        A = -torch.exp(self.A_log)  # (d_inner, N)
        out = kernels.selective_scan(
            u, dt, A, B, C, self.D, z=z, delta_bias=self.dt_bias, delta_softplus=True, h0=h0,
            return_last_state=return_state,
        )
        y, h_last = out if return_state else (out, None)
        y = _OutProj.apply(y, self.out_proj.weight)  # (b, L, d_model): no transposing copy, forward or backward
        return (y, (conv_next, h_last)) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        """One step: ``x_t`` ``(batch, d_model)``; ``state = (conv prefix (b, d_inner, d_conv - 1),
        h (b, d_inner, N))``."""
        conv_prefix, h = state
        u, z = self.in_proj(x_t).chunk(2, dim=-1)  # (b, d_inner)
        u, conv_prefix = conv_step(u, self.conv, conv_prefix)
        u = F.silu(u)
        dt, B, C = self._dt_B_C(u)  # dt (b, d_inner) before its bias and softplus; B, C (b, N)
        h = h.clone()  # the kernel's step updates the state in place, as mamba's selective_state_update does
        y = kernels.selective_state_update(h, u, dt, -torch.exp(self.A_log), B, C, D=self.D, z=z,
                                           dt_bias=self.dt_bias, dt_softplus=True)  # (b, d_inner)
        return self.out_proj(y), (conv_prefix, h)
