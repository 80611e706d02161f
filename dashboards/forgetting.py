"""Forgetting dashboard: what unlearning erases and what continual learning keeps. REM's task space (discovery rate x
regularity of the corruption) with every method's score as a heat map, a chosen cell's accuracies before and after
unlearning and what REM's extra units absorbed; QGPM's accuracy matrix and basis memory against accuracy; Weight
Space Consolidation's accuracy matrix.

The figures follow the widgets in place: each is a DynamicMap on the parameters it shows, so choosing a cell or a
variant changes the data of the figures on the page (REM's heat maps stay; only the chosen cell's outline moves)
instead of replacing them with new Bokeh figures (issue 43: an answer within a second)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence

import holoviews as hv
import numpy as np
import panel as pn
import param

from dashboards.panels import MethodDashboard, MethodPanel, SizedPlot, preparation
from lab.methods.qgpm import live as qgpm_live
from lab.methods.qgpm import plots as qgpm_plots
from lab.methods.rem import live, plots
from lab.methods.wsc import live as wsc_live
from lab.methods.wsc import plots as wsc_plots

METHOD = ("rem", "qgpm", "wsc")
TITLE = "Forgetting: REM's unlearning task space, continual learning's accuracy matrices (QGPM, WSC)"
DESCRIPTION = "REM unlearns corrupted data; QGPM and WSC learn task after task without forgetting"

CELL_PARAMS = ("corruption", "rate")


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
    """The streams of ``panel``'s figures that follow the parameters ``names`` (those of the view being built
    replace the ones of its previous build), and the one watcher that redraws them all at once."""
    groups = panel.__dict__.setdefault("_follow_streams", {})
    if names not in groups:
        groups[names] = {}

        def redraw(*_):
            doc = pn.state.curdoc
            with contextlib.ExitStack() as stack:
                if doc is not None:  # served: the changes leave in one message, the models recomputed once
                    stack.enter_context(pn.io.hold(doc))
                    stack.enter_context(doc.models.freeze())
                hv.streams.Stream.trigger([s for streams in groups[names].values() for s in streams])

        panel.param.watch(redraw, list(names))
    return groups[names].setdefault(panel.__dict__.get("_building"), [])


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
            for groups in self.__dict__.get("_follow_streams", {}).values():
                groups.pop(fn.__name__, None)  # the figures of the previous build are gone
            self._building = fn.__name__
            try:
                out = fn(self)
            finally:
                self._building = None
            built[fn.__name__] = (key, SizedPlot(out) if isinstance(out, pn.pane.HoloViews) else out)
            return built[fn.__name__][1]

        return param.depends(*rebuild, *names)(wrapper)

    return decorate


class RemPanel(MethodPanel):
    """Pick a cell of the task space; see each method's score there, the accuracies before and after, and where
    REM's redirected units took the corrupted examples."""

    method = METHOD[0]
    title = "Unlearning: REM over the space of corrupted-data tasks"
    intro = ("### REM\nPart of the training data is corrupted (random labels, class-pair flips, a backdoor) and only "
             "a share of it is known. REM redirects the known corrupted data into extra units, pushes the base "
             "units away with NPO, fine-tunes with example-tied masks and discards the extra units. Score: Utility "
             "(test accuracy) x Healed (accuracy on the corrupted data w.r.t. the true labels).")
    controls = ("corruption", "rate", "seed_offset", "profile")

    corruption = param.Selector(default=None, objects=[None], doc="Corruption of the cell (regularity axis).")
    rate = param.Selector(default=None, objects=[None], label="Discovery rate",
                          doc="Share of the corrupted data known at unlearning time.")
    seed_offset = param.Integer(default=0, bounds=(0, 9), label="REM seed",
                                doc="Seed of the REM model examined up close (the profile's seed plus this).")

    @param.depends("profile", watch=True, on_init=True)
    def _axes(self):
        cfg = self.config
        self.param.corruption.objects = list(cfg.corruptions)
        self.param.rate.objects = list(cfg.discovery_rates)
        if self.corruption not in cfg.corruptions:
            self.corruption = cfg.corruptions[-1]
        if self.rate not in cfg.discovery_rates:
            self.rate = cfg.discovery_rates[0]

    # -- REM's grid: the profile's run, computed once in the background (then cached on disk) ------------------------
    @preparation(on=("profile",), label="REM's grid", cached=lambda s: live.grid.cached(s.profile),
                 message="**Running REM's grid** (every corruption, discovery rate and method; first use, then "
                         "cached)...")
    def grid(self, s, report) -> None:
        live.grid(s.profile)
        report(1)

    # -- one cell's REM model up close (trained in the background) ---------------------------------------------------
    @preparation(on=("profile", "corruption", "rate", "seed_offset"), label="REM's model of the cell",
                 cached=lambda s: live.redirected.cached(s.profile, str(s.corruption), float(s.rate), s.seed_offset),
                 message="**Training REM** on {corruption} at discovery rate {rate}...")
    def model(self, s, report) -> None:
        live.redirected(s.profile, str(s.corruption), float(s.rate), s.seed_offset)
        report(1)

    def _cell(self) -> tuple[str, float]:
        return str(self.corruption), float(self.rate)

    def _follow(self, plot, on=CELL_PARAMS, needs=()) -> pn.pane.HoloViews:
        return follow(self, plot, on, needs)

    @built_once("profile", needs="grid")
    def grids(self):
        # one pane per heat map: a Bokeh grid of them loses their titles and detaches their colour bars; the heat
        # maps are drawn once, the chosen cell's outline follows the widgets
        ds = live.grid(self.profile)
        panes = [pn.pane.HoloViews(grid * self._follow(lambda: plots.selected_cell(*self._cell())).object)
                 for grid in plots.score_grids(ds).values()]
        return pn.Column(pn.pane.Markdown("Score (0-100) over the task space, the chosen cell outlined in red:"),
                         pn.GridBox(*panes, ncols=3))

    @built_once("profile", needs="grid")
    def summary(self):
        return pn.pane.HoloViews(plots.summary(live.grid(self.profile)))

    @built_once("profile", needs="grid")
    def cell(self):
        ds = live.grid(self.profile)
        return pn.Row(self._follow(lambda: plots.cell_accuracies(ds, *self._cell())),
                      self._follow(lambda: plots.absorbed(ds, *self._cell())))

    @built_once("profile", needs="model")
    def redirected(self):
        return self._follow(lambda: plots.redirected(live.redirected(self.profile, *self._cell(), self.seed_offset)),
                            on=(*CELL_PARAMS, "seed_offset"), needs=("model",))

    def main(self) -> list:
        return [self.grids, self.cell, self.redirected, self.summary]


