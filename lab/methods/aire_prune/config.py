"""Configuration of the AIRE-Prune experiments."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from lab.config import BaseConfig, ConfigError, check_choice, check_float, check_int, check_seq

KINDS = ("lru", "s5")
SCORES = ("aire", "last", "magnitude", "random", "aire_uniform")
DATASETS = ("digits", "mnist1d")


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """AIRE-Prune: train LRU and S5 classifiers, prune their states without retraining (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(n_layers=2, d_model=16, d_state=16, epochs=1, ratios=(0.0, 0.5, 0.95), random_draws=1,
                   timing_repeats=1, n_train=256, n_test=128),
        "quick": {},
        "full": dict(dataset="mnist1d", n_layers=4, d_model=64, d_state=128, epochs=60, n_seeds=3,
                     ratios=tuple(round(0.05 * k, 2) for k in range(20)), random_draws=5, timing_repeats=5),
    }

    dataset: Literal["digits", "mnist1d"] = "digits"
    """Sequence task: sklearn digits read pixel by pixel (length 64) or MNIST-1D (length 40)."""
    permuted: bool = False
    """Apply a fixed random permutation of the time steps (the permuted variant of the task)."""
    n_train: int = 0
    """Use only the first n_train training sequences (0: all)."""
    n_test: int = 0
    """Use only the first n_test test sequences (0: all)."""
    kinds: tuple[str, ...] = KINDS
    """SSM layers to train and prune: 'lru' (Orvieto et al.), 's5' (ZOH, conjugate-symmetric MIMO)."""
    n_layers: int = 4
    """Residual SSM blocks per model (the research brief's plan: 4 layers, H = 32, 64 states)."""
    d_model: int = 32
    """Features H of each block."""
    d_state: int = 64
    """Complex states per layer before pruning (each one a conjugate pair of the real system)."""
    epochs: int = 20
    """Training epochs."""
    batch_size: int = 64
    """Mini-batch size."""
    lr: float = 5e-3
    """Peak learning rate (AdamW, warm-up then cosine decay)."""
    ssm_lr: float = 2e-3
    """Learning rate of the recurrence parameters (eigenvalues, step sizes), without weight decay."""
    weight_decay: float = 0.05
    """AdamW weight decay of the matrices."""
    n_seeds: int = 1
    """Independently trained models per kind (seeds seed, seed+1, ...)."""
    ratios: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    """Pruning ratios: the share of all states removed (each in [0, 1))."""
    scores: tuple[str, ...] = SCORES
    """Pruning scores compared: aire, last, magnitude, random, aire_uniform (AIRE per layer, no global ranking)."""
    headline_ratio: float = 0.5
    """Ratio at which the claims compare scores (must be in ratios); the research brief's 50%."""
    random_draws: int = 3
    """Random prunings averaged per ratio."""
    timing_repeats: int = 3
    """Repeats of the inference timing of each AIRE-pruned model (the minimum is kept)."""
    threads: int = 1
    """Torch and Numba threads (1 is fastest for these small models on a shared machine)."""
    use_cache: bool = True
    """Reuse trained weights cached under data/aire_prune/ (trained and stored on first use)."""

    def validate(self) -> None:
        check_choice(self, "dataset", DATASETS)
        check_int(self, "n_train", minimum=0)
        check_int(self, "n_test", minimum=0)
        check_seq(self, "kinds", choices=KINDS)
        check_int(self, "n_layers", minimum=1, maximum=16)
        check_int(self, "d_model", minimum=2, maximum=1024)
        check_int(self, "d_state", minimum=1, maximum=4096)
        check_int(self, "epochs", minimum=1, maximum=10_000)
        check_int(self, "batch_size", minimum=1, maximum=100_000)
        check_float(self, "lr", minimum=0.0, exclusive_min=True, maximum=1.0)
        check_float(self, "ssm_lr", minimum=0.0, exclusive_min=True, maximum=1.0)
        check_float(self, "weight_decay", minimum=0.0, maximum=1.0)
        check_int(self, "n_seeds", minimum=1, maximum=100)
        check_seq(self, "ratios", minimum=0.0, maximum=1.0, exclusive_max=True)
        check_seq(self, "scores", choices=SCORES)
        check_float(self, "headline_ratio", minimum=0.0, maximum=1.0, exclusive_max=True)
        check_int(self, "random_draws", minimum=1, maximum=1000)
        check_int(self, "timing_repeats", minimum=1, maximum=100)
        check_int(self, "threads", minimum=1, maximum=256)
        for name in ("ratios", "kinds", "scores"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ConfigError(f"{name}={values!r} is not allowed; expected distinct values")
        if list(self.ratios) != sorted(self.ratios) or self.ratios[0] != 0.0:
            raise ConfigError(f"ratios={self.ratios!r} is not allowed; expected increasing values starting at 0.0 "
                              "(the unpruned model)")
        if self.headline_ratio not in self.ratios:
            raise ConfigError(f"headline_ratio={self.headline_ratio!r} is not allowed; it must be one of ratios "
                              f"{self.ratios!r}")
        if "aire" not in self.scores:
            raise ConfigError(f"scores={self.scores!r} is not allowed; 'aire' must be among them")

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))
