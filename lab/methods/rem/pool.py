"""REM's cells on both cores: :func:`score_all` scores every (seed, corruption) of a run side by side in worker
processes (:func:`lab.core.parallel.run_jobs`); each job trains that corruption's original model (or reads it from
the cache) and unlearns it at every discovery rate with every method, and sends back only the scores.

A job seeds everything it draws from (corruption, weights, masks, batches), so a worker computes the same numbers as
a call here (the test compares them)."""

from __future__ import annotations

import numpy as np
import torch

from lab.core.parallel import Job, run_jobs
from lab.core.runtime import threads
from lab.methods.rem import model as M
from lab.methods.rem.config import Config
from lab.methods.rem.train import METHODS, accuracy, corrupted, load_data, original, unlearn_cell

__all__ = ["GROUPS", "SCORES", "SERIAL_BELOW", "UNITS", "score_all", "score_corruption"]

#: the groups of training examples whose fit REM's extra units are checked on
GROUPS = ("discovered", "undiscovered", "clean")
#: REM's extra units open (each example's mask) or off (the unlearned model)
UNITS = ("on", "off")
#: the per-method scores of a cell, each ``(rates, methods)``
SCORES = ("utility", "healed", "memorised", "clean_train", "healed_discovered", "memorised_discovered",
          "healed_undiscovered")
#: examples passed through a training in all (every model of every cell) under which :func:`score_all` runs here:
#: a worker's start costs about 4 s of CPU (ci)
SERIAL_BELOW = 500_000


def _score_methods(out: dict, r: int, cell, data, bad, known: torch.Tensor, hidden: torch.Tensor) -> None:
    is_bad = bad.corrupted
    sets = {"utility": (data.x_test, data.y_test), "healed": (bad.x[is_bad], bad.y_true[is_bad]),
            "memorised": (bad.x[is_bad], bad.y[is_bad]), "clean_train": (bad.x[~is_bad], bad.y[~is_bad]),
            "healed_discovered": (bad.x[known], bad.y_true[known]),
            "memorised_discovered": (bad.x[known], bad.y[known]),
            "healed_undiscovered": (bad.x[hidden], bad.y_true[hidden])}
    for m, name in enumerate(METHODS):
        for var, (x, y) in sets.items():
            out[var][r, m] = accuracy(cell.models[name], x, y)


def _rem_absorbed(out: dict, r: int, cell, bad, known: torch.Tensor, hidden: torch.Tensor) -> None:
    big, (masks, _) = cell.rem_full["rem"], cell.masks["rem"]
    for g, sel in enumerate((known, hidden, ~bad.corrupted)):
        if not bool(sel.any()):
            continue  # an empty group stays NaN
        for u, mask in enumerate((masks[sel], None)):
            out["rem_absorbed"][r, g, u] = accuracy(big, bad.x[sel], bad.y[sel], mask)
        out["rem_extra_share"][r, g] = float(M.extra_share(big, bad.x[sel], masks[sel]).mean())


def score_corruption(cfg: Config, seed: int, kind: str) -> dict[str, np.ndarray | int]:
    """One seed and corruption: the original model (cached), then every method of
    :data:`lab.methods.rem.train.METHODS` at every discovery rate, scored.

    Returns:
        ``{var: (rates, methods)}`` for every name of :data:`SCORES`; ``rem_absorbed (rates, groups, units)`` and
        ``rem_extra_share (rates, groups)`` (REM before discarding; NaN for an empty group); ``n_forget (rates,)``;
        ``n_corrupted``.
    """
    rates = len(cfg.discovery_rates)
    out: dict = {var: np.full((rates, len(METHODS)), np.nan) for var in SCORES}
    out["rem_absorbed"] = np.full((rates, len(GROUPS), len(UNITS)), np.nan)
    out["rem_extra_share"] = np.full((rates, len(GROUPS)), np.nan)
    out["n_forget"] = np.zeros(rates, dtype=np.int64)
    with threads(cfg.threads):
        data = load_data(cfg)
        bad = corrupted(cfg, data, kind, seed)
        out["n_corrupted"] = int(bad.corrupted.sum())
        start = original(cfg, data, bad, seed)
        for r, rate in enumerate(cfg.discovery_rates):
            cell = unlearn_cell(cfg, data, bad, rate, seed, start)
            known = torch.zeros_like(bad.corrupted)
            known[cell.forget] = True
            hidden = bad.corrupted & ~known
            out["n_forget"][r] = len(cell.forget)
            _score_methods(out, r, cell, data, bad, known, hidden)
            _rem_absorbed(out, r, cell, bad, known, hidden)
    return out


def _examples(cfg: Config, n_train: int) -> float:
    """Examples passed through a training per seed and corruption (the original, a retraining and the unlearning
    runs of every rate)."""
    rates = len(cfg.discovery_rates)
    return float(n_train * (cfg.epochs * (1 + rates) + (len(METHODS) - 2) * rates * cfg.unlearn_epochs))


def score_all(cfg: Config, n_train: int, progress: bool = True, workers: int | None = None) -> dict:
    """:func:`score_corruption` for every seed and corruption of ``cfg``, side by side in worker processes
    (``LAB_WORKERS`` or the cores, ``cfg.threads`` threads each; here below :data:`SERIAL_BELOW` examples in all).

    Returns:
        ``{(seed, corruption): score_corruption(...)}``.
    """
    keys = [(seed, kind) for seed in cfg.seeds for kind in cfg.corruptions]
    cost = _examples(cfg, n_train)
    jobs = [Job(f"{kind} seed {seed}", score_corruption, (cfg, seed, kind), cost=cost) for seed, kind in keys]
    small = cost * len(jobs) < SERIAL_BELOW
    done = run_jobs(jobs, workers=1 if small else workers, threads_per_worker=cfg.threads, progress=progress,
                    desc="REM cells")
    return {key: result.value for key, result in zip(keys, done)}
