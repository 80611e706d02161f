"""RecurrSim experiments: accuracy and cost against test-time depth K, baselines alongside.

For every equation, five models are trained (or loaded from the weight cache, :mod:`.train`): RecurrFNO trained
with random depth (``recurrsim``), the same network trained at one K (``fixed_k``) and as a deep-equilibrium model
(``deq``), and fixed-depth FNOs with the same and twice the parameters (``fno``, ``fno_2x``). Each is rolled out
autoregressively from the held-out initial conditions for ``horizon_steps`` frames at every K in ``K_eval``, with a
fixed z_0, and scored by nRMSE and per-frame Pearson correlation over the first ``rollout_steps`` frames and by the
correlation horizon tau_alpha over all of them (:mod:`.metrics`). Every arm is also rolled out on a validation split,
on which the depth each recurrent model needs is picked (never on the test set). The K-blind model ``kblind`` (the
RecurrSim weights with the depth frozen at round(mean_depth), so K does nothing) is kept as the picture of a model
that ignores K. The cost of a step is also counted, free of timer noise, as Fourier layers applied
(``layers_per_step``).
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.datasets.pde import rollout
from lab.methods.recurrsim import train
from lab.methods.recurrsim.config import MODELS, Config
from lab.methods.recurrsim.metrics import (
    correlation_horizon,
    one_step_nrmse,
    persistence_one_step_nrmse,
    rollout_metrics,
    time_per_step,
)
from lab.methods.recurrsim.model import FrozenDepth, LearnedStepper, count_parameters, fourier_layers_per_step
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: Models whose accuracy depends on K (the others ignore it; their values are repeated along K).
RECURRENT = ("recurrsim", "fixed_k", "deq")
#: The evaluated arms: the five trained models and the K-blind control.
ARMS = (*MODELS, "kblind")
MODEL_LABELS = {
    "recurrsim": "RecurrFNO (RecurrSim)",
    "fixed_k": "RecurrFNO trained at one K",
    "deq": "FNO-DEQ (fixed point)",
    "fno": "FNO, same parameters",
    "fno_2x": "FNO, 2x parameters",
    "kblind": "K-blind control: RecurrSim's weights with the depth frozen at round(mean_depth)",
}

_EMK = ("equation", "model", "K")
SCHEMA = Schema(
    Var("nrmse", _EMK, "rollout nRMSE ||u_pred - u|| / ||u|| over frames 1..H, mean over test trajectories"),
    Var("nrmse_traj", (*_EMK, "traj"), "rollout nRMSE per test trajectory"),
    Var("nrmse_step", (*_EMK, "step"), "nRMSE per rollout frame, mean over test trajectories"),
    Var("correlation", (*_EMK, "step"),
        "Pearson correlation of prediction and truth per frame, mean over test trajectories"),
    Var("tau", (*_EMK, "alpha"), "correlation horizon tau_alpha on the horizon_steps-frame rollout: frames before "
        "the correlation first drops below alpha (horizon_steps if never), mean over test trajectories", "frames"),
    Var("tau_mean", _EMK, "correlation horizon averaged over alpha", "frames"),
    Var("one_step_nrmse", _EMK, "teacher-forced one-step nRMSE on the test pairs, at K up to the largest training "
        "depth (round(mean_depth), fixed_depth, deq_max_iter); NaN deeper",
        missing="evaluated only up to the largest training depth, where the competence checks read it (a one-step "
                "batch costs as much as a rollout)"),
    Var("time_per_step", _EMK, "wall time of one step on a batch of {n_test} (fastest of {timing_repeats} repeats "
        "of >= 20 ms)", "s"),
    Var("layers_per_step", _EMK, "Fourier layers applied per step (RecurrFNO: K + 2; FNO: 3, 2x FNO: 6); lift and "
        "projection alike", "layers"),
    Var("persistence_one_step_nrmse", ("equation",), "teacher-forced one-step nRMSE of predicting no change "
        "(u(t + dt) = u(t)) on the test pairs of one_step_nrmse: the zero increment, a simulator's chance level"),
    Var("val_nrmse", _EMK, "rollout nRMSE on the validation trajectories over rollout_steps frames (picks the depth "
        "a recurrent model needs)"),
    Var("seed_val_nrmse", ("equation", "seed", "K"), "RecurrSim validation nRMSE per training seed"),
    Var("seed_nrmse", ("equation", "seed", "K"),
        "RecurrSim rollout nRMSE per training seed (the first: nrmse's model)"),
    Var("seed_tau_mean", ("equation", "seed", "K"),
        "RecurrSim correlation horizon (mean over alpha, horizon_steps frames) per training seed", "frames"),
    Var("seed_kblind_nrmse", ("equation", "seed"), "the K-blind control's rollout nRMSE per training seed"),
    Var("seed_kblind_tau_mean", ("equation", "seed"), "the K-blind control's correlation horizon per training seed",
        "frames"),
    Var("n_params", ("equation", "model"), "trainable parameters"),
    Var("train_seconds", ("equation", "model"), "training wall time (when the weights were trained; NaN: not "
        "trained)", "s"),
    Var("train_loss", ("equation", "model", "iteration"), "one-step training loss (MSE of the normalised increment)"),
    Var("dt", ("equation",), "time between frames", "time"),
    Var("domain_extent", ("equation",), "domain side length L", "length"),
    Var("example_truth", ("equation", "step", "x"), "1-D test trajectory 0 (NaN for 2-D equations)", "u",
        missing="2-D equations have no 1-D example"),
    Var("example_pred", ("equation", "K", "step", "x"), "RecurrSim rollout of test trajectory 0 (1-D equations)",
        "u", missing="2-D equations have no 1-D example"),
    coords={
        "model": Coord("; ".join(f"{k}: {v}" for k, v in MODEL_LABELS.items())),
        "K": Coord("recurrent depth at test time", "iterations"),
        "step": Coord("rollout frame", "frames"),
        "alpha": Coord("correlation threshold", "1"),
        "seed": Coord("model seed of RecurrSim's training"),
        "iteration": Coord("optimiser step"),
        "x": Coord("1-D grid index (x = index * L / grid_1d)"),
    },
)
#: The Navier-Stokes examples, in the results only when the run has that equation.
NS_SCHEMA = Schema(
    Var("example_vorticity_truth", ("frame", "y2", "x2"), "Navier-Stokes test trajectory 0", "vorticity"),
    Var("example_vorticity_pred", ("K", "frame", "y2", "x2"), "RecurrSim rollout of Navier-Stokes test trajectory 0",
        "vorticity"),
    coords={"frame": Coord("rollout frame", "frames")},
)
#: The results of _evaluate stored per (equation, model), by variable.
_EVALUATED = {"nrmse": "nrmse", "nrmse_traj": "nrmse_traj", "nrmse_step": "nrmse_step", "correlation": "correlation",
              "tau": "tau", "one_step_nrmse": "one_step", "time_per_step": "time", "val_nrmse": "val"}


# --------------------------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------------------------
def _rollouts(cfg: Config, model, K, test: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, dict, np.ndarray,
                                                                                   float]:
    """One depth's rollouts: the test rollout over horizon_steps frames, its metrics over the first rollout_steps
    (nRMSE, correlation), tau_alpha per trajectory over all of them, and the validation nRMSE (rollout_steps)."""
    H, HL = cfg.rollout_steps, cfg.horizon_steps
    pred = rollout(LearnedStepper(model, K), test[:, 0], HL)
    m = rollout_metrics(pred[:, : H + 1], test[:, : H + 1])
    corr = m["correlation"] if HL == H else rollout_metrics(pred, test[:, : HL + 1])["correlation"]
    tau = correlation_horizon(corr, cfg.alphas)
    val_err = rollout_metrics(rollout(LearnedStepper(model, K), val[:, 0], H), val[:, : H + 1])["nrmse"].mean()
    return pred[:, : H + 1], m, tau, float(val_err)


def _evaluate(cfg: Config, model, kind: str, test: np.ndarray, val: np.ndarray) -> dict:
    Ks = cfg.K_eval if kind in RECURRENT else (None,)
    out: dict[str, list] = {k: [] for k in ("nrmse", "nrmse_traj", "nrmse_step", "correlation", "tau", "one_step",
                                             "time", "example", "val")}
    u0 = torch.from_numpy(np.ascontiguousarray(test[:, 0]))
    for K in Ks:
        pred, m, tau, val_err = _rollouts(cfg, model, K, test, val)
        out["nrmse"].append(m["nrmse"].mean())
        out["nrmse_traj"].append(m["nrmse"])
        out["nrmse_step"].append(m["nrmse_step"].mean(0))
        out["correlation"].append(m["correlation"].mean(0))
        out["tau"].append(tau.mean(0))
        deep = K is not None and K > max(round(cfg.mean_depth), cfg.fixed_depth, cfg.deq_max_iter)
        out["one_step"].append(np.nan if deep else one_step_nrmse(model, test, K, cfg.rollout_steps))
        out["time"].append(time_per_step(model, u0, K, cfg.timing_repeats))
        out["example"].append(pred[0])
        out["val"].append(val_err)
    n = len(cfg.K_eval)
    return {k: np.stack([np.asarray(v) for v in vals] * (n if len(vals) == 1 else 1)) for k, vals in out.items()}


def _depth_curve(cfg: Config, model, Ks, test: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rollout nRMSE, correlation horizon (means over trajectories and alpha) and validation nRMSE at each K: another
    seed's curve."""
    err, tau, val_err = [], [], []
    for K in Ks:
        _, m, t, v = _rollouts(cfg, model, K, test, val)
        err.append(m["nrmse"].mean())
        tau.append(t.mean())
        val_err.append(v)
    return np.array(err), np.array(tau), np.array(val_err)


