r"""STEER's pieces: fast dynamics with low-rank session connectivity, slow laws on its coefficients, alignment, and
the black-box baseline.

Fast dynamics within session k (Euler step ``dt``; φ is known: ``tanh`` for rate networks, ``poly2`` for Lorenz):

    x_{t+1} = x_t + dt (-x_t + W_k φ(x_t) + B u_t + b),      W_k = W_0 + Σ_r c_{k,r} m_r n_rᵀ.

B, b, the factors m_r (N,), n_r (P,) and the optional shared part W_0 are common to all sessions; only the R
coefficients c_k change. Recorded activity y_t stands in for x_t (every unit is recorded), so one step of the model
is a regression of z_t = (y_{t+1} - y_t)/dt + y_t on φ(y_t) and u_t, linear in each group of parameters.

Slow law across sessions: c_{k+1} = g(c_k, ū_k). :class:`LibraryLaw` writes g per component as a sparse sum over the
library Θ(c, ū) = [1, c, ū, c·ū, c²] (chosen by :func:`fit_library`), so the update equation can be read off;
:class:`MLPLaw` is a small residual network. The CP decomposition is ambiguous in sign, scale and order:
:func:`align_factors` matches learned factors to true ones (Hungarian on |cos|) before anything is compared.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from scipy.optimize import least_squares, linear_sum_assignment
from torch import nn

from lab.datasets.plasticity import LIBRARY_TERMS, library_terms


def features(x: torch.Tensor, kind: str) -> torch.Tensor:
    """φ(x): (..., N) -> (..., P); the torch twin of :func:`lab.datasets.plasticity.features`."""
    if kind == "tanh":
        return torch.tanh(x)
    i, j = np.triu_indices(x.shape[-1])
    return torch.cat([x, x[..., i] * x[..., j]], dim=-1)


def library(c: torch.Tensor, ubar: torch.Tensor) -> torch.Tensor:
    """Θ(c, ū): c (..., R), ubar (...) -> (..., R, 5) in LIBRARY_TERMS order (twin of the numpy one)."""
    u = ubar.unsqueeze(-1).expand_as(c)
    return torch.stack([torch.ones_like(c), c, u, c * u, c**2], dim=-1)


class SteerModel(nn.Module):
    """Fast dynamics of K sessions with shared factors and per-session coefficients.

    Arguments:
        N: recorded units; P: features; R: rank; S: input channels; K: sessions; shared: learn W_0.
    """

    def __init__(self, N: int, P: int, R: int, S: int, K: int, *, feature: str, dt: float, shared: bool):
        super().__init__()
        self.feature, self.dt, self.shared = feature, dt, shared
        self.m = nn.Parameter(torch.randn(N, R) / math.sqrt(N))  # (N, R) output factors
        self.n = nn.Parameter(torch.randn(P, R) / math.sqrt(P))  # (P, R) input factors
        self.c = nn.Parameter(torch.ones(K, R))  # (K, R) plasticity coefficients of the training sessions
        self.B = nn.Parameter(torch.zeros(N, S))  # (N, S) input matrix, shared
        self.b = nn.Parameter(torch.zeros(N))  # (N,) constant drive, shared
        self.W0 = nn.Parameter(torch.zeros(N, P), requires_grad=shared)  # (N, P) session-independent part

    def connectivity(self, c: torch.Tensor) -> torch.Tensor:
        """W for coefficients c (..., R) -> (..., N, P)."""
        return self.W0 + torch.einsum("...r,ir,jr->...ij", c, self.m, self.n)

    def drift(self, phi: torch.Tensor, u: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """W φ + B u + b for phi (K, T, P), u (K, T, S), c (K, R) -> (K, T, N); low rank kept factored."""
        low = torch.einsum("ktr,kr,ir->kti", phi @ self.n, c, self.m)
        return low + phi @ self.W0.T + u @ self.B.T + self.b

    def orthogonality(self) -> torch.Tensor:
        """||mᵀm - I||² + ||nᵀn - I||²: unit norm and orthogonal factors (identifiability)."""
        eye = torch.eye(self.m.shape[1], device=self.m.device)
        return ((self.m.T @ self.m - eye) ** 2).sum() + ((self.n.T @ self.n - eye) ** 2).sum()

    @torch.no_grad()
    def normalise(self) -> None:
        """Unit-norm factors with the scale moved into c, each c_r of positive mean, components by mean |c|."""
        sm, sn = self.m.norm(dim=0), self.n.norm(dim=0)
        self.m /= sm
        self.n /= sn
        self.c *= sm * sn
        sign = torch.sign(self.c.mean(0))
        sign[sign == 0] = 1.0
        self.m *= sign
        self.c *= sign
        order = torch.argsort(self.c.abs().mean(0), descending=True)
        self.m.copy_(self.m[:, order])
        self.n.copy_(self.n[:, order])
        self.c.copy_(self.c[:, order])

    @torch.no_grad()
    def fit_coefficients(self, z: torch.Tensor, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Least-squares c for new sessions, everything else fixed (the step is linear in c).

        Arguments:
            z: (K, T, N) targets (y_{t+1} - y_t)/dt + y_t; phi: (K, T, P); u: (K, T, S).
        Returns:
            (K, R) coefficients.
        """
        resid = z - phi @ self.W0.T - u @ self.B.T - self.b  # (K, T, N)
        design = torch.einsum("ktr,ir->ktir", phi @ self.n, self.m).flatten(1, 2)  # (K, T N, R)
        return torch.linalg.lstsq(design, resid.flatten(1).unsqueeze(-1)).solution.squeeze(-1)


