"""Trained weights and other state on disk: torch files keyed by their config, read with ``weights_only=True``.

:func:`cached_state` keeps any dict of tensors, arrays, numbers and strings at ``<data>/<folder>/<name>-<key16>.pt``,
written atomically; :func:`cached_model` keeps a trained ``nn.Module`` with its loss curves and metadata on top of
it. A file that cannot be read, carries another key or does not fit the model is deleted with a ``RuntimeWarning``
and rebuilt.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lab.io import atomic_path

from .datasets import sweep_stale_temps
from .keys import canonical_json, check_name, config_hash, data_root
from .watch import working

__all__ = ["Trained", "cached_model", "cached_state", "state_path"]


def state_path(folder: str, name: str, config: Mapping[str, Any], *, root: str | os.PathLike[str] | None = None
               ) -> Path:
    """Where :func:`cached_state` keeps ``(name, config)`` (whether or not it exists)."""
    check_name(folder)
    check_name(name)
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
        working(f"{folder}/{name}")
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
    working(f"{folder}/{name}")
    state = _tensors(build())
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path.parent, f".{path.name}.")
    with atomic_path(path, fsync=True) as tmp:
        torch.save({"key": key, "config": json.loads(canonical_json(dict(config))), "state": state}, tmp)
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

