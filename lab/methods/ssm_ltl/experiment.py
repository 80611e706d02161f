"""SSM expressiveness experiments: every hand-built construction on sampled words of 10, 100, ... letters up to
``check_length`` in float32 and int8; the a^n b^n c^n counter on a grid of n; one-layer models of each gating class
trained on (aa)*, #a mod m and b S a, tested at multiples of their training length."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.datasets.languages import encode, language_task, prefix_labels
from lab.methods.ssm_ltl import model as M
from lab.methods.ssm_ltl.config import Config
from lab.methods.ssm_ltl.train import (
    TRAINED_LANGUAGES,
    accuracy,
    letter_tables,
    long_run_words,
    predict,
    test_task,
    trained_model,
)
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: n of the a^n b^n c^n grid (those with 3n + 2 <= check_length are used): around int8's 127 and up to 10^4 / 3
COUNTER_NS = (1, 2, 10, 50, 100, 126, 127, 128, 129, 200, 500, 1000, 2000, 3332, 10_000, 33_332)
#: the words of each n: the member a^n b^n c^n, then near misses that must be rejected
COUNTER_WORDS = ("member", "a^(n+1) b^n c^n", "a^n b^(n+1) c^n", "a^n b^n c^(n+1)", "a^(n+1) b^(n+1) c^n")


def check_lengths(cfg: Config) -> list[int]:
    """10, 100, ... below check_length, and check_length."""
    out = [10 ** k for k in range(1, 6) if 10 ** k < cfg.check_length]
    return out + [cfg.check_length]


def _params(cfg: Config, name: str) -> dict:
    c = M.CONSTRUCTIONS[name]
    if name == "lti_since":
        return {"decay": cfg.lti_decay}
    if name == "decay_parity":
        return {"gate": cfg.decay_gate}
    if c.language == "mod_count":
        return {"modulus": cfg.modulus}
    return {}


def _counter_word(n: int, kind: int) -> str:
    i, j, k = n, n, n
    i += kind in (1, 4)
    j += kind in (2, 4)
    k += kind == 3
    return "a" * i + "b" * j + "c" * k


#: the hand-built b S a models of the long-run test: the input-gated construction and its time-invariant control
SINCE_MODELS = ("since", "lti_since")
_NO_HORIZON = f"NaN: the states after a and c stay apart in float32 over every run up to {M.HORIZON_LIMIT} b's"
_NOT_CHECKED = "NaN where the construction has no such precision (int8 only at modulus 2)"
_HAND = ("construction", "precision", "length")
_TRAINED = ("language", "kind", "seed")

SCHEMA = Schema(
    Var("wrong", _HAND, "wrong prefix decisions over the sampled words (NaN: the construction has no such "
        "precision; int8 of a gate in (0, 1): 8-bit fixed point)", "prefixes", missing=_NOT_CHECKED),
    Var("decisions", _HAND, "prefix decisions checked (words x length)", "prefixes", missing=_NOT_CHECKED),
    Var("first_failure", _HAND, "first position (1-based) where some word's decision is wrong (NaN: none)",
        "position", missing=_NOT_CHECKED),
    Var("counter_accepts", ("precision", "n", "word"), "the a^n b^n c^n counter's decision on the whole word (1: "
        "accept)"),
    Var("counter_truth", ("n", "word"), "membership of the grid's words in a^n b^n c^n"),
    Var("accuracy", (*_TRAINED, "factor"), "trained model: share of right prefix decisions on test words of "
        "train_length x factor letters"),
    Var("accuracy_beyond", (*_TRAINED, "factor"), "trained model: share of right decisions on the positions beyond "
        "train_length (NaN at factor 1)", missing="no position lies beyond train_length at factor 1"),
    Var("train_time", _TRAINED, "training wall time (when trained, not loaded)", "s"),
    Var("final_loss", _TRAINED, "mean training loss of the last 10 steps", "nats"),
    Var("accuracy_train", _TRAINED, "trained model: share of right prefix decisions on test words of train_length "
        "letters (in distribution: its competence)"),
    Var("expressible", ("language", "kind"), "the paper: one fixed-width layer of this class can recognise the "
        "language (1) or cannot (0)"),
    Var("run_wrong", ("since_model", "precision", "run"), "hand-built b S a: wrong decisions at the end of the "
        "long-run words (a test word, an a or a c, then the run of b's)", "words"),
    Var("hand_horizon", ("since_model",), "hand-built b S a: float32 horizon, the run of b's after which float32 "
        "holds the same state after an a as after a c (NaN: never)", "letters", missing=_NO_HORIZON),
    Var("run_accuracy", ("kind", "seed", "run"), "trained b S a models: share of right decisions at the end of the "
        "long-run words"),
    Var("horizon", ("kind", "seed"), "trained b S a models: float32 horizon, the run of b's after which float32 "
        "holds the same state after an a as after a c (NaN: none up to the limit)", "letters", missing=_NO_HORIZON),
    coords={
        "construction": Coord("hand-built construction"),
        "since_model": Coord("hand-built b S a: input-gated (gates {0, 1}) or time-invariant (decay < 1/2)"),
        "run": Coord("run of b's after the last a or c", "letters"),
        "length": Coord("word length", "letters"),
        "n": Coord("n of a^n b^n c^n"),
        "kind": Coord("gating class: time-invariant (real and complex eigenvalues), input gates in (0, 1), input "
                      "gates in (-1, 1)"),
        "factor": Coord("test length / train_length"),
    },
)


def _check_constructions(res: Results, cfg: Config, names: list[str], lengths: list[int], bar) -> None:
    """Every hand-built construction on sampled words of each check length, in each precision it has."""
    for c, name in enumerate(names):
        con = M.CONSTRUCTIONS[name]
        options = {"modulus": cfg.modulus} if con.language == "mod_count" else {}
        for k, length in enumerate(lengths):
            task = language_task(con.language, n=cfg.check_words, length=length, seed=cfg.seed + k, **options)
            truth = task.targets.astype(bool)
            for p, precision in enumerate(M.PRECISIONS):
                if precision not in con.precisions or (precision == "int8" and options.get("modulus", 2) != 2):
                    continue
                bad = con(task.inputs, precision, **_params(cfg, name)).accept != truth
                res["wrong"][c, p, k], res["decisions"][c, p, k] = bad.sum(), bad.size
                res["first_failure"][c, p, k] = np.flatnonzero(bad.any(axis=0))[0] + 1 if bad.any() else np.nan
            bar.update(1)


def _counter_grid(res: Results, ns: list[int], bar) -> None:
    """The a^n b^n c^n counter on each grid word, in each precision; the words' true membership."""
    for j, n in enumerate(ns):
        for w in range(len(COUNTER_WORDS)):
            x = encode("anbncn", _counter_word(n, w))[None]
            for p, precision in enumerate(M.PRECISIONS):
                res["counter_accepts"][p, j, w] = M.CONSTRUCTIONS["counter"](x, precision).accept[0, -1]
        bar.update(1)
    truth = np.array([prefix_labels("anbncn", encode("anbncn", _counter_word(n, w))[None])[0, -1]
                      for n in ns for w in range(len(COUNTER_WORDS))]).reshape(len(ns), len(COUNTER_WORDS))
    res["counter_truth"] = truth.astype(float)


