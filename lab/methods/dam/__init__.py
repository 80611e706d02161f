r"""Dense associative memory: convergence time, attraction basins and capacity against theory.

Paper: Mimura, Takeuchi, Sumikawa, Kabashima & Coolen, "Dynamical properties of dense associative memory"
(arXiv 2506.00851, ICLR 2026).

**Idea.** A dense associative memory (Krotov & Hopfield 2016) stores P patterns ξ^μ ∈ {±1}^N in the energy

    E(σ) = -Σ_μ F(ξ^μ · σ),      F(x) = x^n,

and retrieves by lowering E one spin at a time (or all at once, synchronously). With n ≥ 3 it stores
P ∝ N^{n-1} patterns: the load is α = P / N^{n-1}. The paper's generating-functional analysis of the synchronous
dynamics finds that for n ≥ 3 the crosstalk from the other patterns behaves as fresh Gaussian noise at every step:
retrieval does not act as noise on itself, unlike the classical n = 2 Hopfield network.

**Equations.** Exact update (energy difference, self-coupling excluded):

    σ_i(t+1) = sgn Σ_μ [F(ξ_i^μ + h_μi) - F(-ξ_i^μ + h_μi)],      h_μi = Σ_{j≠i} ξ_j^μ σ_j(t).

Signal-to-noise recursion for the overlap m = ξ^1·σ / N (derived in :mod:`lab.methods.dam.theory`):

    m(t+1) = erf( m(t)^{n-1} / sqrt(2 α (2n-3)!!) ).

For n ≥ 3, m = 0 is stable and the unstable fixed point m_u(α) is the basin edge; the retrieval fixed point
disappears at the recursion's saddle-node α_c (≈ 0.084 for n = 3: the recursion's number, computed in
:mod:`.theory`, not one quoted from the paper). For n = 2 the recursion is exact for one step only; the capacity is
AGS's α_c ≈ 0.138.

**In this lab.** :mod:`.model` (Numba exact update in O(NP) a sweep), :mod:`.theory` (the recursion, its fixed
points and critical load, AGS), :mod:`.measures` (reading trajectories), :mod:`.experiment` (``run``),
:mod:`.claims` (``CLAIMS``), :mod:`.plots`, :mod:`.live` (the dashboard's small experiment); notebook
``01_dam.ipynb``; dashboard ``hopfield``.
"""

from lab.registry import Method

TITLE = "Dynamical properties of dense associative memory"
SUMMARY = "Dense associative memory dynamics: overlap trajectories, basins, capacity and crosstalk vs theory."

METHOD = Method.here(__name__, title=TITLE, paper="arXiv:2506.00851", summary=SUMMARY)

__all__ = ["METHOD", "SUMMARY", "TITLE"]
