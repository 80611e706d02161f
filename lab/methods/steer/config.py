"""Configuration of the STEER experiments (plasticity-rule inference across stimulation sessions)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import Budget
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.runtime import RuntimeConfig
from lab.datasets.plasticity import BENCHMARKS, PATTERNS

#: schedules a test may use (the training schedule is 'random')
TEST_PATTERNS = tuple(p for p in PATTERNS if p != "random")


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """STEER: fit fast dynamics and a slow plasticity law on training sessions, predict unseen schedules, recover the
    rule, design a protocol (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(benchmarks=("lowrank_linear", "lorenz", "bcm_network"), N=10, T=100, K_train=14, K_test=5,
                   test_patterns=("periodic", "ramp"), iterations=8, als_iterations=3, lambda_smooth=0.01,
                   rule_horizon=2, mlp_iterations=20, design_horizon=3, n_targets=1, seeds=2,
                   n_random=4),
        "quick": {},
        "full": dict(N=50, T=2000, K_train=100, K_test=20, iterations=300, als_iterations=20,
                     mlp_iterations=1000, n_targets=6, n_random=50, seeds=5),
    }

    benchmarks: Annotated[tuple[str, ...], Choices(*BENCHMARKS), Each(unique=True)] = BENCHMARKS
    """Benchmarks to run (lab.datasets.plasticity): 'lowrank_linear', 'lowrank_bcm' (low-rank network, linear or
    BCM-like law), 'lorenz' (drifting rho), 'bcm_network' (full-rank BCM synapses: off the model's assumptions)."""
    N: Annotated[int, Range(6, 500)] = 30
    """Units of the rate networks (the Lorenz system has 3)."""
    rank: Annotated[int, Range(2, 10)] = 2
    """Rank R of the session-specific connectivity fitted to the rate networks, at least the low-rank benchmarks'
    true rank 2 so that every true component can be matched (the Lorenz benchmark uses 1, the rank of its shift)."""
    T: Annotated[int, Range(20, 100_000)] = 1000
    """Recorded steps per session (dt = 0.1 for the networks, 0.005 for Lorenz)."""
    sigma_process: Annotated[float, Range(0.0, 5.0)] = 0.03
    """Process noise of the rate networks' fast dynamics (per sqrt time unit)."""
    K_train: Annotated[int, Range(8, 10_000)] = 60
    """Training sessions, under a random stimulation schedule."""
    train_block: Annotated[int, Range(1, 100)] = 4
    """The training schedule holds each random level for 1 to train_block sessions."""
    u_max: Annotated[float, Range(0.0, 5.0, lo_open=True)] = 1.0
    """Largest stimulation summary: training levels are u_max * {0, 1/4, ..., 1}; designed schedules stay in
    [0, u_max]."""
    K_test: Annotated[int, Range(2, 10_000)] = 12
    """Sessions of each unseen test schedule, continuing from the end of training."""
    test_patterns: Annotated[tuple[str, ...], Choices(*TEST_PATTERNS), Each(unique=True)] = (
        "periodic", "ramp", "burst", "constant")
    """Unseen schedules (stimulation_schedule patterns, amplitude u_max, blocks of test_period sessions)."""
    test_period: Annotated[int, Range(1, 1000)] = 3
    """Block length of the 'periodic' and 'burst' test schedules."""
    iterations: Annotated[int, Range(0, 100_000)] = 100
    """L-BFGS iterations of the joint fit (after the ALS start), and of the black-box GRU (the same budget)."""
    als_iterations: Annotated[int, Range(1, 10_000)] = 10
    """Alternating-least-squares sweeps that start the joint fit."""
    lambda_cons: Annotated[float, Range(0.0, 1e6)] = 0.01
    """Weight of consistency with the slow law, ||c_{k+1} - g(c_k, ū_k)||² / var(c) (mild: a strong weight pulls the
    coefficients towards the law being learned, spurious terms included, and biases the rule)."""
    lambda_smooth: Annotated[float, Range(0.0, 1e6)] = 0.0
    """Weight of the smoothness penalty ||c_{k+1} - c_k||² / var(c) (off by default: it slows the inferred change
    and so biases the rule)."""
    lambda_orth: Annotated[float, Range(0.0, 1e6)] = 1.0
    """Weight of the identifiability penalty ||mᵀm - I||² + ||nᵀn - I||² (unit-norm, orthogonal factors)."""
    rule_horizon: Annotated[int, Range(1, 1000)] = 8
    """Sessions ahead that the rule's coefficients are fitted to predict from every inferred c_k, after the
    best-subset selection on the increments (1: plain least squares on the increments)."""
    mlp_hidden: Annotated[int, Range(1, 4096)] = 32
    """Hidden units of the MLP law g_θ."""
    mlp_iterations: Annotated[int, Range(0, 1_000_000)] = 300
    """Adam steps of the MLP law."""
    gru_hidden: Annotated[int, Range(1, 4096)] = 32
    """Hidden units of the black-box GRU over sessions (trained with STEER's optimiser and budget: L-BFGS for
    ``iterations`` iterations)."""
    horizon: Annotated[int, Range(1, 100_000)] = 10
    """Steps of the windowed predictions behind the training sessions' R² (restarted from the recording every
    horizon steps); held-out sessions are scored by a free rollout over the whole session."""
    design_horizon: Annotated[int, Range(1, 1000)] = 8
    """Sessions of a designed intervention."""
    n_targets: Annotated[int, Range(1, 1000)] = 3
    """Designed-intervention targets, each the outcome of a hidden random schedule on the true system."""
    n_random: Annotated[int, Range(1, 100_000)] = 20
    """Random schedules compared with each designed one."""
    seeds: Annotated[int, Range(1, 20)] = 3
    """Seeds (seed, seed + 1, ...) of the off-assumption benchmark's connectivity errors: the report row
    off_assumption_bcm, whose margin is within seed noise, gives each (everything else uses ``seed`` alone)."""

    def validate(self) -> None:
        if self.rank >= self.N:
            raise bad_value("rank", self.rank, f"an integer below N = {self.N}")
        if self.rule_horizon >= self.K_train:
            raise bad_value("rule_horizon", self.rule_horizon, f"an integer below K_train = {self.K_train}")
        if self.horizon > self.T:
            raise bad_value("horizon", self.horizon, f"an integer at most T = {self.T}")

    def run_budget(self) -> Budget:
        """Per fit (each benchmark, and seeds - 1 more of the off-assumption one): simulating the training and test
        sessions (T steps of an N x N network each, and for every design target n_random + 8 candidate schedules of
        design_horizon sessions), the joint fit's ALS sweeps and L-BFGS iterations over K_train x T x N x rank
        predictions (forward and backward, a few evaluations an iteration), the black-box GRU and the MLP law.
        Memory: the recorded sessions and the joint fit's autograd graph over them (float64)."""
        N, T, R = self.N, self.T, self.rank
        fits = len(self.benchmarks) + (self.seeds - 1) * ("bcm_network" in self.benchmarks)
        sessions = self.K_train + 2 * self.K_test * len(self.test_patterns)
        simulate = sessions * T * 4.0 * N * N
        design = self.n_targets * (self.n_random + 8) * self.design_horizon * T * 4.0 * N * N
        fit = (3 * self.iterations + self.als_iterations) * self.K_train * T * 90.0 * N * R
        windows = 4 * self.K_train * T * 2.0 * N * R * 10
        gru = 3 * self.iterations * self.K_train * 18.0 * (self.gru_hidden ** 2 + self.gru_hidden * N * R)
        mlp = self.mlp_iterations * self.K_train * 18.0 * self.mlp_hidden * (R + 4) * self.rule_horizon
        work = fits * (simulate + fit + windows + gru + mlp) + len(self.benchmarks) * design
        memory = 8.0 * sessions * T * N * 4 + 8.0 * self.K_train * T * N * (R + 2) * 12 + 8.0 * sessions * N * N * 4
        return Budget(memory, work, "steer's joint fits: iterations x K_train x T x N x rank predictions per "
                      "benchmark, and the simulated sessions", ("T", "K_train", "N", "iterations", "n_random",
                                                               "n_targets", "K_test", "seeds", "rank"),
                      memory_what="steer's recorded sessions and the joint fit's graph: K_train x T x N values")