class LibraryLaw(nn.Module):
    """c_{k+1,r} = c_{k,r} + Σ_j Ξ_{r,j} Θ_j(c_{k,r}, ū_k): a readable update equation.

    ``mask`` (R, 5) keeps the terms selected by sparse regression; dropped terms stay zero.
    """

    def __init__(self, R: int, xi: np.ndarray | torch.Tensor | None = None):
        super().__init__()
        xi = torch.zeros(R, len(LIBRARY_TERMS)) if xi is None else torch.as_tensor(xi, dtype=torch.float32)
        self.xi = nn.Parameter(xi.clone())  # (R, 5)
        self.register_buffer("mask", torch.ones(R, len(LIBRARY_TERMS)))

    def forward(self, c: torch.Tensor, ubar: torch.Tensor) -> torch.Tensor:
        return c + (library(c, ubar) * (self.xi * self.mask)).sum(-1)


class MLPLaw(nn.Module):
    """c_{k+1} = c_k + s · MLP([(c_k - μ)/s, ū_k]): the black-box alternative for g."""

    def __init__(self, R: int, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(R + 1, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, R))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        self.register_buffer("mu", torch.zeros(R))
        self.register_buffer("scale", torch.ones(R))

    def forward(self, c: torch.Tensor, ubar: torch.Tensor) -> torch.Tensor:
        h = torch.cat([(c - self.mu) / self.scale, ubar.unsqueeze(-1)], dim=-1)
        return c + self.scale * self.net(h)


def rollout(law: nn.Module, c0: torch.Tensor, ubar: torch.Tensor) -> torch.Tensor:
    """Coefficients of K sessions from c0 (..., R) under schedules ubar (..., K) -> (..., K, R); c_0 = c0."""
    out, c = [], c0
    for k in range(ubar.shape[-1]):
        out.append(c)
        c = law(c, ubar[..., k])
    return torch.stack(out, dim=-2)


def _rollout_residuals(xi: np.ndarray, support: tuple[int, ...], c: np.ndarray, ubar: np.ndarray, horizon: int
                       ) -> np.ndarray:
    """Errors of 1..horizon-session predictions from every observed c_k under Δc = Ξ_S · Θ_S(c, ū).

    Arguments:
        c: (K,) one component's coefficients; ubar: (K,). Returns: the stacked errors.
    """
    full = np.zeros(len(LIBRARY_TERMS))
    full[list(support)] = xi
    K = len(c)
    x, out = c[:-1], []
    for j in range(min(horizon, K - 1)):
        n = K - 1 - j
        x = x[:n]
        x = x + library_terms(x, ubar[j: j + n]) @ full
        out.append(x - c[j + 1: j + 1 + n])
    res = np.concatenate(out)
    return np.where(np.isfinite(res), np.clip(res, -1e6, 1e6), 1e6)


