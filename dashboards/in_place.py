"""Figures that follow a dashboard's widgets in place (issue 43: an answer within a second): :func:`follow` puts a
plot in a DynamicMap on the parameters it shows, so a change updates the figure's data, title and axes instead of
replacing it with a new Bokeh figure; the figures that follow a changed parameter are redrawn together in one hold and
freeze of the document; :func:`built_once` keeps a view built once per value of the parameters that really rebuild
it; :func:`later` draws the views below the first figures once the page is shown. The forgetting, steer and
compact_models dashboards are built on them."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence

import holoviews as hv
import numpy as np
import panel as pn
import param

from dashboards.panels import MethodPanel, SizedPlot

__all__ = ["built_once", "follow", "later"]


def follow(panel: MethodPanel, plot: Callable[[], hv.core.Dimensioned], on: Sequence[str], needs: Sequence[str] = (),
           **pane_options) -> pn.pane.HoloViews:
    """``plot()`` in a figure that follows the parameters ``on`` of ``panel`` in place (a DynamicMap: the figure
    stays, its data, title and axes change). The figures that follow the same parameters are redrawn together, in
    one hold and freeze of the page's document (their changes leave in one message, and Bokeh recomputes the
    document's models once, not once per figure: a second per figure on a page of forty). While a preparation in
    ``needs`` (one that depends on ``on``) is not ready, the figure is blanked under a waiting title; its finishing
    (its counter) draws the frame."""
    def frame(**_):
        waiting = [panel.preparations[n] for n in needs if not panel.preparations[n].ready]
        if waiting and dmap.last is not None:
            return dmap.last.map(_blank, hv.Element).opts(title=f"waiting for {waiting[0].spec.label}...")
        return plot()

    stream = hv.streams.Params(panel, [*on, *needs], watch=False)
    _streams(panel, (*on, *needs)).append(stream)
    dmap = hv.DynamicMap(frame, streams=[stream])
    return pn.pane.HoloViews(dmap, **pane_options)


def _streams(panel: MethodPanel, names: tuple[str, ...]) -> list:
    """The list to which a figure of ``panel`` that follows the parameters ``names`` adds its stream (the streams of
    the view being built replace those of its previous build); one watcher of the panel redraws every figure that
    follows a changed parameter."""
    state = panel.__dict__.setdefault("_following", {"groups": {}, "watched": set()})
    unwatched = [n for n in names if n not in state["watched"]]
    if unwatched:
        state["watched"].update(unwatched)
        panel.param.watch(functools.partial(_redraw, state), unwatched)
    return state["groups"].setdefault(names, {}).setdefault(panel.__dict__.get("_building"), [])


def _redraw(state: dict, *events) -> None:
    changed = {event.name for event in events}
    streams = [stream for names, views in state["groups"].items() if changed & set(names)
               for group in views.values() for stream in group]
    doc = pn.state.curdoc
    with contextlib.ExitStack() as stack:
        if doc is not None:  # served: the changes leave in one message, the models recomputed once
            stack.enter_context(pn.io.hold(doc))
            stack.enter_context(doc.models.freeze())
        hv.streams.Stream.trigger(streams)


#: per served page: the views waiting to be drawn once it is shown, and their places
_LATER: dict = {}


def later(*views: Callable) -> list[pn.Column]:
    """``views`` drawn once the page is shown, with every other panel's in one go (one callback, one hold and freeze
    of the document): a page of forty figures shows its first ones within seconds instead of after all of them are
    built. Returns their places on the page (filled at once where no page is served)."""
    places = [pn.Column(sizing_mode="stretch_width") for _ in views]
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        for place, view in zip(places, views):
            place.objects = [pn.panel(view)]
        return places
    if doc not in _LATER:
        _LATER[doc] = []

        def fill():
            with pn.io.hold(doc), doc.models.freeze():
                for place, view in _LATER.pop(doc, []):
                    place.objects = [pn.panel(view)]

        pn.state.onload(fill)
        pn.state.on_session_destroyed(lambda _context: _LATER.pop(doc, None))  # closed before it was shown
    _LATER[doc] += zip(places, views)
    return places


def _blank(element: hv.Element) -> hv.Element:
    """``element`` with its values blanked (NaN, or empty text) and its keys kept: the same figure, nothing shown in
    it (a stacked bar chart cannot be drawn without rows)."""
    df = element.dframe()
    for vd in element.vdims:
        df[vd.name] = np.nan if np.issubdtype(df[vd.name].dtype, np.number) else ""
    return element.clone(df)


def built_once(*rebuild: str, needs: str | Sequence[str] = ()) -> Callable[[Callable], Callable]:
    """:func:`dashboards.panels.view` for a view of figures that :func:`follow` the widgets: the view is built once
    per value of the ``rebuild`` parameters (its preparations' placeholder until they are first ready) and the same
    view is returned afterwards, so the page keeps its figures (Panel leaves a view returned again as it is), also
    when a preparation finishes for another setting."""
    names = (needs,) if isinstance(needs, str) else tuple(needs)

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(self):
            key, built = tuple(getattr(self, p) for p in rebuild), self.__dict__.setdefault("_built", {})
            if built.get(fn.__name__, (None,))[0] == key:
                return built[fn.__name__][1]
            for name in names:
                prep = self.preparations[name]
                if not prep.ready:
                    return prep.placeholder()
            for views in self.__dict__.get("_following", {}).get("groups", {}).values():
                views.pop(fn.__name__, None)  # the figures of the previous build are gone
            self._building = fn.__name__
            try:
                out = fn(self)
            finally:
                self._building = None
            built[fn.__name__] = (key, SizedPlot(out) if isinstance(out, pn.pane.HoloViews) else out)
            return built[fn.__name__][1]

        return param.depends(*rebuild, *names)(wrapper)

    return decorate
