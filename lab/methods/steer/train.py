r"""Training STEER and its baselines: the method's only training and cached-model loading.

1. :func:`als`: alternating least squares on the one-step loss (each parameter group in closed form), started
   from the singular vectors of free per-session fits. Cheap, and it puts the joint fit in the right basin.
2. :func:`train_steer`: the joint loss, by L-BFGS over every parameter (the problem is smooth and full-batch),

       L = L_rec + λ_cons Σ_k ||c_{k+1} - g(c_k, ū_k)||² + λ_smooth Σ_k ||c_{k+1} - c_k||²
           + λ_orth (||mᵀm - I||² + ||nᵀn - I||²),

   with g the library law (all five terms free) during training; the coefficient terms are averaged over sessions
   and divided by the variance of c over sessions, and L_rec is the one-step squared error summed over time,
   averaged over sessions and units, over var(z). Sparsity is not a penalty here: afterwards the factors are
   normalised and the final law is chosen on the learned c by best-subset regression
   (:func:`lab.methods.steer.model.fit_library`).
3. :func:`train_mlp_law` (g as a small network), :func:`train_gru` (black-box baseline).
4. :func:`fit_benchmark`: record a benchmark's training sessions and fit all of the above;
   :func:`cached_fit`: the STEER fit alone, kept on disk by :func:`lab.cache.cached_state` (the dashboard's).

The three fits run on ``cfg.device`` (:func:`lab.core.runtime.resolve_device`: the sessions and the model move
there) and hand their models back on the CPU, where everything after fitting runs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from lab.cache import cached_state
from lab.core.runtime import resolve_device, threads
from lab.datasets.plasticity import (
    BENCHMARKS,
    PlasticityBenchmark,
    Sessions,
    make_benchmark,
    stimulation_schedule,
)
from lab.datasets.plasticity import features as np_features
from lab.methods.steer.config import Config
from lab.methods.steer.fitted import Fitted, make_alignment
from lab.methods.steer.model import LibraryLaw, MLPLaw, SessionGRU, SteerModel, fit_library

__all__ = ["FIT_FIELDS", "FORMAT_VERSION", "Prepared", "als", "build_benchmark", "cached_fit", "fit_benchmark",
           "free_fits", "lbfgs", "model_rank", "prepare", "steer_loss", "train_gru", "train_mlp_law", "train_steer",
           "training_sessions"]

#: bump when the stored format or the fitting procedure changes, so that old files are not reused
FORMAT_VERSION = 3
#: Config fields that determine a STEER fit (the others only affect evaluation and the baselines)
FIT_FIELDS = ("N", "rank", "T", "sigma_process", "K_train", "train_block", "u_max", "iterations", "als_iterations",
              "lambda_cons", "lambda_smooth", "lambda_orth", "rule_horizon", "seed")


@dataclasses.dataclass
class Prepared:
    """One-step regression data of K sessions (torch, float32)."""

    z: torch.Tensor  # (K, T, N) (y_{t+1} - y_t)/dt + y_t
    phi: torch.Tensor  # (K, T, P) φ(y_t)
    u: torch.Tensor  # (K, T, S)
    ubar: torch.Tensor  # (K,)
    var_z: float

    def to(self, device: torch.device) -> Prepared:
        """The same data on ``device``."""
        return Prepared(z=self.z.to(device), phi=self.phi.to(device), u=self.u.to(device), ubar=self.ubar.to(device),
                        var_z=self.var_z)


def prepare(s: Sessions, feature: str, dt: float) -> Prepared:
    y = s.y
    z = (y[:, 1:] - y[:, :-1]) / dt + y[:, :-1]
    phi = np_features(y[:, :-1], feature)
    t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
    return Prepared(z=t(z), phi=t(phi), u=t(s.u), ubar=t(s.ubar), var_z=float(z.var(axis=(0, 1)).mean()))


def free_fits(p: Prepared, ridge: float = 1e-3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-session ridge regression z ≈ W_k φ + B_k u + b_k. Returns W (K, N, P), B (K, N, S), b (K, N)."""
    z, phi, u = (a.double().numpy() for a in (p.z, p.phi, p.u))
    K, T, P = phi.shape
    X = np.concatenate([phi, u, np.ones((K, T, 1))], axis=-1)  # (K, T, P + S + 1)
    G = np.einsum("kti,ktj->kij", X, X) / T + ridge * np.eye(X.shape[-1])
    theta = np.linalg.solve(G, np.einsum("kti,ktn->kin", X, z) / T)  # (K, P + S + 1, N)
    theta = theta.transpose(0, 2, 1)
    return theta[:, :, :P], theta[:, :, P:-1], theta[:, :, -1]


