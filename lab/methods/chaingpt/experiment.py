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

__all__ = ["run"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Per seed: train ChainGPT (M substeps), its one-substep control, a transformer and Mamba on the word problem,
    and ChainGPT with and without anchors on MQAR; measure accuracy at the training length and every test length,
    and ChainGPT's accuracy at every fixed depth and with adaptive stopping.

    Returns:
        Dataset with dims seed, run, state_length, recall_length, depth, step (see each variable's long_name).
    """
    seeds, R = cfg.seeds, cfg.max_iterations
    s_len = (cfg.state_train_length, *cfg.state_test_lengths)
    r_len = (cfg.recall_train_length, *cfg.recall_test_lengths)
    S = len(seeds)
    state_acc = np.full((S, len(STATE_RUNS), len(s_len)), np.nan)
    recall_acc = np.full((S, len(RECALL_RUNS), len(r_len)), np.nan)
    steps = max(cfg.steps, cfg.recall_steps)
    params, times = np.zeros(len(RUNS), np.int64), np.zeros((S, len(RUNS)))
    loss = np.full((S, len(RUNS), steps), np.nan)
    loaded = np.zeros((S, len(RUNS)), bool)
    depth_acc, depth_ent, stop_hist = (np.zeros((S, R, len(s_len))) for _ in range(3))
    adapt_acc, adapt_iter = np.zeros((S, len(s_len))), np.zeros((S, len(s_len)))
    adapt_se, prefix_iter, prefix_se = (np.full((S, len(s_len)), np.nan) for _ in range(3))
    bar = tqdm(total=S * len(RUNS), desc="ChainGPT runs", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(seeds):
            for which, runs, lengths, acc in (("state", STATE_RUNS, s_len, state_acc),
                                              ("recall", RECALL_RUNS, r_len, recall_acc)):
                train, tests = load_tasks(cfg, which, seed)
                for j, name in enumerate(runs):
                    out = trained(cfg, name, train, seed, progress=progress)
                    r = RUNS.index(name)
                    params[r], loaded[s, r] = out.meta["params"], out.loaded
                    times[s, r] = out.meta["train_time_s"]
                    loss[s, r, : len(out.curves["loss"])] = out.curves["loss"]
                    for k, L in enumerate(lengths):
                        acc[s, j, k] = accuracy(out.model, tests[L])
                        if name == "chaingpt":
                            prof = depth_profile(out.model, tests[L], cfg)
                            depth_acc[s, :, k], depth_ent[s, :, k] = prof["depth_accuracy"], prof["depth_entropy"]
                            stop_hist[s, :, k] = prof["stop_histogram"]
                            adapt_acc[s, k], adapt_iter[s, k] = prof["adaptive_accuracy"], prof["adaptive_iterations"]
                            adapt_se[s, k] = prof["adaptive_iterations_se"]
                            prefix_iter[s, k] = prof["prefix_iterations"]
                            prefix_se[s, k] = prof["prefix_iterations_se"]
                    bar.update(1)
    bar.close()
    sd, rd = ("seed", "state_run", "state_length"), ("seed", "recall_run", "recall_length")
    dd = ("seed", "depth", "state_length")
    return xr.Dataset(
        {
            "state_accuracy": (sd, state_acc, {"long_name": f"accuracy on the {cfg.state_task} word problem over "
                                                            "labelled positions (ChainGPT at depth r_max)",
                                               "units": "%"}),
            "recall_accuracy": (rd, recall_acc, {"long_name": "MQAR accuracy over the query positions (depth "
                                                              "r_max)", "units": "%"}),
            "depth_accuracy": (dd, depth_acc, {"long_name": "ChainGPT's word-problem accuracy at each fixed depth",
                                               "units": "%"}),
            "depth_entropy": (dd, depth_ent, {"long_name": "mean entropy of the output distribution after each "
                                                           "iteration (fixed depth)", "units": "nats"}),
            "stop_share": (dd, stop_hist, {"long_name": "share of labelled tokens the entropy-drop rule stops "
                                                        "after each number of iterations", "units": "1"}),
            "adaptive_accuracy": (("seed", "state_length"), adapt_acc,
                                  {"long_name": "ChainGPT's word-problem accuracy with adaptive stopping",
                                   "units": "%"}),
            "adaptive_iterations": (("seed", "state_length"), adapt_iter,
                                    {"long_name": "mean core iterations per labelled token with adaptive stopping",
                                     "units": "iterations"}),
            "adaptive_iterations_se": (("seed", "state_length"), adapt_se,
                                       {"long_name": "standard error of the adaptive mean iterations over the test "
                                                     "sequences (the sequence as the unit)", "units": "iterations"}),
            "prefix_iterations": (("seed", "state_length"), prefix_iter,
                                  {"long_name": "adaptive mean core iterations per labelled token before the "
                                                "training length (the first state_length[0] positions)",
                                   "units": "iterations"}),
            "prefix_iterations_se": (("seed", "state_length"), prefix_se,
                                     {"long_name": "standard error of prefix_iterations over the test sequences",
                                      "units": "iterations"}),
            "n_params": (("run",), params, {"long_name": "trainable parameters", "units": "1"}),
            "train_time": (("seed", "run"), times, {"long_name": "training wall time (of the run that trained the "
                                                                 "weights, also when loaded: see from_cache)",
                                                    "units": "s"}),
            "from_cache": (("seed", "run"), loaded, {"long_name": "weights loaded from the cache", "units": "1"}),
            "train_loss": (("seed", "run", "step"), loss,
                           {"long_name": "training loss per step (NaN after a run's last step)", "units": "nats"}),
        },
        coords={
            "seed": ("seed", list(seeds)),
            "run": ("run", list(RUNS), {"long_name": "every trained model"}),
            "state_run": ("state_run", list(STATE_RUNS),
                          {"long_name": f"ChainGPT (M = {cfg.substeps}); one substep at the same parameter count; "
                                        "causal transformer; Mamba"}),
            "recall_run": ("recall_run", list(RECALL_RUNS),
                           {"long_name": "ChainGPT with window and anchors; the window alone"}),
            "state_length": ("state_length", list(s_len), {"long_name": "word-problem length (first: training)",
                                                           "units": "tokens"}),
            "recall_length": ("recall_length", list(r_len), {"long_name": "MQAR length (first: training)",
                                                             "units": "tokens"}),
            "depth": ("depth", np.arange(1, R + 1), {"long_name": "core iterations", "units": "iterations"}),
            "step": ("step", np.arange(1, steps + 1), {"long_name": "training step", "units": "steps"}),
        },
        attrs={"state_task": cfg.state_task, "substeps": cfg.substeps, "max_iterations": R,
               "stop_tau": cfg.stop_tau, "stop_lag": cfg.stop_lag, "n_pairs": cfg.n_pairs, "window": cfg.window,
               "anchor_every": cfg.anchor_every, "d_model": cfg.d_model, "n_test": cfg.n_test},
    )
