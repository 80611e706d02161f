r"""Gramians, Hankel singular values, balanced truncation and their application to LRU layers during training.

A trained LRU layer is the discrete-time system ``h_t = A h_{t-1} + B̄ x_t``, ``y_t = C h_t`` with ``A = diag(λ)``
(its real output ``Re(C h)`` is handled through the complex system: the real part of an error is no larger than
the error). For a diagonal ``A`` the Gramians solve their Stein equations in closed form:

    P = A P Aᴴ + B̄ B̄ᴴ   ->   P_ij = (B̄ B̄ᴴ)_ij / (1 - λ_i conj(λ_j))        (controllability)
    Q = Aᴴ Q A + Cᴴ C   ->   Q_ij = (Cᴴ C)_ij / (1 - conj(λ_i) λ_j)        (observability)

and the Hankel singular values are ``σ = sqrt(eig(P Q))``. Balanced truncation keeps the ``r`` largest; the
reduced system satisfies ``||G - G_r||_∞ <= 2 Σ_{i>r} σ_i`` with ``G(z) = C (zI - A)^{-1} B̄``.

**Ill-conditioning.** These are Cauchy-like matrices: with ``|λ| -> 1`` or nearly equal eigenvalues they are
numerically singular, Cholesky fails and ``eig(PQ)`` loses the small ``σ``. We therefore (i) compute in complex128,
(ii) factor ``P = Lc Lcᴴ`` and ``Q = Lo Loᴴ`` through Hermitian eigendecompositions, dropping directions below
``eps · max`` (a rank-revealing square root that always exists), (iii) take ``σ`` as the singular values of
``Loᴴ Lc`` (the square-root method, accurate where ``eig(PQ)`` is not) and (iv) invert only the kept ``σ``, never
keeping one below ``1e-12 σ_max``. The condition numbers are reported with every reduction.

**Re-diagonalisation.** The balanced, truncated ``A_r`` is full; its eigendecomposition ``A_r = V Λ V^{-1}`` gives
back a diagonal system ``(Λ, V^{-1} B_r, C_r V)`` that :meth:`lab.core.ssm.LRU.set_system` turns into LRU parameters
(``ν, θ`` from ``Λ``, ``γ = sqrt(1 - |λ|²)``, ``B = B̄ / γ``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from lab.core.ssm import LRU

#: eigen-directions of a Gramian below this fraction of its largest eigenvalue are treated as exactly zero
GRAMIAN_RTOL = 1e-14
#: Hankel singular values below this fraction of the largest are never kept (they cannot be inverted safely)
HSV_RTOL = 1e-12


def gramians(lam: np.ndarray, Bbar: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form controllability and observability Gramians of ``(diag(λ), B̄, C)``: ``(N, N)`` each.

    Arguments:
        lam: ``(N,)`` eigenvalues, ``|λ| < 1``. Bbar: ``(N, H)``. C: ``(H_out, N)``.
    """
    lam = np.asarray(lam, np.complex128)
    Bbar, C = np.asarray(Bbar, np.complex128), np.asarray(C, np.complex128)
    P = (Bbar @ Bbar.conj().T) / (1.0 - lam[:, None] * lam.conj()[None, :])
    Q = (C.conj().T @ C) / (1.0 - lam.conj()[:, None] * lam[None, :])
    return P, Q


def _sqrt_factor(M: np.ndarray) -> tuple[np.ndarray, float]:
    """``L`` with ``M ≈ L Lᴴ`` for a Hermitian positive semi-definite ``M``, and ``M``'s condition number."""
    M = 0.5 * (M + M.conj().T)
    w, U = np.linalg.eigh(M)
    top = max(float(w[-1]), 0.0)
    keep = w > GRAMIAN_RTOL * top
    cond = float(top / w[0]) if w[0] > 0 else np.inf
    return U[:, keep] * np.sqrt(w[keep]), cond


