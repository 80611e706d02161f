"""RATE and its baselines as offline-RL policies over (return-to-go, observation, action) tokens.

Every agent has two faces: a batched ``forward(rtg, obs, actions) -> logits (batch, T, n_actions)`` for training
(teacher forcing on whole trajectories), and a step interface for closed-loop rollouts (:func:`.env.rollout`):
``start(batch)``, ``act(state, rtg, obs) -> logits`` before each action, ``observe(state, action)`` after it. The
two agree (a test checks it): the step form is the batched one, token by token.

* :class:`RATE`: the trajectory is cut into segments of K steps (3K tokens). Segment n reads
  ``[M_n; tokens_n; M_n]`` with causal attention: the memory prefix is read by every token, the memory suffix sees
  the whole segment and its outputs are the written memory ``M~_{n+1}``. The Memory Retention Valve (MRV) lets the
  old memory choose what to keep. Two forms: :class:`OfficialValve`, the official code's
  ``M_{n+1} = MultiHead(Q = M_n, K = V = ReLU(M~_{n+1}))`` (query, key, value and output projections, nothing else),
  and :class:`MemoryValve`, the form this lab used first, ``FFN(MultiHead(...))`` with three LayerNorms. ``M_0`` is
  learned. ``detach=True`` cuts the gradient between segments as the official trainer does
  (``mem_tokens.detach()`` before each segment): every segment learns only from its own actions, and since a
  segment's written memory reaches a loss only through the next segment, the write path and the valve then get no
  gradient at all (a test checks it). ``detach=False`` back-propagates through every segment. In a rollout the
  memory is carried through every segment, however long the episode. ``valve=False`` passes ``M~_{n+1}`` straight
  on (the ablation).
* :class:`DecisionTransformer`: a causal transformer over the last ``context`` steps (a sliding window in a rollout).
* :class:`GRUPolicy`: behaviour cloning with a GRU over (observation, return-to-go, previous action).

The transformer is :class:`lab.core.transformer.Transformer` (pre-norm, no positional encoding); the valve is built
here (a cross-attention block that returns its attention weights).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lab.core.transformer import Transformer

__all__ = ["VALVES", "DecisionTransformer", "GRUPolicy", "MemoryValve", "OfficialValve", "RATE", "TokenEmbedding",
           "weighted_loss"]

#: the valve's forms: the official code's and the lab's first one
VALVES = ("official", "lab")


class TokenEmbedding(nn.Module):
    """Return-to-go (linear), observation (linear) and action (table) embeddings, plus one learned vector per
    token kind; ``steps(...)`` interleaves them as ``R_0, o_0, a_0, R_1, o_1, a_1, ...``."""

    def __init__(self, obs_dim: int, n_actions: int, d: int):
        super().__init__()
        self.rtg = nn.Linear(1, d)
        self.obs = nn.Linear(obs_dim, d)
        self.act = nn.Embedding(n_actions, d)
        self.kind = nn.Parameter(0.02 * torch.randn(3, d))

    def r(self, rtg: torch.Tensor) -> torch.Tensor:
        """``(...,)`` -> ``(..., d)``."""
        return self.rtg(rtg[..., None]) + self.kind[0]

    def o(self, obs: torch.Tensor) -> torch.Tensor:
        """``(..., obs_dim)`` -> ``(..., d)``."""
        return self.obs(obs) + self.kind[1]

    def a(self, actions: torch.Tensor) -> torch.Tensor:
        """``(...,)`` int64 -> ``(..., d)``."""
        return self.act(actions) + self.kind[2]

    def steps(self, rtg: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``rtg (b, T)``, ``obs (b, T, obs_dim)``, ``actions (b, T)`` -> tokens ``(b, 3T, d)``."""
        tokens = torch.stack([self.r(rtg), self.o(obs), self.a(actions)], dim=2)  # (b, T, 3, d)
        return rearrange(tokens, "b t k d -> b (t k) d")


