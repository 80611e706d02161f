"""PSM experiments: train the Transformer-PSM and matched-size baselines on a state-tracking task and MQAR, test
at multiples of the training length; run the trained PSMs in parallel and streaming (binary counter, left fold,
naive recompute) on the same sequences; trace the binary counter."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.core.transformer import n_params
from lab.methods.psm.config import Config
from lab.methods.psm.live import counter_trace
from lab.methods.psm.model import BRACKETINGS
from lab.methods.psm.train import accuracy_by_position, trained_model, widths

__all__ = ["run"]

#: the run's two tasks: a state-tracking task (cfg.state_task) and associative recall
TASK_KINDS = ("state", "recall")


def _splits(cfg: Config, kind: str) -> dict:
    """``{"train": TokenTask, length: TokenTask, ...}`` for one task kind."""
    from lab.datasets.synthetic import make_splits

    if kind == "state":
        name, options = cfg.state_task, ({"modulus": cfg.modulus} if cfg.state_task == "cyclic" else {})
    else:
        name, options = "mqar", {"vocab_size": cfg.mqar_vocab, "n_pairs": cfg.mqar_pairs,
                                 "n_queries": cfg.mqar_queries}
    splits = make_splits(name, n_train=cfg.n_train, n_test=cfg.n_test, train_length=cfg.train_length,
                         test_lengths=cfg.test_lengths, seed=cfg.seed, **options)
    train = splits["train"]
    tests = {t.length: t for k, t in splits.items() if k != "train"}
    return {"train": train, **{length: tests[length] for length in cfg.test_lengths}}


class _Blind(torch.nn.Module):
    """A trained PSM whose inference module reads the identity (empty state) for every chunk: the control."""

    def __init__(self, psm):
        super().__init__()
        self.psm = psm

    def forward(self, tokens):
        return self.psm(tokens, blind=True)


@torch.no_grad()
def _streaming(cfg: Config, model, vocab: int, gen: torch.Generator) -> dict[str, np.ndarray]:
    """Per chunk count n and bracketing: max |parallel - streaming| logit, most live states, total calls."""
    N, B = len(cfg.stream_chunks), len(BRACKETINGS)
    diff, live, calls = np.full((B, N), np.nan), np.full((B, N), np.nan), np.full((B, N), np.nan)
    for j, n in enumerate(cfg.stream_chunks):
        tokens = torch.randint(0, vocab, (cfg.stream_batch, n * cfg.chunk), generator=gen)
        parallel = model(tokens)
        for b, bracketing in enumerate(BRACKETINGS):
            out, stats = model.stream(tokens, bracketing)
            diff[b, j] = float((out - parallel).abs().max())
            live[b, j], calls[b, j] = max(stats.live), stats.calls[-1]
    return {"diff": diff, "live": live, "calls": calls}


def _mean_labelled(acc: np.ndarray) -> np.ndarray:
    """Mean over the last axis (positions) of the finite entries, in %; NaN where there is none."""
    ok = np.isfinite(acc)
    return np.where(ok.any(-1), np.where(ok, acc, 0).sum(-1) / np.maximum(ok.sum(-1), 1), np.nan) * 100


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every model of ``cfg.models`` on both tasks over the seeds; test at ``test_factors`` x the training
    length; compare parallel and streaming logits of the trained PSMs; trace the binary counter.

    Returns:
        Dataset with dims task, model, seed, factor, position, step, psm, bracketing, n_chunks, pushed, slot.
    """
    models, seeds, factors = list(cfg.models), cfg.seeds, cfg.test_factors
    T, M, S, F, P = len(TASK_KINDS), len(models), len(seeds), len(factors), max(cfg.test_lengths)
    acc_pos = np.full((T, M, S, F, P), np.nan)
    blind_pos = np.full((T, S, F, P), np.nan)
    loss = np.full((T, M, S, cfg.steps), np.nan)
    train_time = np.full((T, M, S), np.nan)
    count, width = np.zeros((T, M), np.int64), np.zeros((T, M), np.int64)
    psms = [m for m in models if m.startswith("psm")]
    stream = {k: np.full((len(psms), len(BRACKETINGS), len(cfg.stream_chunks)), np.nan)
              for k in ("diff", "live", "calls")}
    names = {}
    bar = tqdm(total=T * M * S, desc="PSM runs", disable=not progress)
    with threads(cfg.threads):
        for t, kind in enumerate(TASK_KINDS):
            splits = _splits(cfg, kind)
            train = splits["train"]
            names[kind] = train.name
            w = widths(cfg, train.vocab_size, train.n_classes)
            for m, name in enumerate(models):
                for s, seed in enumerate(seeds):
                    bar.set_postfix(task=train.name, model=name, seed=seed)
                    out = trained_model(cfg, train, name, seed, progress=False)
                    loss[t, m, s, : len(out.curves["loss"])] = out.curves["loss"]
                    train_time[t, m, s] = out.meta.get("train_time_s", np.nan)
                    count[t, m], width[t, m] = n_params(out.model), w[name]
                    for f, length in enumerate(cfg.test_lengths):
                        acc_pos[t, m, s, f, :length] = accuracy_by_position(out.model, splits[length])
                        if name == "psm":
                            blind_pos[t, s, f, :length] = accuracy_by_position(_Blind(out.model), splits[length])
                    if kind == "state" and s == 0 and name in psms:
                        gen = torch.Generator().manual_seed(cfg.seed + 1)
                        res = _streaming(cfg, out.model, train.vocab_size, gen)
                        for k in stream:
                            stream[k][psms.index(name)] = res[k]
                    bar.update(1)
    bar.close()
    trace = counter_trace(cfg.trace_chunks)
    beyond = np.arange(P) >= cfg.train_length
    acc, blind = _mean_labelled(acc_pos), _mean_labelled(blind_pos)
    acc_new = _mean_labelled(np.where(beyond, acc_pos, np.nan))
    blind_new = _mean_labelled(np.where(beyond, blind_pos, np.nan))
    tm = ("task", "model")
    sb = ("psm", "bracketing", "n_chunks")
    ds = xr.Dataset(
        {
            "accuracy": ((*tm, "seed", "factor"), acc,
                         {"long_name": "test accuracy: mean over the labelled positions of the per-position accuracy",
                          "units": "%"}),
            "accuracy_beyond": ((*tm, "seed", "factor"), acc_new,
                                {"long_name": "test accuracy: mean over the labelled positions past the training "
                                              "length of the per-position accuracy (NaN at factor 1)", "units": "%"}),
            "accuracy_position": ((*tm, "seed", "factor", "position"), acc_pos * 100,
                                  {"long_name": "test accuracy at each position (NaN: no label there)",
                                   "units": "%"}),
            "blind_accuracy": (("task", "seed", "factor"), blind,
                               {"long_name": "the trained Transformer-PSM with every prefix state replaced by the "
                                             "identity (the control): accuracy over labelled positions",
                                "units": "%"}),
            "blind_accuracy_beyond": (("task", "seed", "factor"), blind_new,
                                      {"long_name": "the state-blind Transformer-PSM (the control): accuracy over "
                                                    "the labelled positions past the training length (NaN at factor "
                                                    "1)",
                                       "units": "%"}),
            "train_loss": ((*tm, "seed", "step"), loss, {"long_name": "training loss (cross-entropy per labelled "
                                                                      "token)", "units": "nat"}),
            "train_time": ((*tm, "seed"), train_time, {"long_name": "training wall time when trained (cached "
                                                                    "weights keep the first run's)", "units": "s"}),
            "n_params": (tm, count, {"long_name": "trainable parameters", "units": "parameters"}),
            "width": (tm, width, {"long_name": "d_model chosen to match the Transformer-PSM's parameter count",
                                  "units": "features"}),
            "stream_diff": (sb, stream["diff"], {"long_name": "max |parallel - streaming| logit over the sequences "
                                                              "of n chunks", "units": "1"}),
            "stream_live": (sb, stream["live"], {"long_name": "most chunk states held during a streaming pass",
                                                 "units": "states"}),
            "stream_calls": (sb, stream["calls"], {"long_name": "aggregator calls of a streaming pass over n chunks",
                                                   "units": "calls"}),
            **{f"trace_{k}": trace[k] for k in trace.data_vars},
        },
        coords={
            "task": ("task", list(TASK_KINDS), {"long_name": "state tracking; associative recall (MQAR)"}),
            "model": ("model", models, {"long_name": "Transformer-PSM; PSM with the affine (SSM) combine; causal "
                                                     "transformer (no positions); LRU; Mamba"}),
            "seed": ("seed", list(seeds)),
            "factor": ("factor", list(factors), {"long_name": "test length / training length", "units": "1"}),
            "position": ("position", np.arange(P), {"long_name": "token position", "units": "tokens"}),
            "step": ("step", np.arange(1, cfg.steps + 1), {"long_name": "training step", "units": "steps"}),
            "psm": ("psm", psms, {"long_name": "the trained PSM streamed (first seed, state task)"}),
            "bracketing": ("bracketing", list(BRACKETINGS),
                           {"long_name": "binary counter (the model's bracketing); left fold; naive recompute"}),
            "n_chunks": ("n_chunks", list(cfg.stream_chunks),
                         {"long_name": "chunks per sequence", "units": "chunks"}),
            "pushed": trace.pushed, "slot": trace.slot,
        },
        attrs={"state_task": names["state"], "recall_task": names["recall"], "train_length": cfg.train_length,
               "chunk": cfg.chunk, "n_test": cfg.n_test},
    )
    return ds
