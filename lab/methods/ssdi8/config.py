"""Configuration of the SSDi8 experiments: a small Mamba-2 character model, its INT8 SSD path and the baselines."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import Budget, train_bytes, train_ops
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.fields import Layers, Rate, Seeds, WeightDecay
from lab.core.runtime import RuntimeConfig

#: weight bit widths of in_proj / out_proj (W8A8, W4A8)
WEIGHT_BITS = (4, 8)


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """SSDi8: post-training INT8 quantisation of Mamba-2's SSD path (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(d_model=32, ngroups=2, train_steps=12, seq_len=64, batch_size=8, n_train_chars=40_000, n_calib=4,
                   n_eval=32, n_eval_grid=4, n_seeds=2, timing_repeats=1),
        "quick": {},
        "full": dict(d_model=128, ngroups=8, n_layers=4, train_steps=3000, seq_len=512, n_train_chars=4_000_000,
                     n_calib=64, n_eval=1024, n_eval_grid=128, timing_repeats=5),
    }

    # the model and its training ----------------------------------------------------------------------------------
    d_model: Annotated[int, Range(16, 1024)] = 64
    """Features of the residual stream; the SSD's inner width is 2 x d_model (expand 2)."""
    n_layers: Layers = 2
    """Mamba-2 blocks."""
    d_state: Annotated[int, Range(2, 256)] = 16
    """State size N of the SSD (per group; B and C have N channels)."""
    headdim: Annotated[int, Range(2, 256)] = 32
    """Channels per SSD head (2 x d_model must be a multiple)."""
    ngroups: Annotated[int, Range(1, 64)] = 4
    """Groups of heads sharing B and C (must divide the heads, 2 x d_model / headdim). With one group, B and C "per
    group" is per tensor; Mamba2-8B has 8 groups, Mamba2-2.7B one."""
    chunk_size: Annotated[int, Range(2, 512)] = 32
    """SSD chunk length (the axis along which x gets a scale per chunk)."""
    seq_len: Annotated[int, Range(8, 8192)] = 128
    """Characters per training, calibration and evaluation sequence."""
    n_train_chars: Annotated[int, Range(10_000, 100_000_000)] = 600_000
    """Characters of the training split of the corpus (Python standard library sources, sorted by path)."""
    train_steps: Annotated[int, Range(1, 1_000_000)] = 320
    """Optimiser steps of the language model's training (AdamW, warm-up then cosine decay)."""
    batch_size: Annotated[int, Range(1, 4096)] = 32
    """Training sequences per step."""
    lr: Rate = 3e-3
    """Peak learning rate."""
    weight_decay: WeightDecay = 0.01
    """AdamW weight decay of the matrices."""

    n_seeds: Seeds = 3
    """Trained models (seeds seed, seed + 1, ...) on which the W8A8 non-inferiority comparison is repeated, with the
    injected outlier channels (the headline) and on the model's own activations (a report row): SSDi8's loss against
    the input-only quantisers' varies in sign from one trained model to the next. The other measurements use the
    first."""

    # quantisation ------------------------------------------------------------------------------------------------
    n_calib: Annotated[int, Range(1, 100_000)] = 32
    """Calibration sequences (taken from corpus files that neither training nor evaluation reads)."""
    n_eval: Annotated[int, Range(1, 100_000)] = 1024
    """Evaluation sequences (their own files, apart from training and calibration): the losses on the model's own
    activations that the claims and the notebook read, and the headline's with the injected outliers, are taken over
    all of them (windows evenly spread over the files read, about 70 at 1024: the headline's standard error is
    clustered by file, so it shrinks with the files more than with the windows)."""
    n_eval_grid: Annotated[int, Range(1, 100_000)] = 128
    """Evaluation sequences, evenly spaced among the n_eval, on which the injected-outlier settings, every SSD
    output error and the own-activation losses nothing reads are measured (their differences are many standard
    errors wide at this size)."""
    weight_bits: Annotated[tuple[int, ...], Choices(*WEIGHT_BITS), Each(unique=True)] = (8, 4)
    """Weight bit widths of in_proj and out_proj to run besides full-precision weights (8: W8A8, 4: W4A8; per
    output channel, symmetric; their input activations are INT8 per tensor)."""
    correction_scale: Annotated[float, Range(0.0, 4.0)] = 0.15
    """Coefficient of the per-channel error correction c* added to the SSD output (the paper's summary: 0.15; the
    upstream scripts use 0.16, the code's default 0.1; 1 removes the whole calibration mean error)."""
    decay_bits: Annotated[int, Range(1, 7)] = 7
    """Fractional bits k of the fixed-point gate of the integer state passing: the chunk decay as the int8 code
    round(decay * 2^k) (at most 127), the int32 state multiplied by it and shifted right by k (khw980/SSDi8's
    quant_state_passing: GATE_SHIFT = 7; more bits would not fit the int8 gate)."""
    outlier_channels: Annotated[int, Range(0, 4096)] = 2
    """SSD input channels per layer scaled up before the SSD and down after it (function-preserving outliers)."""
    outlier_scale: Annotated[float, Range(1.0, 1e4)] = 20.0
    """Factor of those channels (1: none; 20 leaves a per-tensor scale about 6 levels for an ordinary channel)."""
    timing_repeats: Annotated[int, Range(1, 100)] = 3
    """Repeats of each CPU timing (the minimum is kept)."""

    # the cache (threads and device: lab.core.runtime.RuntimeConfig) -------------------------------------------
    use_cache: bool = True
    """Reuse the corpus and trained weights cached under data/ssdi8/ (built on first use)."""

    #: the fields that determine the trained weights (with a format version)
    TRAINING_FIELDS = ("d_model", "n_layers", "d_state", "headdim", "ngroups", "chunk_size", "seq_len",
                       "n_train_chars", "train_steps", "batch_size", "lr", "weight_decay", "seed")

    def validate(self) -> None:
        if (2 * self.d_model) % self.headdim:
            raise bad_value("headdim", self.headdim, f"a divisor of the inner width 2 x d_model = {2 * self.d_model}")
        heads = 2 * self.d_model // self.headdim
        if heads % self.ngroups:
            raise bad_value("ngroups", self.ngroups, f"a divisor of the {heads} heads (2 x d_model / headdim)")
        if self.n_eval_grid > self.n_eval:
            raise bad_value("n_eval_grid", self.n_eval_grid, f"at most n_eval = {self.n_eval}")
        if self.outlier_channels > 2 * self.d_model:
            raise bad_value("outlier_channels", self.outlier_channels,
                            f"at most the inner width 2 x d_model = {2 * self.d_model}")

    @property
    def d_inner(self) -> int:
        return 2 * self.d_model

    def training_key(self, **extra) -> dict:
        """Everything that determines the trained weights, plus ``extra`` (a format version)."""
        return {**{n: getattr(self, n) for n in self.TRAINING_FIELDS}, **extra}

    def run_budget(self) -> Budget:
        """A Mamba-2 block holds about 6 d_model^2 + 4 d_model ngroups d_state weights (in_proj, out_proj) and its SSD
        costs per token about 4 chunk_size x inner width plus 8 x inner width x d_state. Work: the language
        model trained n_seeds times on train_steps x batch_size x seq_len characters (6 operations per weight, 3 x
        the SSD), then 7 SSD variants x (1 + len(weight_bits)) weight widths through n_eval_grid sequences twice
        (injected outliers, own activations; one float reference pass each), SSDi8 with the whole correction on
        them, the 12 pairs read on the other n_eval sequences (5 candidates with the outliers, 7 on the own
        activations), 4 parts per tensor on n_eval, the calibration, its float reference and the layer-by-layer
        correction fits on n_calib (twice per seed, one weight setting for the further seeds), the headline's 5
        candidates through n_eval twice for each further seed, and the timed ops on one batch of 16. Memory: the
        corpus (int64 tokens), a batch's activations and chunk scores, the model with AdamW's moments."""
        d, inner, L = self.d_model, self.d_inner, self.seq_len
        block = 6.0 * d * d + 4.0 * d * self.ngroups * self.d_state
        weights = self.n_layers * block + 2 * 256 * d
        ssd = self.n_layers * (4.0 * self.chunk_size * inner + 8.0 * inner * self.d_state)
        tokens = self.train_steps * self.batch_size * L
        work = self.n_seeds * (train_ops(weights, tokens, self.train_steps) + 3 * ssd * tokens)
        widths, grid, n = 1 + len(self.weight_bits), self.n_eval_grid, self.n_eval
        seqs = (2 * 7 * widths + 2 + widths) * grid + 12 * (n - grid) + 4 * n
        seqs += 2 * self.n_calib * (2 + widths * self.n_layers)  # calibration, its reference, the corrections
        seqs += (self.n_seeds - 1) * (10 * n + 2 * self.n_calib * (2 + self.n_layers))  # the further seeds
        work += seqs * L * (2.0 * weights + ssd) + self.timing_repeats * 50 * 16 * L * (2.0 * weights + ssd)
        heads = inner // self.headdim
        activations = self.batch_size * L * self.n_layers * (16.0 * inner + heads * self.chunk_size + 256)
        memory = train_bytes(weights, activations) + 8.0 * 3 * self.n_train_chars
        return Budget(memory, work, "ssdi8's language model: train_steps x batch_size x seq_len characters through "
                      "n_layers Mamba-2 blocks, then the quantised variants", ("train_steps", "batch_size", "seq_len",
                                                                                "d_model", "n_layers", "n_eval",
                                                                                "n_eval_grid", "n_calib", "n_seeds",
                                                                                "n_train_chars"),
                      memory_what="ssdi8's training batch: batch_size x seq_len activations over n_layers blocks")
