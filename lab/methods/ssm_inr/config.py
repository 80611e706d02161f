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

ENCODERS = ("s3k", "s3k_nodecay", "conv", "mamba", "convnext", "siren")
#: what an LPNet encoder reads: the Laplacian pyramid (LPNet), the Gaussian image pyramid (the paper's ablation),
#: or the datum alone (no pyramid)
INPUTS = ("laplacian", "gaussian", "none")
#: variant -> (encoder, input, stacked S3K layers)
VARIANTS = {
    "lpnet_s3k": ("s3k", "laplacian", 1),
    "lpnet_s3k_nodecay": ("s3k_nodecay", "laplacian", 1),
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
    """LPNet-S3K against LPNet-Conv, LPNet-Mamba, ConvNeXt and SIREN storing equal numbers (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(data=("camera", "shapes_video"), size=32, frames=2, budget=1500,
                   rd_budgets=(1500, 2500), steps=12, n_seeds=1),
        "quick": {},
        "full": dict(data=("camera", "astronaut", "coffee", "chelsea", "rocket"), size=128, factor=16, levels=4,
                     latent_channels=48, budget=12_000, enc_budget=6000, rd_budgets=(6000, 12_000, 24_000, 48_000),
                     steps=4000, n_seeds=3,
                     rd_variants=("lpnet_s3k", "lpnet_conv", "lpnet_mamba", "convnext", "siren")),
    }

    data: Annotated[tuple[str, ...], Choices(*DATA), Each(unique=True)] = ("astronaut",)
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
    """Numbers stored per datum by every model in the claims: the latent's values and the decoder's parameters
    (LPNet: the encoder only produces the latent and is not stored; the decoder takes what the latent leaves, one
    decoder for every LPNet variant, so their stored counts are equal), SIREN's parameters (its width fills the
    LPNet models' stored count). Below the datum's own size (64 x 64 x 3 = 12288 values), so that the
    representation compresses it."""
    enc_budget: Annotated[int, Range(100, 10_000_000)] = 1500
    """Parameters of every LPNet encoder (all of its pyramid branches), matched within ~10%: the encoders are
    compared at the same size as well as the same stored count."""
    rd_budgets: Annotated[tuple[int, ...], Range(500, 10_000_000), Each(increasing=True)] = (2000, 3000, 6000)
    """Stored-number budgets of the rate-distortion curve (first datum, first seed)."""
    rd_variants: Annotated[tuple[str, ...], Choices(*VARIANTS), Each(unique=True)] = ("lpnet_s3k", "lpnet_conv",
                                                                                       "siren")
    """Variants fitted at every rd_budget."""
    d_state: Annotated[int, Range(1, 64)] = 8
    """States per channel of the Mamba encoder's selective scan."""
    steps: Annotated[int, Range(1, 1_000_000)] = 500
    """Optimiser steps of each fit (the whole datum every step); the steps curve refits the headline's variants
    with a quarter and a half of them."""
    lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 2e-2
    """Peak learning rate of the LPNet models (AdamW, warm-up then cosine decay)."""
    siren_lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 1e-3
    """Peak learning rate of SIREN (sine networks need a smaller one)."""
    siren_omega: Annotated[float, Range(1.0, 100.0)] = 30.0
    """SIREN's frequency factor ω0 (Sitzmann et al.: 30)."""
    n_seeds: Annotated[int, Range(1, 20)] = 3
    """Seeds per datum (seed, seed+1, ...); the claims average over data x seeds and show the spread."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def latent_values(self, datum: str) -> int:
        """Values in an LPNet latent of ``datum``: latent_channels x (size / factor)^2 x its frames."""
        frames = self.frames if datum == "shapes_video" else 1
        return self.latent_channels * (self.size // self.factor) ** 2 * frames

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
        latent = max(self.latent_values(name) for name in self.data)
        # the smallest decoder (width 2): 1x1 latent -> 2, log2(F) 4x4 transposed convs 2 -> 2, 3x3 conv 2 -> 3
        smallest = 2 * self.latent_channels + 2 + int(math.log2(self.factor)) * 66 + 57
        for name in ("budget", "rd_budgets"):
            value = getattr(self, name)
            if min(value if isinstance(value, tuple) else (value,)) < latent + smallest:
                raise bad_value(name, value, f"at least {latent + smallest} numbers (every datum's latent, "
                                             f"{latent} values, and the smallest decoder, {smallest} parameters)")

    def run_budget(self) -> RunBudget:
        """Work: every datum x seed fits all 11 variants at `budget` stored numbers, the first datum each
        rd_variant at every rd_budget and the 5 variants of the steps curve at a quarter and a half of `steps`, each
        fit `steps` optimiser steps on the whole datum (frames x size^2 pixels; about 6 operations per parameter
        (stored numbers plus encoder) and pixel, SIREN's exact count, an upper bound for the convolutional
        encoders). Memory: one fit's activations (pixels x about sqrt(parameters) features per layer, kept for the
        backward pass) and the model with AdamW's moments."""
        pixels = [self.size ** 2 * (self.frames if name == "shapes_video" else 1) for name in self.data]
        size = self.budget + self.enc_budget
        work = self.n_seeds * len(VARIANTS) * sum(train_ops(size, p * self.steps, self.steps) for p in pixels)
        work += 5 * train_ops(size, pixels[0] * self.steps * 3 // 4, self.steps)  # the steps curve's 5 encoders
        work += len(self.rd_variants) * sum(train_ops(b + self.enc_budget, pixels[0] * self.steps, self.steps)
                                            for b in self.rd_budgets)
        largest = max(self.budget, *self.rd_budgets) + self.enc_budget
        memory = train_bytes(largest, max(pixels) * 8 * math.sqrt(largest) + 3.0 * 8 * max(pixels))
        return RunBudget(memory, work, "ssm_inr's fits: data x n_seeds x 11 variants, rd_variants x rd_budgets and "
                         "the steps curve's networks of about budget + enc_budget parameters, steps passes over "
                         "frames x size^2 pixels",
                         ("steps", "size", "frames", "budget", "enc_budget", "rd_budgets", "n_seeds", "data",
                          "rd_variants"),
                         memory_what="ssm_inr's fit activations: frames x size^2 pixels x the network's features")
