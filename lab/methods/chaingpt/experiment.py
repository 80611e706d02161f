"""ChainGPT experiments: the word problem (substeps, depth, baselines) and MQAR (anchors), trained short, tested
long."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.chaingpt.config import Config
from lab.methods.chaingpt.train import (
    RECALL_RUNS,
    RUNS,
    STATE_RUNS,
    accuracy,
    depth_profile,
    load_tasks,
    trained,
)
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

_SD, _RD, _DD, _AD = (("seed", "state_run", "state_length"), ("seed", "recall_run", "recall_length"),
                      ("seed", "depth", "state_length"), ("seed", "state_length"))

SCHEMA = Schema(
    Var("state_accuracy", _SD, "accuracy on the {state_task} word problem over labelled positions (ChainGPT at "
        "depth r_max)", "%"),
    Var("recall_accuracy", _RD, "MQAR accuracy over the query positions (depth r_max)", "%"),
    Var("depth_accuracy", _DD, "ChainGPT's word-problem accuracy at each fixed depth", "%"),
    Var("depth_entropy", _DD, "mean entropy of the output distribution after each iteration (fixed depth)", "nats"),
    Var("stop_share", _DD, "share of labelled tokens the entropy-drop rule stops after each number of iterations"),
    Var("adaptive_accuracy", _AD, "ChainGPT's word-problem accuracy with adaptive stopping", "%"),
    Var("random_accuracy", _AD, "ChainGPT's word-problem accuracy with random per-token stopping at the adaptive "
        "rule's depths (its iteration counts shuffled over the tokens: the same mean depth)", "%"),
    Var("adaptive_iterations", _AD, "mean core iterations per labelled token with adaptive stopping", "iterations"),
    Var("adaptive_iterations_se", _AD, "standard error of the adaptive mean iterations over the test sequences (the "
        "sequence as the unit)", "iterations"),
    Var("prefix_iterations", _AD, "adaptive mean core iterations per labelled token before the training length "
        "(the first state_length[0] positions)", "iterations"),
    Var("prefix_iterations_se", _AD, "standard error of prefix_iterations over the test sequences", "iterations"),
    Var("n_params", ("run",), "trainable parameters", dtype=int),
    Var("train_time", ("seed", "run"), "training wall time (of the run that trained the weights, also when loaded: "
        "see from_cache)", "s"),
    Var("from_cache", ("seed", "run"), "weights loaded from the cache", dtype=bool),
    Var("train_loss", ("seed", "run", "step"), "training loss per step (NaN after a run's last step)", "nats",
        missing="a run shorter than the longest stops early: NaN after its last step"),
    coords={
        "run": "every trained model",
        "recall_run": "ChainGPT with window and anchors; the window alone",
        "state_length": Coord("word-problem length (first: training)", "tokens"),
        "recall_length": Coord("MQAR length (first: training)", "tokens"),
        "depth": Coord("core iterations", "iterations"),
        "step": Coord("training step", "steps"),
    },
)


def _schema(cfg: Config) -> Schema:
    """:data:`SCHEMA` and the coordinate whose long_name names the run's substeps."""
    return SCHEMA + Schema(coords={"state_run": f"ChainGPT (M = {cfg.substeps}); one substep at the same parameter "
                                                "count; causal transformer; Mamba"})


def _depths(res: Results, s: int, k: int, prof: dict) -> None:
    """ChainGPT's depth profile at the ``k``-th word-problem length: every fixed depth and adaptive stopping."""
    for var in ("depth_accuracy", "depth_entropy"):
        res[var][s, :, k] = prof[var]
    res["stop_share"][s, :, k] = prof["stop_histogram"]
    for var in ("adaptive_accuracy", "random_accuracy", "adaptive_iterations", "adaptive_iterations_se",
                "prefix_iterations", "prefix_iterations_se"):
        res[var][s, k] = prof[var]


def _task(cfg: Config, res: Results, s: int, seed: int, which: str, runs: tuple[str, ...], bar,
          progress: bool) -> None:
    """Train every run of one task (``state``: the word problem, ``recall``: MQAR) and test it at every length."""
    train, tests = load_tasks(cfg, which, seed)
    lengths = res.coord_values[f"{which}_length"].tolist()
    for j, name in enumerate(runs):
        out = trained(cfg, name, train, seed, progress=progress)
        r = RUNS.index(name)
        res["n_params"][r], res["from_cache"][s, r] = out.meta["params"], out.loaded
        res["train_time"][s, r] = out.meta["train_time_s"]
        res["train_loss"][s, r, : len(out.curves["loss"])] = out.curves["loss"]
        for k, L in enumerate(lengths):
            res[f"{which}_accuracy"][s, j, k] = accuracy(out.model, tests[L])
            if name == "chaingpt":
                _depths(res, s, k, depth_profile(out.model, tests[L], cfg, seed))
        bar.update(1)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Per seed: train ChainGPT (M substeps), its one-substep control, a transformer and Mamba on the word problem,
    and ChainGPT with and without anchors on MQAR; measure accuracy at the training length and every test length,
    and ChainGPT's accuracy at every fixed depth and with adaptive stopping.

    Returns:
        Dataset with dims seed, run, state_length, recall_length, depth, step (see each variable's long_name).
    """
    res = _schema(cfg).new(
        seed=list(cfg.seeds), run=list(RUNS), state_run=list(STATE_RUNS), recall_run=list(RECALL_RUNS),
        state_length=[cfg.state_train_length, *cfg.state_test_lengths],
        recall_length=[cfg.recall_train_length, *cfg.recall_test_lengths],
        depth=np.arange(1, cfg.max_iterations + 1),
        step=np.arange(1, max(cfg.steps, cfg.recall_steps, cfg.baseline_steps) + 1),
        context={"state_task": cfg.state_task})
    bar = tqdm(total=len(cfg.seeds) * len(RUNS), desc="ChainGPT runs", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            _task(cfg, res, s, seed, "state", STATE_RUNS, bar, progress)
            _task(cfg, res, s, seed, "recall", RECALL_RUNS, bar, progress)
    bar.close()
    return res.build(attrs={
        "state_task": cfg.state_task, "substeps": cfg.substeps, "max_iterations": cfg.max_iterations,
        "stop_tau": cfg.stop_tau, "stop_lag": cfg.stop_lag, "n_pairs": cfg.n_pairs, "window": cfg.window,
        "anchor_every": cfg.anchor_every, "d_model": cfg.d_model, "n_test": cfg.n_test})
