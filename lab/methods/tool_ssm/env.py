"""The pointer-memory tool, its token vocabulary, the hard-coded agents and their training trajectories.

One vocabulary serves the question, the agent's commands and outputs, and the tool's observations::

    0..9             digits: in the question; emitted by the agent they are the command "write σ" (σ = the digit)
    +  *  =          question operators
    READ_A READ_B    read the symbol under the operand heads          -> an observation token
    RIGHT_A RIGHT_B  move an operand head one cell to the right       (no observation)
    LEFT_A LEFT_B    move an operand head one cell to the left        (no observation; ERR left of cell 0)
    DONE             end of the episode
    o0..o9 oEND      observations: a digit, or the blank past an operand's end
    oERR             the observation of a malformed command
    PAD              padding (never emitted by the data)

Operands are written least significant digit first (as the paper's agents read them). The output tape is written
left to right: each "write σ" puts σ under the output head and moves it on. A model can emit any token; whatever
the tool cannot execute (an observation token, an operator, a write in the wrong place...) is answered with
``oERR`` and the episode goes on, so a malformed command is an error token in the episode, never a crash.

Three regimes share these tokens (the paper's three, with "single-turn tool use" not built here):

* ``tool``: interactive tool use: the tool answers each READ; the loss masks the question and the observations.
* ``cot``: chain of thought only, the same model without the tool: the same trajectory, but nobody answers the
  READs: the model must write the observation tokens itself (from the question in its context), and they are in
  its loss.
* ``direct``: the answer digits right after the question, then DONE.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from lab.methods.tool_ssm.config import REGIMES, TASKS

__all__ = ["AGENT_TOKENS", "DONE", "IGNORE", "NAMES", "OBS", "OBS_END", "OBS_ERR", "PAD", "READ_A", "READ_B",
           "REGIMES", "RIGHT_A", "RIGHT_B", "LEFT_A", "LEFT_B", "TASKS", "VOCAB", "PointerTool", "agent_episode",
           "answer", "batch", "budget", "problems", "prompt", "test_problems", "token_names"]

PLUS, TIMES, EQ = 10, 11, 12
READ_A, READ_B, RIGHT_A, RIGHT_B, LEFT_A, LEFT_B, DONE = range(13, 20)
OBS = 20  # o0..o9 are OBS + digit
OBS_END, OBS_ERR, PAD = 30, 31, 32
VOCAB = 33
IGNORE = -100  # cross_entropy's ignore_index
NAMES = ([str(d) for d in range(10)] + ["+", "*", "="]
         + ["READ_A", "READ_B", "RIGHT_A", "RIGHT_B", "LEFT_A", "LEFT_B", "DONE"]
         + [f"o{d}" for d in range(10)] + ["oEND", "oERR", "PAD"])
#: tokens an agent (or a model) emits; the rest are the question's and the tool's
AGENT_TOKENS = tuple(range(10)) + (READ_A, READ_B, RIGHT_A, RIGHT_B, LEFT_A, LEFT_B, DONE)
_MOVES = {RIGHT_A: ("a", 1), RIGHT_B: ("b", 1), LEFT_A: ("a", -1), LEFT_B: ("b", -1)}


def token_names(tokens) -> list[str]:
    """Readable names of token ids (unknown ids as ``?<id>``)."""
    return [NAMES[int(t)] if 0 <= int(t) < VOCAB else f"?{int(t)}" for t in tokens]


def prompt(task: str, a: list[int], b: list[int]) -> list[int]:
    """The question: ``a + b =`` or ``a * b =``, digits least significant first."""
    return [*a, PLUS if task == "add" else TIMES, *b, EQ]


def answer(task: str, a: list[int], b: list[int]) -> list[int]:
    """The exact answer by integer arithmetic, least significant digit first: ``len(a)`` digits (leading zeros
    kept, as the operands have them), plus one more when the result needs it."""
    x = int("".join(map(str, a[::-1])))
    y = int("".join(map(str, b[::-1])))
    value = x + y if task == "add" else x * y
    text = str(value).zfill(len(a))
    return [int(c) for c in text[::-1]]


def problems(task: str, n: int, count: int, rng: np.random.Generator) -> list[tuple[list[int], list[int]]]:
    """``count`` random problems with ``n``-digit operands (``mul``: times one digit), digits uniform in 0..9."""
    out = []
    for _ in range(count):
        a = rng.integers(0, 10, n).tolist()
        b = rng.integers(0, 10, n if task == "add" else 1).tolist()
        out.append((a, b))
    return out


@dataclass
class PointerTool:
    """Pointer-based memory over the two operands and the output, driven one emitted token at a time.

    Arguments:
        a, b: the operands' digits (least significant first), on tracks ``a`` and ``b``.
        regime: ``tool`` (READs are answered), ``cot`` (no tool: commands and self-written observations are
            thoughts, only writes and DONE act) or ``direct`` (only writes and DONE are valid).

    :meth:`step` takes one token and returns the observation token to append (or None). ``log`` keeps one entry
    per step (token, observation, heads and output after it) for the dashboard.
    """

    a: list[int]
    b: list[int]
    regime: str = "tool"
    heads: dict = field(default_factory=lambda: {"a": 0, "b": 0})
    out: list[int] = field(default_factory=list)
    done: bool = False
    errors: int = 0
    log: list = field(default_factory=list)

    def read(self, track: str) -> int:
        tape, pos = (self.a, self.heads["a"]) if track == "a" else (self.b, self.heads["b"])
        return OBS + tape[pos] if pos < len(tape) else OBS_END

    def _execute(self, token: int) -> int | None:
        if self.done:
            return OBS_ERR
        if 0 <= token <= 9:  # write σ: under the output head, which moves on
            self.out.append(token)
            return None
        if token == DONE:
            self.done = True
            return None
        if self.regime == "direct":
            return OBS_ERR
        if self.regime == "cot":  # no tool: commands and observations are the model's own thoughts
            return None if READ_A <= token <= LEFT_B or OBS <= token <= OBS_END else OBS_ERR
        if token in (READ_A, READ_B):
            return self.read("a" if token == READ_A else "b")
        if token in _MOVES:
            track, step = _MOVES[token]
            if self.heads[track] + step < 0:
                return OBS_ERR
            self.heads[track] += step
            return None
        return OBS_ERR  # an observation, an operator or PAD is no command

    def step(self, token: int) -> int | None:
        """Execute the emitted ``token``; returns the observation token to append, or None."""
        token = int(token)
        obs = self._execute(token)
        if obs == OBS_ERR:
            self.errors += 1
        self.log.append({"token": token, "obs": obs, "a": self.heads["a"], "b": self.heads["b"],
                         "out": list(self.out)})
        return obs


def agent_episode(task: str, a: list[int], b: list[int], regime: str = "tool") -> tuple[list[int], list[bool]]:
    """The hard-coded agent's episode for one problem: the question, then its tokens and the tool's replies.

    Per column (``add``): READ_A, o(a_i), READ_B, o(b_i), write (a_i + b_i + carry) mod 10, RIGHT_A, RIGHT_B;
    (``mul``, one-digit b): READ_A, o(a_i), READ_B, o(b), write (a_i b + carry) mod 10, RIGHT_A (the head of b
    stays). When A reads oEND: write the carry if it is not 0, then DONE. Every step needs the carry only.

    Returns:
        ``tokens`` (question + episode) and ``targets``: True where the token is in the loss (the agent's tokens;
        in the ``cot`` regime also the observations, which the model must write itself).
    """
    tokens = prompt(task, a, b)
    targets = [False] * len(tokens)

    def emit(tok: int, obs: int | None = None, learn_obs: bool = False):
        tokens.append(tok)
        targets.append(True)
        if obs is not None:
            tokens.append(obs)
            targets.append(learn_obs)

    if regime == "direct":
        for d in answer(task, a, b):
            emit(d)
        emit(DONE)
        return tokens, targets
    tool = PointerTool(a, b, "tool")
    carry = 0
    while True:
        oa = tool.step(READ_A)
        emit(READ_A, oa, regime == "cot")
        if oa == OBS_END:
            break
        ob = tool.step(READ_B)
        emit(READ_B, ob, regime == "cot")
        value = (oa - OBS) + (ob - OBS) + carry if task == "add" else (oa - OBS) * (ob - OBS) + carry
        carry, digit = divmod(value, 10)
        tool.step(digit)
        emit(digit)
        for move in (RIGHT_A, RIGHT_B) if task == "add" else (RIGHT_A,):
            tool.step(move)
            emit(move)
    if carry:
        tool.step(carry)
        emit(carry)
    tool.step(DONE)
    emit(DONE)
    return tokens, targets


def batch(task: str, regime: str, lengths: tuple[int, int], size: int,
          rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch of agent episodes with operand lengths uniform in ``lengths`` (inclusive), right-padded.

    Returns:
        ``x`` ``(size, T)`` int64 tokens and ``y`` ``(size, T)`` int64 next-token targets: ``y[:, t] = x[:, t+1]``
        where that token is in the loss, :data:`IGNORE` elsewhere (question, tool observations, padding).
    """
    rows = []
    for _ in range(size):
        n = int(rng.integers(lengths[0], lengths[1] + 1))
        (a, b), = problems(task, n, 1, rng)
        rows.append(agent_episode(task, a, b, regime))
    T = max(len(t) for t, _ in rows)
    x = np.full((size, T), PAD, np.int64)
    y = np.full((size, T), IGNORE, np.int64)
    for i, (tok, tgt) in enumerate(rows):
        x[i, : len(tok)] = tok
        nxt = np.where(tgt[1:], tok[1:], IGNORE)
        y[i, : len(tok) - 1] = nxt
    return torch.from_numpy(x), torch.from_numpy(y)


def test_problems(task: str, n: int, count: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """The closed-loop test problems of length ``n``: the same for every model and regime of a run."""
    return problems(task, n, count, np.random.default_rng([seed, 7, n]))


def budget(task: str, regime: str, n: int) -> int:
    """Tokens a closed-loop episode may take after the question: twice the agent's, plus 8."""
    (a, b), = problems(task, n, 1, np.random.default_rng(0))
    tokens, _ = agent_episode(task, a, b, regime)
    return 2 * (len(tokens) - len(prompt(task, a, b))) + 8
