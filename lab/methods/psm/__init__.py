r"""Prefix-scannable models: sequential-parallel duality with a non-associative aggregator.

Paper: Yau, Gupta, Engelmayer, Irie, Andreas & Jegelka, "Sequential-Parallel Duality in Prefix-Scannable Models"
(arXiv 2506.10918, ICLR 2026).

**Idea.** Linear RNNs and SSMs train in parallel and infer in constant memory because their state update is an
associative combine, so a parallel prefix scan computes every state. The paper asks which models have this
*sequential-parallel duality* and finds a larger class: any model whose state is a prefix "scan" under a fixed
bracketing, with an aggregator that need not be associative. Training evaluates the aggregator on a static
Blelloch tree over chunks (log depth); inference keeps a binary counter of partial aggregates, so it holds
``O(log n)`` chunk states and makes ``O(1)`` aggregator calls per chunk, amortised, while computing exactly the
states training used. With a transformer block as the aggregator (Transformer-PSM), the model can track state
(non-abelian word problems) that a diagonal SSM cannot, and length-generalises where a plain transformer fails.

**Equations.** Chunks ``C_0..C_{n-1}`` of ``c`` tokens:

    x_i = Enc(C_i),     s_i = Agg(s_{i-1}, x_i)  (bracketed as the Blelloch tree),     y_i = Inf(s_{i-1}, C_i)

with ``s_{-1} = e`` an identity flag. The tree: up-sweep ``T[block] = Agg(T[left half], T[right half])`` over aligned
power-of-two blocks; the prefix of ``m`` chunks folds the blocks of ``m``'s binary digits, largest first.
Streaming: a stack of blocks of sizes ``2^j``; pushing a chunk merges equal-sized blocks like a binary increment.
SSMs are the associative special case ``(a_1, b_1) ∘ (a_2, b_2) = (a_2 a_1, a_2 b_1 + b_2)``. Transformer-PSM:
``Agg(x, y)`` = last ``c`` rows of a bidirectional transformer block over ``[x; y]``, ``Inf`` = a causal transformer
over ``[s_{i-1}; C_i]``.

**In this lab.** :mod:`.model` (the PSM with either aggregator, parallel on :func:`kernels.prefix_scan`, streaming
on :class:`kernels.StreamingPrefix`, and the left-fold / naive-recompute controls), :mod:`.train` (matched-size
baselines from :mod:`lab.core`: a causal transformer without positions, LRU, Mamba; cached weights),
:mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live` (the binary counter's trace);
notebook ``06_psm.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Sequential-Parallel Duality in Prefix-Scannable Models",
                     paper="arXiv:2506.10918",
                     summary="A non-associative aggregator on a static Blelloch tree: parallel training, "
                             "O(log n)-state streaming with identical outputs; Transformer-PSM vs transformer, "
                             "LRU, Mamba on state tracking and MQAR at 4x length.")

__all__ = ["METHOD"]
