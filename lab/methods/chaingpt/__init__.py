r"""ChainGPT: multi-substep state updates and state-guided sparse attention inside each layer, recurrent depth with
adaptive stopping across layers.

Paper: Zheng, Wang, Ren & Wei, "Dual-Reasoning Model with Recurrent Depth and Multi-Rank State Updates"
(OpenReview kdZbxizwGK, ICLR 2026; no code released). The primary PDF could not be read: every equation and number
marked [secondary] below comes from summaries of the paper and is **unverified against it**.

**Idea.** Two kinds of "reasoning" in one model. *Within a layer*, each token updates a matrix state by several
substeps, so one token applies a richer transition (a product of Householder-like factors, i.e. diagonal plus rank
``M``) than the rank-1 delta rule; a sparse attention reads a local window plus anchors that the state layer fills
with segment summaries. *Across layers*, one core block is looped (recurrent depth): more iterations, more
computation per token, and an entropy rule decides per token when to stop.

**Equations.**

* Multi-substep state update ("RWKV-Product") [secondary]: ``s_t = A(x_t) s_{t-1} + B(x_t)`` with
  ``A(x_t) = Π_{j<M} (diag(a_{t,j}) - β_j k_{t,j} k_{t,j}ᵀ)``; keys and values are a shared base plus a low-rank
  delta per substep, ``k_{t,j} = k_t + U_j V_j x_t``; β by sigmoid gates; ``M = 2`` reported best.
* State-guided sparse attention [secondary], not top-k: each query attends to a local window of ``W`` tokens plus
  global anchors every ``G`` tokens (``G`` = 32/64/128 tested), into which the state layer writes segment summaries;
  cost ``O(T (W + T/G))``.
* Recurrent depth [secondary]: bottom block, looped core, top module; training by a gradient-free warm-up that
  iterates the core towards its fixed point, then truncated backprop through the last few iterations; gains from
  x1 to x16 iterations, best at x12. Adaptive stopping: stop when the entropy drop of the output distribution
  ``ΔH_t = H_{t-k} - H_t <= τ``.
* Numbers [secondary]: MQAR at length 2048 with 256 pairs > 99% vs RWKV-7 72.93%; GOAT arithmetic 57.53% vs
  RWKV-7 23.69%, Qwen3 33.82%.

**In this lab** (choices the summaries leave open, made here and documented in the code):

* The state layer runs on :func:`kernels.delta_rule` with ``num_householder = M`` and a diagonal log-decay gate
  per substep (one decay per key channel), so our transition is
  ``A(x_t) = Π_j diag(α_tj) (I - β_tj k_tj k_tjᵀ) = Π_j (diag(α_tj) - β_tj (α_tj ⊙ k_tj) k_tjᵀ)`` (state ``S``
  right-multiplied): the paper's diagonal per substep, its rank-one part with the key decayed on the left (Kimi
  Delta Attention's form, which keeps the chunked WY kernel exact); gates, like keys and values, are a shared base
  plus a low-rank delta per substep, their decay rates starting log-uniform on [1e-3, 1e-1] (Mamba's Δ range).
  ``β = 2σ(·)`` in ``(0, 2)`` allows negative eigenvalues
  (DeltaProduct, arXiv 2502.10297), which state tracking needs. Keys and values read a token-shifted input
  (RWKV's lerp of ``x_t`` and ``x_{t-1}``). The one-substep control gets a delta of rank ``M x delta_rank``, so
  both have the same low-rank parameters (the counts are recorded; the ``M`` β gates differ by ``d + 1`` per head).
* An anchor's key and value are projections of the state layer's output at the end of its segment; the window and
  the anchors share one softmax, computed densely under a mask (same outputs as the sparse form at our lengths).
* Core input injection ``h_i = Core(Adapter([h_{i-1}; e]))`` with ``h_0 = 0`` (as in Geiping et al.'s recurrent
  depth); training draws the depth ``r`` uniformly in ``1..r_max`` per step and backpropagates through the last
  ``bptt`` iterations. Stopping is per token: a stopped token keeps its state and still serves as context.

:mod:`lab.core.chain` (the block and its two mixers, shared with the arena), :mod:`.model` (looped model,
adaptive stopping), :mod:`.train` (data, models, cached training, evaluation), :mod:`.experiment` (``run``),
:mod:`.claims`, :mod:`.plots`, :mod:`.live` (per-token iterations for the dashboard); shared:
:func:`kernels.delta_rule`, the transformer and Mamba baselines (:mod:`lab.core`), the tasks
(:mod:`lab.datasets.synthetic`); notebook ``09_chaingpt.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Dual-Reasoning Model with Recurrent Depth and Multi-Rank State Updates (ChainGPT)",
                     paper="OpenReview:kdZbxizwGK",
                     summary="Multi-substep delta-rule state updates, window + anchor attention, and a looped "
                             "core block that stops per token when its output entropy stops dropping.")

__all__ = ["METHOD"]
