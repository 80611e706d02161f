r"""REM: redirect the corrupted data into extra units, then discard them.

Paper: Schoepf, Mozer, Mitchell, Brintrup, Kaissis, Kairouz & Triantafillou, "Redirection for Erasing Memory (REM):
Towards a universal unlearning method for corrupted data" (arXiv 2505.17730, ICLR 2026).

**Idea.** A model trained on partly corrupted data (wrong labels, a backdoor) should be healed after the fact, but
only part of the corruption is usually known. The tasks form a space with two axes: the *discovery rate* (the share
of the corrupted set ``D_c`` that is known, ``D_f``) and the *regularity* of the corruption (random label noise,
which the model memorises example by example, up to a shared concept such as a backdoor trigger, which it learns
from any of its examples). Methods built for one corner fail in others: retraining without ``D_f`` cannot remove a
backdoor that the undiscovered examples still teach; gradient ascent or NPO on ``D_f`` cannot reach memorised noise
they never see. REM adds new units at unlearning time, *redirects* the discovered corrupted data into them (they
all share one mask over the new units), pushes the base units away from the corrupted labels (NPO), fine-tunes
with example-tied masks (every other example has its own fixed mask, so what is peculiar to one example can settle
in the new units too), and then discards the new units with what they absorbed.

**Equations.** Hidden layer ``ℓ`` with base units ``h_b`` and extra units ``h_e`` gated by the example's mask
``m_i ∈ {0,1}^E`` (density ρ; ``m_i = m_f`` for every ``i ∈ D_f``):

    h^ℓ = [ relu(W_b^ℓ h^{ℓ-1}),  m_i^ℓ ⊙ relu(W_e^ℓ h^{ℓ-1}) ],

new incoming weights drawn fresh, new outgoing weights zero (the function is unchanged at the start). One step:

    L = CE(f(x_r; m_r), y_r)  +  CE(f(x_f; m_f), ỹ_f)  +  λ · (2/β) log(1 + (π_θ(ỹ_f | x_f; 0) / π_ref(ỹ_f | x_f))^β)
        fine-tuning with masks   redirection              NPO through the base units (all extra units off)

``ỹ_f``: the corrupted labels of the discovered examples; ``π_ref``: the original model. After training the extra
units are removed: ``f(x; 0)`` is the unlearned model. Metrics: Healed (accuracy on ``D_c`` w.r.t. the true labels),
Utility (test accuracy), score Utility x Healed (the paper: REM 73.40, NPO 67.10, retrain 48.52; REM without
redirection 56.40).

The paper runs two phases: NPO alone on the discovered data through the base units until their accuracy falls
below a threshold, then the loss above. Here the loss above runs from the first step (a probe with the separate
removal phase scored lower; the notebook gives the numbers). The claims' control is the same schedule with no
expansion (no extra units, so no masks and no redirection: NPO's loss on REM's batches); REM without redirection,
the paper's ablation, keeps the units and masks and so shares the claimed property.

**In this lab.** :mod:`.corruptions` (random labels, class-pair flips, a backdoor patch; the discovered part),
:mod:`.model` (the masked MLP, expansion and discarding, example-tied masks, the NPO, GA and REM losses),
:mod:`.train` (the original model, cached; every method of a cell), :mod:`.pool` (every seed and corruption
scored side by side in worker processes), :mod:`.experiment` (``run``), :mod:`.claims`,
:mod:`.plots`, :mod:`.live` (one cell for the ``forgetting`` dashboard); notebook ``17_rem.ipynb``. Data: sklearn
digits (or MNIST-1D) flattened for an MLP, not the paper's CIFAR ResNets.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Redirection for Erasing Memory (REM): Towards a universal unlearning method for "
                           "corrupted data",
                     paper="arXiv:2505.17730",
                     summary="Redirect the known corrupted data into extra units with example-tied masks, push the "
                             "base units away with NPO, discard the extra units.")

__all__ = ["METHOD"]
