"""ChainGPT's data, models, training and evaluation: the only place the method trains and loads cached weights.

Runs (:data:`RUNS`): on the word problem, ChainGPT with ``M`` substeps, the one-substep control at the same parameter
count, a same-size causal transformer and a Mamba stack; on MQAR, ChainGPT with its anchors and the window-alone
control. Every run trains with :func:`lab.core.train.fit` (ChainGPT through its random-depth loss) and is cached by
:func:`lab.cache.cached_model`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lab.cache import cached_model
from lab.core.models import SSMStack
from lab.core.train import fit, seed_everything
from lab.core.transformer import TokenTagger, Transformer, n_params
from lab.datasets.synthetic import make_splits
from lab.datasets.tokens import IGNORE, TokenTask
from lab.methods.chaingpt.config import Config
from lab.methods.chaingpt.model import ChainGPT

__all__ = ["FORMAT", "RUNS", "STATE_RUNS", "RECALL_RUNS", "build", "load_tasks", "trained", "accuracy",
           "depth_profile", "n_params"]

#: cache format of the trained weights (bump when a model or its training changes)
FORMAT = 2  # 2: a diagonal gate per substep
#: the runs on the word problem and on MQAR
STATE_RUNS = ("chaingpt", "one_substep", "transformer", "mamba")
RECALL_RUNS = ("anchors", "window_only")
#: the same-size baselines (trained for ``baseline_steps``)
BASELINE_RUNS = ("transformer", "mamba")
RUNS = STATE_RUNS + RECALL_RUNS
#: Mamba's state size per channel in the baseline (the Mamba paper's default)
MAMBA_STATE = 16
#: rows per evaluation batch
EVAL_BATCH = 100


def load_tasks(cfg: Config, which: str, seed: int) -> tuple[TokenTask, dict[int, TokenTask]]:
    """The training task and one test task per test length (:func:`lab.datasets.synthetic.make_splits`).

    Arguments:
        which: ``state`` (the config's word problem) or ``recall`` (MQAR).
    Returns:
        ``(train, {length: test})``.
    """
    if which == "state":
        name, train_length, tests = cfg.state_task, cfg.state_train_length, cfg.state_test_lengths
        options = {"modulus": cfg.modulus} if cfg.state_task == "cyclic" else {}
    else:
        name, train_length, tests = "mqar", cfg.recall_train_length, cfg.recall_test_lengths
        options = {"vocab_size": cfg.mqar_vocab, "n_pairs": cfg.n_pairs}
    splits = make_splits(name, n_train=cfg.n_train, n_test=cfg.n_test, train_length=train_length,
                         test_lengths=(train_length, *tests), seed=seed, **options)
    return splits["train"], {int(L): splits[f"test_{L}"] for L in (train_length, *tests)}


def build(cfg: Config, run: str, task: TokenTask) -> nn.Module:
    """A freshly initialised model of ``run`` for ``task`` (draws from torch's global generator: seed first)."""
    chain = dict(d_model=cfg.d_model, n_heads=cfg.n_heads, window=cfg.window, every=cfg.anchor_every,
                 n_bottom=cfg.n_bottom, iterations=cfg.max_iterations)
    if run in ("chaingpt", "anchors"):
        return ChainGPT(task.vocab_size, task.n_classes, substeps=cfg.substeps, delta_rank=cfg.delta_rank, **chain)
    if run == "one_substep":  # one substep, its delta of rank M r: the same low-rank parameters
        return ChainGPT(task.vocab_size, task.n_classes, substeps=1, delta_rank=cfg.substeps * cfg.delta_rank,
                        **chain)
    if run == "window_only":
        return ChainGPT(task.vocab_size, task.n_classes, substeps=cfg.substeps, delta_rank=cfg.delta_rank,
                        anchors=False, **chain)
    if run not in ("transformer", "mamba"):
        raise ValueError(f"run={run!r} is not allowed; allowed: {', '.join(RUNS)}")
    return _baseline(run, matched_width(cfg, run, task), cfg, task)


class Started(nn.Module):
    """A baseline that reads a start token (id ``vocab_size``, an embedding row of its own) before every sequence;
    its output there is dropped: ``(batch, length)`` -> logits ``(batch, length, C)``.

    A causal transformer without positions finds its position only from a token it can tell apart (attending to it
    gives ``1/t``); without one it does not fit the running sum mod 3 at length 16 (74%, 3 seeds of 1200 steps).
    """

    def __init__(self, tagger: TokenTagger):
        super().__init__()
        self.tagger = tagger
        self.start = tagger.embedding.num_embeddings - 1

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        start = torch.full_like(tokens[:, :1], self.start)
        return self.tagger(torch.cat([start, tokens], dim=1))[:, 1:]


def _baseline(run: str, width: int, cfg: Config, task: TokenTask) -> nn.Module:
    body = (Transformer(width, cfg.baseline_layers, cfg.n_heads, causal=True) if run == "transformer"
            else SSMStack("mamba", width, cfg.mamba_layers, MAMBA_STATE))
    if not cfg.baseline_start:
        return TokenTagger(task.vocab_size, task.n_classes, width, body)
    return Started(TokenTagger(task.vocab_size + 1, task.n_classes, width, body))


def matched_width(cfg: Config, run: str, task: TokenTask) -> int:
    """The width (a multiple of ``n_heads``) of a ``baseline_layers``-deep transformer or ``mamba_layers``-deep Mamba
    whose parameter count is nearest ChainGPT's on ``task``: the "same-size" baselines."""
    with torch.random.fork_rng():
        target = n_params(build(cfg, "chaingpt", task))
        widths = range(cfg.n_heads, 2 * cfg.d_model + 1, cfg.n_heads)
        return min(widths, key=lambda w: abs(n_params(_baseline(run, w, cfg, task)) - target))


def _tagger_loss(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)


def _chain_loss(cfg: Config, seed: int):
    """ChainGPT's loss: a depth r drawn uniformly in 1..r_max per step, the last bptt iterations backpropagated."""
    gen = torch.Generator().manual_seed(seed + 7919)

    def loss(model: ChainGPT, batch) -> torch.Tensor:
        r = int(torch.randint(1, cfg.max_iterations + 1, (1,), generator=gen))
        return model.loss(*batch, iterations=r, bptt=cfg.bptt_iterations)

    return loss


def trained(cfg: Config, run: str, task: TokenTask, seed: int, progress: bool = False):
    """The trained model of ``run`` on ``task`` (cached): a :class:`lab.cache.Trained` whose ``meta`` holds the
    training seconds and the parameter count, ``curves['loss']`` the loss per step."""
    fields = ("d_model", "n_heads", "substeps", "delta_rank", "window", "anchor_every", "n_bottom",
              "max_iterations", "bptt_iterations", "baseline_layers", "batch_size", "lr", "weight_decay", "n_train")
    data = ({"task": cfg.state_task, "length": cfg.state_train_length, "modulus": cfg.modulus}
            if run in STATE_RUNS else
            {"task": "mqar", "length": cfg.recall_train_length, "vocab": cfg.mqar_vocab, "pairs": cfg.n_pairs})
    steps = cfg.baseline_steps if run in BASELINE_RUNS else cfg.steps if run in STATE_RUNS else cfg.recall_steps
    key = {"format": FORMAT, "run": run, "seed": seed, "steps": steps, **data, **{f: getattr(cfg, f) for f in fields}}
    if run in BASELINE_RUNS:
        key.update(start=cfg.baseline_start, lr=cfg.baseline_lr)
    if run == "mamba":
        key["layers"] = cfg.mamba_layers

    def make() -> nn.Module:
        seed_everything(seed)
        return build(cfg, run, task)

    def train(model: nn.Module) -> dict:
        base = run in BASELINE_RUNS
        loss = _tagger_loss if base else _chain_loss(cfg, seed)
        res = fit(model, *task.tensors(), loss=loss, steps=steps, epochs=10**6, batch_size=cfg.batch_size,
                  lr=cfg.baseline_lr if base else cfg.lr, weight_decay=cfg.weight_decay, seed=seed, progress=progress,
                  desc=f"{run} (seed {seed})", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "params": n_params(model)}}

    return cached_model("chaingpt", f"{data['task']}-{run}", key, make, train)


def _batches(task: TokenTask):
    x, y = task.tensors()
    for i in range(0, len(x), EVAL_BATCH):
        yield x[i: i + EVAL_BATCH], y[i: i + EVAL_BATCH]


def _correct(logits: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    mask = y != IGNORE
    return int(((logits.argmax(-1) == y) & mask).sum()), int(mask.sum())


@torch.no_grad()
def accuracy(model: nn.Module, task: TokenTask) -> float:
    """Accuracy (%) over the labelled positions; ChainGPT at its full depth ``r_max``."""
    model.eval()
    hit = total = 0
    for x, y in _batches(task):
        c, n = _correct(model(x), y)
        hit, total = hit + c, total + n
    return 100.0 * hit / max(total, 1)


@torch.no_grad()
def depth_profile(model: ChainGPT, task: TokenTask, cfg: Config, seed: int = 0) -> dict[str, np.ndarray | float]:
    """ChainGPT at every fixed depth, with adaptive stopping and with random stopping at the same depths, over the
    labelled positions of ``task``.

    Random stopping (the adaptive claim's control): each batch's adaptive iteration counts, shuffled over its
    labelled positions (a generator of its own, seeded by ``seed``), so every token stops at a random depth drawn
    from the adaptive rule's own depth histogram: the same mean depth, no per-token choice.

    Returns:
        ``depth_accuracy`` ``(r_max,)`` % at depth 1..r_max; ``depth_entropy`` ``(r_max,)`` mean entropy (nats)
        after each iteration at fixed depth; ``adaptive_accuracy`` %; ``adaptive_iterations`` mean iterations per
        labelled token; ``stop_histogram`` ``(r_max,)`` share of labelled tokens stopping after 1..r_max;
        ``adaptive_iterations_se`` the standard error of ``adaptive_iterations`` over the test sequences (the
        sequence as the unit); ``prefix_iterations`` and ``prefix_iterations_se`` the same over the labelled
        positions before ``cfg.state_train_length`` only (the whole sequence at the training length);
        ``random_accuracy`` % with random stopping at the adaptive depths.
    """
    model.eval()
    R = cfg.max_iterations
    gen = torch.Generator().manual_seed(seed + 104729)
    hits, ent, total = np.zeros(R), np.zeros(R), 0
    a_hit, r_hit, a_iter, hist = 0, 0, 0.0, np.zeros(R)
    per_seq, per_prefix = [], []  # mean iterations of each test sequence: all labelled positions, the prefix's
    for x, y in _batches(task):
        mask = y != IGNORE
        for i, logits in enumerate(model(x, iterations=R, return_all=True)):
            hits[i] += _correct(logits, y)[0]
            ent[i] += float(torch.special.entr(F.softmax(logits, -1)).sum(-1)[mask].sum())
        out = model.adaptive(x, R, cfg.stop_tau, cfg.stop_lag)
        a_hit += _correct(out.logits, y)[0]
        its = out.iterations[mask]
        depths = torch.full_like(out.iterations, R)
        depths[mask] = its[torch.randperm(its.numel(), generator=gen)]
        r_hit += _correct(model.per_token(x, depths), y)[0]
        a_iter += float(its.sum())
        prefix = mask & (torch.arange(x.shape[1]) < cfg.state_train_length)
        for m, into in ((mask, per_seq), (prefix, per_prefix)):
            into.extend(((out.iterations * m).sum(1) / m.sum(1).clamp(min=1)).tolist())
        hist += np.bincount(its.numpy() - 1, minlength=R)[:R]
        total += int(mask.sum())
    total = max(total, 1)
    return {"depth_accuracy": 100.0 * hits / total, "depth_entropy": ent / total,
            "adaptive_accuracy": 100.0 * a_hit / total, "random_accuracy": 100.0 * r_hit / total,
            "adaptive_iterations": a_iter / total,
            "stop_histogram": hist / total, "adaptive_iterations_se": _standard_error(per_seq),
            "prefix_iterations": float(np.mean(per_prefix)), "prefix_iterations_se": _standard_error(per_prefix)}


def _standard_error(values: list[float]) -> float:
    """The standard error of the mean of ``values`` (NaN with fewer than two)."""
    v = np.asarray(values, float)
    return float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
