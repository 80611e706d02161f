"""Configuration of the AIRE-Prune experiments."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import Budget, ssm_weights, task_sizes, training
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.fields import Seeds, SequenceTaskConfig, States

KINDS = ("lru", "s5")
SCORES = ("aire", "last", "magnitude", "random", "aire_uniform")


@dataclasses.dataclass(frozen=True)
class Config(SequenceTaskConfig, BaseConfig):
    """AIRE-Prune: train LRU and S5 classifiers, prune their states without retraining (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(n_layers=2, d_model=16, d_state=16, lru_d_state=16, epochs=1, ratios=(0.0, 0.5, 0.95),
                   random_draws=2, timing_repeats=1, n_train=256, n_test=128, n_seeds=2),
        "quick": {},
        "full": dict(dataset="mnist1d", n_layers=4, d_model=64, d_state=256, lru_d_state=256, epochs=60,
                     n_seeds=3,
                     ratios=tuple(round(0.05 * k, 2) for k in range(20)), random_draws=5, timing_repeats=5),
    }

    d_state: States = 256
    """Complex states per S5 layer (each one a conjugate pair of the real system): the state space must be redundant
    for pruning to be free (measured at quick on digits, 4 layers of 32 features, 3 seeds: AIRE loses 1.7 pt at 50%
    pruned with 64 states, 1.3 with 128, 0.4 with 256)."""
    lru_d_state: States = 64
    """Complex states per LRU layer: the LRU is a report row (its γ normalisation flattens the energy spectrum), kept
    small so that quick stays within its time."""
    n_seeds: Seeds = 3
    """Independently trained models per kind (seeds seed, seed+1, ...); the claims state their statistic over them."""
    kinds: Annotated[tuple[str, ...], Choices(*KINDS), Each(unique=True)] = KINDS
    """SSM layers to train and prune: 'lru' (Orvieto et al.), 's5' (ZOH, conjugate-symmetric MIMO)."""
    ratios: Annotated[tuple[float, ...], Range(0.0, 1.0, hi_open=True), Each(min_len=2, increasing=True)] = (
        0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    """Pruning ratios: the share of all states removed, increasing from 0.0 (the unpruned model)."""
    scores: Annotated[tuple[str, ...], Choices(*SCORES), Each(unique=True)] = SCORES
    """Pruning scores compared: aire, last, magnitude, random, aire_uniform (AIRE per layer, no global ranking)."""
    headline_ratio: Annotated[float, Range(0.0, 1.0, hi_open=True)] = 0.5
    """Ratio at which the claims compare scores (must be in ratios); the lab's plan: 50%."""
    random_draws: Annotated[int, Range(1, 1000)] = 3
    """Random prunings averaged per ratio."""
    timing_repeats: Annotated[int, Range(1, 100)] = 3
    """Repeats of the inference timing of each AIRE-pruned model (the minimum is kept)."""
    use_cache: bool = True
    """Reuse trained weights cached under data/aire_prune/ (trained and stored on first use)."""

    def state_size(self, kind: str) -> int:
        """Complex states per layer of the ``kind`` models: ``lru_d_state`` for the LRU, ``d_state`` for S5."""
        return self.lru_d_state if kind == "lru" else self.d_state

    def validate(self) -> None:
        if self.ratios[0] != 0.0:
            raise bad_value("ratios", self.ratios, "increasing values starting at 0.0 (the unpruned model)")
        if self.headline_ratio not in self.ratios:
            raise bad_value("headline_ratio", self.headline_ratio, f"one of ratios {self.ratios!r}")
        if "aire" not in self.scores:
            raise bad_value("scores", self.scores, "a set of scores that includes 'aire'")

    def run_budget(self) -> Budget:
        """Work: len(kinds) x n_seeds trainings of epochs x n_train sequences (SSM layers of about 4 d_state d_model
        + 2 d_model^2 weights, 6 operations per weight and token, plus the scan's 16 d_state per token), then per
        model every score at every ratio (random: random_draws of them) and the timings evaluated on the test
        set. Memory: a batch's activations and complex states over the layers, the whole test set's at evaluation,
        the model with AdamW's moments."""
        n_train, n_test, length = task_sizes(self.dataset, self.n_train, self.n_test)
        steps = self.epochs * -(-n_train // self.batch_size)
        evals = len(self.ratios) * (len(self.scores) + self.random_draws + 1 + self.timing_repeats)
        memory = work = 0.0
        for kind in self.kinds:
            n = self.state_size(kind)
            weights = ssm_weights(self.d_model, n, self.n_layers)
            width = self.d_model + 4 * n
            mem, w = training(self.n_seeds, steps, self.batch_size, length, weights, width, self.n_layers)
            scan = 6 * 16.0 * n * self.n_layers * n_train * length * self.epochs
            work += w + self.n_seeds * (scan + evals * n_test * length * (2 * weights + 16 * n))
            memory = max(memory, mem, 16.0 * n_test * length * width)  # evaluation: one layer of the test set
        return Budget(memory, work, "aire_prune's trainings: kinds x n_seeds x epochs x n_train sequences through "
                      "n_layers SSM layers, and the pruning sweeps on the test set",
                      ("epochs", "n_seeds", "d_state", "lru_d_state", "d_model", "n_layers", "n_train", "ratios",
                       "random_draws"))
