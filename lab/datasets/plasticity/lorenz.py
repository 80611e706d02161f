"""The stimulated Lorenz benchmark: rho drifts from session to session under a linear law (see
:mod:`lab.datasets.plasticity`)."""

from __future__ import annotations

import math

import numpy as np

from lab.checks import check_int, check_real
from lab.datasets.plasticity.networks import PlasticityBenchmark, Sessions
from lab.datasets.plasticity.schedules import features, n_features, session_inputs

__all__ = ["PlasticLorenz"]


class PlasticLorenz(PlasticityBenchmark):
    """Stimulated Lorenz system whose ρ drifts from session to session (see the module docstring)."""

    feature = "poly2"
    shared = True
    c_label = "rho"
    SIGMA, BETA = 10.0, 8.0 / 3.0
    MU = np.array([0.0, 0.0, 37.0])  # normalisation: x̃ = (x - MU) / SCALE
    SCALE = np.array([8.0, 9.0, 10.0])

    def __init__(self, *, a: float = 3.0, b: float = 0.15, rho_star: float = 28.0, rho0: float = 30.0,
                 dt: float = 0.005, T: int = 800, n_probe: int = 2, substeps: int = 2, sigma_process: float = 0.05,
                 sigma_obs: float = 0.01, stim_gain: float = 8.0, rng: np.random.Generator | None = None):
        check_real("a", a, -100.0, 100.0)
        check_real("b", b, 0.0, 1.0)
        check_real("rho0", rho0, 1.0, 200.0)
        check_real("dt", dt, 1e-4, 0.05)
        check_int("T", T, 2)
        check_int("n_probe", n_probe, 0)
        check_int("substeps", substeps, 1)
        rng = np.random.default_rng(0) if rng is None else rng
        self.name, self.N, self.R = "lorenz", 3, 1
        self.P = n_features(3, "poly2")
        self.a, self.b, self.rho_star, self.rho0 = a, b, rho_star, rho0
        self.dt, self.T, self.n_probe, self.substeps = dt, T, n_probe, substeps
        self.sigma_process, self.sigma_obs = sigma_process, sigma_obs
        stim = np.array([stim_gain, 0.0, 0.0])
        probes = rng.standard_normal((3, n_probe)) * 4.0
        self.B_phys = np.concatenate([stim[:, None], probes], axis=1)  # (3, S) in physical units

    def initial_state(self) -> float:
        return float(self.rho0)

    def true_rule(self) -> np.ndarray:
        return np.array([[self.b * self.rho_star, -self.b, self.a, 0.0, 0.0]])

    def law(self, rho: float, ubar: float) -> float:
        return rho + self.a * ubar - self.b * (rho - self.rho_star)

    def coefficients(self, state) -> np.ndarray:
        return np.array([float(state)])

    def distance(self, state, target) -> float:
        return abs(float(state) - float(target))

    def advance(self, state, ubar, rng=None):
        rho = float(state)
        for u in np.asarray(ubar, dtype=float):
            rho = self.law(rho, u)
        return rho

    def field(self, x: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """Lorenz vector field, x: (..., 3), rho broadcastable to x[..., 0]."""
        X, Y, Z = x[..., 0], x[..., 1], x[..., 2]
        return np.stack([self.SIGMA * (Y - X), X * (rho - Z) - Y, X * Y - self.BETA * Z], axis=-1)

    def true_B(self) -> np.ndarray:
        return self.B_phys / self.SCALE[:, None]

    def _normalised_model(self, rho: float) -> tuple[np.ndarray, np.ndarray]:
        """(W (3, P), b (3,)) with f(μ + s x̃)/s + x̃ = W φ(x̃) + b exactly (the field is quadratic)."""
        pts = np.random.default_rng(1).standard_normal((64, 3))
        target = self.field(self.MU + self.SCALE * pts, rho) / self.SCALE + pts
        X = np.concatenate([features(pts, "poly2"), np.ones((64, 1))], axis=1)
        coef, *_ = np.linalg.lstsq(X, target, rcond=None)
        return coef[:-1].T, coef[-1]

    def connectivity(self, state) -> np.ndarray:
        return self._normalised_model(float(state))[0]

    def true_bias(self) -> np.ndarray:
        return self._normalised_model(self.rho0)[1]

    def _rk4(self, x, rho, drive, h):
        k1 = self.field(x, rho) + drive
        k2 = self.field(x + 0.5 * h * k1, rho) + drive
        k3 = self.field(x + 0.5 * h * k2, rho) + drive
        k4 = self.field(x + h * k3, rho) + drive
        return x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

    def simulate(self, state, ubar: np.ndarray, rng: np.random.Generator) -> Sessions:
        ubar = np.asarray(ubar, dtype=float)
        K = len(ubar)
        rhos = np.empty(K)
        rho = float(state)
        for k, u in enumerate(ubar):
            rhos[k] = rho
            rho = self.law(rho, u)
        u = session_inputs(ubar, self.T, self.n_probe, self.dt, rng)
        h = self.dt / self.substeps
        x = np.array([1.0, 1.0, 20.0]) + 5.0 * rng.standard_normal((K, 3))
        for _ in range(int(3.0 / h)):  # 3 time units onto the attractor, unrecorded
            x = self._rk4(x, rhos, 0.0, h)
        xs = np.empty((K, self.T + 1, 3))
        drive = u @ self.B_phys.T  # (K, T, 3)
        for t in range(self.T):
            xs[:, t] = x
            for _ in range(self.substeps):
                x = self._rk4(x, rhos, drive[:, t], h)
            x = x + math.sqrt(self.dt) * self.sigma_process * self.SCALE * rng.standard_normal((K, 3))
        xs[:, self.T] = x
        y = (xs - self.MU) / self.SCALE + self.sigma_obs * rng.standard_normal(xs.shape)
        W = np.stack([self.connectivity(r) for r in rhos])
        return Sessions(y=y, u=u, ubar=ubar, W=W, c=rhos[:, None], state_end=rho)

