"""The lab's entry points: ``lab.run``, ``lab.check``, ``lab.load``, ``lab.save``."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xarray as xr

from lab import registry, results
from lab.claims import ClaimsTable, evaluate


@dataclass
class RunResult:
    """What ``lab.run`` returns: the results Dataset and its evaluated claims.

    Unpacks as ``data, claims = lab.run(...)``.
    """

    data: xr.Dataset
    claims: ClaimsTable
    config: Any

    def __iter__(self):
        return iter((self.data, self.claims))

    def save(self, path: str | os.PathLike) -> Path:
        return results.save(self.data, path)

    def _repr_html_(self) -> str:
        return self.claims._repr_html_()


def run(slug: str, profile: str = "quick", *, config: Any = None, progress: bool = True,
        save_to: str | os.PathLike | None = None, **overrides: Any) -> RunResult:
    """Run a method and evaluate its claims.

    Arguments:
        slug: a registered method (``lab list``).
        profile: ``ci`` (seconds), ``quick`` (the default, minutes on a laptop) or ``full`` (closer to the paper).
        progress: show progress bars.
        save_to: also save the results NetCDF there (atomically); None or "" saves nothing.
        config: a Config of the method, already built (``method.make_config(profile, ...)``): run it as it is,
            with ``profile`` recorded as its profile; no ``overrides`` then.
        overrides: Config fields to change, e.g. ``n=3, N=512``.

    Returns:
        RunResult with ``.data`` (xarray.Dataset with provenance attrs) and ``.claims`` (ClaimsTable).
    """
    from lab.core.runtime import setup_process

    method = registry.get(slug)
    if config is None:
        cfg = method.make_config(profile, **overrides)
    elif overrides:
        raise TypeError(f"lab.run({slug!r}): pass a config or overrides ({', '.join(overrides)}), not both")
    elif not isinstance(config, method.config):
        raise TypeError(f"lab.run({slug!r}): config is a {type(config).__module__}.{type(config).__qualname__}, "
                        f"not the method's {method.config.__module__}.Config")
    else:
        cfg = config
    if save_to:
        from lab.io import check_writable

        check_writable(save_to, "save_to")  # before the work, not after it
    check_machine(cfg)
    setup_process()
    start = time.perf_counter()
    ds = method.run_fn(cfg, progress=progress)
    wall = time.perf_counter() - start
    ds = results.attach_provenance(ds, method=slug, profile=profile, config=cfg, wall_time_s=wall)
    if save_to:
        results.save(ds, save_to)
    return RunResult(data=ds, claims=check(ds, slug), config=cfg)


def check_machine(cfg) -> None:
    """Refuse, before any work, a Config this machine cannot run (``device='cuda'`` where torch sees no GPU; a run
    that needs more memory or work than this machine allows, :func:`lab.budget.check_budget`):
    :class:`lab.checks.ConfigError`. Checked where the run happens, so a client without a GPU (or with less memory)
    can still build the Config of a worker's sweep."""
    from lab.budget import check_budget

    check_budget(cfg)  # first: arithmetic on the fields, before torch loads
    if getattr(cfg, "device", None) is not None:
        from lab.core.runtime import resolve_device

        resolve_device(cfg.device)


def check(ds: xr.Dataset | str | os.PathLike, slug: str | None = None) -> ClaimsTable:
    """Evaluate a method's claims on a results Dataset (or the path of a saved one, its content digest verified by
    :func:`lab.results.load`), without re-running.

    Arguments:
        slug: the method the Dataset must be a run of; None: the one its ``method`` attribute names.

    Raises:
        ConfigError: the Dataset names another method than ``slug``, or none at all; a file that changed after it
            was written. UnknownMethodError: it names no registered method.
    """
    from lab.checks import bad_value

    if not isinstance(ds, xr.Dataset):
        ds = results.load(ds)
    named = ds.attrs.get("method")
    if slug is not None and named is not None and str(named) != slug:
        raise bad_value("method", str(named), f"{slug!r}, the method this Dataset was checked as")
    slug = slug or named
    if not slug:
        raise bad_value("method", None, "the name of a registered method, in the Dataset's 'method' attribute "
                                        "(a results file written by lab.run)")
    return ClaimsTable(evaluate(registry.get(str(slug)).claim_list, ds))


def config_of(ds: xr.Dataset):
    """The Config a saved Dataset was produced with."""
    method = registry.get(ds.attrs["method"])
    return method.config.from_json(ds.attrs["config"])


load = results.load
save = results.save
