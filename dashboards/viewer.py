"""The base of every dashboard: :class:`MethodViewer`, and :func:`field_param` for widgets built from a Config.

A dashboard ``dashboards/<name>.py`` declares the method it shows and subclasses :class:`MethodViewer`::

    METHOD = "aire_prune"              # read by the registry without importing the app
    TITLE = "Pruning: AIRE-Prune on a trained SSM"

    class Dashboard(MethodViewer):
        method = METHOD
        ratio = field_param(Config, "ratio", bounds=(0.0, 0.95))   # bounds and doc from the Config field
        ...
        def prepare(self, report):        # slow first-use work (training), in a background thread
            live.trained(self.config, progress=report)
        @MethodViewer.when_ready
        def curves(self): ...              # a view: a placeholder until prepare() has finished

It imports only its method's ``live.py`` and ``plots.py`` and public names of ``lab``. What the base gives:

* ``profile``: the method's Config profile, from the one environment variable :data:`PROFILE_ENV`
  (``LAB_DASHBOARD_PROFILE=ci`` for the browser tests; ``quick`` otherwise); ``config`` is that profile's Config;
* background work with a progress bar, a status line and a shown error (:class:`BackgroundJob`), started when the
  page has loaded, and ``ready`` / a placeholder for the views until it has finished;
* :meth:`layout`: a title bar, the method's paper in the sidebar, the widgets and the job's status above the views.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import panel as pn
import param

import lab
from lab.config import field_specs

__all__ = ["PROFILE_ENV", "PROFILES", "BackgroundJob", "MethodViewer", "dashboard_layout", "field_param",
           "profile_from_env"]

#: the one environment variable that picks the dashboards' profile
PROFILE_ENV = "LAB_DASHBOARD_PROFILE"
#: profiles a dashboard can show (full is for long runs, not for interaction)
PROFILES = ("quick", "ci")

#: one background job works at a time in a server process: trainings seed the process-wide random generators
#: (torch, NumPy), and two at once would interleave their draws and make results depend on timing
_WORK_LOCK = threading.Lock()

HEADER_STYLE = {"background": "#1f5fa8", "color": "white", "padding": "4px 16px", "border-radius": "4px"}


def profile_from_env() -> str:
    """The dashboards' profile: ``$LAB_DASHBOARD_PROFILE`` (``quick`` when unset)."""
    value = os.environ.get(PROFILE_ENV, "quick")
    if value not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={value!r} is not allowed; allowed: {', '.join(PROFILES)}")
    return value


def field_param(config: type, name: str, *, default: Any = None, bounds: tuple | None = None,
                objects: Sequence | None = None, label: str | None = None, **kwargs) -> param.Parameter:
    """A ``param`` parameter for Config field ``name``: its type, its doc, its declared bounds or choices.

    Arguments:
        config: the method's Config class.
        default: the widget's start value (default: the quick profile's).
        bounds: narrower bounds for the slider (must lie inside the field's own range).
        objects: a subset of the field's choices to offer.
        label: the widget's label (default: the field name).
    """
    spec = field_specs(config)[name]
    doc = spec.doc
    value = spec.default if default is None else default
    if spec.is_tuple:
        raise TypeError(f"field_param: {name} is a tuple field; offer one of its values with param.Selector")
    if spec.choices is not None or objects is not None:
        offered = list(objects if objects is not None else spec.choices)
        bad = [o for o in offered if spec.choices is not None and o not in spec.choices]
        if bad:
            raise ValueError(f"objects={bad!r} is not allowed for {name}; allowed: {spec.allowed()}")
        return param.Selector(default=value if value in offered else offered[0], objects=offered, doc=doc,
                              label=label or name, **kwargs)
    if spec.element_type is bool:
        return param.Boolean(default=bool(value), doc=doc, label=label or name, **kwargs)
    rng = spec.range
    inclusive = (True, True)
    if bounds is None:
        if rng is None or rng.lo is None or rng.hi is None:
            raise ValueError(f"field_param: {name} has no finite range; give bounds=")
        bounds, inclusive = (rng.lo, rng.hi), (not rng.lo_open, not rng.hi_open)
    elif rng is not None and not (rng.contains(bounds[0]) and rng.contains(bounds[1])):
        raise ValueError(f"bounds={bounds!r} is not allowed for {name}; allowed: {spec.allowed()}")
    value = min(max(value, bounds[0]), bounds[1])
    if spec.element_type is int:
        return param.Integer(default=int(value), bounds=tuple(int(b) for b in bounds), doc=doc,
                             label=label or name, inclusive_bounds=inclusive, **kwargs)
    return param.Number(default=float(value), bounds=tuple(float(b) for b in bounds), doc=doc,
                        label=label or name, inclusive_bounds=inclusive, **kwargs)


