"""Forgetting dashboard: what unlearning erases and what continual learning keeps. REM's task space (discovery rate x
regularity of the corruption) with every method's score as a heat map, a chosen cell's accuracies before and after
unlearning and what REM's extra units absorbed; QGPM's accuracy matrix and basis memory against accuracy; Weight
Space Consolidation's accuracy matrix."""

from __future__ import annotations

import panel as pn
import param

from dashboards.panels import MethodDashboard, MethodPanel, preparation, view
from lab.methods.qgpm import live as qgpm_live
from lab.methods.qgpm import plots as qgpm_plots
from lab.methods.rem import live, plots
from lab.methods.wsc import live as wsc_live
from lab.methods.wsc import plots as wsc_plots

METHOD = ("rem", "qgpm", "wsc")
TITLE = "Forgetting: REM's unlearning task space, continual learning's accuracy matrices (QGPM, WSC)"
DESCRIPTION = "REM unlearns corrupted data; QGPM and WSC learn task after task without forgetting"

CELL_PARAMS = ("corruption", "rate", "profile")


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

    @view(*CELL_PARAMS, needs="grid")
    def grids(self):
        # one pane per heat map: a Bokeh grid of them loses their titles and detaches their colour bars
        grids = plots.score_grids(live.grid(self.profile), selected=self._cell())
        return pn.Column(pn.pane.Markdown("Score (0-100) over the task space, the chosen cell outlined in red:"),
                         pn.GridBox(*(pn.pane.HoloViews(p) for p in grids), ncols=3))

    @view("profile", needs="grid")
    def summary(self):
        return pn.pane.HoloViews(plots.summary(live.grid(self.profile)))

    @view(*CELL_PARAMS, needs="grid")
    def cell(self):
        ds = live.grid(self.profile)
        return pn.Row(pn.pane.HoloViews(plots.cell_accuracies(ds, *self._cell())),
                      pn.pane.HoloViews(plots.absorbed(ds, *self._cell())))

    @view(*CELL_PARAMS, "seed_offset", needs="model")
    def redirected(self):
        info = live.redirected(self.profile, *self._cell(), self.seed_offset)
        return pn.pane.HoloViews(plots.redirected(info))

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

    @view("variant", "profile", needs="runs")
    def matrix(self):
        R = qgpm_live.accuracy_matrix(self.profile, self.variant)
        return pn.Row(pn.pane.HoloViews(qgpm_plots.accuracy_matrix(
                          R, title=f"QGPM {R.attrs['label']}: ACC {R.attrs['acc']:.1f}%")),
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

    @view("variant", "profile", needs="stream")
    def matrix(self):
        R = wsc_live.accuracy_matrix(self.profile, self.variant)
        return pn.pane.HoloViews(wsc_plots.accuracy_matrix(
            R, title=f"WSC {self.variant}: accuracy matrix, ACC {R.attrs['acc']:.1f}%, BWT {R.attrs['bwt']:.1f}"
        ).opts(width=540))  # room for the title

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
