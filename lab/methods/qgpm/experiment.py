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
from lab.methods.qgpm.train import load_stream, memory_budget, random_baseline, run_variant, variants

__all__ = ["run"]

METRICS = ("acc", "bwt", "fwt", "forgetting", "plasticity")


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every variant on every seed and collect the accuracy matrices and memory.

    Returns:
        Dataset with dims seed, variant, after (the task just trained), task (the task tested), layer.
    """
    stream = load_stream(cfg)
    vs = variants(cfg)
    S, V, T, L = cfg.n_seeds, len(vs), len(stream), len(cfg.thresholds)
    R = np.full((S, V, T, T), np.nan)
    nbytes, ranks, cos_err = (np.zeros((S, V, T, L)) for _ in range(3))
    steps, wall, cpu, loaded = (np.zeros((S, V)) for _ in range(4))
    mets = np.full((S, V, len(METRICS)), np.nan)
    base = np.zeros((S, T))
    sim, rsim = np.full((S, T, L), np.nan), np.full((S, T, L), np.nan)
    caps = np.zeros((S, L), np.int64)
    names = [v.name for v in vs]
    bar = tqdm(total=S * V, desc="QGPM runs", disable=not progress)
    start = time.perf_counter()
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            base[s] = random_baseline(cfg, stream, seed)
            for i, v in enumerate(vs):
                budget = None
                if v.name == "gpm_mm":  # FP32 bases within 8-bit QGPM's final bytes, layer by layer
                    budget = memory_budget(cfg, stream, nbytes[s, names.index("qgpm8"), -1])
                    caps[s] = budget
                bar.set_description(f"{v.label} (seed {seed})")
                out = run_variant(cfg, stream, v, seed, budget=budget)
                R[s, i] = out["R"]
                nbytes[s, i], ranks[s, i], cos_err[s, i] = out["bytes"], out["ranks"], out["cos_error"]
                steps[s, i], wall[s, i], cpu[s, i], loaded[s, i] = out["steps"], out["wall_s"], out["cpu_s"], \
                    out["loaded"]
                m = C.metrics(out["R"], base[s])
                mets[s, i] = [getattr(m, k) for k in METRICS]
                if v.name == "gpm":
                    sim[s], rsim[s] = out["similarity"], out["random_similarity"]
                bar.update(1)
    bar.close()
    metric_doc = {"acc": "ACC: mean accuracy over the tasks after the last one",
                  "bwt": "BWT: mean of R[T-1, j] - R[j, j] over the tasks but the last (negative: forgetting)",
                  "fwt": "FWT: mean of R[j-1, j] minus the untrained network's accuracy on task j",
                  "forgetting": "mean drop from a task's best accuracy to its final one",
                  "plasticity": "mean accuracy on each task right after training it, R[j, j]"}
    data = {
        "accuracy": (("seed", "variant", "after", "task"), R,
                     {"long_name": "test accuracy on task j after training task i (the accuracy matrix R)",
                      "units": "%"}),
        "memory_bytes": (("seed", "variant", "after", "layer"), nbytes,
                         {"long_name": "bytes of the stored bases after each task (codes, scales, centres, λ, "
                                       "outlier values and positions)", "units": "B"}),
        "basis_rank": (("seed", "variant", "after", "layer"), ranks,
                       {"long_name": "stored basis vectors after each task", "units": "vectors"}),
        "cos_error": (("seed", "variant", "after", "layer"), cos_err,
                      {"long_name": "mean 1 - cos(stored, exact) over the stored basis vectors", "units": "1"}),
        "train_steps": (("seed", "variant"), steps, {"long_name": "optimiser steps over the stream",
                                                    "units": "steps"}),
        "train_time": (("seed", "variant"), wall, {"long_name": "training wall time, memory updates included, "
                                                               "evaluations excluded (cached runs: when trained)",
                                                  "units": "s"}),
        "train_cpu_time": (("seed", "variant"), cpu, {"long_name": "training CPU time over the same spans",
                                                      "units": "s"}),
        "from_cache": (("seed", "variant"), loaded, {"long_name": "1 where the run was read from the cache",
                                                    "units": "1"}),
        "random_baseline": (("seed", "task"), base, {"long_name": "accuracy of the untrained network (FWT's "
                                                                  "reference)", "units": "%"}),
        "sketch_similarity": (("seed", "after", "layer"), sim,
                              {"long_name": "mean cos² of the principal angles between the exact top-k bases of a "
                                            "task's representation and those of its CountSketch (GPM run; k by "
                                            "the layer's threshold)", "units": "1"}),
        "random_similarity": (("seed", "after", "layer"), rsim,
                              {"long_name": "the same between the exact bases and a random k-dimensional subspace",
                               "units": "1"}),
        "mm_budget": (("seed", "layer"), caps, {"long_name": "basis vectors the memory-matched GPM may store per "
                                                             "layer: 8-bit QGPM's final bytes in FP32 vectors",
                                                "units": "vectors"}),
    }
    for k, name in enumerate(METRICS):
        data[name] = (("seed", "variant"), mets[:, :, k], {"long_name": metric_doc[name], "units": "%"})
    return xr.Dataset(
        data,
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "variant": ("variant", names, {"long_name": "; ".join(f"{v.name}: {v.label}" for v in vs)}),
            "label": ("variant", [v.label for v in vs]),
            "bits": ("variant", [v.bits for v in vs], {"long_name": "bits per stored basis entry", "units": "bit"}),
            "after": ("after", np.arange(T), {"long_name": "task just trained (i)"}),
            "task": ("task", np.arange(T), {"long_name": "task tested (j)"}),
            "layer": ("layer", np.arange(L)),
        },
        attrs={"stream": stream.name, "n_tasks": T, "d_input": stream.d_input, "hidden": list(cfg.hidden),
               "claim_bits": cfg.claim_bits,
               "bit_widths": list(cfg.bits), "n_test": len(stream[0].y_test), "sketch_rows": cfg.sketch_rows,
               "n_repr": cfg.n_repr, "qea_alpha": cfg.qea_alpha, "outlier_share": cfg.outlier_share,
               "run_seconds": time.perf_counter() - start},
    )
