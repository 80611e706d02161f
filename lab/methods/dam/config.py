"""Configuration of the dense associative memory experiments."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.budget import Budget
from lab.config import BaseConfig, Each, Range, bad_value

#: Largest pattern matrix (P x N float64) a run may allocate, in bytes.
MAX_PATTERN_BYTES = 4 * 2**30

#: critical loads the comparison's relative loads refer to (theory.critical_load(n) for n >= 3, rounded up;
#: n = 2: AGS 0.138), for the budget without importing the theory
CRITICAL_LOADS = {2: 0.138, 3: 0.0841, 4: 0.0132, 5: 0.00165, 6: 0.000167}

Loads = Annotated[tuple[float, ...], Range(0.0, 10.0, lo_open=True), Each(increasing=True)]


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """Dense associative memory: overlap dynamics, basins and capacity against theory (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(N=96, N_n2=(64, 128), alphas=(0.04, 0.08, 0.12), alphas_n2=(0.08, 0.14, 0.2),
                   m0s=(0.3, 0.6, 1.0), trials=3, steps=6, capacity_steps=10, lags=4),
        "quick": {},
        "full": dict(N=1024, N_n2=(512, 1024, 2048, 4096, 8192), trials=20, steps=30,
                     alphas=(0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.075, 0.08, 0.085, 0.09, 0.1, 0.12, 0.14)),
    }

    n: Annotated[int, Range(2, 6)] = 3
    """Order of the separation function F(x) = x^n (the paper's theory is for n >= 3, its experiments n = 3)."""
    F: Literal["power", "exp"] = "power"
    """Separation function: 'power' (x^n) or 'exp' (e^x; no signal-to-noise theory, so its theory claims fail)."""
    N: Annotated[int, Range(16, 100_000)] = 512
    """Number of spins of the order-n network."""
    alphas: Loads = (0.02, 0.04, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12)
    """Loads alpha = P / N^(n-1) for order n."""
    N_n2: Annotated[tuple[int, ...], Range(16, 100_000), Each(min_len=0, increasing=True)] = (256, 512, 1024, 2048)
    """Sizes of the classical n = 2 reference network: its capacity is measured at each and extrapolated to large N
    as alpha_c(N) = alpha_c + c / sqrt(N); trajectories are recorded at the largest (empty: no reference run)."""
    alphas_n2: Loads = (0.08, 0.1, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.2, 0.25)
    """Loads alpha = P / N of the n = 2 reference network."""
    m0s: Annotated[tuple[float, ...], Range(-1.0, 1.0), Each(increasing=True)] = (
        0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    """Initial overlaps with pattern 1, each set by flipping exactly round(N (1 - m0) / 2) bits."""
    trials: Annotated[int, Range(1, 10_000)] = 10
    """Initial states per (alpha, m0); patterns are drawn once per alpha."""
    steps: Annotated[int, Range(1, 10_000)] = 20
    """Update sweeps per trajectory."""
    update: Literal["sync", "async"] = "sync"
    """Synchronous (all spins at once, the paper's setting) or asynchronous (random order, energy never rises)."""
    eps: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.02
    """Converged when m >= m_s(alpha) - eps, m_s the recursion's retrieval fixed point at that load (1 - eps for
    F = exp): defines the convergence time; a trial that never gets there within the run is counted apart."""
    retrieved: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 0.5
    """A trajectory from m0 < 1 retrieves the pattern when its final overlap is at least this (basin edge); for
    n >= 3 the outcomes are bimodal (m -> 0 or m -> ~1), so any value in between separates them."""
    retrieved_capacity: Annotated[float, Range(0.0, 1.0, lo_open=True)] = 0.9
    """A run started at the pattern itself still holds it when its final overlap is at least this (critical loads):
    the AGS retrieval state has m >= 0.967 up to alpha_c, and collapsed states fall well below."""
    capacity_steps: Annotated[int, Range(1, 100_000)] = 60
    """Sweeps of the n = 2 capacity runs (stopped early at a fixed point): collapse near alpha_c is slow."""
    loads: Annotated[tuple[float, ...], Range(0.0, 1.0, lo_open=True, hi_open=True), Each(increasing=True)] = (
        0.3, 0.6, 0.9)
    """Loads relative to each order's own critical load (order n: the recursion's saddle-node; n = 2: AGS 0.138) at
    which order n and the n = 2 control are simulated side by side, from the same m0s for the same steps."""
    lags: Annotated[int, Range(1, 100)] = 6
    """Sweeps over which the crosstalk is recorded for the self-noise correlation C(0, s), s = 0..lags."""

    def validate(self) -> None:
        if self.lags > self.steps:
            raise bad_value("lags", self.lags, f"at most steps={self.steps}")
        largest = self.patterns(max(self.alphas), self.n) * self.N * 8
        if largest > MAX_PATTERN_BYTES:
            raise bad_value(
                "N", self.N,
                f"at most {MAX_PATTERN_BYTES / 2**30:.0f} GiB of patterns: with n={self.n} and alpha up to "
                f"{max(self.alphas)} this N needs {largest / 2**30:.1f} GiB (lower N or alphas)",
            )

    def patterns(self, alpha: float, n: int | None = None) -> int:
        """P = round(alpha N^(n-1)), at least 1."""
        n = self.n if n is None else n
        return max(1, round(alpha * self.N ** (n - 1)))

    def run_budget(self) -> Budget:
        """Memory: the recorded trajectories (alpha x m0 x trial x step floats for order n, the n = 2 grid and the
        side-by-side comparison with its one-step-ahead errors; three copies while the Dataset is built) and the
        largest pattern matrix with its P x m0 overlaps. Work: every sweep of every trajectory computes the overlaps
        and the fields, 4 P N operations per state (capacity runs: one state per trial)."""
        M, T = len(self.m0s), self.steps + 1
        big_n2 = max(self.N_n2, default=0)
        crit = [CRITICAL_LOADS[self.n] * max(self.loads), CRITICAL_LOADS[2] * max(self.loads)]
        shapes = [(self.N, self.patterns(max(self.alphas)))]  # (spins, patterns)
        shapes += [(big_n2, max(1, round(max(self.alphas_n2) * big_n2)))] if big_n2 else []
        shapes += [(self.N, max(1, round(crit[0] * self.N ** (self.n - 1)))), (self.N, round(crit[1] * self.N))]
        patterns = max(8.0 * N * P * 2 + 8.0 * 3 * M * P for N, P in shapes)
        n2 = len(self.alphas_n2) if big_n2 else 0
        # the side-by-side runs keep two (order) x loads trajectories and their one-step-ahead errors
        records = 8.0 * 3 * M * self.trials * (T * (len(self.alphas) + n2 + 4 * len(self.loads)) + 2 * self.lags)
        per_state = 4.0 * M * self.trials * self.steps
        work = per_state * sum(self.patterns(a) * self.N for a in self.alphas)
        work += per_state * sum(max(1, round(a * big_n2)) * big_n2 for a in self.alphas_n2) if big_n2 else 0.0
        work += 4.0 * self.trials * self.capacity_steps * sum(a * N * N for N in self.N_n2 for a in self.alphas_n2)
        work += per_state * self.N * len(self.loads) * (crit[0] * self.N ** (self.n - 1) + crit[1] * self.N)
        return Budget(patterns + records, work, "dam's trajectories: alphas x m0s x trials x steps sweeps of P x N "
                      "overlaps", ("trials", "steps", "N", "alphas", "N_n2", "alphas_n2", "capacity_steps", "m0s",
                                   "loads", "n"),
                      memory_what="dam's recorded trajectories (alphas x m0s x trials x steps floats) and "
                                  "pattern matrices")
