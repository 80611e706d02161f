"""Hopfield dashboard: dense associative memory convergence, simulated against the signal-to-noise theory."""

from __future__ import annotations

import holoviews as hv
import panel as pn
import param

from dashboards.panels import MethodPanel, field_param
from lab.methods.dam import live, plots
from lab.methods.dam.config import Config

METHOD = "dam"
TITLE = "Hopfield: dense associative memory against theory"
DESCRIPTION = "Dense associative memory: overlap, convergence and basin edge against theory"

#: Largest load offered per order.
ALPHA_MAX = {2: 0.3, 3: 0.12, 4: 0.02}
#: Largest pattern matrix P * N offered: an answer within about a second on a laptop (n = 2 up to N = 1000 at any
#: load; n = 3 up to alpha 0.12 at N = 280, alpha 0.01 at N = 1000).
MAX_PN = 1e7
VIEW_PARAMS = ("n", "N", "alpha", "m0", "trials", "update", "seed")


def alpha_max(n: int, N: int) -> float:
    """The largest load offered for order n at N spins (keeps P * N <= MAX_PN)."""
    return min(ALPHA_MAX[n], MAX_PN / N**n)


class Dashboard(MethodPanel):
    """Slide n, N, alpha, m0, trials and the update rule; see m(t), convergence time and the basin edge."""

    method = METHOD
    title = "Hopfield: dense associative memory"
    intro = ("### Dense associative memory\nEnergy -Σ F(ξ·σ), F(x) = x^n, exact update. Dashed: the memoryless "
             "recursion m' = erf(m^(n-1) / sqrt(2α(2n-3)!!)).")
    controls = VIEW_PARAMS
    widget_options = {"n": pn.widgets.RadioButtonGroup, "update": pn.widgets.RadioButtonGroup,
                      "alpha": {"type": pn.widgets.FloatSlider, "format": "0.000"}}

    # sentence case; symbols stay symbols (n, N, α, m0)
    n = field_param(Config, "n", objects=[2, 3, 4], label="n (interaction order)")
    N = field_param(Config, "N", default=256, bounds=(64, 1000), step=8, label="N (spins)")
    alpha = param.Number(default=0.04, bounds=(0.002, 0.3), step=0.002, doc="Load P / N^(n-1).",
                         label="α (load P / N^(n-1))")
    m0 = param.Number(default=0.6, bounds=(0.05, 1.0), step=0.05, doc="Initial overlap with pattern 1.",
                      label="m0 (initial overlap)")
    trials = field_param(Config, "trials", default=5, bounds=(1, 20))
    update = field_param(Config, "update", label="Update rule")
    seed = field_param(Config, "seed", bounds=(0, 10_000))

    @param.depends("n", "N", watch=True, on_init=True)
    def _clip_alpha(self):
        hi = alpha_max(self.n, self.N)
        self.param.alpha.bounds = (hi / 150, hi)
        self.param.alpha.step = hi / 150
        if self.alpha > hi:
            self.alpha = hi / 2

    def result(self):
        """The memoised small experiment at the current settings."""
        return live.explore(n=self.n, N=self.N, alpha=round(self.alpha, 6), m0=round(self.m0, 4),
                            trials=self.trials, update=self.update, seed=self.seed)

    def trajectories(self):
        """m(t) of every trial from the chosen m0, their mean and the recursion."""
        return plots.explore_trajectories(self.result())

    def convergence(self):
        """Convergence time against m0: simulation and recursion."""
        return plots.explore_convergence(self.result())

    def basin(self):
        """The recursion's basin edge over loads, the simulated edge at the chosen load."""
        return plots.basin_edge_theory(self.n, self.alpha, self.result().attrs["basin_edge"],
                                       alpha_max(self.n, self.N))

    def _follows(self, plot) -> pn.pane.HoloViews:
        """``plot()`` as a figure that follows the widgets by updating its data in place (a DynamicMap on the view
        parameters; the plots' elements rescale their axes per frame) rather than being rebuilt: the slider's
        answer within about a second."""
        dmap = hv.DynamicMap(lambda **_: plot(), streams=[hv.streams.Params(self, list(VIEW_PARAMS))])
        return pn.pane.HoloViews(dmap, sizing_mode="stretch_width")

    @param.depends(*VIEW_PARAMS)
    def summary(self):
        ds = self.result()
        edge, edge_th = ds.attrs["basin_edge"], ds.attrs["basin_edge_theory"]
        return pn.pane.Markdown(
            f"**P = {ds.attrs['P']}** patterns. Basin edge: simulated **{edge:.2f}**, theory m_u = "
            f"**{edge_th:.2f}** (NaN: no basin; for n >= 3 above the critical load every start decays)."
        )

    def main(self) -> list:
        return [self.summary, pn.Row(self._follows(self.trajectories), self._follows(self.convergence)),
                self._follows(self.basin)]


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
