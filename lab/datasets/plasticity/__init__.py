r"""Plasticity benchmarks with known ground truth: networks whose connectivity drifts across sessions under a slow
law driven by a stimulation schedule (STEER, arXiv 2603.00213).

A *session* k is one recording of T steps of fast dynamics with fixed connectivity W_k. Between sessions the
connectivity changes under a slow law driven by the session's stimulation summary ū_k (the mean of the
plasticity-inducing stimulation over the session). Four benchmarks:

``lowrank_linear``
    A rate network, fast dynamics (Euler-Maruyama, the model's own form)

        x_{t+1} = x_t + dt (-x_t + W_k tanh(x_t) + B u_t) + sqrt(dt) σ_p ξ_t,      y_t = x_t + σ_o ε_t,

    with low-rank connectivity W_k = Σ_r c_{k,r} m_r n_rᵀ (orthonormal m's, orthonormal n's, overlap m_r·n_r = 0.5)
    and a linear-plus-interaction law per component (stimulation potentiates mode 1 and depresses mode 2):
    c_{k+1,r} = c_{k,r} + a_r ū_k - b_r (c_{k,r} - c*_r) + γ_r c_{k,r} ū_k.
``lowrank_bcm``
    The same network with a BCM-like law: a Hebbian term η c ū (the mode's strength times the stimulation) set
    against a threshold c/θ that slides up with the mode's own strength, so that potentiation turns into depression
    once the mode outgrows the drive, plus a slow decay: c_{k+1,r} = c_{k,r} + η_r c_{k,r} (ū_k - c_{k,r}/θ_r)
    - λ_r (c_{k,r} - c*_r).
``lorenz``
    A stimulated Lorenz system (σ = 10, β = 8/3) whose ρ drifts, ρ_{k+1} = ρ_k + a ū_k - b (ρ_k - ρ*), integrated
    with RK4 and recorded in normalised coordinates x̃ = (x - μ) / s. In those coordinates the vector field is a
    quadratic polynomial, so W_k acts on the features φ(x̃) = [x̃, quadratic monomials of x̃] (P = 9) and
    W_k = W_0 + ρ_k (s_x / s_y) e_y e_xᵀ: a shared part plus a rank-one change.
``bcm_network``
    Off the model's assumptions: a full-rank rate network whose every synapse follows BCM plasticity with a sliding
    threshold, applied to the session's activity, ΔW_ij = η ⟨y_i (y_i - θ_i) y_j⟩ - λ (W_ij - W_ij^init),
    θ_i ← θ_i + (⟨y_i²⟩ - θ_i) / τ_θ, y = tanh(x). The change is not low rank and depends on a hidden state θ.

The rules of the first three benchmarks are sparse in one library of candidate terms per component,
Θ(c, ū) = [1, c, ū, c·ū, c²] (:data:`LIBRARY_TERMS`): Δc_r = Ξ_r · Θ(c_r, ū) with a known Ξ
(:meth:`PlasticityBenchmark.true_rule`; ``None`` for ``bcm_network``). The low-rank rules use four of the five terms,
a different four for the linear and the BCM-like laws; the Lorenz rule uses three.

Inputs: channel 0 of u_t is the plasticity-inducing stimulation, a square pulse train of height ~2 ū_k that is on
half of each ``pulse_period`` steps (its session mean is exactly ū_k); channels 1..n_probe are known probe inputs
(Ornstein-Uhlenbeck, unit variance, time constant 1) that excite the network in every session, stimulated or not,
as test pulses do in a plasticity experiment.

Shapes (:class:`Sessions`): recorded activity ``y`` (K, T+1, N), inputs ``u`` (K, T, S), stimulation summaries
``ubar`` (K,), true connectivity ``W`` (K, N, P) in the recorded (normalised) coordinates, true coefficients ``c``
(K, R). Everything is drawn from a :class:`numpy.random.Generator`, so a seed fixes a benchmark. Generation takes
well under a second, so nothing is cached on disk.

Modules: :mod:`.schedules` (library, schedules, inputs, features), :mod:`.networks` (sessions, base class, rate
networks), :mod:`.lorenz`.
"""


from __future__ import annotations

from typing import Any

import numpy as np

from lab.checks import check_choice
from lab.datasets.plasticity.lorenz import PlasticLorenz
from lab.datasets.plasticity.networks import BCMNetwork, LowRankPlasticNetwork, PlasticityBenchmark, Sessions
from lab.datasets.plasticity.schedules import (
    FEATURES,
    LIBRARY_TERMS,
    PATTERNS,
    features,
    library,
    library_terms,
    n_features,
    session_inputs,
    stimulation_schedule,
)

__all__ = ["BENCHMARKS", "FEATURES", "LIBRARY_TERMS", "PATTERNS", "BCMNetwork", "LowRankPlasticNetwork",
           "PlasticLorenz", "PlasticityBenchmark", "Sessions", "features", "library", "library_terms",
           "make_benchmark", "n_features", "session_inputs", "stimulation_schedule"]

BENCHMARKS = ("lowrank_linear", "lowrank_bcm", "lorenz", "bcm_network")


def make_benchmark(name: str, *, N: int = 30, T: int | None = None, seed: int = 0, **options: Any
                   ) -> PlasticityBenchmark:
    """Build a benchmark by name (:data:`BENCHMARKS`), its fixed parts (factors, input matrix) drawn from ``seed``.

    Arguments:
        name: one of BENCHMARKS. N: units of the rate networks (the Lorenz system has 3). T: steps per session
        (default: 500 for the networks, 800 for Lorenz). options: passed to the benchmark's class.
    """
    check_choice("benchmark", name, BENCHMARKS)
    rng = np.random.default_rng([seed, BENCHMARKS.index(name)])
    if name == "lorenz":
        return PlasticLorenz(rng=rng, **({} if T is None else {"T": T}), **options)
    if name == "bcm_network":
        return BCMNetwork(N=N, rng=rng, **({} if T is None else {"T": T}), **options)
    return LowRankPlasticNetwork(name.split("_", 1)[1], N=N, rng=rng, **({} if T is None else {"T": T}), **options)
