"""CompreSSM experiments: the full LRU model, in-training balanced truncation at several τ, the same architecture
trained from scratch at each final size, and truncation keeping random states; accuracy, size, training cost."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.models import state_sizes
from lab.core.runtime import threads
from lab.core.tasks import SequenceTask, load_task, total_steps
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
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: the generator stream of a CompreSSM run's random truncations at its cuts (the right-after-the-cut comparison):
#: a stream of its own, so that no cut draw repeats the state choice of the random-truncation runs (streams 99, 98)
CUT_STREAM = 97

_SMT = ("seed", "model", "tau")
_CLAIM_TAU_ONLY = "random, random_b and scratch_b are trained at the claim τ only"
SCHEMA = Schema(
    Var("accuracy", _SMT, "final test accuracy (full: the same run at every τ; random, random_b, scratch_b: only at "
        "the claim τ)", "%", missing=_CLAIM_TAU_ONLY),
    Var("train_time", _SMT, "training wall time (reductions included, evaluations excluded)", "s",
        missing=_CLAIM_TAU_ONLY),
    Var("train_cpu_time", _SMT, "training CPU time of the process over the same spans", "s", missing=_CLAIM_TAU_ONLY),
    Var("train_cost", _SMT, "training CPU time, each window of reduction_interval steps counted at its median step "
        "(stalls removed), plus the reductions", "s", missing=_CLAIM_TAU_ONLY),
    Var("train_time_replayed", _SMT, "training time replayed after training: each size's step timed in turn with "
        "every other size in one process (median), times its steps", "s", missing=_CLAIM_TAU_ONLY),
    Var("train_work", _SMT, "multiply-adds of the training: 3 x rows x length x MACs per token of the model at each "
        "step, plus the reductions", "MAC", missing=_CLAIM_TAU_ONLY),
    Var("state_size", (*_SMT, "layer"), "final states per LRU block", "states", dtype=int, missing=_CLAIM_TAU_ONLY,
        fill=0),
    Var("size_history", (*_SMT, "check", "layer"), "states per block after each reduction check", "states",
        dtype=int, missing=_CLAIM_TAU_ONLY, fill=0),
    Var("gramian_condition", ("seed", "tau", "check", "layer"),
        "largest condition number of the two Gramians at each check (CompreSSM runs)"),
    Var("hsv_check", ("seed", "tau", "check", "layer", "sv"),
        "Hankel singular values at each check, before its cut (NaN: fewer states)",
        missing="a block reduced to fewer states has fewer singular values"),
    Var("hsv_full", ("seed", "layer", "sv"), "Hankel singular values of the trained full model"),
    Var("eval_accuracy", (*_SMT, "point"), "test accuracy during training", "%",
        missing=f"{_CLAIM_TAU_ONLY}; a run evaluated at fewer points leaves the rest NaN"),
    Var("cut_accuracy", ("seed", "tau", "check", "cut"), "test accuracy at each cut of a CompreSSM run: just before "
        "it, after balanced truncation, after keeping random states of the pre-cut model (same ranks); NaN where the "
        "check cut nothing", "%"),
    Var("cut_random_accuracy", ("seed", "tau", "check", "draw"), "test accuracy of each random truncation of the "
        "pre-cut model (same ranks); NaN where the check cut nothing", "%"),
    coords={
        "model": Coord("full; CompreSSM; from scratch at CompreSSM's final sizes; truncation keeping random states; "
                       "a second random truncation (other draws); a second from-scratch model (other seed)"),
        "tau": Coord("reduction tolerance τ", "1"),
        "check": Coord("training step of the reduction check", "steps"),
        "point": Coord("training step of the evaluation", "steps"),
        "draw": Coord("random truncation draw"),
        "sv": Coord("index of the Hankel singular value, descending"),
    },
)


def _record(cfg: Config, task: SequenceTask, res: Results, schedules: dict, s: int, m: int, t: int,
            out: dict) -> None:
    """One training run's results at (seed s, model m, τ index t), and its size schedule for the replayed times."""
    C, L = res.sizes["check"], res.sizes["layer"]
    res["accuracy"][s, m, t], res["train_time"][s, m, t] = out["accuracy"], out["time"]
    res["train_cpu_time"][s, m, t], res["train_cost"][s, m, t] = out["cpu_time"], out["robust_time"]
    res["train_work"][s, m, t] = out["work"]
    res["state_size"][s, m, t] = state_sizes(out["model"])
    sizes = res["state_size"][s, m, t]
    res["eval_accuracy"][s, m, t, : len(out["eval"])] = out["eval"]
    res.coord("point", np.asarray(out["eval_steps"] if out["eval_steps"] else np.arange(EVAL_POINTS)))
    red = out["reducer"]
    res["size_history"][s, m, t] = (np.asarray(red.history, np.int64).reshape(C, L) if red.mode is not None
                                    else np.tile(sizes, (C, 1)))
    schedules[(s, m, t)] = size_schedule(cfg, task, red, list(sizes))


