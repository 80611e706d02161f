"""DiffusionBlocks experiments: 2-D generation (end to end, blocks on the equal-mass and the uniform partition, a
second equal-mass run, one small network) scored by the energy distance; classification by denoising the label
embedding (blocks) against the same transformer trained end to end and a small one; the measured cost of one
training step of each."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.diffusion_blocks import model as M
from lab.methods.diffusion_blocks.config import Config
from lab.methods.diffusion_blocks.train import (
    CLS_MODELS,
    TOY_MODELS,
    classify,
    cls_run,
    load_tokens,
    measure_costs,
    sample_toy,
    toy_data,
    toy_run,
)

__all__ = ["run"]

#: points of the denoising-path plot
N_PATH = 600
#: the fresh data sets the samples are scored against come from seed + this offset
EVAL_OFFSET = 1_000_000


def _gaussian_energy(cfg: Config, seed: int, ref) -> float:
    """Energy distance to ``ref`` of ``n_eval`` points from one Gaussian with the mean and covariance of the seed's
    training points: what a generator that learned only the first two moments scores (the competence bar)."""
    train = toy_data(cfg.toy, cfg.toy_train, seed, cfg.sigma_data).double()  # (n, 2)
    mean, chol = train.mean(0), torch.linalg.cholesky(torch.cov(train.T))
    gen = torch.Generator().manual_seed(seed + 4 * EVAL_OFFSET)
    z = torch.randn(cfg.n_eval, 2, generator=gen, dtype=torch.float64)
    return M.energy_distance((mean + z @ chol.T).to(ref.dtype), ref)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every model for every seed (or load it from the cache), score it, measure one step's cost.

    Returns:
        Dataset with dims seed, toy_model, cls_model, partition, edge, stage, point, xy, task, variant (see each
        variable's long_name).
    """
    start_cpu = time.process_time()
    task = load_tokens(cfg)
    S, B = cfg.n_seeds, cfg.n_blocks
    energy, toy_cpu = np.full((S, len(TOY_MODELS)), np.nan), np.full((S, len(TOY_MODELS)), np.nan)
    accuracy, cls_cpu = np.full((S, len(CLS_MODELS)), np.nan), np.full((S, len(CLS_MODELS)), np.nan)
    floor, gaussian = np.full(S, np.nan), np.full(S, np.nan)
    n_path = min(N_PATH, cfg.n_eval)
    path = np.full((B + 1, n_path, 2), np.nan)
    final_e2e = np.full((n_path, 2), np.nan)
    bar = tqdm(total=S * (len(TOY_MODELS) + len(CLS_MODELS)), desc="DiffusionBlocks runs", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            ref = toy_data(cfg.toy, cfg.n_eval, seed + EVAL_OFFSET, cfg.sigma_data)
            floor[s] = M.energy_distance(toy_data(cfg.toy, cfg.n_eval, seed + 2 * EVAL_OFFSET, cfg.sigma_data), ref)
            gaussian[s] = _gaussian_energy(cfg, seed, ref)
            for m, kind in enumerate(TOY_MODELS):
                trained = toy_run(cfg, kind, seed)
                samples, states = sample_toy(cfg, trained.model, cfg.n_eval, seed)
                energy[s, m], toy_cpu[s, m] = M.energy_distance(samples, ref), trained.meta["cpu_s"]
                if s == 0 and kind == "blocks":
                    for b, z in states.items():
                        path[b + 1] = z[:n_path].numpy()
                if s == 0 and kind == "e2e":
                    final_e2e[:] = samples[:n_path].numpy()
                bar.update(1)
            for m, kind in enumerate(CLS_MODELS):
                trained = cls_run(cfg, task, kind, seed)
                pred = classify(cfg, trained.model, task.x_test, seed)
                accuracy[s, m] = 100.0 * float((pred == task.y_test).float().mean())
                cls_cpu[s, m] = trained.meta["cpu_s"]
                bar.update(1)
        costs = measure_costs(cfg, task)
    bar.close()
    tasks, variants = ("toy", "classify"), ("e2e", "block", "joint")
    saved = np.array([[costs[t][v][0] for v in variants] for t in tasks], float)
    grads = np.array([[costs[t][v][1] for v in variants] for t in tasks], float)
    edges = np.stack([M.partition(B, k, p_mean=cfg.p_mean, p_std=cfg.p_std, sigma_min=cfg.sigma_min,
                                  sigma_max=cfg.sigma_max) for k in M.PARTITIONS])
    data = toy_data(cfg.toy, n_path, cfg.seed + 3 * EVAL_OFFSET, cfg.sigma_data).numpy()
    return xr.Dataset(
        {
            "energy_distance": (("seed", "toy_model"), energy,
                                {"long_name": "energy distance between generated 2-D points and fresh data points",
                                 "units": "1"}),
            "energy_floor": (("seed",), floor, {"long_name": "energy distance between two fresh data samples of "
                                                             "the same size (the estimator's noise)", "units": "1"}),
            "gaussian_energy": (("seed",), gaussian,
                                {"long_name": "energy distance to the same fresh data of one Gaussian with the "
                                              "training points' mean and covariance (the generators' competence bar)",
                                 "units": "1"}),
            "toy_train_cpu": (("seed", "toy_model"), toy_cpu,
                              {"long_name": "CPU time of training (as measured when trained, cached runs included)",
                               "units": "s"}),
            "accuracy": (("seed", "cls_model"), accuracy, {"long_name": "test accuracy", "units": "%"}),
            "cls_train_cpu": (("seed", "cls_model"), cls_cpu,
                              {"long_name": "CPU time of training (as measured when trained)", "units": "s"}),
            "saved_bytes": (("task", "variant"), saved,
                            {"long_name": "bytes autograd saves for the backward pass in one training step "
                                          "(measured with saved_tensors_hooks, parameters excluded)",
                             "units": "bytes"}),
            "grad_params": (("task", "variant"), grads,
                            {"long_name": "parameters that receive a gradient in one training step (measured)",
                             "units": "parameters"}),
            "edges": (("partition", "edge"), edges,
                      {"long_name": "edges of the blocks' noise ranges, descending", "units": "σ"}),
            "path": (("stage", "point", "xy"), path,
                     {"long_name": "2-D points along Euler sampling through the blocks (equal mass, first seed): "
                                   "the start σ_max ε, then after each block's last step", "units": "1"}),
            "e2e_samples": (("point", "xy"), final_e2e,
                            {"long_name": "2-D points generated by the end-to-end denoiser (first seed)",
                             "units": "1"}),
            "data": (("point", "xy"), data, {"long_name": "2-D data points", "units": "1"}),
        },
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "toy_model": ("toy_model", list(TOY_MODELS),
                          {"long_name": "end to end (L layers); blocks on the equal-mass partition; blocks on the "
                                        "partition uniform in ln σ; blocks again from another seed; one L/B-layer "
                                        "network over the whole range"}),
            "cls_model": ("cls_model", list(CLS_MODELS),
                          {"long_name": "L-layer transformer, cross-entropy; B blocks denoising the label "
                                        "embedding; L/B-layer transformer, cross-entropy"}),
            "partition": ("partition", list(M.PARTITIONS)),
            "edge": ("edge", np.arange(B + 1)),
            "stage": ("stage", ["start"] + [f"after block {b + 1}" for b in range(B)]),
            "point": ("point", np.arange(n_path)),
            "xy": ("xy", ["x", "y"]),
            "task": ("task", list(tasks)),
            "variant": ("variant", list(variants),
                        {"long_name": "the L-layer network end to end; one block (the largest); every block's "
                                      "loss in one step"}),
        },
        attrs={"toy": cfg.toy, "dataset": cfg.dataset, "n_blocks": B, "n_layers": cfg.n_layers,
               "p_mean": cfg.p_mean, "p_std": cfg.p_std, "sigma_min": cfg.sigma_min, "sigma_max": cfg.sigma_max,
               "n_eval": cfg.n_eval, "n_test": len(task.x_test), "n_classes": task.n_classes,
               "run_cpu_time_s": time.process_time() - start_cpu},
    )
