"""Method panels and the dashboards made of them.

A :class:`MethodPanel` shows one method: its widgets (``param`` parameters, built with :func:`field_param` from the
method's Config bounds and docs where a Config field is shown), its views over the method's own ``live.py`` and
``plots.py``, and any number of named background preparations (:func:`dashboards.preparation.preparation`), each
with its progress bar and its status line (where an error is shown)::

    class PruningPanel(MethodPanel):
        method = "aire_prune"
        controls = ("kind", "ratio", "profile")                # the widgets, in order
        kind = param.Selector(default="lru", objects=["lru", "s5"], doc="...")
        ratio = field_param(Config, "headline_ratio", bounds=(0.0, 0.95))   # bounds and doc from the Config

        @preparation(on=("profile", "kind"), label="the trained model")
        def model(self, s, report):                           # background thread; settings from s only
            live.prepare(self.config_of(s.profile), s.kind, report)

        @view("kind", "ratio", "profile", needs="model")       # a placeholder until `model` is ready
        def curves(self): ...

        def main(self):
            return [self.curves]

A panel is a page on its own; :class:`MethodDashboard` composes several (one profile widget for all of them, each
panel's widgets in the sidebar, its views stacked or in tabs). The one environment variable :data:`PROFILE_ENV` picks
the profile (``LAB_DASHBOARD_PROFILE=ci`` for the browser tests; ``quick`` otherwise).
"""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import panel as pn
import param

import lab
from dashboards.preparation import LIMITS, ON_CONFIGURE, Preparation, PreparationSpec, preparation
from lab.config import field_specs

__all__ = ["PROFILES", "PROFILE_ENV", "MethodDashboard", "MethodPanel", "field_param", "page", "preparation",
           "profile_from_env", "view"]

#: the one environment variable that picks the dashboards' profile
PROFILE_ENV = "LAB_DASHBOARD_PROFILE"
#: profiles a dashboard can show (full is for long runs, not for interaction)
PROFILES = ("quick", "ci")

HEADER_STYLE = {"background": "#1f5fa8", "color": "white", "padding": "4px 16px", "border-radius": "4px"}


def profile_from_env() -> str:
    """The dashboards' profile: ``$LAB_DASHBOARD_PROFILE`` (``quick`` when unset; ``full`` only on a server started
    with ``--allow-full``)."""
    value = os.environ.get(PROFILE_ENV, "quick")
    allowed = LIMITS.profiles()
    if value not in allowed:
        raise ValueError(f"{PROFILE_ENV}={value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def _checked_profile(params: dict) -> dict:
    """``params`` with its profile (default :func:`profile_from_env`)."""
    return {**params, "profile": params.get("profile") or profile_from_env()}


def _profile_param() -> param.Selector:
    return param.Selector(default="quick", objects=list(PROFILES),
                          doc="Profile of the method whose settings (and cached models) the dashboard uses.")


def field_param(config: type, name: str, *, default: Any = None, bounds: tuple | None = None,
                objects: Sequence | None = None, label: str | None = None, **kwargs) -> param.Parameter:
    """A ``param`` parameter for Config field ``name``: its type, its doc, its declared bounds or choices.

    Arguments:
        config: the method's Config class.
        default: the widget's start value (default: the quick profile's).
        bounds: narrower bounds for the slider (must lie inside the field's own range).
        objects: a subset of the field's choices to offer.
        label: the widget's label (default: the field name in sentence case, as ``param`` labels any parameter).
    """
    spec = field_specs(config)[name]
    doc = spec.doc
    label = label or param.parameterized.label_formatter(name)
    value = spec.default if default is None else default
    if spec.is_tuple:
        raise TypeError(f"field_param: {name} is a tuple field; offer one of its values with param.Selector")
    if spec.choices is not None or objects is not None:
        offered = list(objects if objects is not None else spec.choices)
        bad = [o for o in offered if spec.choices is not None and o not in spec.choices]
        if bad:
            raise ValueError(f"objects={bad!r} is not allowed for {name}; allowed: {spec.allowed()}")
        return param.Selector(default=value if value in offered else offered[0], objects=offered, doc=doc,
                              label=label, **kwargs)
    if spec.element_type is bool:
        return param.Boolean(default=bool(value), doc=doc, label=label, **kwargs)
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
                             label=label, inclusive_bounds=inclusive, **kwargs)
    return param.Number(default=float(value), bounds=tuple(float(b) for b in bounds), doc=doc,
                        label=label, inclusive_bounds=inclusive, **kwargs)


def page(title: str, *, sidebar: Sequence, main: Sequence) -> pn.Column:
    """Title bar, a fixed-width sidebar of widgets and a main column of views (works offline: no template fonts)."""
    header = pn.pane.HTML(f"<h2 style='margin:6px 0'>{title}</h2>", styles=HEADER_STYLE,
                          sizing_mode="stretch_width")
    side = pn.Column(*sidebar, width=320)
    body = pn.Column(*main, sizing_mode="stretch_width")
    return pn.Column(header, pn.Row(side, body, sizing_mode="stretch_width"), sizing_mode="stretch_width")


