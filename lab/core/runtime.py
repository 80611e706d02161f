"""Process set-up and thread control, in one place.

* :func:`setup_process` is called by every entry point of the lab (the ``lab`` command, :func:`lab.run` and so the
  notebooks, the dashboards, the sweep workers): it lets glibc reuse freed large buffers
  (:func:`kernels.reuse_freed_memory`), which takes a float32 scan of 64 MiB from about 2 GB/s to about 22 GB/s on
  these machines because big outputs no longer page-fault afresh on every call. A plain ``import kernels`` leaves
  that to the caller.
* :func:`threads` sets torch's intra-op threads, the Numba threads of the kernels and the BLAS/OpenMP threads of
  NumPy and SciPy (threadpoolctl) together for a block. Floating-point sums depend on the thread count, so a run that
  pins its threads gives the same numbers whether it runs alone or beside another notebook.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["setup_process", "threads"]

_SETUP = threading.Lock()
_STATE: dict[str, bool] = {}


def setup_process() -> bool:
    """Prepare this process for the lab's work (idempotent). Returns whether malloc reuse is in effect."""
    with _SETUP:
        if "malloc_reuse" not in _STATE:
            import kernels

            _STATE["malloc_reuse"] = bool(kernels.reuse_freed_memory())
        return _STATE["malloc_reuse"]


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, at most ``n`` Numba threads and ``n`` BLAS/OpenMP threads
    for NumPy and SciPy, then restore all three.

    Arguments:
        n: threads for the block; None or 0 leaves them as they are.
    """
    if not n:
        yield
        return
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    saved, saved_numba = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(int(n))
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        with threadpool_limits(limits=int(n)):
            yield
    finally:
        torch.set_num_threads(saved)
        numba.set_num_threads(saved_numba)
