"""Hopfield dashboard: dense associative memory convergence, simulated against the signal-to-noise theory."""

from __future__ import annotations

import panel as pn
import param

from dashboards._layout import dashboard_layout
from lab.methods.dam.experiment import explore
from lab.viz import dam as viz

TITLE = "Hopfield: dense associative memory against theory"

#: Largest load offered per order.
ALPHA_MAX = {2: 0.3, 3: 0.12, 4: 0.02}
#: Largest pattern matrix P * N offered: an answer within about a second on a laptop (n = 2 up to N = 1000 at any
#: load; n = 3 up to alpha 0.12 at N = 280, alpha 0.01 at N = 1000).
MAX_PN = 1e7


def alpha_max(n: int, N: int) -> float:
    return min(ALPHA_MAX[n], MAX_PN / N**n)


@pn.cache(max_items=64)
def _explore(n, N, alpha, m0, trials, update, seed):
    return explore(n=n, N=N, alpha=alpha, m0=m0, trials=trials, update=update, seed=seed)


class HopfieldDashboard(pn.viewable.Viewer):
    """Slide n, N, alpha, m0, trials and the update rule; see m(t), convergence time and the basin edge."""

    n = param.Selector(default=3, objects=[2, 3, 4], doc="Order of F(x) = x^n.")
    N = param.Integer(default=256, bounds=(64, 1000), step=8, doc="Number of spins.")
    alpha = param.Number(default=0.04, bounds=(0.002, 0.3), step=0.002, doc="Load P / N^(n-1).")
    m0 = param.Number(default=0.6, bounds=(0.05, 1.0), step=0.05, doc="Initial overlap with pattern 1.")
    trials = param.Integer(default=5, bounds=(1, 20), doc="Independent networks and initial states.")
    update = param.Selector(default="sync", objects=["sync", "async"], doc="Synchronous or asynchronous sweeps.")
    seed = param.Integer(default=0, bounds=(0, 10_000), doc="Random seed.")

    def __init__(self, **params):
        super().__init__(**params)
        self._clip_alpha()

    @param.depends("n", "N", watch=True)
    def _clip_alpha(self):
        hi = alpha_max(self.n, self.N)
        self.param.alpha.bounds = (hi / 150, hi)
        self.param.alpha.step = hi / 150
        if self.alpha > hi:
            self.alpha = hi / 2

    def _result(self):
        return _explore(self.n, self.N, round(self.alpha, 6), round(self.m0, 4), self.trials, self.update,
                        self.seed)

    @param.depends("n", "N", "alpha", "m0", "trials", "update", "seed")
    def trajectories(self):
        return pn.pane.HoloViews(viz.explore_trajectories(self._result()), sizing_mode="stretch_width")

    @param.depends("n", "N", "alpha", "m0", "trials", "update", "seed")
    def convergence(self):
        return pn.pane.HoloViews(viz.explore_convergence(self._result()), sizing_mode="stretch_width")

    @param.depends("n", "N", "alpha", "m0", "trials", "update", "seed")
    def basin(self):
        ds = self._result()
        return pn.pane.HoloViews(viz.basin_edge_theory(self.n, self.alpha, ds.attrs["basin_edge"],
                                                       alpha_max(self.n, self.N)), sizing_mode="stretch_width")

    @param.depends("n", "N", "alpha", "m0", "trials", "update", "seed")
    def summary(self):
        ds = self._result()
        edge, edge_th = ds.attrs["basin_edge"], ds.attrs["basin_edge_theory"]
        return pn.pane.Markdown(
            f"**P = {ds.attrs['P']}** patterns. Basin edge: simulated **{edge:.2f}**, theory m_u = "
            f"**{edge_th:.2f}** (NaN: none; for n >= 3 above the critical load every start decays)."
        )

    def __panel__(self):
        widgets = pn.Param(
            self.param,
            parameters=["n", "N", "alpha", "m0", "trials", "update", "seed"],
            widgets={"n": pn.widgets.RadioButtonGroup, "update": pn.widgets.RadioButtonGroup,
                     "alpha": {"type": pn.widgets.FloatSlider, "format": "0.000"}},
            show_name=False,
        )
        intro = pn.pane.Markdown(
            "### Dense associative memory\nEnergy -Σ F(ξ·σ), F(x) = x^n, exact synchronous update. Dashed: the "
            "memoryless recursion m' = erf(m^(n-1) / sqrt(2α(2n-3)!!)).\n\nPaper: arXiv:2506.00851."
        )
        return dashboard_layout(
            "Hopfield: dense associative memory",
            sidebar=[intro, widgets],
            main=[self.summary, pn.Row(self.trajectories, self.convergence), self.basin],
        )


Dashboard = HopfieldDashboard


def app():
    return HopfieldDashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
