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

__all__ = ["run"]

SCORES = ("exact", "digits", "errors", "finished")


def _runs(cfg: Config) -> list[tuple[str, str]]:
    """(model, regime) pairs trained: the baselines in the tool regime only when ``baselines_tool_only``."""
    return [(m, r) for m in cfg.models for r in cfg.regimes
            if r == "tool" or m in ("mamba", "lru") or not cfg.baselines_tool_only]


def _in_distribution(cfg: Config, model, task: str, regime: str) -> tuple[float, float]:
    """(exact match %, digit accuracy %) closed loop on ``n_test`` problems of ``train_max`` digits: inside the
    training range, where a model that learned its task is right."""
    n = cfg.train_max
    s = score(rollout(model, task, regime, E.test_problems(task, n, cfg.n_test, cfg.seed), E.budget(task, regime, n)))
    return s["exact"], s["digits"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train each (task, model, regime, seed) and test it closed loop at each length.

    Returns:
        Dataset with dims task, model, regime, seed, length: exact-match and digit accuracy, error tokens and
        finished episodes (NaN where a pair was not trained); training loss, time and parameters; exact-match and
        digit accuracy at ``train_max`` digits (task, model, regime, seed), the models' competence where they were
        trained (the same test problems as ``exact`` when ``train_max`` is a test length).
    """
    T, K, R, S, L = (len(cfg.tasks), len(cfg.models), len(cfg.regimes), len(cfg.seeds), len(cfg.test_lengths))
    out = {name: np.full((T, K, R, S, L), np.nan) for name in SCORES}
    eval_s = np.full((T, K, R, S, L), np.nan)
    loss_end, train_s, params, in_exact, in_digits = (np.full((T, K, R, S), np.nan) for _ in range(5))
    pairs = _runs(cfg)
    bar = tqdm(total=T * len(pairs) * S, desc="tool_ssm models", disable=not progress)
    with threads(cfg.threads):
        for t, task in enumerate(cfg.tasks):
            for kind, regime in pairs:
                k, r = cfg.models.index(kind), cfg.regimes.index(regime)
                for s, seed in enumerate(cfg.seeds):
                    tr = trained(cfg, task, kind, regime, seed, progress=progress)
                    loss = tr.curves["loss"]
                    loss_end[t, k, r, s] = float(np.mean(loss[-max(1, len(loss) // 10):]))
                    train_s[t, k, r, s] = tr.meta.get("train_s", np.nan)
                    params[t, k, r, s] = n_params(tr.model)
                    for j, n in enumerate(cfg.test_lengths):
                        start = time.perf_counter()
                        episodes = rollout(tr.model, task, regime, E.test_problems(task, n, cfg.n_test, cfg.seed),
                                           E.budget(task, regime, n))
                        eval_s[t, k, r, s, j] = time.perf_counter() - start
                        for name, value in score(episodes).items():
                            out[name][t, k, r, s, j] = value
                    in_exact[t, k, r, s], in_digits[t, k, r, s] = _in_distribution(cfg, tr.model, task, regime)
                    bar.update(1)
    bar.close()
    dims = ("task", "model", "regime", "seed", "length")
    return xr.Dataset(
        {
            "exact": (dims, out["exact"], {"long_name": "closed-loop exact match (output tape = answer, DONE said)",
                                           "units": "%"}),
            "digits": (dims, out["digits"], {"long_name": "answer digits right, position by position",
                                             "units": "%"}),
            "errors": (dims, out["errors"], {"long_name": "malformed commands (oERR tokens) per episode",
                                             "units": "tokens"}),
            "finished": (dims, out["finished"], {"long_name": "episodes ended by DONE within the token budget",
                                                 "units": "%"}),
            "eval_time": (dims, eval_s, {"long_name": "closed-loop test time", "units": "s"}),
            "final_loss": (dims[:4], loss_end, {"long_name": "training loss on the agent's tokens, last 10% of "
                                                             "steps", "units": "nats"}),
            "train_time": (dims[:4], train_s, {"long_name": "training wall time (when trained, not loaded)",
                                               "units": "s"}),
            "n_params": (dims[:4], params, {"long_name": "trainable parameters", "units": "1"}),
            "exact_train_max": (dims[:4], in_exact, {"long_name": "closed-loop exact match at train_max digits "
                                                                  "(inside the training range: competence)",
                                                     "units": "%"}),
            "digits_train_max": (dims[:4], in_digits, {"long_name": "answer digits right at train_max digits "
                                                                    "(inside the training range)", "units": "%"}),
        },
        coords={
            "task": ("task", list(cfg.tasks)),
            "model": ("model", list(cfg.models)),
            "regime": ("regime", list(cfg.regimes), {"long_name": "tool: interactive tool use; cot: chain of "
                                                                  "thought only (no tool answers); direct: the "
                                                                  "answer right after the question"}),
            "seed": ("seed", list(cfg.seeds)),
            "length": ("length", list(cfg.test_lengths), {"long_name": "operand length", "units": "digits"}),
        },
        attrs={"train_max": cfg.train_max, "claim_length": cfg.claim_length, "n_test": cfg.n_test,
               "d_model": cfg.d_model, "n_layers": cfg.n_layers, "steps": cfg.steps},
    )