def dashboard_layout(title: str, *, sidebar: Sequence, main: Sequence) -> pn.Column:
    """Title bar, a fixed-width sidebar of widgets and a main column of views (works offline: no template fonts)."""
    header = pn.pane.HTML(f"<h2 style='margin:6px 0'>{title}</h2>", styles=HEADER_STYLE,
                          sizing_mode="stretch_width")
    side = pn.Column(*sidebar, width=320)
    body = pn.Column(*main, sizing_mode="stretch_width")
    return pn.Column(header, pn.Row(side, body, sizing_mode="stretch_width"), sizing_mode="stretch_width")


class BackgroundJob:
    """Slow first-use work (training a model) in a thread, with a progress bar and a status line in the page.

    ``start(work, ...)`` runs ``work(report)`` in a daemon thread; ``report(done, total=None, **extra)`` updates the
    progress from there. A periodic callback on the server refreshes the bar and the status (``describe(info)``)
    and, when the thread ends, calls ``on_done()`` or shows the error. Place ``job.status`` and ``job.progress`` in
    the layout. One job of the process works at a time; the others wait their turn.
    """

    def __init__(self, period_ms: int = 250):
        self.progress = pn.indicators.Progress(value=0, max=100, width=300, visible=False)
        self.status = pn.pane.Markdown("")
        self.info: dict[str, float] = {}
        self.error = ""
        self._period = period_ms
        self._thread: threading.Thread | None = None
        self._poller = None
        self._describe: Callable[[dict], str] | None = None
        self._on_done: Callable[[], None] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def clear(self) -> None:
        """Hide the bar and the status (the work's result is available)."""
        self.progress.visible = False
        self.status.object = ""

    def start(self, work: Callable, *, total: float, message: str, describe: Callable[[dict], str] | None,
              on_done: Callable[[], None] | None, name: str = "lab-job") -> None:
        self.info = {"done": 0.0, "total": float(total)}
        self.error = ""
        self.progress.max, self.progress.value, self.progress.visible = max(1, int(total)), 0, True
        self.status.object = message
        self._describe, self._on_done = describe, on_done

        def report(done, total=None, **extra):
            self.info.update(done=float(done), **extra)
            if total is not None:
                self.info["total"] = float(total)

        def run():
            try:
                with _WORK_LOCK:
                    work(report)
            except Exception as exc:  # noqa: BLE001 - shown in the page
                self.error = f"{name} failed: {type(exc).__name__}: {exc}"

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        if self._poller is None:
            self._poller = pn.state.add_periodic_callback(self._poll, period=self._period)

    def _poll(self) -> None:
        info = self.info
        self.progress.max = max(1, int(info.get("total", 1)))
        self.progress.value = min(int(info.get("done", 0)), self.progress.max)
        if info.get("done") and self._describe is not None:
            self.status.object = self._describe(info)
        if self._thread is not None and not self._thread.is_alive():
            self._thread = None
            if self._poller is not None:
                self._poller.stop()
                self._poller = None
            if self.error:
                self.status.object = f"**{self.error}**"
                self.progress.visible = False
                return
            self.clear()
            if self._on_done is not None:
                self._on_done()


