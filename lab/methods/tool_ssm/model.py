"""The models and the closed loop: a language model over the tool's tokens, decoding one token at a time while the
model's own commands drive the pointer tool.

Four model kinds share one interface, ``model(tokens, return_state=True) -> (logits, state)`` (the parallel form,
``tokens`` ``(batch, T)`` -> ``logits`` ``(batch, T, vocab)``) and ``model.step(token, state) -> (logits, state)``
(``token`` ``(batch,)`` -> ``logits`` ``(batch, vocab)``), so training and decoding treat them alike:

* ``mamba``, ``lru``: :class:`lab.core.models.CausalLM` over the lab's SSM layers; their ``step`` runs the
  recurrence's step form (``kernels.selective_state_update``, the LRU's diagonal step), a state of fixed size;
* ``gru``: :class:`GRULM`, ``torch.nn.GRU`` stepped one token at a time;
* ``transformer``: :class:`TransformerLM`, the blocks of the lab's causal transformer (:mod:`lab.core.transformer`)
  with rotary positions (:func:`rotate`), as the paper's Pythia baseline has, whose ``step`` attends over a key/value
  cache that grows with the episode. Rotary rather than none: the agent's every step reads the last few tokens, and
  rotary attention can find them by their offset at any position, where a transformer without positions must count
  from the start of the episode (a count that does not extrapolate): the stronger, and the paper's, baseline.

Every kind starts with token embeddings of standard deviation ``d_model ** -0.5`` (tied heads then start with logits
of order one).

:func:`rollout` is the closed loop; :func:`masked_loss` the training loss on the agent's tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lab.checks import check_choice
from lab.core.models import CausalLM
from lab.core.transformer import Transformer
from lab.methods.tool_ssm import env as E
from lab.methods.tool_ssm.config import KINDS

__all__ = ["KINDS", "GRULM", "TransformerLM", "Episode", "build_model", "masked_loss", "rollout", "rotate", "score"]

#: settings of the SSM layers: the LRU ring |λ| in [0.5, 0.99] (a column of the agent spans 7 tokens)
MIXER_KWARGS = {"lru": {"r_min": 0.5, "r_max": 0.99}, "mamba": {}}


class GRULM(nn.Module):
    """Token embedding, a stacked GRU, a norm and a tied head (the paper's LSTM/GRU baseline).

    State: ``h`` ``(n_layers, batch, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.rnn = nn.GRU(d_model, d_model, n_layers, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor, state=None, return_state: bool = False):
        h, state = self.rnn(self.embedding(tokens), state)  # (b, T, d), (n_layers, b, d)
        logits = self.head(self.norm(h))
        return (logits, state) if return_state else logits

    def step(self, token: torch.Tensor, state):
        h, state = self.rnn(self.embedding(token)[:, None], state)  # (b, 1, d)
        return self.head(self.norm(h[:, 0])), state


def rotate(x: torch.Tensor, start: int) -> torch.Tensor:
    """Rotary position embedding (RoFormer; GPT-NeoX/Pythia's form, on every feature of the head): the feature pairs
    ``(x_i, x_{i + e/2})`` of the row at position ``start + t`` turned by the angle ``(start + t) * 10000^(-2i/e)``,
    so that ``q_s . k_t`` depends on ``s - t`` alone.

    Arguments:
        x: ``(b, heads, l, e)`` queries or keys, ``e`` even. start: the position of the first row.
    """
    e, length = x.shape[-1], x.shape[-2]
    freq = 10_000.0 ** (-torch.arange(0, e // 2, dtype=torch.float32) * 2 / e)  # (e/2,)
    angle = torch.arange(start, start + length, dtype=torch.float32)[:, None] * freq  # (l, e/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., : e // 2], x[..., e // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def _attend(block, x: torch.Tensor, cache=None):
    """Tokens through a :class:`lab.core.transformer.Block` with rotary positions, after the key/value ``cache``.

    Arguments:
        x: ``(b, l, d)`` the new rows (one row, ``l = 1``, after a cache). cache: ``(k, v)``, each
            ``(b, heads, t, d / heads)`` (rotated keys), or None.
    Returns:
        ``(b, l, d)`` and the cache ``l`` rows longer.
    """
    attn = block.attn
    q, k, v = rearrange(attn.qkv(block.norm1(x)), "b l (three h e) -> three b h l e", three=3, h=attn.n_heads)
    start = 0 if cache is None else cache[0].shape[2]
    q, k = rotate(q, start), rotate(k, start)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (b, h, t + l, e)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)  # a cached step sees every key
    x = x + attn.out(rearrange(y, "b h l e -> b l (h e)"))
    return x + block.mlp(block.norm2(x)), (k, v)


class TransformerLM(nn.Module):
    """Token embedding, the blocks of the lab's causal transformer (:class:`lab.core.transformer.Transformer`:
    pre-norm) with rotary positions on queries and keys (the paper's Pythia baseline has them) and a tied head;
    ``step`` attends over each block's key/value cache (the state)."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int = 4):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.body = Transformer(d_model, n_layers, n_heads, causal=True)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor, state=None, return_state: bool = False):
        if state is not None:
            raise ValueError("TransformerLM.forward starts from an empty cache (state=None); continue with step()")
        x, caches = self.embedding(tokens), []  # (b, T, d)
        for block in self.body.blocks:
            x, cache = _attend(block, x)
            caches.append(cache)
        logits = self.head(self.body.norm(x))
        return (logits, caches) if return_state else logits

    def step(self, token: torch.Tensor, state):
        x, caches = self.embedding(token)[:, None], []  # (b, 1, d)
        for block, cache in zip(self.body.blocks, state):
            x, cache = _attend(block, x, cache)
            caches.append(cache)
        return self.head(self.body.norm(x[:, 0])), caches


def build_model(kind: str, d_model: int, n_layers: int, d_state: int) -> nn.Module:
    """A language model over :data:`env.VOCAB` tokens (draws its weights from torch's global generator).

    Arguments:
        kind: one of :data:`KINDS`. d_model: width. n_layers: blocks. d_state: the SSMs' state per channel
            (Mamba) or complex states per layer (LRU); unused by the GRU and the transformer.
    """
    check_choice("model", kind, KINDS)
    if kind == "gru":
        model = GRULM(E.VOCAB, d_model, n_layers)
    elif kind == "transformer":
        model = TransformerLM(E.VOCAB, d_model, n_layers)
    else:
        model = CausalLM(E.VOCAB, kind=kind, d_model=d_model, n_layers=n_layers, d_state=d_state,
                         mixer_kwargs=MIXER_KWARGS[kind])
    nn.init.normal_(model.embedding.weight, std=d_model ** -0.5)
    return model


def masked_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of the next token on the agent's tokens only (``y`` is :data:`env.IGNORE` elsewhere: the
    question, the tool's observations, padding). ``batch = (x, y)``, both ``(b, T)``."""
    x, y = batch
    logits = model(x)  # (b, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=E.IGNORE)


class Episode:
    """One closed-loop episode: the tool, every token in order and who wrote it.

    Attributes:
        tool: the :class:`env.PointerTool` the model drove. tokens: the question and everything after it.
        source: per token, ``question``, ``model`` or ``tool``. expected: the exact answer.
    """

    def __init__(self, task: str, a: list[int], b: list[int], regime: str):
        self.tool = E.PointerTool(a, b, regime)
        self.tokens = E.prompt(task, a, b)
        self.source = ["question"] * len(self.tokens)
        self.expected = E.answer(task, a, b)
        self.pending: int | None = None

    @property
    def correct(self) -> bool:
        """Exact match: the episode ended with DONE and the output tape is the answer, digit for digit."""
        return self.tool.done and self.tool.out == self.expected

    def digits_correct(self) -> float:
        """Share of the answer's digits the output tape has right, position by position."""
        out = self.tool.out
        return sum(i < len(out) and out[i] == d for i, d in enumerate(self.expected)) / len(self.expected)


@torch.no_grad()
def rollout(model: nn.Module, task: str, regime: str, pairs: list[tuple[list[int], list[int]]],
            max_new: int) -> list[Episode]:
    """Run episodes closed loop: the model reads the question (parallel form), then decodes greedily one token at
    a time with its step form; each emitted token goes to the tool, whose observation (if any) is fed back as the
    next input. All operands of ``pairs`` must have the same lengths (one batch).

    Arguments:
        pairs: the problems ``(a, b)``. max_new: tokens an episode may take after the question (a model that has
            not said DONE by then has failed it).
    Returns:
        the episodes, in the order of ``pairs``.
    """
    was_training = model.training
    model.eval()
    episodes = [Episode(task, a, b, regime) for a, b in pairs]
    x = torch.tensor([ep.tokens for ep in episodes], dtype=torch.long)  # (b, P)
    logits, state = model(x, return_state=True)
    last = logits[:, -1]  # (b, V)
    for _ in range(max_new):
        choice = last.argmax(-1).tolist()
        feed = []
        for ep, tok in zip(episodes, choice):
            if ep.tool.done:
                feed.append(E.PAD)
            elif ep.pending is not None:  # the tool's reply to the previous command
                feed.append(ep.pending)
                ep.tokens.append(ep.pending)
                ep.source.append("tool")
                ep.pending = None
            else:
                ep.pending = ep.tool.step(tok)
                ep.tokens.append(tok)
                ep.source.append("model")
                feed.append(tok)
        if all(ep.tool.done for ep in episodes):
            break
        last, state = model.step(torch.tensor(feed, dtype=torch.long), state)
    model.train(was_training)
    return episodes


def score(episodes: list[Episode]) -> dict[str, float]:
    """Closed-loop scores of a batch of episodes: ``exact`` (% exact match), ``digits`` (% answer digits right),
    ``errors`` (oERR tokens per episode), ``finished`` (% that said DONE within the budget)."""
    n = max(len(episodes), 1)
    return {"exact": 100.0 * sum(ep.correct for ep in episodes) / n,
            "digits": 100.0 * sum(ep.digits_correct() for ep in episodes) / n,
            "errors": sum(ep.tool.errors for ep in episodes) / n,
            "finished": 100.0 * sum(ep.tool.done for ep in episodes) / n}
