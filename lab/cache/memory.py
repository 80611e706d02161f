"""The in-memory cache of a process: :func:`memo`, one computation per key even when several threads ask at once
(dashboards, notebooks)."""

from __future__ import annotations

import collections
import functools
import threading
from typing import Any

__all__ = ["memo"]


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