class MethodViewer(pn.viewable.Viewer):
    """Base of the dashboards: the method's profile and Config, background preparation, placeholders, layout.

    Subclasses set ``method`` (a slug) and ``title``, declare their widgets (with :func:`field_param` for Config
    fields), and may override :meth:`prepare` (slow work run once in a background thread, given
    ``report(done, total=None)``), :meth:`needs` (the key of what ``prepare`` makes, e.g. the chosen model: a new
    key starts a new preparation) and :meth:`is_prepared` (whether that key is ready already, e.g. cached).
    """

    method: ClassVar[str] = ""
    title: ClassVar[str] = ""
    intro: ClassVar[str] = ""

    profile = param.Selector(default="quick", objects=list(PROFILES),
                             doc="Profile of the method whose settings (and cached models) the dashboard uses.")
    version = param.Integer(default=0, precedence=-1, doc="Bumped when prepared work becomes available.")

    def __init__(self, **params):
        params.setdefault("profile", profile_from_env())
        super().__init__(**params)
        self.job = BackgroundJob()
        self._prepared: set = set()
        self._watch = self.param.watch(lambda *_: self._ensure(), list(self.prep_params()))
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._ensure)  # served: show the page first, then prepare
        else:
            self._ensure()

    # -- what subclasses override ----------------------------------------------------------------------------------
    def prep_params(self) -> tuple[str, ...]:
        """Parameters whose change needs new preparation (the profile, by default)."""
        return ("profile",)

    def needs(self) -> Any:
        """The key of what :meth:`prepare` makes for the current settings."""
        return tuple(getattr(self, p) for p in self.prep_params())

    def is_prepared(self) -> bool:
        """Whether the current key is ready without background work (e.g. loaded from the cache already)."""
        return type(self).prepare is MethodViewer.prepare

    def prepare(self, report: Callable[..., None]) -> None:
        """Slow first-use work for the current settings (runs in a background thread)."""

    def describe_progress(self, info: dict) -> str:
        return f"**Preparing** {int(info['done'])} / {int(info['total'])} (first use; cached afterwards)..."

    # -- machinery -------------------------------------------------------------------------------------------------
    @property
    def meta(self):
        return lab.method(self.method)

    @property
    def config(self):
        return self.meta.config.from_profile(self.profile)

    @property
    def ready(self) -> bool:
        return self.needs() in self._prepared and not self.job.running

    def _ensure(self) -> None:
        key = self.needs()
        if key in self._prepared:
            self.job.clear()
            self.version += 1
            return
        if self.job.running:
            return  # one preparation at a time; _ensure runs again when it ends
        if self.is_prepared():
            self._prepared.add(key)
            self.version += 1
            return

        def work(report):
            self.prepare(report)
            self._prepared.add(key)

        self.job.start(work, total=1, message="**Preparing** (first use: training if nothing is cached)...",
                       describe=self.describe_progress, on_done=self._ensure, name=f"{self.method}-prepare")

    @staticmethod
    def placeholder() -> pn.pane.Markdown:
        return pn.pane.Markdown("*waiting for the model...*")

    @staticmethod
    def when_ready(view: Callable) -> Callable:
        """Decorate a view: it shows a placeholder until the background preparation has finished."""

        @functools.wraps(view)
        def wrapper(self, *args, **kwargs):
            if not self.ready:
                return self.placeholder()
            return view(self, *args, **kwargs)

        return wrapper

    def widgets(self, parameters: Sequence[str], **widget_options) -> pn.Param:
        return pn.Param(self.param, parameters=list(parameters), widgets=widget_options, show_name=False)

    def layout(self, *, sidebar: Sequence, main: Sequence) -> pn.Column:
        """The page: title, the paper and idea (``intro``) over the widgets, the job's status over the views."""
        meta = self.meta
        intro = pn.pane.Markdown(f"{self.intro}\n\nPaper: {meta.paper}." if self.intro else f"Paper: {meta.paper}.")
        return dashboard_layout(self.title or meta.title, sidebar=[intro, *sidebar],
                                main=[self.job.status, self.job.progress, *main])