class QgpmPanel(MethodPanel):
    """Pick a variant; see its accuracy matrix and every variant's basis memory against accuracy."""

    method = METHOD[1]
    title = "Continual learning: QGPM"
    intro = ("### QGPM\nTest accuracy on each task after training each task: quantised gradient projection memory "
             "(its basis memory against accuracy) beside GPM and fine-tuning.")
    controls = ("variant",)

    variant = param.Selector(default=None, objects=[None], label="QGPM variant",
                             doc="GPM, fine-tuning, or a quantised QGPM: whose accuracy matrix.")

    @param.depends("profile", watch=True, on_init=True)
    def _variants(self):
        variants = list(qgpm_live.variant_labels(self.profile))
        self.param.variant.objects = variants
        if self.variant not in variants:
            self.variant = variants[-1]

    @preparation(on=("profile", "variant"), label="QGPM's runs",
                 cached=lambda s: (qgpm_live.memory_vs_accuracy.cached(s.profile)
                                   and qgpm_live.accuracy_matrix.cached(s.profile, s.variant)),
                 message="**Training QGPM's variants** (first use; cached afterwards)...")
    def runs(self, s, report) -> None:
        qgpm_live.memory_vs_accuracy(s.profile)
        qgpm_live.accuracy_matrix(s.profile, s.variant)
        report(1)

    def _matrix(self) -> hv.HeatMap:
        R = qgpm_live.accuracy_matrix(self.profile, self.variant)
        return qgpm_plots.accuracy_matrix(R, title=f"QGPM {R.attrs['label']}: ACC {R.attrs['acc']:.1f}%")

    @built_once("profile", needs="runs")
    def matrix(self):
        # the chosen variant's matrix follows the widget; the memory plot shows every variant and stays
        return pn.Row(follow(self, self._matrix, ("variant",), needs=("runs",)),
                      pn.pane.HoloViews(qgpm_plots.memory_vs_accuracy(qgpm_live.memory_vs_accuracy(self.profile))))

    def main(self) -> list:
        return [self.matrix]


class WscPanel(MethodPanel):
    """Pick a variant; see its accuracy matrix on the task stream."""

    method = METHOD[2]
    title = "Continual learning: Weight Space Consolidation"
    intro = ("### Weight Space Consolidation\nReplay with rank-based resets of dormant units and weight averaging: "
             "test accuracy on each task after training each task.")
    controls = ("variant",)

    variant = param.Selector(default="wsc", objects=list(wsc_live.VARIANT_NAMES), label="WSC variant",
                             doc="Replay, reset, averaging (swa) or both (wsc), and the ablations on WSC's schedule "
                                 "(wsc_noavg: no averaging; wsc_official: the official code's no-op reset; "
                                 "replay_rewarm: the re-warm alone): whose accuracy matrix.")

    @preparation(on=("profile", "variant"), label="the WSC stream",
                 cached=lambda s: wsc_live.accuracy_matrix.cached(s.profile, s.variant),
                 message="**Training the WSC stream** (first use; cached afterwards)...")
    def stream(self, s, report) -> None:
        wsc_live.accuracy_matrix(s.profile, s.variant)
        report(1)

    def _matrix(self) -> hv.Overlay:
        R = wsc_live.accuracy_matrix(self.profile, self.variant)
        return wsc_plots.accuracy_matrix(
            R, title=f"WSC {self.variant}: accuracy matrix, ACC {R.attrs['acc']:.1f}%, BWT {R.attrs['bwt']:.1f}"
        ).opts(width=540)  # room for the title

    @built_once("profile", needs="stream")
    def matrix(self):
        return follow(self, self._matrix, ("variant",), needs=("stream",))

    def main(self) -> list:
        return [self.matrix]


class Dashboard(MethodDashboard):
    """REM's task space over QGPM's and WSC's accuracy matrices."""

    title = "Forgetting: REM's unlearning and continual learning's accuracy matrices"
    panel_types = (RemPanel, QgpmPanel, WscPanel)


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
