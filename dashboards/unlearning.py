"""Unlearning dashboard: REM's task space (discovery rate x regularity of the corruption) with every method's score
as a heat map; a chosen cell's accuracies before and after unlearning and what REM's extra units absorbed; and, for
the continual-learning methods, QGPM's accuracy matrix and basis memory against accuracy, and Weight Space
Consolidation's accuracy matrix."""

from __future__ import annotations

import panel as pn
import param

from dashboards.viewer import BackgroundJob, MethodViewer
from lab.methods.qgpm import live as qgpm_live
from lab.methods.qgpm import plots as qgpm_plots
from lab.methods.rem import live, plots
from lab.methods.wsc import live as wsc_live
from lab.methods.wsc import plots as wsc_plots

METHOD = ("rem", "qgpm", "wsc")
TITLE = "Unlearning and keeping: REM's task space, continual learning's accuracy matrices"


class Dashboard(MethodViewer):
    """Pick a cell of the task space; see each method's score there, the accuracies before and after, and where
    REM's redirected units took the corrupted examples."""

    method = METHOD[0]
    title = "Unlearning: REM over the space of corrupted-data tasks"
    intro = ("### REM\nPart of the training data is corrupted (random labels, class-pair flips, a backdoor) and only "
             "a share of it is known. REM redirects the known corrupted data into extra units, pushes the base "
             "units away with NPO, fine-tunes with example-tied masks and discards the extra units. Score: Utility "
             "(test accuracy) x Healed (accuracy on the corrupted data w.r.t. the true labels).")

    corruption = param.Selector(default=None, objects=[None], doc="Corruption of the cell (regularity axis).")
    rate = param.Selector(default=None, objects=[None], label="discovery rate",
                          doc="Share of the corrupted data known at unlearning time.")
    seed_offset = param.Integer(default=0, bounds=(0, 9), label="REM seed",
                                doc="Seed of the REM model examined up close (the profile's seed plus this).")
    wsc_variant = param.Selector(default="wsc", objects=list(wsc_live.VARIANT_NAMES), label="WSC variant",
                                 doc="Replay, reset, averaging (swa) or both (wsc): whose accuracy matrix.")
    wsc_version = param.Integer(default=0, precedence=-1, doc="Bumped when a WSC matrix is ready.")
    qgpm_variant = param.Selector(default=None, objects=[None], label="QGPM variant",
                                  doc="GPM, fine-tuning, or a quantised QGPM: whose accuracy matrix.")
    qgpm_version = param.Integer(default=0, precedence=-1, doc="Bumped when QGPM's runs are ready.")

    def __init__(self, **params):
        super().__init__(**params)
        self.wsc_job = BackgroundJob()
        self._wsc_ready: set = set()
        self.qgpm_job = BackgroundJob()
        self._qgpm_ready: set = set()
        self._grid_axes()
        self.param.watch(lambda *_: self._wsc_ensure(), ["profile", "wsc_variant"])
        self.param.watch(lambda *_: self._qgpm_ensure(), ["profile", "qgpm_variant"])
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._wsc_ensure)
            pn.state.onload(self._qgpm_ensure)
        else:
            self._wsc_ensure()
            self._qgpm_ensure()

    @param.depends("profile", watch=True)
    def _grid_axes(self):
        cfg = self.config
        self.param.corruption.objects = list(cfg.corruptions)
        self.param.rate.objects = list(cfg.discovery_rates)
        if self.corruption not in cfg.corruptions:
            self.corruption = cfg.corruptions[-1]
        if self.rate not in cfg.discovery_rates:
            self.rate = cfg.discovery_rates[0]
        variants = list(qgpm_live.variant_labels(self.profile))
        self.param.qgpm_variant.objects = variants
        if self.qgpm_variant not in variants:
            self.qgpm_variant = variants[-1]

    # -- REM's grid: the profile's run, computed once in the background (then cached on disk) ----------------------
    def is_prepared(self) -> bool:
        return live.grid.cached(self.profile)

    def prepare(self, report) -> None:
        live.grid(self.profile)
        report(1)

    def describe_progress(self, info: dict) -> str:
        return "**Running REM's grid** (every corruption, discovery rate and method; first use, then cached)..."

    def _cell(self) -> tuple[str, float]:
        return str(self.corruption), float(self.rate)

    @param.depends("corruption", "rate", "profile", "version")
    @MethodViewer.when_ready
    def grids(self):
        return pn.pane.HoloViews(plots.score_grids(live.grid(self.profile), selected=self._cell()))

    @param.depends("profile", "version")
    @MethodViewer.when_ready
    def summary(self):
        return pn.pane.HoloViews(plots.summary(live.grid(self.profile)))

    @param.depends("corruption", "rate", "profile", "version")
    @MethodViewer.when_ready
    def cell(self):
        ds = live.grid(self.profile)
        return pn.Row(pn.pane.HoloViews(plots.cell_accuracies(ds, *self._cell())),
                      pn.pane.HoloViews(plots.absorbed(ds, *self._cell())))

    @param.depends("corruption", "rate", "seed_offset", "profile", "version")
    @MethodViewer.when_ready
    def redirected(self):
        info = live.redirected(self.profile, *self._cell(), self.seed_offset)
        return pn.pane.HoloViews(plots.redirected(info))

    # -- Weight Space Consolidation: one variant's accuracy matrix, trained in a second job on first use ----------
    def _wsc_key(self):
        return (self.profile, self.wsc_variant)

    def _wsc_ensure(self) -> None:
        key = self._wsc_key()
        if key in self._wsc_ready or self.wsc_job.running:
            return

        def work(report):
            wsc_live.accuracy_matrix(*key)
            self._wsc_ready.add(key)
            report(1)

        def done():
            self.wsc_job.clear()
            self.wsc_version += 1
            self._wsc_ensure()  # the settings may have changed meanwhile

        self.wsc_job.start(work, total=1, message="**Training the WSC stream** (first use; cached afterwards)...",
                           describe=None, on_done=done, name="wsc-prepare")

    @param.depends("wsc_variant", "profile", "wsc_version")
    def wsc(self):
        key = self._wsc_key()
        if key not in self._wsc_ready or self.wsc_job.running:
            return pn.pane.Markdown("*waiting for the WSC stream...*")
        R = wsc_live.accuracy_matrix(*key)
        return pn.pane.HoloViews(wsc_plots.accuracy_matrix(
            R, title=f"WSC {key[1]}: accuracy matrix (ACC {R.attrs['acc']:.1f}%, BWT {R.attrs['bwt']:.1f})"))

    # -- QGPM: every variant's run (basis memory against accuracy), trained in a third job on first use -----------
    def _qgpm_ensure(self) -> None:
        key = (self.profile, self.qgpm_variant)
        if key in self._qgpm_ready or self.qgpm_job.running:
            return

        def work(report):
            qgpm_live.memory_vs_accuracy(key[0])
            qgpm_live.accuracy_matrix(*key)
            self._qgpm_ready.add(key)
            report(1)

        def done():
            self.qgpm_job.clear()
            self.qgpm_version += 1
            self._qgpm_ensure()

        self.qgpm_job.start(work, total=1, message="**Training QGPM's variants** (first use; cached afterwards)...",
                            describe=None, on_done=done, name="qgpm-prepare")

    @param.depends("qgpm_variant", "profile", "qgpm_version")
    def qgpm(self):
        key = (self.profile, self.qgpm_variant)
        if key not in self._qgpm_ready or self.qgpm_job.running:
            return pn.pane.Markdown("*waiting for QGPM's runs...*")
        R = qgpm_live.accuracy_matrix(*key)
        return pn.Row(pn.pane.HoloViews(qgpm_plots.accuracy_matrix(
                          R, title=f"QGPM {R.attrs['label']}: accuracy matrix (ACC {R.attrs['acc']:.1f}%)")),
                      pn.pane.HoloViews(qgpm_plots.memory_vs_accuracy(qgpm_live.memory_vs_accuracy(key[0]))))

    def __panel__(self):
        widgets = self.widgets(("corruption", "rate", "seed_offset", "profile"))
        cont = pn.pane.Markdown("### Continual learning\nTest accuracy on each task after training each task: QGPM "
                                "(quantised gradient projection memory; its basis memory against accuracy) and "
                                "Weight Space Consolidation (replay with rank-based resets and weight averaging).")
        return self.layout(sidebar=[widgets, cont, self.widgets(("qgpm_variant", "wsc_variant"))],
                           main=[self.grids, self.cell, self.redirected, self.summary, pn.layout.Divider(),
                                 self.qgpm_job.status, self.qgpm_job.progress, self.qgpm,
                                 self.wsc_job.status, self.wsc_job.progress, self.wsc])


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