def als(p: Prepared, R: int, shared: bool, iterations: int = 30, ridge: float = 1e-6
        ) -> dict[str, np.ndarray]:
    """Alternating least squares on the one-step loss alone: each group of parameters in turn, in closed form.

    The step z = W_0 φ + Σ_r c_r m_r (n_rᵀ φ) + B u + b is linear in c (per session), in (m, W_0, B, b) jointly,
    and in n given the rest. Starts from the leading singular vectors of free per-session fits.

    Returns:
        starting values for SteerModel: m (N, R), n (P, R), c (K, R), B (N, S), b (N,), W0 (N, P).
    """
    z, phi, u = (a.double().numpy() for a in (p.z, p.phi, p.u))
    K, T, N = z.shape
    P, S = phi.shape[-1], u.shape[-1]
    W, Bk, bk = free_fits(p)
    W0 = W.mean(axis=0) if shared else np.zeros((N, P))
    D = W - W0  # (K, N, P) start: leading singular directions of the free fits' session-specific parts
    m = np.linalg.svd(D.transpose(1, 0, 2).reshape(N, K * P), full_matrices=False)[0][:, :R]
    n = np.linalg.svd(D.transpose(2, 0, 1).reshape(P, K * N), full_matrices=False)[0][:, :R]
    B, b = Bk.mean(axis=0), bk.mean(axis=0)
    c = np.zeros((K, R))
    G = np.einsum("ktp,ktq->kpq", phi, phi)  # (K, P, P)
    for _ in range(iterations):
        resid = z - phi @ W0.T - u @ B.T - b  # (K, T, N)
        design = np.einsum("ktr,ir->ktir", phi @ n, m).reshape(K, T * N, R)
        c = np.stack([np.linalg.lstsq(design[k], resid[k].ravel(), rcond=None)[0] for k in range(K)])
        cols = [np.einsum("ktr,kr->ktr", phi @ n, c), u, np.ones((K, T, 1))] + ([phi] if shared else [])
        X = np.concatenate(cols, axis=-1).reshape(K * T, -1)
        sol = np.linalg.solve(X.T @ X + ridge * np.eye(X.shape[1]), X.T @ z.reshape(K * T, N))
        m, B, b = sol[:R].T, sol[R: R + S].T, sol[R + S]
        if shared:
            W0 = sol[R + S + 1:].T
        # n-step, exact: normal equations Σ_k (c_k c_kᵀ ⊙ mᵀm) ⊗ G_k vec(n) = Σ_k,t (c_k ⊙ mᵀ r_kt) ⊗ φ_kt
        resid = z - phi @ W0.T - u @ B.T - b
        A = np.einsum("kr,ks,rs,kpq->rpsq", c, c, m.T @ m, G).reshape(R * P, R * P)
        rhs = np.einsum("kr,ktr,ktp->rp", c, resid @ m, phi).ravel()
        n = np.linalg.solve(A + ridge * np.eye(R * P), rhs).reshape(R, P).T
        sm, sn = np.linalg.norm(m, axis=0), np.linalg.norm(n, axis=0)
        m, n, c = m / sm, n / sn, c * sm * sn
    return {"m": m, "n": n, "c": c, "B": B, "b": b, "W0": W0}


