"""What the RecurrSim dashboard and notebook call besides ``run``: one initial condition rolled out live from the
cached weights, memoised in memory (:func:`lab.cache.memo`).

* :func:`test_trajectories`: the held-out trajectories of an equation (read-only);
* :func:`trained`: a trained model (weights from the cache, trained on first use, with a progress callback);
* :func:`simulate`: one initial condition at one depth K against the solver;
* :func:`depth_sweep`: one initial condition at every K: error, correlation horizon and time per step.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

from lab.cache import memo
from lab.checks import check_int
from lab.core.runtime import threads
from lab.datasets.pde import rollout
from lab.methods.recurrsim import train
from lab.methods.recurrsim.config import MODELS, Config
from lab.methods.recurrsim.metrics import correlation_horizon, rollout_metrics, time_per_step
from lab.methods.recurrsim.model import LearnedStepper

__all__ = ["MODELS", "clear_memory", "correlation_horizon", "depth_sweep", "dims_of", "is_ready", "simulate",
           "test_trajectories", "trained"]

dims_of = train.dims_of


@memo(maxsize=16)
def test_trajectories(cfg: Config, equation: str) -> np.ndarray:
    """Held-out trajectories (n_test, traj_steps + 1, *spatial) on the network's grid (read-only)."""
    out = train.load_split(cfg, equation, "test", progress=False)
    out.setflags(write=False)
    return out


@memo(maxsize=16)
def _trained(cfg: Config, equation: str, kind: str):
    return train.trained_model(cfg, equation, kind, progress=False).model


def trained(cfg: Config, equation: str, kind: str = "recurrsim", *, callback=None) -> torch.nn.Module:
    """A trained model kept in memory after the first call (weights from the cache, trained on first use; then
    ``callback(step, steps, loss)`` reports the training's progress)."""
    if callback is not None and not _trained.cached(cfg, equation, kind):
        model = train.trained_model(cfg, equation, kind, progress=False, callback=callback).model
        del model  # now on disk: the memoised call below loads it once
    return _trained(cfg, equation, kind)


def is_ready(cfg: Config, equation: str, kind: str = "recurrsim") -> bool:
    """Whether the model is in memory or its weights are on disk (no training needed)."""
    return _trained.cached(cfg, equation, kind) or train.is_cached(cfg, equation, kind)


@memo(maxsize=256)
def simulate(cfg: Config, equation: str, ic: int, K: int, kind: str = "recurrsim", steps: int | None = None,
             ) -> xr.Dataset:
    """Roll one test initial condition out at depth K against the solver.

    Returns:
        Dataset with ``truth`` and ``pred`` (step, *spatial), ``nrmse_step`` and ``correlation`` (step); attrs
        ``nrmse`` (whole rollout), ``seconds`` (wall time of the rollout), ``K``, ``equation``, ``dt``, ``L``.
    """
    test = test_trajectories(cfg, equation)
    check_int("ic", ic, 0, test.shape[0] - 1)
    check_int("K", K, 1)
    H = cfg.rollout_steps if steps is None else check_int("steps", steps, 1, cfg.traj_steps)
    model = trained(cfg, equation, kind)
    truth = test[ic : ic + 1, : H + 1]
    with threads(cfg.threads):
        t0 = time.perf_counter()
        pred = rollout(LearnedStepper(model, K), truth[:, 0], H)
        seconds = time.perf_counter() - t0
    m = rollout_metrics(pred, truth)
    spatial = ("x",) if truth.ndim == 3 else ("y", "x")
    dims = ("step",) + spatial
    return xr.Dataset(
        {"truth": (dims, truth[0]), "pred": (dims, pred[0]), "nrmse_step": (("step",), m["nrmse_step"][0]),
         "correlation": (("step",), m["correlation"][0])},
        coords={"step": np.arange(H + 1)},
        attrs=dict(nrmse=float(m["nrmse"][0]), seconds=seconds, K=K, equation=equation, ic=ic, kind=kind,
                   dt=train.frame_dt(cfg, equation), L=train.domain_extent(cfg, equation)),
    )


@memo(maxsize=64)
def depth_sweep(cfg: Config, equation: str, ic: int, kind: str = "recurrsim", Ks=None, steps: int | None = None,
                ) -> xr.Dataset:
    """Rollout nRMSE, mean correlation horizon and time per step of one initial condition at each K, over ``steps``
    frames (default: the config's rollout_steps).

    Returns:
        Dataset with ``nrmse``, ``tau_mean`` (frames) and ``time_per_step`` (s) over ``K``.
    """
    Ks = list(cfg.K_eval if Ks is None else Ks)
    H = cfg.rollout_steps if steps is None else check_int("steps", steps, 1, cfg.traj_steps)
    model = trained(cfg, equation, kind)
    test = test_trajectories(cfg, equation)
    truth = test[ic : ic + 1, : H + 1]
    u0 = torch.from_numpy(np.array(truth[:, 0]))  # a writable copy of the read-only test data
    err, tau, secs = [], [], []
    with threads(cfg.threads):
        for K in Ks:
            pred = rollout(LearnedStepper(model, K), truth[:, 0], H)
            m = rollout_metrics(pred, truth)
            err.append(m["nrmse"][0])
            tau.append(correlation_horizon(m["correlation"], cfg.alphas).mean())
            secs.append(time_per_step(model, u0, K, 3, min_seconds=0.005))
    return xr.Dataset(
        {"nrmse": (("K",), np.array(err)), "tau_mean": (("K",), np.array(tau)),
         "time_per_step": (("K",), np.array(secs))},
        coords={"K": np.array(Ks)},
        attrs=dict(equation=equation, ic=ic, kind=kind),
    )


def clear_memory() -> None:
    """Forget every model, trajectory set and rollout kept in memory (e.g. after the data directory changed)."""
    for fn in (test_trajectories, _trained, simulate, depth_sweep):
        fn.cache_clear()
