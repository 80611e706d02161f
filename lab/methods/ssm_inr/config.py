"""Configuration of the SSM neural-representation experiments (LPNet-S3K and its baselines, one datum per fit)."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, ClassVar

from lab.budget import Budget as RunBudget
from lab.budget import train_bytes, train_ops
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.runtime import RuntimeConfig
from lab.methods.ssm_inr.data import DATA, max_size

ENCODERS = ("s3k", "conv", "mamba", "convnext", "siren")
#: what an LPNet encoder reads: the Laplacian pyramid (LPNet), the Gaussian image pyramid (the paper's ablation),
#: or the datum alone (no pyramid)
INPUTS = ("laplacian", "gaussian", "none")
#: variant -> (encoder, input, stacked S3K layers)
VARIANTS = {
    "lpnet_s3k": ("s3k", "laplacian", 1),
    "lpnet_conv": ("conv", "laplacian", 1),
    "lpnet_mamba": ("mamba", "laplacian", 1),
    "s3k_flat": ("s3k", "none", 1),
    "s3k_image_pyramid": ("s3k", "gaussian", 1),
    "s3k_stacked": ("s3k", "none", 2),
    "mamba_flat": ("mamba", "none", 1),
    "mamba_image_pyramid": ("mamba", "gaussian", 1),
    "convnext": ("convnext", "none", 1),
    "siren": ("siren", "none", 0),
}


Budget = Annotated[int, Range(500, 10_000_000)]


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """LPNet-S3K against LPNet-Conv, LPNet-Mamba, ConvNeXt and SIREN at equal parameter counts (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(data=("camera", "shapes_video"), size=32, frames=2, budget=1500, rd_budgets=(1500, 2500),
                   steps=12),
        "quick": {},
        "full": dict(data=("camera", "astronaut", "coffee", "chelsea", "rocket", "shapes_video"), size=128,
                     frames=8, factor=16, levels=4, latent_channels=48, budget=12_000,
                     rd_budgets=(6000, 12_000, 24_000, 48_000), steps=3000, n_seeds=3,
                     rd_variants=("lpnet_s3k", "lpnet_conv", "lpnet_mamba", "convnext", "siren")),
    }

    data: Annotated[tuple[str, ...], Choices(*DATA), Each(unique=True)] = ("astronaut", "coffee", "chelsea")
    """Data to represent, one network per datum: skimage.data images (the central square, resized) or
    'shapes_video', a synthetic video of moving shapes. The claims average over data and seeds."""
    size: Annotated[int, Range(16, 512)] = 64
    """Side of the (square) datum in pixels; a multiple of factor, at most the datum's own short side."""
    frames: Annotated[int, Range(2, 64)] = 4
    """Frames of the synthetic video (the LPNet models code each frame; SIREN reads (t, y, x))."""
    factor: Annotated[int, Choices(2, 4, 8, 16, 32)] = 8
    """Downsampling F of the encoders: the latent grid is (size / F)²; one S3K kernel of stride F / 2^i codes
    pyramid level i."""
    levels: Annotated[int, Range(1, 6)] = 3
    """Levels of the Laplacian pyramid (the last is the low-pass image); at most log2(factor) + 1."""
    latent_channels: Annotated[int, Range(1, 1024)] = 24
    """Latent channels per grid cell in all (split over the pyramid's levels): the same latent size for every
    LPNet variant."""
    budget: Budget = 3000
    """Parameters of every model in the claims (encoder + decoder; SIREN: the whole MLP), matched within ~10%;
    below the datum's own size (64 x 64 x 3 = 12288 values), so that the network compresses it."""
    rd_budgets: Annotated[tuple[int, ...], Range(500, 10_000_000), Each(increasing=True)] = (1500, 3000, 6000)
    """Parameter budgets of the rate-distortion curve (first datum, first seed)."""
    rd_variants: Annotated[tuple[str, ...], Choices(*VARIANTS), Each(unique=True)] = ("lpnet_s3k", "lpnet_conv",
                                                                                       "siren")
    """Variants fitted at every rd_budget."""
    dec_share: Annotated[float, Range(0.05, 0.95)] = 0.5
    """Share of the budget the (common) decoder may take; the encoder's width fills the rest."""
    d_state: Annotated[int, Range(1, 64)] = 8
    """States per channel of the Mamba encoder's selective scan."""
    steps: Annotated[int, Range(1, 1_000_000)] = 400
    """Optimiser steps of each fit (the whole datum every step)."""
    lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 5e-3
    """Peak learning rate of the LPNet models (AdamW, warm-up then cosine decay)."""
    siren_lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 1e-3
    """Peak learning rate of SIREN (sine networks need a smaller one)."""
    siren_omega: Annotated[float, Range(1.0, 100.0)] = 30.0
    """SIREN's frequency factor ω0 (Sitzmann et al.: 30)."""
    n_seeds: Annotated[int, Range(1, 20)] = 1
    """Seeds per datum (seed, seed+1, ...); the claims average over data x seeds and show the spread."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def validate(self) -> None:
        if self.size % self.factor:
            raise bad_value("size", self.size, f"a multiple of factor={self.factor}")
        deepest = int(math.log2(self.factor)) + 1
        if self.levels > deepest:
            raise bad_value("levels", self.levels, f"an integer in [1, {deepest}] (log2(factor) + 1 for "
                                                   f"factor={self.factor}: every level keeps a whole latent grid)")
        for name in self.data:
            if self.size > max_size(name):
                raise bad_value("size", self.size, f"at most {max_size(name)} (the short side of {name!r})")
        if self.latent_channels < self.levels:
            raise bad_value("latent_channels", self.latent_channels, f"at least levels={self.levels}")

    def run_budget(self) -> RunBudget:
        """Work: every datum x seed fits all 10 variants and a reseeded LPNet-Conv at `budget` parameters, and the
        first datum each rd_variant at every rd_budget, each fit `steps` optimiser steps on the whole datum (frames
        x size^2 pixels; about 6 operations per parameter and pixel, SIREN's exact count, an upper bound for the
        convolutional encoders). Memory: one fit's activations (pixels x about sqrt(budget) features per layer,
        kept for the backward pass) and the model with AdamW's moments."""
        pixels = [self.size ** 2 * (self.frames if name == "shapes_video" else 1) for name in self.data]
        fits = len(VARIANTS) + 1
        work = self.n_seeds * fits * sum(train_ops(self.budget, p * self.steps, self.steps) for p in pixels)
        work += len(self.rd_variants) * sum(train_ops(b, pixels[0] * self.steps, self.steps) for b in self.rd_budgets)
        largest = max(self.budget, *self.rd_budgets)
        memory = train_bytes(largest, max(pixels) * 8 * math.sqrt(largest) + 3.0 * 8 * max(pixels))
        return RunBudget(memory, work, "ssm_inr's fits: data x n_seeds x 11 variants and rd_variants x rd_budgets "
                         "networks of about budget parameters, steps passes over frames x size^2 pixels",
                         ("steps", "size", "frames", "budget", "rd_budgets", "n_seeds", "data", "rd_variants"),
                      memory_what="ssm_inr's fit activations: frames x size^2 pixels x the network's features")
