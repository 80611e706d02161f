"""Data and training of the RecurrSim models: the method's only trainer and cached-model loader.

Data: trajectories from the lab's ETDRK4 solvers (:func:`lab.datasets.pde.make_pde_dataset`, cached under ``data/``)
on twice the network's grid, Fourier-truncated to it (:func:`fourier_resample`); training pairs are consecutive
frames ``(u(t), u(t + dt))``; test trajectories use another seed.

Training (:func:`trained_model`): the lab's trainer :func:`lab.core.train.fit` with a sampler and a loss callable
(AdamW without weight decay, i.e. Adam; linear warm-up over 5% of the steps, cosine decay; gradient clipping at 1),
one-step mean-squared error on the normalised increment. Per model kind:

* ``recurrsim``: K ~ Poisson-log-normal per batch (:func:`~.model.sample_depth`), truncated backprop (last B);
* ``fixed_k``: K = ``fixed_depth`` always, same B;
* ``deq``: iterate to a fixed point without gradients, one differentiable step (Jacobian-free backprop);
* ``fno``, ``fno_2x``: plain fixed-depth FNOs.

Weights and the loss curve are cached by :func:`lab.cache.cached_model` under ``<data>/recurrsim/<equation>-<kind>-
<key16>.pt``, keyed by everything that determines them (:func:`training_config`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lab.cache import Trained, cached_model, state_path
from lab.checks import bad_value, check_choice
from lab.core.runtime import threads
from lab.core.train import fit
from lab.datasets.pde import EQUATIONS as PDE_EQUATIONS
from lab.datasets.pde import make_pde_dataset, pde_dataset_config
from lab.methods.recurrsim.config import EQUATIONS, MODELS, Config
from lab.methods.recurrsim.model import build_model, sample_depth

#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1

#: Per-equation overrides of :func:`make_pde_dataset` (frame spacing ``dt`` and solver substeps); the rest are the
#: lab's defaults: Burgers nu = 0.05 on [0, 2 pi), KdV on L = 128, KS on L = 64 after a 50-time-unit warm-up (LPSDA
#: setups), decaying 2-D turbulence nu = 1e-3 on [0, 2 pi)^2. Burgers frames are 0.1 apart (PDEBench stores 0.01,
#: learned simulators usually stride it) so that a 40-frame rollout spans shock formation and decay.
SETTINGS: dict[str, dict[str, Any]] = {
    "burgers": {"dt": 0.1, "substeps": 10},
    "kdv": {},
    "ks": {},
    "navier_stokes": {},
}

#: seeds of the held-out splits: ``seed + offset``
SPLIT_SEED_OFFSET = {"train": 0, "test": 7919, "val": 104_729}


def dims_of(equation: str) -> int:
    return int(PDE_EQUATIONS[equation]["dims"])


def grid_of(cfg: Config, equation: str) -> int:
    return cfg.grid_1d if dims_of(equation) == 1 else cfg.grid_2d


def modes_of(cfg: Config, equation: str) -> int:
    return cfg.modes if dims_of(equation) == 1 else cfg.modes_2d


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------
def fourier_resample(u: np.ndarray, n: int, dim: int) -> np.ndarray:
    """Band-limit a periodic field to ``n`` points per axis by truncating its Fourier series (exact for fields whose
    modes are below n / 2; the Nyquist mode is dropped).

    Arguments:
        u: (..., N) in 1-D or (..., N, N) in 2-D, N >= n.
    Returns:
        (..., n) or (..., n, n), same dtype.
    """
    N = u.shape[-1]
    if n == N:
        return u
    if n > N or n % 2:
        raise bad_value("n", n, f"an even number <= {N}")
    h = n // 2
    if dim == 1:
        U = np.fft.rfft(u, axis=-1)[..., : h + 1].copy()
        U[..., h] = 0.0
        return (np.fft.irfft(U, n=n, axis=-1) * (n / N)).astype(u.dtype)
    U = np.fft.rfft2(u, axes=(-2, -1))
    out = np.zeros(u.shape[:-2] + (n, h + 1), dtype=U.dtype)
    out[..., :h, :h] = U[..., :h, :h]
    out[..., h + 1 :, :h] = U[..., N - h + 1 :, :h]
    return (np.fft.irfft2(out, s=(n, n), axes=(-2, -1)) * (n * n / (N * N))).astype(u.dtype)


def data_config(cfg: Config, equation: str, split: str) -> dict[str, Any]:
    """Arguments of :func:`make_pde_dataset` for a split (``train``, ``val`` or ``test``: three seeds). The held-out
    splits run to max(traj_steps, horizon_steps) frames (the correlation horizon's rollout); the solver is
    deterministic, so their first traj_steps frames are those of a traj_steps-long run."""
    check_choice("split", split, tuple(SPLIT_SEED_OFFSET))
    return dict(
        n_traj={"train": cfg.n_train, "test": cfg.n_test, "val": cfg.n_val}[split],
        n_steps=cfg.traj_steps if split == "train" else max(cfg.traj_steps, cfg.horizon_steps),
        num_points=2 * grid_of(cfg, equation),
        seed=cfg.seed + SPLIT_SEED_OFFSET[split],
        **SETTINGS[equation],
    )


def load_split(cfg: Config, equation: str, split: str, *, progress: bool = False) -> np.ndarray:
    """Trajectories on the network's grid, float32, shape (n_traj, traj_steps + 1, *spatial)."""
    ds = make_pde_dataset(equation, progress=progress, **data_config(cfg, equation, split))
    u = ds["u" if dims_of(equation) == 1 else "vorticity"].values.astype(np.float32)
    return fourier_resample(u, grid_of(cfg, equation), dims_of(equation))


def frame_dt(cfg: Config, equation: str) -> float:
    return float(pde_dataset_config(equation, **data_config(cfg, equation, "test"))["dt"])


def domain_extent(cfg: Config, equation: str) -> float:
    return float(pde_dataset_config(equation, **data_config(cfg, equation, "test"))["domain_extent"])


def pairs(traj: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Consecutive frames: (n_traj, T + 1, *s) -> inputs and targets of shape (n_traj T, *s)."""
    x = traj[:, :-1].reshape((-1,) + traj.shape[2:])
    y = traj[:, 1:].reshape((-1,) + traj.shape[2:])
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))


# --------------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------------
#: the warm-up fraction of the learning-rate schedule (:func:`lab.core.train.lr_factor`): 5% of the steps
WARMUP = 0.05


def training_config(cfg: Config, equation: str, kind: str, model_seed: int | None = None) -> dict[str, Any]:
    """Everything that determines a model's trained weights: its cache key (``model_seed``: see
    :func:`trained_model`)."""
    check_choice("kind", kind, MODELS)
    check_choice("equation", equation, EQUATIONS)
    out: dict[str, Any] = {
        "weights_version": WEIGHTS_VERSION,
        "equation": equation,
        "kind": kind,
        "data": pde_dataset_config(equation, **data_config(cfg, equation, "train")),
        "grid": grid_of(cfg, equation),
        "width": cfg.width,
        "modes": modes_of(cfg, equation),
        "iterations": cfg.iterations,
        "batch_size": cfg.batch_size,
        "lr": cfg.lr,
        "seed": cfg.seed if model_seed is None else int(model_seed),
    }
    if kind in ("recurrsim", "fixed_k"):
        out["grad_depth"] = cfg.grad_depth
    if kind == "recurrsim":
        out.update(mean_depth=cfg.mean_depth, depth_sigma=cfg.depth_sigma)
    if kind == "fixed_k":
        out["fixed_depth"] = cfg.fixed_depth
    if kind == "deq":
        out.update(deq_max_iter=cfg.deq_max_iter, deq_tol=cfg.deq_tol)
    return out


def _cache_name(equation: str, kind: str) -> str:
    return f"{equation}-{kind}"


def is_cached(cfg: Config, equation: str, kind: str, root: str | os.PathLike | None = None,
              model_seed: int | None = None) -> bool:
    """Whether trained weights for this config are on disk (not validated: loading does that)."""
    return state_path("recurrsim", _cache_name(equation, kind), training_config(cfg, equation, kind, model_seed),
                      root=root).exists()


def _rng(seed: int, equation: str, kind: str) -> np.random.Generator:
    return np.random.default_rng([seed, EQUATIONS.index(equation), MODELS.index(kind)])


def trained_model(cfg: Config, equation: str, kind: str, *, train: np.ndarray | None = None, progress: bool = True,
                  callback: Callable[[int, int, float], None] | None = None,
                  root: str | os.PathLike | None = None, model_seed: int | None = None) -> Trained:
    """A trained model: its weights loaded from the cache, or trained (and cached) on first use.

    One NumPy generator seeded by (seed, equation, kind) seeds torch before the network is built, then draws every
    batch's pairs and (for ``recurrsim``) its depth; the global torch generator is restored afterwards.

    Arguments:
        train: training trajectories (n_traj, T + 1, *spatial) if already loaded (else read on a cache miss).
        callback: called as ``callback(step, steps, loss)`` after every step when training happens (a dashboard).
        model_seed: seed of the initialisation, the batches and the depths (default ``cfg.seed``); the data keep
            ``cfg.seed``, so other model seeds train on the same trajectories (the claims' seed spread).
    Returns:
        :class:`lab.cache.Trained`: ``model`` (eval mode), ``curves["loss"]`` (per-step training loss, float32),
        ``meta["train_seconds"]`` (time the training took when it ran), ``loaded``, ``path``.
    """
    dim, modes = dims_of(equation), modes_of(cfg, equation)
    seed = cfg.seed if model_seed is None else int(model_seed)
    rng = _rng(seed, equation, kind)

    def build():
        torch.manual_seed(int(rng.integers(2**31)))
        return build_model(kind, dim, width=cfg.width, modes=modes)

    def learn(model) -> dict[str, Any]:
        data = load_split(cfg, equation, "train", progress=progress) if train is None else train
        x_all, y_all = pairs(data)
        in_scale = float(x_all.std()) or 1.0
        out_scale = float((y_all - x_all).std()) or 1.0
        with torch.no_grad():
            model.in_scale.fill_(in_scale)
            model.out_scale.fill_(out_scale)

        def sample(step: int):
            idx = torch.from_numpy(rng.integers(0, x_all.shape[0], cfg.batch_size))
            K = sample_depth(rng, cfg.mean_depth, cfg.depth_sigma) if kind == "recurrsim" else None
            return x_all[idx], y_all[idx], K

        def loss(net, batch) -> torch.Tensor:
            x, y, K = batch
            if kind == "recurrsim":
                pred = net(x, K, cfg.grad_depth)
            elif kind == "fixed_k":
                pred = net(x, cfg.fixed_depth, cfg.grad_depth)
            elif kind == "deq":
                pred, _ = net.forward_equilibrium(x, cfg.deq_max_iter, cfg.deq_tol)
            else:
                pred = net(x)
            return torch.mean(((pred - y) / out_scale) ** 2)

        result = fit(model, sample, steps=cfg.iterations, loss=loss, lr=cfg.lr, weight_decay=0.0, warmup=WARMUP,
                     clip=1.0, progress=progress, desc=f"train {kind} on {equation}", callback=callback,
                     device=cfg.device)
        return {"curves": {"loss": result.loss.astype(np.float32)}, "meta": {"train_seconds": result.wall_time_s}}

    with torch.random.fork_rng(devices=[]), threads(cfg.threads):
        return cached_model("recurrsim", _cache_name(equation, kind), training_config(cfg, equation, kind, seed),
                            build, learn, root=root)


__all__ = [
    "SETTINGS",
    "data_config",
    "domain_extent",
    "fourier_resample",
    "frame_dt",
    "is_cached",
    "load_split",
    "pairs",
    "trained_model",
    "training_config",
]
