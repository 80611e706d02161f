"""Independent jobs (trainings, mostly) in worker processes, so that a run's small models use every core.

A method whose run trains many small models one after another (seeds x models x tasks, each on one thread) leaves
the other cores idle. :func:`run_jobs` runs such jobs in ``N`` spawned worker processes, each pinned to
``threads_per_worker`` torch, Numba and BLAS threads, longest first, with a tqdm bar; the pattern is

    jobs = [Job(f"{model} seed {s}", train_one, (cfg, model, s), cost=steps, cached=weights_exist(...)) ...]
    run_jobs(jobs)                      # trains the missing ones and writes their weights to the cache
    for model, s in ...:                # the experiment loop as before: every model now loads from the cache
        out = trained_model(cfg, model, s)

A job must be a module-level function of an importable module (not a script's ``__main__``: a worker does not run
the caller's script, so a script without an ``if __name__ == "__main__"`` guard can call :func:`run_jobs` too), with
picklable arguments and a result that travels back (keep it small: the weights go through the cache under
``data/``, :func:`lab.cache.cached_model`, not through the pipe). Each job seeds
what it draws from, so it computes the same thing in a worker as in the caller; with the same thread count, the
trained weights are the same bits (a training's floating-point sums depend on its threads, not on the process).

* Serial fallback: one worker, at most one job to run, or a call from inside a worker (no nested pools) or from a
  daemonic process (a Dask worker of :mod:`lab.sweep`, which may not start processes) runs the jobs here, in order,
  under the same error handling.
* Errors: a job's exception comes back as :class:`JobError` naming the job (the worker's traceback chained as its
  cause); the jobs not started yet are cancelled. A worker that dies (killed, out of memory) is a :class:`JobError`
  naming the jobs that were running.
* Workers: ``workers=None`` is :func:`default_workers`: ``LAB_WORKERS`` when set, else the cores this process may
  use (its CPU affinity), capped by ``OMP_NUM_THREADS`` where a caller set it (a ``lab report`` running notebooks
  side by side gives each its share of the cores that way, :func:`lab.report.execute.kernel_environment`), divided
  by ``threads_per_worker``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["WORKER_ENV", "WORKERS_ENV", "Job", "JobError", "JobResult", "default_workers", "in_worker", "run_jobs"]

#: environment variable that fixes the number of worker processes (a positive integer; 1: always serial)
WORKERS_ENV = "LAB_WORKERS"
#: set to "1" in every worker process of :func:`run_jobs` (so a job that calls run_jobs itself runs serially)
WORKER_ENV = "LAB_PARALLEL_WORKER"
#: thread-count variables set in a worker before torch loads
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


@dataclasses.dataclass(frozen=True)
class Job:
    """One independent piece of work: ``fn(*args, **kwargs)``.

    Attributes:
        name: how progress and errors name it (e.g. ``"mamba parity seed 1"``).
        fn: a module-level function (pickled by reference into the worker).
        args, kwargs: its arguments (pickled).
        cost: relative expected work (e.g. steps x per-step cost); larger costs start first, so the longest jobs do
            not end the run alone.
        cached: True when its result is already on disk: not run at all (its result is None).
    """

    name: str
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    cost: float = 1.0
    cached: bool = False


@dataclasses.dataclass
class JobResult:
    """What :func:`run_jobs` returns per job: its value (None when cached), wall and CPU seconds of the job in its
    process (0 when cached), and whether it ran (False: cached)."""

    name: str
    value: Any
    wall_s: float = 0.0
    cpu_s: float = 0.0
    ran: bool = False


class JobError(RuntimeError):
    """A job raised (or its worker died); ``job`` is its name, the original exception is the ``__cause__``."""

    def __init__(self, job: str, message: str):
        super().__init__(f"job {job!r} failed: {message}")
        self.job = job


def in_worker() -> bool:
    """Whether this process is a worker of :func:`run_jobs`, or a daemonic process (a Dask worker running a sweep's
    points, for one), which may start no processes of its own: either way its jobs run serially."""
    import multiprocessing

    return os.environ.get(WORKER_ENV) == "1" or bool(multiprocessing.current_process().daemon)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _positive(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        from lab.checks import ConfigError

        raise ConfigError(f"{name}={text!r} is not allowed; allowed: a positive integer")
    return value


def default_workers(threads_per_worker: int = 1) -> int:
    """Worker processes for :func:`run_jobs`: ``LAB_WORKERS`` when set; else the cores this process may use
    (capped by ``OMP_NUM_THREADS`` when set) divided by ``threads_per_worker``; 1 inside a worker."""
    if in_worker():
        return 1
    fixed = _positive(WORKERS_ENV)
    if fixed is not None:
        return fixed
    cores = _cores()
    omp = _positive("OMP_NUM_THREADS")
    if omp is not None:
        cores = min(cores, omp)
    return max(1, cores // max(1, int(threads_per_worker)))


def _init_worker(threads: int) -> None:
    """A worker's set-up, before any job: its thread counts (before torch loads), the lab's process set-up."""
    os.environ[WORKER_ENV] = "1"
    for name in _THREAD_VARIABLES:
        os.environ[name] = str(threads)
    import numba
    import torch

    from lab.core.runtime import setup_process

    torch.set_num_threads(threads)
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency of the lab
        pass
    setup_process()


def _timed(fn: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]) -> tuple[Any, float, float]:
    """``fn(*args, **kwargs)`` and its wall and CPU seconds (this process's)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _failed(job: Job, exc: BaseException) -> JobError:
    return JobError(job.name, f"{type(exc).__name__}: {exc}")


def _stop(pool) -> None:
    """End ``pool``'s worker processes now (after a failure: the jobs still running would only be thrown away)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()


def run_jobs(jobs: Sequence[Job], *, workers: int | None = None, threads_per_worker: int = 1,
             progress: bool = True, desc: str = "jobs") -> list[JobResult]:
    """Run the jobs not ``cached``, in ``workers`` spawned processes (or here, serially: module docstring).

    Arguments:
        jobs: the jobs (names need not be unique, but errors read better when they are).
        workers: worker processes (None: :func:`default_workers`); 1 runs the jobs here, in order.
        threads_per_worker: torch, Numba and BLAS threads of each worker (a serial run leaves this process's).
        progress: a tqdm bar over the jobs that run. desc: its label.

    Returns:
        one :class:`JobResult` per job, in the order of ``jobs``.

    Raises:
        JobError: the first job that failed (by name), its exception as the cause.
    """
    from tqdm.auto import tqdm

    results = [JobResult(job.name, None) for job in jobs]
    todo = sorted((i for i, job in enumerate(jobs) if not job.cached), key=lambda i: -float(jobs[i].cost))
    n = default_workers(threads_per_worker) if workers is None else max(1, int(workers))
    n = 1 if in_worker() else min(n, len(todo))
    bar = tqdm(total=len(todo), desc=desc, disable=not progress or not todo)
    try:
        if n <= 1:
            for i in sorted(todo):  # serial: in the caller's order
                bar.set_postfix_str(jobs[i].name, refresh=True)
                try:
                    value, wall, cpu = _timed(jobs[i].fn, tuple(jobs[i].args), dict(jobs[i].kwargs))
                except Exception as exc:  # noqa: BLE001 - named and re-raised
                    raise _failed(jobs[i], exc) from exc
                results[i] = JobResult(jobs[i].name, value, wall, cpu, True)
                bar.update(1)
        else:
            _run_pool(jobs, todo, n, threads_per_worker, results, bar)
    finally:
        bar.close()
    return results


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """While workers start: an empty ``__main__``, so that a spawned worker does not run the caller's script again
    (multiprocessing's spawn re-runs it; a script without a ``__main__`` guard would start the run anew there)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _run_pool(jobs: Sequence[Job], todo: list[int], n: int, threads: int, results: list[JobResult], bar) -> None:
    """The jobs ``todo`` (in that order) in a pool of ``n`` spawned workers, into ``results``."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(int(threads),))
    futures, ok = {}, False
    try:
        with _main_hidden():  # the workers start as the jobs are submitted
            for i in todo:
                futures[pool.submit(_timed, jobs[i].fn, tuple(jobs[i].args), dict(jobs[i].kwargs))] = i
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: futures[f]):
                i = futures[fut]
                try:
                    value, wall, cpu = fut.result()
                except BrokenProcessPool as exc:
                    unfinished = [jobs[k].name for k in todo if not results[k].ran]
                    raise JobError(jobs[i].name, f"a worker process died ({exc}); jobs not finished: "
                                                 f"{', '.join(unfinished)}") from exc
                except Exception as exc:  # noqa: BLE001 - named and re-raised
                    raise _failed(jobs[i], exc) from exc
                results[i] = JobResult(jobs[i].name, value, wall, cpu, True)
                bar.set_postfix_str(jobs[i].name, refresh=False)
                bar.update(1)
        ok = True
    finally:
        if not ok:
            _stop(pool)
        pool.shutdown(wait=True, cancel_futures=True)
