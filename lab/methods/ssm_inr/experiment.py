"""SSM neural representations: every variant fitted to every datum and seed at the claim budget of stored numbers
(LPNet-S3K without its decays, ``lpnet_s3k_nodecay``, is the control), the PSNR of the headline's variants against
the number of training steps (is the run measuring capacity or optimisation speed?), and the rate-distortion curve
of some variants over the budgets."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.ssm_inr.config import VARIANTS, Config
from lab.methods.ssm_inr.data import VIDEO, load
from lab.methods.ssm_inr.train import FitSpec, fit_one, psnr, train_all
from lab.results import Coord, Results, Schema, Var

__all__ = ["CURVE_FRACTIONS", "CURVE_VARIANTS", "SCHEMA", "planned_fits", "run", "step_budgets",
           "thumbnail_psnr"]

#: the variants of the steps curve: the headline's S3K, its control and every encoder it is compared with
CURVE_VARIANTS = ("lpnet_s3k", "lpnet_s3k_nodecay", "lpnet_conv", "lpnet_mamba", "convnext")
#: the steps curve's training lengths, as fractions of cfg.steps (each a whole schedule of its own)
CURVE_FRACTIONS = (0.25, 0.5, 1.0)
#: loss-curve points kept per fit
CURVE_POINTS = 50

_FIT = ("datum", "seed", "variant")
_RD = ("rd_variant", "rd_budget")
_CURVE = ("curve_variant", "step_budget")
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
    Var("enc_params", ("datum", "variant"), "parameters of the encoder (LPNet; SIREN has none: 0)", "parameters",
        dtype=int),
    Var("stored", ("datum", "variant"), "numbers needed to reproduce the datum: decoder parameters + latent values "
        "(LPNet), the MLP's parameters (SIREN)", "numbers", dtype=int),
    Var("loss", (*_FIT, "point"), "training MSE"),
    Var("steps_psnr", _CURVE, "PSNR after a whole training schedule of that many steps (first datum, first seed)",
        "dB"),
    Var("rd_psnr", _RD, "PSNR at each budget (first datum, first seed)", "dB"),
    Var("rd_ssim", _RD, "SSIM at each budget"),
    Var("rd_params", _RD, "trainable parameters at each budget", "parameters", dtype=int),
    Var("rd_stored", _RD, "numbers stored at each budget (latent values + decoder; SIREN: the MLP)", "numbers",
        dtype=int),
    Var("original", ("frame", "channel", "y", "x"), "the first datum ({first_datum})"),
    Var("reconstruction", ("variant", "frame", "channel", "y", "x"), "each variant's reconstruction of the first "
        "datum (first seed)"),
    coords={
        "variant": "model; lpnet_s3k_nodecay: LPNet-S3K with every decay at 1 (no state-space structure)",
        "rd_budget": Coord("budget of stored numbers", "numbers"),
        "step_budget": Coord("training steps of the fit", "steps"),
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


def step_budgets(cfg: Config) -> list[int]:
    """The steps curve's training lengths: :data:`CURVE_FRACTIONS` of ``cfg.steps`` (distinct, at least 1)."""
    return sorted({max(1, round(f * cfg.steps)) for f in CURVE_FRACTIONS})


def planned_fits(cfg: Config) -> list[FitSpec]:
    """Every fit :func:`run` reads, in its order: each datum x seed x variant at ``cfg.budget``, the steps curve
    (first datum and seed) and the rate-distortion curve (first datum and seed); a fit read twice (the steps curve's
    longest point is the main fit) is listed twice."""
    seed, first = cfg.seeds[0], cfg.data[0]
    specs = [FitSpec(datum, v, cfg.budget, s, cfg.steps) for datum in cfg.data for s in cfg.seeds for v in VARIANTS]
    specs += [FitSpec(first, v, cfg.budget, seed, n) for v in CURVE_VARIANTS for n in step_budgets(cfg)]
    return specs + [FitSpec(first, v, b, seed, cfg.steps) for v in cfg.rd_variants for b in cfg.rd_budgets]


