"""Configuration of the ChainGPT experiments: a state-tracking task and MQAR, trained short and tested long."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

from lab.budget import STEP_OPS, Budget, training
from lab.config import BaseConfig, Each, Range, bad_value
from lab.core.fields import Rate, Seeds, WeightDecay
from lab.core.runtime import RuntimeConfig

Length = Annotated[int, Range(2, 4096)]
Lengths = Annotated[tuple[int, ...], Range(2, 4096), Each(increasing=True)]


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """ChainGPT: multi-substep state updates, state-guided sparse attention, recurrent depth (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(d_model=16, n_train=128, n_test=32, steps=6, recall_steps=6, batch_size=32, state_train_length=8,
                   state_test_lengths=(16,), recall_train_length=16, recall_test_lengths=(32,), n_pairs=2,
                   mqar_vocab=16, window=4, anchor_every=4, max_iterations=3, baseline_steps=6, n_seeds=1),
        "quick": {},
        "full": dict(state_task="s3", d_model=64, n_heads=4, n_train=20_000, n_test=1000, steps=4000,
                     recall_steps=4000, batch_size=64, n_bottom=1,
                     state_train_length=32, state_test_lengths=(64, 128), recall_train_length=64,
                     recall_test_lengths=(128, 256), n_pairs=16, mqar_vocab=128, window=16, anchor_every=32,
                     baseline_steps=8000, max_iterations=12, bptt_iterations=3, n_seeds=3),
    }

    state_task: Literal["s3", "a5", "cyclic", "parity"] = "cyclic"
    """Word problem of the substep, depth and baseline comparisons (lab.datasets.synthetic): running products in
    S3, A5, Z_m (multi-step modular arithmetic: a running sum mod m) or Z_2. Z_m with m >= 3 needs rotations, which
    one Householder factor per token cannot make and two can (DeltaProduct); S3 needs far more training than the
    quick budget (it stays near chance in 400 steps)."""
    modulus: Annotated[int, Range(2, 256)] = 3
    """m of the cyclic task (only used when state_task is 'cyclic')."""
    state_train_length: Length = 16
    """Training length of the word problem (the brief's plan: 16)."""
    state_test_lengths: Lengths = (32, 64)
    """Test lengths of the word problem, each longer than the training length (the issue: 2-4x)."""
    recall_train_length: Length = 32
    """Training length of MQAR."""
    recall_test_lengths: Lengths = (64, 128)
    """Test lengths of MQAR, each longer than the training length (2-4x): the anchors' claim is read at the
    longest."""
    mqar_vocab: Annotated[int, Range(8, 8192)] = 32
    """MQAR vocabulary (keys and values drawn from it)."""
    n_pairs: Annotated[int, Range(1, 1024)] = 4
    """Key-value pairs per MQAR sequence (the paper: 256 at length 2048; ours is far smaller)."""
    n_train: Annotated[int, Range(16, 10_000_000)] = 4000
    """Training sequences per task."""
    n_test: Annotated[int, Range(8, 100_000)] = 300
    """Test sequences per task and length."""
    d_model: Annotated[int, Range(4, 1024)] = 32
    """Features of every model (ChainGPT, the transformer and Mamba)."""
    n_heads: Annotated[int, Range(1, 64)] = 2
    """Heads of the state layer and of the attention (d_model must be a multiple)."""
    substeps: Annotated[int, Range(2, 8)] = 2
    """M, Householder substeps per token of the ChainGPT model (the paper: M = 2 best [secondary]); the control
    has one substep at the same parameter count."""
    delta_rank: Annotated[int, Range(1, 256)] = 4
    """Rank of each substep's key/value delta; the one-substep control gets rank substeps x delta_rank, so both
    have the same low-rank parameters."""
    window: Annotated[int, Range(1, 4096)] = 4
    """W, tokens each query reads around itself (its own included)."""
    anchor_every: Annotated[int, Range(2, 4096)] = 8
    """G, tokens per segment: an anchor every G tokens (the paper tests 32, 64, 128 at length 2048 [secondary])."""
    n_bottom: Annotated[int, Range(0, 8)] = 0
    """Blocks of the bottom module, run once before the looped core (0: the embedding alone, for time at quick)."""
    max_iterations: Annotated[int, Range(2, 64)] = 3
    """r_max, the most core iterations (training draws r uniformly in 1..r_max; the paper goes to x16, best at x12:
    full runs 12; quick keeps 3, each iteration costs a core block's forward pass per step)."""
    bptt_iterations: Annotated[int, Range(1, 64)] = 2
    """Iterations backpropagated through at the end of each drawn depth (the rest: gradient-free warm-up)."""
    stop_tau: Annotated[float, Range(0.0, 10.0)] = 0.01
    """τ of the entropy-drop rule, in nats: a token stops when H_{i-k} - H_i <= τ."""
    stop_lag: Annotated[int, Range(1, 16)] = 1
    """k of the entropy-drop rule, in iterations."""
    baseline_layers: Annotated[int, Range(1, 16)] = 2
    """Layers of the transformer baseline (ChainGPT has n_bottom + 1 distinct blocks)."""
    mamba_layers: Annotated[int, Range(1, 16)] = 4
    """Layers of the Mamba baseline, narrower at the same parameter count (a Mamba block has no MLP: its only
    nonlinearities are the gate and the conv's SiLU). On the word problem with a start token: 2 layers fit length 16
    to 81.6% (seed 0, 2000 steps at lr 2e-3), 3 layers to 84.7% (seeds 0-2, 1500 steps at 3e-3), 4 layers to 93.1%
    (seed 0, 2000 steps at 2e-3), 92.9% (seed 1, 1500 steps at 3e-3), 88.2% (seed 1, 1200 steps at 3e-3)."""
    baseline_start: bool = True
    """The transformer and Mamba read a start token (a token id of their own, unlabelled, its output dropped) before
    every sequence; ChainGPT does not. A causal transformer without positions counts only from such a token
    (attending to it gives 1/t): without it, it fits the running sum mod 3 at length 16 to 74-80% only (3 seeds of
    1200 steps; one seed of 2000), with it to 98.7% (one seed of 2000 steps)."""
    steps: Annotated[int, Range(1, 1_000_000)] = 600
    """Optimiser steps of ChainGPT and its one-substep control on the word problem."""
    baseline_steps: Annotated[int, Range(1, 1_000_000)] = 1500
    """Optimiser steps of the transformer and Mamba baselines on the word problem: more than ChainGPT's, until
    they fit the training length (their competence, checked in the run); one of their steps costs a fraction of a
    looped ChainGPT step."""
    recall_steps: Annotated[int, Range(1, 1_000_000)] = 300
    """Optimiser steps of every training run on MQAR."""
    batch_size: Annotated[int, Range(1, 100_000)] = 32
    """Mini-batch size."""
    lr: Rate = 5e-3
    """Peak learning rate (AdamW, warm-up then cosine decay)."""
    baseline_lr: Rate = 3e-3
    """Peak learning rate of the transformer and Mamba baselines, their own (on the word problem at quick, one seed:
    the transformer fits length 16 to 99.6% at 3e-3 in 1500 steps, to 85% at 5e-3 in 1200 steps)."""
    weight_decay: WeightDecay = 0.01
    """AdamW weight decay of the matrices."""
    n_seeds: Seeds = 3
    """Seeds (seed, seed+1, ...): every model and data set per seed; claims are means over seeds."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def validate(self) -> None:
        if self.d_model % self.n_heads:
            raise bad_value("d_model", self.d_model, f"a multiple of n_heads={self.n_heads}")
        for name, train in (("state_test_lengths", self.state_train_length),
                            ("recall_test_lengths", self.recall_train_length)):
            tests = getattr(self, name)
            if tests[0] <= train:
                raise bad_value(name, tests, f"lengths longer than the training length {train} (the length-"
                                             "generalisation claims read the longest)")
        if self.bptt_iterations > self.max_iterations:
            raise bad_value("bptt_iterations", self.bptt_iterations,
                            f"an integer in [1, max_iterations={self.max_iterations}]")
        most = min(self.recall_train_length // 3, (self.mqar_vocab - 1) // 2)
        if self.n_pairs > most:
            raise bad_value("n_pairs", self.n_pairs, f"an integer in [1, {most}] (MQAR: 2 n_pairs + n_queries <= "
                                                     "recall_train_length with n_queries = n_pairs, and n_pairs <= "
                                                     "(mqar_vocab - 1) // 2 keys)")

    def run_budget(self) -> Budget:
        """Work: per seed, four word-problem runs (ChainGPT and its control: the core looped (max_iterations + 1) / 2
        times on average, bptt_iterations of them backpropagated) of steps x batch_size x state_train_length tokens,
        the transformer and Mamba baselines of baseline_layers and mamba_layers blocks for baseline_steps, two MQAR
        runs of recall_steps x batch_size x recall_train_length, and the depth profiles: every test length at every
        depth up to max_iterations. A block holds about 12 d_model^2 weights. Memory: a batch's activations over the
        looped core, the transformer's attention scores, the data sets (int64 tokens and labels). Each looped
        iteration of a step costs about two small steps' overhead (measured: quick takes ~750 s on two shared
        cores)."""
        d, blocks = self.d_model, self.n_bottom + 1
        block = 12.0 * d * d
        loops = (self.max_iterations + 1) / 2 + 2 * self.bptt_iterations  # forward 2 W each, backward 4 W each
        vocab = max(self.mqar_vocab, 120)
        parts = []
        for steps, train, tests, width in ((self.steps, self.state_train_length, self.state_test_lengths, 1),
                                           (self.recall_steps, self.recall_train_length, self.recall_test_lengths,
                                            self.window)):
            chain = training(2, steps, self.batch_size, train, block * (self.n_bottom + loops / 3) + vocab * d, d,
                             blocks + loops,
                             attend=width + train / self.anchor_every, heads=self.n_heads)
            parts.append(chain)
            if width == 1:  # the transformer and Mamba, the same weights in different numbers of layers
                parts.extend(training(1, self.baseline_steps, self.batch_size, train,
                                      block * self.baseline_layers + vocab * d, d, layers, attend=attend,
                                      heads=self.n_heads)
                             for layers, attend in ((self.baseline_layers, train / 2), (self.mamba_layers, 0.0)))
            profile = self.n_test * (train + sum(tests)) * 2 * block * self.max_iterations ** 2 * 2
            parts.append((256.0 * max(tests) * d * 16 * 4 + 256.0 * self.n_heads * max(tests) ** 2 * 4, profile))
        data = 16.0 * (self.n_train * (self.state_train_length + self.recall_train_length)
                       + self.n_test * (sum(self.state_test_lengths) + sum(self.recall_test_lengths)))
        memory = max(m for m, _ in parts) + data
        overhead = STEP_OPS * (2 * loops * (2 * self.steps + 2 * self.recall_steps)  # the core's small kernels
                               + 2 * (self.baseline_layers + self.mamba_layers) * self.baseline_steps)
        work = self.n_seeds * (sum(w for _, w in parts) + overhead)
        return Budget(memory, work, "chaingpt's trainings: n_seeds x 6 runs of steps x batch_size x train length "
                      "tokens through d_model-wide blocks, the core looped up to max_iterations",
                      ("steps", "recall_steps", "baseline_steps", "mamba_layers", "batch_size", "d_model",
                       "max_iterations", "n_seeds", "n_train", "n_test", "state_test_lengths", "recall_test_lengths"))
