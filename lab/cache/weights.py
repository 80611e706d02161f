"""Trained weights and other state on disk: torch files keyed by their config, read with ``weights_only=True``.

:func:`cached_state` keeps any dict of tensors, arrays, numbers and strings at ``<data>/<folder>/<name>-<key16>.pt``,
written atomically; :func:`cached_model` keeps a trained ``nn.Module`` with its loss curves and metadata on top of
it. The file holds ``{"key", "config", "state", "digest"}``: the digest (:func:`state_digest`) is a SHA-256 of every
tensor (its place, dtype, shape and bytes) and every other value of the state. A file that cannot be read, carries
another key or config, fails its digest (a tensor changed after it was written) or does not fit the model is deleted
with a ``RuntimeWarning`` and rebuilt; a file written before digests (no ``digest``) is still read. Check, build and
write run under the entry's file lock (:func:`lab.cache.keys.entry_lock`): a second process asking for the same
state meanwhile waits, then loads it instead of training again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lab.io import atomic_path

from .datasets import sweep_stale_temps
from .keys import canonical_json, check_name, config_hash, data_root, entry_lock
from .watch import working

__all__ = ["Trained", "cached_model", "cached_state", "state_digest", "state_path"]


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
    stored_config = json.loads(canonical_json(dict(config)))
    path = state_path(folder, name, config, root=root)
    if not refresh and path.exists():  # a hit needs no lock: the final name only ever holds a whole file
        try:
            return _read_state(path, key, stored_config, check), True
        except Exception:  # noqa: BLE001 - missing or rejected: decided under the lock below
            pass
    with entry_lock(path):  # a second process asking for this entry waits here, then loads the first one's file
        if path.exists() and not refresh:
            try:
                return _read_state(path, key, stored_config, check), True
            except Exception as exc:  # noqa: BLE001 - any unreadable, truncated, altered or foreign file is rebuilt
                warnings.warn(f"cache file {path} rejected ({type(exc).__name__}: {exc}); rebuilding",
                              RuntimeWarning, stacklevel=2)
                path.unlink(missing_ok=True)
        working(f"{folder}/{name}")
        state = _tensors(build())
        sweep_stale_temps(path.parent, f".{path.name}.")
        with atomic_path(path, fsync=True) as tmp:
            torch.save({"key": key, "config": stored_config, "state": state, "digest": state_digest(state)}, tmp)
    return state, False


def _read_state(path: Path, key: str, config: Any, check: Callable[[dict[str, Any]], None] | None
                ) -> dict[str, Any]:
    """The state stored at ``path`` after every check (key, config, digest, ``check``); raises otherwise."""
    import torch

    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("key") != key or "state" not in blob or blob.get("config") != config:
        raise ValueError("not a cache file for this config")
    if "digest" in blob and blob["digest"] != state_digest(blob["state"]):
        raise ValueError("content digest mismatch: the state changed after it was written")
    if check is not None:
        check(blob["state"])
    return blob["state"]


def state_digest(state: Any) -> str:
    """SHA-256 of a state: each tensor's place in it, dtype, shape and bytes; each other value's place, type and
    ``repr`` (64 hex digits)."""
    h = hashlib.sha256()
    _digest_into(h, "", state)
    return h.hexdigest()


def _digest_into(h: Any, where: str, obj: Any) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(json.dumps([where, "tensor", str(t.dtype), list(t.shape)]).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(json.dumps([where, "dict", len(obj)]).encode())
        for k in sorted(obj, key=str):
            _digest_into(h, f"{where}/{k}", obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(json.dumps([where, "list", len(obj)]).encode())
        for i, v in enumerate(obj):
            _digest_into(h, f"{where}[{i}]", v)
    else:
        h.update(json.dumps([where, type(obj).__name__, repr(obj)]).encode())


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

