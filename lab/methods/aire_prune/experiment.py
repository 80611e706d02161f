"""AIRE-Prune experiments: train LRU and S5 classifiers, prune them by each score over a sweep of ratios, without
retraining; accuracy, states kept per layer, multiply-adds and measured inference time; the paper's claims."""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.claims import Claim
from lab.core.models import SequenceClassifier
from lab.core.train import cached_weights, evaluate, fit, seed_everything, torch_threads
from lab.datasets.sequences import SequenceTask, load_sequence_task
from lab.methods.aire_prune import model as P
from lab.methods.aire_prune.config import Config

#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1
#: per-kind layer settings: LRU's ring initialisation |λ| in [0.5, 0.99] suits sequences of length 40-64
MIXER_KWARGS = {"lru": {"r_min": 0.5, "r_max": 0.99}, "s5": {}}


def load_task(cfg: Config) -> SequenceTask:
    task = load_sequence_task(cfg.dataset, permuted=cfg.permuted)
    return task.subset(cfg.n_train or None, cfg.n_test or None)


def build_model(cfg: Config, kind: str, task: SequenceTask) -> SequenceClassifier:
    return SequenceClassifier(task.d_input, task.n_classes, kind=kind, d_model=cfg.d_model, n_layers=cfg.n_layers,
                              d_state=cfg.d_state, mixer_kwargs=MIXER_KWARGS[kind])


