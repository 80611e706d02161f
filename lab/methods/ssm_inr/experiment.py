"""SSM neural representations: every variant fitted to every datum at the claim budget (LPNet-Conv twice, the second
from another seed: the seed-noise control), and the rate-distortion curve of some variants over the budgets."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.ssm_inr.config import VARIANTS, Config
from lab.methods.ssm_inr.data import VIDEO, load
from lab.methods.ssm_inr.train import fit_one, psnr

__all__ = ["run"]

#: the seed-noise control: LPNet-Conv again from seed + this offset
SECOND_SEED = 1000
#: loss-curve points kept per fit
CURVE_POINTS = 50


def thumbnail_psnr(cfg: Config, datum: str) -> float:
    """PSNR of the datum's thumbnail: each frame area-averaged to the latent grid (``size / factor`` per side, 3
    numbers per cell) and upsampled bilinearly. No learning, and (in every profile) fewer numbers than a model's
    parameters: a fit that does not beat it has not learned to represent its datum (the competence bar of the
    learned baselines and controls)."""
    x = torch.from_numpy(load(datum, cfg.size, cfg.frames))  # (frames, 3, H, W)
    small = F.adaptive_avg_pool2d(x, cfg.size // cfg.factor)
    up = F.interpolate(small, size=cfg.size, mode="bilinear", align_corners=False).clamp(0, 1)
    return psnr(x.numpy(), up.numpy())


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Fit every variant to every datum and seed at ``cfg.budget`` parameters, plus ``lpnet_conv_b`` (LPNet-Conv
    from another seed), and ``cfg.rd_variants`` at every ``cfg.rd_budgets`` on the first datum and seed.

    Returns:
        Dataset with dims datum, seed, variant, rd_variant, rd_budget, point, frame, channel, y, x (and
        ``psnr_thumbnail`` per datum: the non-learned reference of the competence checks).
    """
    variants = [*VARIANTS, "lpnet_conv_b"]
    D, S, V = len(cfg.data), len(cfg.seeds), len(variants)
    psnr, ssim, seconds = (np.full((D, S, V), np.nan) for _ in range(3))
    params, stored = np.zeros((D, V), np.int64), np.zeros((D, V), np.int64)
    points = np.unique(np.linspace(0, cfg.steps - 1, min(CURVE_POINTS, cfg.steps)).astype(int))
    curves = np.full((D, S, V, len(points)), np.nan)
    first_frames = cfg.frames if cfg.data[0] == VIDEO else 1
    recon = np.zeros((V, first_frames, 3, cfg.size, cfg.size), np.float32)
    original = None
    R, B = len(cfg.rd_variants), len(cfg.rd_budgets)
    rd_psnr, rd_ssim, rd_params = np.full((R, B), np.nan), np.full((R, B), np.nan), np.zeros((R, B), np.int64)
    total = D * S * V + R * B
    bar = tqdm(total=total, desc="ssm_inr fits", disable=not progress)
    with threads(cfg.threads):
        for d, datum in enumerate(cfg.data):
            frames = cfg.frames if datum == VIDEO else 1
            latent = cfg.latent_channels * (cfg.size // cfg.factor) ** 2 * frames
            for s, seed in enumerate(cfg.seeds):
                for v, variant in enumerate(variants):
                    name = variant.removesuffix("_b")
                    f = fit_one(cfg, datum, name, cfg.budget, seed + (SECOND_SEED if variant.endswith("_b") else 0))
                    psnr[d, s, v], ssim[d, s, v], seconds[d, s, v] = f.psnr, f.ssim, f.seconds
                    curves[d, s, v] = f.loss[points]
                    params[d, v] = f.params
                    decoder = getattr(f.model, "decoder", None)
                    stored[d, v] = f.params if decoder is None else \
                        sum(p.numel() for p in decoder.parameters()) + latent
                    if d == 0 and s == 0:
                        recon[v], original = f.reconstruction, f.original
                    bar.update(1)
            if d == 0:
                for r, variant in enumerate(cfg.rd_variants):
                    for b, budget in enumerate(cfg.rd_budgets):
                        f = fit_one(cfg, datum, variant, budget, cfg.seeds[0])
                        rd_psnr[r, b], rd_ssim[r, b], rd_params[r, b] = f.psnr, f.ssim, f.params
                        bar.update(1)
    bar.close()
    thumbnail = np.array([thumbnail_psnr(cfg, datum) for datum in cfg.data])
    dims = ("datum", "seed", "variant")
    return xr.Dataset(
        {
            "psnr_thumbnail": (("datum",), thumbnail,
                               {"long_name": "PSNR of the datum's thumbnail: area-averaged to the latent grid "
                                             "(size / factor per side) and upsampled bilinearly, no learning (the "
                                             "fits' competence bar)", "units": "dB"}),
            "psnr": (dims, psnr, {"long_name": "PSNR of the reconstruction at the claim budget", "units": "dB"}),
            "ssim": (dims, ssim, {"long_name": "mean SSIM over the frames (scikit-image)", "units": "1"}),
            "train_time": (dims, seconds, {"long_name": "training wall time of the fit (of the original fit when "
                                                        "loaded from the cache)", "units": "s"}),
            "params": (("datum", "variant"), params, {"long_name": "trainable parameters (encoder + decoder; "
                                                                   "SIREN: the MLP)", "units": "parameters"}),
            "stored": (("datum", "variant"), stored,
                       {"long_name": "numbers needed to reproduce the datum: decoder parameters + latent values "
                                     "(LPNet), the MLP's parameters (SIREN)", "units": "numbers"}),
            "loss": ((*dims, "point"), curves, {"long_name": "training MSE", "units": "1"}),
            "rd_psnr": (("rd_variant", "rd_budget"), rd_psnr,
                        {"long_name": "PSNR at each budget (first datum, first seed)", "units": "dB"}),
            "rd_ssim": (("rd_variant", "rd_budget"), rd_ssim, {"long_name": "SSIM at each budget", "units": "1"}),
            "rd_params": (("rd_variant", "rd_budget"), rd_params,
                          {"long_name": "trainable parameters at each budget", "units": "parameters"}),
            "original": (("frame", "channel", "y", "x"), original,
                         {"long_name": f"the first datum ({cfg.data[0]})", "units": "1"}),
            "reconstruction": (("variant", "frame", "channel", "y", "x"), recon,
                               {"long_name": "each variant's reconstruction of the first datum (first seed)",
                                "units": "1"}),
        },
        coords={
            "datum": ("datum", list(cfg.data)),
            "seed": ("seed", list(cfg.seeds)),
            "variant": ("variant", variants, {"long_name": "model; lpnet_conv_b: LPNet-Conv from another seed"}),
            "rd_variant": ("rd_variant", list(cfg.rd_variants)),
            "rd_budget": ("rd_budget", list(cfg.rd_budgets), {"long_name": "parameter budget",
                                                               "units": "parameters"}),
            "point": ("point", points, {"long_name": "training step", "units": "steps"}),
        },
        attrs={"budget": cfg.budget, "size": cfg.size, "levels": cfg.levels, "factor": cfg.factor,
               "latent_channels": cfg.latent_channels, "steps": cfg.steps, "first_datum": cfg.data[0]},
    )
