r"""Every sequence architecture of the lab behind one interface: tokens in, per-position logits out.

:func:`build` makes a :class:`TokenModel` of any kind in :data:`KINDS`; :func:`build_matched` picks the width that
brings it closest to a parameter budget, so architectures are compared at equal size. A :class:`TokenModel` has

* ``forward(tokens)``: ``(batch, length)`` int64 -> logits ``(batch, length, n_classes)`` (causal: position ``t``
  reads tokens ``<= t``);
* ``step(token, state) -> (logits, state)`` and ``initial_state(batch)`` where the model is recurrent
  (``has_step``): streaming inference with a state of fixed size;
* ``state_bytes(length)``: the bytes of inference state one sequence holds after ``length`` tokens (constant for
  the recurrent kinds; the key-value cache, growing with ``length``, for the transformers).

The kinds and where their layers live:

=====================  ==============================================================================================
``lru``, ``s5``        diagonal complex LTI layers (:mod:`lab.core.ssm`, ``kernels.linear_scan``), GLU after each
``mamba``              selective SSM (``kernels.selective_scan``)
``mamba2``             SSD, scalar decay per head (``kernels.ssd``)
``gla``, ``gla_neg``   gated diagonal linear RNN, gates in (0, 1) / (-1, 1) (:class:`lab.core.mixers.GatedDiagonal`)
``deltanet``,          gated delta rule, β in (0, 1) / (0, 2) (:class:`lab.core.mixers.GatedDeltaNet`,
``deltanet_neg``       ``kernels.delta_rule``)
``gru``, ``lstm``      ``torch.nn.GRU`` / ``torch.nn.LSTM`` (:class:`lab.core.mixers.RNN`)
``transformer``        causal transformer without positions (:class:`lab.core.transformer.Transformer`)
``transformer_rope``   the same with rotary positions
``psm``                prefix-scannable model: chunks of :data:`PSM_CHUNK` tokens, a non-associative transformer
                       aggregator over chunk states (:class:`lab.core.psm.PSM`, ``kernels.prefix_scan``)
``chaingpt``           ChainGPT's layer stacked (no depth loop): the multi-substep delta-rule state with β in (0, 2)
                       and state-guided sparse attention (:class:`lab.core.chain.ChainBlock`)
=====================  ==============================================================================================

Every recurrent kind is a pre-norm residual stack of its mixer (:class:`lab.core.models.ResidualBlock`) with a final
LayerNorm; the transformers are the lab's :class:`~lab.core.transformer.Transformer` (attention and an MLP per
block); ChainGPT's blocks carry their own norms and MLP, with a final LayerNorm. Embedding and head are the same for
all but the PSM, which has its own (and pads a sequence on the right to whole chunks: its outputs at a position read
only the chunks before it and its own chunk's tokens up to it, so the padding changes nothing before it).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from lab.checks import bad_value
from lab.core.chain import ChainBlock
from lab.core.mixers import RNN, GatedDeltaNet, GatedDiagonal
from lab.core.models import LINEAR_KINDS, ResidualBlock, SSMStack
from lab.core.psm import PSM
from lab.core.ssm import make_mixer
from lab.core.transformer import Transformer, n_params

__all__ = ["KINDS", "RECURRENT_KINDS", "TokenModel", "build", "build_matched", "tensor_bytes"]

RECURRENT_KINDS = ("lru", "s5", "mamba", "mamba2", "gla", "gla_neg", "deltanet", "deltanet_neg", "gru", "lstm")
KINDS = RECURRENT_KINDS + ("transformer", "transformer_rope", "psm", "chaingpt")
#: tokens per chunk of the ``psm`` kind; ChainGPT's attention window, anchor spacing, substeps and delta rank
PSM_CHUNK = 4
CHAIN = dict(substeps=2, delta_rank=4, window=8, every=16)
#: widths are multiples of this (two heads of even width for rotary positions; Mamba-2 heads of 8 channels)
WIDTH_STEP = 4


def tensor_bytes(state) -> int:
    """Bytes of every tensor in a (nested) state: tuples, lists and tensors."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, (tuple, list)):
        return sum(tensor_bytes(s) for s in state)
    return 0


def _mixer(kind: str, d_model: int, d_state: int | None, n_heads: int) -> nn.Module:
    if kind in ("lru", "s5", "mamba", "mamba2"):
        kwargs = {"headdim": 2 * WIDTH_STEP} if kind == "mamba2" else {}
        return make_mixer(kind, d_model, d_state or (d_model if kind in LINEAR_KINDS else 16), **kwargs)
    if kind in ("gla", "gla_neg"):
        return GatedDiagonal(d_model, d_state, negative=kind == "gla_neg")
    if kind in ("deltanet", "deltanet_neg"):
        return GatedDeltaNet(d_model, n_heads, negative=kind == "deltanet_neg")
    return RNN(d_model, kind)


class _RecurrentStack(SSMStack):
    """``n_layers`` residual blocks of any recurrent mixer and a final LayerNorm: :class:`lab.core.models.SSMStack`'s
    parallel and step forms over the zoo's mixers (the SSM kinds, the gated RNNs, the delta rule, GRU and LSTM)."""

    def __init__(self, kind: str, d_model: int, n_layers: int, d_state: int | None, n_heads: int):
        nn.Module.__init__(self)  # SSMStack's own constructor builds SSM layers only
        self.kind = kind
        self.blocks = nn.ModuleList(ResidualBlock(_mixer(kind, d_model, d_state, n_heads), d_model,
                                                  glu=kind in LINEAR_KINDS) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)


