"""The lab's one cache: generated data sets, trained weights (with their curves) and an in-memory memo.

Three calls, all keyed by a content hash of the config that determines what they hold:

* :func:`cached_dataset` (xarray data sets, NetCDF, checksummed; described below),
* :func:`cached_model` (a trained ``nn.Module`` with its loss curves and metadata) and the lower-level
  :func:`cached_state` (any dict of tensors, arrays, numbers and strings): ``<data>/<folder>/<name>-<key16>.pt``,
  written atomically, read with ``weights_only=True``; a file that cannot be read, carries another key or does not
  fit the model is deleted with a ``RuntimeWarning`` and rebuilt,
* :func:`memo`, a thread-safe in-memory cache for a process (dashboards, notebooks): one computation per key even
  when several threads ask at once.

Data sets
---------

A data set is identified by a ``name`` (e.g. ``"pde-ks"``) and a JSON-serialisable
``config`` dict holding everything that determines its contents (equation,
coefficients, grid, seed, generator version, ...).  :func:`cached_dataset` returns
the stored copy when a valid one exists and otherwise calls ``build()`` and stores
its result::

    ds = cached_dataset("pde-ks", {"num_points": 256, "seed": 0, ...}, build)

Where files live (:func:`data_root`), first match wins:

1. the ``root`` argument;
2. the environment variable ``LAB_DATA_DIR``;
3. ``<project root>/data``, the project root being the first directory above
   the ``lab`` package that contains ``pyproject.toml``;
4. ``./data`` relative to the current working directory.

File layout: ``<root>/<name>-<key[:16]>.nc``, NetCDF-4 written by xarray with the
``h5netcdf`` engine, where ``key`` is the SHA-256 of the canonical JSON of
``{"name": name, "config": config}`` (sorted keys; non-finite numbers refused).

Integrity:

* writes are atomic: the data set goes to a hidden temporary file in the same
  directory (``.<name>-<key16>.<random>.tmp``), is read back and checksummed,
  fsync'ed, and only then moved into place with :func:`os.replace`; on any error
  (including ``KeyboardInterrupt``) the temporary file is removed.  Temporary
  files left by a killed process are swept after a day.
* the file carries the attributes ``lab_cache_name``, ``lab_cache_key``,
  ``lab_cache_config`` (the JSON) and ``lab_cache_checksum`` (SHA-256 over every
  variable's name, dtype, shape and values as decoded by xarray).  On load the
  file is read fully into memory and all of them are checked, plus an optional
  caller-supplied ``validate`` (e.g. shapes).  A file that cannot be read or
  fails a check is never returned: it is deleted with a ``RuntimeWarning`` and
  rebuilt.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from lab.io import atomic_path

__all__ = [
    "Trained",
    "cache_path",
    "cached_dataset",
    "cached_model",
    "cached_state",
    "config_hash",
    "data_root",
    "dataset_checksum",
    "memo",
    "project_root",
    "state_path",
]

ENGINE = "h5netcdf"
#: attribute names written by the cache
ATTR_NAME, ATTR_KEY, ATTR_CONFIG, ATTR_CHECKSUM = (
    "lab_cache_name",
    "lab_cache_key",
    "lab_cache_config",
    "lab_cache_checksum",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_STALE_TEMP_SECONDS = 24 * 3600


class _CorruptCacheFile(Exception):
    """A cache file failed a check (internal)."""


def project_root() -> Path:
    """The project root: first directory above the ``lab`` package holding ``pyproject.toml``.

    Returns:
        that directory, or the current working directory when none is found
        (e.g. an installed wheel).
    """
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Directory holding cached data sets (see the module docstring for the rules).

    Arguments:
        root: explicit directory; wins over everything else.

    Returns:
        the directory as a :class:`~pathlib.Path` (not created here).
    """
    if root is not None:
        return Path(root)
    env = os.environ.get("LAB_DATA_DIR")
    if env:
        return Path(env)
    return project_root() / "data"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON-serialisable: {obj!r}")


def _canonical_json(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"config must be JSON-serialisable with finite numbers (dicts, lists, str, int, float, bool, None), "
            f"got {obj!r}: {exc}"
        ) from None


