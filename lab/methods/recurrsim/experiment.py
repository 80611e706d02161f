"""RecurrSim experiments: accuracy and cost against test-time depth K, baselines alongside, and the paper's claims.

For every equation, five models are trained (or loaded from the weight cache, :mod:`.training`): RecurrFNO trained
with random depth (``recurrsim``), the same network trained at one K (``fixed_k``) and as a deep-equilibrium model
(``deq``), and fixed-depth FNOs with the same and twice the parameters (``fno``, ``fno_2x``). Each is rolled out
autoregressively from the held-out initial conditions for ``rollout_steps`` frames at every K in ``K_eval``, with a
fixed z_0, and scored by nRMSE, per-frame Pearson correlation and the correlation horizon tau_alpha.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.claims import Claim
from lab.datasets.pde import rollout
from lab.methods.recurrsim import training
from lab.methods.recurrsim.config import MODELS, Config
from lab.methods.recurrsim.model import LearnedStepper, count_parameters

#: Models whose accuracy depends on K (the others ignore it; their values are repeated along K).
RECURRENT = ("recurrsim", "fixed_k", "deq")
MODEL_LABELS = {
    "recurrsim": "RecurrFNO (RecurrSim)",
    "fixed_k": "RecurrFNO trained at one K",
    "deq": "FNO-DEQ (fixed point)",
    "fno": "FNO, same parameters",
    "fno_2x": "FNO, 2x parameters",
}


# --------------------------------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------------------------------
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
    x, y = training.pairs(test[:, : horizon + 1])
    with torch.inference_mode():
        pred = model(x, K)
    space = tuple(range(1, y.dim()))
    err = torch.sqrt(((pred - y) ** 2).sum(space) / (y**2).sum(space).clamp_min(1e-30))
    return float(err.mean())


# --------------------------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------------------------
def _evaluate(cfg: Config, model, kind: str, test: np.ndarray, *, H: int, alphas: np.ndarray) -> dict:
    Ks = cfg.K_eval if kind in RECURRENT else (None,)
    out: dict[str, list] = {k: [] for k in ("nrmse", "nrmse_traj", "nrmse_step", "correlation", "tau", "one_step",
                                             "time", "example")}
    truth = test[:, : H + 1]
    u0 = torch.from_numpy(np.ascontiguousarray(test[:, 0]))
    for K in Ks:
        pred = rollout(LearnedStepper(model, K), test[:, 0], H)
        m = rollout_metrics(pred, truth)
        out["nrmse"].append(m["nrmse"].mean())
        out["nrmse_traj"].append(m["nrmse"])
        out["nrmse_step"].append(m["nrmse_step"].mean(0))
        out["correlation"].append(m["correlation"].mean(0))
        out["tau"].append(correlation_horizon(m["correlation"], alphas).mean(0))
        out["one_step"].append(one_step_nrmse(model, test, K, H))
        out["time"].append(time_per_step(model, u0, K, cfg.timing_repeats))
        out["example"].append(pred[0])
    n = len(cfg.K_eval)
    return {k: np.stack([np.asarray(v) for v in vals] * (n if len(vals) == 1 else 1)) for k, vals in out.items()}


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train (or load) the five models per equation and evaluate them at every K of ``K_eval``.

    Returns:
        Dataset with dims ``equation``, ``model``, ``K``, ``step`` (rollout frame), ``alpha`` (correlation threshold),
        ``traj`` (test trajectory), ``iteration`` (training step), ``x`` (1-D grid index) and, with Navier-Stokes,
        ``frame``, ``y2``, ``x2`` (2-D examples). Fixed-depth models do not depend on K: their values are repeated
        along K.
    """
    eqs, models, Ks = list(cfg.equations), list(MODELS), list(cfg.K_eval)
    H, alphas = cfg.rollout_steps, cfg.alphas
    nE, nM, nK = len(eqs), len(models), len(Ks)

    def full(*shape):
        return np.full(shape, np.nan)

    nrmse, one_step, timing = full(nE, nM, nK), full(nE, nM, nK), full(nE, nM, nK)
    nrmse_traj = full(nE, nM, nK, cfg.n_test)
    nrmse_step, corr = full(nE, nM, nK, H + 1), full(nE, nM, nK, H + 1)
    tau = full(nE, nM, nK, len(alphas))
    n_params, train_seconds, dts, extents = full(nE, nM), full(nE, nM), full(nE), full(nE)
    loss = full(nE, nM, cfg.iterations)
    ex_truth, ex_pred = full(nE, H + 1, cfg.grid_1d), full(nE, nK, H + 1, cfg.grid_1d)
    frames = np.unique(np.array([0, H // 2, H]))
    n2 = cfg.grid_2d
    ex2_truth, ex2_pred = full(len(frames), n2, n2), full(nK, len(frames), n2, n2)

    bar = tqdm(total=nE * nM, desc="recurrsim", disable=not progress)
    with training.torch_threads(cfg.threads):
        for e, eq in enumerate(eqs):
            train = training.load_split(cfg, eq, "train", progress=progress)
            test = training.load_split(cfg, eq, "test", progress=progress)
            dts[e], extents[e] = training.frame_dt(cfg, eq), training.domain_extent(cfg, eq)
            for m, kind in enumerate(models):
                bar.set_postfix_str(f"{eq}: {kind}")
                model, info = training.get_model(cfg, eq, kind, progress=progress, train=train)
                r = _evaluate(cfg, model, kind, test, H=H, alphas=alphas)
                nrmse[e, m], nrmse_traj[e, m], nrmse_step[e, m] = r["nrmse"], r["nrmse_traj"], r["nrmse_step"]
                corr[e, m], tau[e, m], one_step[e, m], timing[e, m] = (r["correlation"], r["tau"], r["one_step"],
                                                                       r["time"])
                n_params[e, m], train_seconds[e, m] = count_parameters(model), info["train_seconds"]
                loss[e, m] = info["loss"]
                if kind == "recurrsim":
                    if training.dims_of(eq) == 1:
                        ex_truth[e], ex_pred[e] = test[0, : H + 1], r["example"]
                    else:
                        ex2_truth[:], ex2_pred[:] = test[0, frames], r["example"][:, frames]
                bar.update(1)
    bar.close()

    dims3 = ("equation", "model", "K")
    ds = xr.Dataset(
        {
            "nrmse": (dims3, nrmse, {"long_name": "rollout nRMSE ||u_pred - u|| / ||u|| over frames 1..H, mean over "
                                     "test trajectories", "units": "1"}),
            "nrmse_traj": (dims3 + ("traj",), nrmse_traj, {"long_name": "rollout nRMSE per test trajectory",
                                                           "units": "1"}),
            "nrmse_step": (dims3 + ("step",), nrmse_step, {"long_name": "nRMSE per rollout frame, mean over test "
                                                           "trajectories", "units": "1"}),
            "correlation": (dims3 + ("step",), corr, {"long_name": "Pearson correlation of prediction and truth per "
                                                      "frame, mean over test trajectories", "units": "1"}),
            "tau": (dims3 + ("alpha",), tau, {"long_name": "correlation horizon tau_alpha: frames before the "
                                              "correlation first drops below alpha (H if never), mean over test "
                                              "trajectories", "units": "frames"}),
            "tau_mean": (dims3, tau.mean(-1), {"long_name": "correlation horizon averaged over alpha",
                                               "units": "frames"}),
            "one_step_nrmse": (dims3, one_step, {"long_name": "teacher-forced one-step nRMSE on the test pairs",
                                                 "units": "1"}),
            "time_per_step": (dims3, timing, {"long_name": f"wall time of one step on a batch of {cfg.n_test} "
                                              f"(fastest of {cfg.timing_repeats} repeats of >= 20 ms)",
                                              "units": "s"}),
            "n_params": (("equation", "model"), n_params, {"long_name": "trainable parameters", "units": "1"}),
            "train_seconds": (("equation", "model"), train_seconds,
                              {"long_name": "training wall time (when the weights were trained)", "units": "s"}),
            "train_loss": (("equation", "model", "iteration"), loss,
                           {"long_name": "one-step training loss (MSE of the normalised increment)", "units": "1"}),
            "dt": (("equation",), dts, {"long_name": "time between frames", "units": "time"}),
            "domain_extent": (("equation",), extents, {"long_name": "domain side length L", "units": "length"}),
            "example_truth": (("equation", "step", "x"), ex_truth,
                              {"long_name": "1-D test trajectory 0 (NaN for 2-D equations)", "units": "u"}),
            "example_pred": (("equation", "K", "step", "x"), ex_pred,
                             {"long_name": "RecurrSim rollout of test trajectory 0 (1-D equations)", "units": "u"}),
        },
        coords={
            "equation": ("equation", eqs),
            "model": ("model", models, {"long_name": "; ".join(f"{k}: {v}" for k, v in MODEL_LABELS.items())}),
            "K": ("K", np.asarray(Ks), {"long_name": "recurrent depth at test time", "units": "iterations"}),
            "step": ("step", np.arange(H + 1), {"long_name": "rollout frame", "units": "frames"}),
            "alpha": ("alpha", alphas, {"long_name": "correlation threshold", "units": "1"}),
            "traj": ("traj", np.arange(cfg.n_test)),
            "iteration": ("iteration", np.arange(cfg.iterations), {"long_name": "Adam step"}),
            "x": ("x", np.arange(cfg.grid_1d), {"long_name": "1-D grid index (x = index * L / grid_1d)"}),
        },
    )
    if "navier_stokes" in eqs:
        ds["example_vorticity_truth"] = (("frame", "y2", "x2"), ex2_truth,
                                         {"long_name": "Navier-Stokes test trajectory 0", "units": "vorticity"})
        ds["example_vorticity_pred"] = (("K", "frame", "y2", "x2"), ex2_pred,
                                        {"long_name": "RecurrSim rollout of Navier-Stokes test trajectory 0",
                                         "units": "vorticity"})
        ds = ds.assign_coords(frame=("frame", frames, {"long_name": "rollout frame", "units": "frames"}))
    ds.attrs.update(
        fixed_depth=cfg.fixed_depth,
        mean_depth=cfg.mean_depth,
        grad_depth=cfg.grad_depth,
        rollout_steps=H,
        note="fixed-depth models (fno, fno_2x) ignore K: their values are repeated along K",
    )
    return ds


# --------------------------------------------------------------------------------------------------------------------
# Claims: each reads the Dataset alone and is checked on every equation of the run (the worst counts).
# --------------------------------------------------------------------------------------------------------------------
def _worst(ds: xr.Dataset, per_eq, larger_is_worse: bool, fmt: str = "{:.3g}"):
    values = {str(eq): per_eq(ds.sel(equation=eq)) for eq in ds.equation.values}
    vals = {k: v[0] if isinstance(v, tuple) else v for k, v in values.items()}
    worst = max(vals, key=vals.get) if larger_is_worse else min(vals, key=vals.get)
    parts = []
    for eq, v in values.items():
        extra = f" ({v[1]})" if isinstance(v, tuple) else ""
        parts.append(f"{eq}: {fmt.format(vals[eq])}{extra}")
    return vals[worst], "; ".join(parts)


def _err(d: xr.Dataset, model: str, K: int) -> float:
    if K not in d.K.values:
        raise ValueError(f"K = {K} is not in K_eval {list(map(int, d.K.values))}")
    return float(d.nrmse.sel(model=model, K=K))


def _falls(ds):
    return _worst(ds, lambda d: (_err(d, "recurrsim", 8) / _err(d, "recurrsim", 1),
                                 f"{_err(d, 'recurrsim', 1):.3g} -> {_err(d, 'recurrsim', 8):.3g}"), True)


def _saturates(ds):
    def per(d):
        base = _err(d, "recurrsim", 16)
        higher = [int(k) for k in d.K.values if k > 16]
        if not higher:
            raise ValueError("no K above 16 in K_eval")
        dev = max(abs(_err(d, "recurrsim", k) / base - 1.0) for k in higher)
        return dev, ", ".join(f"K={k}: {_err(d, 'recurrsim', k):.3g}" for k in [16] + higher)

    return _worst(ds, per, True)


def _cost_linear(ds):
    def per(d):
        t = d.time_per_step.sel(model="recurrsim")
        K, y = t.K.values.astype(float), t.values
        if len(K) < 3:
            raise ValueError("need at least 3 depths")
        slope, icpt = np.polyfit(K, y, 1)
        r2 = 1.0 - np.sum((y - (slope * K + icpt)) ** 2) / np.sum((y - y.mean()) ** 2)
        if slope <= 0:
            r2 = -abs(r2)
        return r2, f"{slope * 1e3:.3g} ms per iteration + {icpt * 1e3:.3g} ms"

    return _worst(ds, per, False, "{:.4f}")


def _fixed_above(d):
    kf = int(d.attrs["fixed_depth"])
    above = [int(k) for k in d.K.values if k > kf]
    if not above:
        raise ValueError(f"no K above fixed_depth = {kf} in K_eval")
    return kf, above


def _fixed_degrades(ds):
    def per(d):
        kf, above = _fixed_above(d)
        ratio = max(_err(d, "fixed_k", k) for k in above) / _err(d, "fixed_k", kf)
        return ratio, f"trained at K={kf}: " + ", ".join(f"K={k}: {_err(d, 'fixed_k', k):.3g}" for k in [kf] + above)

    return _worst(ds, per, False)


def _recurrsim_holds(ds):
    def per(d):
        kf, above = _fixed_above(d)
        ratio = max(_err(d, "recurrsim", k) for k in above) / _err(d, "recurrsim", kf)
        return ratio, ", ".join(f"K={k}: {_err(d, 'recurrsim', k):.3g}" for k in [kf] + above)

    return _worst(ds, per, True)


def needed_depth(d: xr.Dataset, tol: float = 0.05) -> int:
    """The K RecurrSim needs: the smallest evaluated K whose error is within ``tol`` of its best."""
    e = d.nrmse.sel(model="recurrsim")
    ok = e.values <= (1.0 + tol) * float(e.min())
    return int(e.K.values[np.argmax(ok)])


def _vs_fno2x(ds):
    def per(d):
        k = needed_depth(d)
        ratio = _err(d, "recurrsim", k) / float(d.nrmse.sel(model="fno_2x").isel(K=0))
        return ratio, (f"K={k}: {_err(d, 'recurrsim', k):.3g} vs {float(d.nrmse.sel(model='fno_2x').isel(K=0)):.3g}; "
                       f"params {int(d.n_params.sel(model='recurrsim'))} vs {int(d.n_params.sel(model='fno_2x'))}; "
                       f"same-size FNO {float(d.nrmse.sel(model='fno').isel(K=0)):.3g}")

    return _worst(ds, per, True)


def _vs_deq(ds):
    def per(d):
        r = d.nrmse.sel(model="recurrsim") / d.nrmse.sel(model="deq")
        gm = float(np.exp(np.log(r.values).mean()))
        return gm, "per K " + ", ".join(f"{int(k)}: {float(v):.2f}" for k, v in zip(r.K.values, r.values))

    return _worst(ds, per, True)


CLAIMS = [
    Claim(
        name="error_falls_with_K",
        statement="Rollout error falls as the test-time depth K grows (RecurrSim, K = 1 -> 8)",
        source="paper: error-vs-K curves on Burgers, KdV, KS (abstract: 'increase K for more-accurate simulations')",
        measure=_falls,
        op="<=",
        threshold=0.70,
        threshold_source="research brief's CPU check: the 20-step error drops >= 30% from K = 1 to K = 8",
    ),
    Claim(
        name="error_saturates",
        statement="The error then plateaus: beyond K = 16 it changes by at most 5%",
        source="paper: plateau near K = 16 (Burgers) and K = 8 (KdV)",
        measure=_saturates,
        op="<=",
        threshold=0.05,
        threshold_source="research brief's CPU check: 'stays within 5%' at larger K",
    ),
    Claim(
        name="cost_linear_in_K",
        statement="Inference cost grows linearly in K (one recurrent block per iteration)",
        source="paper: accuracy-cost trade-off set by K (cost axis of its error-vs-cost figures)",
        measure=_cost_linear,
        op=">=",
        threshold=0.95,
        threshold_source="our convention: R^2 of a least-squares line time = a + b K (negative if b <= 0)",
    ),
    Claim(
        name="fixed_k_degrades",
        statement="The same network trained at one fixed K gets worse when run deeper than it was trained",
        source="paper's fixed-depth ablation (why K is randomised during training)",
        measure=_fixed_degrades,
        op=">=",
        threshold=1.5,
        threshold_source="our convention: at least 1.5x its own error at the training K, for some larger K",
    ),
    Claim(
        name="recurrsim_holds_beyond",
        statement="RecurrSim does not degrade at the depths where the fixed-K model does",
        source="paper: RecurrSim's error is flat past its plateau",
        measure=_recurrsim_holds,
        op="<=",
        threshold=1.05,
        threshold_source="research brief: within 5% of its error at the fixed model's K",
    ),
    Claim(
        name="matches_fno_2x",
        statement="RecurrFNO at the K it needs matches or beats a fixed-depth FNO with twice its parameters",
        source="paper: 0.8B RecurrFNO outperforms 1.6B FNO on 3-D compressible Navier-Stokes",
        measure=_vs_fno2x,
        op="<=",
        threshold=1.05,
        threshold_source="'matches': within the same 5% as the plateau; K needed = smallest K within 5% of its best",
    ),
    Claim(
        name="beats_deq",
        statement="At equal cost (equal K), RecurrSim is more accurate than a deep-equilibrium FNO",
        source="abstract: 'superior accuracy-cost trade-offs compared to ... Deep Equilibrium'",
        measure=_vs_deq,
        op="<=",
        threshold=1.0,
        threshold_source="geometric mean over K of the error ratio below 1: better on average at equal cost",
    ),
]


# --------------------------------------------------------------------------------------------------------------------
# Interactive use (the recurrsim dashboard): one initial condition, live inference from cached weights.
# --------------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def test_trajectories(cfg: Config, equation: str) -> np.ndarray:
    """Held-out trajectories (n_test, traj_steps + 1, *spatial) on the network's grid (read-only)."""
    out = training.load_split(cfg, equation, "test", progress=False)
    out.setflags(write=False)
    return out


_MODELS: dict[str, torch.nn.Module] = {}


def trained_model(cfg: Config, equation: str, kind: str = "recurrsim", *, progress: bool = True, callback=None):
    """A trained model kept in memory after the first call (weights from the cache, trained on first use)."""
    key = str(training.weights_path(cfg, equation, kind))
    if key not in _MODELS:
        _MODELS[key], _ = training.get_model(cfg, equation, kind, progress=progress, callback=callback)
    return _MODELS[key]


def simulate(cfg: Config, equation: str, ic: int, K: int, kind: str = "recurrsim", steps: int | None = None,
             ) -> xr.Dataset:
    """Roll one test initial condition out at depth K against the solver.

    Returns:
        Dataset with ``truth`` and ``pred`` (step, *spatial), ``nrmse_step`` and ``correlation`` (step); attrs
        ``nrmse`` (whole rollout), ``seconds`` (wall time of the rollout), ``K``, ``equation``, ``dt``, ``L``.
    """
    test = test_trajectories(cfg, equation)
    if not 0 <= ic < test.shape[0]:
        raise ValueError(f"ic={ic!r} is not allowed; allowed: 0..{test.shape[0] - 1}")
    if K < 1:
        raise ValueError(f"K={K!r} is not allowed; allowed: an integer >= 1")
    H = cfg.rollout_steps if steps is None else steps
    model = trained_model(cfg, equation, kind, progress=False)
    truth = test[ic : ic + 1, : H + 1]
    with training.torch_threads(cfg.threads):
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
                   dt=training.frame_dt(cfg, equation), L=training.domain_extent(cfg, equation)),
    )


def depth_sweep(cfg: Config, equation: str, ic: int, kind: str = "recurrsim", Ks=None) -> xr.Dataset:
    """Rollout nRMSE, mean correlation horizon and time per step of one initial condition at each K.

    Returns:
        Dataset with ``nrmse``, ``tau_mean`` (frames) and ``time_per_step`` (s) over ``K``.
    """
    Ks = list(cfg.K_eval if Ks is None else Ks)
    model = trained_model(cfg, equation, kind, progress=False)
    test = test_trajectories(cfg, equation)
    truth = test[ic : ic + 1, : cfg.rollout_steps + 1]
    u0 = torch.from_numpy(np.array(truth[:, 0]))  # a writable copy of the read-only test data
    err, tau, secs = [], [], []
    with training.torch_threads(cfg.threads):
        for K in Ks:
            pred = rollout(LearnedStepper(model, K), truth[:, 0], cfg.rollout_steps)
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
