"""Configuration of the RecurrSim experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, ClassVar

import numpy as np

from lab.budget import STEP_OPS, Budget
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.runtime import RuntimeConfig

#: Equations the method is run on: the paper's 1-D trio and a small 2-D Navier-Stokes case.
EQUATIONS = ("burgers", "kdv", "ks", "navier_stokes")
#: Models trained per equation: RecurrFNO (RecurrSim training) and its four baselines.
MODELS = ("recurrsim", "fixed_k", "deq", "fno", "fno_2x")


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """RecurrSim: recurrent-depth FNO trained with random depth, against fixed-depth, fixed-K and DEQ baselines."""

    PROFILES: ClassVar = {
        "ci": dict(equations=("burgers", "navier_stokes"), seeds=2, n_train=8, n_test=3, n_val=3, traj_steps=10,
                   rollout_steps=6, horizon_steps=10,
                   grid_1d=32, grid_2d=16, width=8, modes=6, modes_2d=4, iterations=6, batch_size=8, mean_depth=2.0,
                   grad_depth=2, fixed_depth=2, deq_max_iter=4, K_eval=(1, 2, 4, 8, 16, 32), n_alpha=4,
                   timing_repeats=1),
        "quick": {},
        "full": dict(equations=EQUATIONS, n_train=256, n_test=32, n_val=32, traj_steps=100, rollout_steps=80,
                     horizon_steps=160,
                     width=48, modes=16, modes_2d=12, grid_2d=64, iterations=5000, batch_size=32, mean_depth=32.0,
                     fixed_depth=32, deq_max_iter=64, K_eval=(1, 2, 4, 8, 16, 32, 64, 128), timing_repeats=7),
    }

    equations: Annotated[tuple[str, ...], Choices(*EQUATIONS), Each(unique=True)] = ("burgers",)
    """PDEs to learn, from burgers, kdv, ks (1-D, on the lab's ETDRK4 solvers) and navier_stokes (2-D vorticity).
    The quick profile trains on Burgers alone (the paper's first benchmark) to stay within its time budget:
    Navier-Stokes at a size quick could afford (16^2 grid, 500 steps, one seed) rolls out with nRMSE 0.41 at its
    best K (4; 0.91 at K = 1) over 40 frames, correlation horizon 30 of 80 frames, but a model costs about three
    times a Burgers one (about twice at width 16) and its rollouts to K = 128 more than its training, and the same
    network trained at K = 8 alone reaches 0.37 without degrading deeper, so the depth claims would not
    discriminate there (issue 42). The ci profile runs Burgers and Navier-Stokes (seconds-sized, so both kinds of
    view and claim are exercised); the full profile covers all four, 2-D at 64^2."""
    n_train: Annotated[int, Range(1, 100_000)] = 64
    """Training trajectories per equation (each gives traj_steps one-step pairs)."""
    n_test: Annotated[int, Range(1, 10_000)] = 16
    """Held-out trajectories per equation (a different seed) for the rollouts."""
    n_val: Annotated[int, Range(1, 10_000)] = 16
    """Validation trajectories per equation (a third seed): the depth RecurrSim needs is picked on them, never on
    the test trajectories."""
    traj_steps: Annotated[int, Range(2, 10_000)] = 60
    """Saved frames per trajectory after the initial one (frame spacing: the equation's dt, see train.SETTINGS)."""
    rollout_steps: Annotated[int, Range(1, 10_000)] = 40
    """Autoregressive rollout frames the nRMSE is measured over at evaluation (at most traj_steps)."""
    horizon_steps: Annotated[int, Range(1, 10_000)] = 80
    """Frames of the rollout the correlation horizon tau_alpha is measured on (at least rollout_steps; the same
    rollout, continued): long enough that a shallow model decorrelates within it, so the horizon's growth with K is
    not capped at the rollout's end. The held-out trajectories are generated this long (training ones stay
    traj_steps long)."""
    grid_1d: Annotated[int, Range(16, 8192)] = 128
    """Grid points of the 1-D fields the networks see, an even number (the solver runs on twice as many;
    Fourier-truncated)."""
    grid_2d: Annotated[int, Range(8, 512)] = 32
    """Grid points per axis of the 2-D Navier-Stokes fields the networks see, an even number (the solver runs at
    twice as many per axis)."""
    width: Annotated[int, Range(1, 1024)] = 32
    """Channels of the FNO hidden fields (all models)."""
    modes: Annotated[int, Range(1, 4096)] = 16
    """Fourier modes kept per spectral convolution in 1-D (at most grid_1d / 2)."""
    modes_2d: Annotated[int, Range(1, 256)] = 8
    """Fourier modes kept per axis in 2-D (at most grid_2d / 2)."""
    iterations: Annotated[int, Range(1, 10_000_000)] = 500
    """Optimiser steps per model."""
    batch_size: Annotated[int, Range(1, 100_000)] = 32
    """One-step pairs per optimiser step (one depth K per batch)."""
    lr: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 2e-3
    """Peak learning rate (linear warm-up over the first 5% of steps, then cosine decay to zero)."""
    mean_depth: Annotated[float, Range(1.0, 1024.0)] = 8.0
    """Kbar of the Poisson-log-normal depth distribution K ~ Poisson(e^v) + 1, v ~ N(log Kbar - s^2/2, s). The paper
    uses 32; the quick profile uses the lab's CPU plan, 8 (so K = 16, 32 probe beyond the usual depths)."""
    depth_sigma: Annotated[float, Range(0.0, 3.0)] = 0.5
    """s, the spread of the log-normal part of the depth distribution (paper: 0.5)."""
    grad_depth: Annotated[int, Range(1, 1024)] = 4
    """B: truncated backpropagation through depth; only the last B iterations carry gradients (paper: 4)."""
    fixed_depth: Annotated[int, Range(1, 1024)] = 8
    """K of the ablation trained at one fixed depth (same architecture, same B)."""
    deq_max_iter: Annotated[int, Range(1, 10_000)] = 16
    """Deep-equilibrium baseline: at most this many fixed-point iterations per training forward pass."""
    deq_tol: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 1e-3
    """Deep-equilibrium baseline: stop iterating when ||z_k - z_{k-1}|| <= deq_tol ||z_k||."""
    K_eval: Annotated[tuple[int, ...], Range(1, 1024), Each(increasing=True)] = (1, 2, 4, 8, 16, 32, 64, 128)
    """Recurrent depths evaluated at test time (evaluation only; the trainings' depths are mean_depth, fixed_depth
    and deq_max_iter). The claims read K = 1, 8, 16, a K above 16 and one above fixed_depth, so every profile
    evaluates them; quick goes on to 8x and 16x the mean training depth (64, 128), where no training ran and a model
    good only at its training depth shows it."""
    alpha_min: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.70
    """Smallest correlation threshold of the correlation horizon tau_alpha (paper: 0.70)."""
    alpha_max: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.99
    """Largest correlation threshold (paper: 0.99), at least alpha_min."""
    n_alpha: Annotated[int, Range(1, 1000)] = 30
    """Number of evenly spaced thresholds from alpha_min to alpha_max (30: steps of 0.01)."""
    timing_repeats: Annotated[int, Range(1, 1000)] = 5
    """Repeats of each inference timing (the fastest counts: the machine is shared)."""
    seeds: Annotated[int, Range(1, 16)] = 3
    """RecurrSim is trained with this many model seeds (seed, seed + 1, ...; same data): the claims about its depth
    curve state their worst seed; the baselines and the other claims use the first."""

    def validate(self) -> None:
        if self.rollout_steps > self.traj_steps:
            raise bad_value("rollout_steps", self.rollout_steps, f"an integer in [1, traj_steps={self.traj_steps}]")
        if self.horizon_steps < self.rollout_steps:
            raise bad_value("horizon_steps", self.horizon_steps,
                            f"an integer in [rollout_steps={self.rollout_steps}, 10000]")
        for name in ("grid_1d", "grid_2d"):
            if getattr(self, name) % 2:
                raise bad_value(name, getattr(self, name), "an even number")
        if self.modes > self.grid_1d // 2:
            raise bad_value("modes", self.modes, f"an integer in [1, grid_1d / 2 = {self.grid_1d // 2}]")
        if self.modes_2d > self.grid_2d // 2:
            raise bad_value("modes_2d", self.modes_2d, f"an integer in [1, grid_2d / 2 = {self.grid_2d // 2}]")
        if self.alpha_max < self.alpha_min:
            raise bad_value("alpha_max", self.alpha_max, f"a number in [alpha_min={self.alpha_min}, 1)")

    @property
    def alphas(self) -> np.ndarray:
        """Correlation thresholds of tau_alpha, shape (n_alpha,)."""
        if self.n_alpha == 1:
            return np.array([self.alpha_min])
        return np.round(np.linspace(self.alpha_min, self.alpha_max, self.n_alpha), 6)

    def run_budget(self) -> Budget:
        """Per equation (grid_1d points, or grid_2d^2 for Navier-Stokes): one FNO layer application costs per
        sample the pointwise 2 width^2 and two FFTs (10 width log2 G) per point plus the spectral product
        (8 width^2 per kept mode). Work: RecurrSim (seeds of it), the fixed-K, DEQ and two FNO models trained
        iterations x batch_size samples at their depths (mean_depth, fixed_depth and deq_max_iter forward, grad_depth
        backward), at every K_eval the test rollouts (horizon_steps frames) and validation rollouts (rollout_steps)
        of RecurrSim's seeds, the fixed-K model and the DEQ, the solver's data
        (twice the grid, ~50 substeps a frame). Memory: the trajectories (float64), a batch's complex activations
        over grad_depth iterations."""
        work, memory = 0.0, 0.0
        for eq in self.equations:
            two_d = eq == "navier_stokes"
            G = self.grid_2d ** 2 if two_d else self.grid_1d
            kept = 2 * self.modes_2d ** 2 if two_d else self.modes
            w = self.width
            layer = G * (2.0 * w * w + 10.0 * w * max(1.0, math.log2(G))) + 8.0 * w * w * kept
            depths = (self.seeds * (self.mean_depth + 3 * self.grad_depth) + self.fixed_depth + 3 * self.grad_depth
                      + self.deq_max_iter + 3 + 3 * 3 * 4)
            work += self.iterations * (self.batch_size * layer * depths + STEP_OPS * (self.seeds + 4))
            depth = sum(K + 2 for K in self.K_eval)
            long = self.n_test * self.horizon_steps * layer  # test rollouts (tau's length) and one-step pairs
            short = (self.n_val + self.n_test) * self.rollout_steps * layer  # validation rollouts, one-step pairs
            work += (long + short) * (self.seeds + 2) * depth + (long + short) * (3 * 8 + self.deq_max_iter)
            work += short * self.timing_repeats
            held_out = (self.n_test + self.n_val) * max(self.traj_steps, self.horizon_steps)
            work += (self.n_train * self.traj_steps + held_out) * 50 * 4 * G * 40.0
            memory = max(memory, 8.0 * (self.n_train * (self.traj_steps + 1) + held_out) * G * 3
                         + 4.0 * 4 * self.batch_size * G * w * (self.grad_depth + 2) * 4)
        return Budget(memory, work, "recurrsim's trainings: per equation (seeds + 4) FNOs of iterations x "
                      "batch_size samples at up to mean_depth, fixed_depth and deq_max_iter layer applications",
                      ("iterations", "batch_size", "width", "grid_1d", "grid_2d", "mean_depth", "deq_max_iter",
                       "n_train", "traj_steps", "seeds"),
                      memory_what="recurrsim's trajectories and a batch's FNO activations over the grid")
