r"""Tool-augmented SSMs: interactive tool use lets a fixed-memory model generalise to far longer problems.

Paper: Malach et al., "To Infinity and Beyond: Tool-Use Unlocks Length Generalization in State Space Models"
(arXiv 2510.14826, ICLR 2026).

**Idea.** A state space model carries a state of fixed size, however long its input. The paper proves that such a
model cannot solve "long-form" generation, where the output must depend on an unbounded part of the input: at some
length its state no longer holds what it needs. Give it an external memory it can drive, though, and the picture
changes: with interactive tool use (issue a command, get the tool's reply appended to the context, repeat) an SSM can
learn an algorithm whose every step needs only a bounded local state, and then runs it on problems of any length.
Training data are trajectories of hard-coded agents on short problems; the loss masks the question and the tool's
replies. Mamba trained on <= 5-digit addition stays at 100% to 1,000 digits.

**Equations.** An episode is a token sequence ``q, c_1, o_1, c_2, o_2, ...``: the question ``q``, the model's commands
or outputs ``c_t ~ p_θ(· | q, c_{<t}, o_{<t})`` and the tool's observations ``o_t = Tool(c_{≤t})``. Training minimises

    L(θ) = - Σ_t log p_θ(c_t | q, c_{<t}, o_{<t})          (the question and the o_t are masked)

on the agent's trajectories. The pointer tool keeps the operands and the output on tapes with heads; per column
of LSD-first addition the agent runs ``READ_A → o(a_i), READ_B → o(b_i), write (a_i + b_i + carry) mod 10,
RIGHT_A, RIGHT_B``: the model's state needs only the carry. Without the tool (chain of thought only) the model
must recall ``a_i, b_i`` from the question, ``O(n)`` tokens back: beyond what a fixed state holds.

**In this lab.** :mod:`.env` (tokens, the pointer tool, agents, batches), :mod:`.model` (language models over the
tokens: Mamba and LRU from :mod:`lab.core`, a GRU, the lab's causal transformer with a key/value cache; the closed
loop), :mod:`.train` (cached training), :mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live`
(one episode step by step for the ``reasoning`` dashboard); notebook ``08_tool_ssm.ipynb``.

**Departures from the paper.** Small models (width 32, two layers) trained on <= 5-digit problems as the paper does
(1,000 steps with the tool; the tool-less control 1,500 steps, until it solves the training range) and tested
to 10x that at quick; addition and n x 1 multiplication only (Tower of Hanoi, the search tool for logical graphs and
the single-turn tool regime are not built: no time in this budget); quick trains the tool-less regime for Mamba alone
(the tool-less LRU, time-invariant, did not fit its training range in 1,500 steps). The transformer baseline has
rotary positions, as the paper's Pythia.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="To Infinity and Beyond: Tool-Use Unlocks Length Generalization in State Space Models",
                     paper="arXiv:2510.14826",
                     summary="SSMs driving a pointer-memory tool learn addition on <= 5 digits and run it on 50+; "
                             "without the tool they collapse.")

__all__ = ["METHOD"]
