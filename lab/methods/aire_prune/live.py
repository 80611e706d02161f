"""What the pruning dashboard (and a notebook) computes besides ``run``: one trained model, its accuracy against the
pruning ratio for every score, and the model pruned at one setting; each memoised in the process
(:func:`lab.cache.memo`), the weights cached on disk by :mod:`.train`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from lab.cache import Trained, cached_dataset, memo, saved_run
from lab.core.models import state_sizes
from lab.core.runtime import threads
from lab.core.tasks import accuracy_on_test, load_task
from lab.datasets.sequences import SequenceTask
from lab.methods.aire_prune import model as P
from lab.methods.aire_prune.config import SCORES, Config
from lab.methods.aire_prune.train import trained_model, training_key

__all__ = ["IMPULSE_LAGS", "SWEEP_RATIOS", "Pruned", "curves", "impulse_responses", "prepare", "pruned", "task",
           "trained", "unpruned_macs", "unpruned_state_sizes"]

#: ratios of the accuracy-against-ratio curves
SWEEP_RATIOS = tuple(round(0.1 * k, 2) for k in range(10)) + (0.95,)
#: bump when the sweep changes (invalidates the cached curves)
CURVES_VERSION = 1
#: lags of the impulse responses shown before and after pruning
IMPULSE_LAGS = 64


@dataclass(frozen=True)
class Pruned:
    """A model pruned by one score at one ratio: the copy, the states each layer keeps, its test accuracy (%),
    and the multiply-adds per step of its SSM layers and of the whole model."""

    model: torch.nn.Module
    keep: list[np.ndarray]
    accuracy: float
    ssm_macs: int
    model_macs: int

    @property
    def kept(self) -> list[int]:
        return [len(k) for k in self.keep]


@memo(4)
def task(cfg: Config) -> SequenceTask:
    """The config's task (loaded once per process)."""
    return load_task(cfg)


@memo(8)
def trained(cfg: Config, kind: str) -> Trained:
    """The config's ``kind`` model for seed ``cfg.seed`` (from the weight cache, or trained now)."""
    return trained_model(cfg, kind, cfg.seed, task(cfg), progress=False)


def unpruned_state_sizes(cfg: Config, kind: str) -> list[int]:
    """The state size of each SSM layer of the trained, unpruned ``kind`` model."""
    return state_sizes(trained(cfg, kind).model)


def unpruned_macs(cfg: Config, kind: str) -> tuple[int, int]:
    """Multiply-adds per step of the trained, unpruned ``kind`` model: ``(SSM layers, whole model)``."""
    return P.macs_per_token(trained(cfg, kind).model)


def prepare(cfg: Config, kind: str, report: Callable[..., None] | None = None) -> xr.Dataset:
    """Everything a view needs for ``kind``: trains the model on first use (``report(step, total=...)`` after each
    step), then computes :func:`curves`."""
    if not trained.cached(cfg, kind) and report is not None:
        trained_model(cfg, kind, cfg.seed, task(cfg), progress=False,
                      callback=lambda step, total: report(step, total=total))
    return curves(cfg, kind)


@memo(8)
def curves(cfg: Config, kind: str) -> xr.Dataset:
    """Accuracy against :data:`SWEEP_RATIOS` for every score (random: one draw per ratio) and states kept per layer;
    cached on disk by the model's training key (instant after the first use). The deterministic scores come from
    the report's current run of this Config when it swept the same ratios (:func:`lab.cache.saved_run`), so only
    the random draws are evaluated then.

    Returns:
        Dataset with accuracy (score, ratio) in %, states_kept (score, ratio, layer) and the unpruned accuracy in
        ``attrs["accuracy_full"]``.
    """
    key = {"version": CURVES_VERSION, "training": training_key(cfg, kind, cfg.seed), "n_test": cfg.n_test,
           "ratios": SWEEP_RATIOS, "scores": SCORES}
    return cached_dataset("aire_prune-curves", key, lambda: _sweep(cfg, kind))


def _swept_by_the_run(cfg: Config, kind: str) -> xr.Dataset | None:
    """The report's run's sweep of this model (score, ratio[, layer]) when it swept :data:`SWEEP_RATIOS`."""
    ds = saved_run("aire_prune", cfg)
    if ds is None or kind not in ds.kind.values or cfg.seed not in ds.seed.values:
        return None
    if len(ds.ratio) != len(SWEEP_RATIOS) or not np.allclose(ds.ratio.values, SWEEP_RATIOS, rtol=0, atol=1e-12):
        return None
    return ds.sel(kind=kind, seed=cfg.seed)


def _sweep(cfg: Config, kind: str) -> xr.Dataset:
    model, data = trained(cfg, kind).model, task(cfg)
    run = _swept_by_the_run(cfg, kind)
    rng = np.random.default_rng([cfg.seed, 777])
    acc = np.zeros((len(SCORES), len(SWEEP_RATIOS)))
    kept = np.zeros((len(SCORES), len(SWEEP_RATIOS), len(P.diagonal_layers(model))), dtype=np.int64)
    with threads(cfg.threads):
        for s, score in enumerate(SCORES):
            if run is not None and score != "random" and score in run.score.values:
                acc[s] = run.accuracy.sel(score=score).values  # the same deterministic plan on the same model
                kept[s] = run.states_kept.sel(score=score).values
                continue
            for r, ratio in enumerate(SWEEP_RATIOS):
                keep = P.plan(model, score, ratio, rng)
                acc[s, r] = accuracy_on_test(P.prune(model, keep), data)
                kept[s, r] = [len(k) for k in keep]
        full = float(run.accuracy_full) if run is not None else accuracy_on_test(model, data)
    return xr.Dataset(
        {"accuracy": (("score", "ratio"), acc, {"long_name": "test accuracy", "units": "%"}),
         "states_kept": (("score", "ratio", "layer"), kept, {"long_name": "states kept", "units": "states"})},
        coords={"score": list(SCORES), "ratio": np.asarray(SWEEP_RATIOS, float), "layer": np.arange(kept.shape[-1])},
        attrs={"accuracy_full": full},
    )


@memo(256)
def pruned(cfg: Config, kind: str, score: str, ratio: float) -> Pruned:
    """The ``kind`` model pruned by ``score`` at ``ratio`` (random: a draw seeded by the config's seed and the
    ratio)."""
    model = trained(cfg, kind).model
    rng = np.random.default_rng([cfg.seed, int(round(ratio * 1000))])
    keep = P.plan(model, score, ratio, rng)
    copy = P.prune(model, keep)
    with threads(cfg.threads):
        acc = accuracy_on_test(copy, task(cfg))
    return Pruned(copy, keep, acc, *P.macs_per_token(copy))


def impulse_responses(cfg: Config, kind: str, score: str, ratio: float, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Layer ``layer``'s kernel over :data:`IMPULSE_LAGS` lags before and after pruning: ``(lags, H, H)`` each."""
    before = P.diagonal_layers(trained(cfg, kind).model)
    after = P.diagonal_layers(pruned(cfg, kind, score, ratio).model)
    k = min(layer, len(after) - 1)
    return before[k].impulse_response(IMPULSE_LAGS), after[k].impulse_response(IMPULSE_LAGS)
