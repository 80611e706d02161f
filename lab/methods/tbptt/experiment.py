"""Truncated-BPTT burn-in experiments: every model trained at every (N, m) of the grid for each seed (one burn-in
grid per N, fractions of N), plus the control's re-run at m = 0 from other initial weights; each evaluated as a
simulator on the training, validation and test records, and the m = 0 models' forgetting rate measured (the bound's
λ, which predicts m*)."""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.datasets.systems import SPLITS
from lab.methods.tbptt import model as M
from lab.methods.tbptt.config import Config
from lab.methods.tbptt.train import RERUN_OFFSET, evaluate_grid, load_records, train_grid
from lab.results import Coord, Schema, Var

__all__ = ["run"]

SCHEMA = Schema(
    Var("mse", ("model", "N", "frac", "seed", "split"), "MSE of the trained model run as a simulator from the zero "
        "state over the whole record (standardised outputs)"),
    Var("burn_in", ("N", "frac"), "burn-in m = round(fraction x N) (outputs skipped by the loss)", "steps",
        dtype=int),
    Var("mse_rerun", ("model", "N", "seed", "split"), f"the same for the control: m = 0 re-trained from seed + "
        f"{RERUN_OFFSET} (other initial weights and batch order)"),
    Var("final_loss", ("model", "N", "frac", "seed"), "burn-in training loss, mean of the last 10% of steps"),
    Var("forget_lambda", ("model", "N", "seed"), "forgetting rate λ per sample of the trained m = 0 model (its "
        "output error from a wrong initial state decays as λ^j; validation record)"),
    Var("train_cpu_time", ("model", "N"), "CPU time of the window length's training (NaN: loaded from the cache)",
        "s"),
    coords={
        "N": Coord("subsequence length N", "steps"),
        "frac": Coord("burn-in as a fraction of N"),
        "split": Coord("record: train (the training MSE), val (chooses m*), test"),
    },
)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train and evaluate the grid: for each model kind and window length N, every seed at every burn-in
    ``round(fraction x N)`` and the control's re-run at m = 0, in one :func:`.train.train_grid`.

    Returns:
        Dataset with dims model, N, frac, seed, split (see each variable's long_name); attrs system, n_in, n_out,
        stride, steps.
    """
    start_cpu = time.process_time()
    rec = load_records(cfg)
    fracs = list(cfg.burn_in_fractions)
    res = SCHEMA.new(model=list(cfg.models), N=np.asarray(cfg.lengths), frac=np.asarray(fracs, float),
                     seed=list(cfg.seeds), split=list(SPLITS))
    bar = tqdm(total=len(cfg.models) * len(cfg.lengths), desc="TBPTT grids", disable=not progress)
    F = len(fracs)
    with threads(cfg.threads):
        for i, N in enumerate(cfg.lengths):
            res["burn_in"][i] = list(cfg.burn_ins(N))
        for k, kind in enumerate(cfg.models):
            for i, N in enumerate(cfg.lengths):
                grid = train_grid(cfg, rec, kind, N)
                mse = evaluate_grid(grid, rec).reshape(len(cfg.seeds), F + 1, len(SPLITS))
                loss = grid.final_loss.reshape(len(cfg.seeds), F + 1)
                res["mse"][k, i] = mse[:, :F].transpose(1, 0, 2)  # (frac, seed, split)
                res["mse_rerun"][k, i] = mse[:, F]
                res["final_loss"][k, i] = loss[:, :F].T
                res["forget_lambda"][k, i] = [M.forgetting_rate(grid.models[s * (F + 1)], rec.u["val"])
                                              for s in range(len(cfg.seeds))]
                res["train_cpu_time"][k, i] = grid.cpu_s
                bar.update(1)
    bar.close()
    return res.build(attrs={"system": cfg.system, "n_in": rec.n_in, "n_out": rec.n_out, "stride": cfg.stride,
                            "steps": cfg.steps, "hidden": cfg.hidden, "lr": cfg.lr,
                            "run_cpu_time_s": time.process_time() - start_cpu})
