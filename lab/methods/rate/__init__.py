r"""RATE: a transformer that acts from a recurrent memory carried across segments of its trajectory.

Paper: Cherepanov, Staroverov, Kovalev & Panov, "Recurrent Action Transformer with Memory" (arXiv 2306.09459,
ICLR 2026). Code: CognitiveAISystems/RATE.

**Idea.** A Decision Transformer acts from the last K steps of (return-to-go, observation, action) tokens; whatever
happened before its context is lost, so a clue seen once at the start of a long episode cannot guide a late
decision. RATE cuts the trajectory into segments of K steps and gives every segment memory tokens: a read prefix
(the memory so far) and a write suffix (what the segment leaves behind), with causal attention. Between segments a
Memory Retention Valve lets the old memory decide what of the new one to take, so that information survives many
segments of distractors. The memory is carried through every segment of an episode at inference, so the horizon
is not bounded by the context.

**Equations.** Segment n of the trajectory, ``S_n = (R_t, o_t, a_t)_{t = nK}^{nK + K - 1}``:

    (â_n, M~_{n+1}) = Transformer([M_n; S_n; M_n])          causal; M~_{n+1}: the outputs at the suffix
    M_{n+1} = MultiHead(Q = M_n, K = V = ReLU(M~_{n+1}))       the Memory Retention Valve (MRV), official code

``M_0`` is learned. Training: cross-entropy of the oracle's actions over whole trajectories, the memory carried with
its gradient through every segment, as the paper describes. The official trainer detaches the memory between
segments (so the write path and the valve get no gradient; only reading the memory is learned): ``rate_detached``,
the same model trained so, is run beside it.
``valve_form='lab'`` gives the valve this lab built first, ``FFN(MultiHead(...))`` with three LayerNorms. The
ablation passes ``M~_{n+1}`` straight on as ``M_{n+1}``.

**In this lab.** :mod:`.env` (the T-Maze of RATE's repository with numpy: observation [y, clue, flag, noise], the
clue only at t = 0, a flag at the junction, reward only for the clue's arm; oracle trajectories; closed-loop
rollouts), :mod:`.minigrid` (MiniGrid-Memory from the ``minigrid`` package with a scripted oracle), :mod:`.model`
(RATE with and without the valve, with and without the detach, Decision Transformers with a short and a
long context, a GRU), :mod:`.train` (equal budgets, cached weights), :mod:`.experiment` (``run``), :mod:`.claims`,
:mod:`.plots`, :mod:`.live` (the ``agents`` dashboard); notebook ``19_rate.ipynb``. Scale: K = 10, N = 3
(T_train = 30), a 2-layer d = 64 transformer, tests up to 3000 steps (100 x T_train) at ``quick``; the paper trains
on corridors up to 900 and tests up to 9600.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Recurrent Action Transformer with Memory",
                     paper="arXiv:2306.09459",
                     summary="Segments framed by read/write memory tokens, a Memory Retention Valve between them: "
                             "a T-Maze clue carried far beyond the context and the training length.")

__all__ = ["METHOD"]