def _trained_models(res: Results, cfg: Config, bar) -> None:
    """Each one-layer model (language, gating class, seed): trained (or loaded), tested at the training length and
    at each test factor (all positions, and those beyond the training length)."""
    for li, language in enumerate(TRAINED_LANGUAGES):
        for ki, kind in enumerate(M.CLASSES):
            for si, seed in enumerate(cfg.seeds):
                tr = trained_model(cfg, language, kind, seed)
                res["train_time"][li, ki, si] = tr.meta.get("train_time_s", np.nan)
                res["final_loss"][li, ki, si] = float(np.mean(tr.curves["loss"][-10:]))
                task = test_task(cfg, language, cfg.train_length, seed)
                res["accuracy_train"][li, ki, si] = accuracy(predict(tr.model, task.inputs)[0], task.targets)
                for fi, factor in enumerate(cfg.test_factors):
                    task = test_task(cfg, language, cfg.train_length * factor, seed)
                    accept, _ = predict(tr.model, task.inputs)
                    res["accuracy"][li, ki, si, fi] = accuracy(accept, task.targets)
                    if factor > 1:
                        res["accuracy_beyond"][li, ki, si, fi] = accuracy(accept, task.targets, cfg.train_length)
                bar.update(1)
    res["expressible"] = np.array([[M.expressible(lang, kind, cfg.modulus) for kind in M.CLASSES]
                                   for lang in TRAINED_LANGUAGES]).astype(float)


