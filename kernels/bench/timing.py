"""Timing helpers of the scan benchmark: cache flushing, repeated and round-robin timing, medians, the machine."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np
import torch

__all__ = ["Flusher", "child_env", "log", "machine", "nanmedian", "time_calls", "time_round_robin"]


def log(progress: bool, msg: str) -> None:
    """Print one progress line of the benchmark to stderr when ``progress`` is set."""
    if progress:
        print(f"[bench scan] {msg}", file=sys.stderr, flush=True)


class Flusher:
    """Touches a 64 MiB buffer so that the next measurement starts with cold caches."""

    def __init__(self):
        self.buf = torch.zeros(16 * 2**20)

    def __call__(self):
        self.buf.add_(1.0)


def time_calls(fn, flush, repeats: int, budget_s: float = 3.0, setup=None, warmup: bool = False) -> list[float]:
    """Times of ``repeats`` calls (fewer if one call is slow: at least 2 and about ``budget_s`` in all).

    ``warmup`` makes one untimed call first (JIT compilation or loading it from Numba's cache).
    """
    if warmup:
        fn()
    times = []
    for i in range(repeats):
        if setup is not None:
            setup()
        flush()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if i >= 1 and sum(times) > budget_s:
            break
    return times


def time_round_robin(fns: dict, flush, repeats: int, budget_s: float, warm=()) -> dict[str, list[float]]:
    """Time several functions in turns (one call of each per round), so load changes on a shared machine hit them
    alike. A function drops out after 2 calls once its calls add up to more than ``budget_s``. Those in ``warm``
    get one untimed call first."""
    for k in warm:
        fns[k]()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            if len(times[k]) >= 2 and sum(times[k]) > budget_s:
                continue
            flush()
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def nanmedian(x: np.ndarray) -> np.ndarray:
    """Median over the last axis ignoring NaN padding; NaN where nothing was measured."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(x, axis=-1)


def machine() -> str:
    """The CPU model, the number of logical CPUs and torch's version, in one line."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__}"


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a benchmark child process: this one's, with the repository first on ``PYTHONPATH`` (so
    ``python -m kernels.bench.<module>`` finds this checkout) and ``extra`` set."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env
