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

__all__ = ["run"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train and evaluate the grid.

    Returns:
        Dataset with dims model, N, m, seed, split (see each variable's long_name); attrs system, n_in, n_out,
        stride, steps.
    """
    start_cpu = time.process_time()
    rec = load_records(cfg)
    K, L, B, S = len(cfg.models), len(cfg.lengths), len(cfg.burn_ins), len(cfg.seeds)
    mse = np.full((K, L, B, S, len(SPLITS)), np.nan)
    rerun = np.full((K, L, S, len(SPLITS)), np.nan)
    final_loss = np.full((K, L, B, S), np.nan)
    train_cpu = np.full((K, L, B, S), np.nan)
    bar = tqdm(total=K * L * (B + 1) * S, desc="TBPTT runs", disable=not progress)
    with threads(cfg.threads):
        for k, kind in enumerate(cfg.models):
            for i, N in enumerate(cfg.lengths):
                for s, seed in enumerate(cfg.seeds):
                    for j, m in enumerate(cfg.burn_ins):
                        tr = train_run(cfg, rec, kind, N, m, seed)
                        mse[k, i, j, s] = list(evaluate(tr.model, rec).values())
                        loss = tr.curves["loss"]
                        final_loss[k, i, j, s] = float(np.mean(loss[-max(1, len(loss) // 10):]))
                        train_cpu[k, i, j, s] = float(tr.meta.get("cpu_s", np.nan))
                        bar.update(1)
                    tr = train_run(cfg, rec, kind, N, 0, seed + RERUN_OFFSET)
                    rerun[k, i, s] = list(evaluate(tr.model, rec).values())
                    bar.update(1)
    bar.close()
    dims = ("model", "N", "m", "seed")
    return xr.Dataset(
        {
            "mse": ((*dims, "split"), mse,
                    {"long_name": "MSE of the trained model run as a simulator from the zero state over the whole "
                                  "record (standardised outputs)", "units": "1"}),
            "mse_rerun": (("model", "N", "seed", "split"), rerun,
                          {"long_name": "the same for the control: m = 0 re-trained from seed + "
                                        f"{RERUN_OFFSET} (other initial weights and batch order)", "units": "1"}),
            "final_loss": (dims, final_loss,
                           {"long_name": "burn-in training loss, mean of the last 10% of steps", "units": "1"}),
            "train_cpu_time": (dims, train_cpu,
                               {"long_name": "CPU time of the training run (NaN: loaded from the cache)",
                                "units": "s"}),
        },
        coords={
            "model": ("model", list(cfg.models)),
            "N": ("N", np.asarray(cfg.lengths), {"long_name": "subsequence length N", "units": "steps"}),
            "m": ("m", np.asarray(cfg.burn_ins), {"long_name": "burn-in m (outputs skipped by the loss)",
                                                  "units": "steps"}),
            "seed": ("seed", list(cfg.seeds)),
            "split": ("split", list(SPLITS), {"long_name": "record: train (the training MSE), val (chooses m*), "
                                                           "test"}),
        },
        attrs={"system": cfg.system, "n_in": rec.n_in, "n_out": rec.n_out, "stride": cfg.stride,
               "steps": cfg.steps, "hidden": cfg.hidden, "run_cpu_time_s": time.process_time() - start_cpu},
    )