@dataclass
class Balanced:
    """Square-root balancing of a system: HSVs and the factors needed to truncate it to any rank."""

    hsv: np.ndarray  # (n,) Hankel singular values, descending
    Lc: np.ndarray
    Lo: np.ndarray
    U: np.ndarray
    V: np.ndarray  # Loᴴ Lc = U diag(hsv) Vᴴ
    cond_P: float
    cond_Q: float


def balance(lam: np.ndarray, Bbar: np.ndarray, C: np.ndarray) -> Balanced:
    """Hankel singular values by the square-root method (see the module docstring)."""
    P, Q = gramians(lam, Bbar, C)
    Lc, cond_P = _sqrt_factor(P)
    Lo, cond_Q = _sqrt_factor(Q)
    U, s, Vh = np.linalg.svd(Lo.conj().T @ Lc, full_matrices=False)
    n = len(lam)
    hsv = np.zeros(n)
    hsv[: len(s)] = s
    return Balanced(hsv, Lc, Lo, U, Vh.conj().T, cond_P, cond_Q)


def hankel_singular_values(lam, Bbar, C) -> np.ndarray:
    """``σ_1 >= σ_2 >= ...``: ``(N,)``."""
    return balance(lam, Bbar, C).hsv


def rank_for(hsv: np.ndarray, tau: float) -> int:
    """Smallest ``r`` whose ``r`` largest HSVs hold at least ``(1 - τ)`` of their sum (the paper's rule on σ)."""
    if not 0.0 <= tau < 1.0:
        raise ValueError(f"tau={tau!r} is not allowed; allowed range [0, 1)")
    s = np.sort(np.asarray(hsv, float))[::-1]
    total = s.sum()
    if total <= 0:
        return 1
    r = int(np.searchsorted(np.cumsum(s), (1.0 - tau) * total * (1 - 1e-12)) + 1)
    usable = int(np.sum(s > HSV_RTOL * s[0]))
    return max(1, min(r, usable, len(s)))


def balanced_truncation(lam, Bbar, C, r: int, bal: Balanced | None = None):
    """Reduce ``(diag(λ), B̄, C)`` to order ``r`` by square-root balanced truncation.

    Returns:
        ``(A_r (r, r), B_r (r, H), C_r (H_out, r))`` with ``A_r = Wᴴ A T``, ``B_r = Wᴴ B̄``, ``C_r = C T``,
        ``T = Lc V_r Σ_r^{-1/2}``, ``W = Lo U_r Σ_r^{-1/2}`` (so ``Wᴴ T = I``).
    """
    lam = np.asarray(lam, np.complex128)
    Bbar, C = np.asarray(Bbar, np.complex128), np.asarray(C, np.complex128)
    bal = bal or balance(lam, Bbar, C)
    usable = int(np.sum(bal.hsv > HSV_RTOL * bal.hsv[0])) if bal.hsv[0] > 0 else 0
    if not 1 <= r <= usable:
        raise ValueError(f"r={r} is not allowed; allowed range [1, {usable}] (HSVs above {HSV_RTOL:g} σ_max)")
    scale = 1.0 / np.sqrt(bal.hsv[:r])
    T = bal.Lc @ bal.V[:, :r] * scale  # (n, r)
    W = bal.Lo @ bal.U[:, :r] * scale  # (n, r)
    A_r = W.conj().T @ (lam[:, None] * T)
    return A_r, W.conj().T @ Bbar, C @ T


def rediagonalise(A_r: np.ndarray, B_r: np.ndarray, C_r: np.ndarray):
    """``A_r = V Λ V^{-1}`` -> the diagonal system ``(Λ (r,), V^{-1} B_r, C_r V)`` with the same transfer function."""
    ev, V = np.linalg.eig(A_r)
    return ev, np.linalg.solve(V, B_r), C_r @ V


