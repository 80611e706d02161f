"""WSC experiments: per seed, one task-0 model; then, at every memory share, replay, reset only, averaging only and
WSC (and at the claim share a second replay run with another batch order), all with the same steps per task; and
full retraining as the upper reference. Accuracy matrices, ACC, BWT, plasticity, forgetting, compute."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.continual import metrics, plasticity
from lab.core.runtime import threads
from lab.methods.wsc.config import Config
from lab.methods.wsc.model import VARIANTS
from lab.methods.wsc.train import first_task, joint_training, stream_for, train_stream

__all__ = ["run"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every variant on every seed's stream at every memory share.

    Returns:
        Dataset with dims seed, share, variant, after (the task just trained), task (the task tested), step.
    """
    seeds, shares, variants, T = cfg.seeds, cfg.replay_shares, list(VARIANTS), cfg.n_tasks
    S, M, V = len(seeds), len(shares), len(variants)
    R = np.full((S, M, V, T, T), np.nan)
    steps, wall, cpu = (np.full((S, M, V), np.nan) for _ in range(3))
    kept, moved, mass = (np.full((S, M, V, T), np.nan) for _ in range(3))
    loss = np.full((S, M, V, cfg.steps_per_task), np.nan)
    joint = np.full((S, T), np.nan)
    first_cost = np.full((S, 2), np.nan)
    runs = [(m, v) for m, share in enumerate(shares) for v, name in enumerate(variants)
            if name != "replay_b" or share == cfg.claim_share]
    bar = tqdm(total=S * (len(runs) + 2), desc="WSC runs", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(seeds):
            stream = stream_for(cfg, seed)
            first = first_task(cfg, stream, seed)
            first_cost[s] = first.compute.wall_s, first.compute.cpu_s
            bar.update(1)
            for m, v in runs:
                out = train_stream(cfg, stream, seed, first, variants[v], shares[m])
                R[s, m, v] = out["R"]
                c = out["compute"]
                steps[s, m, v], wall[s, m, v], cpu[s, m, v] = c.steps, c.wall_s, c.cpu_s
                kept[s, m, v], moved[s, m, v], mass[s, m, v] = out["kept"], out["moved"], out["mass"]
                loss[s, m, v] = out["loss"]
                bar.update(1)
            joint[s] = joint_training(cfg, stream, seed)
            bar.update(1)
    bar.close()
    acc, bwt, plast, forget = (np.full((S, M, V), np.nan) for _ in range(4))
    for idx in np.ndindex(S, M, V):
        if np.isfinite(R[idx]).all():
            met = metrics(R[idx])
            acc[idx], bwt[idx], forget[idx] = met.acc, met.bwt, met.forgetting
            plast[idx] = plasticity(R[idx])[1:].mean()  # task 0 is the same model for every variant
    dims = ("seed", "share", "variant")
    return xr.Dataset(
        {
            "accuracy_matrix": ((*dims, "after", "task"), R,
                                {"long_name": "test accuracy on each task after training each task (head over "
                                              "the classes seen); replay_b only at the claim share",
                                 "units": "%"}),
            "acc": (dims, acc, {"long_name": "ACC: mean accuracy over all tasks after the last", "units": "%"}),
            "bwt": (dims, bwt, {"long_name": "BWT: mean final minus just-trained accuracy of the tasks but the "
                                             "last (negative: forgetting)", "units": "%"}),
            "plasticity": (dims, plast, {"long_name": "accuracy on the newest task right after training it, mean "
                                                      "over tasks 1.. (task 0 is shared)", "units": "%"}),
            "forgetting": (dims, forget, {"long_name": "mean drop from a task's best to its final accuracy",
                                          "units": "%"}),
            "train_steps": (dims, steps, {"long_name": "optimiser steps on tasks 1..", "units": "steps"}),
            "train_time": (dims, wall, {"long_name": "training wall time on tasks 1.. (resets and averaging "
                                                     "included, evaluations excluded)", "units": "s"}),
            "train_cpu_time": (dims, cpu, {"long_name": "training CPU time of the process over the same spans",
                                           "units": "s"}),
            "reset_kept": ((*dims, "after"), kept, {"long_name": "share of the weights the task's reset kept "
                                                                 "(NaN: no reset)", "units": "1"}),
            "reset_moved": ((*dims, "after"), moved, {"long_name": "L2 norm of the weight change made by the "
                                                                   "task's reset", "units": "1"}),
            "reset_score_mass": ((*dims, "after"), mass,
                                 {"long_name": "share of the importance |m|·v held by the kept weights (mean over "
                                               "tensors)", "units": "1"}),
            "last_task_loss": ((*dims, "step"), loss, {"long_name": "training loss on the last task",
                                                       "units": "nats"}),
            "joint_accuracy": (("seed", "task"), joint,
                               {"long_name": "full retraining on all tasks' data at once, the stream's total step "
                                             "budget: test accuracy on each task", "units": "%"}),
            "first_task_cost": (("seed", "clock"), first_cost,
                                {"long_name": "wall and CPU time of task 0 (shared by every variant)",
                                 "units": "s"}),
        },
        coords={
            "seed": ("seed", list(seeds)),
            "share": ("share", np.asarray(shares, float), {"long_name": "replay memory: share of every past "
                                                                        "task's data kept", "units": "1"}),
            "variant": ("variant", variants,
                        {"long_name": "replay; reset only; averaging only; WSC (both); replay with another batch "
                                      "order (control)"}),
            "after": ("after", np.arange(T), {"long_name": "task just trained"}),
            "task": ("task", np.arange(T), {"long_name": "task tested"}),
            "step": ("step", np.arange(1, cfg.steps_per_task + 1), {"long_name": "step of the last task",
                                                                     "units": "steps"}),
            "clock": ("clock", ["wall", "cpu"]),
        },
        attrs={"claim_share": cfg.claim_share, "stream": f"{cfg.kind}-{cfg.source}", "n_tasks": T,
               "steps_per_task": cfg.steps_per_task, "reset_at": cfg.reset_at, "keep": cfg.keep,
               "alpha": cfg.alpha, "hidden": list(cfg.hidden)},
    )