def _arm(cfg: Config, eq: str, kind: str, train_set: np.ndarray, by_kind: dict, progress: bool):
    """One arm's model, its training loss curve, training seconds and Fourier layers per step at each K of K_eval
    (the K-blind control: no training, RecurrSim's weights at one depth)."""
    if kind == "kblind":
        K_frozen = max(1, round(cfg.mean_depth))
        return (FrozenDepth(by_kind["recurrsim"], K_frozen), np.nan, np.nan,
                fourier_layers_per_step("recurrsim", K_frozen))
    trained = train.trained_model(cfg, eq, kind, train=train_set, progress=progress)
    return (trained.model, trained.curves["loss"], trained.meta["train_seconds"],
            [fourier_layers_per_step(kind, K) for K in cfg.K_eval])


def _recurrsim_example(cfg: Config, res: Results, e: int, eq: str, example: np.ndarray, test: np.ndarray) -> None:
    """RecurrSim's example rollout."""
    H = cfg.rollout_steps
    if train.dims_of(eq) == 1:
        res["example_truth"][e], res["example_pred"][e] = test[0, : H + 1], example
    else:
        frames = _frames(H)
        res["example_vorticity_truth"][...] = test[0, frames]
        res["example_vorticity_pred"][...] = example[:, frames]


def _seed_curves(cfg: Config, res: Results, e: int, eq: str, train_set: np.ndarray, test: np.ndarray,
                 val: np.ndarray, bar, progress: bool) -> None:
    """RecurrSim's depth curve (test and validation) and the K-blind model's error on every training seed, for the
    claims' spread (the first seed's: the models evaluated above)."""
    K_frozen, kb = max(1, round(cfg.mean_depth)), ARMS.index("kblind")
    res["seed_nrmse"][e, 0], res["seed_tau_mean"][e, 0] = res["nrmse"][e, 0], res["tau"][e, 0].mean(-1)
    res["seed_val_nrmse"][e, 0] = res["val_nrmse"][e, 0]
    res["seed_kblind_nrmse"][e, 0], res["seed_kblind_tau_mean"][e, 0] = (res["nrmse"][e, kb, 0],
                                                                         res["tau"][e, kb, 0].mean())
    for i in range(1, cfg.seeds):
        seed = cfg.seed + i
        bar.set_postfix_str(f"{eq}: recurrsim, seed {seed}")
        model = train.trained_model(cfg, eq, "recurrsim", train=train_set, progress=progress, model_seed=seed).model
        res["seed_nrmse"][e, i], res["seed_tau_mean"][e, i], res["seed_val_nrmse"][e, i] = _depth_curve(
            cfg, model, cfg.K_eval, test, val)
        (res["seed_kblind_nrmse"][e, i],), (res["seed_kblind_tau_mean"][e, i],), _ = _depth_curve(
            cfg, FrozenDepth(model, K_frozen), [None], test, val)
        bar.update(1)


