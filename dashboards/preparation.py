"""Named background preparations of a method panel: slow first-use work (training a model) with progress and errors.

A panel declares each preparation with :func:`preparation` on a method that does the work for a snapshot of the
settings it depends on::

    @preparation(on=("profile", "datum"), label="the fits", cached=lambda s: live.prepared(s.datum, s.profile),
                 message="**Fitting** every encoder to {datum} (first use; cached afterwards)...",
                 describe="**Fitting** every encoder to {datum}: {done} / {total}...")
    def fits(self, s, report):
        live.prepare(s.datum, s.profile, report=report)

The work runs in the server's one worker thread (:data:`QUEUE`, one job at a time) and reads its settings from
``s`` (a named tuple of the ``on`` parameters, taken when it starts), never from the panel: the panel's settings may
change while it works. It calls ``report(done, total=None, **extra)`` to move the progress bar; a cancelled job stops
there (and before it trains or builds a cache entry). The status line says "Loading <label>..." while the work only
reads caches back, and the declared message ("Training ...") once it trains or builds a cache entry
(:func:`lab.cache.watch_work` hears each :func:`lab.core.train.fit` and each cache miss): a preparation whose results
are all cached never claims to train. :class:`Preparation` is the running state of one declaration in one panel:
what is done (a set of settings snapshots), what failed (the error text per snapshot), its job, and the page's
progress bar, Cancel button and status line. When the job ends, the panel's counter parameter named like the
preparation is bumped (views depend on it) and the current settings are checked again: if they changed meanwhile,
the preparation starts over for them. A view never does the work itself: :meth:`Preparation.ready` says whether the
current settings are prepared, and the view shows a placeholder (or the error) until they are.

The work one server lets its pages start is bounded (:data:`LIMITS`, set by ``lab serve``): at most
``max_jobs`` jobs waiting or running in the server (a page asking for more is told so and waits for a place), one
job per preparation of a page (a newer request replaces its waiting one; the values a widget passed through are never
prepared), a Cancel button per preparation and a cancel when the page closes, the ``quick`` and ``ci`` profiles only
(``full`` with ``--allow-full``), and a preparation's seed widgets bounded (checked when a panel class is made,
:mod:`dashboards.panels`).
"""

from __future__ import annotations

import threading
from collections import deque, namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import panel as pn

from lab.cache import watch_work
from lab.checks import bad_value

__all__ = ["LIMITS", "QUEUE", "Busy", "Cancelled", "Job", "JobQueue", "Limits", "Preparation", "PreparationSpec",
           "configure", "preparation"]

#: one preparation works at a time in a server process: trainings seed the process-wide random generators (torch,
#: NumPy), and two at once would interleave their draws and make results depend on timing
WORK_LOCK = threading.Lock()


@dataclass
class Limits:
    """What the dashboards of this process may start (:func:`configure` sets it; ``lab serve`` from its options).

    ``max_jobs`` preparations may be waiting or running at once in the server, whatever the number of pages; a
    page's preparation holds one place at most (a newer request replaces its waiting one). The pages offer the
    ``quick`` and ``ci`` profiles, and ``full`` only with ``allow_full`` (``lab serve --allow-full``); a seed widget a
    preparation depends on spans at most ``max_seeds`` + 1 values.
    """

    max_jobs: int = 4
    allow_full: bool = False
    max_seeds: int = 1000

    def profiles(self) -> tuple[str, ...]:
        """The profiles a page may prepare."""
        return ("quick", "ci", "full") if self.allow_full else ("quick", "ci")


LIMITS = Limits()
MAX_JOBS_ALLOWED = (1, 64)
#: called with :data:`LIMITS` after each :func:`configure` (the panels' profile widgets follow ``allow_full``)
ON_CONFIGURE: list[Callable[[Limits], None]] = []


def configure(*, max_jobs: int | None = None, allow_full: bool | None = None) -> Limits:
    """Set the server's :data:`LIMITS` (``None`` keeps a value); ``ConfigError`` for a bad ``max_jobs``."""
    if max_jobs is not None:
        lo, hi = MAX_JOBS_ALLOWED
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or not lo <= max_jobs <= hi:
            raise bad_value("--max-jobs", max_jobs, f"an integer in [{lo}, {hi}]")
        LIMITS.max_jobs = max_jobs
    if allow_full is not None:
        LIMITS.allow_full = bool(allow_full)
    for listener in ON_CONFIGURE:
        listener(LIMITS)
    return LIMITS