def weighted_loss(logits: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``logits (b, T, A)`` against ``actions (b, T)``, weighted per step by ``weights (b, T)``
    (the final turn weighs more: it is the only decision that matters)."""
    ce = F.cross_entropy(logits.flatten(0, 1), actions.flatten(), reduction="none").view_as(weights)
    return (ce * weights).sum() / weights.sum()


class MemoryValve(nn.Module):
    """The lab's first Memory Retention Valve, ``M_{n+1} = FFN(MultiHead(Q = M_n, K = V = M~_{n+1}))`` with layer
    norms on the query, the keys/values and the FFN's input (the official code has neither the FFN nor the norms:
    :class:`OfficialValve`).

    The old memory is only the attention's query: what it holds reaches ``M_{n+1}`` only through what it reads from
    the written memory. No residual connection (a pre-norm block with ``y = M_n + MultiHead(...)`` would let ``M_n``
    pass straight through, a different model).

    ``forward(old (b, m, d), new (b, m, d)) -> (memory (b, m, d), weights (b, m, m))``: weights averaged over heads,
    row i: how much old memory token i reads from each written token.
    """

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.h = n_heads
        self.norm_q, self.norm_kv, self.norm_ff = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.kv, self.out = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, old: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = rearrange(self.q(self.norm_q(old)), "b m (h e) -> b h m e", h=self.h)
        k, v = rearrange(self.kv(self.norm_kv(new)), "b m (two h e) -> two b h m e", two=2, h=self.h)
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)  # (b, h, m, m)
        read = self.out(rearrange(w @ v, "b h m e -> b m (h e)"))  # MultiHead(Q = M_n, K = V = M~_{n+1})
        return self.ffn(self.norm_ff(read)), w.mean(1)


class OfficialValve(nn.Module):
    """The official code's Memory Retention Valve (``mha_mem_to_mem`` with ``mrv_act='relu'``):
    ``M_{n+1} = W_o MultiHead(Q = W_q M_n, K = W_k ReLU(M~_{n+1}), V = W_v ReLU(M~_{n+1}))``, four linear maps with
    biases, no norm, no FFN, no residual. Same interface as :class:`MemoryValve`."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.h = n_heads
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))

    def forward(self, old: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        new = F.relu(new)
        q, k, v = (rearrange(f(x), "b m (h e) -> b h m e", h=self.h)
                   for f, x in ((self.q, old), (self.k, new), (self.v, new)))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)  # (b, h, m, m)
        return self.out(rearrange(w @ v, "b h m e -> b m (h e)")), w.mean(1)


