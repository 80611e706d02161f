r"""CompreSSM: shrink LRU blocks during training by balanced truncation with Hankel singular values.

Paper: Chahine, Nazari, Rus & Rusch, "The Curious Case of In-Training Compression of State Space Models"
(arXiv 2510.02823, ICLR 2026).

**Idea.** A linear time-invariant SSM block is a dynamical system whose state dimensions differ in how much they
matter to the input-output map. Control theory measures this with the Hankel singular values (HSVs): the square
roots of the eigenvalues of the product of the controllability and observability Gramians. Balanced truncation
keeps the dimensions of largest HSV and comes with an error bound. CompreSSM applies it *during* training: in the
first part of training it periodically reduces each block to the smallest rank that keeps most of the HSVs' mass,
then keeps training the smaller model. The paper finds that such models keep the accuracy of the large model,
train faster after the cut, and beat models trained directly at the small size.

**Equations.** For an LRU block ``h_t = diag(λ) h_{t-1} + B̄ x_t``, ``y_t = Re(C h_t)`` (``B̄ = diag(γ) B``):

    P_ij = (B̄ B̄ᴴ)_ij / (1 - λ_i conj(λ_j)),      Q_ij = (Cᴴ C)_ij / (1 - conj(λ_i) λ_j),      σ = sqrt(eig(P Q)),

rank ``r`` = smallest with ``σ_1 + ... + σ_r >= (1 - τ) Σ σ``; square-root balancing ``Loᴴ Lc = U Σ Vᴴ``,
``T = Lc V_r Σ_r^{-1/2}``, ``W = Lo U_r Σ_r^{-1/2}``, ``(A_r, B_r, C_r) = (Wᴴ A T, Wᴴ B̄, C T)`` with
``||G - G_r||_∞ <= 2 Σ_{i>r} σ_i``; re-diagonalise ``A_r = V Λ V^{-1}`` and map back to LRU parameters
(``ν = -log|λ|``, ``θ = arg λ``, ``γ = sqrt(1 - |λ|²)``, ``B = V^{-1} B_r / γ``, ``C = C_r V``), truncating the
optimiser's moments with the states.

**Regime.** Starting large can only beat training small where the small size limits the model: the paper's
sMNIST setting has one block with few channels (H = 8, N = 256) and eigenvalues on the ring [0.9, 0.999]. The lab's
quick profile scales that down (H = 8, N = 128, digits) and checks the regime first (the full model above the small
model trained from scratch by more than 2 pt on every seed), gating the paper's claims on it.

**In this lab.** :mod:`.model` (Gramians, HSVs, balanced truncation, layer reduction with ill-conditioning handled),
:mod:`.train` (training runs with the reductions and their counted work), :mod:`.experiment` (``run``),
:mod:`.claims`, :mod:`.plots`; shared: LRU (:mod:`lab.core.ssm`), the sequence tasks and classifiers
(:mod:`lab.core.tasks`); notebook ``03_compressm.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="The Curious Case of In-Training Compression of State Space Models",
                     paper="arXiv:2510.02823",
                     summary="Balanced truncation of LRU blocks by Hankel singular values early in training: "
                             "smaller, as good.")

__all__ = ["METHOD"]
