"""PSM experiments: train the Transformer-PSM and matched-size baselines on a state-tracking task and MQAR, test
at multiples of the training length; run the trained PSMs in parallel and streaming (binary counter, left fold,
naive recompute) on the same sequences; trace the binary counter."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.psm import BRACKETINGS
from lab.core.runtime import threads
from lab.core.transformer import n_params
from lab.methods.psm.config import Config
from lab.methods.psm.live import counter_trace
from lab.methods.psm.train import accuracy_by_position, regime, train_all, trained_model, training_steps, widths
from lab.results import Coord, Schema, Var

__all__ = ["run"]

#: the run's two tasks: a state-tracking task (cfg.state_task) and associative recall
TASK_KINDS = ("state", "recall")

_RUN = ("task", "model", "seed")
_STREAM = ("psm", "bracketing", "n_chunks")
SCHEMA = Schema(
    Var("accuracy", (*_RUN, "factor"),
        "test accuracy: mean over the labelled positions of the per-position accuracy", "%"),
    Var("accuracy_beyond", (*_RUN, "factor"), "test accuracy: mean over the labelled positions past the training "
                                               "length of the per-position accuracy (NaN at factor 1)", "%"),
    Var("accuracy_position", (*_RUN, "factor", "position"), "test accuracy at each position (NaN: no label there)",
        "%"),
    Var("blind_accuracy", ("task", "seed", "factor"),
        "the trained Transformer-PSM with every prefix state replaced by the identity (the control): accuracy over "
        "labelled positions", "%"),
    Var("blind_accuracy_beyond", ("task", "seed", "factor"),
        "the state-blind Transformer-PSM (the control): accuracy over the labelled positions past the training "
        "length (NaN at factor 1)", "%"),
    Var("train_loss", (*_RUN, "step"), "training loss (cross-entropy per labelled token; a mixed-length batch is "
        "one length)", "nat", missing="a model with fewer steps than the longest stops early: NaN after its end"),
    Var("train_time", _RUN, "training wall time when trained (cached weights keep the first run's)", "s"),
    Var("n_params", ("task", "model"), "trainable parameters", "parameters", dtype=int),
    Var("width", ("task", "model"), "d_model chosen to match the Transformer-PSM's parameter count", "features",
        dtype=int),
    Var("stream_diff", _STREAM, "max |parallel - streaming| logit over the sequences of n chunks"),
    Var("stream_live", _STREAM, "most chunk states held during a streaming pass", "states"),
    Var("stream_calls", _STREAM, "aggregator calls of a streaming pass over n chunks", "calls"),
    coords={
        "task": Coord("state tracking; associative recall (MQAR)"),
        "model": Coord("Transformer-PSM; PSM with the affine (SSM) combine; causal transformer (no positions); LRU; "
                       "Mamba"),
        "factor": Coord("test length / training length", "1"),
        "position": Coord("token position", "tokens"),
        "step": Coord("training step", "steps"),
        "psm": Coord("the trained PSM streamed (first seed, state task)"),
        "bracketing": Coord("binary counter (the model's bracketing); left fold; naive recompute"),
        "n_chunks": Coord("chunks per sequence", "chunks"),
    },
)


def _with_start(task):
    """``task`` with a start token (``Config.start_token``; :func:`lab.datasets.tokens.with_start_token`)."""
    from lab.datasets.tokens import with_start_token

    return with_start_token(task)


def _splits(cfg: Config, kind: str) -> dict:
    """``{"train": TokenTask, length: TokenTask, ...}`` for one task kind (keyed by the length without a start
    token)."""
    from lab.datasets.synthetic import make_splits

    if kind == "state":
        name, options = cfg.state_task, ({"modulus": cfg.modulus} if cfg.state_task == "cyclic" else {})
    else:
        name, options = "mqar", {"vocab_size": cfg.mqar_vocab, "n_pairs": cfg.mqar_pairs,
                                 "n_queries": cfg.mqar_queries}
    splits = make_splits(name, n_train=cfg.n_train, n_test=cfg.n_test, train_length=cfg.train_length,
                         test_lengths=cfg.test_lengths, seed=cfg.seed, **options)
    start = int(kind == "state" and cfg.start_token)
    if start:
        splits = {k: _with_start(t) for k, t in splits.items()}
    train = splits["train"]
    tests = {t.length - start: t for k, t in splits.items() if k != "train"}
    return {"train": train, **{length: tests[length] for length in cfg.test_lengths}}


class _Blind(torch.nn.Module):
    """A trained PSM whose inference module reads the identity (empty state) for every chunk: the control."""

    def __init__(self, psm):
        super().__init__()
        self.psm = psm

    def forward(self, tokens):
        return self.psm(tokens, blind=True)


@torch.no_grad()
def _streaming(cfg: Config, model, vocab: int, gen: torch.Generator, res, p: int) -> None:
    """Per chunk count n and bracketing, into ``res`` at PSM ``p``: max |parallel - streaming| logit, most live
    states, total calls."""
    for j, n in enumerate(cfg.stream_chunks):
        tokens = torch.randint(0, vocab, (cfg.stream_batch, n * cfg.chunk), generator=gen)
        parallel = model(tokens)
        for b, bracketing in enumerate(BRACKETINGS):
            out, stats = model.stream(tokens, bracketing)
            res["stream_diff"][p, b, j] = float((out - parallel).abs().max())
            res["stream_live"][p, b, j], res["stream_calls"][p, b, j] = max(stats.live), stats.calls[-1]


def _mean_labelled(acc: np.ndarray) -> np.ndarray:
    """Mean over the last axis (positions) of the finite entries, in %; NaN where there is none."""
    ok = np.isfinite(acc)
    return np.where(ok.any(-1), np.where(ok, acc, 0).sum(-1) / np.maximum(ok.sum(-1), 1), np.nan) * 100


def _positions(cfg: Config, model, splits: dict, blind: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-position test accuracy ``(factor, position)`` in [0, 1] of ``model`` (and, with ``blind``, of the same
    model state-blind), NaN past each test length."""
    shape = (len(cfg.test_lengths), max(cfg.test_lengths))
    pos, blind_pos = np.full(shape, np.nan), (np.full(shape, np.nan) if blind else None)
    for f, length in enumerate(cfg.test_lengths):
        pos[f, :length] = accuracy_by_position(model, splits[length])[-length:]  # without a start token's column
        if blind:
            blind_pos[f, :length] = accuracy_by_position(_Blind(model), splits[length])[-length:]
    return pos, blind_pos