class RATE(nn.Module):
    """Recurrent Action Transformer with Memory (module docstring).

    Arguments:
        obs_dim, n_actions: the environment's. d_model, n_layers, n_heads: the transformer's.
        segment: K, steps per segment. n_memory: memory tokens. valve: the MRV (False: ``M_{n+1} = M~_{n+1}``).
        valve_form: ``official`` (:class:`OfficialValve`) or ``lab`` (:class:`MemoryValve`). detach: cut the
        gradient between segments in ``forward`` (the official trainer's truncation).
    """

    def __init__(self, obs_dim: int, n_actions: int, d_model: int, n_layers: int, n_heads: int, segment: int,
                 n_memory: int, valve: bool = True, valve_form: str = "official", detach: bool = True):
        super().__init__()
        if valve_form not in VALVES:
            raise ValueError(f"valve_form={valve_form!r} is not allowed; allowed: one of {', '.join(VALVES)}")
        self.K, self.m, self.detach = segment, n_memory, detach
        self.embed = TokenEmbedding(obs_dim, n_actions, d_model)
        self.body = Transformer(d_model, n_layers, n_heads, causal=True)
        self.head = nn.Linear(d_model, n_actions)
        self.memory0 = nn.Parameter(torch.randn(n_memory, d_model) / math.sqrt(d_model))
        self.valve = ({"official": OfficialValve, "lab": MemoryValve}[valve_form](d_model, n_heads) if valve
                      else None)

    def initial(self, batch: int) -> torch.Tensor:
        """``M_0`` for a batch: ``(batch, m, d)``."""
        return self.memory0.expand(batch, -1, -1)

    def update(self, memory: torch.Tensor, written: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``M_{n+1}`` from ``M_n`` and the written ``M~_{n+1}`` (both ``(b, m, d)``): through the valve, or
        straight without one; and the valve's attention weights ``(b, m, m)`` (None without a valve)."""
        if self.valve is None:
            return written, None
        return self.valve(memory, written)

    def segment(self, memory: torch.Tensor, tokens: torch.Tensor, write: bool = True):
        """One segment: read ``[M_n; tokens; M_n]`` (causal). Returns the token outputs ``(b, n, d)`` and
        ``M~_{n+1}`` (the memory suffix's outputs, ``(b, m, d)``; None when ``write`` is False: the suffix is left
        out, which changes nothing before it)."""
        parts = [memory, tokens, memory] if write else [memory, tokens]
        out = self.body(torch.cat(parts, 1))
        return out[:, self.m: self.m + tokens.shape[1]], (out[:, -self.m:] if write else None)

    def forward(self, rtg: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor, *,
                memories: list | None = None) -> torch.Tensor:
        """Teacher-forced logits of every step: ``rtg (b, T)``, ``obs (b, T, obs_dim)``, ``actions (b, T)`` ->
        ``(b, T, n_actions)``; the memory runs through ``ceil(T / K)`` segments (``memories`` collects
        ``M_0, M_1, ...``), detached between them when ``self.detach``."""
        tokens = self.embed.steps(rtg, obs, actions)  # (b, 3T, d)
        memory, logits, T = self.initial(len(rtg)), [], rtg.shape[1]
        for start in range(0, T, self.K):
            if memories is not None:
                memories.append(memory)
            more = start + self.K < T
            out, written = self.segment(memory, tokens[:, 3 * start: 3 * min(start + self.K, T)], write=more)
            logits.append(self.head(out[:, 1::3]))  # at each observation token
            if more:
                memory, _ = self.update(memory, written)
                if self.detach:
                    memory = memory.detach()
        return torch.cat(logits, 1)

    # -- step by step ------------------------------------------------------------------------------------------------
    def start(self, batch: int, record: bool = False) -> dict:
        return {"memory": self.initial(batch), "seg": [], "record": [] if record else None}

    def act(self, state: dict, rtg: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        state["seg"] += [self.embed.r(rtg)[:, None], self.embed.o(obs)[:, None]]
        out = self.body(torch.cat([state["memory"], *state["seg"]], 1))
        return self.head(out[:, -1])

    def observe(self, state: dict, action: torch.Tensor) -> None:
        state["seg"].append(self.embed.a(action)[:, None])
        if len(state["seg"]) == 3 * self.K:  # the segment is complete: write the memory, carry it on
            _, written = self.segment(state["memory"], torch.cat(state["seg"], 1))
            state["memory"], weights = self.update(state["memory"], written)
            state["seg"] = []
            if state["record"] is not None:
                state["record"].append({"memory": state["memory"].clone(),
                                        "weights": None if weights is None else weights.clone()})


class DecisionTransformer(nn.Module):
    """Decision Transformer over the last ``context`` steps (3 x context tokens).

    ``forward`` reads trajectories of at most ``context`` steps (training windows)."""

    def __init__(self, obs_dim: int, n_actions: int, d_model: int, n_layers: int, n_heads: int, context: int):
        super().__init__()
        self.context = context
        self.embed = TokenEmbedding(obs_dim, n_actions, d_model)
        self.body = Transformer(d_model, n_layers, n_heads, causal=True)
        self.head = nn.Linear(d_model, n_actions)

    def forward(self, rtg: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        if rtg.shape[1] > self.context:
            raise ValueError(f"a window of {rtg.shape[1]} steps is longer than the context ({self.context})")
        out = self.body(self.embed.steps(rtg, obs, actions))
        return self.head(out[:, 1::3])

    def start(self, batch: int, record: bool = False) -> dict:
        return {"tokens": [], "record": None}

    def act(self, state: dict, rtg: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        state["tokens"] += [self.embed.r(rtg)[:, None], self.embed.o(obs)[:, None]]
        window = state["tokens"][-(3 * self.context - 1):]  # the last `context` steps, the current action unknown
        return self.head(self.body(torch.cat(window, 1))[:, -1])

    def observe(self, state: dict, action: torch.Tensor) -> None:
        state["tokens"].append(self.embed.a(action)[:, None])
        del state["tokens"][:-(3 * self.context - 3) or len(state["tokens"])]


class GRUPolicy(nn.Module):
    """Behaviour cloning with a GRU: input ``[o_t, R_t, onehot(a_{t-1})]``, a linear head on the hidden state."""

    def __init__(self, obs_dim: int, n_actions: int, d_model: int, n_layers: int):
        super().__init__()
        self.n_actions = n_actions
        self.inp = nn.Linear(obs_dim + 1 + n_actions, d_model)
        self.gru = nn.GRU(d_model, d_model, n_layers, batch_first=True)
        self.head = nn.Linear(d_model, n_actions)

    def _inputs(self, rtg: torch.Tensor, obs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """``rtg (b, T)``, ``obs (b, T, obs_dim)``, ``prev (b, T)`` (-1: none) -> ``(b, T, d)``."""
        onehot = F.one_hot(prev.clamp(min=0), self.n_actions).float() * (prev >= 0)[..., None].float()
        return self.inp(torch.cat([obs, rtg[..., None], onehot], -1))

    def forward(self, rtg: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        prev = torch.cat([torch.full_like(actions[:, :1], -1), actions[:, :-1]], 1)
        out, _ = self.gru(self._inputs(rtg, obs, prev))
        return self.head(out)

    def start(self, batch: int, record: bool = False) -> dict:
        return {"h": None, "prev": torch.full((batch,), -1, dtype=torch.long), "record": None}

    def act(self, state: dict, rtg: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        x = self._inputs(rtg[:, None], obs[:, None], state["prev"][:, None])
        out, state["h_next"] = self.gru(x, state["h"])
        return self.head(out[:, -1])

    def observe(self, state: dict, action: torch.Tensor) -> None:
        state["h"], state["prev"] = state["h_next"], action.long()
