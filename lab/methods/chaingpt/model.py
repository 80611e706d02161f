"""ChainGPT: a bottom block, a looped core block with recurrent depth, a top module; per-token adaptive stopping.

Inside every block (:class:`lab.core.chain.ChainBlock`, shared with the arena's zoo) the two mixers of
:mod:`lab.core.chain`: the multi-substep state layer and state-guided sparse attention, then an MLP. Across blocks
(:class:`ChainGPT`)::

    e = Bottom(embed(x))                                  (bottom block, run once)
    h_0 = 0;   h_i = Core(Adapter([h_{i-1}; e]))          (the same core block, i = 1..r; e injected every time)
    logits_i = Head(norm(h_i))

Training (:meth:`ChainGPT.loss`): draw a depth ``r``; run the first ``r - b`` iterations without gradients (the
gradient-free warm-up that moves ``h`` towards the core's fixed point), then backpropagate through the last
``b = min(r, bptt)`` iterations only (truncated backprop through depth; ``e`` gets its gradient there).

Inference with adaptive stopping (:meth:`ChainGPT.adaptive`): after each iteration ``i`` compute the entropy
``H_i(t)`` of token ``t``'s output distribution; the token stops at the first ``i > k`` with
``H_{i-k}(t) - H_i(t) <= τ`` (the entropy no longer drops) or at ``r_max``. A stopped token keeps its ``h`` (it
still serves as context to the others); its iterations are counted.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from lab.core.chain import ChainBlock

__all__ = ["ChainBlock", "ChainGPT", "Adaptive", "entropy"]  # ChainBlock: lab.core.chain (the arena uses it too)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of the softmax over the last axis: ``(..., C) -> (...)``."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


class Adaptive(tuple):
    """What :meth:`ChainGPT.adaptive` returns: ``(logits, iterations, entropies)``.

    logits ``(batch, length, C)`` at each token's own stop; iterations ``(batch, length)`` int64, core iterations
    each token took; entropies ``(batch, r_max, length)``, ``H_i(t)`` after every iteration (a stopped token's
    entropy stays at its value).
    """

    @property
    def logits(self):
        return self[0]

    @property
    def iterations(self):
        return self[1]

    @property
    def entropies(self):
        return self[2]


class ChainGPT(nn.Module):
    """Token tagger with recurrent depth: ``(batch, length)`` int64 -> logits ``(batch, length, n_classes)``.

    Arguments:
        vocab_size, n_classes: input tokens and output classes. d_model, n_heads: sizes.
        substeps, delta_rank, window, every, anchors, mlp_ratio: the blocks' settings (:class:`ChainBlock`).
        n_bottom: blocks of the bottom module (run once). iterations: default depth ``r`` of the core loop.
    """

    def __init__(self, vocab_size: int, n_classes: int, *, d_model: int = 48, n_heads: int = 2, substeps: int = 2,
                 delta_rank: int = 4, window: int = 8, every: int = 16, anchors: bool = True, mlp_ratio: int = 2,
                 n_bottom: int = 1, iterations: int = 4):
        super().__init__()
        block = dict(substeps=substeps, delta_rank=delta_rank, window=window, every=every, anchors=anchors,
                     mlp_ratio=mlp_ratio)
        self.iterations = iterations
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.bottom = nn.ModuleList(ChainBlock(d_model, n_heads, **block) for _ in range(n_bottom))
        self.adapter = nn.Linear(2 * d_model, d_model)
        self.core = ChainBlock(d_model, n_heads, **block)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """The bottom module: ``(b, L)`` -> ``e`` ``(b, L, d)``."""
        e = self.embedding(tokens)
        for block in self.bottom:
            e = block(e)
        return e

    def core_step(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """One iteration of the looped core: ``h_i = Core(Adapter([h_{i-1}; e]))``, all ``(b, L, d)``."""
        return self.core(self.adapter(torch.cat([h, e], dim=-1)))

    def readout(self, h: torch.Tensor) -> torch.Tensor:
        """The top module: ``(b, L, d) -> (b, L, C)``."""
        return self.head(self.norm(h))

    def forward(self, tokens: torch.Tensor, iterations: int | None = None, grad_iterations: int | None = None,
                return_all: bool = False):
        """Fixed depth: ``r = iterations`` (default ``self.iterations``) core iterations, gradients through the last
        ``grad_iterations`` only (default all).

        Returns:
            logits ``(batch, length, C)``; with ``return_all``, a list of the ``r`` logits after each iteration.
        """
        r = self.iterations if iterations is None else int(iterations)
        b = r if grad_iterations is None else min(int(grad_iterations), r)
        e = self.encode(tokens)
        h = torch.zeros_like(e)
        outs = []
        for i in range(r):
            warm = i < r - b
            with torch.no_grad() if warm else contextlib.nullcontext():
                h = self.core_step(h, e.detach() if warm else e)
            if return_all:
                outs.append(self.readout(h))
        return outs if return_all else self.readout(h)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor, iterations: int, bptt: int) -> torch.Tensor:
        """Cross-entropy over the labelled positions (targets -100 carry none) after ``iterations`` core iterations,
        backpropagating through the last ``bptt`` of them (the gradient-free warm-up before)."""
        logits = self(tokens, iterations=iterations, grad_iterations=bptt)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def per_token(self, tokens: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, length, C)`` when token ``t`` runs ``depths[b, t]`` core iterations (``(batch, length)``
        int64, at least 1): a stopped token keeps its ``h`` and still serves as context, as in :meth:`adaptive`
        (the random-stopping control draws ``depths``)."""
        e = self.encode(tokens)
        h = torch.zeros_like(e)
        for i in range(int(depths.max())):
            h = torch.where((depths > i)[..., None], self.core_step(h, e), h)
        return self.readout(h)

    @torch.no_grad()
    def adaptive(self, tokens: torch.Tensor, max_iterations: int, tau: float, lag: int = 1) -> Adaptive:
        """Per-token adaptive depth by the entropy-drop rule (module docstring).

        Arguments:
            tokens: ``(batch, length)``. max_iterations: ``r_max``. tau: ``τ`` in nats. lag: ``k`` iterations.
        Returns:
            :class:`Adaptive` ``(logits, iterations, entropies)``.
        """
        e = self.encode(tokens)
        h = torch.zeros_like(e)
        active = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)  # (b, L)
        iters = torch.zeros(tokens.shape, dtype=torch.long, device=tokens.device)
        trace = []
        for i in range(max_iterations):
            if active.any():
                h = torch.where(active[..., None], self.core_step(h, e), h)
                iters += active.long()
            logits = self.readout(h)
            trace.append(entropy(logits))  # (b, L)
            if i >= lag:
                active &= ~(trace[i - lag] - trace[i] <= tau)
        return Adaptive((logits, iters, torch.stack(trace, dim=1)))
