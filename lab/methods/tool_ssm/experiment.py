"""Tool-use experiments: every model in every regime trained on short problems, tested closed loop at every test
length on the same problems."""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.core.transformer import n_params
from lab.methods.tool_ssm import env as E
from lab.methods.tool_ssm.config import Config
from lab.methods.tool_ssm.model import rollout, score
from lab.methods.tool_ssm.train import trained
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

SCORES = ("exact", "digits", "errors", "finished")

_TEST = ("task", "model", "regime", "seed", "length")
_TRAIN = _TEST[:4]
_UNTRAINED = "NaN where a (model, regime) pair was not trained (a model not in no_tool_models, without the tool)"

SCHEMA = Schema(
    Var("exact", _TEST, "closed-loop exact match (output tape = answer, DONE said)", "%", missing=_UNTRAINED),
    Var("digits", _TEST, "answer digits right, position by position", "%", missing=_UNTRAINED),
    Var("errors", _TEST, "malformed commands (oERR tokens) per episode", "tokens", missing=_UNTRAINED),
    Var("finished", _TEST, "episodes ended by DONE within the token budget", "%", missing=_UNTRAINED),
    Var("eval_time", _TEST, "closed-loop test time", "s", missing=_UNTRAINED),
    Var("final_loss", _TRAIN, "training loss on the agent's tokens, last 10% of steps", "nats", missing=_UNTRAINED),
    Var("train_time", _TRAIN, "training wall time (when trained, not loaded)", "s", missing=_UNTRAINED),
    Var("n_params", _TRAIN, "trainable parameters", missing=_UNTRAINED),
    Var("exact_train_max", _TRAIN, "closed-loop exact match at train_max digits (inside the training range: "
        "competence)", "%", missing=_UNTRAINED),
    Var("digits_train_max", _TRAIN, "answer digits right at train_max digits (inside the training range)", "%",
        missing=_UNTRAINED),
    coords={
        "regime": "tool: interactive tool use; cot: chain of thought only (no tool answers); direct: the answer "
                  "right after the question",
        "length": Coord("operand length", "digits"),
    },
)


def _runs(cfg: Config) -> list[tuple[str, str]]:
    """(model, regime) pairs trained: every model with the tool, those of ``no_tool_models`` in the other regimes."""
    return [(m, r) for m in cfg.models for r in cfg.regimes if r == "tool" or m in cfg.no_tool_models]


def _in_distribution(cfg: Config, model, task: str, regime: str) -> tuple[float, float]:
    """(exact match %, digit accuracy %) closed loop on ``n_competence`` problems of ``train_max`` digits: inside the
    training range, where a model that learned its task is right."""
    n = cfg.train_max
    s = score(rollout(model, task, regime, E.test_problems(task, n, cfg.n_competence, cfg.seed),
                      E.budget(task, regime, n)))
    return s["exact"], s["digits"]


def _train_and_test(cfg: Config, res: Results, at: tuple[int, int, int, int], task: str, kind: str, regime: str,
                    seed: int, progress: bool) -> None:
    """Train one (task, model, regime, seed) and test it closed loop at every test length and at ``train_max``;
    ``at`` is its (task, model, regime, seed) index."""
    tr = trained(cfg, task, kind, regime, seed, progress=progress)
    loss = tr.curves["loss"]
    res["final_loss"][at] = float(np.mean(loss[-max(1, len(loss) // 10):]))
    res["train_time"][at] = tr.meta.get("train_s", np.nan)
    res["n_params"][at] = n_params(tr.model)
    for j, n in enumerate(cfg.test_lengths):
        start = time.perf_counter()
        episodes = rollout(tr.model, task, regime, E.test_problems(task, n, cfg.n_test, cfg.seed),
                           E.budget(task, regime, n))
        res["eval_time"][(*at, j)] = time.perf_counter() - start
        for name, value in score(episodes).items():
            res[name][(*at, j)] = value
    res["exact_train_max"][at], res["digits_train_max"][at] = _in_distribution(cfg, tr.model, task, regime)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train each (task, model, regime, seed) and test it closed loop at each length.

    Returns:
        Dataset with dims task, model, regime, seed, length: exact-match and digit accuracy, error tokens and
        finished episodes (NaN where a pair was not trained); training loss, time and parameters; exact-match and
        digit accuracy at ``train_max`` digits (task, model, regime, seed), the models' competence where they were
        trained (on ``n_competence`` problems, the first of them those of ``exact`` when ``train_max`` is a test
        length).
    """
    res = SCHEMA.new(task=list(cfg.tasks), model=list(cfg.models), regime=list(cfg.regimes), seed=list(cfg.seeds),
                     length=list(cfg.test_lengths))
    pairs = _runs(cfg)
    bar = tqdm(total=len(cfg.tasks) * len(pairs) * len(cfg.seeds), desc="tool_ssm models", disable=not progress)
    with threads(cfg.threads):
        for t, task in enumerate(cfg.tasks):
            for kind, regime in pairs:
                k, r = cfg.models.index(kind), cfg.regimes.index(regime)
                for s, seed in enumerate(cfg.seeds):
                    _train_and_test(cfg, res, (t, k, r, s), task, kind, regime, seed, progress)
                    bar.update(1)
    bar.close()
    return res.build(attrs={"train_max": cfg.train_max, "claim_length": cfg.claim_length, "n_test": cfg.n_test,
                            "n_competence": cfg.n_competence,
                            "d_model": cfg.d_model, "n_layers": cfg.n_layers, "steps": cfg.steps,
                            "no_tool_steps": cfg.no_tool_steps})
