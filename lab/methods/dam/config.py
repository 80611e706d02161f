"""Configuration of the dense associative memory experiments."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from lab.config import BaseConfig, ConfigError, check_choice, check_float, check_int, check_seq

#: Largest pattern matrix (P x N float64) a run may allocate, in bytes.
MAX_PATTERN_BYTES = 4 * 2**30


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """Dense associative memory: overlap dynamics, basins and capacity against theory (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(N=96, N_n2=(64, 128), alphas=(0.04, 0.08, 0.12), alphas_n2=(0.08, 0.14, 0.2),
                   m0s=(0.3, 0.6, 1.0), trials=3, steps=6, capacity_steps=10),
        "quick": {},
        "full": dict(N=1024, N_n2=(512, 1024, 2048, 4096, 8192), trials=20, steps=30,
                     alphas=(0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.075, 0.08, 0.085, 0.09, 0.1, 0.12, 0.14)),
    }

    n: int = 3
    """Order of the separation function F(x) = x^n (the paper's theory is for n >= 3, its experiments n = 3)."""
    F: Literal["power", "exp"] = "power"
    """Separation function: 'power' (x^n) or 'exp' (e^x; no signal-to-noise theory, so its theory claims fail)."""
    N: int = 512
    """Number of spins of the order-n network."""
    alphas: tuple[float, ...] = (0.02, 0.04, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12)
    """Loads alpha = P / N^(n-1) for order n."""
    N_n2: tuple[int, ...] = (256, 512, 1024, 2048)
    """Sizes of the classical n = 2 reference network: its capacity is measured at each and extrapolated to large N
    as alpha_c(N) = alpha_c + c / sqrt(N); trajectories are recorded at the largest (empty: no reference run)."""
    alphas_n2: tuple[float, ...] = (0.08, 0.1, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.2, 0.25)
    """Loads alpha = P / N of the n = 2 reference network."""
    m0s: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    """Initial overlaps with pattern 1, each set by flipping exactly round(N (1 - m0) / 2) bits."""
    trials: int = 10
    """Initial states per (alpha, m0); patterns are drawn once per alpha."""
    steps: int = 20
    """Update sweeps per trajectory."""
    update: Literal["sync", "async"] = "sync"
    """Synchronous (all spins at once, the paper's setting) or asynchronous (random order, energy never rises)."""
    eps: float = 0.02
    """Converged when m >= 1 - eps: defines the convergence time."""
    retrieved: float = 0.5
    """A trajectory from m0 < 1 retrieves the pattern when its final overlap is at least this (basin edge); for
    n >= 3 the outcomes are bimodal (m -> 0 or m -> ~1), so any value in between separates them."""
    retrieved_capacity: float = 0.9
    """A run started at the pattern itself still holds it when its final overlap is at least this (critical loads):
    the AGS retrieval state has m >= 0.967 up to alpha_c, and collapsed states fall well below."""
    capacity_steps: int = 60
    """Sweeps of the n = 2 capacity runs (stopped early at a fixed point): collapse near alpha_c is slow."""

    def validate(self) -> None:
        check_int(self, "n", minimum=2, maximum=6)
        check_choice(self, "F", ("power", "exp"))
        check_choice(self, "update", ("sync", "async"))
        check_int(self, "N", minimum=16, maximum=100_000)
        check_seq(self, "alphas", minimum=0.0, exclusive_min=True, maximum=10.0)
        check_seq(self, "alphas_n2", minimum=0.0, exclusive_min=True, maximum=10.0)
        check_seq(self, "N_n2", minimum=16, maximum=100_000, nonempty=False)
        if any(isinstance(v, float) for v in self.N_n2):
            raise ConfigError(f"N_n2={self.N_n2!r} is not allowed; expected whole numbers")
        check_seq(self, "m0s", minimum=-1.0, maximum=1.0)
        check_int(self, "trials", minimum=1, maximum=10_000)
        check_int(self, "steps", minimum=1, maximum=10_000)
        check_float(self, "eps", minimum=0.0, maximum=1.0, exclusive_min=True, exclusive_max=True)
        check_float(self, "retrieved", minimum=0.0, maximum=1.0, exclusive_min=True)
        check_float(self, "retrieved_capacity", minimum=0.0, maximum=1.0, exclusive_min=True)
        check_int(self, "capacity_steps", minimum=1, maximum=100_000)
        for name in ("alphas", "alphas_n2", "m0s", "N_n2"):
            values = getattr(self, name)
            if list(values) != sorted(set(values)):
                raise ConfigError(f"{name}={values!r} is not allowed; expected strictly increasing values")
        largest = self.patterns(max(self.alphas), self.n) * self.N * 8
        if largest > MAX_PATTERN_BYTES:
            raise ConfigError(
                f"N={self.N!r} with n={self.n} and alpha up to {max(self.alphas)} needs "
                f"{largest / 2**30:.1f} GiB of patterns; allowed: at most {MAX_PATTERN_BYTES / 2**30:.0f} GiB "
                "(lower N or alphas)"
            )

    def patterns(self, alpha: float, n: int | None = None) -> int:
        """P = round(alpha N^(n-1)), at least 1."""
        n = self.n if n is None else n
        return max(1, round(alpha * self.N ** (n - 1)))
