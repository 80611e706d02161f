"""The fits: one model overfitted to one datum, on :func:`lab.core.train.fit` on ``cfg.device``, cached by
:func:`lab.cache.cached_model` (``<data>/ssm_inr/<datum>-<variant>-<key>.pt``, keyed by everything that
determines the weights), and its reconstruction quality: PSNR and SSIM (scikit-image) of the clamped reconstruction.
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

__all__ = ["FORMAT", "Fit", "build_for", "fit_one", "psnr", "ssim"]

#: bump when the models or the training change: old cached weights are then not reused
FORMAT = 3


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


def fit_one(cfg: Config, datum: str, variant: str, budget: int, seed: int, *, steps: int | None = None, root=None,
            use_cache: bool = True, callback=None) -> Fit:
    """Fit ``variant`` storing ``budget`` numbers to ``datum`` from ``seed`` (or load it from the cache).

    Arguments:
        steps: optimiser steps (default ``cfg.steps``; the whole schedule, warm-up and cosine decay, over them).
        callback: ``callback(step, total, loss)`` after every training step (a dashboard's progress).
    """
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

    trained = cached_model("ssm_inr", f"{datum}-{variant}", _key(cfg, datum, variant, budget, seed, steps), build,
                           train,
                           root=root, use_cache=use_cache)
    with torch.no_grad():
        recon = trained.model(x).clamp(0, 1).numpy()
    original = x.numpy()
    return Fit(trained.model, original, recon, psnr(original, recon), ssim(original, recon),
               M.n_params(trained.model), M.stored(trained.model, cfg.latent_values(datum)), trained.curves["loss"],
               float(trained.meta["seconds"]), trained.loaded)
