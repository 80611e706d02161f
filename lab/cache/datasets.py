"""Generated data sets on disk: xarray Datasets as checksummed NetCDF files, written atomically.

A data set is identified by a ``name`` (e.g. ``"pde-ks"``) and a JSON-serialisable ``config`` dict holding
everything that determines its contents (equation, coefficients, grid, seed, generator version, ...).
:func:`cached_dataset` returns the stored copy when a valid one exists and otherwise calls ``build()`` and stores
its result::

    ds = cached_dataset("pde-ks", {"num_points": 256, "seed": 0, ...}, build)

File layout: ``<root>/<name>-<key[:16]>.nc`` (``root``: :func:`lab.cache.keys.data_root`), NetCDF-4 written by xarray
with the ``h5netcdf`` engine, ``key`` from :func:`lab.cache.keys.config_hash`.

Integrity:

* writes are atomic: the data set goes to a hidden temporary file in the same directory
  (``.<name>-<key16>.<random>.tmp``), is read back and checksummed, fsync'ed, and only then moved into place with
  :func:`os.replace`; on any error (including ``KeyboardInterrupt``) the temporary file is removed. Temporary files
  left by a killed process are swept after a day.
* the file carries the attributes ``lab_cache_name``, ``lab_cache_key``, ``lab_cache_config`` (the JSON) and
  ``lab_cache_checksum`` (SHA-256 over every variable's name, dtype, shape and values as decoded by xarray). On
  load the file is read fully into memory and all of them are checked, plus an optional caller-supplied
  ``validate`` (e.g. shapes). A file that cannot be read or fails a check is never returned: it is deleted with a
  ``RuntimeWarning`` and rebuilt. The checksum is :func:`lab.cache.keys.dataset_checksum`, the one the results files
  use (without the attributes here).
* one build per entry: check, build and write run under a file lock (``<file>.lock`` beside it,
  :func:`lab.cache.keys.entry_lock`), so a second process asking for the same data set meanwhile waits and then
  loads the first one's file instead of generating it again. A hit reads without the lock.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import xarray as xr

from lab.io import atomic_path

from .keys import canonical_json, check_name, config_hash, data_root, dataset_checksum, entry_lock
from .watch import working

__all__ = ["ENGINE", "cache_path", "cached_dataset", "dataset_checksum", "sweep_stale_temps"]

ENGINE = "h5netcdf"
#: attribute names written by the cache
ATTR_NAME, ATTR_KEY, ATTR_CONFIG, ATTR_CHECKSUM = (
    "lab_cache_name",
    "lab_cache_key",
    "lab_cache_config",
    "lab_cache_checksum",
)
_STALE_TEMP_SECONDS = 24 * 3600


class _CorruptCacheFile(Exception):
    """A cache file failed a check (internal)."""


def cache_path(name: str, config: Mapping[str, Any], *, root: str | os.PathLike[str] | None = None) -> Path:
    """Path of the cache file of a data set (whether or not it exists).

    Arguments:
        name: data set name (letters, digits, ``_ . -``).
        config: the generator's config.
        root: cache directory, see :func:`data_root`.

    Returns:
        ``<root>/<name>-<key[:16]>.nc``.
    """
    check_name(name)
    return data_root(root) / f"{name}-{config_hash(config, name)[:16]}.nc"


def _read_checked(
    path: Path,
    name: str,
    key: str,
    validate: Callable[[xr.Dataset], None] | None,
    config_json: str | None = None,
) -> xr.Dataset:
    """Load ``path`` fully into memory and run every check; raise _CorruptCacheFile."""
    try:
        with xr.open_dataset(path, engine=ENGINE) as handle:
            ds = handle.load()
    except Exception as exc:  # noqa: BLE001 - any read failure means "corrupt"
        raise _CorruptCacheFile(f"unreadable ({type(exc).__name__}: {exc})") from exc
    attrs = ds.attrs
    if attrs.get(ATTR_NAME) != name:
        raise _CorruptCacheFile(f"{ATTR_NAME} is {attrs.get(ATTR_NAME)!r}, expected {name!r}")
    if attrs.get(ATTR_KEY) != key:
        raise _CorruptCacheFile(f"{ATTR_KEY} does not match the config")
    if config_json is not None and attrs.get(ATTR_CONFIG) != config_json:
        raise _CorruptCacheFile(f"{ATTR_CONFIG} is not the config asked for")
    stored = attrs.get(ATTR_CHECKSUM)
    actual = dataset_checksum(ds)
    if stored != actual:
        raise _CorruptCacheFile(f"checksum mismatch (stored {stored!r}, computed {actual!r})")
    if validate is not None:
        try:
            validate(ds)
        except Exception as exc:  # noqa: BLE001
            raise _CorruptCacheFile(f"failed validation ({type(exc).__name__}: {exc})") from exc
    return ds


def sweep_stale_temps(directory: Path, prefix: str) -> None:
    now = time.time()
    for tmp in directory.glob(f"{prefix}*.tmp"):
        try:
            if now - tmp.stat().st_mtime > _STALE_TEMP_SECONDS:
                tmp.unlink()
        except OSError:
            pass


def _write_atomic(ds: xr.Dataset, path: Path, name: str, key: str, config_json: str) -> xr.Dataset:
    """Write ``ds`` to ``path`` through a temporary file; return the data set as read back."""
    import h5netcdf

    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path.parent, f".{path.name}.")
    with atomic_path(path, fsync=True) as tmp:
        out = ds.copy(deep=False)
        out.attrs = {
            **{k: v for k, v in ds.attrs.items() if not str(k).startswith("lab_cache_")},
            ATTR_NAME: name,
            ATTR_KEY: key,
            ATTR_CONFIG: config_json,
        }
        out.to_netcdf(tmp, engine=ENGINE)
        # checksum what xarray decodes from the file, so that load-time checks agree
        with xr.open_dataset(tmp, engine=ENGINE) as handle:
            checksum = dataset_checksum(handle.load())
        with h5netcdf.File(tmp, "a") as f:
            f.attrs[ATTR_CHECKSUM] = checksum
        result = _read_checked(tmp, name, key, None)
    return result


def cached_dataset(
    name: str,
    config: Mapping[str, Any],
    build: Callable[[], xr.Dataset],
    *,
    root: str | os.PathLike[str] | None = None,
    validate: Callable[[xr.Dataset], None] | None = None,
    refresh: bool = False,
) -> xr.Dataset:
    """Return the cached data set for ``(name, config)``, building and storing it if needed.

    Arguments:
        name: data set name, used in the file name (letters, digits, ``_ . -``).
        config: JSON-serialisable mapping that fully determines the contents;
            any change gives a new file.
        build: zero-argument callable returning the :class:`xarray.Dataset`
            (attributes must be NetCDF-compatible: str, numbers, 1-D arrays).
        root: cache directory; default from :func:`data_root`.
        validate: optional check run on a loaded data set (raise to reject it,
            e.g. on a wrong shape); a rejected file is rebuilt.
        refresh: rebuild even when a valid file exists.

    Returns:
        the data set, fully loaded in memory (no open file handle), with the
        ``lab_cache_*`` attributes.  A freshly built data set is returned as read
        back from its file, so first and later calls give identical objects.
    """
    check_name(name)
    key = config_hash(config, name)
    config_json = canonical_json(dict(config))
    path = data_root(root) / f"{name}-{key[:16]}.nc"
    if not refresh and path.exists():  # a hit needs no lock: the final name only ever holds a whole file
        try:
            return _read_checked(path, name, key, validate, config_json)
        except _CorruptCacheFile:
            pass  # missing or rejected: decided under the lock below
    with entry_lock(path):  # a second process asking for this entry waits here, then loads the first one's file
        if path.exists() and not refresh:
            try:
                return _read_checked(path, name, key, validate, config_json)
            except _CorruptCacheFile as exc:
                warnings.warn(f"cache file {path} rejected: {exc}; regenerating", RuntimeWarning, stacklevel=2)
                path.unlink(missing_ok=True)
        working(name)
        ds = build()
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"build() must return an xarray.Dataset, got {type(ds).__name__}")
        result = _write_atomic(ds, path, name, key, config_json)
    if validate is not None:
        validate(result)
    return result
