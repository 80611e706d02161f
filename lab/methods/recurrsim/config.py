"""Configuration of the RecurrSim experiments (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from lab.config import BaseConfig, ConfigError, check_float, check_int, check_seq

#: Equations the method is run on: the paper's 1-D trio and a small 2-D Navier-Stokes case.
EQUATIONS = ("burgers", "kdv", "ks", "navier_stokes")
#: Models trained per equation: RecurrFNO (RecurrSim training) and its four baselines.
MODELS = ("recurrsim", "fixed_k", "deq", "fno", "fno_2x")


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """RecurrSim: recurrent-depth FNO trained with random depth, against fixed-depth, fixed-K and DEQ baselines."""

    PROFILES: ClassVar = {
        "ci": dict(n_train=8, n_test=3, traj_steps=10, rollout_steps=6, grid_1d=32, grid_2d=16, width=8, modes=6,
                   modes_2d=4, iterations=6, batch_size=8, mean_depth=2.0, grad_depth=2, fixed_depth=2,
                   deq_max_iter=4, K_eval=(1, 2, 4), n_alpha=4, timing_repeats=1),
        "quick": {},
        "full": dict(equations=EQUATIONS, n_train=256, n_test=32, traj_steps=100, rollout_steps=80, width=48,
                     modes=16, modes_2d=12, grid_2d=64, iterations=5000, batch_size=32, mean_depth=32.0,
                     fixed_depth=32, deq_max_iter=64, timing_repeats=7),
    }

    equations: tuple[str, ...] = ("burgers",)
    """PDEs to learn, from burgers, kdv, ks (1-D, on the lab's ETDRK4 solvers) and navier_stokes (2-D vorticity).
    The quick profile trains on Burgers alone (the paper's first benchmark) to stay within ~3 minutes on 2 cores;
    the full profile covers all four."""
    n_train: int = 64
    """Training trajectories per equation (each gives traj_steps one-step pairs)."""
    n_test: int = 16
    """Held-out trajectories per equation (a different seed) for the rollouts."""
    traj_steps: int = 60
    """Saved frames per trajectory after the initial one (frame spacing: the equation's dt, see training.SETTINGS)."""
    rollout_steps: int = 40
    """Autoregressive rollout horizon in frames at evaluation (at most traj_steps)."""
    grid_1d: int = 128
    """Grid points of the 1-D fields the networks see (the solver runs on twice as many; Fourier-truncated)."""
    grid_2d: int = 32
    """Grid points per axis of the 2-D Navier-Stokes fields the networks see (the solver runs at 64^2 or finer)."""
    width: int = 32
    """Channels of the FNO hidden fields (all models)."""
    modes: int = 16
    """Fourier modes kept per spectral convolution in 1-D."""
    modes_2d: int = 8
    """Fourier modes kept per axis in 2-D."""
    iterations: int = 500
    """Adam steps per model."""
    batch_size: int = 32
    """One-step pairs per Adam step (one depth K per batch)."""
    lr: float = 2e-3
    """Peak learning rate (linear warm-up over the first 5% of steps, then cosine decay to zero)."""
    mean_depth: float = 8.0
    """Kbar of the Poisson-log-normal depth distribution K ~ Poisson(e^v) + 1, v ~ N(log Kbar - s^2/2, s). The paper
    uses 32; the quick profile uses the research brief's CPU plan, 8 (so K = 16, 32 probe beyond the usual depths)."""
    depth_sigma: float = 0.5
    """s, the spread of the log-normal part of the depth distribution (paper: 0.5)."""
    grad_depth: int = 4
    """B: truncated backpropagation through depth; only the last B iterations carry gradients (paper: 4)."""
    fixed_depth: int = 8
    """K of the ablation trained at one fixed depth (same architecture, same B)."""
    deq_max_iter: int = 16
    """Deep-equilibrium baseline: at most this many fixed-point iterations per training forward pass."""
    deq_tol: float = 1e-3
    """Deep-equilibrium baseline: stop iterating when ||z_k - z_{k-1}|| <= deq_tol ||z_k||."""
    K_eval: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    """Recurrent depths evaluated at test time (the claims read K = 1, 8, 16, 32 and fixed_depth)."""
    alpha_min: float = 0.70
    """Smallest correlation threshold of the correlation horizon tau_alpha (paper: 0.70)."""
    alpha_max: float = 0.99
    """Largest correlation threshold (paper: 0.99)."""
    n_alpha: int = 30
    """Number of evenly spaced thresholds from alpha_min to alpha_max (30: steps of 0.01)."""
    timing_repeats: int = 5
    """Repeats of each inference timing (the fastest counts: the machine is shared)."""
    threads: int = 1
    """Torch CPU threads during the run (restored afterwards); 1 is fastest on a busy 2-core machine."""

    def validate(self) -> None:
        if not isinstance(self.equations, tuple) or not self.equations:
            raise ConfigError(f"equations={self.equations!r} is not allowed; expected at least one of {EQUATIONS}")
        check_seq(self, "equations", choices=EQUATIONS)
        if len(set(self.equations)) != len(self.equations):
            raise ConfigError(f"equations={self.equations!r} is not allowed; expected no repeats")
        check_int(self, "n_train", minimum=1, maximum=100_000)
        check_int(self, "n_test", minimum=1, maximum=10_000)
        check_int(self, "traj_steps", minimum=2, maximum=10_000)
        check_int(self, "rollout_steps", minimum=1, maximum=self.traj_steps)
        check_int(self, "grid_1d", minimum=16, maximum=8192)
        check_int(self, "grid_2d", minimum=8, maximum=512)
        for name in ("grid_1d", "grid_2d"):
            if getattr(self, name) % 2:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; expected an even number")
        check_int(self, "width", minimum=1, maximum=1024)
        check_int(self, "modes", minimum=1, maximum=self.grid_1d // 2)
        check_int(self, "modes_2d", minimum=1, maximum=self.grid_2d // 2)
        check_int(self, "iterations", minimum=1, maximum=10_000_000)
        check_int(self, "batch_size", minimum=1, maximum=100_000)
        check_float(self, "lr", minimum=0.0, exclusive_min=True, maximum=1.0)
        check_float(self, "mean_depth", minimum=1.0, maximum=1024.0)
        check_float(self, "depth_sigma", minimum=0.0, maximum=3.0)
        check_int(self, "grad_depth", minimum=1, maximum=1024)
        check_int(self, "fixed_depth", minimum=1, maximum=1024)
        check_int(self, "deq_max_iter", minimum=1, maximum=10_000)
        check_float(self, "deq_tol", minimum=0.0, exclusive_min=True, maximum=1.0)
        check_seq(self, "K_eval", minimum=1, maximum=1024)
        if any(not isinstance(k, int) or isinstance(k, bool) for k in self.K_eval):
            raise ConfigError(f"K_eval={self.K_eval!r} is not allowed; expected whole numbers")
        if list(self.K_eval) != sorted(set(self.K_eval)):
            raise ConfigError(f"K_eval={self.K_eval!r} is not allowed; expected strictly increasing values")
        check_float(self, "alpha_min", minimum=0.0, maximum=1.0, exclusive_min=True, exclusive_max=True)
        check_float(self, "alpha_max", minimum=self.alpha_min, maximum=1.0, exclusive_max=True)
        check_int(self, "n_alpha", minimum=1, maximum=1000)
        check_int(self, "timing_repeats", minimum=1, maximum=1000)
        check_int(self, "threads", minimum=1, maximum=256)

    @property
    def alphas(self) -> np.ndarray:
        """Correlation thresholds of tau_alpha, shape (n_alpha,)."""
        if self.n_alpha == 1:
            return np.array([self.alpha_min])
        return np.round(np.linspace(self.alpha_min, self.alpha_max, self.n_alpha), 6)
