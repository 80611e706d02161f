"""STEER dashboard: plasticity coefficients over sessions, the inferred update equation, connectivity and activity.

The figures follow the schedule and the session in place (DynamicMaps: their data change, the figures stay; issue
43); a benchmark, seed or profile (another fit, other components) draws them anew."""

from __future__ import annotations

import panel as pn
import param

from dashboards.forgetting import built_once, follow
from dashboards.panels import MethodPanel, field_param, preparation, view
from lab.methods.steer import live, plots
from lab.methods.steer.config import Config

METHOD = "steer"
TITLE = "STEER: plasticity rules under long-term stimulation"
DESCRIPTION = "STEER's plasticity coefficients under an unseen stimulation; the inferred update law"

#: schedules offered after training (the training schedule is 'random')
PATTERNS = ["periodic", "ramp", "burst", "constant", "silent", "random"]
VIEW_PARAMS = ("benchmark", "pattern", "amplitude", "period", "start", "session", "seed", "profile")
#: what the figures follow in place; the others (a new fit) draw them anew
FOLLOWED = ("pattern", "amplitude", "period", "start", "session")
FIT_PARAMS = ("profile", "benchmark", "seed")


class Dashboard(MethodPanel):
    """Choose a benchmark and an unseen stimulation schedule; see what STEER infers and predicts."""

    method = METHOD
    title = "STEER: plasticity under stimulation"
    intro = ("### STEER\nFast dynamics x' = x + dt(-x + W_k φ(x) + B u), W_k = W_0 + Σ c_k,r m_r n_rᵀ; slow law "
             "c_{k+1} = g(c_k, ū_k) written over the library [1, c, ū, c·ū, c²].")
    controls = ("benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed")
    widget_options = {"session": {"type": pn.widgets.IntSlider}, "amplitude": {"type": pn.widgets.FloatSlider}}

    benchmark = param.Selector(default="lowrank_linear", objects=list(live.BENCHMARKS),
                               doc="Benchmark with known truth (lab.datasets.plasticity).")
    pattern = param.Selector(default="periodic", objects=PATTERNS, doc="Unseen stimulation schedule after training.")
    amplitude = param.Number(default=1.0, bounds=(0.0, 1.5), step=0.05,
                             doc="Stimulation level of the schedule (training used levels in [0, u_max = 1]).")
    period = field_param(Config, "test_period", bounds=(1, 10), label="Period")
    start = param.Integer(default=0, bounds=(0, 20), doc="Session (after training) at which the schedule starts.")
    session = param.Integer(default=0, bounds=(0, 1), doc="Session whose connectivity and activity are shown.")
    seed = field_param(Config, "seed", bounds=(0, 1000))

    # -- preparation: the fit of the chosen benchmark (seconds at ci, longer at quick; then cached) ------------------
    @preparation(on=("profile", "benchmark", "seed"), label="STEER's fit",
                 cached=lambda s: live.fitted_model.cached(s.benchmark, Config.from_profile(s.profile, seed=s.seed),
                                                           None),
                 message="**Fitting STEER** on {benchmark} (first use; cached on disk afterwards)...")
    def fit(self, s, report) -> None:
        live.fitted_model(s.benchmark, Config.from_profile(s.profile, seed=s.seed), None)
        report(1)

    def fit_config(self) -> Config:
        return Config.from_profile(self.profile, seed=self.seed)

    @param.depends("profile", watch=True, on_init=True)
    def _bounds(self):
        cfg = self.fit_config()
        last = cfg.K_train + cfg.K_test - 1
        self.param.session.bounds = (0, last)
        self.param.start.bounds = (0, cfg.K_test - 1)
        self.session = last if self.session == 0 else min(self.session, last)
        self.start = min(self.start, cfg.K_test - 1)

    def result(self):
        """The memoised view of the fit under the chosen schedule."""
        return live.explore(self.benchmark, pattern=self.pattern, amplitude=round(self.amplitude, 4),
                            period=self.period, start=self.start, session=self.session, profile=self.profile,
                            seed=self.seed)

    def _follow(self, plot) -> pn.pane.HoloViews:
        return follow(self, lambda: plot(self.result()), FOLLOWED)

    # one HoloViews element per pane: replacing a pane that holds an hv.Layout stalls the page's updates
    @built_once(*FIT_PARAMS, needs="fit")
    def coefficients(self):
        return pn.Column(self._follow(plots.explore_coefficients), self._follow(plots.explore_schedule))

    @built_once(*FIT_PARAMS, needs="fit")
    def connectivity(self):
        return pn.Row(self._follow(lambda ex: plots.explore_connectivity(ex, "true")),
                      self._follow(lambda ex: plots.explore_connectivity(ex, "model")))

    @built_once(*FIT_PARAMS, needs="fit")
    def activity(self):
        return self._follow(plots.explore_activity)

    @view(*VIEW_PARAMS, needs="fit")
    def equations(self):
        return pn.pane.Markdown(plots.explore_equations(self.result()), sizing_mode="stretch_width")

    def main(self) -> list:
        return [self.equations, self.coefficients, self.connectivity, self.activity]


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
