"""Parameter sweeps on Dask: the same code on a laptop (a local cluster) and on a real cluster (its address).

Each point of the grid is one ``lab.run`` in a worker process; its Dataset is saved (atomically) under ``out`` when
given, and its claims are evaluated where it ran. The results come back as one table of claims per point and, when
every point has the same dimensions, as one Dataset with a dimension per swept field.

    from lab.sweep import sweep
    res = sweep("dam", {"N": [128, 256], "seed": [0, 1]}, profile="ci")
    res.table                    # one row per (point, claim)
    res.data                     # dims N, seed, + the method's own

On a cluster: ``sweep(..., scheduler="tcp://scheduler:8786")`` (dask-jobqueue, dask-kubernetes or ``dask
scheduler`` + ``dask worker`` all give such an address).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xarray as xr

from lab import registry


@dataclass
class SweepResult:
    points: list[dict[str, Any]]
    datasets: list[xr.Dataset]
    table: Any  # pandas.DataFrame: one row per point and claim

    @property
    def data(self) -> xr.Dataset:
        """All points as one Dataset with a dimension per swept field (fails if their shapes differ)."""
        keys = list(self.points[0])
        stacked = [ds.expand_dims({k: [p[k]] for k in keys}) for p, ds in zip(self.points, self.datasets)]
        for ds in stacked:
            ds.attrs = {}
        return xr.combine_by_coords(stacked, combine_attrs="drop")


def _run_point(slug: str, profile: str, params: dict[str, Any], out: str | None) -> tuple[xr.Dataset, list[dict]]:
    from lab import api

    result = api.run(slug, profile, progress=False, **params)
    if out:
        tag = "-".join(f"{k}={v}" for k, v in params.items()).replace("/", "_")
        api.save(result.data, Path(out) / f"{slug}-{profile}-{tag}.nc")
    return result.data, [c.to_dict() for c in result.claims]


def _fields(cls: type) -> set[str]:
    import dataclasses

    return {f.name for f in dataclasses.fields(cls)}


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def sweep(
    slug: str,
    grid: Mapping[str, Sequence[Any]],
    *,
    profile: str = "quick",
    base: Mapping[str, Any] | None = None,
    scheduler: str | None = None,
    workers: int = 2,
    out: str | Path | None = None,
    progress: bool = True,
) -> SweepResult:
    """Run ``slug`` at every point of ``grid`` (a cartesian product of Config field values) on Dask.

    Arguments:
        slug: a registered method.
        grid: field -> values; e.g. ``{"N": [128, 256], "seed": [0, 1, 2]}``.
        profile: the profile every point starts from; ``base`` adds fixed overrides.
        scheduler: a Dask scheduler address; ``None`` starts a local cluster of ``workers`` processes, one thread
            each (the lab's numerics use their own threads).
        out: folder for one NetCDF per point.
    Returns:
        SweepResult with the points, their Datasets and a claims table.
    """
    import pandas as pd
    from dask.distributed import Client, LocalCluster, as_completed

    from lab.config import coerce

    method = registry.get(slug)
    base = dict(base or {})
    grid = {k: [coerce(method.config, k, v) if k in _fields(method.config) else v for v in vals]
            for k, vals in grid.items()}
    points = grid_points(grid)
    if not points:
        raise ValueError(f"grid={dict(grid)!r} is empty; give at least one value per field")
    for p in points:  # validate every point before starting anything
        method.make_config(profile, **base, **p)
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = {
            client.submit(_run_point, slug, profile, {**base, **p}, str(out) if out else None, pure=False): i
            for i, p in enumerate(points)
        }
        results: dict[int, tuple[xr.Dataset, list[dict]]] = {}
        iterator = as_completed(futures)
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, total=len(futures), desc=f"sweep {slug}")
        for fut in iterator:
            results[futures[fut]] = fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    rows = []
    for i, p in enumerate(points):
        for claim in results[i][1]:
            rows.append({**p, **claim})
    return SweepResult(points, [results[i][0] for i in range(len(points))], pd.DataFrame(rows))
