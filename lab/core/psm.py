"""Prefix-scannable models: a chunk encoder, an aggregator over chunk states, an inference module per chunk.

A sequence of ``L = n c`` tokens is cut into chunks ``C_0 .. C_{n-1}`` of ``c`` tokens. Then

    x_i = Enc(C_i)                      (a state of m rows, m = c for the transformer aggregator)
    s_i = Agg(s_{i-1}, x_i)             (the prefix state through chunk i; s_{-1} = e, an identity *flag*)
    y_i = Inf(s_{i-1}, C_i)             (chunk i sees the prefix *before* it, never s_i: no label leak)

``Agg`` need not be associative, so the bracketing of the prefix is part of the model: training and inference both
use the static power-of-two (Blelloch) bracketing of :mod:`kernels.prefix_scan` — :func:`kernels.prefix_scan`
over all chunks at once in training (:meth:`PSM.forward`), :class:`kernels.StreamingPrefix`, a binary counter of
``O(log n)`` blocks, one chunk at a time in inference (:meth:`PSM.stream`). :meth:`PSM.stream` can also bracket
differently: a left fold (another bracketing: the control that must disagree for a non-associative ``Agg``) or a
naive recompute that keeps every chunk state and recomputes the prefix for each chunk (same bracketing, the
control for the resource bounds).

Aggregators (``aggregator=``):

* ``"transformer"`` (Transformer-PSM): ``Agg(x, y)`` = the last ``c`` rows of bidirectional transformer blocks over
  ``[x; y]`` (``2c`` rows, each with a slot embedding: the window has a fixed size, so nothing depends on the
  sequence length). Not associative.
* ``"affine"``: the diagonal SSM's combine ``(a_1, b_1) ∘ (a_2, b_2) = (a_2 a_1, a_2 b_1 + b_2)`` on a chunk
  summary ``a = sigmoid(W_a x̄)`` (decay), ``b = W_b x̄`` (input); associative, so every bracketing agrees.

``Inf`` is causal transformer blocks over ``[state rows; token embeddings of C_i]`` (with slot embeddings), whose last
``c`` rows give the chunk's logits. The identity is a learned "empty state" read by ``Inf`` for the first chunk only;
it is never combined.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import rearrange
from torch import nn

import kernels
from kernels.prefix_scan import prefix_scan_stacked
from lab.checks import bad_value
from lab.core.transformer import Transformer

__all__ = ["AGGREGATORS", "BRACKETINGS", "PSM", "StreamStats"]

AGGREGATORS = ("transformer", "affine")
#: how :meth:`PSM.stream` brackets the prefix: the binary counter (the model's bracketing), a left fold (another
#: bracketing), a naive recompute of the model's bracketing from every stored chunk state
BRACKETINGS = ("counter", "fold", "naive")


class StreamStats:
    """What a streaming pass used, per chunk: live chunk states held and cumulative aggregator calls.

    Attributes:
        live: ``(n,)`` states held after each chunk (the counter's blocks; every chunk state for the naive
            recompute; one running state for the fold). calls: ``(n,)`` cumulative ``Agg`` calls after each chunk.
    """

    def __init__(self):
        self.live: list[int] = []
        self.calls: list[int] = []


class _Counted:
    """``combine`` with a call counter (for the fold and the naive recompute)."""

    def __init__(self, fn: Callable):
        self.fn, self.calls = fn, 0

    def __call__(self, a, b):
        self.calls += 1
        return self.fn(a, b)


class PSM(nn.Module):
    """A prefix-scannable model for per-token classification.

    Arguments:
        vocab_size: input tokens. n_classes: output classes per token.
        d_model: features. chunk: tokens per chunk ``c``. n_heads: attention heads.
        aggregator: ``"transformer"`` (non-associative) or ``"affine"`` (the SSM combine, associative).
        enc_layers, agg_layers, inf_layers: transformer blocks of the encoder, the aggregator and the inference
            module.

    ``forward(tokens)``: ``(batch, L)`` int64 with ``L`` a multiple of ``chunk`` -> logits ``(batch, L, n_classes)``,
    prefixes by :func:`kernels.prefix_scan`. :meth:`stream` gives the same logits one chunk at a time.
    """

    def __init__(self, vocab_size: int, n_classes: int, *, d_model: int = 32, chunk: int = 4, n_heads: int = 2,
                 aggregator: str = "transformer", enc_layers: int = 1, agg_layers: int = 1, inf_layers: int = 1):
        super().__init__()
        if aggregator not in AGGREGATORS:
            raise bad_value("aggregator", aggregator, ", ".join(AGGREGATORS))
        self.chunk, self.aggregator = chunk, aggregator
        self.rows = chunk if aggregator == "transformer" else 1  # state rows Inf reads
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.enc_slot = nn.Parameter(0.02 * torch.randn(chunk, d_model))
        self.encoder = Transformer(d_model, enc_layers, n_heads, causal=False)
        if aggregator == "transformer":
            self.agg_slot = nn.Parameter(0.02 * torch.randn(2 * chunk, d_model))
            self.agg = Transformer(d_model, agg_layers, n_heads, causal=False)
        else:
            self.decay = nn.Linear(d_model, d_model)
            self.value = nn.Linear(d_model, d_model)
            nn.init.constant_(self.decay.bias, 2.0)  # start near a = 0.88: long memory
        self.empty = nn.Parameter(0.02 * torch.randn(self.rows, d_model))  # what Inf reads before chunk 0
        self.inf_slot = nn.Parameter(0.02 * torch.randn(self.rows + chunk, d_model))
        self.inference = Transformer(d_model, inf_layers, n_heads, causal=True)
        self.head = nn.Linear(d_model, n_classes)

    # ------------------------------------------------------------------------------------------------------------
    # The three modules
    # ------------------------------------------------------------------------------------------------------------
    def encode(self, chunks: torch.Tensor) -> torch.Tensor:
        """Chunk states ``x_i = Enc(C_i)``.

        Arguments:
            chunks: token embeddings ``(..., c, d)``.
        Returns:
            ``(..., c, d)`` (transformer aggregator) or ``(..., 2, d)``: rows ``[a; b]`` (affine aggregator).
        """
        lead = chunks.shape[:-2]
        h = self.encoder((chunks + self.enc_slot).reshape(-1, *chunks.shape[-2:]))  # (B, c, d)
        if self.aggregator == "transformer":
            return h.reshape(*lead, *h.shape[-2:])
        pooled = h.mean(dim=1)  # (B, d)
        state = torch.stack([torch.sigmoid(self.decay(pooled)), self.value(pooled)], dim=1)  # (B, 2, d)
        return state.reshape(*lead, 2, state.shape[-1])

    def combine(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """``Agg(left, right)``: the state of ``left``'s chunks followed by ``right``'s.

        Arguments:
            left, right: states ``(..., m, d)`` with the same leading shape (a stack of pairs works as one call).
        Returns:
            ``(..., m, d)``.
        """
        if self.aggregator == "affine":
            a1, b1 = left[..., 0, :], left[..., 1, :]
            a2, b2 = right[..., 0, :], right[..., 1, :]
            return torch.stack([a2 * a1, a2 * b1 + b2], dim=-2)
        lead, (m, d) = left.shape[:-2], left.shape[-2:]
        pair = torch.cat([left, right], dim=-2).reshape(-1, 2 * m, d) + self.agg_slot  # (B, 2c, d)
        return self.agg(pair)[:, m:].reshape(*lead, m, d)  # keep the last c rows

    def infer(self, prefix: torch.Tensor | None, chunks: torch.Tensor) -> torch.Tensor:
        """``Inf(s_{i-1}, C_i)``: logits of each chunk's tokens from the prefix state before it.

        Arguments:
            prefix: states ``(..., m, d)``, or None for the identity (the first chunk).
            chunks: token embeddings ``(..., c, d)``.
        Returns:
            logits ``(..., c, n_classes)``.
        """
        lead, (c, d) = chunks.shape[:-2], chunks.shape[-2:]
        if prefix is None:
            rows = self.empty.expand(*lead, self.rows, d)
        else:
            rows = prefix if self.aggregator == "transformer" else prefix[..., 1:, :]  # affine: read b
        window = torch.cat([rows, chunks], dim=-2).reshape(-1, self.rows + c, d) + self.inf_slot
        out = self.inference(window)[:, self.rows:]  # (B, c, d): the chunk's own rows
        return self.head(out).reshape(*lead, c, -1)

    # ------------------------------------------------------------------------------------------------------------
    # Parallel (training) and streaming (inference) forms
    # ------------------------------------------------------------------------------------------------------------
    def _chunks(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token embeddings by chunk: ``(batch, L)`` -> ``(n, batch, c, d)``."""
        if tokens.dim() != 2:
            raise bad_value("tokens.shape", tuple(tokens.shape), "(batch, length)")
        length = tokens.shape[1]
        if length == 0 or length % self.chunk:
            raise bad_value("length", length, f"a positive multiple of chunk={self.chunk}")
        return rearrange(self.embedding(tokens), "b (n c) d -> n b c d", c=self.chunk)

    def forward(self, tokens: torch.Tensor, blind: bool = False) -> torch.Tensor:
        """Parallel form: every chunk's prefix by :func:`kernels.prefix_scan_stacked` (one batched ``Agg`` call per
        tree level; the static tree's prefix of ``m`` chunks does not depend on the chunks after them).

        Arguments:
            tokens: ``(batch, L)`` int64, ``L`` a multiple of ``chunk``.
            blind: every chunk reads the identity instead of its prefix state (the state-blind control).
        Returns:
            logits ``(batch, L, n_classes)``.
        """
        emb = self._chunks(tokens)  # (n, b, c, d)
        if blind:
            return rearrange(self.infer(None, emb), "n b c k -> b (n c) k")
        logits = [self.infer(None, emb[:1])]
        if len(emb) > 1:  # chunk i reads the prefix through chunk i - 1: the tree over the first n - 1 chunks
            prefixes = prefix_scan_stacked(self.combine, self.encode(emb[:-1]))  # (n - 1, b, m, d)
            logits.append(self.infer(prefixes, emb[1:]))
        return rearrange(torch.cat(logits), "n b c k -> b (n c) k")

    def stream(self, tokens: torch.Tensor, bracketing: str = "counter") -> tuple[torch.Tensor, StreamStats]:
        """Streaming form: chunk by chunk, each chunk's logits from the prefix of the chunks before it.

        Arguments:
            tokens: ``(batch, L)`` int64, ``L`` a multiple of ``chunk``.
            bracketing: ``"counter"`` (:class:`kernels.StreamingPrefix`: the model's bracketing in ``O(log n)``
                states), ``"fold"`` (``s_i = Agg(s_{i-1}, x_i)``: another bracketing), ``"naive"`` (every chunk
                state kept, the model's bracketing recomputed from scratch for each chunk).
        Returns:
            logits ``(batch, L, n_classes)`` and the :class:`StreamStats` of the pass.
        """
        if bracketing not in BRACKETINGS:
            raise bad_value("bracketing", bracketing, ", ".join(BRACKETINGS))
        emb = self._chunks(tokens)
        stats, out = StreamStats(), []
        counted = _Counted(self.combine)
        counter = kernels.StreamingPrefix(self.combine)
        kept: list[torch.Tensor] = []
        running = None
        for chunk in emb:  # chunk: (b, c, d)
            x = self.encode(chunk)  # (b, m, d)
            if bracketing == "counter":
                prefix = counter.push(x)
                stats.live.append(counter.live_states)
                stats.calls.append(counter.calls)
            elif bracketing == "fold":
                prefix = running
                running = x if running is None else counted(running, x)
                stats.live.append(1)
                stats.calls.append(counted.calls)
            else:
                kept.append(x)  # recompute every prefix of the kept states with the model's bracketing
                prefix = kernels.prefix_scan(counted, kept)[-1]
                stats.live.append(len(kept))
                stats.calls.append(counted.calls)
            out.append(self.infer(prefix, chunk))
        return rearrange(torch.stack(out), "n b c k -> b (n c) k"), stats
