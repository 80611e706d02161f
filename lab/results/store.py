"""Results as xarray Datasets: provenance attributes and atomic NetCDF save/load with a content digest.

Conventions for every method's Dataset:

- named dimensions (``alpha``, ``m0``, ``trial``, ``step``, ``K``, ``seed``, ...) with coordinates;
- every variable has ``long_name`` (a description) and ``units`` attrs (``"1"`` for dimensionless);
- the Dataset's attrs carry the provenance added by :func:`attach_provenance`: ``method``, ``profile``, ``config``
  (JSON), ``lab_version``, ``versions`` (JSON), ``git_revision``, ``device``, ``wall_time_s``, ``created``,
  ``hostname``.

A trusted chain: :func:`save` stores :data:`DIGEST_ATTR`, the SHA-256 of the file's content as read back (every
variable's name, dtype, dims, shape and bytes, and every attribute but the digest:
:func:`lab.cache.keys.dataset_checksum`); :func:`load` recomputes it and refuses a file that changed after it was
written, and with ``expect`` a file that is not the one the caller meant (another method, config or lab version).
A file written before digests loads as before unless ``expect`` is given: then it is refused, since nothing vouches
for it.
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

from lab.cache.keys import dataset_checksum
from lab.checks import ConfigError, bad_value
from lab.io import atomic_path

NETCDF_ENGINE = "h5netcdf"
#: the attribute holding a results file's content digest
DIGEST_ATTR = "content_digest"
_VERSIONED = ("recurrent-lab", "numpy", "scipy", "xarray", "torch", "numba", "panel", "holoviews")


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def lab_version() -> str:
    """The lab's installed version (``recurrent-lab``'s package metadata; ``unknown`` when not installed)."""
    try:
        return metadata.version("recurrent-lab")
    except metadata.PackageNotFoundError:
        return "unknown"


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
        lab_version=lab_version(),
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


def content_digest(ds: xr.Dataset) -> str:
    """The digest :func:`save` stores and :func:`load` checks: SHA-256 of every variable and every attribute but
    :data:`DIGEST_ATTR` (of a Dataset as read back from its file)."""
    return dataset_checksum(ds, attrs=True, skip=(DIGEST_ATTR,))


def save(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to NetCDF atomically (a temporary file in the same folder, then a rename) with its content
    digest (:data:`DIGEST_ATTR`, taken over the file as read back, so that :func:`load` agrees).

    A crash or an exception mid-write leaves no partial file at ``path``.
    """
    import h5netcdf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = _clean_attrs({k: v for k, v in ds.attrs.items() if k != DIGEST_ATTR})
    for name in list(ds.variables):
        ds[name].attrs = _clean_attrs(ds[name].attrs)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine=NETCDF_ENGINE, invalid_netcdf=True)
        with xr.open_dataset(tmp, engine=NETCDF_ENGINE) as handle:
            digest = content_digest(handle.load())
        with h5netcdf.File(tmp, "a", invalid_netcdf=True) as f:
            f.attrs[DIGEST_ATTR] = digest
    return path


def load(path: str | os.PathLike, expect: dict[str, Any] | None = None) -> xr.Dataset:
    """Read a results NetCDF fully into memory (the file is closed on return), checking its content digest.

    Arguments:
        expect: the attributes the file must have, e.g. ``{"method": slug, "config": cfg.to_json(),
            "lab_version": lab.__version__}`` (``config`` compared as JSON, the rest as text); then a file without
            a digest (written before digests) is refused too.

    Raises:
        FileNotFoundError: no file at ``path``.
        ConfigError: (one line) the file changed after it was written, or is not what ``expect`` says.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    with xr.open_dataset(path, engine=NETCDF_ENGINE) as ds:
        ds = ds.load()
    stored = ds.attrs.get(DIGEST_ATTR)
    if stored is None and expect is not None:
        raise bad_value("path", str(path), "a results file with a content digest (this one was written before "
                                           "lab.results.save stored digests: nothing vouches for it; run it again)")
    if stored is not None and str(stored) != content_digest(ds):
        raise bad_value("path", str(path), "a results file as lab.results.save wrote it (this one changed after it "
                                           "was written: its content digest does not match)")
    for key, want in (expect or {}).items():
        problem = _mismatch(ds.attrs, key, want)
        if problem is not None:
            raise ConfigError(f"{problem} (in {path})")
    return ds


def _mismatch(attrs: dict[str, Any], key: str, want: Any) -> str | None:
    """Why ``attrs[key]`` is not ``want`` (a bad_value message), or None when it is."""
    got = attrs.get(key)
    if key != "config":
        return None if got is not None and str(got) == str(want) else str(bad_value(key, got, repr(str(want))))
    want_cfg = json.loads(want) if isinstance(want, str) else dict(want)
    try:
        got_cfg = json.loads(got) if got is not None else None
    except ValueError:
        got_cfg = None
    if not isinstance(got_cfg, dict):
        return str(bad_value("config", got, f"the config {json.dumps(want_cfg, sort_keys=True)}"))
    for field in sorted(set(want_cfg) | set(got_cfg)):
        if got_cfg.get(field, "<missing>") != want_cfg.get(field, "<missing>"):
            return str(bad_value(f"config.{field}", got_cfg.get(field, "<missing>"),
                                 f"{want_cfg.get(field, '<missing>')!r}, the value expected"))
    return None


def config_of(ds: xr.Dataset) -> dict[str, Any]:
    return json.loads(ds.attrs.get("config", "{}"))