def fit_rule(c: np.ndarray, ubar: np.ndarray, horizon: int = 1) -> np.ndarray:
    """Sparse regression of one component's update equation: the best subset of the library by BIC.

    Every support S of the five terms (31 of them) is fitted by least squares to the increments Δc_k; the support
    minimising BIC = n log(RSS / n) + |S| log(n), n = K - 1 increments, wins. Exhaustive search replaces
    thresholding, which fails on this strongly collinear library (c and c² over a narrow range). With
    ``horizon`` > 1 the chosen support's coefficients are then refined on the errors of 1..horizon-session
    predictions from every observed c_k (averaging the noise of the inferred c over trajectories).

    Arguments:
        c: (K,) coefficients of consecutive sessions; ubar: (K,) their stimulation summaries (the last unused).
    Returns:
        (5,) coefficients Ξ in LIBRARY_TERMS order, exact zeros off the chosen support.
    """
    theta, dc = library_terms(c[:-1], ubar[:-1]), np.diff(c)
    n = len(dc)
    floor = 1e-12 * max(float(dc @ dc), 1e-300)  # residuals below round-off do not favour bigger supports
    best, best_support, best_coef = np.inf, (), np.zeros(0)
    for size in range(1, min(len(LIBRARY_TERMS), n) + 1):
        for support in itertools.combinations(range(len(LIBRARY_TERMS)), size):
            coef = np.linalg.lstsq(theta[:, support], dc, rcond=None)[0]
            rss = float(((theta[:, support] @ coef - dc) ** 2).sum())
            score = n * math.log(max(rss, floor) / n) + size * math.log(n)
            if score < best:
                best, best_support, best_coef = score, support, coef
    if horizon > 1 and len(best_support) > 0:
        fit = least_squares(_rollout_residuals, best_coef, args=(best_support, c, ubar, horizon), method="lm")
        best_coef = fit.x
    xi = np.zeros(len(LIBRARY_TERMS))
    xi[list(best_support)] = best_coef
    return xi


def fit_library(c: np.ndarray, ubar: np.ndarray, horizon: int = 1) -> np.ndarray:
    """:func:`fit_rule` for every component. c: (K, R); ubar: (K,). Returns Ξ (R, 5)."""
    return np.stack([fit_rule(c[:, r], ubar, horizon) for r in range(c.shape[1])])


def equation_text(xi: np.ndarray, var: str = "c", digits: int = 3) -> list[str]:
    """The update equation of each component as text, e.g. ``Δc₁ = 0.12 - 0.2 c₁ + 0.5 ū``."""
    lines = []
    for r, row in enumerate(np.atleast_2d(xi)):
        name = f"{var}{r + 1}" if np.atleast_2d(xi).shape[0] > 1 else var
        terms = []
        for coef, term in zip(row, LIBRARY_TERMS):
            if coef == 0 or not np.isfinite(coef):
                continue
            body = term.replace("c", name).replace("u", "ū").replace("*", "·")
            text = f"{abs(coef):.{digits}g}" + ("" if term == "1" else f" {body}")
            terms.append(("- " if coef < 0 else "+ ") + text)
        rhs = " ".join(terms).lstrip("+ ") if terms else "0"
        if rhs.startswith("- "):
            rhs = "-" + rhs[2:]
        lines.append(f"Δ{name} = {rhs}")
    return lines