def _c_scale(c: torch.Tensor) -> torch.Tensor:
    return c.detach().var(dim=0).mean().clamp_min(1e-6)


def train_steer(p: Prepared, *, R: int, feature: str, dt: float, shared: bool, iterations: int,
                lambda_cons: float, lambda_smooth: float, lambda_orth: float, rule_horizon: int,
                als_iterations: int = 10, progress: bool = False, desc: str = "STEER", device: str | None = None
                ) -> tuple[SteerModel, LibraryLaw]:
    """The joint fit (module docstring): ALS start, then L-BFGS on the joint loss for ``iterations`` steps.

    Arguments:
        device: where L-BFGS runs (a Config's ``device``; None: the CPU).
    Returns:
        the fitted model (normalised factors) and the final sparse library law, in the model's coordinates, on the
        CPU.
    """
    K, T, N = p.z.shape
    model = SteerModel(N, p.phi.shape[-1], R, p.u.shape[-1], K, feature=feature, dt=dt, shared=shared)
    init = als(p, R, shared, als_iterations)
    with torch.no_grad():
        for name, value in init.items():
            getattr(model, name).copy_(torch.as_tensor(value, dtype=torch.float32))
    law = LibraryLaw(R, fit_library(init["c"], p.ubar.numpy(), rule_horizon))
    dev = resolve_device(device)
    model.to(dev)
    law.to(dev)
    on_dev = p.to(dev)
    params = [q for q in model.parameters() if q.requires_grad] + [law.xi]
    model.fit_evaluations = lbfgs(params,
                                  lambda: steer_loss(model, law, on_dev, lambda_cons, lambda_smooth, lambda_orth),
                                  iterations, progress=progress, desc=desc)
    model.to("cpu")
    model.normalise()
    xi = fit_library(model.c.detach().double().numpy(), p.ubar.numpy(), rule_horizon)
    final = LibraryLaw(R, xi)
    final.mask.copy_(torch.as_tensor(xi != 0, dtype=torch.float32))
    return model, final


def steer_loss(model: SteerModel, law: LibraryLaw, p: Prepared, lambda_cons: float, lambda_smooth: float,
               lambda_orth: float) -> torch.Tensor:
    """L_rec + λ_cons L_cons + λ_smooth L_smooth + λ_orth L_orth (module docstring)."""
    T = p.z.shape[1]
    rec = ((p.z - model.drift(p.phi, p.u, model.c)) ** 2).mean() * T / p.var_z
    c, scale = model.c, _c_scale(model.c)
    cons = ((c[1:] - law(c[:-1], p.ubar[:-1])) ** 2).sum(-1).mean() / scale
    smooth = ((c[1:] - c[:-1]) ** 2).sum(-1).mean() / scale
    return rec + lambda_cons * cons + lambda_smooth * smooth + lambda_orth * model.orthogonality()


def train_mlp_law(c: np.ndarray, ubar: np.ndarray, *, hidden: int, iterations: int, lr: float, horizon: int = 4,
                  seed: int = 0, device: str | None = None) -> MLPLaw:
    """g as a small residual network, fitted to the learned coefficients by rollouts of up to ``horizon`` sessions.

    Arguments:
        c: (K, R) learned coefficients; ubar: (K,).
        device: where it trains (a Config's ``device``; None: the CPU); the law comes back on the CPU.
    """
    torch.manual_seed(seed)
    dev = resolve_device(device)
    ct = torch.as_tensor(c, dtype=torch.float32, device=dev)
    ut = torch.as_tensor(ubar, dtype=torch.float32, device=dev)
    K, R = ct.shape
    law = MLPLaw(R, hidden).to(dev)
    law.mu.copy_(ct.mean(0))
    law.scale.copy_(ct.std(0).clamp_min(1e-3) if K > 1 else torch.ones(R))
    opt = torch.optim.Adam(law.parameters(), lr=lr, weight_decay=1e-4)
    L = max(1, min(horizon, K - 1))
    for _ in range(iterations):
        opt.zero_grad()
        x, loss = ct[: K - L], 0.0
        for j in range(L):
            x = law(x, ut[j: K - L + j])
            loss = loss + (((x - ct[j + 1: K - L + j + 1]) / law.scale) ** 2).mean()
        loss.backward()
        opt.step()
    return law.to("cpu")


