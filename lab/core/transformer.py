"""A small pre-norm transformer without positional encodings, and a per-token model over any sequence body.

Pieces:

* :class:`Attention`: multi-head self-attention on ``torch.nn.functional.scaled_dot_product_attention``, causal or
  bidirectional;
* :class:`Block`: ``x + attn(norm(x))`` then ``x + mlp(norm(x))`` (pre-norm, GELU MLP);
* :class:`Transformer`: ``n_layers`` blocks and a final LayerNorm, ``(batch, length, d) -> (batch, length, d)``;
* :class:`TokenTagger`: token embedding, a body (a :class:`Transformer` or a :class:`lab.core.models.SSMStack`), a
  linear head: per-position logits for the lab's token tasks (:class:`lab.datasets.tokens.TokenTask`);
* :func:`n_params`: trainable parameters of a module (matching model sizes).

**No positional encoding (NoPE).** The transformer adds neither absolute nor relative/rotary positions. In a causal
stack, attention still tells positions apart (a row sees exactly the rows before it, so counting is learnable), and
nothing in the model is tied to the training length; absolute position embeddings fail outright beyond the longest
position seen in training, which would make every length-generalisation comparison a test of the embedding, not of
the architecture (Kazemnejad et al. 2023, "The impact of positional encoding on length generalization in
transformers"). A bidirectional stack without positions is permutation-equivariant; a caller that needs to tell
rows apart inside a fixed-size window (the prefix-scannable models' aggregator over ``[x; y]``) adds its own
per-slot embedding, which is independent of the sequence length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

__all__ = ["Attention", "Block", "Transformer", "TokenTagger", "n_params"]


def n_params(module: nn.Module) -> int:
    """Number of trainable parameters of ``module`` (shared tensors counted once)."""
    seen, total = set(), 0
    for p in module.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


class Attention(nn.Module):
    """Multi-head self-attention.

    Arguments:
        d_model: features (a multiple of ``n_heads``). n_heads: heads.
        causal: row ``t`` attends to rows ``<= t`` only; otherwise to every row.
        dropout: attention dropout while training.
    """

    def __init__(self, d_model: int, n_heads: int, *, causal: bool, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not allowed; allowed: a multiple of n_heads={n_heads}")
        self.n_heads, self.causal, self.dropout = n_heads, causal, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, length, d_model)`` -> ``(batch, length, d_model)``."""
        q, k, v = rearrange(self.qkv(x), "b l (three h e) -> three b h l e", three=3, h=self.n_heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                           dropout_p=self.dropout if self.training else 0.0)  # (b, h, l, e)
        return self.out(rearrange(y, "b h l e -> b l (h e)"))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``.

    Arguments:
        d_model, n_heads, causal, dropout: see :class:`Attention`. mlp_ratio: hidden width of the MLP / d_model.
    """

    def __init__(self, d_model: int, n_heads: int, *, causal: bool, mlp_ratio: int = 4, dropout: float = 0.0):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, causal=causal, dropout=dropout)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, length, d_model) -> (batch, length, d_model)``."""
        x = x + self.drop(self.attn(self.norm1(x)))
        return x + self.drop(self.mlp(self.norm2(x)))


class Transformer(nn.Module):
    """``n_layers`` pre-norm blocks and a final LayerNorm; no positional encoding (module docstring).

    Arguments:
        d_model, n_heads, causal, mlp_ratio, dropout: see :class:`Block`. n_layers: blocks.
    """

    def __init__(self, d_model: int, n_layers: int, n_heads: int = 2, *, causal: bool = True, mlp_ratio: int = 4,
                 dropout: float = 0.0):
        super().__init__()
        self.causal = causal
        self.blocks = nn.ModuleList(Block(d_model, n_heads, causal=causal, mlp_ratio=mlp_ratio, dropout=dropout)
                                    for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, length, d_model)`` -> ``(batch, length, d_model)``."""
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class TokenTagger(nn.Module):
    """Per-position classification of token sequences: ``head(body(embedding(tokens)))``.

    Arguments:
        vocab_size: input tokens. n_classes: output classes per position. d_model: features.
        body: a module ``(batch, length, d_model) -> (batch, length, d_model)`` (causal, for the lab's
            running-label tasks): a :class:`Transformer` or a :class:`lab.core.models.SSMStack`.

    ``forward(tokens)``: ``(batch, length)`` int64 -> logits ``(batch, length, n_classes)``.
    """

    def __init__(self, vocab_size: int, n_classes: int, d_model: int, body: nn.Module):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.body = body
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embedding(tokens)))
