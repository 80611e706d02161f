"""CompreSSM's training runs: an LRU classifier trained with :func:`lab.core.tasks.fit_classifier`, reduced at the
scheduled checks by the :class:`Reducer` (balanced truncation, or the same ranks keeping random states).

Each run is trained afresh (its time and its size over training are what is measured), so nothing is cached. The
training cost is recorded three ways: wall and CPU time (which move with the machine's load), and the counted work
``Σ_steps 3 · rows · length · MACs/token`` of the model at each step (forward plus a backward pass of about twice
its cost; :func:`lab.core.models.macs_per_token`), which does not.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np

from lab.core.models import macs_per_token, state_sizes
from lab.core.tasks import accuracy_on_test, build_classifier, fit_classifier, total_steps
from lab.core.train import seed_everything
from lab.datasets.sequences import SequenceTask
from lab.methods.compressm import model as M
from lab.methods.compressm.config import Config

__all__ = ["CUTS", "EVAL_POINTS", "MODELS", "SCRATCH_B_OFFSET", "Reducer", "build_model", "check_steps",
           "replayed_times", "robust_time", "size_schedule", "train_run", "warm_up"]

#: the runs of a seed: full size; CompreSSM; from scratch at CompreSSM's final sizes; truncation keeping random
#: states (the paper's ablation); and the controls: a second random truncation, a second from-scratch model
MODELS = ("full", "compressm", "scratch", "random", "random_b", "scratch_b")
#: the second from-scratch model starts from seed + this offset: other initial weights, other batches
SCRATCH_B_OFFSET = 10_000
CUTS = ("before", "hsv", "random")
#: test-accuracy evaluations during training (excluded from the wall time)
EVAL_POINTS = 5
#: a training step costs about three forward passes (the backward pass about two)
STEP_PASSES = 3


def check_steps(cfg: Config, task: SequenceTask) -> np.ndarray:
    """The steps at which reductions are checked: every ``reduction_interval`` in the first ``reduction_fraction``."""
    last = int(cfg.reduction_fraction * total_steps(cfg, task))
    return np.arange(cfg.reduction_interval, last + 1, cfg.reduction_interval)


def reduction_macs(n: int, h: int) -> int:
    """Multiply-adds of one reduction check of a block with ``n`` states and ``h`` features, counted roughly: the
    two Gramians (``2 n² h`` complex, 4 real each), two Hermitian eigendecompositions and the SVD (``~10 n³``
    each)."""
    return 8 * n * n * h + 30 * n ** 3


class Reducer:
    """``on_step`` callback of :func:`lab.core.train.fit`: count the step's work, reduce every LRU block at the
    scheduled steps.

    ``mode="hsv"``: balanced truncation to the τ rank (CompreSSM). ``mode="random"``: the same τ rank from the
    block's own HSVs, but keeping random states (no balancing). ``mode=None``: no reduction (the work is counted).
    At every check where the ``hsv`` mode cuts a block, it also evaluates the model just before and just after the
    cut, and random truncations of the pre-cut model to the same ranks; that evaluation time is subtracted from the
    run's time (:attr:`excluded_s`, :attr:`excluded_cpu_s`).
    """

    def __init__(self, cfg: Config, task: SequenceTask, tau: float | None, mode: str | None,
                 rng: np.random.Generator):
        self.cfg, self.task, self.tau, self.mode, self.rng = cfg, task, tau, mode, rng
        self.checks = check_steps(cfg, task).tolist() if mode else []
        n = len(task.x_train)
        self.rows = [min(cfg.batch_size, n - i) for i in range(0, n, cfg.batch_size)]  # rows of each step
        self.history: list[list[int]] = []  # state sizes after each check
        self.cond: list[list[float]] = []  # worst Gramian condition number per layer at each check
        self.hsv: list[list[np.ndarray]] = []  # HSVs per layer at each check (before any cut)
        self.cuts: list[list[float]] = []  # per check: [before, hsv, random] accuracy, NaN without a cut
        self.cut_draws: list[list[float]] = []  # per check: each random truncation's accuracy
        self.excluded_s = self.excluded_cpu_s = 0.0  # the cut evaluations (not part of training)
        self.reduce_cpu_s = 0.0  # the reductions themselves (part of training)
        self.work = 0.0  # multiply-adds of the training steps and reductions

    def __call__(self, step: int, model, optimizer) -> None:
        rows = self.rows[(step - 1) % len(self.rows)]
        self.work += STEP_PASSES * rows * self.task.length * macs_per_token(model)[1]
        if step not in self.checks:
            return
        snapshot = copy.deepcopy(model) if self.mode == "hsv" else None  # for the cut evaluation only
        start_cpu = time.process_time()
        layers = M.lru_layers(model)
        conds, hsvs = [], []
        for layer in layers:
            self.work += reduction_macs(layer.d_state, layer.d_model)
            if self.mode == "hsv":
                info = M.reduce_layer(layer, self.tau, optimizer, max_fraction=self.cfg.max_fraction)
            else:
                lam, Bbar, C = layer.system()
                bal = M.balance(lam, Bbar, C)
                r = M.rank_for(bal.hsv, self.tau)
                info = M.Reduction(len(lam), len(lam), False, bal.hsv, bal.cond_P, bal.cond_Q)
                if r < self.cfg.max_fraction * len(lam):
                    M.random_truncation(layer, r, self.rng, optimizer)
                    info.after, info.applied = r, True
            conds.append(max(info.cond_P, info.cond_Q))
            hsvs.append(info.hsv)
        sizes = [layer.d_state for layer in layers]
        self.history.append(sizes)
        self.cond.append(conds)
        self.hsv.append(hsvs)
        self.reduce_cpu_s += time.process_time() - start_cpu
        cut, draws = [math.nan] * len(CUTS), [math.nan] * self.cfg.cut_draws
        if snapshot is not None and sizes != state_sizes(snapshot):
            start, start_cpu = time.perf_counter(), time.process_time()
            draws = [accuracy_on_test(M.random_copy(snapshot, sizes, self.rng), self.task)
                     for _ in range(self.cfg.cut_draws)]
            cut = [accuracy_on_test(snapshot, self.task), accuracy_on_test(model, self.task), float(np.mean(draws))]
            self.excluded_s += time.perf_counter() - start
            self.excluded_cpu_s += time.process_time() - start_cpu
        self.cuts.append(cut)
        self.cut_draws.append(draws)


def build_model(cfg: Config, task: SequenceTask, d_state):
    """The config's LRU classifier with ``d_state`` states per block (an int, or one per layer), its eigenvalues
    drawn on the ring ``r_min <= |λ| <= r_max`` (from torch's global generator: seed it first)."""
    return build_classifier(task, "lru", d_model=cfg.d_model, n_layers=cfg.n_layers, d_state=d_state,
                            mixer_kwargs={"r_min": cfg.r_min, "r_max": cfg.r_max})


def train_run(cfg: Config, task: SequenceTask, seed: int, *, d_state=None, tau: float | None = None,
              mode: str | None = "hsv", rng_stream: int = 99, progress: bool = False, desc: str = "train") -> dict:
    """Train one model from seed ``seed``; with ``tau``, reduce it during training (``mode`` hsv or random).

    Arguments:
        d_state: states per block (default ``cfg.d_state``; one per layer for a from-scratch model).
        rng_stream: the random truncations' generator is seeded with ``[seed, rng_stream]``.
    Returns:
        a dict with the model, its test accuracy (%), wall and CPU time (s), the robust CPU time, the counted
        work (MAC), the reducer and the evaluation history.
    """
    seed_everything(seed)
    model = build_model(cfg, task, cfg.d_state if d_state is None else d_state)
    reducer = Reducer(cfg, task, tau, mode if tau is not None else None, np.random.default_rng([seed, rng_stream]))
    res = fit_classifier(model, task, cfg, seed, progress=progress, desc=desc, on_step=reducer,
                         eval_data=(task.x_test, task.y_test),
                         eval_every=max(1, total_steps(cfg, task) // EVAL_POINTS))
    return {"model": model, "accuracy": accuracy_on_test(model, task), "reducer": reducer,
            "time": res.wall_time_s - reducer.excluded_s, "cpu_time": res.cpu_time_s - reducer.excluded_cpu_s,
            "robust_time": robust_time(res.step_cpu, cfg.reduction_interval) + reducer.reduce_cpu_s,
            "work": reducer.work, "eval": np.asarray(res.eval_accuracy[:EVAL_POINTS]) * 100,
            "eval_steps": res.eval_steps[:EVAL_POINTS]}


def robust_time(step_times: np.ndarray, window: int) -> float:
    """Total time with transient interference removed: each window of steps counts as its median step, times its
    length. Steps of a window share the model's size (reductions happen every ``window`` steps), so the medians
    follow the shrinking cost while a step stalled by another process does not count."""
    t = np.asarray(step_times, float)
    return float(sum(np.median(t[i: i + window]) * len(t[i: i + window]) for i in range(0, len(t), window)))


def warm_up(cfg: Config, task: SequenceTask) -> None:
    """One untimed forward and backward pass, so that no timed run pays for just-in-time compilation."""
    seed_everything(cfg.seed)
    model = build_model(cfg, task, cfg.d_state)
    model(task.x_train[: cfg.batch_size]).sum().backward()



def size_schedule(cfg: Config, task: SequenceTask, reducer: Reducer, final: list[int]) -> list[tuple[tuple, int]]:
    """A run's state sizes over training: ``[(sizes per layer, steps at those sizes), ...]``."""
    total = total_steps(cfg, task)
    if reducer.mode is None:
        return [(tuple(final), total)]
    out, start, sizes = [], 0, (cfg.d_state,) * cfg.n_layers
    for step, after in zip(reducer.checks, reducer.history):
        out.append((sizes, step - start))
        start, sizes = step, tuple(after)
    out.append((sizes, total - start))
    return [(s, n) for s, n in out if n > 0]


def replayed_times(cfg: Config, task: SequenceTask, schedules: dict, repeats: int = 7) -> dict:
    """The training time of each run replayed in this process: one training step (forward, backward, clipping,
    AdamW) is timed at every size that occurs in ``schedules``, the sizes taken in turn ``repeats`` times so that a
    change of the machine's load hits all of them alike, and each run costs ``Σ steps x median step time`` of its
    sizes (every step counted as a full mini-batch).

    Arguments:
        schedules: run key -> :func:`size_schedule`.
    Returns:
        run key -> seconds.
    """
    import torch

    distinct = sorted({sizes for schedule in schedules.values() for sizes, _ in schedule})
    x, y = task.x_train[: cfg.batch_size], task.y_train[: cfg.batch_size]
    steps = {}
    for sizes in distinct:
        seed_everything(cfg.seed)
        model = build_model(cfg, task, list(sizes))
        steps[sizes] = (model, torch.optim.AdamW(model.parameters(), lr=cfg.lr))
    times: dict = {sizes: [] for sizes in distinct}
    for _ in range(repeats + 1):  # the first round warms up
        for sizes, (model, opt) in steps.items():
            start = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            times[sizes].append(time.perf_counter() - start)
    median = {sizes: float(np.median(t[1:])) for sizes, t in times.items()}
    return {key: sum(n * median[sizes] for sizes, n in schedule) for key, schedule in schedules.items()}
