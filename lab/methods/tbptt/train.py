"""Truncated-BPTT training runs with a burn-in, on :func:`lab.core.train.fit`, cached by
:func:`lab.cache.cached_model`; and their evaluation as simulators over whole records.

The records are standardised with the training record's mean and standard deviation (inputs and outputs apart);
every MSE here is on the standardised outputs, averaged over output channels, as in the paper's tables.
"""

from __future__ import annotations

import time

import numpy as np

from lab.cache import cached_model
from lab.datasets.systems import SPLITS, Splits, load_system
from lab.methods.tbptt import model as M
from lab.methods.tbptt.config import Config

__all__ = ["FORMAT", "RERUN_OFFSET", "Records", "evaluate", "load_records", "train_run"]

#: bump when training or the model changes (invalidates cached weights)
FORMAT = 1
#: the control's re-run at m = 0 starts from seed + this offset: other initial weights, other batch order
RERUN_OFFSET = 10_000


#: the standardised records: the shared :class:`lab.datasets.systems.Splits` (train, val, test)
Records = Splits


def load_records(cfg: Config) -> Records:
    """The system's records (cached), standardised with the training record's statistics."""
    s = load_system(cfg.system, cfg.n_train, cfg.n_val, cfg.n_test, seed=cfg.seed)
    mu_u, sd_u = s.u["train"].mean(0), s.u["train"].std(0) + 1e-12
    mu_y, sd_y = s.y["train"].mean(0), s.y["train"].std(0) + 1e-12
    return Records(cfg.system, {k: (v - mu_u) / sd_u for k, v in s.u.items()},
                   {k: (v - mu_y) / sd_y for k, v in s.y.items()})


def _key(cfg: Config, kind: str, N: int, m: int, seed: int) -> dict:
    return {"format": FORMAT, "system": cfg.system, "data_seed": cfg.seed, "n_train": cfg.n_train,
            "n_val": cfg.n_val, "n_test": cfg.n_test, "kind": kind, "hidden": cfg.hidden, "N": N, "m": m,
            "stride": cfg.stride, "steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "seed": seed}


def train_run(cfg: Config, rec: Records, kind: str, N: int, m: int, seed: int, *, progress: bool = False):
    """Train one model on the length-``N`` subsequences of the training record with burn-in ``m``, or load it.

    Arguments:
        kind: ``lstm``, ``gru`` or ``lru``. seed: initial weights and batch order.
    Returns:
        :class:`lab.cache.Trained` (``curves["loss"]`` the burn-in loss per step; ``meta["cpu_s"]``).
    """
    x, t = M.subsequences(rec.u["train"], rec.y["train"], N, cfg.stride)  # (W, N, n_in), (W, N, n_out)

    def loss(model, batch):
        xb, tb = batch
        return M.burn_in_loss(model(xb), tb, m)

    def train(model):
        from lab.core.train import fit

        start = time.process_time()
        res = fit(model, x, t, loss=loss, steps=cfg.steps, epochs=None, batch_size=cfg.batch_size, lr=cfg.lr,
                  seed=seed, progress=progress, desc=f"{kind} N={N} m={m}", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"cpu_s": time.process_time() - start,
                                                        "wall_s": res.wall_time_s, "steps": res.steps}}

    return cached_model("tbptt", f"{cfg.system}-{kind}", _key(cfg, kind, N, m, seed),
                        lambda: M.build_model(kind, rec.n_in, rec.n_out, cfg.hidden, seed), train)


def evaluate(model, rec: Records) -> dict[str, float]:
    """MSE of the model run as a simulator from the zero state over each whole record: ``{split: mse}``."""
    return {s: float(np.mean((M.simulate(model, rec.u[s]) - rec.y[s]) ** 2)) for s in SPLITS}