def train_gru(p: Prepared, start: dict[str, np.ndarray], *, hidden: int, iterations: int, seed: int = 0,
              progress: bool = False, device: str | None = None) -> SessionGRU:
    """Black-box baseline, fitted end to end to the one-step loss of the training sessions with STEER's optimiser
    and budget (:func:`lbfgs`, ``iterations`` L-BFGS iterations).

    ``start``: W_mean (N, P), B (N, S), b (N,) to start from (the readout's bias is W_mean, so the GRU begins at
    the average connectivity and learns the session-to-session changes). The number of loss evaluations is left in
    ``gru.fit_evaluations``. ``device``: where it trains (a Config's ``device``; None: the CPU); the GRU comes back
    on the CPU.
    """
    torch.manual_seed(seed)
    K, T, N = p.z.shape
    P = p.phi.shape[-1]
    gru = SessionGRU(N, P, p.u.shape[-1], hidden)
    with torch.no_grad():
        gru.readout.bias.copy_(torch.as_tensor(start["W_mean"].ravel(), dtype=torch.float32))
        gru.B.copy_(torch.as_tensor(start["B"], dtype=torch.float32))
        gru.b.copy_(torch.as_tensor(start["b"], dtype=torch.float32))
    dev = resolve_device(device)
    gru.to(dev)
    on_dev = p.to(dev)

    def loss() -> torch.Tensor:
        W, _ = gru.connectivity(on_dev.ubar)
        return ((on_dev.z - gru.drift(on_dev.phi, on_dev.u, W)) ** 2).mean() * T / on_dev.var_z

    gru.fit_evaluations = lbfgs(list(gru.parameters()), loss, iterations, progress=progress, desc="black-box GRU")
    return gru.to("cpu")


def lbfgs(params: list[torch.Tensor], loss: Callable[[], torch.Tensor], iterations: int, *, progress: bool = False,
          desc: str = "L-BFGS") -> int:
    """Full-batch L-BFGS (strong Wolfe line search, history 20) for at most ``iterations`` iterations: the one
    optimiser of STEER and of its black-box baseline. Returns the number of loss and gradient evaluations."""
    if iterations <= 0:
        return 0
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=iterations, history_size=20, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-10, tolerance_change=1e-12)
    bar = tqdm(total=iterations, desc=desc, disable=not progress, leave=False)
    count = [0]

    def closure():
        opt.zero_grad()
        value = loss()
        value.backward()
        count[0] += 1
        bar.update(1)
        return value

    opt.step(closure)
    bar.close()
    return count[0]


def build_benchmark(name: str, cfg: Config) -> PlasticityBenchmark:
    """The benchmark ``name`` at the sizes of ``cfg`` (its fixed parts drawn from cfg.seed)."""
    options: dict[str, Any] = {} if name == "lorenz" else {"N": cfg.N, "sigma_process": cfg.sigma_process}
    return make_benchmark(name, T=cfg.T, seed=cfg.seed, **options)


def model_rank(name: str, cfg: Config) -> int:
    return 1 if name == "lorenz" else cfg.rank


def training_sessions(name: str, cfg: Config) -> tuple[PlasticityBenchmark, Sessions]:
    """The benchmark and its K_train training sessions under a random schedule (a function of cfg.seed)."""
    bench = build_benchmark(name, cfg)
    rng = np.random.default_rng([cfg.seed, 1, BENCHMARKS.index(name)])
    ub = stimulation_schedule("random", cfg.K_train, amplitude=cfg.u_max, period=cfg.train_block, rng=rng)
    return bench, bench.simulate(bench.initial_state(), ub, rng)


