"""What identifies a cache entry and where the cache lives: the content key of a config, entry names, the data
folder.

A key is the SHA-256 of the canonical JSON of ``{"name": name, "config": config}`` (sorted keys, no whitespace,
non-finite numbers refused; NumPy scalars and arrays, paths and sets are turned into JSON first), so the same config
gives the same file name in every process and on every machine.

Where files live (:func:`data_root`), first match wins:

1. the ``root`` argument;
2. the environment variable ``LAB_DATA_DIR``;
3. ``<project root>/data``, the project root being the first directory above the ``lab`` package that contains
   ``pyproject.toml``;
4. ``./data`` relative to the current working directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import xarray as xr
    from filelock import FileLock

__all__ = ["canonical_json", "check_name", "config_hash", "data_root", "dataset_checksum", "entry_lock",
           "project_root"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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


def canonical_json(obj: Any) -> str:
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
    payload = canonical_json({"name": name, "config": dict(config)})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f"name must be a non-empty string of letters, digits, '_', '.', '-' not starting with a "
            f"punctuation mark, got {name!r}"
        )
    return name


def _array_bytes(values: np.ndarray) -> bytes:
    arr = np.asarray(values)
    if arr.dtype.kind in "OUS":
        items = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in arr.ravel().tolist()]
        return json.dumps(items).encode("utf-8")
    if arr.dtype.kind in "Mm":
        arr = arr.view(np.int64)
    return np.ascontiguousarray(arr).tobytes()


def _hash_value(h: Any, value: Any, name: str, *tail: Any) -> None:
    """Hash ``[name, kind, *tail, shape]`` and the bytes of ``value`` (a variable: ``tail`` its dims)."""
    values = np.asarray(value)
    kind = "str" if values.dtype.kind in "OUS" else values.dtype.str
    h.update(json.dumps([name, kind, *tail, list(values.shape)]).encode("utf-8"))
    h.update(_array_bytes(values))


def dataset_checksum(ds: xr.Dataset, *, attrs: bool = False, skip: tuple[str, ...] = ()) -> str:
    """SHA-256 of a Dataset's content: every variable and coordinate (name, dtype, dims, shape, values), and with
    ``attrs`` the Dataset's and each variable's attributes too, less the Dataset attributes named in ``skip``.

    The one content digest of the lab: the data set cache checks it without attributes (``lab_cache_checksum``),
    :func:`lab.results.save` stores it with them (``content_digest``) and :func:`lab.results.load` recomputes it.
    String arrays are hashed by their text, so a ``<U`` array and the ``object`` array xarray decodes it to agree;
    hash what is read back from a file, so that a later read agrees.

    Returns:
        64 hex digits.
    """
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        _hash_value(h, var.values, name, list(var.dims))
        if attrs:
            for key in sorted(map(str, var.attrs)):
                _hash_value(h, var.attrs[key], f"{name}.attrs", key)
    if attrs:
        for key in sorted(map(str, ds.attrs)):
            if key not in skip:
                _hash_value(h, ds.attrs[key], ".attrs", key)
    return h.hexdigest()


def entry_lock(path: Path) -> FileLock:
    """The lock of a cache entry: ``<path>.lock`` beside it (an empty file, left in place; the kernel's lock goes
    with the process, so a killed builder never leaves it held). Held around check-build-write, a second process
    asking for the same entry waits, then loads what the first wrote."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(f"{path}.lock")
