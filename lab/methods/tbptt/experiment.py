"""Truncated-BPTT burn-in experiments: every model trained at every (N, m) of the grid for each seed, plus the
control's re-run at m = 0 from other initial weights; each evaluated as a simulator on the training, validation and
test records."""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.datasets.systems import SPLITS
from lab.methods.tbptt.config import Config
from lab.methods.tbptt.train import RERUN_OFFSET, evaluate, load_records, train_run
from lab.results import Coord, Schema, Var

__all__ = ["run"]

SCHEMA = Schema(
    Var("mse", ("model", "N", "m", "seed", "split"), "MSE of the trained model run as a simulator from the zero "
        "state over the whole record (standardised outputs)"),
    Var("mse_rerun", ("model", "N", "seed", "split"), f"the same for the control: m = 0 re-trained from seed + "
        f"{RERUN_OFFSET} (other initial weights and batch order)"),
    Var("final_loss", ("model", "N", "m", "seed"), "burn-in training loss, mean of the last 10% of steps"),
    Var("train_cpu_time", ("model", "N", "m", "seed"), "CPU time of the training run (NaN: loaded from the cache)",
        "s"),
    coords={
        "N": Coord("subsequence length N", "steps"),
        "m": Coord("burn-in m (outputs skipped by the loss)", "steps"),
        "split": Coord("record: train (the training MSE), val (chooses m*), test"),
    },
)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train and evaluate the grid.

    Returns:
        Dataset with dims model, N, m, seed, split (see each variable's long_name); attrs system, n_in, n_out,
        stride, steps.
    """
    start_cpu = time.process_time()
    rec = load_records(cfg)
    res = SCHEMA.new(model=list(cfg.models), N=np.asarray(cfg.lengths), m=np.asarray(cfg.burn_ins),
                     seed=list(cfg.seeds), split=list(SPLITS))
    bar = tqdm(total=len(cfg.models) * len(cfg.lengths) * (len(cfg.burn_ins) + 1) * len(cfg.seeds),
               desc="TBPTT runs", disable=not progress)
    with threads(cfg.threads):
        for k, kind in enumerate(cfg.models):
            for i, N in enumerate(cfg.lengths):
                for s, seed in enumerate(cfg.seeds):
                    for j, m in enumerate(cfg.burn_ins):
                        tr = train_run(cfg, rec, kind, N, m, seed)
                        res["mse"][k, i, j, s] = list(evaluate(tr.model, rec).values())
                        loss = tr.curves["loss"]
                        res["final_loss"][k, i, j, s] = float(np.mean(loss[-max(1, len(loss) // 10):]))
                        res["train_cpu_time"][k, i, j, s] = float(tr.meta.get("cpu_s", np.nan))
                        bar.update(1)
                    tr = train_run(cfg, rec, kind, N, 0, seed + RERUN_OFFSET)
                    res["mse_rerun"][k, i, s] = list(evaluate(tr.model, rec).values())
                    bar.update(1)
    bar.close()
    return res.build(attrs={"system": cfg.system, "n_in": rec.n_in, "n_out": rec.n_out, "stride": cfg.stride,
                            "steps": cfg.steps, "hidden": cfg.hidden,
                            "run_cpu_time_s": time.process_time() - start_cpu})