class Busy(Exception):
    """The server's queue of preparations is full (:attr:`Limits.max_jobs`)."""


class Cancelled(BaseException):  # noqa: N818 - not an error: raised to end a cancelled work, never shown
    """Raised inside a cancelled preparation's work at its next progress report (a BaseException, so that a
    work's ``except Exception`` does not swallow it)."""


class Job:
    """One request to prepare one panel's settings: waiting, running, then ended (done, failed or cancelled)."""

    def __init__(self, prep: Preparation, settings: tuple):
        self.prep, self.settings = prep, settings
        self.info: dict[str, Any] = {"done": 0.0, "total": 1.0}
        self.state = "new"  # new, waiting, running, ended; superseded or withdrawn when it never ran
        self.cancel = threading.Event()
        self.ended = threading.Event()
        self.failure = ""
        self.cancelled = False

    def report(self, done, total=None, **extra) -> None:
        """The work's progress; raises :class:`Cancelled` once the job is cancelled."""
        if self.cancel.is_set():
            raise Cancelled
        self.info.update(done=float(done), **extra)
        if total is not None:
            self.info["total"] = float(total)

    def _heard(self, what: str) -> None:
        if self.cancel.is_set():  # about to train or build a cache entry: nothing written yet
            raise Cancelled
        self.info.setdefault("training", what)  # a cache miss or a training: the work is no mere read-back

    def run(self) -> None:
        """Do the work (in the queue's worker thread); its error is kept in :attr:`failure`."""
        spec = self.prep.spec
        try:
            if self.cancel.is_set():
                raise Cancelled
            with WORK_LOCK, watch_work(self._heard):
                spec.work(self.prep.panel, self.settings, self.report)
        except Cancelled:
            self.cancelled = True
        except Exception as exc:  # noqa: BLE001 - shown in the page
            self.failure = f"{spec.label} failed: {type(exc).__name__}: {exc}"


class JobQueue:
    """The server's preparations, run one at a time in order by one worker thread, at most :attr:`limit` waiting or
    running at once (:meth:`submit` raises :class:`Busy` beyond); a job submitted to an idle queue runs at once."""

    def __init__(self, limit: Callable[[], int] | int = lambda: LIMITS.max_jobs):
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: deque[Job] = deque()
        self._running: Job | None = None
        self._worker: threading.Thread | None = None

    @property
    def limit(self) -> int:
        return self._limit() if callable(self._limit) else self._limit

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting) + (self._running is not None)

    def ahead_of(self, job: Job) -> int:
        """How many jobs run or wait before ``job`` (0 when it runs or has ended)."""
        with self._lock:
            if job.state != "waiting":
                return 0
            return list(self._waiting).index(job) + (self._running is not None)

    def submit(self, job: Job) -> None:
        """Queue ``job``, or raise :class:`Busy` when :attr:`limit` jobs are waiting or running already."""
        with self._lock:
            active = len(self._waiting) + (self._running is not None)
            if active >= self.limit:
                raise Busy(active)
            if self._running is None and not self._waiting:
                job.state, self._running = "running", job
            else:
                job.state = "waiting"
                self._waiting.append(job)
            worker = None
            if self._worker is None:
                worker = self._worker = threading.Thread(target=self._work, name="dashboard-preparations",
                                                         daemon=True)
        if worker is not None:
            worker.start()  # outside the lock: the worker takes its first job at once

    def supersede(self, old: Job, new: Job) -> bool:
        """Put ``new`` in the place of ``old`` if ``old`` still waits (it will never run); False if it runs."""
        with self._lock:
            if old.state != "waiting":
                return False
            self._waiting[self._waiting.index(old)] = new
            new.state, old.state = "waiting", "superseded"
        old.ended.set()
        return True

    def withdraw(self, job: Job) -> bool:
        """Take ``job`` out if it still waits (it will never run); False if it runs or has ended."""
        with self._lock:
            if job.state != "waiting":
                return False
            self._waiting.remove(job)
            job.state = "withdrawn"
        job.ended.set()
        return True

    def cancel_all(self) -> None:
        """Withdraw every waiting job and ask the running one to stop at its next progress report (a server being
        shut down, or a test leaving nothing queued for the next)."""
        with self._lock:
            waiting, running = list(self._waiting), self._running
        for job in waiting:
            self.withdraw(job)
        if running is not None:
            running.cancel.set()

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._running is None:
                    if not self._waiting:
                        self._worker = None  # idle: the next submit starts another worker
                        return
                    self._running = self._waiting.popleft()
                    self._running.state = "running"
                job = self._running
            try:
                job.run()
            finally:
                with self._lock:
                    self._running, job.state = None, "ended"
                job.ended.set()


