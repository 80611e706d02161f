"""Configuration of the RATE experiments: train on short T-Mazes from oracle trajectories, test on long ones."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import STEP_OPS, Budget, training
from lab.config import BaseConfig, Choices, Each, Range, bad_value
from lab.core.fields import Rate, Seeds, WeightDecay
from lab.core.runtime import RuntimeConfig

#: the agents: RATE (its valve as ``valve_form`` says, its memory back-propagated through every segment as the paper
#: describes unless ``detach_memory``), RATE without the Memory Retention Valve (write-memory passed straight), RATE
#: with the same valve and its memory detached between segments as the official trainer does (``rate_detached``: what
#: the detach changes), Decision Transformers with a short context (one segment, K steps) and a long one (the whole
#: training episode), GRU behaviour cloning
VARIANTS = ("rate", "rate_no_valve", "rate_detached", "dt_short", "dt_long", "gru")
#: the Decision Transformers: tested on corridors up to LENGTH_FACTOR x T_train only (``Config.episodes``)
DTS = ("dt_short", "dt_long")
#: environments: the T-Maze written here (numpy) and minigrid's Memory task
ENVS = ("tmaze", "minigrid")
#: the paper's "far longer than seen in training" (the lab's plan: RATE >= 80% at 10x the training length or more);
#: corridors longer than this factor x T_train are "far": fewer test episodes (``n_eval_far``), no DT
LENGTH_FACTOR = 10


@dataclasses.dataclass(frozen=True)
class Config(RuntimeConfig, BaseConfig):
    """RATE on T-Mazes (and minigrid's Memory task): oracle trajectories of corridors up to K x N steps, closed-loop
    tests on corridors up to 10x longer (defaults = quick)."""

    PROFILES: ClassVar = {
        "ci": dict(segment_length=4, n_segments=2, eval_lengths=(4, 8, 80), n_memory=2, d_model=16, n_layers=1,
                   steps=80, batch_size=8, n_train=4, n_eval=8, n_seeds=2, envs=("tmaze", "minigrid"),
                   minigrid_steps=4, minigrid_episodes=4, minigrid_eval=2),
        "quick": {},
        "full": dict(segment_length=30, n_segments=3, eval_lengths=(30, 90, 300, 900, 9000), steps=3000,
                     n_eval=200, n_eval_far=100, n_seeds=5, envs=("tmaze", "minigrid"), minigrid_size=13,
                     minigrid_steps=3000, minigrid_episodes=1000, minigrid_eval=100),
    }

    envs: Annotated[tuple[str, ...], Choices(*ENVS), Each(unique=True)] = ("tmaze",)
    """Environments: 'tmaze' (the claims' environment) and 'minigrid' (MiniGrid-Memory, a report row; at ci and full
    only, quick's budget goes to the T-Maze)."""
    segment_length: Annotated[int, Range(1, 1000)] = 10
    """K: time steps per segment (3K tokens: return-to-go, observation, action); also the short DT's context."""
    n_segments: Annotated[int, Range(1, 100)] = 3
    """N: segments of the longest training episode; training corridors have 2 to K x N steps (T_train = K x N, the
    long DT's context)."""
    eval_lengths: Annotated[tuple[int, ...], Range(2, 100_000), Each(increasing=True)] = (10, 30, 90, 300, 3000)
    """Corridor lengths of the closed-loop tests (each >= 2). The claims read K (the clue inside the short DT's
    context), T_train and the longest (at least 10 x T_train; quick's is 100 x, where a GRU's state has lost the
    clue and RATE's memory has not)."""
    valve_form: Annotated[str, Choices("official", "lab")] = "official"
    """RATE's Memory Retention Valve: 'official', the official code's MultiHead(Q = M_n, K = V = ReLU(M~_{n+1}))
    (projections only), or 'lab', FFN(MultiHead(...)) with three LayerNorms (the form this lab built first)."""
    detach_memory: bool = False
    """Detach the memory of rate and rate_no_valve between segments in training, as the official trainer does (each
    segment learns from its own actions only; the write path and the valve get no gradient; rate_detached always
    does). False, the default: the memory back-propagated through every segment, as the paper describes it."""
    n_memory: Annotated[int, Range(1, 64)] = 4
    """Memory tokens M_n (read prefix and write suffix of every segment)."""
    d_model: Annotated[int, Range(8, 1024)] = 64
    """Width of every model (transformers and GRU)."""
    n_layers: Annotated[int, Range(1, 12)] = 2
    """Transformer blocks (RATE, DTs); GRU layers."""
    n_heads: Annotated[int, Range(1, 16)] = 2
    """Attention heads of the transformer and of the Memory Retention Valve."""
    steps: Annotated[int, Range(1, 1_000_000)] = 300
    """Optimiser steps of every agent (equal budgets)."""
    batch_size: Annotated[int, Range(1, 100_000)] = 32
    """Trajectories per step (one corridor length per batch)."""
    lr: Rate = 3e-3
    """Peak learning rate (AdamW, warm-up then cosine decay)."""
    weight_decay: WeightDecay = 0.0
    """AdamW weight decay."""
    turn_weight: Annotated[float, Range(1.0, 1000.0)] = 10.0
    """Loss weight of the final turn against each corridor step (only the turn is rewarded: a pitfall
    the lab's plan names)."""
    n_train: Annotated[int, Range(1, 100_000)] = 64
    """Oracle trajectories per training corridor length (the offline data set)."""
    n_eval: Annotated[int, Range(2, 100_000)] = 64
    """Test episodes per corridor length up to 10 x T_train (half of them with each clue)."""
    n_eval_far: Annotated[int, Range(2, 100_000)] = 32
    """Test episodes per corridor longer than 10 x T_train (each episode is that many times longer: fewer of them);
    the DTs are not tested there (a context of K or K x N steps is under a tenth of the corridor: the clue left it
    long before the turn, as on the corridors up to 10 x T_train where they are tested)."""
    minigrid_size: Annotated[int, Choices(7, 11, 13)] = 7
    """Size of MiniGrid-Memory (MiniGrid-MemoryS7/S11/S13-v0)."""
    minigrid_segment_length: Annotated[int, Range(1, 1000)] = 5
    """K on MiniGrid-Memory (segment of RATE, context of the short DT): shorter than an episode (8 to 21 steps from
    S7 to S13), so that the room's object leaves the short DT's context before the choice."""
    minigrid_steps: Annotated[int, Range(1, 1_000_000)] = 800
    """Optimiser steps of each agent on MiniGrid-Memory."""
    minigrid_episodes: Annotated[int, Range(2, 100_000)] = 300
    """Oracle episodes of MiniGrid-Memory (the offline data set)."""
    minigrid_eval: Annotated[int, Range(1, 100_000)] = 40
    """Test episodes on MiniGrid-Memory per agent and seed."""
    n_seeds: Seeds = 3
    """Seeds (seed, seed+1, ...): each draws its own data, initial weights and test episodes; claims are means
    over seeds, with their spread."""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds of the run: ``seed, ..., seed + n_seeds - 1``."""
        return tuple(self.seed + k for k in range(self.n_seeds))

    @property
    def train_max(self) -> int:
        """T_train = K x N: the longest training corridor, the long DT's context."""
        return self.segment_length * self.n_segments

    def episodes(self, variant: str, length: int) -> int:
        """Test episodes of ``variant`` on a corridor of ``length``: ``n_eval`` up to 10 x T_train,
        ``n_eval_far`` beyond (0 for the DTs: not tested there)."""
        if length <= LENGTH_FACTOR * self.train_max:
            return self.n_eval
        return 0 if variant in DTS else self.n_eval_far

    def validate(self) -> None:
        if self.d_model % self.n_heads:
            raise bad_value("n_heads", self.n_heads, f"a divisor of d_model={self.d_model}")
        if self.train_max < 2:
            raise bad_value("n_segments", self.n_segments, "K x N >= 2 (a corridor has at least 2 steps)")
        if self.train_max <= self.segment_length:
            raise bad_value("n_segments", self.n_segments,
                            "at least 2: the training episode must be longer than the short DT's context K, or the "
                            "clue never leaves it")
        if self.segment_length not in self.eval_lengths:
            raise bad_value("eval_lengths", self.eval_lengths,
                            f"lengths that include segment_length={self.segment_length} (the control of DT's "
                            "fall: the clue inside its context)")
        if self.train_max not in self.eval_lengths:
            raise bad_value("eval_lengths", self.eval_lengths,
                            f"lengths that include K x N = {self.train_max} (the training length)")
        longest = max(self.eval_lengths)
        if longest < LENGTH_FACTOR * self.train_max:
            raise bad_value("eval_lengths", self.eval_lengths,
                            f"a longest corridor of at least {LENGTH_FACTOR} x K x N = "
                            f"{LENGTH_FACTOR * self.train_max} (the claims test far beyond training)")

    def run_budget(self) -> Budget:
        """Work: 6 variants x n_seeds agents trained steps x batch_size trajectories of 3 to 3 K N (+ memory)
        tokens through n_layers blocks of about 12 d_model^2 weights, then closed-loop tests: n_eval episodes of
        every eval_length (n_eval_far beyond 10 x T_train, without the DTs), each step a forward pass over each
        agent's context (3 K tokens; the long DT 3 K N), and on MiniGrid-Memory the same at its episode lengths
        (about 2 minigrid_size steps). Memory: the oracle trajectories, a batch's activations and attention scores,
        the test episodes' records and a batched forward over the longest."""
        K, T, d = self.segment_length, self.train_max, self.d_model
        weights = 12.0 * d * d * self.n_layers
        tokens = 3 * (T + 2) / 2 + 2 * self.n_memory  # corridors of 2 to K N steps, uniformly
        runs = len(VARIANTS) * self.n_seeds
        memory, work = training(runs, self.steps, self.batch_size, tokens, weights, d, self.n_layers,
                                attend=tokens / 2, heads=self.n_heads)
        context = {"dt_long": 3 * T + 6 * self.n_memory, "gru": 1}  # tokens per step: RATE and the short DT 3 K
        tests = self.n_seeds * sum(
            self.episodes(v, L) * L * (2.0 * weights * context.get(v, 3 * K + 2 * self.n_memory) + STEP_OPS / 2)
            for v in VARIANTS for L in self.eval_lengths)
        memory = max(memory, max(4.0 * self.episodes("rate", L) * (L * 8 + 3 * L * d * 4 + 3 * T * d * 16)
                                 for L in self.eval_lengths))
        memory += 16.0 * T * T * self.n_train * 3
        if "minigrid" in self.envs:
            k, episode = self.minigrid_segment_length, 2 * self.minigrid_size
            m_memory, m_work = training(runs, self.minigrid_steps, self.batch_size, 3 * episode + 2 * self.n_memory,
                                        weights, d, self.n_layers, attend=3 * episode, heads=self.n_heads)
            m_work += runs * self.minigrid_eval * episode * (2.0 * weights * 3 * (k + episode) + 1e6)
            memory = max(memory, m_memory + 4.0 * self.minigrid_episodes * episode * 64)
            work += m_work + self.n_seeds * self.minigrid_episodes * episode * 1e6
        return Budget(memory, work + tests, "rate's agents: 6 variants x n_seeds trained steps x batch_size "
                      "trajectories of 3 K N tokens, tested n_eval episodes on every eval_length",
                      ("steps", "batch_size", "eval_lengths", "n_eval", "segment_length", "n_segments", "d_model",
                       "n_layers", "n_seeds", "n_train", "n_eval_far"),
                      memory_what="rate's test episodes: n_eval x the longest eval_length")