def _equation(cfg: Config, res: Results, e: int, eq: str, bar, progress: bool) -> None:
    """Every arm on one equation: trained (or loaded), evaluated at every K; then RecurrSim's other seeds."""
    H = cfg.rollout_steps
    train_set = train.load_split(cfg, eq, "train", progress=progress)
    test = train.load_split(cfg, eq, "test", progress=progress)
    val = train.load_split(cfg, eq, "val", progress=progress)
    res["dt"][e], res["domain_extent"][e] = train.frame_dt(cfg, eq), train.domain_extent(cfg, eq)
    res["persistence_one_step_nrmse"][e] = persistence_one_step_nrmse(test, H)
    by_kind: dict[str, torch.nn.Module] = {}
    for m, kind in enumerate(ARMS):
        bar.set_postfix_str(f"{eq}: {kind}")
        model, curve, seconds, layers = _arm(cfg, eq, kind, train_set, by_kind, progress)
        res["layers_per_step"][e, m] = layers
        r = _evaluate(cfg, model, kind, test, val)
        for var, key in _EVALUATED.items():
            res[var][e, m] = r[key]
        res["n_params"][e, m], res["train_seconds"][e, m], res["train_loss"][e, m] = (count_parameters(model),
                                                                                      seconds, curve)
        by_kind[kind] = model
        if kind == "recurrsim":
            _recurrsim_example(cfg, res, e, eq, r["example"], test)
        bar.update(1)
    _seed_curves(cfg, res, e, eq, train_set, test, val, bar, progress)


