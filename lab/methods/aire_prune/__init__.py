r"""AIRE-Prune: prune the states of a trained state space model by their asymptotic impulse-response energy.

Paper: Padhy, Camacho & Mukhopadhyay, "AIRE-Prune: Asymptotic Impulse-Response Energy for State Pruning in State
Space Models" (arXiv 2602.00534, ICLR 2026).

**Idea.** A diagonal SSM layer ``h_t = λ ⊙ h_{t-1} + B̄ x_t``, ``y_t = C h_t`` is a sum of independent one-state
systems. State i's impulse response is ``C_i λ_i^k B̄_i``; the energy it contributes to the output over an infinite
horizon is, in closed form,

    E_i = Σ_k ||C_i λ_i^k B̄_i||² = ||C_i||² ||B̄_i||² / (1 - |λ_i|²).

Removing state i changes the layer's long-run output energy by exactly ``E_i`` (the states' responses add), so
modal truncation by ``E`` minimises that distortion within a layer. To compare states across layers of a deep stack,
each layer's energies are normalised by their tail sums: sorted ascending, ``Ê_(k) = E_(k) / Σ_{j>=k} E_(j)``; a
single global top-K over ``Ê`` then decides how many states each layer keeps (its largest state always has
``Ê = 1``, so no layer is emptied). No retraining follows. The paper reports 60.8% of states pruned on average for
a 0.29% average accuracy drop (LRA).

**Baselines.** LAST (Gwak et al. 2024) scores a state by its H∞ gain ``||C_i||² ||B̄_i||² / (1 - |λ_i|)²`` with the
same normalisation; eigenvalue magnitude ``|λ_i|``; random states; and AIRE applied per layer with the same share
pruned everywhere.

**In this lab.** LRU and S5 classifiers on short sequence tasks; the claims' verdicts are about S5, the paper's
architecture, and the LRU is a report row (its γ normalisation cancels the energy's denominator, see
:mod:`.claims`). :mod:`.model` (scores, normalisation, selection, state removal), :mod:`.train` (the cached
classifiers), :mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live` (the dashboard's cached
computations); shared: the SSM layers (:mod:`lab.core.ssm`), the sequence tasks and classifiers
(:mod:`lab.core.tasks`); notebook ``02_aire_prune.ipynb``; dashboard ``pruning``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="AIRE-Prune: Asymptotic Impulse-Response Energy for State Pruning in State Space Models",
                     paper="arXiv:2602.00534",
                     summary="Prune SSM states by their infinite-horizon impulse-response energy, layer-normalised, "
                             "no retraining.")

__all__ = ["METHOD"]
