"""Sequence models built from the SSM layers of :mod:`lab.core.ssm`: a classifier and a small causal language model.

Both are pre-norm residual stacks::

    x -> encoder -> [ x + dropout(mix(SSM(norm(x)))) ] * n_layers -> norm -> head

For the linear time-invariant layers (``lru``, ``s5``) ``mix`` is the LRU paper's GELU followed by a gated linear unit
(the layer itself is linear); the Mamba blocks carry their own gating and output projection, so ``mix`` is the
identity. ``d_state`` may differ per layer (a pruned or reduced model keeps its own sizes).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lab.core.ssm import DiagonalSSM, make_mixer

__all__ = ["ResidualBlock", "SSMStack", "SequenceClassifier", "CausalLM", "macs_per_token", "state_sizes"]

LINEAR_KINDS = ("lru", "s5")


class ResidualBlock(nn.Module):
    """``x + dropout(mix(mixer(norm(x))))``, with the same step form as its mixer.

    Arguments:
        mixer: a layer of :mod:`lab.core.ssm` (``forward``, ``step``, ``initial_state``).
        d_model: features.
        glu: apply GELU then a gated linear unit after the mixer (for the linear LRU/S5 layers).
        dropout: dropout probability after the mixer.
    """

    def __init__(self, mixer: nn.Module, d_model: int, *, glu: bool, dropout: float = 0.0):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.mixer = mixer
        self.glu = nn.Linear(d_model, 2 * d_model) if glu else None
        self.dropout = nn.Dropout(dropout)

    def _mix(self, h: torch.Tensor) -> torch.Tensor:
        if self.glu is None:
            return h
        return F.glu(self.glu(F.gelu(h)), dim=-1)

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        out = self.mixer(self.norm(x), state=state, return_state=return_state)
        h, new_state = out if return_state else (out, None)
        y = x + self.dropout(self._mix(h))
        return (y, new_state) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        h, state = self.mixer.step(self.norm(x_t), state)
        return x_t + self.dropout(self._mix(h)), state


class SSMStack(nn.Module):
    """``n_layers`` residual blocks of one SSM kind; ``(batch, length, d_model) -> (batch, length, d_model)``.

    Arguments:
        kind: ``lru``, ``s5``, ``mamba`` or ``mamba2``.
        d_model: features. n_layers: blocks.
        d_state: state size of every layer, or one per layer.
        dropout: dropout after each mixer.
        mixer_kwargs: passed to each layer's constructor (e.g. ``r_min`` for LRU, ``headdim`` for Mamba-2).
    """

    def __init__(self, kind: str, d_model: int, n_layers: int, d_state: int | Sequence[int], *,
                 dropout: float = 0.0, mixer_kwargs: dict | None = None):
        super().__init__()
        sizes = [int(d_state)] * n_layers if isinstance(d_state, int) else [int(s) for s in d_state]
        if len(sizes) != n_layers:
            raise ValueError(f"d_state has {len(sizes)} entries for {n_layers} layers")
        self.kind = kind
        self.blocks = nn.ModuleList(
            ResidualBlock(make_mixer(kind, d_model, n, **(mixer_kwargs or {})), d_model,
                          glu=kind in LINEAR_KINDS, dropout=dropout)
            for n in sizes
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        states = []
        for k, block in enumerate(self.blocks):
            out = block(x, state=None if state is None else state[k], return_state=return_state)
            x, s = out if return_state else (out, None)
            states.append(s)
        x = self.norm(x)
        return (x, states) if return_state else x

    def initial_state(self, batch: int) -> list:
        return [b.mixer.initial_state(batch) for b in self.blocks]

    def step(self, x_t: torch.Tensor, state: list):
        new = []
        for block, s in zip(self.blocks, state):
            x_t, s = block.step(x_t, s)
            new.append(s)
        return self.norm(x_t), new

    def ssm_layers(self) -> list[nn.Module]:
        return [b.mixer for b in self.blocks]


class SequenceClassifier(nn.Module):
    """Sequence classification: linear encoder (or token embedding), SSM stack, pooling over time, linear head.

    Arguments:
        d_input: input features per step (ignored when ``vocab_size`` is given).
        n_classes: classes.
        kind, d_model, n_layers, d_state, dropout, mixer_kwargs: see :class:`SSMStack`.
        pooling: ``mean`` over time or ``last`` step.
        vocab_size: embed integer tokens instead of projecting real features.

    ``forward(x)``: ``x`` ``(batch, length, d_input)`` float (or ``(batch, length)`` tokens) -> logits
    ``(batch, n_classes)``.
    """

    def __init__(self, d_input: int, n_classes: int, *, kind: str = "lru", d_model: int = 32, n_layers: int = 2,
                 d_state: int | Sequence[int] = 64, dropout: float = 0.0, pooling: str = "mean",
                 vocab_size: int | None = None, mixer_kwargs: dict | None = None):
        super().__init__()
        if pooling not in ("mean", "last"):
            raise ValueError(f"pooling={pooling!r} is not allowed; allowed: 'mean', 'last'")
        self.pooling = pooling
        self.encoder = nn.Embedding(vocab_size, d_model) if vocab_size else nn.Linear(d_input, d_model)
        self.stack = SSMStack(kind, d_model, n_layers, d_state, dropout=dropout, mixer_kwargs=mixer_kwargs)
        self.head = nn.Linear(d_model, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Per-step features ``(batch, length, d_model)`` before pooling."""
        return self.stack(self.encoder(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)  # (b, L, d)
        pooled = h.mean(dim=1) if self.pooling == "mean" else h[:, -1]
        return self.head(pooled)

    def ssm_layers(self) -> list[nn.Module]:
        return self.stack.ssm_layers()


class CausalLM(nn.Module):
    """A small causal language model: token embedding, SSM stack, tied LM head.

    ``forward(tokens)``: ``(batch, length)`` int64 -> logits ``(batch, length, vocab_size)``. :meth:`step` decodes
    one token at a time from the recurrent state, :meth:`generate` greedily or by sampling.
    """

    def __init__(self, vocab_size: int, *, kind: str = "mamba", d_model: int = 64, n_layers: int = 2,
                 d_state: int | Sequence[int] = 16, dropout: float = 0.0, tie_weights: bool = True,
                 mixer_kwargs: dict | None = None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.stack = SSMStack(kind, d_model, n_layers, d_state, dropout=dropout, mixer_kwargs=mixer_kwargs)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor, state=None, return_state: bool = False):
        out = self.stack(self.embedding(tokens), state=state, return_state=return_state)
        h, new_state = out if return_state else (out, None)
        logits = self.head(h)
        return (logits, new_state) if return_state else logits

    def initial_state(self, batch: int) -> list:
        return self.stack.initial_state(batch)

    def step(self, token: torch.Tensor, state: list):
        """``token`` ``(batch,)`` -> logits ``(batch, vocab_size)`` and the new state."""
        h, state = self.stack.step(self.embedding(token), state)
        return self.head(h), state

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, *, temperature: float = 0.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue ``prompt`` ``(batch, length)`` by ``n_new`` tokens (greedy when ``temperature`` is 0).

        The prompt is read in parallel (its final state returned by the kernels), then tokens are decoded with
        :meth:`step`.
        """
        logits, state = self(prompt, return_state=True)
        last = logits[:, -1]
        out = [prompt]
        for _ in range(n_new):
            if temperature > 0:
                tok = torch.multinomial(F.softmax(last / temperature, dim=-1), 1, generator=generator)[:, 0]
            else:
                tok = last.argmax(dim=-1)
            out.append(tok[:, None])
            last, state = self.step(tok, state)
        return torch.cat(out, dim=1)

    def ssm_layers(self) -> list[nn.Module]:
        return self.stack.ssm_layers()


def state_sizes(model: nn.Module) -> list[int]:
    """The state size of each diagonal SSM layer of ``model`` (for LRU/S5 stacks)."""
    return [layer.d_state for layer in model.ssm_layers() if isinstance(layer, DiagonalSSM)]


def macs_per_token(model: nn.Module) -> tuple[int, int]:
    """Multiply-adds per time step of a stack of diagonal SSM layers: ``(SSM layers, whole model)``.

    A complex state costs ``4`` for ``λ h`` plus ``2 H`` for ``B̄ x`` (complex row times real input) and ``2 H`` for
    ``Re(C h)``; the skip ``D x`` costs ``H`` per layer; every ``nn.Linear`` (encoder, each block's GLU) is added for
    the whole model. Norms and activations are not counted; a classifier's head, which runs once per sequence, is
    left out.
    """
    ssm, dense = 0, 0
    for layer in model.ssm_layers():
        if isinstance(layer, DiagonalSSM):
            ssm += layer.d_state * (4 * layer.d_model + 4)
            dense += layer.d_model
    for module in model.modules():
        if isinstance(module, nn.Linear) and module is not getattr(model, "head", None):
            dense += module.in_features * module.out_features
    return ssm, ssm + dense
