"""Named background preparations of a method panel: slow first-use work (training a model) with progress and errors.

A panel declares each preparation with :func:`preparation` on a method that does the work for a snapshot of the
settings it depends on::

    @preparation(on=("profile", "datum"), label="the fits", cached=lambda s: live.prepared(s.datum, s.profile),
                 message="**Fitting** every encoder to {datum} (first use; cached afterwards)...",
                 describe="**Fitting** every encoder to {datum}: {done} / {total}...")
    def fits(self, s, report):
        live.prepare(s.datum, s.profile, report=report)

The work runs in a background thread and reads its settings from ``s`` (a named tuple of the ``on`` parameters,
taken when it starts), never from the panel: the panel's settings may change while it works. It calls
``report(done, total=None, **extra)`` to move the progress bar. The status line says "Loading <label>..." while the
work only reads caches back, and the declared message ("Training ...") once it trains or builds a cache entry
(:func:`lab.cache.watch_work` hears each :func:`lab.core.train.fit` and each cache miss): a preparation whose results
are all cached never claims to train. :class:`Preparation` is the running state of one
declaration in one panel: what is done (a set of settings snapshots), what failed (the error text per snapshot), the
thread, and the page's progress bar and status line. When the thread ends, the panel's counter parameter named like
the preparation is bumped (views depend on it) and the current settings are checked again: if they changed meanwhile,
the preparation starts over for them. A view never does the work itself: :meth:`Preparation.ready` says whether the
current settings are prepared, and the view shows a placeholder (or the error) until they are.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import panel as pn

from lab.cache import watch_work

__all__ = ["Preparation", "PreparationSpec", "preparation"]

#: one preparation works at a time in a server process: trainings seed the process-wide random generators (torch,
#: NumPy), and two at once would interleave their draws and make results depend on timing
WORK_LOCK = threading.Lock()


@dataclass(frozen=True)
class PreparationSpec:
    """A preparation as declared on a panel class (see :func:`preparation`)."""

    name: str
    on: tuple[str, ...]
    work: Callable[[Any, tuple, Callable[..., None]], None]
    label: str
    message: str
    describe: str | Callable[[tuple, dict], str] | None
    cached: Callable[[tuple], bool] | None

    def settings_type(self) -> type:
        return namedtuple(f"{self.name}_settings", self.on)


def preparation(*, on: Sequence[str] = ("profile",), label: str | None = None, message: str | None = None,
                describe: str | Callable[[tuple, dict], str] | None = None,
                cached: Callable[[tuple], bool] | None = None) -> Callable[[Callable], PreparationSpec]:
    """Declare a panel method ``work(self, s, report)`` as a named background preparation (named like the method).

    Arguments:
        on: the panel parameters whose values the work depends on; ``s`` holds them (``s.profile``, ...).
        label: what it makes, for the placeholder (``waiting for <label>...``); default: the method's name.
        message: the status line once the work trains or builds a cache entry (:func:`lab.cache.watch_work`
            hears it), a format string over ``s`` (default: ``Preparing <label>``); until then, and for work
            that only reads caches back, the line says ``Loading <label>...``.
        describe: the status line once progress is reported while training: a format string over ``s`` and the
            reported ``done``, ``total`` (integers) and extras, or a function ``(s, info) -> str``.
        cached: ``cached(s) -> bool``: whether ``s`` is ready without any work (e.g. in memory already); it must be
            cheap, a view may call it.
    """

    def declare(work: Callable) -> PreparationSpec:
        name = work.__name__
        what = label or name
        return PreparationSpec(name=name, on=tuple(on), work=work, label=what,
                               message=message or f"**Preparing {what}** (first use; cached afterwards)...",
                               describe=describe, cached=cached)

    return declare


class Preparation:
    """One panel's running state of one declared preparation: done settings, errors, the thread, progress, status.

    Place :attr:`status` and :attr:`progress` in the page. The panel calls :meth:`ensure` when one of the ``on``
    parameters changes and once the page has loaded. A periodic callback on the server calls :meth:`poll` while the
    thread works (tests call it by hand).
    """

    def __init__(self, panel: Any, spec: PreparationSpec, period_ms: int = 250):
        self.panel, self.spec, self.name = panel, spec, spec.name
        self.progress = pn.indicators.Progress(value=0, max=100, width=300, visible=False)
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.done: set[tuple] = set()
        self.errors: dict[tuple, str] = {}
        self.info: dict[str, Any] = {}
        self._settings = spec.settings_type()
        self._period = period_ms
        self._thread: threading.Thread | None = None
        self._working: tuple | None = None  # the settings the thread works for
        self._failure = ""
        self._poller = None

    # -- state -------------------------------------------------------------------------------------------------------
    def settings(self) -> tuple:
        """The snapshot of the panel's current settings this preparation depends on."""
        return self._settings(*(getattr(self.panel, p) for p in self.spec.on))

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def working_for(self) -> tuple | None:
        """The settings the running work was started for (``None`` when idle)."""
        return self._working

    @property
    def ready(self) -> bool:
        """Whether the current settings are prepared (done here, or cached already)."""
        s = self.settings()
        if s in self.done:
            return True
        if s != self._working and self.spec.cached is not None and self.spec.cached(s):
            self.done.add(s)
            return True
        return False

    @property
    def error(self) -> str:
        """The error of the current settings' preparation ('' when none failed)."""
        return self.errors.get(self.settings(), "")

    def placeholder(self) -> pn.pane.Markdown:
        """What a view shows until the current settings are prepared: the error, or a waiting line."""
        error = self.error
        if error:
            return pn.pane.Markdown(f"**{error}**", sizing_mode="stretch_width")
        return pn.pane.Markdown(f"*waiting for {self.spec.label}...*")

    # -- work --------------------------------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Start the work for the current settings unless they are prepared, failed unchanged or one is running."""
        if self.running:
            return  # one at a time; poll() checks the settings again when it ends
        s = self.settings()
        known = s in self.done
        if self.ready:
            self._show("")
            if not known:
                self._bump()  # found cached: views that wait for it show
            return
        self.errors.pop(s, None)  # new settings, or the same again after a failure: try (again)
        self._start(s)

    def _start(self, s: tuple) -> None:
        self.info = {"done": 0.0, "total": 1.0}
        self._failure = ""
        self._working = s
        self.progress.max, self.progress.value, self.progress.visible = 1, 0, False
        self.status.object = self._loading()
        work, panel, info = self.spec.work, self.panel, self.info

        def report(done, total=None, **extra):
            info.update(done=float(done), **extra)
            if total is not None:
                info["total"] = float(total)

        def heard(what: str) -> None:
            info.setdefault("training", what)  # a cache miss or a training: the work is no mere read-back

        def run():
            try:
                if not WORK_LOCK.acquire(blocking=False):
                    info["queued"] = True
                    WORK_LOCK.acquire()
                info.pop("queued", None)
                try:
                    with watch_work(heard):
                        work(panel, s, report)
                finally:
                    WORK_LOCK.release()
            except Exception as exc:  # noqa: BLE001 - shown in the page
                self._failure = f"{self.spec.label} failed: {type(exc).__name__}: {exc}"

        self._thread = threading.Thread(target=run, name=f"{self.name}-prepare", daemon=True)
        self._thread.start()
        if self._poller is None:
            self._poller = pn.state.add_periodic_callback(self.poll, period=self._period)

    def poll(self) -> None:
        """Move the progress bar; when the work has ended: record it, bump the panel's counter, re-check."""
        context = getattr(pn.state.curdoc, "session_context", None)
        if context is not None and context.destroyed:  # the page has gone: nothing to show (the work ends alone)
            if self._poller is not None:
                self._poller.stop()
            self._poller = None
            return
        info = self.info
        self.progress.max = max(1, int(info.get("total", 1)))
        self.progress.value = min(int(info.get("done", 0)), self.progress.max)
        self.progress.visible = bool(info.get("training")) or self.progress.max > 1
        if self._working is not None:
            self.status.object = self._line(self._working, info)
        thread = self._thread
        if thread is None or thread.is_alive():
            return
        s, failure = self._working, self._failure
        self._thread, self._working = None, None
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        if failure:
            self.errors[s] = failure
        else:
            self.done.add(s)
        self._bump()
        if self.settings() != s:
            self.ensure()  # the settings changed while it worked: prepare the current ones
        else:
            self._show(failure and f"**{failure}**")


    def _loading(self, count: str = "") -> str:
        return f"*Loading {self.spec.label}{count}...*"

    def _line(self, s: tuple, info: dict) -> str:
        """The status line while working: the declared message (or progress description) once the work trains or
        builds a cache entry; until then a loading line, the work having only read caches back."""
        if info.get("queued"):
            return f"*Waiting for another preparation before {self.spec.label}...*"
        if not info.get("training"):
            count = f" {int(info['done'])} / {int(info['total'])}" if info.get("total", 1) > 1 else ""
            return self._loading(count)
        if info.get("done") and self.spec.describe is not None:
            return self._describe(s, info)
        return self.spec.message.format(**s._asdict())

    def _describe(self, s: tuple, info: dict) -> str:
        d = self.spec.describe
        if callable(d):
            return d(s, info)
        numbers = {k: v for k, v in info.items() if k not in ("done", "total")}
        return d.format(**s._asdict(), **numbers, done=int(info["done"]), total=int(info["total"]))

    def _show(self, text: str) -> None:
        self.status.object = text
        self.progress.visible = False

    def _bump(self) -> None:
        setattr(self.panel, self.name, getattr(self.panel, self.name) + 1)
