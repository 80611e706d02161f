"""Arena dashboard: every architecture of the lab on every task, at a chosen test length; one cell's accuracy against
length over seeds; inference state against accuracy; theory's prediction beside each cell."""

from __future__ import annotations

import panel as pn
import param

from dashboards.panels import MethodPanel, preparation, view
from lab.methods.arena import live, plots
from lab.methods.arena.config import Config

METHOD = "arena"
TITLE = "The sequence-model arena: every architecture on the same tasks, lengths and budgets"
DESCRIPTION = "Every sequence model of the lab on state tracking, recall and formal languages, tested to 8x length"

_QUICK = Config()


class Dashboard(MethodPanel):
    """Choose a test length and a cell (task, model); see the heat map, the cell's curve and theory's prediction."""

    method = METHOD
    title = "Arena: every architecture on the same tasks"
    intro = ("### The arena\nEvery model at one parameter budget, trained at one length and tested at several. The "
             "heat map reads the positions beyond the training length (all positions at 1x); each cell says what "
             "theory predicts at every length (yes / no / ?).")
    controls = ("factor", "task", "model", "profile")
    widget_options = {"factor": pn.widgets.RadioButtonGroup}

    factor = param.Selector(default=_QUICK.claim_factor, objects=list(_QUICK.test_factors),
                            label="Test length / training length", doc="The heat map's test length.")
    task = param.Selector(default=_QUICK.tasks[0], objects=list(_QUICK.tasks), doc="The cell's task.")
    model = param.Selector(default="gla_neg", objects=list(_QUICK.models), doc="The cell's architecture.")

    @param.depends("profile", watch=True, on_init=True)
    def _axes(self):
        cfg = self.config
        self.param.factor.objects = list(cfg.test_factors)
        self.param.task.objects = list(cfg.tasks)
        self.param.model.objects = list(cfg.models)
        if self.factor not in cfg.test_factors:
            self.factor = cfg.claim_factor
        if self.task not in cfg.tasks:
            self.task = cfg.tasks[0]
        if self.model not in cfg.models:
            self.model = cfg.models[0]

    @preparation(on=("profile",), label="the arena's grid", cached=lambda s: live.grid.cached(s.profile),
                 message="**Running the arena** (every model, task and seed; first use, then cached)...")
    def grid(self, s, report) -> None:
        live.grid(s.profile)
        report(1)

    @view("factor", "profile", needs="grid")
    def heat(self):
        return pn.pane.HoloViews(plots.heatmap(live.grid(self.profile), int(self.factor), width=960, height=360))

    @view("task", "model", "profile", needs="grid")
    def theory(self):
        return pn.pane.Markdown(live.theory_text(self.model, self.task), sizing_mode="stretch_width")

    @view("task", "model", "profile", needs="grid")
    def cell(self):
        return pn.pane.HoloViews(plots.length_curve(live.grid(self.profile), self.task, [self.model], width=500))

    @view("task", "profile", needs="grid")
    def state(self):
        return pn.pane.HoloViews(plots.state_vs_accuracy(live.grid(self.profile), self.task, width=500))

    def main(self) -> list:
        return [self.heat, self.theory, pn.Row(self.cell, self.state)]


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