#: widgets Panel draws without their name: each gets a label line above it
_UNLABELLED = (pn.widgets.RadioButtonGroup, pn.widgets.CheckButtonGroup, pn.widgets.Player)


def labelled(pane: pn.Param) -> pn.Param:
    """``pane`` with a label line (the parameter's label) above each button group, which Panel draws bare."""
    layout = pane.layout
    for i in range(len(layout) - 1, -1, -1):
        widget = layout[i]
        if isinstance(widget, _UNLABELLED) and widget.name:
            layout.insert(i, pn.pane.HTML(f"<label style='font-size:13px'>{html.escape(widget.name)}</label>",
                                          margin=(8, 10, -6, 10)))
    return pane


def view(*on: str, needs: str | Sequence[str] = ()) -> Callable[[Callable], Callable]:
    """Decorate a panel's view: it is redrawn when the parameters ``on`` change or a preparation in ``needs``
    finishes, and shows that preparation's placeholder (or its error) until the current settings are prepared."""
    names = (needs,) if isinstance(needs, str) else tuple(needs)

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            for name in names:
                prep = self.preparations[name]
                if not prep.ready:
                    return prep.placeholder()
            return _sized(fn(self, *args, **kwargs))

        return param.depends(*on, *names)(wrapper)

    return decorate


class SizedPlot(pn.Column):
    """A view's HoloViews pane in a Column of its own: Panel's inner layout of a view copies a pane's ``fixed`` mode
    without its width and height, which Bokeh warns about (W-1005, FIXED_SIZING_MODE). ``object`` is the pane's."""

    @property
    def object(self) -> Any:
        return self.objects[0].object


def _sized(out: Any) -> Any:
    return SizedPlot(out) if isinstance(out, pn.pane.HoloViews) else out


def _served() -> bool:
    return pn.state.curdoc is not None and pn.state.curdoc.session_context is not None


def _check_seeds(name: str, namespace: dict, trained: set[str]) -> None:
    """A seed widget (an integer parameter named ``*seed*``) has finite non-negative bounds, and one a preparation
    depends on spans at most ``LIMITS.max_seeds`` + 1 values: what one page can ask the server to train is bounded."""
    for key, p in namespace.items():
        if not (isinstance(p, param.Integer) and "seed" in key.lower()):
            continue
        lo, hi = p.bounds or (None, None)
        if lo is None or hi is None or lo < 0:
            raise TypeError(f"{name}: seed parameter {key} needs finite non-negative bounds (it has {p.bounds})")
        if key in trained and hi - lo > LIMITS.max_seeds:
            raise TypeError(f"{name}: seed parameter {key} spans {hi - lo + 1} values; a preparation's seeds span "
                            f"at most {LIMITS.max_seeds + 1}")


class _PanelType(type(pn.viewable.Viewer)):
    """Turns each :func:`preparation` declared in a panel class into a hidden counter parameter of the same name
    (bumped when it finishes; views depend on it) and collects the declarations in ``preparation_specs``."""

    def __new__(mcs, name, bases, namespace, **kwargs):
        declared = {k: v for k, v in namespace.items() if isinstance(v, PreparationSpec)}
        for key, spec in declared.items():
            namespace[key] = param.Integer(default=0, precedence=-1,
                                           doc=f"Times the preparation of {spec.label} finished.")
        inherited = {k: v for base in reversed(bases) for k, v in getattr(base, "preparation_specs", {}).items()}
        namespace["preparation_specs"] = {**inherited, **declared}
        base = globals().get("MethodPanel")  # absent while MethodPanel itself is made
        reserved = {"preparations", *dir(base)} - set(base.param) if base is not None else set()
        clash = sorted(k for k, v in namespace.items() if isinstance(v, param.Parameter) and k in reserved)
        if clash:
            raise TypeError(f"{name}: parameter(s) {', '.join(clash)} would hide MethodPanel's own attributes")
        _check_seeds(name, namespace, {p for spec in namespace["preparation_specs"].values() for p in spec.on})
        return super().__new__(mcs, name, bases, namespace, **kwargs)


