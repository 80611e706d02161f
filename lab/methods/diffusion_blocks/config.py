"""Configuration of the DiffusionBlocks experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.config import BaseConfig, Range, bad_value
from lab.core.runtime import RuntimeConfig

Steps = Annotated[int, Range(1, 10_000_000)]
Rate = Annotated[float, Range(0.0, 1.0, lo_open=True)]


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """DiffusionBlocks: B blocks trained one at a time as denoisers of their own noise ranges (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(toy_steps=40, toy_train=2000, n_eval=300, cls_steps=20, n_train=256, n_test=128, n_seeds=1,
                   sample_steps=12, cls_sample_steps=6),
        "quick": {},
        "full": dict(toy_steps=6000, width=128, cls_steps=4000, d_model=64, dataset="mnist1d", n_eval=4000,
                     n_seeds=5, sample_steps=40),
    }

    n_layers: Annotated[int, Range(1, 48)] = 6
    """Residual layers L of the end-to-end network (MLP layers for the 2-D data, transformer layers for the
    classifier); DiffusionBlocks cuts them into n_blocks blocks of L / B layers."""
    n_blocks: Annotated[int, Range(1, 48)] = 3
    """Blocks B (at most n_layers, and dividing it)."""
    p_mean: Annotated[float, Range(-10.0, 10.0)] = -1.2
    """Mean of ln σ under EDM's log-normal training distribution (the paper: -1.2)."""
    p_std: Annotated[float, Range(0.0, 10.0, lo_open=True)] = 1.2
    """Standard deviation of ln σ (the paper: 1.2)."""
    sigma_min: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 0.002
    """Smallest noise level (the paper: 0.002)."""
    sigma_max: Annotated[float, Range(1.0, 1000.0)] = 80.0
    """Largest noise level, where sampling starts (the paper: 80)."""
    sigma_data: Annotated[float, Range(0.01, 10.0)] = 0.5
    """EDM's σ_d; the 2-D data and the label embeddings are scaled to this per-coordinate RMS (the paper: 0.5)."""
    overlap: Annotated[float, Range(0.0, 1.0)] = 0.05
    """γ: each block trains on its range widened by (σ_hi / σ_lo)^γ on both sides (the paper: 0.05)."""
    toy: Literal["gaussians8", "moons"] = "gaussians8"
    """2-D data: eight Gaussians on a circle, or scikit-learn's two moons (noise 0.05)."""
    width: Annotated[int, Range(4, 1024)] = 64
    """Features of the residual MLP denoiser (2-D data)."""
    toy_train: Annotated[int, Range(100, 10_000_000)] = 20_000
    """Training points of the 2-D data (a fixed set, drawn once per seed)."""
    toy_steps: Steps = 600
    """Optimiser steps of the end-to-end 2-D runs (and of the block-wise runs, times B under block_budget =
    compute)."""
    toy_batch: Annotated[int, Range(1, 100_000)] = 256
    """Points per 2-D mini-batch."""
    toy_lr: Rate = 1e-2
    """Peak learning rate of the 2-D runs (AdamW, warm-up then cosine decay)."""
    n_eval: Annotated[int, Range(10, 100_000)] = 2000
    """Generated points per model for the energy distance, against as many fresh data points."""
    sample_steps: Annotated[int, Range(2, 1000)] = 24
    """Euler steps of 2-D sampling (EDM's ρ = 7 levels from sigma_max to sigma_min, then to 0)."""
    dataset: Literal["digits", "mnist1d"] = "digits"
    """Classification data: sklearn digits (8 rows of 8 pixels: 8 tokens) or MNIST-1D (40 samples: 8 tokens of 5)."""
    n_train: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_train training examples (0: all)."""
    n_test: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_test test examples (0: all)."""
    d_model: Annotated[int, Range(4, 1024)] = 32
    """Features of the transformer classifier (a multiple of n_heads)."""
    n_heads: Annotated[int, Range(1, 64)] = 2
    """Attention heads."""
    d_label: Annotated[int, Range(2, 1024)] = 16
    """Dimension of the label embedding that DiffusionBlocks denoises (fixed random directions, L2-normalised)."""
    cls_steps: Steps = 500
    """Optimiser steps of the end-to-end classifier runs (and of the block-wise runs, times B under block_budget =
    compute)."""
    cls_batch: Annotated[int, Range(1, 100_000)] = 64
    """Examples per classifier mini-batch."""
    cls_lr: Rate = 3e-3
    """Peak learning rate of the classifier runs."""
    cls_sample_steps: Annotated[int, Range(2, 1000)] = 12
    """Euler steps when classifying by denoising the label embedding."""
    block_budget: Literal["compute", "steps"] = "compute"
    """Block-wise training length: compute (B times the end-to-end steps: each block gets as many updates as the
    end-to-end network, and the run as many layer-passes) or steps (as many steps as end to end: each block gets
    1/B of the updates)."""
    n_seeds: Annotated[int, Range(1, 100)] = 3
    """Seeds (seed, seed+1, ...): data draw, initial weights, batches; the claims are means over seeds."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    @property
    def block_layers(self) -> int:
        """Layers per block, L / B."""
        return self.n_layers // self.n_blocks

    def validate(self) -> None:
        if self.n_blocks > self.n_layers:
            raise bad_value("n_blocks", self.n_blocks, f"an integer in [1, n_layers={self.n_layers}]")
        if self.n_layers % self.n_blocks:
            raise bad_value("n_blocks", self.n_blocks, f"a divisor of n_layers={self.n_layers}")
        if self.sigma_min >= self.sigma_max:
            raise bad_value("sigma_min", self.sigma_min, f"a number below sigma_max={self.sigma_max}")
        if self.d_model % self.n_heads:
            raise bad_value("d_model", self.d_model, f"a multiple of n_heads={self.n_heads}")
