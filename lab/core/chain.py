"""ChainGPT's layer (:class:`ChainBlock`) and its two token mixers: the multi-substep state layer ("RWKV-Product") and
state-guided sparse attention. ``lab.methods.chaingpt`` loops the block; the arena's zoo (:mod:`lab.core.zoo`) stacks
it.

The two mixers map ``(batch, length, d_model) -> (batch, length, d_model)`` and are causal. The state layer runs its
recurrence through :func:`kernels.delta_rule` (``num_householder = M`` substeps per token, a diagonal log-decay
gate per substep); the attention layer reads a local window of tokens plus global anchors into which the state layer
has written its segment summaries.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import kernels
from lab.checks import bad_value

__all__ = ["ChainBlock", "MultiSubstepState", "StateGuidedAttention", "sparse_mask"]


def _shift(x: torch.Tensor, prev: torch.Tensor | None = None) -> torch.Tensor:
    """The previous token's features (RWKV's token shift): ``(b, L, d) -> (b, L, d)``, ``prev`` ``(b, d)`` or 0 in
    front."""
    first = torch.zeros_like(x[:, :1]) if prev is None else prev[:, None]
    return torch.cat([first, x[:, :-1]], dim=1)


class MultiSubstepState(nn.Module):
    """The multi-substep (multi-rank) state update of one layer.

    Per head the state ``S`` is ``(d_head, d_head)``; for every token ``t``::

        for j < M:  S <- S diag(α_tj);  S <- S (I - β_tj k_tj k_tjᵀ) + β_tj v_tj k_tjᵀ;   o_t = S q_t

    so the transition is ``A(x_t) = Π_j diag(α_tj) (I - β_tj k_tj k_tjᵀ) = Π_j (diag(α_tj) - β_tj (α_tj ⊙ k_tj)
    k_tjᵀ)``: a diagonal per substep plus a rank-one part each, the paper's ``Π_j (diag(a_tj) - β_j k_tj k_tjᵀ)`` up
    to the decay of the key on the left (Kimi Delta Attention's form, which keeps the chunked WY form of
    :func:`kernels.delta_rule`). Keys, values and gates of substep ``j`` are a shared base plus a low-rank delta,
    ``k_tj = normalize(W_k x̃_t + U_j V_j x̃_t)`` (``rank(U_j V_j) = delta_rank``), the same for ``v`` without the
    normalisation; ``x̃_t`` mixes ``x_t`` with ``x_{t-1}`` (RWKV's token shift, learned per channel), so a key can
    bind the token before it. ``β_tj = 2 σ(w_βj · x_t)`` in ``(0, 2)``: above 1 the Householder factor has the
    eigenvalue ``1 - β < 0`` (negative eigenvalues, needed for state tracking);
    ``log α_tj = -softplus(W_α x_t + U^α_j V^α_j x_t + b)`` per channel, ``b`` set so that the decay rates
    ``softplus(b)`` start log-uniform on [1e-3, 1e-1] across channels (Mamba's Δ initialisation: some channels
    remember for ~1000 tokens, some for ~10).

    Arguments:
        d_model: features (a multiple of ``n_heads``). n_heads: heads.
        substeps: ``M``, Householder substeps per token. delta_rank: rank of each substep's key/value delta.
    """

    def __init__(self, d_model: int, n_heads: int, substeps: int, delta_rank: int):
        super().__init__()
        if d_model % n_heads:
            raise bad_value("d_model", d_model, f"a multiple of n_heads={n_heads}")
        self.h, self.m, self.e = n_heads, substeps, d_model // n_heads
        self.mix = nn.Parameter(torch.full((2, d_model), 0.5))  # token-shift share of x_{t-1} for keys, values
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        lowrank = lambda: nn.Sequential(nn.Linear(d_model, delta_rank, bias=False),  # noqa: E731
                                        nn.Linear(delta_rank, d_model, bias=False))
        self.k_delta = nn.ModuleList(lowrank() for _ in range(substeps))
        self.v_delta = nn.ModuleList(lowrank() for _ in range(substeps))
        self.beta = nn.Linear(d_model, substeps * n_heads)
        self.decay = nn.Linear(d_model, d_model)  # the shared base of the diagonal gates
        self.decay_delta = nn.ModuleList(lowrank() for _ in range(substeps))
        with torch.no_grad():  # decay rates log-uniform on [1e-3, 1e-1] (Mamba's Δ range)
            rates = torch.exp(torch.linspace(math.log(1e-3), math.log(1e-1), d_model))
            self.decay.bias.copy_(torch.log(torch.expm1(rates)))
        self.out = nn.Linear(d_model, d_model, bias=False)

    def _inputs(self, x: torch.Tensor, prev: torch.Tensor | None = None):
        """Kernel inputs for ``x`` ``(b, L, d)``: q ``(b, h, L, e)``, k, v ``(b, h, L, M, e)``, β ``(b, h, L, M)``,
        gate ``(b, h, L, M, e)`` (log α, a diagonal per substep)."""
        xs = _shift(x, prev)
        xk = x + self.mix[0] * (xs - x)
        xv = x + self.mix[1] * (xs - x)
        q = F.normalize(rearrange(self.q(x), "b l (h e) -> b h l e", h=self.h), dim=-1)
        kb, vb = self.k(xk), self.v(xv)  # (b, L, d): the shared bases
        k = torch.stack([kb + dk(xk) for dk in self.k_delta], dim=2)  # (b, L, M, d)
        v = torch.stack([vb + dv(xv) for dv in self.v_delta], dim=2)
        k = F.normalize(rearrange(k, "b l m (h e) -> b h l m e", h=self.h), dim=-1)
        v = rearrange(v, "b l m (h e) -> b h l m e", h=self.h)
        beta = 2 * torch.sigmoid(rearrange(self.beta(x), "b l (m h) -> b h l m", h=self.h))
        gb = self.decay(x)
        gate = -F.softplus(torch.stack([gb + dg(x) for dg in self.decay_delta], dim=2))  # (b, L, M, d)
        gate = rearrange(gate, "b l m (h e) -> b h l m e", h=self.h)
        return q, k, v, beta, gate

    def _read(self, o: torch.Tensor) -> torch.Tensor:
        """Per-head RMS norm, heads joined, output projection: ``(b, h, ..., e) -> (b, ..., d)``."""
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.out(rearrange(o, "b h ... e -> b ... (h e)"))

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """``x`` ``(batch, length, d)`` -> ``(batch, length, d)``; ``state`` = ``(S (b, h, e, e), x_prev (b, d))``
        or None (zeros)."""
        S0, prev = (None, None) if state is None else state
        q, k, v, beta, gate = self._inputs(x, prev)
        out = kernels.delta_rule(q, k, v, beta, gate=gate, initial_state=S0, num_householder=self.m, chunk_size=16,
                                 output_final_state=return_state)
        o, S = out if return_state else (out, None)
        y = self._read(o)
        return (y, (S, x[:, -1])) if return_state else y

    def initial_state(self, batch: int):
        w = self.q.weight
        return w.new_zeros(batch, self.h, self.e, self.e), w.new_zeros(batch, self.h * self.e)

    def step(self, x_t: torch.Tensor, state):
        """One token: ``x_t`` ``(batch, d)`` -> ``(y_t (batch, d), new state)`` (:func:`kernels.delta_rule_step`)."""
        S, prev = state
        q, k, v, beta, gate = self._inputs(x_t[:, None], prev)
        o, S = kernels.delta_rule_step(S, q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0], gate[:, :, 0])
        return self._read(o), (S, x_t)


@lru_cache(maxsize=64)
def sparse_mask(length: int, window: int, every: int, anchors: bool) -> torch.Tensor:
    """Which keys each query may read: ``(length, length + n_anchors)`` bool.

    Columns ``0..length-1`` are tokens (query ``t`` reads ``t - window < s <= t``); the ``n_anchors = length //
    every`` columns after them are the anchors, anchor ``m`` written at position ``p_m = (m + 1) every - 1`` and
    readable from ``t >= p_m`` on (all False when ``anchors`` is off).
    """
    t = torch.arange(length)
    tokens = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - window)
    ends = torch.arange(every - 1, max(length, every - 1), every)  # none before the first segment ends
    anchor = (ends[None, :] <= t[:, None]) & anchors
    return torch.cat([tokens, anchor], dim=1)


class StateGuidedAttention(nn.Module):
    """State-guided sparse attention: a local window plus global anchors written by the state layer (not top-k).

    Query ``t`` attends, in one softmax, to the tokens ``t - window < s <= t`` and to every anchor written so far.
    Anchor ``m`` sits at the end of segment ``m`` (every ``every`` tokens); its key and value are projections of the
    state layer's output there, ``a_m = y^state_{p_m}``: the summary the recurrent state writes of the prefix up to
    the segment's end. The paper's cost is ``O(T (W + T / G))``; at our lengths a dense masked softmax
    (:func:`sparse_mask`) is simpler and computes the same outputs.

    Arguments:
        d_model, n_heads: sizes. window: ``W`` tokens (the query's own included). every: ``G``, tokens per segment.
        anchors: read the anchors (off: the window alone, the control).
    """

    def __init__(self, d_model: int, n_heads: int, window: int, every: int, anchors: bool = True):
        super().__init__()
        self.h, self.window, self.every, self.anchors = n_heads, window, every, anchors
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.anchor_kv = nn.Linear(d_model, 2 * d_model) if anchors else None
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, summaries: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, length, d)`` (normalised), ``summaries`` ``(batch, length, d)`` (the state layer's output)
        -> ``(batch, length, d)``."""
        L = x.shape[1]
        q, k, v = rearrange(self.qkv(x), "b l (three h e) -> three b h l e", three=3, h=self.h)
        if self.anchors and L >= self.every:
            ak, av = rearrange(self.anchor_kv(summaries[:, self.every - 1::self.every]),
                               "b m (two h e) -> two b h m e", two=2, h=self.h)  # (b, h, n_anchors, e)
            k, v = torch.cat([k, ak], dim=2), torch.cat([v, av], dim=2)
        mask = sparse_mask(L, self.window, self.every, self.anchors)[:, : k.shape[2]].to(x.device)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (b, h, L, e)
        return self.out(rearrange(y, "b h l e -> b l (h e)"))


class ChainBlock(nn.Module):
    """One ChainGPT layer: ``x + State(norm x)``, ``x + SGSA(norm x; anchors from the state output)``,
    ``x + MLP(norm x)``; ``(batch, length, d) -> (batch, length, d)``.

    Arguments:
        d_model, n_heads: sizes. substeps, delta_rank: see :class:`MultiSubstepState`.
        window, every, anchors: see :class:`StateGuidedAttention`. mlp_ratio: MLP width / d_model.
    """

    def __init__(self, d_model: int, n_heads: int, *, substeps: int, delta_rank: int, window: int, every: int,
                 anchors: bool = True, mlp_ratio: int = 2):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(3))
        self.state = MultiSubstepState(d_model, n_heads, substeps, delta_rank)
        self.attn = StateGuidedAttention(d_model, n_heads, window, every, anchors)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.state(self.norms[0](x))  # (b, L, d): also the segment summaries the anchors hold
        x = x + s
        x = x + self.attn(self.norms[1](x), s)
        return x + self.mlp(self.norms[2](x))