#: the server's queue of preparations (one per process)
QUEUE = JobQueue()


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
    """One panel's running state of one declared preparation: done settings, errors, its job, progress, status.

    Place :attr:`status`, :attr:`progress` and :attr:`cancel_button` in the page. The panel calls :meth:`ensure` when
    one of the ``on`` parameters changes and once the page has loaded, and :meth:`cancel` when its page closes. A
    periodic callback on the server calls :meth:`poll` while a job waits or works (tests call it by hand).

    The bounds: the preparation holds one job at most in the server's :data:`QUEUE`; settings changed while it waits
    replace it (the older request never runs), settings changed while it works are prepared when it ends (the
    settings passed through meanwhile never are). A full queue, a profile the server does not offer and a cancel
    each leave one sentence in the status line.
    """

    def __init__(self, panel: Any, spec: PreparationSpec, period_ms: int = 250):
        self.panel, self.spec, self.name = panel, spec, spec.name
        self.progress = pn.indicators.Progress(value=0, max=100, width=300, visible=False)
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.cancel_button = pn.widgets.Button(label="Cancel", color="light", width=80, visible=False,
                                               description=f"Stop preparing {spec.label}")
        self.cancel_button.on_click(lambda _event: self.cancel())
        self.done: set[tuple] = set()
        self.errors: dict[tuple, str] = {}
        self.cancelled: set[tuple] = set()
        self.info: dict[str, Any] = {}
        self._settings = spec.settings_type()
        self._period = period_ms
        self._job: Job | None = None
        self._deferred: tuple | None = None  # the settings waiting for a place in a full queue
        self._cancel_at: tuple | None = None  # the settings when a cancel was asked
        self._poller = None

    # -- state -------------------------------------------------------------------------------------------------------
    def settings(self) -> tuple:
        """The snapshot of the panel's current settings this preparation depends on."""
        return self._settings(*(getattr(self.panel, p) for p in self.spec.on))

    @property
    def running(self) -> bool:
        """Whether a job of this preparation waits or works."""
        return self._job is not None

    @property
    def working_for(self) -> tuple | None:
        """The settings the waiting or running job is for (``None`` when idle)."""
        return None if self._job is None else self._job.settings

    @property
    def ready(self) -> bool:
        """Whether the current settings are prepared (done here, or cached already)."""
        s = self.settings()
        if s in self.done:
            return True
        if s != self.working_for and self.spec.cached is not None and self.spec.cached(s):
            self.done.add(s)
            return True
        return False

    @property
    def error(self) -> str:
        """The error of the current settings' preparation ('' when none failed)."""
        return self.errors.get(self.settings(), "")

    def placeholder(self) -> pn.pane.Markdown:
        """What a view shows until the current settings are prepared: the error, or a waiting line."""
        error, s = self.error, self.settings()
        if error:
            return pn.pane.Markdown(f"**{error}**", sizing_mode="stretch_width")
        if s in self.cancelled and self._job is None:
            return pn.pane.Markdown(f"*{self.spec.label} cancelled; change a setting to prepare it again.*")
        return pn.pane.Markdown(f"*waiting for {self.spec.label}...*")

    # -- work --------------------------------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Prepare the current settings unless they are prepared or failed unchanged: start a job, or replace this
        preparation's waiting one; a running one is left to end (:meth:`poll` checks the settings again then)."""
        s, job = self.settings(), self._job
        if job is not None:
            if s == job.settings:
                return
            if self.ready:
                if QUEUE.withdraw(job):  # not wanted any more: the settings went back to prepared ones
                    self._ended_idle("")
                return
            if self._refusal(s) is None:
                new = Job(self, s)
                if QUEUE.supersede(job, new):  # the newer request takes the waiting one's place
                    self._job, self.info = new, new.info
            return  # one at a time; poll() checks the settings again when it ends
        known = s in self.done
        if self.ready:
            self._deferred = None
            self._show("")
            if not known:
                self._bump()  # found cached: views that wait for it show
            return
        refusal = self._refusal(s)
        if refusal is not None:
            self._deferred = None
            self.errors[s] = refusal
            self._show(f"**{refusal}**")
            self._bump()
            return
        self.errors.pop(s, None)  # new settings, or the same again after a failure: try (again)
        self.cancelled.discard(s)
        self._start(s)

    def _refusal(self, s: tuple) -> str | None:
        """Why the server does not prepare ``s`` (a profile it does not offer), or None."""
        profile = getattr(s, "profile", None)
        if profile is None or profile in LIMITS.profiles():
            return None
        return str(bad_value("profile", profile, f"{', '.join(LIMITS.profiles())} (this server was started "
                                                 "without --allow-full)"))

    def _start(self, s: tuple) -> None:
        job = Job(self, s)
        try:
            QUEUE.submit(job)
        except Busy as busy:
            self._deferred = s
            self._show(f"**The server is busy: {busy.args[0]} preparations are waiting or running, the most it takes "
                       f"at once; {self.spec.label} starts when one ends.**")
            self._watch()
            return
        self._deferred, self._cancel_at = None, None
        self._job, self.info = job, job.info
        self.progress.max, self.progress.value, self.progress.visible = 1, 0, False
        self.status.object = self._loading()
        self.cancel_button.visible = True
        self._watch()

    def _watch(self) -> None:
        if self._poller is None:
            self._poller = pn.state.add_periodic_callback(self.poll, period=self._period)

    def _unwatch(self) -> None:
        if self._poller is not None:
            self._poller.stop()
        self._poller = None

    def cancel(self) -> None:
        """Stop this preparation: a waiting job never runs, a running one stops at its next progress report (or
        before it trains or builds a cache entry); the settings stay unprepared until they change."""
        deferred, job = self._deferred, self._job
        self._deferred = None
        if job is None:
            if deferred is not None:  # it waited for a place in a full queue: it gives it up
                self.cancelled.add(deferred)
                self._ended_idle(f"*{self.spec.label} cancelled.*")
            return
        self._cancel_at = self.settings()
        if QUEUE.withdraw(job):
            self.cancelled.add(job.settings)
            self._ended_idle(f"*{self.spec.label} cancelled.*")
            return
        job.cancel.set()
        self.status.object = f"*Cancelling {self.spec.label} (it stops at its next progress report)...*"

    def _ended_idle(self, line: str) -> None:
        self._job = None
        self.cancel_button.visible = False
        self._unwatch()
        self._show(line)

    def poll(self) -> None:
        """Move the progress bar; when the job has ended: record it, bump the panel's counter, re-check."""
        context = getattr(pn.state.curdoc, "session_context", None)
        if context is not None and context.destroyed:  # the page has gone: nothing to show, nothing to prepare
            self.cancel()
            self._unwatch()
            return
        job = self._job
        if job is None:
            if self._deferred is not None:
                self.ensure()  # a place in the queue may have freed
            if self._job is None and self._deferred is None:
                self._unwatch()
            return
        info = job.info
        self.progress.max = max(1, int(info.get("total", 1)))
        self.progress.value = min(int(info.get("done", 0)), self.progress.max)
        self.progress.visible = bool(info.get("training")) or self.progress.max > 1
        if job.cancel.is_set():
            self.status.object = f"*Cancelling {self.spec.label} (it stops at its next progress report)...*"
        else:
            self.status.object = self._line(job, info)
        if not job.ended.is_set():
            return
        s = job.settings
        self._job = None
        self.cancel_button.visible = False
        self._unwatch()
        if job.cancelled:
            self.cancelled.add(s)
            if self._cancel_at is not None and self.settings() != self._cancel_at:
                self.ensure()  # the settings changed since the cancel: prepare the new ones
            else:
                self._show(f"*{self.spec.label} cancelled.*")
            return
        if job.failure:
            self.errors[s] = job.failure
        else:
            self.done.add(s)
        self._bump()
        if self.settings() != s:
            self.ensure()  # the settings changed while it worked: prepare the current ones
        else:
            self._show(job.failure and f"**{job.failure}**")

    def _loading(self, count: str = "") -> str:
        return f"*Loading {self.spec.label}{count}...*"

    def _line(self, job: Job, info: dict) -> str:
        """The status line while working: the declared message (or progress description) once the work trains or
        builds a cache entry; until then a loading line, the work having only read caches back."""
        if job.state == "waiting":
            return f"*Waiting for another preparation before {self.spec.label}...*"
        if not info.get("training"):
            count = f" {int(info['done'])} / {int(info['total'])}" if info.get("total", 1) > 1 else ""
            return self._loading(count)
        if info.get("done") and self.spec.describe is not None:
            return self._describe(job.settings, info)
        return self.spec.message.format(**job.settings._asdict())

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
