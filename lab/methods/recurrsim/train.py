"""Data, training and the weight cache of the RecurrSim models.

Data: trajectories from the lab's ETDRK4 solvers (:func:`lab.datasets.pde.make_pde_dataset`, cached under ``data/``)
on twice the network's grid, Fourier-truncated to it (:func:`fourier_resample`); training pairs are consecutive
frames ``(u(t), u(t + dt))``; test trajectories use another seed.

Training: Adam with a linear warm-up and cosine decay, gradient clipping, one-step mean-squared error on the
normalised increment. Per model kind:

* ``recurrsim``: K ~ Poisson-log-normal per batch (:func:`~.model.sample_depth`), truncated backprop (last B);
* ``fixed_k``: K = ``fixed_depth`` always, same B;
* ``deq``: iterate to a fixed point without gradients, one differentiable step (Jacobian-free backprop);
* ``fno``, ``fno_2x``: plain fixed-depth FNOs.

Weight cache: ``<data>/recurrsim/<equation>-<kind>-<key16>.pt`` where ``key`` hashes everything that determines the
weights (:func:`training_config`). Written atomically (temporary file, then :func:`os.replace`); read with
``torch.load(..., weights_only=True)`` and checked (key, tensor shapes); a bad file is deleted with a warning and the
model retrained.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lab.core.train import torch_threads
from lab.datasets.cache import config_hash, data_root
from lab.datasets.pde import EQUATIONS as PDE_EQUATIONS
from lab.datasets.pde import make_pde_dataset, pde_dataset_config
from lab.io import atomic_path
from lab.methods.recurrsim.config import EQUATIONS, MODELS, Config
from lab.methods.recurrsim.model import RecurrFNO, build_model, sample_depth

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

TEST_SEED_OFFSET = 7919


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
        raise ValueError(f"n={n!r} is not allowed; allowed: an even number <= {N}")
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
    """Arguments of :func:`make_pde_dataset` for a split (``train`` or ``test``)."""
    if split not in ("train", "test"):
        raise ValueError(f"split={split!r} is not allowed; allowed: train, test")
    return dict(
        n_traj=cfg.n_train if split == "train" else cfg.n_test,
        n_steps=cfg.traj_steps,
        num_points=2 * grid_of(cfg, equation),
        seed=cfg.seed + (0 if split == "train" else TEST_SEED_OFFSET),
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
def training_config(cfg: Config, equation: str, kind: str) -> dict[str, Any]:
    """Everything that determines a model's trained weights: its cache key."""
    if kind not in MODELS:
        raise ValueError(f"kind={kind!r} is not allowed; allowed: {', '.join(MODELS)}")
    if equation not in EQUATIONS:
        raise ValueError(f"equation={equation!r} is not allowed; allowed: {', '.join(EQUATIONS)}")
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
        "seed": cfg.seed,
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


def weights_path(cfg: Config, equation: str, kind: str, root: str | os.PathLike | None = None) -> Path:
    key = config_hash(training_config(cfg, equation, kind), "recurrsim")
    return data_root(root) / "recurrsim" / f"{equation}-{kind}-{key[:16]}.pt"


def _lr_factor(it: int, total: int) -> float:
    warm = max(1, total // 20)
    if it < warm:
        return (it + 1) / warm
    return 0.5 * (1.0 + math.cos(math.pi * (it - warm) / max(1, total - warm)))


def _seed(cfg: Config, equation: str, kind: str) -> np.random.Generator:
    return np.random.default_rng([cfg.seed, EQUATIONS.index(equation), MODELS.index(kind)])


def train_model(cfg: Config, equation: str, kind: str, train: np.ndarray, *, progress: bool = True,
                callback: Callable[[int, int, float], None] | None = None) -> tuple[nn.Module, np.ndarray, float]:
    """Train one model on the training trajectories.

    Arguments:
        train: (n_traj, T + 1, *spatial) float32 trajectories on the network's grid.
        callback: called as ``callback(iteration, iterations, loss)`` after every step (e.g. a dashboard's bar).
    Returns:
        (model in eval mode, per-step training loss (iterations,), training wall time in seconds).
    """
    dim = dims_of(equation)
    x_all, y_all = pairs(train)
    in_scale = float(x_all.std()) or 1.0
    out_scale = float((y_all - x_all).std()) or 1.0
    rng = _seed(cfg, equation, kind)
    losses = np.empty(cfg.iterations, dtype=np.float32)
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(rng.integers(2**31)))
        model = build_model(kind, dim, width=cfg.width, modes=modes_of(cfg, equation), in_scale=in_scale,
                            out_scale=out_scale)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: _lr_factor(it, cfg.iterations))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.iterations, desc=f"train {kind} on {equation}", leave=False)
        try:
            for it in range(cfg.iterations):
                idx = torch.from_numpy(rng.integers(0, x_all.shape[0], cfg.batch_size))
                x, y = x_all[idx], y_all[idx]
                if kind == "recurrsim":
                    pred = model(x, sample_depth(rng, cfg.mean_depth, cfg.depth_sigma), cfg.grad_depth)
                elif kind == "fixed_k":
                    pred = model(x, cfg.fixed_depth, cfg.grad_depth)
                elif kind == "deq":
                    pred, _ = model.forward_equilibrium(x, cfg.deq_max_iter, cfg.deq_tol)
                else:
                    pred = model(x)
                loss = torch.mean(((pred - y) / out_scale) ** 2)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                losses[it] = loss.item()
                if bar is not None:
                    bar.update(1)
                    if it % 20 == 0:
                        bar.set_postfix(loss=f"{losses[it]:.3g}")
                if callback is not None:
                    callback(it + 1, cfg.iterations, losses[it])
        finally:
            if bar is not None:
                bar.close()
    model.eval()
    return model, losses, time.perf_counter() - start


