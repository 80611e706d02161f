"""Theory for dense associative memory dynamics: signal-to-noise recursion, basin edge, capacities.

Signal-to-noise recursion (derived in ``lab.methods.dam``'s docstring). When retrieving pattern 1 from a state with
overlap m, the aligned field on a spin is n (Nm)^{n-1} from the target plus crosstalk from the other P - 1 patterns,
each a ±1 times g(h) with h ≈ Gaussian of variance N; its variance is n² (2n-3)!! P N^{n-1}. Treating the crosstalk
as fresh Gaussian noise at every step (no memory of the past) gives

    m(t+1) = erf( m(t)^{n-1} / sqrt(2 α (2n-3)!!) ),      α = P / N^{n-1}.

For n ≥ 3 the paper's generating-functional analysis finds that retrieval adds no self-noise, so this memoryless
recursion should describe the dynamics; for n = 2 it is exact for one step only (the AGS/Amari–Maginu memory terms).

Classical n = 2 capacity (Amit, Gutfreund & Sompolinsky 1985, zero temperature): the retrieval solution exists while
``y (sqrt(2α) + (2/√π) e^{-y²}) = erf(y)`` has a non-zero root; α_c ≈ 0.138.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import erf


def double_factorial(k: int) -> int:
    return 1 if k <= 0 else k * double_factorial(k - 2)


def noise_scale(alpha: float, n: int) -> float:
    """sqrt(2 α (2n-3)!!): the recursion's denominator."""
    return math.sqrt(2.0 * alpha * double_factorial(2 * n - 3))


def recursion_step(m, alpha: float, n: int):
    """One step of the memoryless recursion, f_n(m) = erf(m^(n-1) / sqrt(2 α (2n-3)!!)), element-wise (for even n
    the power keeps the sign of m: the signal n (Nm)^(n-1) is odd in m; for odd n it is even)."""
    m = np.asarray(m, dtype=float)
    power = m ** (n - 1) if n % 2 == 1 else np.sign(m) * np.abs(m) ** (n - 1)
    return erf(power / noise_scale(alpha, n))


def recursion(m0: float, alpha: float, n: int, steps: int) -> np.ndarray:
    """m(t) for t = 0..steps from the memoryless signal-to-noise recursion; returns (steps + 1,)."""
    m = np.empty(steps + 1)
    m[0] = m0
    for t in range(steps):
        m[t + 1] = recursion_step(m[t], alpha, n)
    return m


def _fixed_point_gap(m: float, alpha: float, n: int) -> float:
    return float(erf(m ** (n - 1) / noise_scale(alpha, n)) - m)


def fixed_points(alpha: float, n: int, grid: int = 4000) -> list[float]:
    """The positive fixed points of the recursion in (0, 1], in increasing order."""
    ms = np.linspace(1e-4, 1.0, grid)
    gap = np.array([_fixed_point_gap(m, alpha, n) for m in ms])
    roots = []
    for k in np.nonzero(np.sign(gap[:-1]) != np.sign(gap[1:]))[0]:
        roots.append(brentq(_fixed_point_gap, ms[k], ms[k + 1], args=(alpha, n)))
    return roots


def basin_edge(alpha: float, n: int) -> float:
    """The unstable fixed point m_u(α) (n ≥ 3): starts above it retrieve, below it decay to m = 0. NaN if none."""
    if n < 3:
        return math.nan
    roots = fixed_points(alpha, n)
    return roots[0] if len(roots) >= 2 else math.nan


def retrieval_edge(alpha: float, n: int) -> float:
    """The smallest start from which the recursion retrieves: m_u(α) for n ≥ 3; for n = 2, 0 while m = 0 is
    unstable (α < 2/π: every positive start climbs); NaN where the recursion has no retrieval fixed point."""
    if n >= 3:
        return basin_edge(alpha, n)
    return 0.0 if alpha < 2.0 / math.pi else math.nan


def retrieval_overlap(alpha: float, n: int) -> float:
    """The stable retrieval fixed point m_s(α) of the recursion; NaN above the critical load."""
    roots = fixed_points(alpha, n)
    if not roots:
        return math.nan
    return roots[-1]


def critical_load(n: int) -> float:
    """The largest α at which the recursion still has a retrieval fixed point (n ≥ 3); 2/π for n = 2."""
    if n == 2:
        return 2.0 / math.pi
    lo, hi = 1e-4, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fixed_points(mid, n, grid=800) else (lo, mid)
    return lo


def convergence_time(m_traj: np.ndarray, eps: float) -> float:
    """First step t with m(t) ≥ 1 - eps along a trajectory (steps,); NaN if never."""
    hit = np.nonzero(np.asarray(m_traj) >= 1.0 - eps)[0]
    return float(hit[0]) if hit.size else math.nan


def ags_capacity() -> tuple[float, float]:
    """(α_c, m at α_c) of the Hopfield model (n = 2) from the AGS zero-temperature equations.

    The retrieval solution satisfies y (sqrt(2α) + (2/√π) e^{-y²}) = erf(y), i.e.
    α(y) = ½ (erf(y)/y - (2/√π) e^{-y²})²; the capacity is the maximum of α(y) over y > 0.
    """

    def neg_alpha(y: float) -> float:
        return -0.5 * (erf(y) / y - 2.0 / math.sqrt(math.pi) * math.exp(-y * y)) ** 2

    res = minimize_scalar(neg_alpha, bounds=(0.5, 5.0), method="bounded", options={"xatol": 1e-10})
    return -float(res.fun), float(erf(res.x))


def ags_retrieval(alpha: float) -> float:
    """The AGS zero-temperature retrieval overlap m(α) for n = 2; NaN above α_c."""
    a_c, _ = ags_capacity()
    if alpha > a_c:
        return math.nan

    def gap(y: float) -> float:
        return y * (math.sqrt(2 * alpha) + 2 / math.sqrt(math.pi) * math.exp(-y * y)) - erf(y)

    # the retrieval root is the largest y where the gap crosses zero upward
    ys = np.linspace(0.3, 8.0, 4000)
    g = np.array([gap(y) for y in ys])
    idx = np.nonzero((g[:-1] < 0) & (g[1:] >= 0))[0]
    if idx.size == 0:
        return math.nan
    k = idx[-1]
    return float(erf(brentq(gap, ys[k], ys[k + 1])))