def align_factors(m_hat: np.ndarray, n_hat: np.ndarray, m_true: np.ndarray, n_true: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Match learned factors to true ones: order by Hungarian matching on |cos(m̂, m)|·|cos(n̂, n)|, sign by the
    sign of cos(m̂, m)·cos(n̂, n), scale by the norms (c absorbs ||m|| ||n||).

    Arguments:
        m_hat (N, R̂), n_hat (P, R̂): learned; m_true (N, R), n_true (P, R): true (R <= R̂).
    Returns:
        perm (R,) learned index for each true component, gain (R,) with c_true ≈ gain · c_hat[:, perm],
        score (R,) the matched |cos| products (1 = the same rank-one direction).
    """
    def unit(a):
        return a / np.linalg.norm(a, axis=0, keepdims=True)

    cm = unit(m_hat).T @ unit(m_true)  # (R̂, R)
    cn = unit(n_hat).T @ unit(n_true)
    score = np.abs(cm * cn)
    rows, cols = linear_sum_assignment(-score)
    perm = np.empty(m_true.shape[1], dtype=int)
    perm[cols] = rows
    idx = np.arange(m_true.shape[1])
    sign = np.sign(cm[perm, idx] * cn[perm, idx])
    scale = (np.linalg.norm(m_hat, axis=0) * np.linalg.norm(n_hat, axis=0))[perm]
    scale /= np.linalg.norm(m_true, axis=0) * np.linalg.norm(n_true, axis=0)
    return perm, sign * scale, score[perm, idx]


class SessionGRU(nn.Module):
    """Black-box baseline: a GRU over sessions whose state is read out as the full connectivity of each session.

    h_{k+1} = GRU(ū_k, h_k), W_k = readout(h_k) (N × P); B and b shared. No low rank, no readable law.
    """

    def __init__(self, N: int, P: int, S: int, hidden: int = 32):
        super().__init__()
        self.N, self.P = N, P
        self.h0 = nn.Parameter(torch.zeros(hidden))
        self.cell = nn.GRUCell(1, hidden)
        self.readout = nn.Linear(hidden, N * P)
        nn.init.normal_(self.readout.weight, std=0.01)
        self.B = nn.Parameter(torch.zeros(N, S))
        self.b = nn.Parameter(torch.zeros(N))

    def connectivity(self, ubar: torch.Tensor, h: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """W of K sessions with summaries ubar (K,), from state h (default h0) -> ((K, N, P), state after)."""
        h = self.h0 if h is None else h
        Ws = []
        for k in range(ubar.shape[0]):
            Ws.append(self.readout(h).view(self.N, self.P))
            h = self.cell(ubar[k].view(1, 1), h.view(1, -1)).view(-1)
        return torch.stack(Ws), h

    def drift(self, phi: torch.Tensor, u: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return torch.einsum("kip,ktp->kti", W, phi) + u @ self.B.T + self.b


def simulate_windows(W: np.ndarray, B: np.ndarray, b: np.ndarray, y: np.ndarray, u: np.ndarray, dt: float,
                     feature: str, horizon: int) -> np.ndarray:
    """Deterministic H-step predictions from the recorded state at every H-th step (teacher forcing per window).

    Arguments:
        W: (K, N, P); B: (N, S); b: (N,); y: (K, T+1, N) recorded; u: (K, T, S); horizon: H.
    Returns:
        (K, T+1, N) predictions (equal to y at the window starts).
    """
    from lab.datasets.plasticity import features as np_features

    K, T1, N = y.shape
    pred = np.empty_like(y)
    drive = u @ B.T + b  # (K, T, N)
    x = None
    for t in range(T1):
        if t % horizon == 0:
            x = y[:, t].copy()
        pred[:, t] = x
        if t < T1 - 1:
            x = x + dt * (-x + np.einsum("kip,kp->ki", W, np_features(x, feature)) + drive[:, t])
    return pred


def free_rollout(W: np.ndarray, B: np.ndarray, b: np.ndarray, y: np.ndarray, u: np.ndarray, dt: float,
                 feature: str) -> np.ndarray:
    """The whole session run freely from its first recorded state, driven by the recorded inputs (no restart).

    Arguments and result as :func:`simulate_windows`; states are clipped to ±1e3 so that a diverging model scores a
    very bad, finite R² instead of NaN.
    """
    T1 = y.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        pred = simulate_windows(W, B, b, y, u, dt, feature, T1)
    return np.clip(np.nan_to_num(pred, nan=1e3, posinf=1e3, neginf=-1e3), -1e3, 1e3)


def r2(pred: np.ndarray, y: np.ndarray) -> float:
    """1 - SSE / SST over sessions, time and units, SST about each session's and unit's mean."""
    sst = ((y - y.mean(axis=1, keepdims=True)) ** 2).sum()
    return float(1.0 - ((pred - y) ** 2).sum() / sst)
