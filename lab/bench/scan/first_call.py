"""First-call time of ``linear_scan``: how long the first forward+backward takes in a fresh process (loading the
compiled kernels from Numba's on-disk cache, or compiling them when the cache is empty).

:func:`first_call` runs this module as a child, ``python -m lab.bench.scan.first_call``, which prints the seconds.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from .timing import child_env

__all__ = ["first_call", "main"]


def main() -> None:
    """Child side: time the first ``linear_scan`` forward+backward (both layouts, float32) and print the seconds."""
    import torch

    from kernels import linear_scan

    a = torch.rand(4, 8, 32, requires_grad=True)
    b = torch.randn(4, 8, 32, requires_grad=True)
    t0 = time.perf_counter()
    linear_scan(a, b, backend="numba").sum().backward()
    linear_scan(a, b, dim=1, backend="numba").sum().backward()
    print(time.perf_counter() - t0)


def first_call(cold: bool) -> float:
    """Seconds for the first ``linear_scan`` forward+backward in a fresh process; NaN if the child failed.

    Arguments:
        cold: give the child an empty Numba cache (it compiles) instead of the warm one (filled by a child run
            before the timed one).
    """
    with tempfile.TemporaryDirectory() as tmp:
        env = child_env(NUMBA_CACHE_DIR=tmp) if cold else child_env()
        cmd = [sys.executable, "-m", "lab.bench.scan.first_call"]
        if not cold:  # fill the cache first: just after the kernels' source changed it holds nothing to load
            subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        return float("nan")
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
