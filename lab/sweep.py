"""Parameter and seed sweeps on Dask: the same code on a laptop (a local cluster) and on a real cluster (its address),
resumable, with failures isolated.

Each point of the grid (times each seed) is one ``lab.run`` in a worker process. Its Dataset is written atomically
to ``out/<slug>/<key>.nc`` where ``key`` is a content hash of the point's *resolved* Config and the lab's version
(:func:`point_key`): a rerun of the same sweep skips every point already on disk (and says how many), ``force=True``
recomputes them. A point file is reused only when its content digest holds and its stored method, config (the full
resolved Config, seed included) and lab version equal the point's (``lab.results.load(path, expect=...)``); any other
file there (truncated, overwritten, copied from another point, written before digests) is recomputed, with one
warning per point saying why (``SweepResult.not_reused``). A point that
raises is recorded with its error and traceback and the rest run on; Dask's task ``retries`` cover a worker that
dies mid-point (its task is resubmitted to another worker).

    from lab.sweep import sweep
    res = sweep("dam", {"N": [128, 256]}, seeds=range(3), profile="ci")
    res.table                    # one row per (point, seed, claim): measured, control, verdict
    res.summary()                # one row per (point, claim): mean, spread, share of seeds that hold
    res.data                     # dims N, seed, + the method's own
    res.failures                 # [{point, error, traceback}, ...]

On a cluster: ``sweep(..., scheduler="tls://scheduler:8786", security=tls_security(ca, cert, key))`` (``dask
scheduler`` + ``dask worker`` with TLS, or dask-jobqueue on Slurm, give such an address; the README's scale-out
section has the commands: Dask ships pickled code, so never a scheduler port open without TLS). A scheduler that does
not answer is a one-line :class:`lab.checks.ConfigError` before anything runs. The Datasets travel back to the
client, so the workers need no shared file system; the client writes the files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import signal
import time
import traceback as tb
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

from lab import registry

__all__ = ["FAULT_ENV", "MAX_SWEEP_POINTS", "SweepResult", "grid_points", "point_key", "sweep"]

#: fault injection, for the fault tests: ``kill-once:PATH``: the first point to start creates PATH and kills its own
#: worker with SIGKILL (later points, and the retried one, find the file and run normally); ``raise-seed:N``: the
#: points with seed N raise RuntimeError
FAULT_ENV = "LAB_SWEEP_FAULT"

#: the most points (grid points times seeds) one sweep may ask for; each point is a whole run
MAX_SWEEP_POINTS = 10_000


def _lab_version() -> str:
    from lab import __version__

    return __version__


def point_key(slug: str, config) -> str:
    """Content hash of a resolved Config (and the method and the lab's version): a point's file name."""
    text = json.dumps({"method": slug, "config": json.loads(config.to_json()), "lab": _lab_version()},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of ``grid``, as a list of ``{field: value}``."""
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def _run_point(slug: str, profile: str, params: dict[str, Any]) -> xr.Dataset:
    """One point, in a worker: the run's Dataset (with provenance)."""
    from lab import api

    fault, _, arg = os.environ.get(FAULT_ENV, "").partition(":")
    if fault == "kill-once":
        try:
            fd = os.open(arg, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "raise-seed" and int(params.get("seed", -1)) == int(arg):
        raise RuntimeError(f"injected fault at seed {arg} ({FAULT_ENV})")
    return api.run(slug, profile, progress=False, **params).data


@dataclass
class SweepResult:
    """What a sweep produced.

    Attributes:
        slug, axes: the method and the swept fields (``seed`` included when seeds were swept).
        points: every point (``{field: value}``), in grid order.
        datasets: each point's Dataset, or None where it failed.
        table: pandas.DataFrame, one row per (point, claim) with the claim's measured value, control and verdict;
            failed points have one row with ``status = "error"``.
        failures: ``[{"point", "error", "traceback"}]``.
        skipped: points found on disk and reused. computed: points run now. elapsed_s: wall time.
        not_reused: ``[{"point", "reason"}]``: point files found on disk but recomputed, and why.
    """

    slug: str
    axes: list[str]
    points: list[dict[str, Any]]
    datasets: list[xr.Dataset | None]
    table: Any
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    computed: int = 0
    elapsed_s: float = 0.0
    not_reused: list[dict[str, Any]] = field(default_factory=list)

    @property
    def data(self) -> xr.Dataset:
        """The successful points as one Dataset with a dimension per swept field (fails if their shapes differ)."""
        stacked = []
        for p, ds in zip(self.points, self.datasets):
            if ds is None:
                continue
            ds = ds.expand_dims({k: [p[k]] for k in self.axes})
            ds.attrs = {}
            stacked.append(ds)
        if not stacked:
            raise ValueError("no point of the sweep succeeded; see .failures")
        return xr.combine_by_coords(stacked, combine_attrs="drop")

    def summary(self):
        """One row per (point without its seed, claim): the mean and spread (standard deviation) of the measured
        value and of the control over the seeds, and the share of seeds on which the claim holds."""
        import pandas as pd

        table = self.table[self.table["status"] == "ok"]
        if table.empty:
            return pd.DataFrame()
        keys = [k for k in self.axes if k != "seed"] + ["name"]
        grouped = table.groupby(keys, sort=False, dropna=False)
        out = grouped.agg(
            seeds=("measured", "size"),
            measured_mean=("measured", "mean"),
            measured_std=("measured", "std"),
            control_mean=("control_measured", "mean"),
            holds_share=("passed", "mean"),
        )
        return out.reset_index()


def _check_seeds(method, grid: Mapping[str, Sequence[Any]], seeds: Iterable[int] | None) -> list[int] | None:
    from lab.checks import bad_value

    if seeds is None:
        return None
    if hasattr(seeds, "__len__") and len(seeds) > MAX_SWEEP_POINTS:  # a range is counted, not expanded
        raise bad_value("seeds", seeds, f"at most {MAX_SWEEP_POINTS} seeds")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise bad_value("seeds", seeds, "at least one seed")
    if "seed" in grid:
        raise bad_value("seeds", seeds, "seeds or a 'seed' grid axis, not both")
    if len(set(seeds)) != len(seeds):
        raise bad_value("seeds", seeds, "distinct seeds")
    return seeds


def _load_point(path: Path, expect: dict[str, str]) -> tuple[xr.Dataset | None, str | None]:
    """A finished point's Dataset, or None and why not (then it is recomputed): no file (no reason), a file that
    cannot be read or changed after it was written, or one of another method, config or lab version."""
    from lab import results
    from lab.checks import ConfigError

    if not path.exists():
        return None, None
    try:
        return results.load(path, expect=expect), None
    except ConfigError as exc:  # a digest that fails, or another point's file: say why and recompute
        reason = str(exc)
    except Exception as exc:  # a truncated or overwritten file
        reason = f"its file {path} is unreadable ({type(exc).__name__}: {' '.join(str(exc).split())})"
    path.unlink(missing_ok=True)
    return None, reason


def sweep(
    slug: str,
    grid: Mapping[str, Sequence[Any]],
    *,
    seeds: Iterable[int] | None = None,
    profile: str = "quick",
    base: Mapping[str, Any] | None = None,
    scheduler: str | None = None,
    security: Any = None,
    workers: int = 2,
    out: str | Path | None = "results/sweep",
    force: bool = False,
    retries: int = 2,
    progress: bool = True,
) -> SweepResult:
    """Run ``slug`` at every point of ``grid`` (a cartesian product of Config field values), for every seed, on Dask.

    Arguments:
        slug: a registered method.
        grid: field -> values; e.g. ``{"N": [128, 256]}`` (may be empty when ``seeds`` are given).
        seeds: run every point for each of these seeds (a ``seed`` axis); None: the profile's seed only.
        profile: the profile every point starts from; ``base`` adds fixed overrides.
        scheduler: a Dask scheduler address; ``None`` starts a local cluster of ``workers`` processes, one thread
            each (the lab's numerics use their own threads). Connected to first: one that does not answer within
            :data:`lab.report.execute.SCHEDULER_TIMEOUT_S` seconds is a ConfigError before anything runs.
        security: the ``distributed.security.Security`` of a TLS scheduler (``tls://``):
            :func:`lab.report.execute.tls_security` builds it from the CA, certificate and key files.
        out: folder of the results, one NetCDF per point under ``out/<slug>/``; finished points there are reused
            when their digest holds and their method, config and lab version are the point's (else recomputed,
            with a warning). None keeps nothing (and resumes nothing).
        force: recompute points that are already on disk.
        retries: Dask task retries of a point (a worker lost mid-point, or an error that may be transient).

    Returns:
        :class:`SweepResult`.
    """
    import pandas as pd

    from lab import results
    from lab.api import check
    from lab.budget import check_budget
    from lab.checks import bad_value
    from lab.config import coerce
    from lab.report.execute import connect

    start = time.perf_counter()
    method = registry.get(slug)
    base = dict(base or {})
    names = {f.name for f in dataclasses.fields(method.config)}
    grid = {k: [coerce(method.config, k, v) if k in names else v for v in vals] for k, vals in grid.items()}
    seed_list = _check_seeds(method, grid, seeds)
    full_grid = dict(grid)
    if seed_list is not None:
        full_grid["seed"] = seed_list
    if not full_grid:
        raise ValueError("grid={} is empty and no seeds given; give at least one swept field or seeds")
    count = math.prod(len(v) for v in full_grid.values())
    if count > MAX_SWEEP_POINTS:
        raise bad_value("grid", dict(grid), f"at most {MAX_SWEEP_POINTS} points (grid values times seeds: {count})")
    points = grid_points(full_grid)
    if not points:
        raise ValueError(f"grid={dict(grid)!r} is empty; give at least one value per field")
    configs = [method.make_config(profile, **base, **p) for p in points]  # validate every point first
    for cfg in configs:
        check_budget(cfg)  # each point within the machine's memory and work, before any runs
    folder = Path(out) / slug if out is not None else None
    paths = [folder / f"{point_key(slug, cfg)}.nc" if folder is not None else None for cfg in configs]

    client = connect(scheduler, security) if scheduler is not None else None  # fail before anything runs
    try:
        datasets: list[xr.Dataset | None] = [None] * len(points)
        todo, not_reused = [], []
        for i, path in enumerate(paths):
            if path is not None and not force:
                expect = {"method": slug, "config": configs[i].to_json(), "lab_version": results.lab_version()}
                datasets[i], reason = _load_point(path, expect)
                if reason is not None:
                    not_reused.append({"point": points[i], "reason": reason})
                    label = ", ".join(f"{k}={v}" for k, v in points[i].items())
                    warnings.warn(f"sweep {slug}: point {label} not reused: {reason}; recomputing it",
                                  RuntimeWarning, stacklevel=2)
            if datasets[i] is None:
                todo.append(i)
        skipped = len(points) - len(todo)
        if progress and skipped:
            print(f"sweep {slug}: {skipped} of {len(points)} points already done under {folder}, skipped "
                  f"(force=True recomputes them)")

        errors: dict[int, tuple[str, str]] = {}
        if todo:
            _compute(slug, profile, base, points, todo, paths, datasets, errors, client, workers, retries, progress)
    finally:
        if client is not None:
            client.close()

    rows = []
    failures = []
    for i, p in enumerate(points):
        if i in errors:
            msg, trace = errors[i]
            failures.append({"point": p, "error": msg, "traceback": trace})
            rows.append({**p, "name": None, "status": "error", "error": msg, "passed": False})
            continue
        for claim in check(datasets[i], slug):
            rows.append({**p, **claim.to_dict(), "status": "ok", "error": ""})
    return SweepResult(slug, list(full_grid), points, datasets, pd.DataFrame(rows), failures, skipped, len(todo),
                       time.perf_counter() - start, not_reused)


def _compute(slug, profile, base, points, todo, paths, datasets, errors, client, workers, retries, progress):
    """Run the points ``todo`` on ``client``'s cluster (None: a local cluster of ``workers`` processes, closed after),
    writing each finished point's file."""
    from dask.distributed import Client, LocalCluster, as_completed

    from lab import results

    cluster = None
    if client is None:
        cluster = LocalCluster(n_workers=min(workers, len(todo)), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = {client.submit(_run_point, slug, profile, {**base, **points[i]}, pure=False, retries=retries): i
                   for i in todo}
        iterator = as_completed(futures, loop=client.loop)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(futures), desc=f"sweep {slug}")
        for fut in iterator:
            i = futures[fut]
            if fut.status == "error":
                exc = fut.exception()
                errors[i] = (f"{type(exc).__name__}: {exc}", "".join(tb.format_tb(fut.traceback())))
            else:
                ds = fut.result()
                if paths[i] is not None:
                    results.save(ds, paths[i])
                datasets[i] = ds
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
