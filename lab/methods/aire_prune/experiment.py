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
from lab.results import Coord, Results, Schema, Var

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


def _sweep(res: Results, k: int, j: int, model, cfg: Config, task: SequenceTask, seed: int, *,
           progress: bool = False) -> None:
    """Prune ``model`` (kind ``k``, seed ``j``) by every score at every ratio (no retraining), measure what is left.

    Writes the variables over (score, ratio[, layer]), (ratio, draw) for each random pruning of the random baseline,
    and (ratio,) for the timing of the AIRE-pruned models and for the random control: one more random pruning per
    ratio, drawn from its own generator, apart from the baseline's draws that the claims compare it with.
    """
    base, control = np.random.SeedSequence([seed, k, 4242]).spawn(2)  # two independent streams per model
    rng, control_rng = np.random.default_rng(base), np.random.default_rng(control)
    bar = tqdm(total=len(cfg.scores) * len(cfg.ratios), desc="prune sweep", disable=not progress, leave=False)
    for s, score in enumerate(cfg.scores):
        for r, ratio in enumerate(cfg.ratios):
            draws = cfg.random_draws if score == "random" else 1
            values = []
            for d in range(draws):
                keep = P.plan(model, score, ratio, rng)
                pruned = P.prune(model, keep)
                values.append(accuracy_on_test(pruned, task))
                if d == 0:
                    res["states_kept"][k, j, s, r] = [len(idx) for idx in keep]
                    res["ssm_macs"][k, j, s, r], res["model_macs"][k, j, s, r] = P.macs_per_token(pruned)
                if score == "aire":
                    res["inference_time"][k, j, r] = _inference_time(pruned, task.x_test, cfg.timing_repeats)
            res["accuracy"][k, j, s, r], res["accuracy_sd"][k, j, s, r] = np.mean(values), np.std(values)
            if score == "random":
                res["random_accuracy"][k, j, r] = values
            bar.update(1)
    bar.close()
    for r, ratio in enumerate(cfg.ratios):
        res["random_control_accuracy"][k, j, r] = accuracy_on_test(
            P.prune(model, P.plan(model, "random", ratio, control_rng)), task)


def _layer_view(model, cfg: Config) -> dict[str, np.ndarray]:
    """Per (layer, state): eigenvalues, AIRE energy and whether AIRE keeps the state at the headline ratio."""
    layers = P.diagonal_layers(model)
    lam = np.stack([layer.system()[0] for layer in layers])  # (L, N)
    energy = np.stack(P.state_scores(model, "aire"))
    keep = P.plan(model, "aire", cfg.headline_ratio)
    mask = np.zeros(lam.shape, dtype=np.int8)
    for k, idx in enumerate(keep):
        mask[k, idx] = 1
    gamma = [torch.exp(2 * layer.gamma_log).detach().cpu().numpy() if hasattr(layer, "gamma_log")
             else np.full(lam.shape[1], np.nan) for layer in layers]
    return {"eig_real": lam.real, "eig_imag": lam.imag, "energy": energy, "kept_headline": mask,
            "gamma_norm": np.stack(gamma) / (1.0 - np.abs(lam) ** 2)}


def _padded(value: np.ndarray, width: int) -> np.ndarray:
    """``value`` (layer, state) widened to ``width`` states: NaN (floats) or 0 (ints) for states a kind lacks."""
    pad = np.full((value.shape[0], width - value.shape[1]), np.nan if value.dtype.kind in "fc" else 0,
                  dtype=value.dtype)
    return np.concatenate([value, pad], axis=1)