def fit_benchmark(name: str, cfg: Config, *, baselines: bool = True, progress: bool = False) -> Fitted:
    """Record the training sessions of ``name`` and fit STEER (and, with ``baselines``, the MLP law and the GRU)."""
    bench, train = training_sessions(name, cfg)
    ub = train.ubar
    p = prepare(train, bench.feature, bench.dt)
    torch.manual_seed(cfg.seed)
    model, law = train_steer(
        p, R=model_rank(name, cfg), feature=bench.feature, dt=bench.dt, shared=bench.shared,
        iterations=cfg.iterations, lambda_cons=cfg.lambda_cons, lambda_smooth=cfg.lambda_smooth,
        lambda_orth=cfg.lambda_orth, rule_horizon=cfg.rule_horizon, als_iterations=cfg.als_iterations,
        progress=progress, desc=f"STEER {name}", device=cfg.device,
    )
    fitted = Fitted(bench, train, model, law, make_alignment(bench, model, train))
    if baselines:
        fitted.mlp = train_mlp_law(fitted.c_model, ub, hidden=cfg.mlp_hidden, iterations=cfg.mlp_iterations,
                                   lr=1e-2, horizon=cfg.rule_horizon, seed=cfg.seed, device=cfg.device)
        start = {"W_mean": fitted.connectivity(fitted.c_model.mean(0)), "B": fitted.input_weights("steer")[0],
                 "b": fitted.input_weights("steer")[1]}
        fitted.gru = train_gru(p, start, hidden=cfg.gru_hidden, iterations=cfg.iterations, seed=cfg.seed,
                               progress=progress, device=cfg.device)
        with torch.no_grad():
            _, fitted.gru_state = fitted.gru.connectivity(p.ubar)
    return fitted


def cached_fit(name: str, cfg: Config, *, root: str | os.PathLike | None = None, use_cache: bool = True) -> Fitted:
    """STEER (no baselines) fitted to the training sessions of ``name``: from ``<data>/steer/`` or fitted and stored.

    The file holds the model's state dict, the final law and a format version (:func:`lab.cache.cached_state`:
    keyed by a hash of :data:`FIT_FIELDS`, written atomically, read with ``weights_only=True``; a corrupt file is
    rebuilt). The training sessions are regenerated from the seed (well under a second).
    """
    key = {"benchmark": name, "version": FORMAT_VERSION, **{f: getattr(cfg, f) for f in FIT_FIELDS}}
    bench, train = training_sessions(name, cfg)

    def build() -> dict[str, Any]:
        with threads(cfg.threads):
            fitted = fit_benchmark(name, cfg, baselines=False)
        model = fitted.model
        return {"model": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "xi": fitted.law.xi.detach().clone(), "mask": fitted.law.mask.detach().clone(),
                "meta": {"feature": model.feature, "dt": float(model.dt), "shared": bool(model.shared)}}

    def restore(state: dict[str, Any]) -> tuple[SteerModel, LibraryLaw]:
        weights, meta = state["model"], state["meta"]
        K, R = weights["c"].shape
        N, P = weights["W0"].shape
        if K != train.K or N != train.y.shape[2]:
            raise ValueError(f"stored fit has {K} sessions of {N} units, expected {train.K} of {train.y.shape[2]}")
        model = SteerModel(N, P, R, weights["B"].shape[1], K, feature=meta["feature"], dt=meta["dt"],
                           shared=meta["shared"])
        model.load_state_dict(weights)
        law = LibraryLaw(R, state["xi"])
        law.mask.copy_(state["mask"])
        return model, law

    state, _ = cached_state("steer", name, key, build, root=root, check=restore, use_cache=use_cache)
    model, law = restore(state)
    return Fitted(bench, train, model, law, make_alignment(bench, model, train))