def _long_runs(res: Results, cfg: Config, bar) -> None:
    """b S a over runs of b's: the hand-built models (float32 and int8) and the trained ones, with their float32
    horizons."""
    for r, run in enumerate(cfg.run_lengths):
        words, truth = long_run_words(cfg, cfg.seed, run)
        for m, name in enumerate(SINCE_MODELS):
            for p, precision in enumerate(M.PRECISIONS):
                accept = M.CONSTRUCTIONS[name](words, precision, **_params(cfg, name)).accept[:, -1]
                res["run_wrong"][m, p, r] = int((accept != truth).sum())
        bar.update(1)
    for m, name in enumerate(SINCE_MODELS):
        res["hand_horizon"][m] = M.since_horizon(*M.construction_tables(name, cfg.lti_decay))
    for ki, kind in enumerate(M.CLASSES):
        for si, seed in enumerate(cfg.seeds):
            model = trained_model(cfg, "b_since_a", kind, seed).model
            res["horizon"][ki, si] = M.since_horizon(*(t[:3] for t in letter_tables(model)))
            for r, run in enumerate(cfg.run_lengths):
                words, truth = long_run_words(cfg, seed, run)
                res["run_accuracy"][ki, si, r] = float((predict(model, words)[0][:, -1] == truth).mean())
            bar.update(1)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Check the constructions, the counter grid, and train and test the one-layer models.

    Returns:
        Dataset with dims construction, precision, length (hand-built checks; int8 is 8-bit fixed point for the
        time-invariant controls); n, word (the counter grid); language, kind, seed, factor (trained models, with
        their accuracy at the training length). See each variable's long_name.
    """
    names, lengths = list(M.CONSTRUCTIONS), check_lengths(cfg)
    ns = [n for n in COUNTER_NS if 3 * n + 2 <= cfg.check_length]
    res = SCHEMA.new(construction=names, precision=list(M.PRECISIONS), length=lengths, n=ns,
                     word=list(COUNTER_WORDS), language=list(TRAINED_LANGUAGES), kind=list(M.CLASSES),
                     seed=list(cfg.seeds), factor=list(cfg.test_factors), since_model=list(SINCE_MODELS),
                     run=list(cfg.run_lengths))
    n_models = len(TRAINED_LANGUAGES) * len(M.CLASSES) * len(cfg.seeds)
    n_long = len(cfg.run_lengths) + len(M.CLASSES) * len(cfg.seeds)
    bar = tqdm(total=len(names) * len(lengths) + len(ns) + n_models + n_long, desc="ssm_ltl", disable=not progress)
    with threads(cfg.threads):
        _check_constructions(res, cfg, names, lengths, bar)
        _counter_grid(res, ns, bar)
        _trained_models(res, cfg, bar)
        _long_runs(res, cfg, bar)
    bar.close()
    ds = res.build(attrs={"train_length": cfg.train_length, "claim_factor": cfg.claim_factor,
                          "modulus": cfg.modulus, "check_length": cfg.check_length,
                          "check_words": cfg.check_words, "n_test": cfg.n_test, "lti_decay": cfg.lti_decay,
                          "decay_gate": cfg.decay_gate})
    return ds.assign_coords(construction_language=("construction", [M.CONSTRUCTIONS[n].language for n in names]),
                            construction_kind=("construction", [M.CONSTRUCTIONS[n].kind for n in names]))
