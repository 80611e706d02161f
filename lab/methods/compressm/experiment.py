"""CompreSSM experiments: the full LRU model, in-training balanced truncation at several τ, the same architecture
trained from scratch at each final size, and truncation keeping random states; accuracy, size, training cost."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.models import state_sizes
from lab.core.runtime import threads
from lab.core.tasks import load_task, total_steps
from lab.methods.compressm import model as M
from lab.methods.compressm.config import Config
from lab.methods.compressm.train import (
    CUTS,
    EVAL_POINTS,
    MODELS,
    SCRATCH_B_OFFSET,
    check_steps,
    replayed_times,
    size_schedule,
    train_run,
    warm_up,
)

__all__ = ["run"]

#: the generator stream of a CompreSSM run's random truncations at its cuts (the right-after-the-cut comparison):
#: a stream of its own, so that no cut draw repeats the state choice of the random-truncation runs (streams 99, 98)
CUT_STREAM = 97


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train the full model and, per τ, CompreSSM and the same architecture from scratch at CompreSSM's final
    sizes; at the claim τ also truncation keeping random states (the paper's ablation) and the controls: a second
    random truncation and a second from-scratch model.

    Returns:
        Dataset with dims seed, model, tau, layer, check, sv, point, cut, draw (see each variable's long_name).
    """
    task = load_task(cfg)
    seeds, taus, L, N = cfg.seeds, cfg.taus, cfg.n_layers, cfg.d_state
    checks = check_steps(cfg, task)
    S, T, Mn, C = len(seeds), len(taus), len(MODELS), len(checks)
    acc, wall, cpu, robust, work = (np.full((S, Mn, T), np.nan) for _ in range(5))
    sizes = np.zeros((S, Mn, T, L), dtype=np.int64)
    history = np.zeros((S, Mn, T, C, L), dtype=np.int64)
    cond = np.full((S, T, C, L), np.nan)
    hsv = np.full((S, T, C, L, N), np.nan)
    evals = np.full((S, Mn, T, EVAL_POINTS), np.nan)
    cut_acc = np.full((S, T, C, len(CUTS)), np.nan)
    cut_draws = np.full((S, T, C, cfg.cut_draws), np.nan)
    hsv_full = np.full((S, L, N), np.nan)
    eval_steps = None
    schedules: dict[tuple[int, int, int], list] = {}
    bar = tqdm(total=S * (4 + 2 * T), desc="CompreSSM runs", disable=not progress)

    def record(s, m, t, out):
        nonlocal eval_steps
        acc[s, m, t], wall[s, m, t], cpu[s, m, t] = out["accuracy"], out["time"], out["cpu_time"]
        robust[s, m, t], work[s, m, t] = out["robust_time"], out["work"]
        sizes[s, m, t] = state_sizes(out["model"])
        evals[s, m, t, : len(out["eval"])] = out["eval"]
        eval_steps = out["eval_steps"]
        red = out["reducer"]
        history[s, m, t] = (np.asarray(red.history, np.int64).reshape(C, L) if red.mode is not None
                            else np.tile(sizes[s, m, t], (C, 1)))
        schedules[(s, m, t)] = size_schedule(cfg, task, red, list(sizes[s, m, t]))

    with threads(cfg.threads):
        warm_up(cfg, task)
        for s, seed in enumerate(seeds):
            full = train_run(cfg, task, seed, desc=f"full (seed {seed})")
            for t in range(T):
                record(s, 0, t, full)
            bar.update(1)
            for k, layer in enumerate(M.lru_layers(full["model"])):
                hsv_full[s, k] = M.hankel_singular_values(*layer.system())
            for t, tau in enumerate(taus):
                comp = train_run(cfg, task, seed, tau=tau, mode="hsv", rng_stream=CUT_STREAM,
                                 desc=f"CompreSSM τ={tau} (seed {seed})")
                record(s, 1, t, comp)
                bar.update(1)
                red = comp["reducer"]
                cond[s, t] = np.asarray(red.cond, float).reshape(C, L)
                cut_acc[s, t] = np.asarray(red.cuts, float).reshape(C, len(CUTS))
                cut_draws[s, t] = np.asarray(red.cut_draws, float).reshape(C, cfg.cut_draws)
                for c, per_layer in enumerate(red.hsv):
                    for k, h in enumerate(per_layer):
                        hsv[s, t, c, k, : len(h)] = h
                scratch = train_run(cfg, task, seed, d_state=[int(n) for n in sizes[s, 1, t]],
                                    desc=f"scratch {list(sizes[s, 1, t])} (seed {seed})")
                record(s, 2, t, scratch)
                bar.update(1)
                if tau == cfg.claim_tau:  # the ablation and the controls, at the claim τ only
                    for m, stream in ((3, 99), (4, 98)):
                        rand = train_run(cfg, task, seed, tau=tau, mode="random", rng_stream=stream,
                                         desc=f"{MODELS[m]} τ={tau} (seed {seed})")
                        record(s, m, t, rand)
                        bar.update(1)
                    again = train_run(cfg, task, seed + SCRATCH_B_OFFSET, d_state=[int(n) for n in sizes[s, 1, t]],
                                      desc=f"scratch_b {list(sizes[s, 1, t])} (seed {seed})")
                    record(s, 5, t, again)
                    bar.update(1)
        replayed = np.full((S, Mn, T), np.nan)
        for key, seconds in replayed_times(cfg, task, schedules).items():
            replayed[key] = seconds
    bar.close()
    dims = ("seed", "model", "tau")
    ds = xr.Dataset(
        {
            "accuracy": (dims, acc, {"long_name": "final test accuracy (full: the same run at every τ; random, "
                                                  "random_b, scratch_b: only at the claim τ)", "units": "%"}),
            "train_time": (dims, wall, {"long_name": "training wall time (reductions included, evaluations "
                                                     "excluded)", "units": "s"}),
            "train_cpu_time": (dims, cpu, {"long_name": "training CPU time of the process over the same spans",
                                           "units": "s"}),
            "train_cost": (dims, robust, {"long_name": "training CPU time, each window of reduction_interval steps "
                                                       "counted at its median step (stalls removed), plus the "
                                                       "reductions", "units": "s"}),
            "train_time_replayed": (dims, replayed,
                                    {"long_name": "training time replayed after training: each size's step timed in "
                                                  "turn with every other size in one process (median), times its "
                                                  "steps", "units": "s"}),
            "train_work": (dims, work, {"long_name": "multiply-adds of the training: 3 x rows x length x MACs per "
                                                     "token of the model at each step, plus the reductions",
                                        "units": "MAC"}),
            "state_size": ((*dims, "layer"), sizes, {"long_name": "final states per LRU block", "units": "states"}),
            "size_history": ((*dims, "check", "layer"), history,
                             {"long_name": "states per block after each reduction check", "units": "states"}),
            "gramian_condition": (("seed", "tau", "check", "layer"), cond,
                                  {"long_name": "largest condition number of the two Gramians at each check "
                                                "(CompreSSM runs)", "units": "1"}),
            "hsv_check": (("seed", "tau", "check", "layer", "sv"), hsv,
                    {"long_name": "Hankel singular values at each check, before its cut (NaN: fewer states)",
                     "units": "1"}),
            "hsv_full": (("seed", "layer", "sv"), hsv_full,
                         {"long_name": "Hankel singular values of the trained full model", "units": "1"}),
            "eval_accuracy": ((*dims, "point"), evals, {"long_name": "test accuracy during training",
                                                        "units": "%"}),
            "cut_accuracy": (("seed", "tau", "check", "cut"), cut_acc,
                             {"long_name": "test accuracy at each cut of a CompreSSM run: just before it, after "
                                           "balanced truncation, after keeping random states of the pre-cut model "
                                           "(same ranks); NaN where the check cut nothing", "units": "%"}),
            "cut_random_accuracy": (("seed", "tau", "check", "draw"), cut_draws,
                                    {"long_name": "test accuracy of each random truncation of the pre-cut model "
                                                  "(same ranks); NaN where the check cut nothing", "units": "%"}),
        },
        coords={
            "seed": ("seed", list(seeds)),
            "model": ("model", list(MODELS), {"long_name": "full; CompreSSM; from scratch at CompreSSM's final "
                                                          "sizes; truncation keeping random states; a second "
                                                          "random truncation (other draws); a second from-scratch "
                                                          "model (other seed)"}),
            "tau": ("tau", np.asarray(taus, float), {"long_name": "reduction tolerance τ", "units": "1"}),
            "layer": ("layer", np.arange(L)),
            "check": ("check", checks, {"long_name": "training step of the reduction check", "units": "steps"}),
            "point": ("point", np.asarray(eval_steps if eval_steps else np.arange(EVAL_POINTS)),
                      {"long_name": "training step of the evaluation", "units": "steps"}),
            "cut": ("cut", list(CUTS)),
            "draw": ("draw", np.arange(cfg.cut_draws), {"long_name": "random truncation draw"}),
            "sv": ("sv", np.arange(N), {"long_name": "index of the Hankel singular value, descending"}),
        },
        attrs={"dataset": task.name, "claim_tau": cfg.claim_tau, "d_state": N, "n_layers": L,
               "d_model": cfg.d_model, "total_steps": total_steps(cfg, task), "n_test": len(task.x_test),
               "n_classes": task.n_classes},
    )
    return ds
