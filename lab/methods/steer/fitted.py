"""A benchmark fitted by STEER: alignment with the truth, predictions of later sessions, and protocol design.

The CP factors are ambiguous in sign, scale and order, so learned coefficients are mapped to the true ones
(:class:`Alignment`) before any comparison. :class:`Fitted` holds everything fitted on one benchmark's training
sessions and predicts the coefficients (or, for the black box, the connectivity) of the sessions that follow them
under any schedule; :func:`design_schedule` chooses a schedule that drives the learned law towards a target.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from lab.checks import check_choice
from lab.datasets.plasticity import PlasticityBenchmark, Sessions
from lab.methods.steer.model import (
    LibraryLaw,
    MLPLaw,
    SessionGRU,
    SteerModel,
    align_factors,
    free_rollout,
    rollout,
)

__all__ = ["BASELINES", "MODELS", "PROTOCOLS", "WITHIN_ASSUMPTIONS", "Alignment", "Fitted", "design_schedule",
           "fitted_rollout", "make_alignment", "predict_law", "project", "true_coefficients"]

MODELS = ("steer", "steer_mlp", "frozen", "free", "blackbox")
BASELINES = ("frozen", "free", "blackbox")
PROTOCOLS = ("designed", "random", "constant")
#: benchmarks that satisfy the model's assumptions (low-rank change under a law of c and ū alone)
WITHIN_ASSUMPTIONS = ("lowrank_linear", "lowrank_bcm", "lorenz")


@dataclasses.dataclass
class Alignment:
    """Maps learned coefficients (model coordinates) to the true ones and back.

    ``factors``: c_true[:, j] = gain[j] c_model[:, perm[j]] (sign, scale, order by Hungarian matching);
    ``affine``: rho = gain c + offset (Lorenz: a shared W_0 makes c's offset arbitrary);
    ``projection``: no true coefficients (bcm_network); the "truth" is the true connectivity projected on the
    learned factors, so the mapping is the identity.
    """

    kind: str
    perm: np.ndarray
    gain: np.ndarray
    offset: np.ndarray
    score: np.ndarray  # (R_true,) |cos| products of the matched factors (NaN where not defined)

    def to_true(self, c: np.ndarray) -> np.ndarray:
        return c[..., self.perm] * self.gain + self.offset

    def from_true(self, c: np.ndarray, R_model: int) -> np.ndarray:
        """Model coordinates (..., R_model) of true coefficients c (..., R_true); NaN for unmatched components."""
        out = np.full(c.shape[:-1] + (R_model,), np.nan)
        out[..., self.perm] = (c - self.offset) / self.gain
        return out


def project(model: SteerModel, W: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of connectivities W (K, N, P) on the learned factors: W - W_0 ≈ Σ c_r m_r n_rᵀ."""
    m, n, W0 = (x.detach().double().numpy() for x in (model.m, model.n, model.W0))
    basis = np.einsum("ir,jr->ijr", m, n).reshape(-1, m.shape[1])
    return np.linalg.lstsq(basis, (W - W0).reshape(W.shape[0], -1).T, rcond=None)[0].T


def make_alignment(bench: PlasticityBenchmark, model: SteerModel, train: Sessions) -> Alignment:
    c = model.c.detach().double().numpy()
    R = c.shape[1]
    if hasattr(bench, "m"):  # low-rank benchmarks: match factors
        m, n = model.m.detach().double().numpy(), model.n.detach().double().numpy()
        perm, gain, score = align_factors(m, n, bench.m, bench.n)
        return Alignment("factors", perm, gain, np.zeros(len(perm)), score)
    if bench.name == "lorenz":
        A = np.stack([c[:, 0], np.ones(len(c))], axis=1)
        (gain, offset), *_ = np.linalg.lstsq(A, train.c[:, 0], rcond=None)
        return Alignment("affine", np.array([0]), np.array([gain]), np.array([offset]), np.array([np.nan]))
    return Alignment("projection", np.arange(R), np.ones(R), np.zeros(R), np.full(R, np.nan))


def true_coefficients(s: Sessions, align: Alignment, model: SteerModel) -> np.ndarray:
    """(K, R_true) true coefficients of recorded sessions (projections for bcm_network)."""
    return project(model, s.W) if align.kind == "projection" else s.c


@dataclasses.dataclass
class Fitted:
    """Everything fitted on one benchmark's training sessions."""

    bench: PlasticityBenchmark
    train: Sessions
    model: SteerModel
    law: LibraryLaw
    align: Alignment
    mlp: MLPLaw | None = None
    gru: SessionGRU | None = None
    gru_state: torch.Tensor | None = None

    @property
    def c_model(self) -> np.ndarray:
        return self.model.c.detach().double().numpy()

    def connectivity(self, c: np.ndarray) -> np.ndarray:
        """(..., N, P) connectivity of model coefficients c (..., R)."""
        with torch.no_grad():
            return self.model.connectivity(torch.as_tensor(c, dtype=torch.float32)).double().numpy()

    def predict(self, ubar: np.ndarray, which: str = "steer") -> np.ndarray:
        """Model coefficients (K, R) of the sessions after training under schedule ubar (K,)."""
        c, ub = self.c_model, self.train.ubar
        if which == "steer":
            return predict_law(self.law, c[-1], ub[-1], ubar)
        if which == "steer_mlp":
            return predict_law(self.mlp, c[-1], ub[-1], ubar)
        if which == "frozen":
            return np.repeat(c[:1], len(ubar), axis=0)
        if which == "free":
            return np.repeat(c[-1:], len(ubar), axis=0)
        check_choice("which", which, ("steer", "steer_mlp", "frozen", "free"))
        raise AssertionError(which)

    def predict_connectivity(self, ubar: np.ndarray, which: str) -> np.ndarray:
        """(K, N, P) predicted connectivity of the sessions after training, for every model in MODELS."""
        if which == "blackbox":
            with torch.no_grad():
                W, _ = self.gru.connectivity(torch.as_tensor(ubar, dtype=torch.float32), self.gru_state)
            return W.double().numpy()
        return self.connectivity(self.predict(ubar, which))

    def input_weights(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        net = self.gru if which == "blackbox" else self.model
        return net.B.detach().double().numpy(), net.b.detach().double().numpy()


def fitted_rollout(fitted: Fitted) -> np.ndarray:
    """(model,) R² of the recurrent part of each model's free rollout of the training sessions it was fitted on
    (frozen: the first session with its c, free: the last, STEER and the GRU: every session), against the same
    model with W = 0: the held-out claim's measure, in distribution (NaN for the GRU when it was not fitted)."""
    bench, train = fitted.bench, fitted.train
    W_steer = fitted.connectivity(fitted.c_model)

    def score(W: np.ndarray, which: str, at: slice) -> float:
        B, b = fitted.input_weights(which)
        y, u = train.y[at], train.u[at]
        sse = [float(((free_rollout(w, B, b, y, u, bench.dt, bench.feature) - y) ** 2).sum())
               for w in (W, np.zeros_like(W))]
        return 1.0 - sse[0] / sse[1]

    K = train.K
    out = {"steer": score(W_steer, "steer", slice(None)), "frozen": score(W_steer[:1], "steer", slice(0, 1)),
           "free": score(W_steer[-1:], "steer", slice(K - 1, K))}
    out["steer_mlp"] = out["steer"]
    if fitted.gru is not None:
        with torch.no_grad():
            W_gru, _ = fitted.gru.connectivity(torch.as_tensor(train.ubar, dtype=torch.float32))
        out["blackbox"] = score(W_gru.double().numpy(), "blackbox", slice(None))
    return np.array([out.get(m, np.nan) for m in MODELS])


def design_schedule(law: torch.nn.Module, c_start: np.ndarray, target: np.ndarray, horizon: int, u_max: float, *,
                    candidates: int = 256, restarts: int = 8, steps: int = 150, levels: int = 5,
                    rng: np.random.Generator) -> np.ndarray:
    """ū_0..ū_{H-1} in [0, u_max] minimising ||c_H - target||² under the learned law from c_start.

    Random schedules on a grid of levels (and every constant one) are scored by the law; the best ``restarts`` are
    refined by Adam on a sigmoid parametrisation.

    Arguments:
        c_start: (R,) coefficients of the first session the schedule acts on; target: (R,), NaN = no target.
    Returns:
        (H,) the designed schedule.
    """
    grid = rng.integers(0, levels, size=(candidates, horizon)) / (levels - 1)
    grid = np.concatenate([grid, np.repeat(np.linspace(0, 1, levels)[:, None], horizon, axis=1)]) * u_max
    c0 = torch.as_tensor(c_start, dtype=torch.float32)
    on = torch.as_tensor(np.isfinite(target))  # components without a target (NaN) are free
    tgt = torch.as_tensor(np.nan_to_num(target), dtype=torch.float32)

    def final(u: torch.Tensor) -> torch.Tensor:  # (B, H) -> (B, R) coefficients after the H sessions, masked
        c = c0.expand(u.shape[0], -1)
        for k in range(horizon):
            c = law(c, u[:, k])
        return torch.where(on, c, tgt)

    with torch.no_grad():
        cost = ((final(torch.as_tensor(grid, dtype=torch.float32)) - tgt) ** 2).sum(-1)
    best = grid[torch.argsort(cost)[:restarts].numpy()]
    frac = np.clip(best / max(u_max, 1e-12), 0.02, 0.98)
    logits = torch.nn.Parameter(torch.as_tensor(np.log(frac / (1 - frac)), dtype=torch.float32))
    opt = torch.optim.Adam([logits], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((final(u_max * torch.sigmoid(logits)) - tgt) ** 2).sum(-1).sum()
        loss.backward()
        opt.step()
    with torch.no_grad():
        u = u_max * torch.sigmoid(logits)
        cost_refined = ((final(u) - tgt) ** 2).sum(-1)
    candidates_all = np.concatenate([best, u.numpy()])
    costs = np.concatenate([np.sort(cost.numpy())[:restarts], cost_refined.numpy()])
    return candidates_all[int(np.argmin(costs))]


def predict_law(law: torch.nn.Module, c_last: np.ndarray, u_last: float, ubar: np.ndarray) -> np.ndarray:
    """Coefficients of the sessions after the training ones: c_K = g(c_{K-1}, ū_{K-1}), then the schedule ubar.

    Returns:
        (len(ubar), R).
    """
    with torch.no_grad():
        c = law(torch.as_tensor(c_last, dtype=torch.float32)[None], torch.tensor([float(u_last)]))
        return rollout(law, c, torch.as_tensor(ubar, dtype=torch.float32)[None])[0].double().numpy()
