"""Small cached computations for a dashboard or notebook besides ``run``: per-token iterations chosen by the
entropy-drop rule on one input sequence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lab.cache import memo
from lab.checks import bad_value, check_int, check_real
from lab.core.runtime import threads
from lab.methods.chaingpt.config import Config
from lab.methods.chaingpt.train import load_tasks, trained

__all__ = ["StoppingTrace", "stopping_trace"]


@dataclass(frozen=True)
class StoppingTrace:
    """The entropy-drop rule on one word-problem sequence.

    Attributes:
        tokens, targets, predictions: ``(length,)`` int64 (targets -100 where a position has no label).
        iterations: ``(length,)`` int64, core iterations the rule chose for each token (1..r_max).
        entropy: ``(r_max, length)`` float, ``H_i(t)`` in nats after each iteration (a stopped token keeps its
            value).
        fixed_predictions: ``(length,)`` int64, the predictions at the fixed depth r_max.
        task, length, tau, lag, max_iterations: what was run.
    """

    tokens: np.ndarray
    targets: np.ndarray
    predictions: np.ndarray
    iterations: np.ndarray
    entropy: np.ndarray
    fixed_predictions: np.ndarray
    task: str
    length: int
    tau: float
    lag: int
    max_iterations: int


@memo(maxsize=16)
def stopping_trace(cfg: Config, index: int = 0, length: int | None = None, seed: int | None = None,
                   tau: float | None = None) -> StoppingTrace:
    """Per-token iterations and the entropy trace of the trained ChainGPT model on one test sequence.

    Arguments:
        cfg: the config whose ChainGPT word-problem model is used (trained and cached on first use; the ``quick``
            profile's model trains in about a minute).
        index: which test sequence (0..n_test - 1).
        length: the sequence length: the training length or a test length (default: the longest test length).
        seed: the model's seed (default ``cfg.seed``).
        tau: τ of the rule in nats (default ``cfg.stop_tau``); the model does not depend on it.
    Returns:
        :class:`StoppingTrace`.
    """
    lengths = (cfg.state_train_length, *cfg.state_test_lengths)
    length = lengths[-1] if length is None else length
    if length not in lengths:
        raise bad_value("length", length, f"one of {lengths}")
    index = check_int("index", index, 0, cfg.n_test - 1)
    seed = cfg.seed if seed is None else check_int("seed", seed, 0)
    tau = cfg.stop_tau if tau is None else check_real("tau", tau, 0.0)
    with threads(cfg.threads):
        train, tests = load_tasks(cfg, "state", seed)
        model = trained(cfg, "chaingpt", train, seed).model
        x, y = (t[index: index + 1] for t in tests[length].tensors())
        with torch.no_grad():
            out = model.adaptive(x, cfg.max_iterations, tau, cfg.stop_lag)
            fixed = model(x, iterations=cfg.max_iterations)
    return StoppingTrace(tokens=x[0].numpy(), targets=y[0].numpy(), predictions=out.logits[0].argmax(-1).numpy(),
                         iterations=out.iterations[0].numpy(), entropy=out.entropies[0].numpy(),
                         fixed_predictions=fixed[0].argmax(-1).numpy(), task=cfg.state_task, length=int(length),
                         tau=tau, lag=cfg.stop_lag, max_iterations=cfg.max_iterations)