class _ChainStack(nn.Module):
    """``n_layers`` ChainGPT blocks (:class:`lab.core.chain.ChainBlock`) and a final LayerNorm."""

    def __init__(self, d_model: int, n_layers: int, n_heads: int):
        super().__init__()
        self.blocks = nn.ModuleList(ChainBlock(d_model, n_heads, **CHAIN) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class TokenModel(nn.Module):
    """Embedding, a sequence body of one kind, a linear head (module docstring).

    Arguments:
        kind: one of :data:`KINDS`. vocab_size: input tokens. n_classes: outputs per position.
        d_model: width (a multiple of ``WIDTH_STEP``). n_layers: blocks.
        d_state: state size of the layers that have one (LRU/S5 complex states, Mamba's N per channel, Mamba-2's N,
            the gated diagonal RNN's channels); None: each kind's default.
        n_heads: heads of attention and of the delta rule.
    """

    def __init__(self, kind: str, vocab_size: int, n_classes: int, *, d_model: int = 32, n_layers: int = 2,
                 d_state: int | None = None, n_heads: int = 2):
        super().__init__()
        if kind not in KINDS:
            raise bad_value("kind", kind, "one of " + ", ".join(KINDS))
        if d_model < WIDTH_STEP or d_model % WIDTH_STEP:
            raise bad_value("d_model", d_model, f"a positive multiple of {WIDTH_STEP}")
        self.kind, self.d_model, self.n_layers, self.n_heads = kind, d_model, n_layers, n_heads
        if kind == "psm":  # its own embedding and head; n_layers blocks in its inference module
            self.body = PSM(vocab_size, n_classes, d_model=d_model, chunk=PSM_CHUNK, n_heads=n_heads,
                            inf_layers=n_layers)
            self.embedding, self.head = self.body.embedding, self.body.head
            return
        self.embedding = nn.Embedding(vocab_size, d_model)
        if kind in RECURRENT_KINDS:
            self.body = _RecurrentStack(kind, d_model, n_layers, d_state, n_heads)
        elif kind == "chaingpt":
            self.body = _ChainStack(d_model, n_layers, n_heads)
        else:
            self.body = Transformer(d_model, n_layers, n_heads, causal=True, rotary=kind == "transformer_rope")
        self.head = nn.Linear(d_model, n_classes)

    @property
    def has_step(self) -> bool:
        """Whether the model streams one token at a time with a fixed-size state."""
        return self.kind in RECURRENT_KINDS

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(batch, length)`` -> logits ``(batch, length, n_classes)``."""
        if self.kind == "psm":
            length = tokens.shape[1]
            pad = -length % PSM_CHUNK  # whole chunks: the padding sits after every real position
            return self.body(nn.functional.pad(tokens, (0, pad)))[:, :length]
        return self.head(self.body(self.embedding(tokens)))

    def initial_state(self, batch: int) -> list:
        """The zero state of ``batch`` sequences (recurrent kinds only)."""
        if not self.has_step:
            raise TypeError(f"{self.kind} has no fixed-size state: it attends over every token it has read")
        return self.body.initial_state(batch)

    def step(self, token: torch.Tensor, state: list):
        """``token`` ``(batch,)`` -> logits ``(batch, n_classes)`` and the new state (recurrent kinds only)."""
        if not self.has_step:
            raise TypeError(f"{self.kind} has no step form")
        h, state = self.body.step(self.embedding(token), state)
        return self.head(h), state

    def state_bytes(self, length: int) -> int:
        """Inference state of one sequence after ``length`` tokens, in bytes: the recurrent state (constant); the
        transformer's key-value cache (two ``d_model`` vectors per layer and token); the PSM's binary counter (one
        chunk state of ``chunk`` rows per set bit of the chunks read, :class:`kernels.StreamingPrefix`) and the open
        chunk's tokens; ChainGPT's per layer: the delta-rule state, the previous token, the window's keys and values
        and the anchors written so far. Float32."""
        size, d, length = self.embedding.weight.element_size(), self.d_model, int(length)
        if self.has_step:
            return tensor_bytes(self.initial_state(1))
        if self.kind == "psm":
            chunks = length // PSM_CHUNK
            return (bin(chunks).count("1") * self.body.rows + PSM_CHUNK) * d * size
        if self.kind == "chaingpt":
            anchors = length // CHAIN["every"]
            per_layer = d * d // self.n_heads + d + 2 * d * (min(length, CHAIN["window"]) + anchors)
            return self.n_layers * per_layer * size
        return 2 * self.n_layers * d * length * size


def build(kind: str, vocab_size: int, n_classes: int, **kwargs) -> TokenModel:
    """A :class:`TokenModel` of ``kind`` (keyword arguments: see the class)."""
    return TokenModel(kind, vocab_size, n_classes, **kwargs)


def build_matched(kind: str, vocab_size: int, n_classes: int, budget: int, *,
                  widths: Iterable[int] = range(WIDTH_STEP, 513, WIDTH_STEP), **kwargs) -> TokenModel:
    """The :class:`TokenModel` of ``kind`` whose trainable parameters come closest to ``budget`` over ``widths``
    (the other keyword arguments fixed). Sizes grow with the width, so the search stops once past the budget. The
    search draws no random numbers: the model returned is initialised as ``build`` at that width would be."""
    if budget < 1:
        raise bad_value("budget", budget, "a positive number of parameters")
    best, best_gap = None, None
    with torch.random.fork_rng(devices=[]):
        for d in widths:
            size = n_params(TokenModel(kind, vocab_size, n_classes, d_model=d, **kwargs))
            if best_gap is None or abs(size - budget) < best_gap:
                best, best_gap = d, abs(size - budget)
            if size > budget:
                break
    return TokenModel(kind, vocab_size, n_classes, d_model=best, **kwargs)
