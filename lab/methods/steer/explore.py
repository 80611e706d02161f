"""Interactive STEER: cached fits and one-call views for the ``steer`` dashboard.

A fit (:func:`lab.methods.steer.experiment.fit_benchmark`, without the baselines) takes seconds; it is stored as a
torch state dict under ``<data>/steer/`` (written to a temporary file, then renamed; read back with
``weights_only=True``), keyed by a hash of everything that determines it, and kept in memory per process. The
training sessions themselves are regenerated from the seed (well under a second), so an interaction costs one
simulation of the chosen schedule and a few small predictions.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from lab.datasets.cache import config_hash, data_root
from lab.datasets.plasticity import BENCHMARKS, PATTERNS, stimulation_schedule
from lab.io import atomic_path
from lab.methods.steer.config import Config
from lab.methods.steer.experiment import (
    Fitted,
    fit_benchmark,
    make_alignment,
    torch_threads,
    training_sessions,
    true_coefficients,
)
from lab.methods.steer.model import LibraryLaw, SteerModel, equation_text, fit_library, r2, simulate_windows

#: bump when the saved format or the fitting procedure changes, so that old files are not reused
FORMAT_VERSION = 2
#: Config fields that determine a fit (the others only affect evaluation)
FIT_FIELDS = ("N", "rank", "T", "sigma_process", "K_train", "train_block", "u_max", "iterations", "als_iterations",
              "lambda_cons", "lambda_smooth", "lambda_orth", "rule_horizon", "seed")


def model_path(name: str, cfg: Config, root: str | os.PathLike | None = None) -> Path:
    key = {"benchmark": name, "version": FORMAT_VERSION, **{f: getattr(cfg, f) for f in FIT_FIELDS}}
    return data_root(root) / "steer" / f"{name}-{config_hash(key, 'steer')[:16]}.pt"


def _save(fitted: Fitted, path: Path) -> None:
    model = fitted.model
    payload = {
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "xi": fitted.law.xi.detach().clone(),
        "mask": fitted.law.mask.detach().clone(),
        "meta": {"feature": model.feature, "dt": float(model.dt), "shared": bool(model.shared),
                 "version": FORMAT_VERSION},
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def _load(path: Path, name: str, cfg: Config) -> Fitted | None:
    """The saved fit at ``path`` rebuilt around freshly regenerated training sessions; None if unusable."""
    try:
        payload = torch.load(path, weights_only=True)
        state, meta = payload["state"], payload["meta"]
        if meta.get("version") != FORMAT_VERSION:
            return None
        K, R = state["c"].shape
        N, P = state["W0"].shape
        model = SteerModel(N, P, R, state["B"].shape[1], K, feature=meta["feature"], dt=meta["dt"],
                           shared=meta["shared"])
        model.load_state_dict(state)
        law = LibraryLaw(R, payload["xi"])
        law.mask.copy_(payload["mask"])
    except Exception:  # noqa: BLE001 - unreadable, truncated or from another version: refit
        return None
    bench, train = training_sessions(name, cfg)
    if train.y.shape[0] != K or train.y.shape[2] != N:
        return None
    return Fitted(bench, train, model, law, make_alignment(bench, model, train))


@functools.lru_cache(maxsize=16)
def _fitted_cached(name: str, cfg_json: str, root: str | None) -> Fitted:
    cfg = Config.from_json(cfg_json)
    path = model_path(name, cfg, root)
    if path.exists():
        fitted = _load(path, name, cfg)
        if fitted is not None:
            return fitted
    with torch_threads(cfg.threads):
        fitted = fit_benchmark(name, cfg, baselines=False)
    _save(fitted, path)
    return fitted


def fitted_model(name: str, cfg: Config, root: str | os.PathLike | None = None) -> Fitted:
    """STEER fitted to the training sessions of benchmark ``name`` (from memory, from disk, or fitted now)."""
    if name not in BENCHMARKS:
        raise ValueError(f"benchmark={name!r} is not allowed; allowed: {', '.join(map(repr, BENCHMARKS))}")
    return _fitted_cached(name, cfg.to_json(), None if root is None else str(root))


def explore(benchmark: str = "lowrank_linear", *, pattern: str = "periodic", amplitude: float = 1.0, period: int = 3,
            start: int = 0, session: int | None = None, profile: str = "quick", seed: int = 0, units: int = 4,
            root: str | os.PathLike | None = None) -> xr.Dataset:
    """One view of a fitted benchmark under a chosen unseen schedule.

    Sessions 0..K_train-1 are the training sessions; the schedule (``pattern``, ``amplitude``, ``period``,
    ``start``, as :func:`lab.datasets.plasticity.stimulation_schedule`) then runs for K_test sessions on the true
    system, continuing from the end of training, while STEER predicts them with its library law.

    Arguments:
        session: the session whose connectivity and activity are returned (default: the last).
        units: how many recorded units' traces to return.
    Returns:
        Dataset with ubar, c_true, c_model (inferred on training sessions, predicted after; aligned to the truth)
        and c_frozen over ``session``; W_true, W_model (unit, feature) at the chosen session; y, y_hat
        (time, unit); attrs: equations (true, inferred), the chosen session, K_train, the session's R².
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern={pattern!r} is not allowed; allowed: {', '.join(map(repr, PATTERNS))}")
    cfg = Config.from_profile(profile, seed=seed)
    fitted = fitted_model(benchmark, cfg, root)
    bench, train, align, model = fitted.bench, fitted.train, fitted.align, fitted.model
    ub_test = stimulation_schedule(pattern, cfg.K_test, amplitude=amplitude, period=period, start=start,
                                   rng=np.random.default_rng(seed))
    test = bench.simulate(train.state_end, ub_test, np.random.default_rng([seed, 7]))
    K_all = cfg.K_train + cfg.K_test
    session = K_all - 1 if session is None else int(session)
    if not 0 <= session < K_all:
        raise ValueError(f"session={session!r} is not allowed; allowed range [0, {K_all - 1}]")
    c_model_all = np.concatenate([fitted.c_model, fitted.predict(ub_test, "steer")])
    c_true = np.concatenate([true_coefficients(train, align, model), true_coefficients(test, align, model)])
    frozen = np.repeat(fitted.c_model[:1], K_all, axis=0)
    ys = np.concatenate([train.y, test.y])
    us = np.concatenate([train.u, test.u])
    Ws = np.concatenate([train.W, test.W])
    W_model = fitted.connectivity(c_model_all[session])
    B, b = fitted.input_weights("steer")
    y_hat = simulate_windows(W_model[None], B, b, ys[session: session + 1], us[session: session + 1], bench.dt,
                             bench.feature, cfg.horizon)[0]
    n_units = min(units, bench.N)
    xi_true = bench.true_rule()
    xi_hat = fit_library(align.to_true(fitted.c_model), train.ubar, cfg.rule_horizon)
    var = "rho" if benchmark == "lorenz" else "c"
    R_true = c_true.shape[1]
    ds = xr.Dataset(
        {
            "ubar": (("session",), np.concatenate([train.ubar, ub_test]), {"long_name": "stimulation summary"}),
            "c_true": (("session", "component"), c_true, {"long_name": f"true coefficients ({bench.c_label})"}),
            "c_model": (("session", "component"), align.to_true(c_model_all),
                        {"long_name": "STEER: inferred (training), predicted (after)"}),
            "c_frozen": (("session", "component"), align.to_true(frozen),
                         {"long_name": "frozen first-session baseline"}),
            "W_true": (("unit", "feature"), Ws[session], {"long_name": "true connectivity"}),
            "W_model": (("unit", "feature"), W_model, {"long_name": "STEER connectivity"}),
            "y": (("time", "unit_shown"), ys[session][:, :n_units], {"long_name": "recorded activity"}),
            "y_hat": (("time", "unit_shown"), y_hat[:, :n_units],
                      {"long_name": f"reconstructed ({cfg.horizon}-step predictions)"}),
        },
        coords={"session": np.arange(K_all), "component": np.arange(1, R_true + 1),
                "time": np.arange(ys.shape[1]) * bench.dt, "unit_shown": np.arange(n_units)},
        attrs={
            "benchmark": benchmark, "session_shown": session, "K_train": cfg.K_train, "K_test": cfg.K_test,
            "r2_session": r2(y_hat[None], ys[session: session + 1]),
            "equation_true": " ; ".join(equation_text(xi_true, var)) if xi_true is not None else
            "no library rule (full-rank BCM synapses)",
            "equation_inferred": " ; ".join(equation_text(xi_hat, var)),
            "equation_model": " ; ".join(equation_text(fitted.law.xi.detach().numpy() *
                                                       fitted.law.mask.numpy(), "c")),
            "alignment": align.kind, "c_label": bench.c_label, "pattern": pattern,
            "schedule": json.dumps([float(x) for x in ub_test]),
        },
    )
    return ds
