"""What the ``arena`` dashboard (and a notebook) calls besides ``run``: the profile's whole grid, from the report's
current run when there is one (:func:`lab.cache.cached_run`), else run once and cached on disk and in memory."""

from __future__ import annotations

import xarray as xr

from lab.cache import cached_run, memo
from lab.methods.arena.config import Config
from lab.methods.arena.model import SOURCES, prediction

__all__ = ["FORMAT", "grid", "theory_text"]

#: bump when the results' layout changes (invalidates the cached grids)
FORMAT = 2


@memo(maxsize=4)
def grid(profile: str = "quick") -> xr.Dataset:
    """The profile's grid: :func:`lab.methods.arena.experiment.run` on the profile's Config (disk and memory cache,
    keyed by the fields that decide the results; minutes on first use at quick without the report's run)."""
    from lab.methods.arena.experiment import run

    cfg = Config.from_profile(profile)
    return cached_run("arena-grid", "arena", cfg, lambda: run(cfg, progress=False), version=FORMAT)


def theory_text(model: str, task: str) -> str:
    """Theory's prediction for one cell, in words, with its source."""
    p = prediction(model, task)
    says = {"yes": "can solve it at every length", "no": "cannot solve it at every length",
            "open": "leaves it to training and size"}[p.verdict]
    return f"**Theory** ({model} on {task}): this class {says}. Source: {SOURCES[p.source]}."
