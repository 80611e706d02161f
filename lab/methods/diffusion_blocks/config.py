"""Configuration of the DiffusionBlocks experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.budget import Budget, task_sizes, train_bytes, train_ops
from lab.config import BaseConfig, Range, bad_value
from lab.core.runtime import RuntimeConfig

Steps = Annotated[int, Range(1, 10_000_000)]
Rate = Annotated[float, Range(0.0, 1.0, lo_open=True)]


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """DiffusionBlocks: B blocks trained one at a time as denoisers of their own noise ranges (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(toy_steps=40, toy_train=2000, n_eval=300, cls_steps=20, n_train=256, n_test=128, n_seeds=1,
                   sample_steps=12, n_chains=4),
        "quick": {},
        "full": dict(toy_steps=6000, width=128, cls_steps=4000, d_model=64, n_eval=4000,
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
    """EDM's σ_d; the 2-D data are scaled to this per-coordinate RMS (the paper: 0.5; the label embeddings are unit
    vectors, as the reference implementation's)."""
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
    dataset: Literal["digits", "mnist1d"] = "mnist1d"
    """Classification data: sklearn digits (8 rows of 8 pixels: 8 tokens) or MNIST-1D (40 samples: 8 tokens of 5)."""
    n_train: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_train training examples (0: all)."""
    n_test: Annotated[int, Range(0, 10_000_000)] = 0
    """Use only the first n_test test examples (0: all)."""
    d_model: Annotated[int, Range(4, 1024)] = 32
    """Features of the transformer classifier (a multiple of n_heads)."""
    n_heads: Annotated[int, Range(1, 64)] = 2
    """Attention heads."""
    cls_steps: Steps = 1000
    """Optimiser steps of the end-to-end classifier runs (and of the block-wise runs, times B under block_budget =
    compute). At quick on MNIST-1D (seed 0): 500 steps leave the 6-layer transformer at 77% (below the competence
    bar), 1000 give 85% and its 2-layer control 79%, 1500 86% and 81%."""
    cls_batch: Annotated[int, Range(1, 100_000)] = 64
    """Examples per classifier mini-batch."""
    cls_lr: Rate = 3e-3
    """Peak learning rate of the classifier runs."""
    cls_partition: Literal["equal_mass", "uniform"] = "uniform"
    """Noise partition of the classifier's blocks. uniform (equal widths in ln σ, the paper's ablation baseline) gives
    the first block [2.3, 80], where the noisy label hides the class and the block must read the input; equal_mass
    (the paper's, used for the 2-D claims) gives it [0.51, 80], most of whose log-normal mass lies near σ ≈ 0.5 where
    the label shows through, so it learns to read the input little. Measured at quick, seed 0 (shared stem, label
    token of its own): the first block at σ_max 66.4% (equal mass) against 81.7% (uniform)."""
    cls_label: Literal["cond", "query", "token"] = "cond"
    """How the noisy label enters a classifier block: cond (mapped linearly into the AdaLN condition of every layer,
    beside σ's embedding; the tokens are the end-to-end network's), query (added to the learned query token whose
    output is read) or token (a token of its own beside the query: one token more than end to end, so one block
    keeps more than 1/B of the activations). Measured at quick (seeds 0-2, stem updated every step, 16 chains): cond
    85.1/85.7/86.9%."""
    stem_updates: Literal["every_step", "equal"] = "every_step"
    """Optimiser budget of the classifiers under block_budget = compute. every_step: the blocks' shared stem is
    updated at every step of every block's training (as the reference implementation), B x cls_steps updates, and
    every end-to-end classifier (e2e, small) gets the same per-parameter counts: B x cls_steps steps, its stem
    (token embedding, positions, class token, final norm, head) updated at each, its layers at every B-th only
    (cls_steps updates, as each block's layers). equal: the stem updated on every B-th step only (cls_steps
    updates) and the end-to-end classifiers trained cls_steps steps, every parameter at each."""
    n_chains: Annotated[int, Range(1, 10_000)] = 16
    """Inference chains per test example (independent start noise); their class probabilities at σ_min are averaged
    and the class is the argmax: the argmax of the blocks' predictive distribution, as the end-to-end networks are
    read. 1 is the reference's single chain, which samples a class. Measured at quick (label as its own token, seeds
    0, 1, 2): 8, 32, 64, 128 chains give 80.9/82.8/82.6/82.5, 83.3/83.7/83.8/83.9, 86.1/86.4/86.7/86.3%; with the
    label in the condition 8-16 chains come within 0.6 pt of 64."""
    block_budget: Literal["compute", "steps"] = "compute"
    """Block-wise training length: compute (B times the end-to-end steps, as the reference implementation aligns
    them: each block's layers get as many updates x batch as the end-to-end network's layers, and the run as many
    layer-passes; the shared stem as stem_updates says) or steps (as many steps as end to end: each block's layers
    get 1/B of the updates; the end-to-end classifiers train cls_steps steps, every parameter at each)."""
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

    def run_budget(self) -> Budget:
        """Work: per seed five 2-D denoisers (end to end, block-wise ones, the small control) trained toy_steps x
        toy_batch points through n_layers AdaLN MLP layers of about 7 width^2 weights (block-wise under
        block_budget = compute: B x the steps on 1/B of the layers, the same layer-passes), sampled n_eval x
        sample_steps; three classifiers over cls_batch x 8 tokens through transformer layers of about 18 d_model^2
        weights: the blocks B x cls_steps steps of L/B layers (under block_budget = compute), the end-to-end one
        and its L/B-layer control B x cls_steps steps under the matched schedule (stem_updates = every_step; the
        backward pass still crosses the layers to reach the stem) or cls_steps; the blocks classify by n_chains
        chains of one Euler step per block (an L-layer pass each). Memory: the energy distance's three n_eval x
        n_eval distance matrices (float64), the 2-D training set, the data set."""
        toy_w = self.n_layers * 7.0 * self.width ** 2
        cls_w = self.n_layers * 18.0 * self.d_model ** 2
        n_train, n_test, _ = task_sizes(self.dataset, self.n_train, self.n_test)
        compute = self.block_budget == "compute"
        block_steps = self.cls_steps * (self.n_blocks if compute else 1)
        e2e_steps = self.cls_steps * (self.n_blocks if compute and self.stem_updates == "every_step" else 1)
        tokens = 8 * self.cls_batch
        work = self.n_seeds * (5 * train_ops(toy_w, self.toy_steps * self.toy_batch, self.toy_steps * self.n_blocks)
                               + 5 * 2.0 * toy_w * self.n_eval * self.sample_steps + 3 * 8.0 * self.n_eval ** 2
                               + train_ops(cls_w / self.n_blocks, tokens * block_steps, block_steps)
                               + train_ops(cls_w * (1 + 1 / self.n_blocks), tokens * e2e_steps, 2 * e2e_steps)
                               + (1 + 1 / self.n_blocks + self.n_chains) * 2.0 * cls_w * 8 * n_test)
        activations = 16.0 * max(self.toy_batch * self.width, 8 * self.cls_batch * self.d_model) * self.n_layers
        memory = (3 * 8.0 * self.n_eval ** 2 + 3 * 16.0 * self.toy_train + 4.0 * 64 * (n_train + n_test)
                  + train_bytes(toy_w + cls_w, activations))
        return Budget(memory, work, "diffusion_blocks' trainings: n_seeds x (5 toy_steps x toy_batch + 3 cls_steps x "
                      "cls_batch) passes, and the n_eval x n_eval energy distances",
                      ("n_eval", "toy_steps", "cls_steps", "n_seeds", "width", "d_model", "n_layers", "toy_batch",
                       "cls_batch", "toy_train"),
                      memory_what="diffusion_blocks' energy distances: n_eval x n_eval distance matrices")