def _reductions(res: Results, s: int, t: int, red) -> None:
    """What a CompreSSM run's reducer saw at each check: the Gramians' condition, the singular values, the
    accuracies at the cut."""
    C, L = res.sizes["check"], res.sizes["layer"]
    res["gramian_condition"][s, t] = np.asarray(red.cond, float).reshape(C, L)
    res["cut_accuracy"][s, t] = np.asarray(red.cuts, float).reshape(C, len(CUTS))
    res["cut_random_accuracy"][s, t] = np.asarray(red.cut_draws, float).reshape(C, res.sizes["draw"])
    for c, per_layer in enumerate(red.hsv):
        for k, h in enumerate(per_layer):
            res["hsv_check"][s, t, c, k, : len(h)] = h


def _seed(cfg: Config, task: SequenceTask, res: Results, schedules: dict, s: int, seed: int, bar) -> None:
    """Every run of one seed: the full model, and per τ CompreSSM and from scratch at its final sizes; at the claim
    τ also the random truncations and a second from-scratch model."""

    def record(m, t, out):
        _record(cfg, task, res, schedules, s, m, t, out)
        bar.update(1)

    full = train_run(cfg, task, seed, desc=f"full (seed {seed})")
    for t in range(len(cfg.taus)):
        _record(cfg, task, res, schedules, s, 0, t, full)
    bar.update(1)
    for k, layer in enumerate(M.lru_layers(full["model"])):
        res["hsv_full"][s, k] = M.hankel_singular_values(*layer.system())
    for t, tau in enumerate(cfg.taus):
        comp = train_run(cfg, task, seed, tau=tau, mode="hsv", rng_stream=CUT_STREAM,
                         desc=f"CompreSSM τ={tau} (seed {seed})")
        record(1, t, comp)
        _reductions(res, s, t, comp["reducer"])
        small = res["state_size"][s, 1, t]
        record(2, t, train_run(cfg, task, seed, d_state=[int(n) for n in small],
                               desc=f"scratch {list(small)} (seed {seed})"))
        if tau == cfg.claim_tau:  # the ablation and the controls, at the claim τ only
            for m, stream in ((3, 99), (4, 98)):
                record(m, t, train_run(cfg, task, seed, tau=tau, mode="random", rng_stream=stream,
                                       desc=f"{MODELS[m]} τ={tau} (seed {seed})"))
            record(5, t, train_run(cfg, task, seed + SCRATCH_B_OFFSET, d_state=[int(n) for n in small],
                                   desc=f"scratch_b {list(small)} (seed {seed})"))


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train the full model and, per τ, CompreSSM and the same architecture from scratch at CompreSSM's final
    sizes; at the claim τ also truncation keeping random states (the paper's ablation) and the controls: a second
    random truncation and a second from-scratch model.

    Returns:
        Dataset with dims seed, model, tau, layer, check, sv, point, cut, draw (see each variable's long_name).
    """
    task = load_task(cfg)
    seeds, L, N = cfg.seeds, cfg.n_layers, cfg.d_state
    res = SCHEMA.new(seed=list(seeds), model=list(MODELS), tau=np.asarray(cfg.taus, float), layer=np.arange(L),
                     check=check_steps(cfg, task), point=np.arange(EVAL_POINTS), cut=list(CUTS),
                     draw=np.arange(cfg.cut_draws), sv=np.arange(N))
    schedules: dict[tuple[int, int, int], list] = {}
    bar = tqdm(total=len(seeds) * (4 + 2 * len(cfg.taus)), desc="CompreSSM runs", disable=not progress)
    with threads(cfg.threads):
        warm_up(cfg, task)
        for s, seed in enumerate(seeds):
            _seed(cfg, task, res, schedules, s, seed, bar)
        for key, seconds in replayed_times(cfg, task, schedules).items():
            res["train_time_replayed"][key] = seconds
    bar.close()
    return res.build(attrs={"dataset": task.name, "claim_tau": cfg.claim_tau, "d_state": N, "n_layers": L,
                            "d_model": cfg.d_model, "total_steps": total_steps(cfg, task),
                            "n_test": len(task.x_test), "n_classes": task.n_classes})