def _store_accuracy(cfg: Config, res, t: int, m: int, s: int, pos: np.ndarray, blind_pos: np.ndarray | None) -> None:
    """The run's accuracies over every position and past the training length (and the state-blind control's)."""
    beyond = np.arange(pos.shape[-1]) >= cfg.train_length
    res["accuracy_position"][t, m, s] = pos * 100
    res["accuracy"][t, m, s] = _mean_labelled(pos)
    res["accuracy_beyond"][t, m, s] = _mean_labelled(np.where(beyond, pos, np.nan))
    if blind_pos is not None:
        res["blind_accuracy"][t, s] = _mean_labelled(blind_pos)
        res["blind_accuracy_beyond"][t, s] = _mean_labelled(np.where(beyond, blind_pos, np.nan))


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every model of ``cfg.models`` on both tasks over the seeds; test at ``test_factors`` x the training
    length; compare parallel and streaming logits of the trained PSMs; trace the binary counter.

    Returns:
        Dataset with dims task, model, seed, factor, position, step, psm, bracketing, n_chunks, pushed, slot.
    """
    models, seeds = list(cfg.models), cfg.seeds
    psms = [m for m in models if m.startswith("psm")]
    res = SCHEMA.new(task=list(TASK_KINDS), model=models, seed=list(seeds), factor=list(cfg.test_factors),
                     position=np.arange(max(cfg.test_lengths)),
                     step=np.arange(1, max(training_steps(cfg, m, k) for m in models for k in TASK_KINDS) + 1),
                     psm=psms,
                     bracketing=list(BRACKETINGS), n_chunks=list(cfg.stream_chunks))
    names, regimes = {}, {}
    all_splits = {kind: _splits(cfg, kind) for kind in TASK_KINDS}
    train_all(cfg, [all_splits[kind]["train"] for kind in TASK_KINDS], progress=progress)  # side by side, cached
    bar = tqdm(total=len(TASK_KINDS) * len(models) * len(seeds), desc="PSM runs", disable=not progress)
    with threads(cfg.threads):
        for t, kind in enumerate(TASK_KINDS):
            splits = all_splits[kind]
            train = splits["train"]
            names[kind] = train.name
            w = widths(cfg, train.vocab_size, train.n_classes)
            regimes[kind] = "; ".join(f"{name}: {regime(cfg, train, name)}" for name in models)
            for m, name in enumerate(models):
                for s, seed in enumerate(seeds):
                    bar.set_postfix(task=train.name, model=name, seed=seed)
                    out = trained_model(cfg, train, name, seed, progress=False)
                    loss = out.curves["loss"]
                    res["train_loss"][t, m, s, : len(loss)] = loss
                    res["train_time"][t, m, s] = out.meta.get("train_time_s", np.nan)
                    res["n_params"][t, m], res["width"][t, m] = n_params(out.model), w[name]
                    pos, blind_pos = _positions(cfg, out.model, splits, blind=name == "psm")
                    _store_accuracy(cfg, res, t, m, s, pos, blind_pos)
                    if kind == "state" and s == 0 and name in psms:
                        gen = torch.Generator().manual_seed(cfg.seed + 1)
                        _streaming(cfg, out.model, train.vocab_size, gen, res, psms.index(name))
                    bar.update(1)
    bar.close()
    ds = res.build(attrs={"state_task": names["state"], "recall_task": names["recall"],
                          "train_length": cfg.train_length, "chunk": cfg.chunk, "n_test": cfg.n_test,
                          "state_regime": regimes["state"], "recall_regime": regimes["recall"]})
    trace = counter_trace(cfg.trace_chunks)  # declared in live.py, where the dashboard draws it too
    return ds.assign({f"trace_{k}": trace[k] for k in trace.data_vars})