def config_hash(config: Mapping[str, Any], name: str = "") -> str:
    """SHA-256 (hex) identifying a data set.

    Arguments:
        config: JSON-serialisable mapping (NumPy scalars and arrays are accepted).
        name: the data set name, hashed together with the config.

    Returns:
        64 hex digits.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping, got {type(config).__name__}")
    payload = _canonical_json({"name": name, "config": dict(config)})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f"name must be a non-empty string of letters, digits, '_', '.', '-' not starting with a "
            f"punctuation mark, got {name!r}"
        )
    return name


def cache_path(name: str, config: Mapping[str, Any], *, root: str | os.PathLike[str] | None = None) -> Path:
    """Path of the cache file of a data set (whether or not it exists).

    Arguments:
        name: data set name (letters, digits, ``_ . -``).
        config: the generator's config.
        root: cache directory, see :func:`data_root`.

    Returns:
        ``<root>/<name>-<key[:16]>.nc``.
    """
    _check_name(name)
    return data_root(root) / f"{name}-{config_hash(config, name)[:16]}.nc"


def _array_bytes(values: np.ndarray) -> bytes:
    arr = np.asarray(values)
    if arr.dtype.kind in "OUS":
        items = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in arr.ravel().tolist()]
        return json.dumps(items).encode("utf-8")
    if arr.dtype.kind in "Mm":
        arr = arr.view(np.int64)
    return np.ascontiguousarray(arr).tobytes()


def dataset_checksum(ds: xr.Dataset) -> str:
    """SHA-256 over every variable and coordinate (name, dtype, dims, shape, values).

    Attributes are not included.  String arrays are hashed by their text, so a
    ``<U`` array and the ``object`` array xarray decodes it to agree.

    Arguments:
        ds: the data set (its values are read).

    Returns:
        64 hex digits.
    """
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        values = np.asarray(var.values)
        kind = "str" if values.dtype.kind in "OUS" else values.dtype.str
        h.update(json.dumps([name, kind, list(var.dims), list(values.shape)]).encode("utf-8"))
        h.update(_array_bytes(values))
    return h.hexdigest()


def _read_checked(
    path: Path,
    name: str,
    key: str,
    validate: Callable[[xr.Dataset], None] | None,
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


def _sweep_stale_temps(directory: Path, prefix: str) -> None:
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
    _sweep_stale_temps(path.parent, f".{path.name}.")
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
    _check_name(name)
    key = config_hash(config, name)
    config_json = _canonical_json(dict(config))
    path = data_root(root) / f"{name}-{key[:16]}.nc"
    if path.exists() and not refresh:
        try:
            return _read_checked(path, name, key, validate)
        except _CorruptCacheFile as exc:
            warnings.warn(f"cache file {path} rejected: {exc}; regenerating", RuntimeWarning, stacklevel=2)
            try:
                path.unlink()
            except FileNotFoundError:
                pass
    ds = build()
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"build() must return an xarray.Dataset, got {type(ds).__name__}")
    result = _write_atomic(ds, path, name, key, config_json)
    if validate is not None:
        validate(result)
    return result


# --------------------------------------------------------------------------------------------------------------------
# Trained weights and other state: torch files read with weights_only=True
# --------------------------------------------------------------------------------------------------------------------
def state_path(folder: str, name: str, config: Mapping[str, Any], *, root: str | os.PathLike[str] | None = None
               ) -> Path:
    """Where :func:`cached_state` keeps ``(name, config)`` (whether or not it exists)."""
    _check_name(folder)
    _check_name(name)
    return data_root(root) / folder / f"{name}-{config_hash(config, name)[:16]}.pt"


def cached_state(
    folder: str,
    name: str,
    config: Mapping[str, Any],
    build: Callable[[], dict[str, Any]],
    *,
    root: str | os.PathLike[str] | None = None,
    check: Callable[[dict[str, Any]], None] | None = None,
    refresh: bool = False,
    use_cache: bool = True,
) -> tuple[dict[str, Any], bool]:
    """A dict of tensors (and numbers, strings, lists, nested dicts) for ``(name, config)``: loaded, or built.

    Arguments:
        folder, name: the file is ``<data>/<folder>/<name>-<key16>.pt``.
        config: JSON-serialisable; everything that determines the state (include a format version).
        build: makes the state on a miss (numpy arrays are stored as tensors).
        check: optional test of a loaded state (raise to reject the file, e.g. when it does not fit a model).
        refresh: rebuild even when a valid file exists. use_cache: False builds without reading or writing.

    Returns:
        ``(state, loaded)``; ``loaded`` is True when the state came from the file.
    """
    import torch

    if not use_cache:
        return build(), False
    key = config_hash(config, name)
    path = state_path(folder, name, config, root=root)
    if path.exists() and not refresh:
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(blob, dict) or blob.get("key") != key or "state" not in blob:
                raise ValueError("not a cache file for this config")
            if check is not None:
                check(blob["state"])
            return blob["state"], True
        except Exception as exc:  # noqa: BLE001 - any unreadable, truncated or foreign file is rebuilt
            warnings.warn(f"cache file {path} rejected ({type(exc).__name__}: {exc}); rebuilding", RuntimeWarning,
                          stacklevel=2)
            path.unlink(missing_ok=True)
    state = _tensors(build())
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale_temps(path.parent, f".{path.name}.")
    with atomic_path(path, fsync=True) as tmp:
        torch.save({"key": key, "config": json.loads(_canonical_json(dict(config))), "state": state}, tmp)
    return state, False


def _tensors(obj: Any) -> Any:
    import torch

    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {str(k): _tensors(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_tensors(v) for v in obj]
    return obj


@dataclasses.dataclass
class Trained:
    """What :func:`cached_model` returns.

    Attributes:
        model: the trained model, in eval mode.
        curves: named training curves (``loss`` and whatever the trainer recorded) as numpy arrays.
        meta: JSON-able facts about the training (seconds, steps, ...).
        loaded: True when the weights came from the cache.
        path: the cache file.
    """

    model: Any
    curves: dict[str, np.ndarray]
    meta: dict[str, Any]
    loaded: bool
    path: Path | None


def cached_model(
    folder: str,
    name: str,
    config: Mapping[str, Any],
    build: Callable[[], Any],
    train: Callable[[Any], Mapping[str, Any] | None],
    *,
    root: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    use_cache: bool = True,
) -> Trained:
    """A trained ``nn.Module`` for ``(name, config)``: its weights loaded from the cache, or trained and stored.

    Arguments:
        folder, name, config, root, refresh, use_cache: as for :func:`cached_state`.
        build: a freshly initialised model (its state dict must fit the stored one).
        train: trains the model in place on a miss; returns None or a mapping with optional ``curves``
            (name -> 1-D array) and ``meta`` (JSON-able facts, e.g. training seconds).

    Returns:
        :class:`Trained`.
    """
    model = build()

    def make() -> dict[str, Any]:
        out = dict(train(model) or {})
        return {"state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "curves": {k: np.asarray(v) for k, v in dict(out.get("curves", {})).items()},
                "meta": dict(out.get("meta", {}))}

    def fits(state: dict[str, Any]) -> None:
        model.load_state_dict(state["state_dict"], strict=True)

    state, loaded = cached_state(folder, name, config, make, root=root, check=fits, refresh=refresh,
                                 use_cache=use_cache)
    model.eval()
    curves = {k: np.asarray(v) for k, v in state["curves"].items()}
    path = state_path(folder, name, config, root=root) if use_cache else None
    return Trained(model, curves, dict(state["meta"]), loaded, path)


# --------------------------------------------------------------------------------------------------------------------
# In memory
# --------------------------------------------------------------------------------------------------------------------
def _memo_key(value: Any) -> Any:
    if hasattr(value, "to_json") and callable(value.to_json):
        return (type(value).__qualname__, value.to_json())
    if isinstance(value, (list, tuple)):
        return tuple(_memo_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _memo_key(v)) for k, v in value.items()))
    if isinstance(value, float):
        return round(value, 12)
    hash(value)  # raises TypeError for an unhashable argument: memoise only on plain values and configs
    return value


def memo(maxsize: int = 32):
    """Decorator: keep the last ``maxsize`` results of a function in memory, keyed by its arguments.

    Configs (anything with ``to_json``), numbers, strings and tuples make keys; floats are rounded to 12 digits.
    Thread-safe: when several threads ask for the same key at once, one computes and the others wait for it (a
    dashboard's background job and its views). ``f.cache_clear()`` empties it; ``f.cached(*args)`` says whether a
    result is ready.
    """

    def decorate(fn):
        results: collections.OrderedDict = collections.OrderedDict()
        locks: dict[Any, threading.Lock] = {}
        guard = threading.Lock()

        def key_of(args, kwargs):
            return (_memo_key(args), _memo_key(kwargs))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = key_of(args, kwargs)
            with guard:
                if key in results:
                    results.move_to_end(key)
                    return results[key]
                lock = locks.setdefault(key, threading.Lock())
            with lock:
                with guard:
                    if key in results:
                        return results[key]
                value = fn(*args, **kwargs)
                with guard:
                    results[key] = value
                    while len(results) > maxsize:
                        results.popitem(last=False)
                    locks.pop(key, None)
                return value

        def cached(*args, **kwargs) -> bool:
            with guard:
                return key_of(args, kwargs) in results

        def cache_clear() -> None:
            with guard:
                results.clear()

        wrapper.cached = cached
        wrapper.cache_clear = cache_clear
        return wrapper

    return decorate