def training_config(cfg: Config, kind: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    names = ("dataset", "permuted", "n_train", "n_layers", "d_model", "d_state", "epochs", "batch_size", "lr",
             "ssm_lr", "weight_decay")
    return {**{n: getattr(cfg, n) for n in names}, "kind": kind, "seed": seed, "mixer": MIXER_KWARGS[kind],
            "version": WEIGHTS_VERSION}


def trained_model(cfg: Config, kind: str, seed: int, task: SequenceTask | None = None, *, progress: bool = True,
                  callback=None) -> tuple[SequenceClassifier, dict]:
    """A trained classifier: from the weight cache (``data/aire_prune/``) or trained now and cached.

    Arguments:
        callback: called as ``callback(step, total)`` after each training step (for the dashboard's progress bar).
    Returns:
        the model (eval mode) and ``{"train_time_s": ..., "from_cache": ...}``.
    """
    task = task or load_task(cfg)
    with torch_threads(cfg.threads):
        seed_everything(seed)
        model = build_model(cfg, kind, task)
        info = {"train_time_s": math.nan}
        total = cfg.epochs * math.ceil(len(task.x_train) / cfg.batch_size)

        def train(m):
            on_step = None if callback is None else (lambda step, *_: callback(step, total))
            res = fit(m, task.x_train, task.y_train, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                      ssm_lr=cfg.ssm_lr, weight_decay=cfg.weight_decay, seed=seed, progress=progress,
                      desc=f"train {kind} (seed {seed})", on_step=on_step)
            info["train_time_s"] = res.wall_time_s

        model, loaded = cached_weights(model, "aire_prune", f"{cfg.dataset}-{kind}", training_config(cfg, kind, seed),
                                       train, use_cache=cfg.use_cache)
    model.eval()
    info["from_cache"] = loaded
    return model, info


def accuracy_on_test(model, task: SequenceTask) -> float:
    """Test accuracy of a classifier on ``task``, in percent."""
    return 100.0 * evaluate(model, task.x_test, task.y_test, batch_size=len(task.x_test))[0]


@torch.no_grad()
def inference_time(model, x: torch.Tensor, repeats: int) -> float:
    """Smallest wall time of ``repeats`` forward passes over ``x`` (seconds)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        model(x)
        best = min(best, time.perf_counter() - start)
    return best


def sweep(model, cfg: Config, task: SequenceTask, seed: int, *, progress: bool = False) -> dict[str, np.ndarray]:
    """Prune ``model`` by every score at every ratio (no retraining) and measure what is left.

    Returns arrays over (score, ratio[, layer]) and (ratio,) for the timing of the AIRE-pruned models.
    """
    S, R, L = len(cfg.scores), len(cfg.ratios), cfg.n_layers
    acc, acc_sd = np.full((S, R), np.nan), np.zeros((S, R))
    kept = np.zeros((S, R, L), dtype=np.int64)
    ssm_macs, model_macs = np.zeros((S, R)), np.zeros((S, R))
    timing = np.full(R, np.nan)
    rng = np.random.default_rng([seed, 4242])
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
                    timing[r] = inference_time(pruned, task.x_test, cfg.timing_repeats)
            acc[s, r], acc_sd[s, r] = np.mean(values), np.std(values)
            bar.update(1)
    bar.close()
    return {"accuracy": acc, "accuracy_sd": acc_sd, "states_kept": kept, "ssm_macs": ssm_macs,
            "model_macs": model_macs, "inference_time": timing}


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


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every kind and seed, sweep the pruning ratio for every score, return the results.

    Returns:
        Dataset with dims kind, seed, score, ratio, layer, state (see each variable's long_name).
    """
    task = load_task(cfg)
    K, Sd = len(cfg.kinds), len(cfg.seeds)
    S, R, L, N = len(cfg.scores), len(cfg.ratios), cfg.n_layers, cfg.d_state
    out: dict[str, np.ndarray] = {
        "accuracy": np.zeros((K, Sd, S, R)), "accuracy_sd": np.zeros((K, Sd, S, R)),
        "states_kept": np.zeros((K, Sd, S, R, L), dtype=np.int64), "ssm_macs": np.zeros((K, Sd, S, R)),
        "model_macs": np.zeros((K, Sd, S, R)), "inference_time": np.zeros((K, Sd, R)),
        "accuracy_full": np.zeros((K, Sd)), "train_time": np.zeros((K, Sd)), "from_cache": np.zeros((K, Sd), int),
        "eig_real": np.zeros((K, Sd, L, N)), "eig_imag": np.zeros((K, Sd, L, N)), "energy": np.zeros((K, Sd, L, N)),
        "kept_headline": np.zeros((K, Sd, L, N), dtype=np.int8),
    }
    with torch_threads(cfg.threads):
        for k, kind in enumerate(cfg.kinds):
            for j, seed in enumerate(cfg.seeds):
                model, info = trained_model(cfg, kind, seed, task, progress=progress)
                out["train_time"][k, j], out["from_cache"][k, j] = info["train_time_s"], info["from_cache"]
                out["accuracy_full"][k, j] = accuracy_on_test(model, task)
                res = sweep(model, cfg, task, seed, progress=progress)
                for name, value in res.items():
                    out[name][k, j] = value
                for name, value in _layer_view(model, cfg).items():
                    out[name][k, j] = value
    total = L * N
    pruned_fraction = 1.0 - out["states_kept"].sum(-1) / total
    dims = ("kind", "seed", "score", "ratio")
    ds = xr.Dataset(
        {
            "accuracy": (dims, out["accuracy"], {"long_name": "test accuracy after pruning, no retraining "
                                                 "(random: mean over draws)", "units": "%"}),
            "accuracy_sd": (dims, out["accuracy_sd"], {"long_name": "s.d. of the accuracy over random draws",
                                                       "units": "%"}),
            "pruned_fraction": (dims, pruned_fraction, {"long_name": "share of all states removed", "units": "1"}),
            "states_kept": ((*dims, "layer"), out["states_kept"], {"long_name": "states kept per layer",
                                                                   "units": "states"}),
            "ssm_macs": (dims, out["ssm_macs"], {"long_name": "multiply-adds of the SSM layers per time step",
                                                 "units": "MAC"}),
            "model_macs": (dims, out["model_macs"], {"long_name": "multiply-adds of the model per time step",
                                                     "units": "MAC"}),
            "inference_time": (("kind", "seed", "ratio"), out["inference_time"],
                               {"long_name": "forward pass over the test set, AIRE-pruned model (min of repeats)",
                                "units": "s"}),
            "accuracy_full": (("kind", "seed"), out["accuracy_full"], {"long_name": "test accuracy, unpruned",
                                                                       "units": "%"}),
            "train_time": (("kind", "seed"), out["train_time"],
                           {"long_name": "training wall time (NaN: weights from the cache)", "units": "s"}),
            "from_cache": (("kind", "seed"), out["from_cache"], {"long_name": "weights loaded from the cache",
                                                                 "units": "1"}),
            "eig_real": (("kind", "seed", "layer", "state"), out["eig_real"],
                         {"long_name": "Re λ of the discretised state matrix", "units": "1"}),
            "eig_imag": (("kind", "seed", "layer", "state"), out["eig_imag"],
                         {"long_name": "Im λ of the discretised state matrix", "units": "1"}),
            "energy": (("kind", "seed", "layer", "state"), out["energy"],
                       {"long_name": "AIRE energy ||C_i||² ||B̄_i||² / (1 - |λ_i|²)", "units": "1"}),
            "kept_headline": (("kind", "seed", "layer", "state"), out["kept_headline"],
                              {"long_name": "kept by AIRE at the headline ratio", "units": "1"}),
        },
        coords={
            "kind": ("kind", list(cfg.kinds), {"long_name": "SSM layer"}),
            "seed": ("seed", list(cfg.seeds), {"long_name": "training seed"}),
            "score": ("score", list(cfg.scores), {"long_name": "pruning score"}),
            "ratio": ("ratio", np.asarray(cfg.ratios, float), {"long_name": "requested pruning ratio",
                                                                "units": "1"}),
            "layer": ("layer", np.arange(L)),
            "state": ("state", np.arange(N)),
        },
        attrs={"dataset": task.name, "headline_ratio": cfg.headline_ratio, "n_layers": L, "d_state": N,
               "d_model": cfg.d_model, "n_test": len(task.x_test)},
    )
    return ds


# ----------------------------------------------------------------------------------------------------------------
# Claims: each reads the Dataset alone.
# ----------------------------------------------------------------------------------------------------------------
def _mean_acc(ds: xr.Dataset, score: str) -> xr.DataArray:
    """Accuracy by (kind, ratio), averaged over seeds."""
    if score not in ds.score.values:
        raise ValueError(f"this run has no {score!r} score")
    return ds.accuracy.sel(score=score).mean("seed")


def _headline(ds: xr.Dataset) -> float:
    return float(ds.attrs["headline_ratio"])


def _aire_drop(ds: xr.Dataset):
    r = _headline(ds)
    drop = ds.accuracy_full.mean("seed") - _mean_acc(ds, "aire").sel(ratio=r)  # (kind,)
    acc = _mean_acc(ds, "aire")
    safe = []
    for kind in ds.kind.values:
        ok = (ds.accuracy_full.mean("seed").sel(kind=kind) - acc.sel(kind=kind)) <= 1.0
        ratios = ds.ratio.values[ok.values]
        safe.append(f"{kind}: drop {float(drop.sel(kind=kind)):.2f} pt, up to {ratios.max():.0%} within 1 pt")
    saved = 1 - float((ds.ssm_macs.sel(score="aire", ratio=r) / ds.ssm_macs.sel(score="aire", ratio=0.0)).mean())
    return float(drop.mean()), f"at {r:.0%} pruned: " + "; ".join(safe) + f"; SSM multiply-adds saved {saved:.0%}"


def _gap_at_headline(ds: xr.Dataset, other: str):
    r = _headline(ds)
    gap = (_mean_acc(ds, "aire") - _mean_acc(ds, other)).sel(ratio=r)
    per = ", ".join(f"{k}: {float(gap.sel(kind=k)):+.2f}" for k in ds.kind.values)
    return float(gap.mean()), f"AIRE minus {other} at {r:.0%} pruned ({per} pt)"


def _mean_gap_beyond(ds: xr.Dataset, other: str):
    r = _headline(ds)
    gap = (_mean_acc(ds, "aire") - _mean_acc(ds, other)).sel(ratio=ds.ratio[ds.ratio >= r])
    per = ", ".join(f"{k}: {float(gap.sel(kind=k).mean()):+.2f}" for k in ds.kind.values)
    return float(gap.mean()), (f"AIRE minus {other}, mean over ratios {r:.0%}-{float(ds.ratio.max()):.0%} "
                               f"({per} pt)")


CLAIMS = [
    Claim(
        name="aire_prunes_half_for_under_a_point",
        statement="AIRE removes half of all states with well under one point of accuracy lost, without retraining",
        source="abstract: 60.8% of states pruned on average for a 0.29% average accuracy drop",
        measure=_aire_drop,
        op="<=",
        threshold=1.0,
        threshold_source="research brief's plan: at >= 50% pruning AIRE loses <= 1 pt (mean over LRU and S5)",
        unit="pt",
    ),
    Claim(
        name="aire_beats_random",
        statement="Random pruning at the same ratio loses far more accuracy than AIRE",
        source="paper's baselines; research brief: random loses >= 5 pts where AIRE loses <= 1",
        measure=lambda ds: _gap_at_headline(ds, "random"),
        op=">=",
        threshold=4.0,
        threshold_source="the brief's two bounds (random >= 5 pt lost, AIRE <= 1 pt): a gap of at least 4 pt",
        unit="pt",
    ),
    Claim(
        name="aire_beats_magnitude",
        statement="Energy beats eigenvalue magnitude |λ| as a pruning score at the same ratios",
        source="paper: AIRE aligns pruning with response energy rather than the pole's radius alone",
        measure=lambda ds: _mean_gap_beyond(ds, "magnitude"),
        op=">",
        threshold=0.0,
        threshold_source="sign of the mean accuracy gap over ratios >= the headline ratio (our convention)",
        unit="pt",
    ),
    Claim(
        name="aire_vs_last",
        statement="AIRE's asymptotic energy does at least as well as LAST's H-infinity score (reported either way)",
        source="paper's comparison with LAST (Gwak et al. 2024), which it reports improving on",
        measure=lambda ds: _mean_gap_beyond(ds, "last"),
        op=">=",
        threshold=0.0,
        threshold_source="sign of the mean accuracy gap over ratios >= the headline ratio (our convention)",
        unit="pt",
    ),
    Claim(
        name="global_beats_uniform",
        statement="Layer-normalised global selection beats pruning every layer by the same share",
        source="paper: layer-wise normalisation enables global cross-layer comparison and selection",
        measure=lambda ds: _mean_gap_beyond(ds, "aire_uniform"),
        op=">=",
        threshold=0.0,
        threshold_source="sign of the mean accuracy gap over ratios >= the headline ratio (our convention)",
        unit="pt",
    ),
]


# ----------------------------------------------------------------------------------------------------------------
# Interactive use (the pruning dashboard)
# ----------------------------------------------------------------------------------------------------------------
def accuracy_curves(model, cfg: Config, task: SequenceTask, ratios, scores, seed: int = 0) -> xr.Dataset:
    """Accuracy against ratio for each score (random: one draw per ratio) and states kept per layer.

    Returns:
        Dataset with accuracy (score, ratio) in % and states_kept (score, ratio, layer).
    """
    rng = np.random.default_rng([seed, 777])
    acc = np.zeros((len(scores), len(ratios)))
    kept = np.zeros((len(scores), len(ratios), len(P.diagonal_layers(model))), dtype=np.int64)
    for s, score in enumerate(scores):
        for r, ratio in enumerate(ratios):
            keep = P.plan(model, score, ratio, rng)
            acc[s, r] = accuracy_on_test(P.prune(model, keep), task)
            kept[s, r] = [len(k) for k in keep]
    return xr.Dataset(
        {"accuracy": (("score", "ratio"), acc, {"long_name": "test accuracy", "units": "%"}),
         "states_kept": (("score", "ratio", "layer"), kept, {"long_name": "states kept", "units": "states"})},
        coords={"score": list(scores), "ratio": np.asarray(ratios, float),
                "layer": np.arange(kept.shape[-1])},
    )
