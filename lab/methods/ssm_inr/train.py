"""The fits: one model overfitted to one datum, on :func:`lab.core.train.fit` on ``cfg.device``, cached by
:func:`lab.cache.cached_model` (``<data>/ssm_inr/<datum>-<variant>-<key>.pt``, keyed by everything that
determines the weights), and its reconstruction quality: PSNR and SSIM (scikit-image) of the clamped reconstruction.
:func:`train_all` trains a run's missing fits side by side in worker processes (:mod:`lab.core.parallel`) before the
run reads them from the cache.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lab.cache import cached_model
from lab.core.train import fit, seed_everything
from lab.methods.ssm_inr import model as M
from lab.methods.ssm_inr.config import VARIANTS, Config
from lab.methods.ssm_inr.data import VIDEO, load

__all__ = ["FORMAT", "STEP_MS", "Fit", "FitSpec", "build_for", "fit_one", "psnr", "ssim", "train_all", "trained",
           "weights_path"]

#: bump when the models or the training change: old cached weights are then not reused
FORMAT = 3
#: CPU milliseconds of one training step per 4096 pixels (a 64 x 64 image), one thread, by encoder (measured on the
#: 2-core AMD EPYC at quick's sizes): the order in which :func:`train_all` starts its jobs, and whether a pool pays
STEP_MS = {"s3k": 10.0, "s3k_nodecay": 8.0, "conv": 8.0, "mamba": 14.0, "convnext": 9.0, "siren": 7.0}
#: estimated CPU seconds under which :func:`train_all` trains in this process: a worker's start (torch and the lab
#: imported afresh) costs about 4 s of CPU, more than a pool saves on a few short fits (ci)
SERIAL_BELOW_S = 20.0


@dataclass(frozen=True)
class FitSpec:
    """One fit of a run: ``variant`` storing ``budget`` numbers fitted to ``datum`` from ``seed`` for ``steps``
    optimiser steps."""

    datum: str
    variant: str
    budget: int
    seed: int
    steps: int


def psnr(x: np.ndarray, y: np.ndarray) -> float:
    """PSNR in dB of ``y`` against ``x``, both in [0, 1]: ``10 log10(1 / mean((x - y)²))``."""
    mse = float(np.mean((np.asarray(x, np.float64) - np.asarray(y, np.float64)) ** 2))
    return float(10 * np.log10(1.0 / max(mse, 1e-12)))


def ssim(x: np.ndarray, y: np.ndarray) -> float:
    """Mean SSIM over the frames of ``(frames, C, H, W)`` data in [0, 1] (scikit-image, data range 1)."""
    from skimage.metrics import structural_similarity

    return float(np.mean([structural_similarity(a, b, channel_axis=0, data_range=1.0) for a, b in zip(x, y)]))


@dataclass
class Fit:
    """One fitted representation.

    Attributes:
        model: the trained network (eval mode). original, reconstruction: ``(frames, 3, H, W)`` in [0, 1].
        psnr, ssim: quality of the reconstruction. params: the model's parameter count. stored: the numbers
        needed to reproduce the datum (LPNet: latent values + decoder parameters; SIREN: its parameters).
        loss: training MSE per step. seconds: training wall time (of the original fit when loaded).
        cached: loaded from the cache.
    """

    model: torch.nn.Module
    original: np.ndarray
    reconstruction: np.ndarray
    psnr: float
    ssim: float
    params: int
    stored: int
    loss: np.ndarray
    seconds: float
    cached: bool


def build_for(cfg: Config, datum: str, variant: str, budget: int) -> torch.nn.Module:
    """The variant's model storing about ``budget`` numbers for this config's datum shape (seed torch first)."""
    return M.build(variant, budget, channels=3, levels=cfg.levels, factor=cfg.factor, latent=cfg.latent_channels,
                   latent_values=cfg.latent_values(datum), enc_budget=cfg.enc_budget, d_state=cfg.d_state,
                   video=datum == VIDEO, omega=cfg.siren_omega)


def _key(cfg: Config, datum: str, variant: str, budget: int, seed: int, steps: int) -> dict:
    siren = VARIANTS[variant][0] == "siren"
    return {"format": FORMAT, "datum": datum, "size": cfg.size, "frames": cfg.frames if datum == VIDEO else 1,
            "variant": variant, "budget": budget, "seed": seed, "levels": cfg.levels, "factor": cfg.factor,
            "latent": cfg.latent_channels, "enc_budget": None if siren else cfg.enc_budget, "d_state": cfg.d_state,
            "steps": steps,
            "lr": cfg.siren_lr if siren else cfg.lr, "omega": cfg.siren_omega if siren else None}


def weights_path(cfg: Config, spec: FitSpec, root=None):
    """Where the weights of ``spec`` are cached (whether or not they exist)."""
    from lab.cache import state_path

    return state_path("ssm_inr", f"{spec.datum}-{spec.variant}",
                      _key(cfg, spec.datum, spec.variant, spec.budget, spec.seed, spec.steps), root=root)


def trained(cfg: Config, datum: str, variant: str, budget: int, seed: int, *, steps: int | None = None, root=None,
            use_cache: bool = True, callback=None):
    """The :class:`lab.cache.Trained` ``variant`` storing ``budget`` numbers fitted to ``datum`` from ``seed``: loaded
    from the cache, or trained now and cached (arguments as :func:`fit_one`)."""
    steps = cfg.steps if steps is None else steps
    x = torch.from_numpy(load(datum, cfg.size, cfg.frames))  # (frames, 3, H, W)
    siren = VARIANTS[variant][0] == "siren"

    def build():
        seed_everything(seed)
        return build_for(cfg, datum, variant, budget)

    def train(model):
        start = time.perf_counter()
        res = fit(model, lambda step: (x,), steps=steps, loss=lambda m, batch: F.mse_loss(m(batch[0]), batch[0]),
                  lr=cfg.siren_lr if siren else cfg.lr, warmup=0.05, clip=None, seed=seed, progress=False,
                  callback=callback, device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"seconds": time.perf_counter() - start}}

    return cached_model("ssm_inr", f"{datum}-{variant}", _key(cfg, datum, variant, budget, seed, steps), build,
                        train, root=root, use_cache=use_cache)


def fit_one(cfg: Config, datum: str, variant: str, budget: int, seed: int, *, steps: int | None = None, root=None,
            use_cache: bool = True, callback=None) -> Fit:
    """Fit ``variant`` storing ``budget`` numbers to ``datum`` from ``seed`` (or load it from the cache).

    Arguments:
        steps: optimiser steps (default ``cfg.steps``; the whole schedule, warm-up and cosine decay, over them).
        callback: ``callback(step, total, loss)`` after every training step (a dashboard's progress).
    """
    out = trained(cfg, datum, variant, budget, seed, steps=steps, root=root, use_cache=use_cache, callback=callback)
    x = torch.from_numpy(load(datum, cfg.size, cfg.frames))
    with torch.no_grad():
        recon = out.model(x).clamp(0, 1).numpy()
    original = x.numpy()
    return Fit(out.model, original, recon, psnr(original, recon), ssim(original, recon), M.n_params(out.model),
               M.stored(out.model, cfg.latent_values(datum)), out.curves["loss"], float(out.meta["seconds"]),
               out.loaded)


def _fit_job(cfg: Config, spec: FitSpec) -> dict:
    """One fit of :func:`train_all` (in a worker process): the weights go to the cache; returns their meta."""
    return trained(cfg, spec.datum, spec.variant, spec.budget, spec.seed, steps=spec.steps).meta


def train_all(cfg: Config, specs: list[FitSpec], progress: bool = True) -> list:
    """Train the fits of ``specs`` whose weights are not cached yet, side by side in worker processes
    (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores, ``cfg.threads`` threads each); :func:`fit_one`
    then loads each from the cache, the same weights bit for bit as a fit here (each fit seeds itself). Repeated
    specs train once. Below :data:`SERIAL_BELOW_S` estimated CPU seconds (ci) it trains here.

    Returns:
        the :class:`lab.core.parallel.JobResult` of each distinct spec, in the order of ``specs``.
    """
    from lab.core.parallel import Job, run_jobs

    jobs = []
    for spec in dict.fromkeys(specs):  # distinct, in order
        pixels = cfg.size ** 2 * (cfg.frames if spec.datum == VIDEO else 1)
        cost = spec.steps * STEP_MS[VARIANTS[spec.variant][0]] / 1000 * pixels / 4096
        jobs.append(Job(f"{spec.variant} {spec.datum} budget {spec.budget} seed {spec.seed} {spec.steps} steps",
                        _fit_job, (cfg, spec), cost=cost, cached=weights_path(cfg, spec).exists()))
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_S
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="ssm_inr fits")
