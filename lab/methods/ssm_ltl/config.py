"""Configuration of the SSM-expressiveness experiments: hand-built constructions checked to long lengths, and
trained one-layer models of each gating class."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import Budget, train_bytes, train_ops
from lab.config import BaseConfig, Each, Range, bad_value
from lab.core.fields import Rate, Seeds
from lab.core.runtime import RuntimeConfig
from lab.datasets.languages import MAX_LENGTH


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """SSM expressiveness via temporal logic (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(check_length=1000, check_words=4, steps=40, n_train=32, n_test=8, n_seeds=1,
                   test_factors=(1, 4), run_lengths=(1, 16, 256)),
        "quick": {},
        "full": dict(check_length=100_000, check_words=16, steps=1500, n_seeds=8, test_factors=(1, 2, 4, 8, 16, 32)),
    }

    modulus: Annotated[int, Range(2, 64)] = 2
    """Modulus m of mod_count (#a ≡ 0 mod m) for the trained models and the hand-built gated rotation; 2 is parity.
    Only m = 2 has an int8 rotation (the gate -1)."""
    check_length: Annotated[int, Range(16, MAX_LENGTH)] = 10_000
    """Longest word of the hand-built checks (the brief: 10^4); words of 10, 100, ... letters up to it."""
    check_words: Annotated[int, Range(1, 1000)] = 8
    """Sampled words per language and length in the hand-built checks (a^n b^n c^n also gets its own grid of n)."""
    lti_decay: Annotated[float, Range(0.0, 0.5, lo_open=True, hi_open=True)] = 0.4
    """Decay λ of the time-invariant 'since' (the control): exact with real numbers for any λ < 1/2."""
    decay_gate: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True)] = 0.9
    """Gate g in (0, 1) of the (aa)* control that decodes the length from h_t = (1 - g^t) / (1 - g)."""
    train_length: Annotated[int, Range(2, 4096)] = 16
    """Word length the trained models see (the brief: 16-32)."""
    test_factors: Annotated[tuple[int, ...], Range(1, 1000), Each(increasing=True)] = (1, 2, 4, 8)
    """Test lengths as multiples of train_length (1: the training length)."""
    claim_factor: Annotated[int, Range(2, 1000)] = 4
    """The test length (x train_length) the learnability claims read, on the positions beyond train_length (must be
    in test_factors); the brief's 4x."""
    run_lengths: Annotated[tuple[int, ...], Range(1, 100_000), Each(increasing=True)] = (
        1, 4, 16, 64, 256, 1024, 4096)
    """Runs of b's in the long-run test of b S a: a test word of train_length letters, an a or a c, then the run;
    the decision at its end. Runs past a layer's float32 horizon (measured) are where fixed width bites."""
    d_state: Annotated[int, Range(1, 256)] = 4
    """State channels of the trained layer (complex for the time-invariant class)."""
    d_hidden: Annotated[int, Range(2, 1024)] = 32
    """Width of the ReLU readout φ(h_t, x_t)."""
    control_lookup: Annotated[int, Range(0, 4096)] = 64
    """The trained (0, 1)-gate controls on (aa)* and parity read their states through a count lookup as well as
    the MLP: a learned logit table for each integer in [-control_lookup, control_lookup], so that they can fit
    their training length (a (0, 1) gate can only count; an MLP fits a count's parity poorly). 0: no lookup."""
    steps: Annotated[int, Range(1, 1_000_000)] = 600
    """Training steps per model (AdamW, warm-up then cosine decay)."""
    batch_size: Annotated[int, Range(1, 100_000)] = 32
    """Words per training step."""
    lr: Rate = 3e-2
    """Peak learning rate."""
    n_train: Annotated[int, Range(1, 1_000_000)] = 256
    """Training words per language ((aa)* has one word per length: its rows are identical)."""
    n_test: Annotated[int, Range(1, 1_000_000)] = 64
    """Test words per language and length."""
    n_seeds: Seeds = 3
    """Trained models per class and language (seeds seed, seed+1, ...); the claims are means over seeds."""
    use_cache: bool = True
    """Reuse trained weights cached under data/ssm_ltl/ (trained and stored on first use)."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def validate(self) -> None:
        if self.claim_factor not in self.test_factors:
            raise bad_value("claim_factor", self.claim_factor, f"one of test_factors {self.test_factors!r}")
        if self.train_length * self.test_factors[-1] > MAX_LENGTH:
            raise bad_value("test_factors", self.test_factors,
                            f"factors with train_length x factor <= {MAX_LENGTH} (train_length={self.train_length})")

    def run_budget(self) -> Budget:
        """Memory: the hand-built checks at the longest word (check_words x check_length positions, about 400
        bytes each: tokens, labels, one-hot inputs, float64 and float32 states of the counters, measured), or the
        trained models' test words at the longest factor. Work: every construction in both precisions on every
        check position (about 5000 operations' time each, measured: numpy passes over small state vectors), and
        3 languages x 3 classes x n_seeds trainings of steps x batch_size x train_length tokens (each step about five
        small steps' overhead: the scan's kernels; measured: quick takes ~200 s on two shared cores); the two
        controls with a count lookup also carry its table and bumps (3 numbers per state channel and count)."""
        lengths = [10 ** k for k in range(1, 6) if 10 ** k < self.check_length] + [self.check_length]
        positions = self.check_words * sum(lengths)
        checks = Budget(400.0 * self.check_words * self.check_length, 7 * 2 * 5000.0 * positions,
                        "ssm_ltl's hand-built checks: check_words words of up to check_length letters",
                        ("check_length", "check_words"))
        width = 2 * self.d_state + self.d_hidden + 4
        weights = 2 * 4 * self.d_state + (2 * self.d_state + 4) * self.d_hidden + 2 * self.d_hidden
        models = 9 * self.n_seeds
        tokens = self.batch_size * self.train_length
        longest = self.train_length * self.test_factors[-1]
        lookup = 3.0 * self.d_state * (2 * self.control_lookup + 1)
        memory = max(train_bytes(weights + lookup, 4 * (width + lookup) * tokens),
                     8.0 * (width + lookup) * self.n_test * longest * 2, 16.0 * self.n_train * self.train_length)
        test_tokens = self.n_test * self.train_length * (1 + sum(self.test_factors))
        work = (models * (train_ops(weights, tokens * self.steps, 5 * self.steps) + 2.0 * weights * test_tokens)
                + 2 * self.n_seeds * (train_ops(lookup, tokens * self.steps) + 2.0 * lookup * test_tokens))
        trained = Budget(memory, work, "ssm_ltl's trained models: 9 x n_seeds x steps x batch_size x train_length "
                         "tokens", ("steps", "batch_size", "train_length", "n_seeds", "n_test", "test_factors",
                                    "d_hidden", "d_state", "control_lookup"))
        runs = self.n_test * (len(self.run_lengths) * (self.train_length + 1) + sum(self.run_lengths))
        long = Budget(8.0 * width * self.n_test * (self.train_length + 1 + self.run_lengths[-1]) * 2,
                      3 * self.n_seeds * 2.0 * weights * runs + 4 * 2 * 5000.0 * runs,
                      "ssm_ltl's long-run test: n_test words per run length, every b S a model",
                      ("run_lengths", "n_test"))
        return checks + trained + long
