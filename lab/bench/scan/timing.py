"""Timing helpers of the scan benchmark: cache flushing, repeated and round-robin timing, medians, the machine."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np
import torch

__all__ = [
    "Flusher",
    "child_env",
    "last_level_cache_bytes",
    "log",
    "machine",
    "nanmedian",
    "time_calls",
    "time_round_robin",
]


def log(progress: bool, msg: str) -> None:
    """Print one progress line of the benchmark to stderr when ``progress`` is set."""
    if progress:
        print(f"[bench scan] {msg}", file=sys.stderr, flush=True)


_SIZE_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def last_level_cache_bytes(default: int = 32 * 2**20, base: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """Size of the largest CPU cache Linux reports for CPU 0 (``index*/size`` under ``base``, e.g. ``307200K``), or
    ``default`` where it reports none or something unreadable (another OS, a container without sysfs)."""
    best = 0
    try:
        for entry in os.listdir(base):
            if not entry.startswith("index"):
                continue
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
            size = int(text[:-1]) * _SIZE_UNITS[text[-1]] if text[-1:] in _SIZE_UNITS else int(text)
            best = max(best, size)
    except (OSError, ValueError):
        return default
    return best or default


class Flusher:
    """Reads a buffer twice the last-level cache (at least 64 MiB, at most 1 GiB) so that the next measurement
    starts from memory, not from cache.

    A fixed 64 MiB was not enough on a 300 MiB-L3 Xeon: the short linear_scan case (48 MiB) then ran partly from
    L3, and its bandwidth reference measured 50 GB/s in one process and 25 in the next. Reading, not writing, leaves
    no dirty lines of the buffer for the timed call to write back.
    """

    def __init__(self, nbytes: int | None = None):
        if nbytes is None:
            nbytes = min(max(64 * 2**20, 2 * last_level_cache_bytes()), 2**30)
        self.buf = torch.ones(nbytes // 4)

    def __call__(self):
        self.buf.sum()


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
    ``python -m lab.bench.scan.<module>`` finds this checkout) and ``extra`` set."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env
