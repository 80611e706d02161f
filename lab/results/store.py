"""Results as xarray Datasets: provenance attributes and atomic NetCDF save/load.

Conventions for every method's Dataset:

- named dimensions (``alpha``, ``m0``, ``trial``, ``step``, ``K``, ``seed``, ...) with coordinates;
- every variable has ``long_name`` (a description) and ``units`` attrs (``"1"`` for dimensionless);
- the Dataset's attrs carry the provenance added by :func:`attach_provenance`: ``method``, ``profile``, ``config``
  (JSON), ``versions`` (JSON), ``git_revision``, ``device``, ``wall_time_s``, ``created``, ``hostname``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import xarray as xr

from lab.io import atomic_path

NETCDF_ENGINE = "h5netcdf"
_VERSIONED = ("recurrent-lab", "numpy", "scipy", "xarray", "torch", "numba", "panel", "holoviews")


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_revision() -> str:
    """The git revision of the lab's source tree (``-dirty`` with uncommitted changes), else ``unknown``."""
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_description() -> str:
    desc = f"{platform.machine()} {platform.processor() or ''}".strip() + f", {os.cpu_count()} cpus"
    try:
        import torch

        if torch.cuda.is_available():
            desc += f", cuda:{torch.cuda.get_device_name(0)}"
    except ImportError:  # torch is a dependency, but provenance must never fail
        pass
    return desc


def attach_provenance(
    ds: xr.Dataset, *, method: str, profile: str, config: Any, wall_time_s: float
) -> xr.Dataset:
    """Return ``ds`` with provenance attrs added (config as JSON, versions, git revision, device, wall time)."""
    ds = ds.copy()
    ds.attrs.update(
        method=method,
        profile=profile,
        config=config.to_json() if hasattr(config, "to_json") else json.dumps(config),
        versions=json.dumps(library_versions(), sort_keys=True),
        git_revision=git_revision(),
        device=device_description(),
        hostname=platform.node(),
        wall_time_s=float(wall_time_s),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    return ds


def _clean_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """NetCDF attrs accept strings, numbers and arrays: turn bools and dicts into those."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, bool):
            out[k] = int(v)
        elif isinstance(v, (dict, list, tuple)) and not all(isinstance(x, (int, float)) for x in v):
            out[k] = json.dumps(v)
        elif v is None:
            out[k] = "None"
        else:
            out[k] = v
    return out


def save(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to NetCDF atomically: a temporary file in the same folder, then a rename.

    A crash or an exception mid-write leaves no partial file at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = _clean_attrs(ds.attrs)
    for name in list(ds.variables):
        ds[name].attrs = _clean_attrs(ds[name].attrs)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine=NETCDF_ENGINE, invalid_netcdf=True)
    return path


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a results NetCDF fully into memory (the file is closed on return)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    with xr.open_dataset(path, engine=NETCDF_ENGINE) as ds:
        return ds.load()


def config_of(ds: xr.Dataset) -> dict[str, Any]:
    return json.loads(ds.attrs.get("config", "{}"))
