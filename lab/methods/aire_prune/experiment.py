"""AIRE-Prune experiments: train LRU and S5 classifiers, prune them by each score over a sweep of ratios, without
retraining; accuracy, states kept per layer, multiply-adds and measured inference time."""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.core.tasks import accuracy_on_test, load_task
from lab.datasets.sequences import SequenceTask
from lab.methods.aire_prune import model as P
from lab.methods.aire_prune.config import Config
from lab.methods.aire_prune.train import trained_model

__all__ = ["run"]


@torch.no_grad()
def _inference_time(model, x: torch.Tensor, repeats: int) -> float:
    """Smallest wall time of ``repeats`` forward passes over ``x`` (seconds)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        model(x)
        best = min(best, time.perf_counter() - start)
    return best


def _sweep(model, cfg: Config, task: SequenceTask, seed: int, *, progress: bool = False) -> dict[str, np.ndarray]:
    """Prune ``model`` by every score at every ratio (no retraining) and measure what is left.

    Returns arrays over (score, ratio[, layer]), (ratio, draw) for each random pruning of the random baseline, and
    (ratio,) for the timing of the AIRE-pruned models and for the random control: one more random pruning per ratio,
    drawn from its own generator, apart from the baseline's draws that the claims compare it with.
    """
    S, R, L = len(cfg.scores), len(cfg.ratios), cfg.n_layers
    acc, acc_sd = np.full((S, R), np.nan), np.zeros((S, R))
    draws_acc = np.full((R, cfg.random_draws), np.nan)
    kept = np.zeros((S, R, L), dtype=np.int64)
    ssm_macs, model_macs = np.zeros((S, R)), np.zeros((S, R))
    timing, control = np.full(R, np.nan), np.full(R, np.nan)
    rng, control_rng = np.random.default_rng([seed, 4242]), np.random.default_rng([seed, 4243])
    bar = tqdm(total=S * R, desc="prune sweep", disable=not progress, leave=False)
    for s, score in enumerate(cfg.scores):
        for r, ratio in enumerate(cfg.ratios):
            draws = cfg.random_draws if score == "random" else 1
            values = []
            for d in range(draws):
                keep = P.plan(model, score, ratio, rng)
                pruned = P.prune(model, keep)
                values.append(accuracy_on_test(pruned, task))
                if d == 0:
                    kept[s, r] = [len(k) for k in keep]
                    ssm_macs[s, r], model_macs[s, r] = P.macs_per_token(pruned)
                if score == "aire":
                    timing[r] = _inference_time(pruned, task.x_test, cfg.timing_repeats)
            acc[s, r], acc_sd[s, r] = np.mean(values), np.std(values)
            if score == "random":
                draws_acc[r] = values
            bar.update(1)
    bar.close()
    for r, ratio in enumerate(cfg.ratios):
        control[r] = accuracy_on_test(P.prune(model, P.plan(model, "random", ratio, control_rng)), task)
    return {"accuracy": acc, "accuracy_sd": acc_sd, "random_accuracy": draws_acc, "states_kept": kept,
            "ssm_macs": ssm_macs, "model_macs": model_macs, "inference_time": timing,
            "random_control_accuracy": control}


def _layer_view(model, cfg: Config) -> dict[str, np.ndarray]:
    """Per (layer, state): eigenvalues, AIRE energy and whether AIRE keeps the state at the headline ratio."""
    layers = P.diagonal_layers(model)
    lam = np.stack([layer.system()[0] for layer in layers])  # (L, N)
    energy = np.stack(P.state_scores(model, "aire"))
    keep = P.plan(model, "aire", cfg.headline_ratio)
    mask = np.zeros(lam.shape, dtype=np.int8)
    for k, idx in enumerate(keep):
        mask[k, idx] = 1
    return {"eig_real": lam.real, "eig_imag": lam.imag, "energy": energy, "kept_headline": mask}


#: the Dataset's variables: dims after (kind, seed), long_name, units
_VARIABLES = {
    "accuracy": (("score", "ratio"), "test accuracy after pruning, no retraining (random: mean over draws)", "%"),
    "accuracy_sd": (("score", "ratio"), "s.d. of the accuracy over random draws", "%"),
    "random_accuracy": (("ratio", "draw"), "test accuracy after each random pruning (the random baseline's draws)",
                        "%"),
    "random_control_accuracy": (("ratio",), "test accuracy after one random pruning drawn apart from the random "
                                "baseline's draws (the score claims' control)", "%"),
    "states_kept": (("score", "ratio", "layer"), "states kept per layer", "states"),
    "ssm_macs": (("score", "ratio"), "multiply-adds of the SSM layers per time step", "MAC"),
    "model_macs": (("score", "ratio"), "multiply-adds of the model per time step", "MAC"),
    "inference_time": (("ratio",), "forward pass over the test set, AIRE-pruned model (min of repeats)", "s"),
    "accuracy_full": ((), "test accuracy, unpruned", "%"),
    "train_time": ((), "training wall time when the weights were trained (stored with the cached weights)", "s"),
    "from_cache": ((), "weights loaded from the cache", "1"),
    "eig_real": (("layer", "state"), "Re λ of the discretised state matrix", "1"),
    "eig_imag": (("layer", "state"), "Im λ of the discretised state matrix", "1"),
    "energy": (("layer", "state"), "AIRE energy ||C_i||² ||B̄_i||² / (1 - |λ_i|²)", "1"),
    "kept_headline": (("layer", "state"), "kept by AIRE at the headline ratio", "1"),
}


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every kind and seed, sweep the pruning ratio for every score, return the results.

    Returns:
        Dataset with dims kind, seed, score, ratio, draw, layer, state (see each variable's long_name).
    """
    task = load_task(cfg)
    sizes = {"kind": len(cfg.kinds), "seed": cfg.n_seeds, "score": len(cfg.scores), "ratio": len(cfg.ratios),
             "draw": cfg.random_draws, "layer": cfg.n_layers, "state": cfg.d_state}
    out = {name: np.zeros([sizes[d] for d in ("kind", "seed", *dims)]) for name, (dims, _, _) in _VARIABLES.items()}
    with threads(cfg.threads):
        for k, kind in enumerate(cfg.kinds):
            for j, seed in enumerate(cfg.seeds):
                trained = trained_model(cfg, kind, seed, task, progress=progress)
                model = trained.model
                out["train_time"][k, j] = trained.meta.get("train_time_s", math.nan)
                out["from_cache"][k, j] = trained.loaded
                out["accuracy_full"][k, j] = accuracy_on_test(model, task)
                for name, value in {**_sweep(model, cfg, task, seed, progress=progress),
                                    **_layer_view(model, cfg)}.items():
                    out[name][k, j] = value
    integer = {"states_kept": np.int64, "from_cache": np.int64, "kept_headline": np.int8}
    data = {name: (("kind", "seed", *dims), out[name].astype(integer.get(name, np.float64)),
                   {"long_name": long_name, "units": units})
            for name, (dims, long_name, units) in _VARIABLES.items()}
    data["pruned_fraction"] = (("kind", "seed", "score", "ratio"),
                               1.0 - out["states_kept"].sum(-1) / (cfg.n_layers * cfg.d_state),
                               {"long_name": "share of all states removed", "units": "1"})
    return xr.Dataset(
        data,
        coords={
            "kind": ("kind", list(cfg.kinds), {"long_name": "SSM layer"}),
            "seed": ("seed", list(cfg.seeds), {"long_name": "training seed"}),
            "score": ("score", list(cfg.scores), {"long_name": "pruning score"}),
            "ratio": ("ratio", np.asarray(cfg.ratios, float), {"long_name": "requested pruning ratio",
                                                                "units": "1"}),
            "draw": ("draw", np.arange(cfg.random_draws), {"long_name": "random pruning draw"}),
            "layer": ("layer", np.arange(cfg.n_layers)),
            "state": ("state", np.arange(cfg.d_state)),
        },
        attrs={"dataset": task.name, "headline_ratio": cfg.headline_ratio, "n_layers": cfg.n_layers,
               "d_state": cfg.d_state, "d_model": cfg.d_model, "n_test": len(task.x_test),
               "n_classes": task.n_classes},
    )
