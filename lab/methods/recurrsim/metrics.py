"""The metrics of RecurrSim's rollouts: nRMSE, per-frame correlation, the correlation horizon tau_alpha, the
teacher-forced one-step error and the wall time of a step (used by :mod:`.experiment` and :mod:`.live`)."""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from lab.methods.recurrsim.train import pairs

__all__ = ["correlation_horizon", "one_step_nrmse", "persistence_one_step_nrmse", "rollout_metrics", "time_per_step"]


def rollout_metrics(pred: np.ndarray, truth: np.ndarray) -> dict[str, np.ndarray]:
    """Errors of rollouts against the truth.

    Arguments:
        pred, truth: (batch, H + 1, *spatial), frame 0 the shared initial condition.
    Returns:
        ``nrmse`` (batch,): ||pred - truth|| / ||truth|| over frames 1..H and space;
        ``nrmse_step`` (batch, H + 1): the same per frame; ``correlation`` (batch, H + 1): Pearson correlation over
        space per frame.
    """
    pred, truth = np.asarray(pred, np.float64), np.asarray(truth, np.float64)
    space = tuple(range(2, truth.ndim))
    sq_err = np.sum((pred - truth) ** 2, axis=space)  # (b, H + 1)
    sq_ref = np.sum(truth**2, axis=space)
    nrmse = np.sqrt(sq_err[:, 1:].sum(1) / np.maximum(sq_ref[:, 1:].sum(1), 1e-30))
    nrmse_step = np.sqrt(sq_err / np.maximum(sq_ref, 1e-30))
    p = pred - pred.mean(axis=space, keepdims=True)
    t = truth - truth.mean(axis=space, keepdims=True)
    denom = np.sqrt(np.sum(p**2, axis=space) * np.sum(t**2, axis=space))
    correlation = np.where(denom > 0, np.sum(p * t, axis=space) / np.maximum(denom, 1e-30), 0.0)
    return {"nrmse": nrmse, "nrmse_step": nrmse_step, "correlation": correlation}


def correlation_horizon(correlation: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """tau_alpha: frames before the correlation first drops below alpha (H when it never does).

    Arguments:
        correlation: (batch, H + 1), frame 0 the initial condition; alphas: (A,).
    Returns:
        (batch, A) in frames.
    """
    c = correlation[:, 1:, None]  # (b, H, 1)
    below = c < np.asarray(alphas)[None, None, :]  # (b, H, A)
    H = c.shape[1]
    return np.where(below.any(axis=1), np.argmax(below, axis=1), H).astype(float)


def time_per_step(model: torch.nn.Module, u: torch.Tensor, K: int | None, repeats: int,
                  min_seconds: float = 0.02) -> float:
    """Seconds per step ``model(u, K)`` on the batch ``u``: the fastest of ``repeats`` timings, each averaging as many
    calls as fill ``min_seconds`` (calibrated on a warm-up call), so that short steps are not lost in timer noise and
    a busy machine's hiccups are filtered out."""
    with torch.inference_mode():
        t0 = time.perf_counter()
        model(u, K)
        calls = max(1, math.ceil(min_seconds / max(time.perf_counter() - t0, 1e-6)))
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                model(u, K)
            best = min(best, (time.perf_counter() - t0) / calls)
    return best


def one_step_nrmse(model: torch.nn.Module, test: np.ndarray, K: int | None, horizon: int) -> float:
    """Teacher-forced one-step nRMSE, averaged over the test pairs of the first ``horizon`` frames."""
    x, y = pairs(test[:, : horizon + 1])
    with torch.inference_mode():
        pred = model(x, K)
    space = tuple(range(1, y.dim()))
    err = torch.sqrt(((pred - y) ** 2).sum(space) / (y**2).sum(space).clamp_min(1e-30))
    return float(err.mean())


def persistence_one_step_nrmse(test: np.ndarray, horizon: int) -> float:
    """The one-step nRMSE of predicting no change, u(t + dt) = u(t), on the same test pairs as
    :func:`one_step_nrmse`: the error of a zero increment, the chance level of a simulator trained to predict the
    increment. ``test``: (n_traj, T + 1, *spatial)."""
    x, y = pairs(test[:, : horizon + 1])
    space = tuple(range(1, y.dim()))
    err = torch.sqrt(((x - y) ** 2).sum(space) / (y**2).sum(space).clamp_min(1e-30))
    return float(err.mean())
