"""Whether work is being done or only read back: a thread's watcher hears when a cache entry is built or a model
trained, so a dashboard says "training" only then (a preparation whose results load from the cache says nothing of
the kind).

    with watch_work(lambda what: print("working on", what)):
        live.prepare(...)  # the callback runs on each cache miss and each training, in this thread

:func:`working` is what the caches (before they build an entry) and :func:`lab.core.train.fit` call. The watcher is
per thread: a dashboard's background preparation hears its own work only.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

__all__ = ["quiet", "watch_work", "working"]

_local = threading.local()


@contextlib.contextmanager
def watch_work(callback: Callable[[str], None]) -> Iterator[None]:
    """Call ``callback(what)`` whenever this thread builds a cache entry or trains, inside the block."""
    before = getattr(_local, "callback", None)
    _local.callback = callback
    try:
        yield
    finally:
        _local.callback = before


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Inside the block, building a cache entry is not work worth telling (e.g. storing a result read elsewhere)."""
    before = getattr(_local, "quiet", False)
    _local.quiet = True
    try:
        yield
    finally:
        _local.quiet = before


def working(what: str) -> None:
    """Tell this thread's watcher (if any) that ``what`` is being built or trained now."""
    callback = getattr(_local, "callback", None)
    if callback is not None and not getattr(_local, "quiet", False):
        callback(what)
