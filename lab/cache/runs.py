"""A method's whole run for a dashboard: keyed by what decides its results, taken from the report where it ran.

A dashboard that shows a profile's run (REM's grid, RATE's curves) caches it with :func:`cached_run`. Its key is
:func:`result_config`: the Config's fields less :data:`RUN_ONLY`, the fields that say how a run is made (threads,
device, whether to use the weight cache) and not what it finds. On a miss the run the report saved is used when it
is current (:func:`saved_run`); only when there is none does the dashboard run the method itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xarray as xr

from .datasets import cache_path, cached_dataset
from .keys import project_root
from .watch import quiet

__all__ = ["REPORTS", "RUN_ONLY", "cached_run", "result_config", "saved_run"]

#: where ``make report`` writes (``reports/<profile>/``; tests point it elsewhere)
REPORTS = project_root() / "reports"

#: Config fields that change how fast or where a run is made, never its results (threads and device up to
#: floating-point rounding, as the weight caches already assume; ``use_cache`` only whether weights are reloaded)
RUN_ONLY = ("threads", "device", "use_cache")


def result_config(cfg: Any) -> dict[str, Any]:
    """The Config's fields that decide a run's results (``cfg.to_dict()`` less :data:`RUN_ONLY`)."""
    return {k: v for k, v in cfg.to_dict().items() if k not in RUN_ONLY}


def saved_run(slug: str, cfg: Any, reports: Any = None) -> xr.Dataset | None:
    """The report's saved run of ``slug`` with ``cfg``'s results, or None.

    The report keeps ``<reports>/<profile>/<slug>.nc`` with a stamp of the code it ran
    (:func:`lab.report.reuse.run_key`); the run is used when that stamp matches the code now and its Config equals
    ``cfg`` but for :data:`RUN_ONLY`.

    Arguments:
        reports: the report folder (default: :data:`REPORTS`).
    """
    from lab import registry, results
    from lab.report.reuse import run_key, stamp_path

    folder = REPORTS if reports is None else Path(reports)
    want = result_config(cfg)
    method = registry.get(slug)
    for profile in ("ci", "quick", "full"):
        out = folder / profile
        try:
            stamp = json.loads(stamp_path(out, slug).read_text())
        except (OSError, ValueError):
            continue
        if stamp.get("key") != run_key(method, profile):
            continue  # the code changed since that run
        try:
            ds = results.load(out / f"{slug}.nc")
            ran = method.config.from_json(ds.attrs["config"])
        except Exception:  # noqa: BLE001 - an unreadable or foreign file is no cache
            continue
        if result_config(ran) == want:
            return ds
    return None


def cached_run(name: str, slug: str, cfg: Any, run: Callable[[], xr.Dataset], *, version: int,
               reports: Any = None) -> xr.Dataset:
    """``run()``'s Dataset cached under ``name`` by :func:`result_config` and ``version``; on a miss the report's
    current run of ``slug`` with these results (:func:`saved_run`) is stored instead of running again."""
    key = {"format": version, "config": result_config(cfg)}
    saved = None if cache_path(name, key).exists() else saved_run(slug, cfg, reports)
    if saved is None:
        return cached_dataset(name, key, run)
    with quiet():  # storing the report's run is no work to announce
        return cached_dataset(name, key, lambda: saved)
