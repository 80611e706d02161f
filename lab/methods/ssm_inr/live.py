"""What the ``compact_models`` dashboard (and a notebook) calls besides ``run``: one fitted representation and what it
shows, and PSNR against size per encoder. Fits are cached on disk by :mod:`.train` (``<data>/ssm_inr/``) and in
memory here (:func:`lab.cache.memo`); ``profile`` picks the datum's size and the training (``ci``: seconds, ``quick``:
the notebook's settings).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from lab.cache import memo
from lab.checks import bad_value, check_choice
from lab.core.runtime import threads
from lab.methods.ssm_inr import model as M
from lab.methods.ssm_inr.config import VARIANTS, Config
from lab.methods.ssm_inr.data import DATA, load
from lab.methods.ssm_inr.train import Fit, fit_one

__all__ = ["DATA", "SHOWN", "config", "explore", "fitted", "prepare", "rd_rows"]

#: the encoders the dashboard offers
SHOWN = ("lpnet_s3k", "lpnet_conv", "lpnet_mamba", "convnext", "siren", "s3k_flat")


def config(profile: str) -> Config:
    """The Config of a profile (``ci``, ``quick``, ``full``)."""
    return Config.from_profile(profile)


def _check(datum: str, variant: str, budget: int, cfg: Config) -> None:
    check_choice("datum", datum, DATA)
    check_choice("encoder", variant, tuple(VARIANTS))
    if budget not in cfg.rd_budgets and budget != cfg.budget:
        raise bad_value("budget", budget, f"one of {cfg.rd_budgets} or {cfg.budget}")


@memo(maxsize=64)
def fitted(datum: str, variant: str, budget: int, profile: str = "quick", seed: int = 0,
           root: str | None = None) -> Fit:
    """``variant`` fitted to ``datum`` storing ``budget`` numbers (from memory, from disk, or fitted now)."""
    cfg = config(profile)
    _check(datum, variant, budget, cfg)
    with threads(cfg.threads):
        return fit_one(cfg, datum, variant, int(budget), seed, root=root)


def prepare(datum: str, profile: str = "quick", variants=SHOWN, report: Callable[..., None] | None = None,
            root: str | None = None) -> None:
    """Fit every variant in ``variants`` at every budget of the profile to ``datum`` (``report(done, total=...)``
    after each fit)."""
    cfg = config(profile)
    jobs = [(v, b) for b in cfg.rd_budgets for v in variants]
    for i, (v, b) in enumerate(jobs):
        fitted(datum, v, b, profile, 0, root)
        if report is not None:
            report(i + 1, total=len(jobs))


def prepared(datum: str, profile: str = "quick", variants=SHOWN, root: str | None = None) -> bool:
    """Whether every fit :func:`prepare` makes is in memory already."""
    cfg = config(profile)
    return all(fitted.cached(datum, v, b, profile, 0, root) for b in cfg.rd_budgets for v in variants)


@memo(maxsize=64)
def explore(datum: str, variant: str, budget: int, profile: str = "quick", frame: int = 0,
            root: str | None = None) -> dict:
    """One representation's view.

    Returns:
        dict with ``original``, ``reconstruction`` ``(3, H, W)`` of ``frame``, ``pyramid`` (the Laplacian levels
        of the original, ``[(3, H / 2^i, W / 2^i), ...]``, the last the low-pass), ``psnr``, ``ssim`` (whole datum),
        ``params``, ``stored``, ``frames``.
    """
    f = fitted(datum, variant, budget, profile, 0, root)
    cfg = config(profile)
    frames = f.original.shape[0]
    if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < frames:
        raise bad_value("frame", frame, f"an integer in [0, {frames - 1}]")
    x = torch.from_numpy(load(datum, cfg.size, cfg.frames))[frame: frame + 1]
    levels = [lv[0].numpy() for lv in M.laplacian_pyramid(x, cfg.levels)]
    return {"original": f.original[frame], "reconstruction": f.reconstruction[frame], "pyramid": levels,
            "psnr": f.psnr, "ssim": f.ssim, "params": f.params, "stored": f.stored,
            "frames": frames}


def rd_rows(datum: str, profile: str = "quick", variants=SHOWN, root: str | None = None) -> dict:
    """PSNR against stored numbers per variant over the profile's budgets: ``{variant: (stored, psnr)}``."""
    cfg = config(profile)
    out = {}
    for v in variants:
        fits = [fitted(datum, v, b, profile, 0, root) for b in cfg.rd_budgets]
        out[v] = (np.array([f.stored for f in fits]), np.array([f.psnr for f in fits]))
    return out
