"""Reading simulated trajectories: convergence time, basin edge and critical load (shared by the run and live.py)."""

from __future__ import annotations

import math

import numpy as np


def first_hit(m: np.ndarray, target) -> np.ndarray:
    """Convergence time along the last axis: first step with m >= target (NaN if never, or if the target is NaN).

    Arguments:
        m: (..., steps + 1) overlaps; target: a number or an array broadcast against ``m[..., 0]``.
    """
    hit = m >= np.asarray(target, dtype=float)[..., None]
    t = np.argmax(hit, axis=-1).astype(float)
    t[~hit.any(axis=-1)] = np.nan
    return t


def basin_edge(m0s: np.ndarray, p: np.ndarray) -> float:
    """Smallest m0 above which retrieval probability p(m0) stays >= 1/2, linearly interpolated; NaN if none."""
    ok = p >= 0.5
    if not ok[-1]:
        return math.nan
    k = len(p) - 1
    while k > 0 and ok[k - 1]:
        k -= 1
    if k == 0:
        return float(m0s[0])
    x0, x1, y0, y1 = m0s[k - 1], m0s[k], p[k - 1], p[k]
    return float(x0 + (0.5 - y0) * (x1 - x0) / (y1 - y0))


def critical_load(alphas: np.ndarray, p: np.ndarray) -> float:
    """Largest load with retrieval probability >= 1/2 (from the highest m0), interpolated to the crossing."""
    ok = p >= 0.5
    if not ok[0]:
        return float(alphas[0])
    k = 0
    while k + 1 < len(p) and ok[k + 1]:
        k += 1
    if k + 1 == len(p):
        return float(alphas[-1])
    x0, x1, y0, y1 = alphas[k], alphas[k + 1], p[k], p[k + 1]
    return float(x0 + (y0 - 0.5) * (x1 - x0) / (y0 - y1))


def row_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of a with the same row of b, over the last axis (NaN for a constant row)."""
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    out = np.full(den.shape, np.nan)
    ok = den > 0
    out[ok] = (a * b).sum(axis=-1)[ok] / den[ok]
    return out
