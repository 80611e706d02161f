"""Configuration of the STEER experiments (plasticity-rule inference across stimulation sessions)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lab.config import BaseConfig, ConfigError, check_float, check_int, check_seq
from lab.datasets.plasticity import BENCHMARKS, PATTERNS


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """STEER: fit fast dynamics and a slow plasticity law on training sessions, predict unseen schedules, recover the
    rule, design a protocol (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(benchmarks=("lowrank_linear", "lorenz", "bcm_network"), N=10, T=100, K_train=14, K_test=5,
                   test_patterns=("periodic", "ramp"), iterations=8, als_iterations=3, lambda_smooth=0.01,
                   rule_horizon=2, mlp_iterations=20, gru_iterations=10, design_horizon=3, n_targets=1,
                   n_random=4),
        "quick": {},
        "full": dict(N=50, T=2000, K_train=100, K_test=20, iterations=300, als_iterations=20,
                     mlp_iterations=1000, gru_iterations=500, n_targets=6, n_random=50),
    }

    benchmarks: tuple[str, ...] = BENCHMARKS
    """Benchmarks to run (lab.datasets.plasticity): 'lowrank_linear', 'lowrank_bcm' (low-rank network, linear or
    BCM-like law), 'lorenz' (drifting rho), 'bcm_network' (full-rank BCM synapses: off the model's assumptions)."""
    N: int = 30
    """Units of the rate networks (the Lorenz system has 3)."""
    rank: int = 2
    """Rank R of the session-specific connectivity fitted to the rate networks, at least the low-rank benchmarks'
    true rank 2 so that every true component can be matched (the Lorenz benchmark uses 1, the rank of its shift)."""
    T: int = 1000
    """Recorded steps per session (dt = 0.1 for the networks, 0.005 for Lorenz)."""
    sigma_process: float = 0.03
    """Process noise of the rate networks' fast dynamics (per sqrt time unit)."""
    K_train: int = 60
    """Training sessions, under a random stimulation schedule."""
    train_block: int = 4
    """The training schedule holds each random level for 1 to train_block sessions."""
    u_max: float = 1.0
    """Largest stimulation summary: training levels are u_max * {0, 1/4, ..., 1}; designed schedules stay in
    [0, u_max]."""
    K_test: int = 12
    """Sessions of each unseen test schedule, continuing from the end of training."""
    test_patterns: tuple[str, ...] = ("periodic", "ramp", "burst", "constant")
    """Unseen schedules (stimulation_schedule patterns, amplitude u_max, blocks of test_period sessions)."""
    test_period: int = 3
    """Block length of the 'periodic' and 'burst' test schedules."""
    iterations: int = 100
    """L-BFGS iterations of the joint fit (after the ALS start)."""
    als_iterations: int = 10
    """Alternating-least-squares sweeps that start the joint fit."""
    lambda_cons: float = 0.01
    """Weight of consistency with the slow law, ||c_{k+1} - g(c_k, ū_k)||² / var(c) (mild: a strong weight pulls the
    coefficients towards the law being learned, spurious terms included, and biases the rule)."""
    lambda_smooth: float = 0.0
    """Weight of the smoothness penalty ||c_{k+1} - c_k||² / var(c) (off by default: it slows the inferred change
    and so biases the rule)."""
    lambda_orth: float = 1.0
    """Weight of the identifiability penalty ||mᵀm - I||² + ||nᵀn - I||² (unit-norm, orthogonal factors)."""
    rule_horizon: int = 8
    """Sessions ahead that the rule's coefficients are fitted to predict from every inferred c_k, after the
    best-subset selection on the increments (1: plain least squares on the increments)."""
    mlp_hidden: int = 32
    """Hidden units of the MLP law g_θ."""
    mlp_iterations: int = 300
    """Adam steps of the MLP law."""
    gru_hidden: int = 32
    """Hidden units of the black-box GRU over sessions."""
    gru_iterations: int = 150
    """Adam steps of the black-box GRU."""
    horizon: int = 10
    """Steps of the within-session predictions behind R² (restarted from the recording every horizon steps)."""
    design_horizon: int = 8
    """Sessions of a designed intervention."""
    n_targets: int = 3
    """Designed-intervention targets, each the outcome of a hidden random schedule on the true system."""
    n_random: int = 20
    """Random schedules compared with each designed one."""
    threads: int = 1
    """Torch threads during the run (the problems are small: one thread is usually fastest)."""

    def validate(self) -> None:
        check_seq(self, "benchmarks", choices=BENCHMARKS)
        if len(set(self.benchmarks)) != len(self.benchmarks):
            raise ConfigError(f"benchmarks={self.benchmarks!r} is not allowed; expected each benchmark once")
        check_int(self, "N", minimum=6, maximum=500)
        check_int(self, "rank", minimum=2, maximum=10)
        if self.rank >= self.N:
            raise ConfigError(f"rank={self.rank!r} is not allowed; expected rank < N = {self.N}")
        check_int(self, "T", minimum=20, maximum=100_000)
        check_float(self, "sigma_process", minimum=0.0, maximum=5.0)
        check_int(self, "K_train", minimum=8, maximum=10_000)
        check_int(self, "train_block", minimum=1, maximum=100)
        check_float(self, "u_max", minimum=0.0, maximum=5.0, exclusive_min=True)
        check_int(self, "K_test", minimum=2, maximum=10_000)
        check_seq(self, "test_patterns", choices=tuple(p for p in PATTERNS if p != "random"))
        check_int(self, "test_period", minimum=1, maximum=1000)
        check_int(self, "iterations", minimum=0, maximum=100_000)
        check_int(self, "als_iterations", minimum=1, maximum=10_000)
        check_float(self, "lambda_cons", minimum=0.0, maximum=1e6)
        check_float(self, "lambda_smooth", minimum=0.0, maximum=1e6)
        check_float(self, "lambda_orth", minimum=0.0, maximum=1e6)
        check_int(self, "rule_horizon", minimum=1, maximum=1000)
        if self.rule_horizon >= self.K_train:
            raise ConfigError(
                f"rule_horizon={self.rule_horizon!r} is not allowed; expected < K_train = {self.K_train}"
            )
        check_int(self, "mlp_hidden", minimum=1, maximum=4096)
        check_int(self, "mlp_iterations", minimum=0, maximum=1_000_000)
        check_int(self, "gru_hidden", minimum=1, maximum=4096)
        check_int(self, "gru_iterations", minimum=0, maximum=1_000_000)
        check_int(self, "horizon", minimum=1, maximum=100_000)
        if self.horizon > self.T:
            raise ConfigError(f"horizon={self.horizon!r} is not allowed; expected at most T = {self.T}")
        check_int(self, "design_horizon", minimum=1, maximum=1000)
        check_int(self, "n_targets", minimum=1, maximum=1000)
        check_int(self, "n_random", minimum=1, maximum=100_000)
        check_int(self, "threads", minimum=1, maximum=256)