def _fits(cfg: Config, res: Results, d: int, datum: str, bar) -> None:
    """Every variant fitted to one datum on every seed at the claim budget; the first datum's reconstructions of
    the first seed."""
    points = res.coord_values["point"]
    for s, seed in enumerate(cfg.seeds):
        for v, variant in enumerate(res.coord_values["variant"].tolist()):
            f = fit_one(cfg, datum, variant, cfg.budget, seed)
            res["psnr"][d, s, v], res["ssim"][d, s, v], res["train_time"][d, s, v] = f.psnr, f.ssim, f.seconds
            res["loss"][d, s, v] = f.loss[points]
            res["params"][d, v], res["stored"][d, v] = f.params, f.stored
            res["enc_params"][d, v] = getattr(f.model, "encoder_params", lambda: 0)()
            if d == 0 and s == 0:
                res["reconstruction"][v], res["original"] = f.reconstruction, f.original
            bar.update(1)


def _steps_curve(cfg: Config, res: Results, datum: str, bar) -> None:
    """The curve variants refitted with shorter schedules (first datum, first seed; the longest is the main fit)."""
    for c, variant in enumerate(CURVE_VARIANTS):
        for b, steps in enumerate(res.coord_values["step_budget"].tolist()):
            res["steps_psnr"][c, b] = fit_one(cfg, datum, variant, cfg.budget, cfg.seeds[0], steps=int(steps)).psnr
            bar.update(1)


def _rate_distortion(cfg: Config, res: Results, datum: str, bar) -> None:
    """``cfg.rd_variants`` fitted at every budget of ``cfg.rd_budgets`` on ``datum`` and the first seed."""
    for r, variant in enumerate(cfg.rd_variants):
        for b, budget in enumerate(cfg.rd_budgets):
            f = fit_one(cfg, datum, variant, budget, cfg.seeds[0])
            res["rd_psnr"][r, b], res["rd_ssim"][r, b] = f.psnr, f.ssim
            res["rd_params"][r, b], res["rd_stored"][r, b] = f.params, f.stored
            bar.update(1)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Fit every variant to every datum and seed storing ``cfg.budget`` numbers, the curve variants with a quarter
    and a half of ``cfg.steps``, and ``cfg.rd_variants`` at every ``cfg.rd_budgets`` (first datum and seed).

    Returns:
        Dataset with dims datum, seed, variant, curve_variant, step_budget, rd_variant, rd_budget, point, frame,
        channel, y, x (and ``psnr_thumbnail`` per datum: the non-learned reference of the competence checks).
    """
    variants = list(VARIANTS)
    budgets = step_budgets(cfg)
    res = SCHEMA.new(datum=list(cfg.data), seed=list(cfg.seeds), variant=variants,
                     curve_variant=list(CURVE_VARIANTS), step_budget=budgets,
                     point=np.unique(np.linspace(0, cfg.steps - 1, min(CURVE_POINTS, cfg.steps)).astype(int)),
                     rd_variant=list(cfg.rd_variants), rd_budget=list(cfg.rd_budgets),
                     frame=cfg.frames if cfg.data[0] == VIDEO else 1, channel=3, y=cfg.size, x=cfg.size,
                     context={"first_datum": cfg.data[0]})
    total = len(cfg.data) * len(cfg.seeds) * len(variants) + len(cfg.rd_variants) * len(cfg.rd_budgets) + \
        len(CURVE_VARIANTS) * len(budgets)
    with threads(cfg.threads):  # a serial train_all (one worker, ci) trains here, with the run's threads
        train_all(cfg, planned_fits(cfg), progress=progress)  # the missing fits side by side, into the cache
        bar = tqdm(total=total, desc="ssm_inr evaluations", disable=not progress)
        for d, datum in enumerate(cfg.data):
            _fits(cfg, res, d, datum, bar)
            if d == 0:
                _steps_curve(cfg, res, datum, bar)
                _rate_distortion(cfg, res, datum, bar)
    bar.close()
    res["psnr_thumbnail"] = [thumbnail_psnr(cfg, datum) for datum in cfg.data]
    ds = res.build(attrs={"budget": cfg.budget, "enc_budget": cfg.enc_budget, "size": cfg.size, "levels": cfg.levels,
                          "factor": cfg.factor,
                          "latent_channels": cfg.latent_channels, "steps": cfg.steps, "first_datum": cfg.data[0]})
    return ds.assign({name: ds[name].astype(np.float32) for name in _IMAGES})
