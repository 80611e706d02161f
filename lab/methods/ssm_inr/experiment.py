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
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: the seed-noise control: LPNet-Conv again from seed + this offset
SECOND_SEED = 1000
#: loss-curve points kept per fit
CURVE_POINTS = 50

_FIT = ("datum", "seed", "variant")
_RD = ("rd_variant", "rd_budget")
#: the images, stored as float32 (cast after the build: the schema allocates float64)
_IMAGES = ("original", "reconstruction")

SCHEMA = Schema(
    Var("psnr_thumbnail", ("datum",), "PSNR of the datum's thumbnail: area-averaged to the latent grid (size / "
        "factor per side) and upsampled bilinearly, no learning (the fits' competence bar)", "dB"),
    Var("psnr", _FIT, "PSNR of the reconstruction at the claim budget", "dB"),
    Var("ssim", _FIT, "mean SSIM over the frames (scikit-image)"),
    Var("train_time", _FIT, "training wall time of the fit (of the original fit when loaded from the cache)", "s"),
    Var("params", ("datum", "variant"), "trainable parameters (encoder + decoder; SIREN: the MLP)", "parameters",
        dtype=int),
    Var("stored", ("datum", "variant"), "numbers needed to reproduce the datum: decoder parameters + latent values "
        "(LPNet), the MLP's parameters (SIREN)", "numbers", dtype=int),
    Var("loss", (*_FIT, "point"), "training MSE"),
    Var("rd_psnr", _RD, "PSNR at each budget (first datum, first seed)", "dB"),
    Var("rd_ssim", _RD, "SSIM at each budget"),
    Var("rd_params", _RD, "trainable parameters at each budget", "parameters", dtype=int),
    Var("original", ("frame", "channel", "y", "x"), "the first datum ({first_datum})"),
    Var("reconstruction", ("variant", "frame", "channel", "y", "x"), "each variant's reconstruction of the first "
        "datum (first seed)"),
    coords={
        "variant": "model; lpnet_conv_b: LPNet-Conv from another seed",
        "rd_budget": Coord("parameter budget", "parameters"),
        "point": Coord("training step", "steps"),
    },
)


def thumbnail_psnr(cfg: Config, datum: str) -> float:
    """PSNR of the datum's thumbnail: each frame area-averaged to the latent grid (``size / factor`` per side, 3
    numbers per cell) and upsampled bilinearly. No learning, and (in every profile) fewer numbers than a model's
    parameters: a fit that does not beat it has not learned to represent its datum (the competence bar of the
    learned baselines and controls)."""
    x = torch.from_numpy(load(datum, cfg.size, cfg.frames))  # (frames, 3, H, W)
    small = F.adaptive_avg_pool2d(x, cfg.size // cfg.factor)
    up = F.interpolate(small, size=cfg.size, mode="bilinear", align_corners=False).clamp(0, 1)
    return psnr(x.numpy(), up.numpy())


def _fits(cfg: Config, res: Results, d: int, datum: str, bar) -> None:
    """Every variant (and the reseeded LPNet-Conv) fitted to one datum on every seed at the claim budget; the
    first datum's reconstructions of the first seed."""
    frames = cfg.frames if datum == VIDEO else 1
    latent = cfg.latent_channels * (cfg.size // cfg.factor) ** 2 * frames
    points = res.coord_values["point"]
    for s, seed in enumerate(cfg.seeds):
        for v, variant in enumerate(res.coord_values["variant"].tolist()):
            name = variant.removesuffix("_b")
            f = fit_one(cfg, datum, name, cfg.budget, seed + (SECOND_SEED if variant.endswith("_b") else 0))
            res["psnr"][d, s, v], res["ssim"][d, s, v], res["train_time"][d, s, v] = f.psnr, f.ssim, f.seconds
            res["loss"][d, s, v] = f.loss[points]
            res["params"][d, v] = f.params
            decoder = getattr(f.model, "decoder", None)
            res["stored"][d, v] = f.params if decoder is None else \
                sum(p.numel() for p in decoder.parameters()) + latent
            if d == 0 and s == 0:
                res["reconstruction"][v], res["original"] = f.reconstruction, f.original
            bar.update(1)


def _rate_distortion(cfg: Config, res: Results, datum: str, bar) -> None:
    """``cfg.rd_variants`` fitted at every budget of ``cfg.rd_budgets`` on ``datum`` and the first seed."""
    for r, variant in enumerate(cfg.rd_variants):
        for b, budget in enumerate(cfg.rd_budgets):
            f = fit_one(cfg, datum, variant, budget, cfg.seeds[0])
            res["rd_psnr"][r, b], res["rd_ssim"][r, b], res["rd_params"][r, b] = f.psnr, f.ssim, f.params
            bar.update(1)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Fit every variant to every datum and seed at ``cfg.budget`` parameters, plus ``lpnet_conv_b`` (LPNet-Conv
    from another seed), and ``cfg.rd_variants`` at every ``cfg.rd_budgets`` on the first datum and seed.

    Returns:
        Dataset with dims datum, seed, variant, rd_variant, rd_budget, point, frame, channel, y, x (and
        ``psnr_thumbnail`` per datum: the non-learned reference of the competence checks).
    """
    variants = [*VARIANTS, "lpnet_conv_b"]
    res = SCHEMA.new(datum=list(cfg.data), seed=list(cfg.seeds), variant=variants,
                     point=np.unique(np.linspace(0, cfg.steps - 1, min(CURVE_POINTS, cfg.steps)).astype(int)),
                     rd_variant=list(cfg.rd_variants), rd_budget=list(cfg.rd_budgets),
                     frame=cfg.frames if cfg.data[0] == VIDEO else 1, channel=3, y=cfg.size, x=cfg.size,
                     context={"first_datum": cfg.data[0]})
    total = len(cfg.data) * len(cfg.seeds) * len(variants) + len(cfg.rd_variants) * len(cfg.rd_budgets)
    bar = tqdm(total=total, desc="ssm_inr fits", disable=not progress)
    with threads(cfg.threads):
        for d, datum in enumerate(cfg.data):
            _fits(cfg, res, d, datum, bar)
            if d == 0:
                _rate_distortion(cfg, res, datum, bar)
    bar.close()
    res["psnr_thumbnail"] = [thumbnail_psnr(cfg, datum) for datum in cfg.data]
    ds = res.build(attrs={"budget": cfg.budget, "size": cfg.size, "levels": cfg.levels, "factor": cfg.factor,
                          "latent_channels": cfg.latent_channels, "steps": cfg.steps, "first_datum": cfg.data[0]})
    return ds.assign({name: ds[name].astype(np.float32) for name in _IMAGES})