def transfer_function(lam, Bbar, C, omegas: np.ndarray, A: np.ndarray | None = None) -> np.ndarray:
    """``G(e^{iω}) = C (e^{iω} I - A)^{-1} B̄`` on a frequency grid: ``(len(ω), H_out, H)``.

    ``A`` defaults to ``diag(λ)``; pass a full ``A`` for a non-diagonal (e.g. balanced) system.
    """
    Bbar, C = np.asarray(Bbar, np.complex128), np.asarray(C, np.complex128)
    z = np.exp(1j * np.asarray(omegas))
    if A is None:
        lam = np.asarray(lam, np.complex128)
        return np.einsum("on,wn,ni->woi", C, 1.0 / (z[:, None] - lam[None, :]), Bbar)
    n = A.shape[0]
    return np.stack([C @ np.linalg.solve(zk * np.eye(n) - A, Bbar) for zk in z])


# ----------------------------------------------------------------------------------------------------------------
# Reducing LRU layers in place, optimiser state included
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Reduction:
    """What one reduction check did to one layer."""

    before: int
    after: int
    applied: bool
    hsv: np.ndarray
    cond_P: float
    cond_Q: float


def _match(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """For each new eigenvalue, a distinct old one close to it (a minimum-distance assignment)."""
    cost = np.abs(new[:, None] - old[None, :])
    rows, cols = linear_sum_assignment(cost)
    source = np.empty(len(new), dtype=np.int64)
    source[rows] = cols
    return source


def reduce_layer(layer: LRU, tau: float, optimizer: torch.optim.Optimizer | None = None, *,
                 max_fraction: float = 0.95) -> Reduction:
    """Balanced truncation of an LRU layer to the rank that keeps ``(1 - τ)`` of its HSVs' sum, in place.

    Applied only when that rank is below ``max_fraction`` of the current size (the paper's guard against
    churning for a state or two). The Adam moments of each new state are those of the old state whose eigenvalue
    is nearest (a one-to-one assignment), so the optimiser keeps its scale; the step count is kept.
    """
    lam, Bbar, C = layer.system()
    bal = balance(lam, Bbar, C)
    n = len(lam)
    r = rank_for(bal.hsv, tau)
    info = Reduction(n, n, False, bal.hsv, bal.cond_P, bal.cond_Q)
    if r >= max_fraction * n:
        return info
    lam_r, B_r, C_r = rediagonalise(*balanced_truncation(lam, Bbar, C, r, bal))
    layer.set_system(lam_r, B_r, C_r, optimizer=optimizer, source=_match(lam, lam_r))
    info.after, info.applied = r, True
    return info


def random_truncation(layer: LRU, r: int, rng: np.random.Generator,
                      optimizer: torch.optim.Optimizer | None = None) -> np.ndarray:
    """Keep ``r`` states of the layer chosen at random (no balancing), in place; returns the kept indices."""
    keep = np.sort(rng.choice(layer.d_state, size=r, replace=False))
    layer.select_states(keep, optimizer)
    return keep


def lru_layers(model) -> list[LRU]:
    layers = [m for m in model.ssm_layers() if isinstance(m, LRU)]
    if not layers:
        raise ValueError("the model has no LRU layers")
    return layers


def reduced_copy(model, ranks: list[int]):
    """A copy of ``model`` whose LRU layers are balanced-truncated to ``ranks`` (for right-after-the-cut checks)."""
    out = copy.deepcopy(model)
    for layer, r in zip(lru_layers(out), ranks):
        lam, Bbar, C = layer.system()
        if r < len(lam):
            layer.set_system(*rediagonalise(*balanced_truncation(lam, Bbar, C, r)))
    return out


def random_copy(model, ranks: list[int], rng: np.random.Generator):
    """A copy of ``model`` keeping ``ranks`` random states per LRU layer."""
    out = copy.deepcopy(model)
    for layer, r in zip(lru_layers(out), ranks):
        if r < layer.d_state:
            random_truncation(layer, r, rng)
    return out
