"""QGPM experiments: one MLP through a permuted stream (sklearn digits) per variant and seed: fine-tuning (twice),
GPM at full precision, naive and QGPM bases at each bit width, QGPM with sketched SVDs, and GPM memory-matched to
8-bit QGPM; accuracy matrices, their metrics, basis memory, compute, and sketched-versus-exact subspaces."""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core import continual as C
from lab.core.runtime import threads
from lab.methods.qgpm.config import Config
from lab.methods.qgpm.model import outliers_per_tail
from lab.methods.qgpm.train import load_stream, memory_budget, random_baseline, run_variant, variants
from lab.results import Coord, Schema, Var

__all__ = ["run"]

METRICS = ("acc", "bwt", "fwt", "forgetting", "plasticity")

_PER_LAYER = ("seed", "variant", "after", "layer")
SCHEMA = Schema(
    Var("accuracy", ("seed", "variant", "after", "task"),
        "test accuracy on task j after training task i (the accuracy matrix R)", "%"),
    Var("memory_bytes", _PER_LAYER, "bytes of the packed bases after each task (inlier codes, scales, centres, λ, "
                                    "outlier values and positions)", "B"),
    Var("basis_rank", _PER_LAYER, "stored basis vectors after each task", "vectors"),
    Var("cos_error", _PER_LAYER, "mean 1 - cos(stored, exact) over the stored basis vectors"),
    Var("train_steps", ("seed", "variant"), "optimiser steps over the stream", "steps"),
    Var("train_time", ("seed", "variant"), "training wall time, memory updates included, evaluations excluded "
                                           "(cached runs: when trained)", "s"),
    Var("train_cpu_time", ("seed", "variant"), "training CPU time over the same spans", "s"),
    Var("from_cache", ("seed", "variant"), "1 where the run was read from the cache"),
    Var("random_baseline", ("seed", "task"), "accuracy of the untrained network (FWT's reference)", "%"),
    Var("sketch_similarity", ("seed", "after", "layer"),
        "mean cos² of the principal angles between the exact top-k bases of a task's representation and those of "
        "its CountSketch (GPM run; k by the layer's threshold)"),
    Var("random_similarity", ("seed", "after", "layer"),
        "the same between the exact bases and a random k-dimensional subspace"),
    Var("mm_budget", ("seed", "layer"), "basis vectors the memory-matched GPM may store per layer: 8-bit QGPM's "
                                        "final bytes in FP32 vectors", "vectors", dtype=int),
    Var("acc", ("seed", "variant"), "ACC: mean accuracy over the tasks after the last one", "%"),
    Var("bwt", ("seed", "variant"), "BWT: mean of R[T-1, j] - R[j, j] over the tasks but the last (negative: "
                                    "forgetting)", "%"),
    Var("fwt", ("seed", "variant"), "FWT: mean of R[j-1, j] minus the untrained network's accuracy on task j", "%"),
    Var("forgetting", ("seed", "variant"), "mean drop from a task's best accuracy to its final one", "%"),
    Var("plasticity", ("seed", "variant"), "mean accuracy on each task right after training it, R[j, j]", "%"),
    coords={"after": Coord("task just trained (i)"), "task": Coord("task tested (j)")},
)


def _run_variant(cfg: Config, stream, res, s: int, seed: int, i: int, v, names: list[str]) -> None:
    """Variant ``v`` (index ``i``) on seed ``s``: its accuracy matrix and metrics, basis memory and compute; for
    GPM the sketched-versus-exact subspaces, for the memory-matched GPM its per-layer budget."""
    budget = None
    if v.name == "gpm_mm":  # FP32 bases within 8-bit QGPM's final bytes, layer by layer
        budget = memory_budget(cfg, stream, res["memory_bytes"][s, names.index("qgpm8"), -1])
        res["mm_budget"][s] = budget
    out = run_variant(cfg, stream, v, seed, budget=budget)
    res["accuracy"][s, i] = out["R"]
    res["memory_bytes"][s, i], res["basis_rank"][s, i], res["cos_error"][s, i] = (out["bytes"], out["ranks"],
                                                                                  out["cos_error"])
    res["train_steps"][s, i], res["train_time"][s, i] = out["steps"], out["wall_s"]
    res["train_cpu_time"][s, i], res["from_cache"][s, i] = out["cpu_s"], out["loaded"]
    m = C.metrics(out["R"], res["random_baseline"][s])
    for name in METRICS:
        res[name][s, i] = getattr(m, name)
    if v.name == "gpm":
        res["sketch_similarity"][s], res["random_similarity"][s] = out["similarity"], out["random_similarity"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every variant on every seed and collect the accuracy matrices and memory.

    Returns:
        Dataset with dims seed, variant, after (the task just trained), task (the task tested), layer.
    """
    stream = load_stream(cfg)
    vs = variants(cfg)
    names = [v.name for v in vs]
    T = len(stream)
    schema = SCHEMA + Schema(coords={"variant": Coord("; ".join(f"{v.name}: {v.label}" for v in vs))})
    res = schema.new(seed=list(cfg.seeds), variant=names, after=np.arange(T), task=np.arange(T),
                     layer=np.arange(len(cfg.thresholds)))
    bar = tqdm(total=cfg.n_seeds * len(vs), desc="QGPM runs", disable=not progress)
    start = time.perf_counter()
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            res["random_baseline"][s] = random_baseline(cfg, stream, seed)
            for i, v in enumerate(vs):
                bar.set_description(f"{v.label} (seed {seed})")
                _run_variant(cfg, stream, res, s, seed, i, v, names)
                bar.update(1)
    bar.close()
    ds = res.build(attrs={
        "stream": stream.name, "n_tasks": T, "d_input": stream.d_input, "hidden": list(cfg.hidden),
        "layer_dims": [stream.d_input, *cfg.hidden], "thresholds": list(cfg.thresholds),
        "outliers_per_tail": [outliers_per_tail(d, cfg.outlier_share) for d in (stream.d_input, *cfg.hidden)],
        "claim_bits": cfg.claim_bits, "bit_widths": list(cfg.bits), "n_test": len(stream[0].y_test),
        "sketch_rows": cfg.sketch_rows, "n_repr": cfg.n_repr, "qea_alpha": cfg.qea_alpha,
        "outlier_share": cfg.outlier_share, "run_seconds": time.perf_counter() - start})
    return ds.assign_coords(label=("variant", [v.label for v in vs]),
                            bits=("variant", [v.bits for v in vs], {"long_name": "bits per stored basis entry",
                                                                    "units": "bit"}))
