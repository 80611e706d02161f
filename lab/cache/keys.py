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
from typing import Any

import numpy as np

__all__ = ["canonical_json", "check_name", "config_hash", "data_root", "project_root"]

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
