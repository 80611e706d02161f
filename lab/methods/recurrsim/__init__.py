r"""RecurrSim: test-time accuracy-cost control in neural simulators through recurrent depth.

Paper: Abdul Majid, Sittoni & Tudisco, "Test-Time Accuracy-Cost Control in Neural Simulators via Recurrent-Depth"
(OpenReview U2j9ZNgHqw, ICLR 2026).

**Idea.** Classical solvers trade accuracy for cost through resolution or order; a trained neural simulator has one
fixed cost. RecurrSim makes the depth of the network a test-time knob: an encoder, a recurrent block iterated K times
and a decoder. Trained with a random K per batch, the same weights give a fast, rough step at small K and a more
accurate one at larger K, with no retraining; the cost grows linearly in K while the parameter count does not change.

**Equations.** One step of a simulator ``u(t) -> u(t + dt)``:

    c = E(u),      z_0 ~ N(0, I),      z_k = R(α ⊙ c + β ⊙ z_{k-1}),  k = 1..K,      u(t + dt) = u + D(z_K)

with learned per-channel α, β. RecurrFNO: E = pointwise lift + Fourier layer, R = one Fourier layer (residual,
zero-initialised), D = Fourier layer + pointwise projection; a Fourier layer is σ(F⁻¹[W_k F[v]_k] + P v).

Training draws one depth per batch from a Poisson-log-normal distribution,

    K = Poisson(e^v) + 1,      v ~ N(log K̄ - s²/2, s)      (paper: K̄ = 32, s = 0.5),

and backpropagates through the last B iterations only (truncated backprop through depth, B = 4), with a one-step
supervised loss. At evaluation z_0 is fixed.

Metrics: rollout nRMSE ``||u_pred - u|| / ||u||`` and the correlation horizon τ_α, the first time the Pearson
correlation of prediction and truth falls below α, averaged over α = 0.70 .. 0.99.

**Baselines** (same width, same modes): a fixed-depth FNO with the same parameter count (3 Fourier layers), one with
twice the parameters (6 layers), the same RecurrFNO trained at one fixed K, and a deep-equilibrium FNO (iterate the
block to a fixed point without gradients, then one differentiable step: Jacobian-free backpropagation).

**In this lab.** :mod:`.model` (RecurrFNO, baselines, depth sampler), :mod:`.train` (data, the training on
:func:`lab.core.train.fit`, weights cached under ``data/recurrsim/``), :mod:`.metrics` (nRMSE, tau_alpha, timing),
:mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live` (``simulate`` / ``depth_sweep`` for the
dashboard); FNO layers in :mod:`lab.core.fno`; notebook ``04_recurrsim.ipynb``; dashboard ``recurrsim``.
"""

from lab.methods.recurrsim.config import Config
from lab.registry import Method

METHOD = Method.here(__name__, title="Test-Time Accuracy-Cost Control in Neural Simulators via Recurrent-Depth",
                     paper="OpenReview:U2j9ZNgHqw",
                     summary="Recurrent-depth FNO whose test-time iterations K trade cost for accuracy (Burgers, "
                             "KdV, KS, 2-D NS).")

__all__ = ["Config", "METHOD"]