def _frames(H: int) -> np.ndarray:
    """The rollout frames of the 2-D examples: first, middle, last."""
    return np.unique(np.array([0, H // 2, H]))


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train (or load) the five models per equation and evaluate them and the K-blind control at every K of
    ``K_eval``; RecurrSim also on the validation split.

    Returns:
        Dataset with dims ``equation``, ``model``, ``K``, ``step`` (rollout frame), ``alpha`` (correlation threshold),
        ``traj`` (test trajectory), ``iteration`` (training step), ``x`` (1-D grid index) and, with Navier-Stokes,
        ``frame``, ``y2``, ``x2`` (2-D examples). Fixed-depth models do not depend on K: their values are repeated
        along K.
    """
    eqs, H = list(cfg.equations), cfg.rollout_steps
    dims = dict(equation=eqs, model=list(ARMS), K=np.asarray(list(cfg.K_eval)), step=np.arange(H + 1),
                alpha=cfg.alphas, traj=np.arange(cfg.n_test), seed=np.array([cfg.seed + i for i in range(cfg.seeds)]),
                iteration=np.arange(cfg.iterations), x=np.arange(cfg.grid_1d))
    schema = SCHEMA
    if "navier_stokes" in eqs:
        schema = SCHEMA + NS_SCHEMA
        dims.update(frame=_frames(H), y2=cfg.grid_2d, x2=cfg.grid_2d)
    res = schema.new(context={"n_test": cfg.n_test, "timing_repeats": cfg.timing_repeats}, **dims)

    bar = tqdm(total=len(eqs) * (len(ARMS) + cfg.seeds - 1), desc="recurrsim", disable=not progress)
    with threads(cfg.threads):
        for e, eq in enumerate(eqs):
            _equation(cfg, res, e, eq, bar, progress)
    bar.close()
    res["tau_mean"] = res["tau"][...].mean(-1)
    return res.build(attrs=dict(
        fixed_depth=cfg.fixed_depth,
        mean_depth=cfg.mean_depth,
        grad_depth=cfg.grad_depth,
        rollout_steps=H,
        horizon_steps=cfg.horizon_steps,
        kblind_depth=max(1, round(cfg.mean_depth)),
        deq_max_iter=cfg.deq_max_iter,
        n_val=cfg.n_val,
        note="fixed-depth models (fno, fno_2x) and the K-blind control ignore K: their values are repeated along K",
    ))
