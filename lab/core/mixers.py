r"""Token mixers beside the state space layers of :mod:`lab.core.ssm`: a gated diagonal linear RNN, the gated delta
rule, and the classic GRU and LSTM, all with the SSM layers' interface.

Every mixer maps ``(batch, length, d_model) -> (batch, length, d_model)`` and has the two forms of
:mod:`lab.core.ssm`: ``forward(x, state=None, return_state=False)`` (the parallel form) and
``step(x_t, state) -> (y_t, state)`` (one token), with ``initial_state(batch)``. So each fits
:class:`lab.core.models.ResidualBlock` and the sequence models of :mod:`lab.core.zoo`.

* :class:`GatedDiagonal`: an input-gated diagonal linear recurrence with a real state per channel,
  ``h_t = a_t ⊙ h_{t-1} + v_t``, ``y = W_o (h_t ⊙ silu(g_t))``; its recurrence runs in :func:`kernels.linear_scan`.
  With ``negative=False`` the gate is ``a_t = σ(w_a x_t + b_a)`` in (0, 1) (Mamba's and the gated linear RNNs'
  range); with ``negative=True`` it is ``a_t = 2σ(·) - 1`` in (-1, 1). Grazzi et al. (2025, "Unlocking state-tracking
  in linear RNNs through negative eigenvalues") prove that a diagonal recurrence whose eigenvalues stay in [0, 1)
  cannot solve parity at arbitrary length, and that allowing (-1, 1) makes parity one step: ``a_t = -1`` on a one,
  ``+1`` on a zero. The two settings share every other line, so the pair is an ablation of that one property.
* :class:`GatedDeltaNet`: the gated delta rule (Yang, Kautz & Hatamizadeh 2025, "Gated delta networks") on
  :func:`kernels.delta_rule`: per head a matrix state ``S`` ``(d_head, d_head)``,
  ``S_t = α_t S_{t-1} (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ``, ``o_t = S_t q_t``, keys and queries L2-normalised,
  ``α_t = exp(-softplus(·))``. ``β_t = σ(·)`` in (0, 1) by default; ``negative=True`` takes ``β_t = 2σ(·)`` in (0, 2),
  so the Householder factor has the eigenvalue ``1 - β_t < 0`` (the same paper's extension to the delta rule, and
  DeltaProduct's): a non-diagonal transition that can also reflect.
* :class:`RNN`: ``torch.nn.GRU`` or ``torch.nn.LSTM`` (one layer) as a mixer, for the classic non-linear baselines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import kernels
from lab.checks import bad_value

__all__ = ["GatedDiagonal", "GatedDeltaNet", "RNN"]


class GatedDiagonal(nn.Module):
    """Input-gated diagonal linear RNN with a real state of ``d_state`` channels (module docstring).

    Arguments:
        d_model: features. d_state: state channels (default ``2 d_model``).
        negative: gates in (-1, 1) instead of (0, 1).
    """

    def __init__(self, d_model: int, d_state: int | None = None, *, negative: bool = False):
        super().__init__()
        self.d_model, self.d_state, self.negative = d_model, d_state or 2 * d_model, negative
        self.in_proj = nn.Linear(d_model, 3 * self.d_state)
        with torch.no_grad():  # gates start near 1 (long memory), as the gated linear RNNs initialise them
            self.in_proj.bias[: self.d_state].uniform_(1.0, 4.0)
        self.out_proj = nn.Linear(self.d_state, d_model)

    def _gates(self, x: torch.Tensor):
        a, v, g = self.in_proj(x).chunk(3, dim=-1)
        a = 2 * torch.sigmoid(a) - 1 if self.negative else torch.sigmoid(a)
        return a, v, g

    def initial_state(self, batch: int) -> torch.Tensor:
        return self.out_proj.weight.new_zeros(batch, self.d_state)

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """``x`` ``(batch, length, d_model)``; ``state`` ``(batch, d_state)`` or None."""
        a, v, g = self._gates(x)
        h = kernels.linear_scan(a.contiguous(), v.contiguous(), state, dim=1)  # (b, L, d_state)
        y = self.out_proj(h * F.silu(g))
        return (y, h[:, -1]) if return_state else y

    def step(self, x_t: torch.Tensor, state: torch.Tensor):
        a, v, g = self._gates(x_t)
        h = a * state + v
        return self.out_proj(h * F.silu(g)), h


class GatedDeltaNet(nn.Module):
    """The gated delta rule with ``n_heads`` heads of ``d_model / n_heads`` channels (module docstring).

    Arguments:
        d_model: features (a multiple of ``n_heads``). n_heads: heads.
        negative: ``β`` in (0, 2) (negative eigenvalues) instead of (0, 1).
        chunk_size: tokens per chunk of the WY form.
    """

    def __init__(self, d_model: int, n_heads: int = 2, *, negative: bool = False, chunk_size: int = 16):
        super().__init__()
        if d_model % n_heads:
            raise bad_value("d_model", d_model, f"a multiple of n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.negative, self.chunk_size = negative, chunk_size
        self.qkvg = nn.Linear(d_model, 4 * d_model, bias=False)  # q, k, v and the output gate
        self.beta_alpha = nn.Linear(d_model, 2 * n_heads)
        with torch.no_grad():  # decay rates softplus(b) log-uniform in [1e-3, 1e-1] across heads (Mamba's Δ init)
            rates = torch.exp(torch.linspace(torch.log(torch.tensor(1e-3)), torch.log(torch.tensor(1e-1)), n_heads))
            self.beta_alpha.bias[n_heads:] = torch.log(torch.expm1(rates))
        self.norm = nn.RMSNorm(self.d_head, eps=1e-5)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def _project(self, x: torch.Tensor):
        """``x`` ``(b, L, d)`` -> q, k, v ``(b, h, L, e)``, β and log α ``(b, h, L)``, output gate ``(b, L, d)``."""
        q, k, v, g = self.qkvg(x).chunk(4, dim=-1)
        q, k, v = (rearrange(t, "b l (h e) -> b h l e", h=self.n_heads) for t in (q, k, v))
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        beta, alpha = rearrange(self.beta_alpha(x), "b l (two h) -> two b h l", two=2)
        beta = (2 if self.negative else 1) * torch.sigmoid(beta)
        return q, k, v, beta, -F.softplus(alpha), g

    def _out(self, o: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``o`` ``(b, h, L, e)`` -> ``out_proj(rmsnorm(o) ⊙ silu(g))`` ``(b, L, d)``."""
        return self.out_proj(rearrange(self.norm(o), "b h l e -> b l (h e)") * F.silu(g))

    def initial_state(self, batch: int) -> torch.Tensor:
        return self.out_proj.weight.new_zeros(batch, self.n_heads, self.d_head, self.d_head)

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """``x`` ``(batch, length, d_model)``; ``state`` ``(batch, heads, d_head, d_head)`` or None."""
        q, k, v, beta, gate, g = self._project(x)
        o, S = kernels.delta_rule(q, k, v, beta, gate=gate, initial_state=state, output_final_state=True,
                                  chunk_size=self.chunk_size)
        y = self._out(o, g)
        return (y, S) if return_state else y

    def step(self, x_t: torch.Tensor, state: torch.Tensor):
        q, k, v, beta, gate, g = self._project(x_t[:, None])
        o, S = kernels.delta_rule_step(state, q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0], gate[:, :, 0])
        return self._out(o[:, :, None], g)[:, 0], S


class RNN(nn.Module):
    """A one-layer ``torch.nn.GRU`` (``cell="gru"``) or ``torch.nn.LSTM`` (``cell="lstm"``) of ``d_model`` units."""

    CELLS = {"gru": nn.GRU, "lstm": nn.LSTM}

    def __init__(self, d_model: int, cell: str = "gru"):
        super().__init__()
        if cell not in self.CELLS:
            raise bad_value("cell", cell, "one of " + ", ".join(self.CELLS))
        self.d_model, self.cell = d_model, cell
        self.rnn = self.CELLS[cell](d_model, d_model, batch_first=True)

    def initial_state(self, batch: int):
        h = self.rnn.weight_hh_l0.new_zeros(1, batch, self.d_model)
        return (h, h.clone()) if self.cell == "lstm" else h

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        y, new = self.rnn(x, state)
        return (y, new) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        y, new = self.rnn(x_t[:, None], state)
        return y[:, 0], new
