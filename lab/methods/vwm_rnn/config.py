"""Configuration of the VWM behaviour-fitting RNN experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, ClassVar, Literal

from lab.budget import Budget, train_bytes, train_ops
from lab.config import BaseConfig, Range, bad_value
from lab.core.runtime import RuntimeConfig

Steps = Annotated[int, Range(1, 10_000_000)]


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """A rate RNN fitted to swap-model behaviour by a DDPM loss on its 2-D output, against the same RNN by MSE."""

    PROFILES: ClassVar = {
        "ci": dict(hidden=16, diffusion_steps=5, ddpm_steps=30, mse_steps=20, batch_size=32, n_eval=400,
                   n_seeds=1),
        "quick": {},
        # the regime where the DDPM-trained RNN matches the generator (seed 0: κ 32 vs 39, w_NT 0.19 vs 0.22, the
        # non-target's mode 0.54 vs 0.54; 3 seeds: every verdict claim holds): twice the units, 10x the steps at a
        # lower learning rate
        "full": dict(hidden=192, ddpm_steps=20_000, lr=2e-3, mse_steps=2000, n_eval=4000, n_seeds=3),
    }

    swap_max: Annotated[float, Range(0.0, 1.0)] = 0.5
    """The generator's swap probability when the distractor sits at the cued item's location (a probability):
    p(Δ) = 2 swap_max / (1 + exp(Δ² / swap_width)), Δ the items' distance in location."""
    swap_width: Annotated[float, Range(0.0, 100.0, lo_open=True)] = 1.5
    """Width of the swap function in squared radians (the upstream example config: 1.5)."""
    radius: Annotated[float, Range(0.0, 100.0, lo_open=True)] = 2.5
    """Radius of the colour circle in the output plane (the upstream example: 2.5)."""
    target_sd: Annotated[float, Range(0.0, 100.0, lo_open=True)] = 0.4
    """Std of each Gaussian of the target mixture in the output plane (the surrogate behaviour's report noise)."""
    n_locations: Annotated[int, Range(2, 64)] = 8
    """Preferred locations of the conjunctive (location x colour) input population."""
    tuning: Annotated[float, Range(0.0, 100.0)] = 2.0
    """Von Mises concentration of the input population's location tuning."""
    stimulus: Annotated[int, Range(1, 100)] = 1
    """Steps of the stimulus epoch."""
    delay1: Annotated[int, Range(0, 100)] = 2
    """Steps of the delay before the cue."""
    cue: Annotated[int, Range(1, 100)] = 1
    """Steps of the cue epoch (the cued item's location)."""
    delay2: Annotated[int, Range(0, 100)] = 1
    """Steps of the delay after the cue, before the response (diffusion) period."""
    diffusion_steps: Annotated[int, Range(2, 1000)] = 20
    """Reverse-diffusion steps T = steps of the response period (the upstream example: 40)."""
    beta_first: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.05
    """β_1 of the linear DDPM schedule (the upstream example: σ² from 0.01; with half the steps we start higher)."""
    beta_last: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.5
    """β_T (the upstream example: 0.30 over 40 steps; 0.5 over 20 leaves a similar √ᾱ_T ≈ 0.03)."""
    hidden: Annotated[int, Range(4, 4096)] = 96
    """Units of the rate RNN."""
    leak: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 0.5
    """dt / Λ of the Euler step of Λ ṙ = -r + F(r, s, η)."""
    activation: Literal["relu", "tanh"] = "relu"
    """Rate nonlinearity φ in F = W φ(r) + U s + b."""
    noise: Annotated[float, Range(0.0, 10.0)] = 0.05
    """Std of the private noise η per step, outside the output plane."""
    ddpm_steps: Steps = 2000
    """Optimiser steps of the DDPM-trained RNN."""
    mse_steps: Steps = 1000
    """Optimiser steps of the MSE-trained RNN (it converges sooner)."""
    batch_size: Annotated[int, Range(1, 100_000)] = 128
    """Trials per optimiser step (fresh trials every step)."""
    lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 1e-2
    """Peak learning rate (AdamW, warm-up then cosine decay; the upstream example: 1e-3 over far longer runs)."""
    n_eval: Annotated[int, Range(100, 10_000_000)] = 2000
    """Evaluation trials (the same trials for every model and the generator)."""
    close: Annotated[float, Range(0.0, math.pi, lo_open=True)] = math.pi / 4
    """Distance in location below which a trial counts as close."""
    far: Annotated[float, Range(0.0, math.pi, hi_open=True)] = math.pi / 2
    """Distance in location above which a trial counts as far."""
    n_seeds: Annotated[int, Range(1, 100)] = 3
    """Seeds (seed, seed+1, ...): weights, training trials and evaluation noise; the claims are means over seeds."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def validate(self) -> None:
        if self.beta_last < self.beta_first:
            raise bad_value("beta_last", self.beta_last, f"a number >= beta_first = {self.beta_first}")
        if self.far < self.close:
            raise bad_value("far", self.far, f"a distance >= close = {self.close:.4g}")

    def run_budget(self) -> Budget:
        """A trial runs stimulus + delay1 + cue + delay2 + diffusion_steps Euler steps of the rate RNN (hidden^2
        recurrent and hidden x 2 n_locations input weights). Work: per seed the DDPM-trained RNN (ddpm_steps) and
        the MSE-trained one (mse_steps) on batch_size fresh trials a step (6 operations per weight and time step,
        about 20 µs per sequential time step), n_eval evaluation trials of 3 RNNs, and the swap-model fits (about
        200 likelihood evaluations of the n_eval responses per subset and distance bin). Memory: the evaluation
        trials' rates and inputs, a batch's activations over the trial, the model with AdamW's moments."""
        h = self.hidden
        T = self.stimulus + self.delay1 + self.cue + self.delay2 + self.diffusion_steps
        weights = h * h + h * (2 * self.n_locations + 8) + 2 * h
        steps = self.ddpm_steps + self.mse_steps
        work = self.n_seeds * (train_ops(weights, steps * self.batch_size * T, steps) + 2e5 * steps * T
                               + 3 * 2.0 * weights * self.n_eval * T + 4 * 9 * 200 * 30.0 * self.n_eval)
        memory = (4.0 * self.n_eval * T * (h + 2 * self.n_locations + 8) * 3
                  + train_bytes(weights, 8.0 * self.batch_size * T * h))
        return Budget(memory, work, "vwm_rnn's trainings: n_seeds x (ddpm_steps + mse_steps) x batch_size trials of "
                      "the hidden-unit RNN, and n_eval evaluation trials", ("ddpm_steps", "mse_steps", "batch_size",
                                                                           "hidden", "n_eval", "n_seeds",
                                                                           "diffusion_steps"),
                      memory_what="vwm_rnn's evaluation trials: n_eval x trial steps x hidden rates")
