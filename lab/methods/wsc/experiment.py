"""WSC experiments: per seed, one task-0 model; then, at every memory share, replay, reset only, averaging only and
WSC (and at the claim share a second replay run with another batch order, WSC without the averaging, WSC with the
official code's reset, and replay with WSC's re-warm), all with the same steps per task; and full retraining as the
upper reference. Accuracy matrices, ACC, BWT, plasticity, forgetting, compute."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.continual import metrics, plasticity
from lab.core.runtime import threads
from lab.methods.wsc.config import Config
from lab.methods.wsc.model import CLAIM_SHARE_ONLY, VARIANTS
from lab.methods.wsc.train import first_task, joint_training, stream_for, train_stream
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

_SSV = ("seed", "share", "variant")
_CLAIM_SHARE_ONLY = "replay_b and the ablations on WSC's schedule run at the claim share only"
SCHEMA = Schema(
    Var("accuracy_matrix", (*_SSV, "after", "task"), "test accuracy on each task after training each task (head "
        "over the classes seen); replay_b and the ablations only at the claim share", "%", missing=_CLAIM_SHARE_ONLY),
    Var("acc", _SSV, "ACC: mean accuracy over all tasks after the last", "%", missing=_CLAIM_SHARE_ONLY),
    Var("bwt", _SSV, "BWT: mean final minus just-trained accuracy of the tasks but the last (negative: forgetting)",
        "%", missing=_CLAIM_SHARE_ONLY),
    Var("plasticity", _SSV, "accuracy on the newest task right after training it, mean over tasks 1.. (task 0 is "
        "shared)", "%", missing=_CLAIM_SHARE_ONLY),
    Var("forgetting", _SSV, "mean drop from a task's best to its final accuracy", "%", missing=_CLAIM_SHARE_ONLY),
    Var("train_steps", _SSV, "optimiser steps on tasks 1..", "steps", missing=_CLAIM_SHARE_ONLY),
    Var("train_time", _SSV, "training wall time on tasks 1.. (resets and averaging included, evaluations excluded)",
        "s", missing=_CLAIM_SHARE_ONLY),
    Var("train_cpu_time", _SSV, "training CPU time of the process over the same spans", "s",
        missing=_CLAIM_SHARE_ONLY),
    Var("reset_kept", (*_SSV, "after"), "share of the weights the task's reset kept (NaN: no reset)",
        missing=_CLAIM_SHARE_ONLY),
    Var("reset_moved", (*_SSV, "after"), "L2 norm of the weight change made by the task's reset",
        missing=_CLAIM_SHARE_ONLY),
    Var("reset_score_mass", (*_SSV, "after"), "share of the importance |m|·v held by the kept weights (mean over "
        "tensors)", missing=_CLAIM_SHARE_ONLY),
    Var("last_task_loss", (*_SSV, "step"), "training loss on the last task", "nats", missing=_CLAIM_SHARE_ONLY),
    Var("joint_accuracy", ("seed", "task"), "full retraining on all tasks' data at once, the stream's total step "
        "budget: test accuracy on each task", "%"),
    Var("first_task_cost", ("seed", "clock"), "wall and CPU time of task 0 (shared by every variant)", "s"),
    coords={
        "share": Coord("replay memory: share of every past task's data kept", "1"),
        "variant": Coord("replay; reset only; averaging only; WSC (both); replay with another batch order "
                         "(control); WSC without the averaging; WSC with the official code's reset (a no-op); "
                         "replay with WSC's learning-rate re-warm"),
        "after": Coord("task just trained"),
        "task": Coord("task tested"),
        "step": Coord("step of the last task", "steps"),
    },
)


def _seed(cfg: Config, res: Results, s: int, seed: int, runs: list[tuple[int, int]], bar) -> None:
    """One seed's stream: the shared task-0 model, every (share, variant) run from it, and full retraining."""
    stream = stream_for(cfg, seed)
    first = first_task(cfg, stream, seed)
    res["first_task_cost"][s] = first.compute.wall_s, first.compute.cpu_s
    bar.update(1)
    for m, v in runs:
        out = train_stream(cfg, stream, seed, first, list(VARIANTS)[v], cfg.replay_shares[m])
        c = out["compute"]
        res["accuracy_matrix"][s, m, v] = out["R"]
        res["train_steps"][s, m, v], res["train_time"][s, m, v], res["train_cpu_time"][s, m, v] = (c.steps, c.wall_s,
                                                                                                   c.cpu_s)
        res["reset_kept"][s, m, v], res["reset_moved"][s, m, v] = out["kept"], out["moved"]
        res["reset_score_mass"][s, m, v], res["last_task_loss"][s, m, v] = out["mass"], out["loss"]
        bar.update(1)
    res["joint_accuracy"][s] = joint_training(cfg, stream, seed)
    bar.update(1)


def _stream_metrics(res: Results) -> None:
    """ACC, BWT, forgetting and plasticity of every run's accuracy matrix (the runs not made stay NaN)."""
    R = res["accuracy_matrix"]
    for idx in np.ndindex(*R.shape[:3]):
        if np.isfinite(R[idx]).all():
            met = metrics(R[idx])
            res["acc"][idx], res["bwt"][idx], res["forgetting"][idx] = met.acc, met.bwt, met.forgetting
            res["plasticity"][idx] = plasticity(R[idx])[1:].mean()  # task 0 is the same model for every variant


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every variant on every seed's stream at every memory share.

    Returns:
        Dataset with dims seed, share, variant, after (the task just trained), task (the task tested), step.
    """
    seeds, shares, T = cfg.seeds, cfg.replay_shares, cfg.n_tasks
    res = SCHEMA.new(seed=list(seeds), share=np.asarray(shares, float), variant=list(VARIANTS), after=np.arange(T),
                     task=np.arange(T), step=np.arange(1, cfg.steps_per_task + 1), clock=["wall", "cpu"])
    runs = [(m, v) for m, share in enumerate(shares) for v, name in enumerate(VARIANTS)
            if name not in CLAIM_SHARE_ONLY or share == cfg.claim_share]
    bar = tqdm(total=len(seeds) * (len(runs) + 2), desc="WSC runs", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(seeds):
            _seed(cfg, res, s, seed, runs, bar)
    bar.close()
    _stream_metrics(res)
    return res.build(attrs={"claim_share": cfg.claim_share, "stream": f"{cfg.kind}-{cfg.source}", "n_tasks": T,
                            "steps_per_task": cfg.steps_per_task, "reset_at": cfg.reset_at, "keep": cfg.keep,
                            "alpha": cfg.alpha, "hidden": list(cfg.hidden)})
