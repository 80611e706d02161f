"""A small pre-norm transformer without positional encodings, and a per-token model over any sequence body.

Pieces:

* :class:`Attention`: multi-head self-attention on ``torch.nn.functional.scaled_dot_product_attention``, causal or
  bidirectional, optionally with rotary positions (:func:`rotary`);
* :class:`Block`: ``x + attn(norm(x))`` then ``x + mlp(norm(x))`` (pre-norm, GELU MLP);
* :class:`Transformer`: ``n_layers`` blocks and a final LayerNorm, ``(batch, length, d) -> (batch, length, d)``;
* :class:`TokenTagger`: token embedding, a body (a :class:`Transformer` or a :class:`lab.core.models.SSMStack`), a
  linear head: per-position logits for the lab's token tasks (:class:`lab.datasets.tokens.TokenTask`);
* :func:`n_params`: trainable parameters of a module (matching model sizes).

**No positional encoding (NoPE), by default.** The transformer adds neither absolute nor relative positions. In a
causal stack, attention still tells positions apart (a row sees exactly the rows before it, so counting is learnable),
and nothing in the model is tied to the training length; absolute position embeddings fail outright beyond the longest
position seen in training, which would make every length-generalisation comparison a test of the embedding, not of the
architecture (Kazemnejad et al. 2023, "The impact of positional encoding on length generalization in transformers"). A
bidirectional stack without positions is permutation-equivariant; a caller that needs to tell rows apart inside a
fixed-size window (the prefix-scannable models' aggregator over ``[x; y]``) adds its own per-slot embedding, which is
independent of the sequence length.

**Rotary positions (RoPE, optional).** ``rotary=True`` rotates each query and key channel pair by an angle that grows
with the position (Su et al. 2021, "RoFormer"), so attention scores depend on relative offsets; the default stays
without positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

__all__ = ["Attention", "Block", "Transformer", "TokenTagger", "n_params", "rotary"]


def n_params(module: nn.Module) -> int:
    """Number of trainable parameters of ``module`` (shared tensors counted once)."""
    seen, total = set(), 0
    for p in module.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def rotary(x: torch.Tensor, base: float = 10_000.0) -> torch.Tensor:
    """Rotary position embedding of ``x`` ``(..., length, e)`` (``e`` even): channel pair ``(i, i + e/2)`` of the
    row at position ``t`` rotated by ``t * base^(-2i/e)``."""
    length, e = x.shape[-2], x.shape[-1]
    freqs = base ** (-torch.arange(0, e // 2, device=x.device, dtype=torch.float32) * 2 / e)
    angle = torch.arange(length, device=x.device, dtype=torch.float32)[:, None] * freqs  # (length, e/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x1, x2 = x[..., : e // 2], x[..., e // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    """Multi-head self-attention.

    Arguments:
        d_model: features (a multiple of ``n_heads``). n_heads: heads.
        causal: row ``t`` attends to rows ``<= t`` only; otherwise to every row.
        dropout: attention dropout while training.
        rotary: rotate queries and keys by their positions (:func:`rotary`; even channels per head).
    """

    def __init__(self, d_model: int, n_heads: int, *, causal: bool, dropout: float = 0.0, rotary: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not allowed; allowed: a multiple of n_heads={n_heads}")
        if rotary and (d_model // n_heads) % 2:
            raise ValueError(f"d_model={d_model} is not allowed with rotary positions; allowed: an even number of "
                             f"channels per head (n_heads={n_heads})")
        self.n_heads, self.causal, self.dropout, self.rotary = n_heads, causal, dropout, rotary
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, length, d_model)`` -> ``(batch, length, d_model)``."""
        q, k, v = rearrange(self.qkv(x), "b l (three h e) -> three b h l e", three=3, h=self.n_heads)
        if self.rotary:
            q, k = rotary(q), rotary(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                           dropout_p=self.dropout if self.training else 0.0)  # (b, h, l, e)
        return self.out(rearrange(y, "b h l e -> b l (h e)"))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``.

    Arguments:
        d_model, n_heads, causal, dropout, rotary: see :class:`Attention`. mlp_ratio: hidden width of the MLP /
            d_model.
    """

    def __init__(self, d_model: int, n_heads: int, *, causal: bool, mlp_ratio: int = 4, dropout: float = 0.0,
                 rotary: bool = False):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, causal=causal, dropout=dropout, rotary=rotary)
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
        d_model, n_heads, causal, mlp_ratio, dropout, rotary: see :class:`Block`. n_layers: blocks.
    """

    def __init__(self, d_model: int, n_layers: int, n_heads: int = 2, *, causal: bool = True, mlp_ratio: int = 4,
                 dropout: float = 0.0, rotary: bool = False):
        super().__init__()
        self.causal = causal
        self.blocks = nn.ModuleList(Block(d_model, n_heads, causal=causal, mlp_ratio=mlp_ratio, dropout=dropout,
                                          rotary=rotary) for _ in range(n_layers))
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
