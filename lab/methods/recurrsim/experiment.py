"""RecurrSim experiments: accuracy and cost against test-time depth K, baselines alongside.

For every equation, five models are trained (or loaded from the weight cache, :mod:`.train`): RecurrFNO trained
with random depth (``recurrsim``), the same network trained at one K (``fixed_k``) and as a deep-equilibrium model
(``deq``), and fixed-depth FNOs with the same and twice the parameters (``fno``, ``fno_2x``). Each is rolled out
autoregressively from the held-out initial conditions for ``rollout_steps`` frames at every K in ``K_eval``, with a
fixed z_0, and scored by nRMSE, per-frame Pearson correlation and the correlation horizon tau_alpha
(:mod:`.metrics`). Two more things serve the claims' controls (:mod:`.claims`): the K-blind control ``kblind`` (the
RecurrSim weights with the depth frozen at round(mean_depth), so K does nothing) and RecurrSim's error on a
validation split, on which the depth it needs is picked. The cost of a step is also counted, free of timer noise,
as Fourier layers applied (``layers_per_step``).
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

__all__ = ["run"]

#: Models whose accuracy depends on K (the others ignore it; their values are repeated along K).
RECURRENT = ("recurrsim", "fixed_k", "deq")
MODEL_LABELS = {
    "recurrsim": "RecurrFNO (RecurrSim)",
    "fixed_k": "RecurrFNO trained at one K",
    "deq": "FNO-DEQ (fixed point)",
    "fno": "FNO, same parameters",
    "fno_2x": "FNO, 2x parameters",
    "kblind": "K-blind control: RecurrSim's weights with the depth frozen at round(mean_depth)",
}


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


def _depth_curve(model, Ks, test: np.ndarray, *, H: int, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rollout nRMSE and correlation horizon (means over trajectories and alpha) at each K: another seed's curve."""
    err, tau = [], []
    for K in Ks:
        m = rollout_metrics(rollout(LearnedStepper(model, K), test[:, 0], H), test[:, : H + 1])
        err.append(m["nrmse"].mean())
        tau.append(correlation_horizon(m["correlation"], alphas).mean())
    return np.array(err), np.array(tau)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train (or load) the five models per equation and evaluate them and the K-blind control at every K of
    ``K_eval``; RecurrSim also on the validation split.

    Returns:
        Dataset with dims ``equation``, ``model``, ``K``, ``step`` (rollout frame), ``alpha`` (correlation threshold),
        ``traj`` (test trajectory), ``iteration`` (training step), ``x`` (1-D grid index) and, with Navier-Stokes,
        ``frame``, ``y2``, ``x2`` (2-D examples). Fixed-depth models do not depend on K: their values are repeated
        along K.
    """
    eqs, models, Ks = list(cfg.equations), list(MODELS) + ["kblind"], list(cfg.K_eval)
    K_frozen = max(1, round(cfg.mean_depth))
    H, alphas = cfg.rollout_steps, cfg.alphas
    nE, nM, nK = len(eqs), len(models), len(Ks)

    def full(*shape):
        return np.full(shape, np.nan)

    nrmse, one_step, timing = full(nE, nM, nK), full(nE, nM, nK), full(nE, nM, nK)
    nrmse_traj = full(nE, nM, nK, cfg.n_test)
    nrmse_step, corr = full(nE, nM, nK, H + 1), full(nE, nM, nK, H + 1)
    tau = full(nE, nM, nK, len(alphas))
    n_params, train_seconds, dts, extents, persist = full(nE, nM), full(nE, nM), full(nE), full(nE), full(nE)
    layers, val_nrmse = full(nE, nM, nK), full(nE, nK)
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    seed_nrmse, seed_tau, seed_kb_nrmse, seed_kb_tau = (full(nE, len(seeds), nK), full(nE, len(seeds), nK),
                                                        full(nE, len(seeds)), full(nE, len(seeds)))
    loss = full(nE, nM, cfg.iterations)
    ex_truth, ex_pred = full(nE, H + 1, cfg.grid_1d), full(nE, nK, H + 1, cfg.grid_1d)
    frames = np.unique(np.array([0, H // 2, H]))
    n2 = cfg.grid_2d
    ex2_truth, ex2_pred = full(len(frames), n2, n2), full(nK, len(frames), n2, n2)

    bar = tqdm(total=nE * (nM + len(seeds) - 1), desc="recurrsim", disable=not progress)
    with threads(cfg.threads):
        for e, eq in enumerate(eqs):
            train_set = train.load_split(cfg, eq, "train", progress=progress)
            test = train.load_split(cfg, eq, "test", progress=progress)
            val = train.load_split(cfg, eq, "val", progress=progress)
            by_kind: dict[str, torch.nn.Module] = {}
            dts[e], extents[e] = train.frame_dt(cfg, eq), train.domain_extent(cfg, eq)
            persist[e] = persistence_one_step_nrmse(test, H)
            for m, kind in enumerate(models):
                bar.set_postfix_str(f"{eq}: {kind}")
                if kind == "kblind":  # the control: no training, RecurrSim's weights at one depth
                    model, curve, seconds = FrozenDepth(by_kind["recurrsim"], K_frozen), np.nan, np.nan
                    layers[e, m] = fourier_layers_per_step("recurrsim", K_frozen)
                else:
                    trained = train.trained_model(cfg, eq, kind, train=train_set, progress=progress)
                    model, curve, seconds = trained.model, trained.curves["loss"], trained.meta["train_seconds"]
                    layers[e, m] = [fourier_layers_per_step(kind, K) for K in Ks]
                r = _evaluate(cfg, model, kind, test, H=H, alphas=alphas)
                nrmse[e, m], nrmse_traj[e, m], nrmse_step[e, m] = r["nrmse"], r["nrmse_traj"], r["nrmse_step"]
                corr[e, m], tau[e, m], one_step[e, m], timing[e, m] = (r["correlation"], r["tau"], r["one_step"],
                                                                       r["time"])
                n_params[e, m], train_seconds[e, m], loss[e, m] = count_parameters(model), seconds, curve
                by_kind[kind] = model
                if kind == "recurrsim":
                    for k, K in enumerate(Ks):
                        pred = rollout(LearnedStepper(model, K), val[:, 0], H)
                        val_nrmse[e, k] = rollout_metrics(pred, val[:, : H + 1])["nrmse"].mean()
                    if train.dims_of(eq) == 1:
                        ex_truth[e], ex_pred[e] = test[0, : H + 1], r["example"]
                    else:
                        ex2_truth[:], ex2_pred[:] = test[0, frames], r["example"][:, frames]
                bar.update(1)
            kb = models.index("kblind")
            seed_nrmse[e, 0], seed_tau[e, 0] = nrmse[e, 0], tau[e, 0].mean(-1)
            seed_kb_nrmse[e, 0], seed_kb_tau[e, 0] = nrmse[e, kb, 0], tau[e, kb, 0].mean()
            for i, seed in enumerate(seeds[1:], 1):  # RecurrSim's other training seeds, for the claims' spread
                bar.set_postfix_str(f"{eq}: recurrsim, seed {seed}")
                model = train.trained_model(cfg, eq, "recurrsim", train=train_set, progress=progress,
                                            model_seed=seed).model
                seed_nrmse[e, i], seed_tau[e, i] = _depth_curve(model, Ks, test, H=H, alphas=alphas)
                (seed_kb_nrmse[e, i],), (seed_kb_tau[e, i],) = _depth_curve(FrozenDepth(model, K_frozen), [None],
                                                                            test, H=H, alphas=alphas)
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
            "layers_per_step": (dims3, layers, {"long_name": "Fourier layers applied per step (RecurrFNO: K + 2; "
                                                "FNO: 3, 2x FNO: 6); lift and projection alike", "units": "layers"}),
            "persistence_one_step_nrmse": (("equation",), persist,
                                           {"long_name": "teacher-forced one-step nRMSE of predicting no change "
                                                         "(u(t + dt) = u(t)) on the test pairs of one_step_nrmse: "
                                                         "the zero increment, a simulator's chance level",
                                            "units": "1"}),
            "val_nrmse": (("equation", "K"), val_nrmse, {"long_name": "RecurrSim rollout nRMSE on the validation "
                                                         "trajectories (picks the depth it needs)", "units": "1"}),
            "seed_nrmse": (("equation", "seed", "K"), seed_nrmse,
                           {"long_name": "RecurrSim rollout nRMSE per training seed (the first: nrmse's model)",
                            "units": "1"}),
            "seed_tau_mean": (("equation", "seed", "K"), seed_tau,
                              {"long_name": "RecurrSim correlation horizon (mean over alpha) per training seed",
                               "units": "frames"}),
            "seed_kblind_nrmse": (("equation", "seed"), seed_kb_nrmse,
                                  {"long_name": "the K-blind control's rollout nRMSE per training seed",
                                   "units": "1"}),
            "seed_kblind_tau_mean": (("equation", "seed"), seed_kb_tau,
                                     {"long_name": "the K-blind control's correlation horizon per training seed",
                                      "units": "frames"}),
            "n_params": (("equation", "model"), n_params, {"long_name": "trainable parameters", "units": "1"}),
            "train_seconds": (("equation", "model"), train_seconds,
                              {"long_name": "training wall time (when the weights were trained; NaN: not "
                                                "trained)", "units": "s"}),
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
            "seed": ("seed", np.array(seeds), {"long_name": "model seed of RecurrSim's training"}),
            "iteration": ("iteration", np.arange(cfg.iterations), {"long_name": "optimiser step"}),
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
        kblind_depth=K_frozen,
        deq_max_iter=cfg.deq_max_iter,
        n_val=cfg.n_val,
        note="fixed-depth models (fno, fno_2x) and the K-blind control ignore K: their values are repeated along K",
    )
    return ds