# --------------------------------------------------------------------------------------------------------------------
# Weight cache
# --------------------------------------------------------------------------------------------------------------------
def save_weights(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """``torch.save(payload)`` atomically (:func:`lab.io.atomic_path`: a temporary file, then :func:`os.replace`).

    A crash or an exception mid-write leaves no file at ``path`` and no temporary file behind.
    """
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return Path(path)


def load_weights(path: str | os.PathLike, key: str) -> dict[str, Any] | None:
    """The payload stored at ``path`` if it is readable and was trained for ``key``; else None (a bad file is deleted
    with a RuntimeWarning)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("key") != key or "state_dict" not in payload:
            raise ValueError("not a weight file for this training config")
        return payload
    except Exception as exc:  # noqa: BLE001 - any unreadable or foreign file is rebuilt
        warnings.warn(f"weight file {path} rejected ({type(exc).__name__}: {exc}); retraining", RuntimeWarning,
                      stacklevel=2)
        path.unlink(missing_ok=True)
        return None


def get_model(cfg: Config, equation: str, kind: str, *, progress: bool = True, train: np.ndarray | None = None,
              callback: Callable[[int, int, float], None] | None = None,
              root: str | os.PathLike | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """A trained model: loaded from the weight cache, or trained (and cached) on first use.

    Arguments:
        train: training trajectories if already loaded (else read from the data cache).
        callback: progress callback passed to :func:`train_model` when training happens.
    Returns:
        (model in eval mode, info) with info keys ``loss`` (per-step training loss), ``train_seconds`` (time the
        training took when it ran), ``cached`` (whether the weights came from the cache), ``path``.
    """
    tcfg = training_config(cfg, equation, kind)
    key = config_hash(tcfg, "recurrsim")
    path = weights_path(cfg, equation, kind, root)
    payload = load_weights(path, key)
    if payload is not None:
        sd = payload["state_dict"]
        model = build_model(kind, dims_of(equation), width=cfg.width, modes=modes_of(cfg, equation),
                            in_scale=float(sd["in_scale"]), out_scale=float(sd["out_scale"]))
        try:
            model.load_state_dict(sd)
        except RuntimeError as exc:
            warnings.warn(f"weight file {path} does not fit the model ({exc}); retraining", RuntimeWarning,
                          stacklevel=2)
            path.unlink(missing_ok=True)
        else:
            model.eval()
            return model, {"loss": payload["loss"].numpy(), "train_seconds": float(payload["train_seconds"]),
                           "cached": True, "path": str(path)}
    with torch_threads(cfg.threads):
        if train is None:
            train = load_split(cfg, equation, "train", progress=progress)
        model, losses, seconds = train_model(cfg, equation, kind, train, progress=progress, callback=callback)
    save_weights(path, {"key": key, "state_dict": model.state_dict(), "loss": torch.from_numpy(losses),
                        "train_seconds": seconds, "weights_version": WEIGHTS_VERSION})
    return model, {"loss": losses, "train_seconds": seconds, "cached": False, "path": str(path)}


def is_cached(cfg: Config, equation: str, kind: str, root: str | os.PathLike | None = None) -> bool:
    """Whether trained weights for this config exist (not validated)."""
    return weights_path(cfg, equation, kind, root).exists()


__all__ = [
    "SETTINGS",
    "RecurrFNO",
    "data_config",
    "fourier_resample",
    "get_model",
    "is_cached",
    "load_split",
    "load_weights",
    "save_weights",
    "train_model",
    "training_config",
    "weights_path",
]