class MethodPanel(pn.viewable.Viewer, metaclass=_PanelType):
    """One method's part of a dashboard: its widgets, its views, its named background preparations.

    Subclasses set ``method`` (a slug), ``intro`` (the idea, markdown), ``controls`` (the parameters shown as
    widgets, in order; ``widget_options`` per parameter), declare preparations with :func:`preparation` and views
    with :func:`view`, and return their views from :meth:`main`. Each declared preparation ``name`` becomes a hidden
    counter parameter of that name (bumped when it finishes) and a :class:`Preparation` in ``preparations[name]``.
    """

    method: ClassVar[str] = ""
    title: ClassVar[str] = ""
    intro: ClassVar[str] = ""
    controls: ClassVar[tuple[str, ...]] = ("profile",)
    widget_options: ClassVar[dict[str, Any]] = {}
    preparation_specs: ClassVar[dict[str, PreparationSpec]]  # set by the metaclass

    profile = _profile_param()

    def __init__(self, **params):
        super().__init__(**_checked_profile(params))
        self.preparations: dict[str, Preparation] = {n: Preparation(self, s) for n, s in
                                                     self.preparation_specs.items()}
        for prep in self.preparations.values():
            self.param.watch(lambda *_, prep=prep: prep.ensure(), list(prep.spec.on))
        if self.preparations:
            if _served():
                pn.state.onload(self.start_preparations)  # show the page first, then prepare
                pn.state.on_session_destroyed(self._page_closed)
            else:
                self.start_preparations()

    def _page_closed(self, session_context) -> None:  # Bokeh calls it with this argument name
        self.cancel_preparations()

    def cancel_preparations(self) -> None:
        """Cancel every preparation's job (the page closed): a waiting one never runs, a running one stops at its
        next progress report."""
        for prep in self.preparations.values():
            prep.cancel()

    def start_preparations(self) -> None:
        """Start every preparation the current settings need."""
        for prep in self.preparations.values():
            prep.ensure()

    # -- the method --------------------------------------------------------------------------------------------------
    @property
    def meta(self):
        return lab.method(self.method)

    def config_of(self, profile: str):
        """The method's Config of ``profile`` (a preparation's work calls it with ``s.profile``)."""
        return self.meta.config.from_profile(profile)

    @property
    def config(self):
        """The method's Config of the current profile."""
        return self.config_of(self.profile)

    @property
    def ready(self) -> bool:
        """Whether every preparation is done for the current settings."""
        return all(prep.ready for prep in self.preparations.values())

    # -- the page ----------------------------------------------------------------------------------------------------
    def widgets(self, parameters: Sequence[str], **widget_options) -> pn.Param:
        return labelled(pn.Param(self.param, parameters=list(parameters), widgets=widget_options, show_name=False))

    def intro_pane(self) -> pn.pane.Markdown:
        paper = f"Paper: {self.meta.paper}."
        return pn.pane.Markdown(f"{self.intro}\n\n{paper}" if self.intro else paper)

    def sidebar(self, profile: bool = True) -> list:
        """The idea and the paper over the widgets (without the profile's when a dashboard shows it once)."""
        shown = [p for p in self.controls if profile or p != "profile"]
        options = {k: v for k, v in self.widget_options.items() if k in shown}
        return [self.intro_pane(), self.widgets(shown, **options)] if shown else [self.intro_pane()]

    def statuses(self) -> list:
        """Each preparation's status line, and its progress bar with its Cancel button."""
        return [w for prep in self.preparations.values()
                for w in (prep.status, pn.Row(prep.progress, prep.cancel_button, margin=0))]

    def main(self) -> list:
        """The views, top to bottom."""
        return []

    def __panel__(self):
        return page(self.title or self.meta.title, sidebar=self.sidebar(), main=[*self.statuses(), *self.main()])


class MethodDashboard(pn.viewable.Viewer):
    """A dashboard of several panels (``panel_types``): one profile for all of them, each panel's idea and widgets
    in the sidebar, each panel's statuses and views under its title, stacked or (``tabs``) in tabs."""

    title: ClassVar[str] = ""
    panel_types: ClassVar[tuple[type[MethodPanel], ...]] = ()
    tabs: ClassVar[bool] = False

    profile = _profile_param()

    def __init__(self, **params):
        super().__init__(**_checked_profile(params))
        #: the panels by method slug
        self.panels: dict[str, MethodPanel] = {cls.method: cls(profile=self.profile) for cls in self.panel_types}

    @param.depends("profile", watch=True)
    def _share_profile(self) -> None:
        for panel in self.panels.values():
            panel.profile = self.profile

    @property
    def ready(self) -> bool:
        return all(panel.ready for panel in self.panels.values())

    def __panel__(self):
        sidebar: list = [labelled(pn.Param(self.param, parameters=["profile"], show_name=False))]
        sections = []
        for panel in self.panels.values():
            sidebar += [pn.layout.Divider(), *panel.sidebar(profile=False)]
            sections.append((panel.title or panel.meta.title,
                             pn.Column(*panel.statuses(), *panel.main(), sizing_mode="stretch_width")))
        if self.tabs:
            main = [pn.Tabs(*sections, dynamic=False, sizing_mode="stretch_width")]
        else:
            main = []
            for i, (title, column) in enumerate(sections):
                main += [*([pn.layout.Divider()] if i else []), pn.pane.Markdown(f"### {title}"), column]
        return page(self.title, sidebar=sidebar, main=main)


def _offer_profiles(limits) -> None:
    """The profile widgets of every panel and dashboard offer the profiles the server allows (``full`` only with
    ``--allow-full``); a value outside them is refused, by a widget or by a crafted websocket message alike."""
    for cls in (MethodPanel, MethodDashboard):
        cls.param.profile.objects = list(limits.profiles())


ON_CONFIGURE.append(_offer_profiles)
