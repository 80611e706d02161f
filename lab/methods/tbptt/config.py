"""Configuration of the truncated-BPTT burn-in experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.budget import Budget, train_bytes, train_ops
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.runtime import RuntimeConfig

#: the systems of lab.datasets.systems the method runs on
SYSTEM_NAMES = ("linear", "rlc", "duffing", "sunspots", "co2", "rlc_bench")
#: the recurrent models (lab.methods.tbptt.model.KINDS)
MODEL_KINDS = ("lstm", "gru", "lru")


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """Truncated BPTT with burn-in: training MSE against the burn-in m, for several window lengths N."""

    PROFILES: ClassVar = {
        "ci": dict(system="linear", models=MODEL_KINDS, lengths=(12, 40), burn_in_fractions=(0.0, 0.3, 0.6),
                   n_train=300, n_val=150, n_test=150, steps=12, batch_size=32, n_seeds=1, stride=5, lr=5e-3),
        "quick": {},
        "full": dict(models=MODEL_KINDS, lengths=(100, 200, 500),
                     burn_in_fractions=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9), n_train=6667,
                     n_val=3333, n_test=3333, steps=20000, lr=1e-2, n_seeds=5),
    }

    system: Literal["linear", "rlc", "duffing", "sunspots", "co2", "rlc_bench"] = "rlc_bench"
    """System: the paper's own RLC benchmark record (rlc_bench, shipped with the method: 6667 training, 3333
    validation and 3333 test samples; n_train, n_val and n_test do not apply), or one of lab.datasets.systems: the
    one-state linear system (the seconds-long case), the simulated nonlinear series RLC circuit with the paper's
    constants (a wider-band input than the benchmark's), a Silverbox-like Duffing oscillator, or one-step
    forecasting of the statsmodels sunspots or co2 series."""
    models: Annotated[tuple[str, ...], Choices(*MODEL_KINDS), Each(unique=True)] = ("lstm",)
    """Recurrent models: the paper's LSTM, a GRU, an LRU block of lab.core. The claims read the first."""
    hidden: Annotated[int, Range(1, 256)] = 8
    """Hidden units (LSTM, GRU) or features and complex states (LRU); the paper's LSTM has 8."""
    lengths: Annotated[tuple[int, ...], Range(2, 100_000), Each(increasing=True)] = (200,)
    """Subsequence lengths N of truncated BPTT. The default is the paper's headline setting on the RLC benchmark,
    N = 200 (its m* = 110); at N = 50 and 100 on the simulated circuit the gain stayed near 20%."""
    burn_in_fractions: Annotated[tuple[float, ...], Range(0.0, 0.95), Each(min_len=3, increasing=True)] = (
        0.0, 0.25, 0.55, 0.75, 0.9)
    """Burn-in grid as fractions of N: each N trains m = round(fraction x N) (the official code's grid is per N
    too). It starts at 0 (the m = 0 baseline); 0.55 N is the paper's m* at N = 200 (110); 0.9 N leaves a tenth of
    each window to the loss."""
    stride: Annotated[int, Range(1, 100_000)] = 1
    """Samples between the starts of consecutive subsequences (they overlap when below N; the paper: 1)."""
    n_train: Annotated[int, Range(0, 10_000_000)] = 3000
    """Samples of the training record (0 with a statsmodels series: 70% of it)."""
    n_val: Annotated[int, Range(0, 10_000_000)] = 1500
    """Samples of the validation record, on which m* is chosen (0 with a series: 15% of it)."""
    n_test: Annotated[int, Range(0, 10_000_000)] = 1500
    """Samples of the test record (0 with a series: 15% of it)."""
    steps: Annotated[int, Range(1, 10_000_000)] = 2500
    """Optimiser steps per training run (AdamW, warm-up then cosine decay), the same for every m and N: the gain
    is a small error made smaller, so the runs must converge (800 steps at lr 1e-2 left seed noise, not burn-in)."""
    batch_size: Annotated[int, Range(1, 100_000)] = 100
    """Subsequences per mini-batch (the paper: 100)."""
    lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 3e-2
    """Peak learning rate (the paper: Adam at 3e-4 for 1500 epochs, about 96k steps; ours are far fewer, so the
    rate is higher: on the benchmark at N = 200, one seed, 2500 steps at 3e-2 matched 4000 at 1.5e-2)."""
    n_seeds: Annotated[int, Range(1, 100)] = 3
    """Seeds (seed, seed+1, ...): each seed's runs share their initial weights and batch order across m; the
    claims are means over seeds."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def burn_ins(self, N: int) -> tuple[int, ...]:
        """The burn-in grid at window length ``N``: ``round(fraction x N)`` for each fraction."""
        return tuple(int(round(f * N)) for f in self.burn_in_fractions)

    def validate(self) -> None:
        if self.burn_in_fractions[0] != 0:
            raise bad_value("burn_in_fractions", self.burn_in_fractions,
                            "values starting with 0 (m = 0 is the baseline)")
        for N in self.lengths:
            ms = self.burn_ins(N)
            if len(set(ms)) < len(ms) or ms[-1] >= N:
                raise bad_value("burn_in_fractions", self.burn_in_fractions,
                                f"fractions whose burn-ins round(fraction x N) differ from each other and stay "
                                f"below N at every N (at N = {N}: {ms})")
        simulated = self.system in ("linear", "rlc", "duffing")
        if simulated and self.n_train < self.lengths[-1]:
            raise bad_value("n_train", self.n_train, f"an integer >= the longest N = {self.lengths[-1]}")
        if simulated and min(self.n_val, self.n_test) < 2:
            raise bad_value("n_val" if self.n_val < 2 else "n_test", min(self.n_val, self.n_test),
                            "an integer >= 2 for a simulated system")

    def run_budget(self) -> Budget:
        """Work: len(models) x len(lengths) x n_seeds x (len(burn_in_fractions) + 1) trainings of steps x batch_size
        windows of N samples (an LSTM of about 4 hidden^2 + 16 hidden weights, 6 operations per weight and sample, and
        about 20 µs per time step of the sequential recurrence), evaluated on every window of the validation and
        test records. Memory: the overlapping windows of the records ((samples / stride) x N floats, at the
        longest N), a batch's activations: the LSTM's grid trains as one stack of n_seeds x (burn-ins + 1) models,
        whose kernel keeps 7 hidden floats per model, window and step (gates, cell, state), twice over."""
        h = self.hidden
        weights = 4 * h * h + 16 * h + 4
        records = 13333 if self.system == "rlc_bench" else (self.n_train or 2000) + (self.n_val or 500) + (
            self.n_test or 500)
        work, memory = 0.0, 0.0
        for N in self.lengths:
            runs = len(self.models) * self.n_seeds * (len(self.burn_in_fractions) + 1)
            tokens = self.steps * self.batch_size * N
            evals = 2.0 * weights * records / self.stride * N
            work += runs * (train_ops(weights, tokens, self.steps) + 2e5 * self.steps * N + evals)
            windows = 4.0 * 4 * records / self.stride * N
            stack = 2 * 4.0 * 7 * h * self.n_seeds * (len(self.burn_in_fractions) + 1) * self.batch_size * N
            memory = max(memory, windows * 2 + stack + train_bytes(weights, 16.0 * self.batch_size * N * h))
        return Budget(memory, work, "tbptt's trainings: models x lengths x n_seeds x (burn_in_fractions + 1) runs "
                      "of steps x batch_size windows of N samples",
                      ("steps", "lengths", "batch_size", "n_train", "stride", "n_seeds", "burn_in_fractions",
                       "hidden", "models"),
                      memory_what="tbptt's overlapping windows: (samples / stride) x the longest N")
