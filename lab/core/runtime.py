"""Process set-up and thread control, in one place.

* :func:`setup_process` is called by every entry point of the lab (the ``lab`` command, :func:`lab.run` and so the
  notebooks, the dashboards, the sweep workers): it lets glibc reuse freed large buffers
  (:func:`kernels.reuse_freed_memory`), which takes a float32 scan of 64 MiB from about 2 GB/s to about 22 GB/s on
  these machines because big outputs no longer page-fault afresh on every call. A plain ``import kernels`` leaves
  that to the caller.
* :func:`threads` sets torch's intra-op threads, the Numba threads of the kernels and the BLAS/OpenMP threads of
  NumPy and SciPy (threadpoolctl) together for a block. Floating-point sums depend on the thread count, so a run that
  pins its threads gives the same numbers whether it runs alone or beside another notebook.
* :func:`resolve_device`: the ``device`` Config field of the methods that train (``auto``, ``cpu``, ``cuda``) as a
  ``torch.device``; :func:`lab.core.train.fit` trains there and hands the model back on the CPU, so everything after
  training (evaluation, caching, plots) is the same code on a laptop and on a GPU worker.
* :class:`RuntimeConfig`: the two Config fields of every method that trains, ``threads`` and ``device``, declared
  once. A method's Config mixes it in with :class:`lab.config.BaseConfig`::

      @dataclasses.dataclass(frozen=True)
      class Config(RuntimeConfig, BaseConfig):
          ...

  (a method whose threads default differs redeclares ``threads`` with the same bounds).
* :data:`GLOBAL_RNG_LOCK`: held by whatever seeds or draws from the process-wide NumPy and Python generators
  (:func:`lab.core.train.seed_everything`; mnist1d's generator, which seeds them itself), so that a dashboard's
  background job reseeding them cannot land in the middle of another thread's draws.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Annotated, Literal

from lab.checks import Range
from lab.rng import GLOBAL_RNG_LOCK  # re-exported: lab.core's users take it from here

#: the type of a Config's ``device`` field: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu`` or ``cuda``
Device = Literal["auto", "cpu", "cuda"]

__all__ = ["DEVICES", "GLOBAL_RNG_LOCK", "Device", "RuntimeConfig", "Threads", "resolve_device", "setup_process",
           "threads"]

#: the values of a method's ``device`` field
DEVICES = ("auto", "cpu", "cuda")
#: the type of a Config's ``threads`` field (for a method that changes its default: ``threads: Threads = 2``)
Threads = Annotated[int, Range(1, 256)]


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


def resolve_device(device: str | None):
    """``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, or None for the CPU) as a ``torch.device``.

    Checked where the work runs (a sweep's GPU worker, not the client that builds the Config): ``cuda`` on a machine
    where torch sees no GPU raises :class:`lab.checks.ConfigError` naming the field.
    """
    import torch

    from lab.checks import bad_value

    if device is None or device == "cpu":
        return torch.device("cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not str(device).startswith("cuda"):
        raise bad_value("device", device, ", ".join(DEVICES))
    if not torch.cuda.is_available():
        raise bad_value("device", device, "cpu or auto on this machine (torch sees no CUDA device)")
    return torch.device(device)


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Config fields of a method that trains: its threads and its device (mix into a ``BaseConfig`` subclass).

    Both change how fast a model trains, not what it learns (up to floating-point rounding), so a cache key of
    trained weights leaves them out.
    """

    threads: Threads = 1
    """Torch, Numba and BLAS threads during the run (lab.core.runtime.threads; 1 is fastest for these small models
    on a shared machine)."""
    device: Device = "cpu"
    """Where models train: cpu, cuda, or auto (CUDA when torch sees a GPU); the trained weights come back to the
    CPU for evaluation."""
