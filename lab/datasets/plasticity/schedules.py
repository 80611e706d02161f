"""The plasticity benchmarks' shared parts: the library of candidate terms, stimulation schedules, session inputs and
the features φ the connectivity acts on."""

from __future__ import annotations

import math

import numpy as np

from lab.checks import bad_value, check_choice, check_int, check_real

__all__ = ["FEATURES", "LIBRARY_TERMS", "PATTERNS", "features", "library", "library_terms", "n_features",
           "session_inputs", "stimulation_schedule"]

PATTERNS = ("random", "constant", "periodic", "ramp", "burst", "silent")
LIBRARY_TERMS = ("1", "c", "u", "c*u", "c^2")
FEATURES = ("tanh", "poly2")


def library(c: np.ndarray, ubar: np.ndarray | float) -> np.ndarray:
    """Θ(c, ū) per component.

    Arguments:
        c: (..., R) coefficients; ubar: (...) stimulation summaries (or a scalar).
    Returns:
        (..., R, 5) the terms [1, c, ū, c·ū, c²] of :data:`LIBRARY_TERMS`.
    """
    c = np.asarray(c, dtype=float)
    return library_terms(c, np.asarray(ubar, dtype=float)[..., None])


def library_terms(c: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Θ elementwise: c and u broadcast together to shape (...), returns (..., 5)."""
    c, u = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(u, dtype=float))
    return np.stack([np.ones_like(c), c, u, c * u, c**2], axis=-1)


def stimulation_schedule(
    pattern: str,
    n_sessions: int,
    *,
    amplitude: float = 1.0,
    period: int = 3,
    start: int = 0,
    levels: int = 5,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Stimulation summaries ū_k for ``n_sessions`` sessions.

    Patterns: ``random`` (levels amplitude·{0, 1/(levels-1), ..., 1} drawn at random and each held for 1 to
    ``period`` sessions, also at random; the training schedule), ``constant``
    (amplitude from session ``start`` on), ``periodic`` (blocks of ``period`` sessions on and off, from ``start``),
    ``ramp`` (0 to amplitude, linearly, from ``start``), ``burst`` (amplitude for ``period`` sessions from
    ``start``, then off), ``silent`` (no stimulation).

    Returns:
        (n_sessions,) float array in [0, amplitude].
    """
    check_choice("pattern", pattern, PATTERNS)
    check_int("n_sessions", n_sessions, 1)
    check_real("amplitude", amplitude, 0.0, 10.0)
    check_int("period", period, 1)
    check_int("start", start, 0)
    check_int("levels", levels, 2)
    k = np.arange(n_sessions)
    on = k >= start
    if pattern == "random":
        rng = np.random.default_rng() if rng is None else rng
        out: list[float] = []
        while len(out) < n_sessions:
            out += [amplitude * rng.integers(0, levels) / (levels - 1)] * int(rng.integers(1, period + 1))
        return np.array(out[:n_sessions])
    if pattern == "constant":
        return amplitude * on.astype(float)
    if pattern == "periodic":
        return amplitude * (on & (((k - start) // period) % 2 == 0)).astype(float)
    if pattern == "ramp":
        span = max(n_sessions - 1 - start, 1)
        return amplitude * np.clip((k - start) / span, 0.0, 1.0) * on
    if pattern == "burst":
        return amplitude * (on & (k < start + period)).astype(float)
    return np.zeros(n_sessions)


def session_inputs(ubar: np.ndarray, T: int, n_probe: int, dt: float, rng: np.random.Generator,
                   pulse_period: int = 50) -> np.ndarray:
    """Inputs of each session: the stimulation pulse train (channel 0) and the probe inputs.

    Arguments:
        ubar: (K,) stimulation summaries; T: steps per session; n_probe: probe channels; dt: step (time units).
    Returns:
        (K, T, 1 + n_probe); the mean of channel 0 over session k is ū_k.
    """
    ubar = np.asarray(ubar, dtype=float)
    K = ubar.shape[0]
    t = np.arange(T)
    on = ((t % pulse_period) < max(pulse_period // 2, 1)).astype(float)
    pulse = on / on.mean()  # (T,) on half of each period, height ~2, mean exactly 1
    stim = ubar[:, None] * pulse[None, :]  # (K, T)
    probe = np.empty((K, T, n_probe))
    a = math.exp(-dt)  # OU with unit variance and time constant 1
    z = rng.standard_normal((K, n_probe))
    for s in range(T):
        probe[:, s] = z
        z = a * z + math.sqrt(1 - a * a) * rng.standard_normal((K, n_probe))
    return np.concatenate([stim[..., None], probe], axis=-1)


def features(x: np.ndarray, kind: str) -> np.ndarray:
    """φ(x): ``tanh`` (P = N) or ``poly2`` (x and its quadratic monomials x_i x_j, i <= j; P = N + N(N+1)/2).

    Arguments:
        x: (..., N). Returns: (..., P).
    """
    if kind == "tanh":
        return np.tanh(x)
    if kind == "poly2":
        i, j = np.triu_indices(x.shape[-1])
        return np.concatenate([x, x[..., i] * x[..., j]], axis=-1)
    raise bad_value("features", kind, "one of " + ", ".join(map(repr, FEATURES)))


def n_features(N: int, kind: str) -> int:
    return N if kind == "tanh" else N + N * (N + 1) // 2