_KS = ("kind", "seed")
SCHEMA = Schema(
    Var("accuracy", (*_KS, "score", "ratio"), "test accuracy after pruning, no retraining (random: mean over draws)",
        "%"),
    Var("accuracy_sd", (*_KS, "score", "ratio"), "s.d. of the accuracy over random draws", "%"),
    Var("random_accuracy", (*_KS, "ratio", "draw"),
        "test accuracy after each random pruning (the random baseline's draws)", "%",
        missing="NaN when the scores compared do not include random"),
    Var("random_control_accuracy", (*_KS, "ratio"), "test accuracy after one random pruning drawn apart from the "
        "random baseline's draws (the score claims' control)", "%"),
    Var("states_kept", (*_KS, "score", "ratio", "layer"), "states kept per layer", "states", dtype=int),
    Var("ssm_macs", (*_KS, "score", "ratio"), "multiply-adds of the SSM layers per time step", "MAC"),
    Var("model_macs", (*_KS, "score", "ratio"), "multiply-adds of the model per time step", "MAC"),
    Var("inference_time", (*_KS, "ratio"), "forward pass over the test set, AIRE-pruned model (min of repeats)", "s"),
    Var("accuracy_full", _KS, "test accuracy, unpruned", "%"),
    Var("train_time", _KS, "training wall time when the weights were trained (stored with the cached weights)", "s"),
    Var("from_cache", _KS, "weights loaded from the cache", dtype=int),
    Var("eig_real", (*_KS, "layer", "state"), "Re λ of the discretised state matrix (NaN past the kind's states)"),
    Var("eig_imag", (*_KS, "layer", "state"), "Im λ of the discretised state matrix (NaN past the kind's states)"),
    Var("energy", (*_KS, "layer", "state"), "AIRE energy ||C_i||² ||B̄_i||² / (1 - |λ_i|²) (NaN past the kind's "
        "states: the LRU and S5 may have different sizes)"),
    Var("kept_headline", (*_KS, "layer", "state"), "kept by AIRE at the headline ratio (0 past the kind's states)",
        dtype=int),
    Var("gamma_norm", (*_KS, "layer", "state"), "LRU: γ_i² / (1 - |λ_i|²), 1 at initialisation, where it cancels "
        "AIRE's denominator (NaN for S5, which has no γ)"),
    Var("pruned_fraction", (*_KS, "score", "ratio"), "share of all states removed"),
    coords={
        "kind": Coord("SSM layer"),
        "seed": Coord("training seed"),
        "score": Coord("pruning score"),
        "ratio": Coord("requested pruning ratio", "1"),
        "draw": Coord("random pruning draw"),
    },
)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every kind and seed, sweep the pruning ratio for every score, return the results.

    Returns:
        Dataset with dims kind, seed, score, ratio, draw, layer, state (see each variable's long_name).
    """
    task = load_task(cfg)
    sizes = np.array([cfg.state_size(kind) for kind in cfg.kinds])  # states per layer of each kind
    width = int(sizes.max())
    res = SCHEMA.new(kind=list(cfg.kinds), seed=list(cfg.seeds), score=list(cfg.scores),
                     ratio=np.asarray(cfg.ratios, float), draw=np.arange(cfg.random_draws),
                     layer=np.arange(cfg.n_layers), state=np.arange(width))
    with threads(cfg.threads):
        for k, kind in enumerate(cfg.kinds):
            for j, seed in enumerate(cfg.seeds):
                trained = trained_model(cfg, kind, seed, task, progress=progress)
                model = trained.model
                res["train_time"][k, j] = trained.meta.get("train_time_s", math.nan)
                res["from_cache"][k, j] = trained.loaded
                res["accuracy_full"][k, j] = accuracy_on_test(model, task)
                _sweep(res, k, j, model, cfg, task, seed, progress=progress)
                for name, value in _layer_view(model, cfg).items():
                    res[name][k, j] = _padded(value, width)
    res["pruned_fraction"] = 1.0 - res["states_kept"][...].sum(-1) / (cfg.n_layers * sizes[:, None, None, None])
    return res.build(attrs={"dataset": task.name, "headline_ratio": cfg.headline_ratio, "n_layers": cfg.n_layers,
                            "d_state": cfg.d_state, "lru_d_state": cfg.lru_d_state, "d_model": cfg.d_model,
                            "n_test": len(task.x_test),
                            "n_classes": task.n_classes})
