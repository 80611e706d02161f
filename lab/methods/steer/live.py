"""What the ``steer`` dashboard (and a notebook) calls besides ``run``: the cached fit and one view of it.

:func:`fitted_model` is STEER fitted to a benchmark's training sessions (:func:`lab.methods.steer.train.cached_fit`:
on disk under ``<data>/steer/``, and in memory per process); :func:`explore` continues the true system under a chosen
unseen schedule and returns what the dashboard draws. An interaction costs one simulation of the schedule and a few
small predictions; both are memoised (``fitted_model.cached(...)`` says whether a fit is ready).
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from lab.cache import memo
from lab.checks import check_choice, check_int
from lab.datasets.plasticity import BENCHMARKS, PATTERNS, stimulation_schedule
from lab.methods.steer.config import Config
from lab.methods.steer.fitted import Fitted, true_coefficients
from lab.methods.steer.model import equation_text, fit_library, r2, simulate_windows
from lab.methods.steer.train import cached_fit

__all__ = ["BENCHMARKS", "PATTERNS", "explore", "fitted_model"]


@memo(maxsize=16)
def fitted_model(name: str, cfg: Config, root: str | None = None) -> Fitted:
    """STEER fitted to the training sessions of benchmark ``name`` (from memory, from disk, or fitted now)."""
    check_choice("benchmark", name, BENCHMARKS)
    return cached_fit(name, cfg, root=root)


@memo(maxsize=64)
def explore(benchmark: str = "lowrank_linear", *, pattern: str = "periodic", amplitude: float = 1.0, period: int = 3,
            start: int = 0, session: int | None = None, profile: str = "quick", seed: int = 0, units: int = 4,
            root: str | None = None) -> xr.Dataset:
    """One view of a fitted benchmark under a chosen unseen schedule.

    Sessions 0..K_train-1 are the training sessions; the schedule (``pattern``, ``amplitude``, ``period``,
    ``start``, as :func:`lab.datasets.plasticity.stimulation_schedule`) then runs for K_test sessions on the true
    system, continuing from the end of training, while STEER predicts them with its library law.

    Arguments:
        session: the session whose connectivity and activity are returned (default: the last).
        units: how many recorded units' traces to return.
        root: data folder of the cached fits (default: :func:`lab.cache.data_root`).
    Returns:
        Dataset with ubar, c_true, c_model (inferred on training sessions, predicted after; aligned to the truth)
        and c_frozen over ``session``; W_true, W_model (unit, feature) at the chosen session; y, y_hat
        (time, unit); attrs: equations (true, inferred), the chosen session, K_train, the session's R².
    """
    check_choice("pattern", pattern, PATTERNS)
    cfg = Config.from_profile(profile, seed=seed)
    fitted = fitted_model(benchmark, cfg, root)
    bench, train, align, model = fitted.bench, fitted.train, fitted.align, fitted.model
    ub_test = stimulation_schedule(pattern, cfg.K_test, amplitude=amplitude, period=period, start=start,
                                   rng=np.random.default_rng(seed))
    test = bench.simulate(train.state_end, ub_test, np.random.default_rng([seed, 7]))
    K_all = cfg.K_train + cfg.K_test
    session = K_all - 1 if session is None else int(session)
    check_int("session", session, 0, K_all - 1)
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
