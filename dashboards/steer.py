"""STEER dashboard: plasticity coefficients over sessions, the inferred update equation, connectivity and activity."""

from __future__ import annotations

import os

import panel as pn
import param

from dashboards._layout import dashboard_layout
from lab.datasets.plasticity import BENCHMARKS
from lab.methods.steer.config import Config
from lab.methods.steer.explore import explore
from lab.viz import steer as viz

TITLE = "STEER: plasticity rules under long-term stimulation"

#: schedules offered (the training schedule is 'random')
PATTERNS = ["periodic", "ramp", "burst", "constant", "silent", "random"]
#: environment variable choosing the default fit settings ('ci' gives second-long fits; the browser tests use it)
PROFILE_ENV = "LAB_DASHBOARD_PROFILE"


@pn.cache(max_items=64)
def _explore(benchmark, pattern, amplitude, period, start, session, profile, seed):
    return explore(benchmark, pattern=pattern, amplitude=amplitude, period=period, start=start, session=session,
                   profile=profile, seed=seed)


def _sessions(profile: str) -> tuple[int, int]:
    cfg = Config.from_profile(profile)
    return cfg.K_train, cfg.K_test


class SteerDashboard(pn.viewable.Viewer):
    """Choose a benchmark and an unseen stimulation schedule; see what STEER infers and predicts."""

    benchmark = param.Selector(default="lowrank_linear", objects=list(BENCHMARKS), doc="Benchmark with known truth.")
    pattern = param.Selector(default="periodic", objects=PATTERNS, doc="Unseen stimulation schedule after training.")
    amplitude = param.Number(default=1.0, bounds=(0.0, 1.5), step=0.05,
                             doc="Stimulation level of the schedule (training used levels in [0, 1]).")
    period = param.Integer(default=3, bounds=(1, 10), doc="Block length (sessions) of 'periodic' and 'burst'.")
    start = param.Integer(default=0, bounds=(0, 20), doc="Session (after training) at which the schedule starts.")
    session = param.Integer(default=0, bounds=(0, 1), doc="Session whose connectivity and activity are shown.")
    profile = param.Selector(default="quick", objects=["quick", "ci"],
                             doc="Fit settings: quick (the notebook's; the first fit takes a while, then it is "
                                 "cached) or ci (seconds, rough).")
    seed = param.Integer(default=0, bounds=(0, 1000), doc="Seed of the benchmark and of the fit.")

    def __init__(self, **params):
        if os.environ.get(PROFILE_ENV) in ("quick", "ci"):
            params.setdefault("profile", os.environ[PROFILE_ENV])
        super().__init__(**params)
        self._bounds()

    @param.depends("profile", watch=True)
    def _bounds(self):
        K_train, K_test = _sessions(self.profile)
        self.param.session.bounds = (0, K_train + K_test - 1)
        self.param.start.bounds = (0, K_test - 1)
        self.session = K_train + K_test - 1 if self.session == 0 else min(self.session, K_train + K_test - 1)
        self.start = min(self.start, K_test - 1)

    def _result(self):
        return _explore(self.benchmark, self.pattern, round(self.amplitude, 4), self.period, self.start,
                        self.session, self.profile, self.seed)

    # one HoloViews element per pane: replacing a pane that holds an hv.Layout stalls the page's updates
    @param.depends("benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed")
    def coefficients(self):
        ex = self._result()
        return pn.Column(pn.pane.HoloViews(viz.explore_coefficients(ex)), pn.pane.HoloViews(viz.explore_schedule(ex)))

    @param.depends("benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed")
    def connectivity(self):
        ex = self._result()
        return pn.Row(pn.pane.HoloViews(viz.explore_connectivity(ex, "true")),
                      pn.pane.HoloViews(viz.explore_connectivity(ex, "model")))

    @param.depends("benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed")
    def activity(self):
        return pn.pane.HoloViews(viz.explore_activity(self._result()))

    @param.depends("benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed")
    def equations(self):
        ex = self._result()
        inferred = "<br>".join(ex.attrs["equation_inferred"].split(" ; "))
        true = "<br>".join(ex.attrs["equation_true"].split(" ; "))
        note = ("aligned to the true factors (sign, order)" if ex.attrs["alignment"] == "factors" else
                "in units of rho (affine alignment)" if ex.attrs["alignment"] == "affine" else
                "in the model's own coordinates")
        phase = "training" if int(ex.attrs["session_shown"]) < int(ex.attrs["K_train"]) else "predicted"
        return pn.pane.Markdown(
            f"**Inferred update equation** ({note}):<br>{inferred}<br><br>**True rule:**<br>{true}<br><br>"
            f"Session {ex.attrs['session_shown']} ({phase}); within-session R² {ex.attrs['r2_session']:.3f}.",
            sizing_mode="stretch_width",
        )

    def __panel__(self):
        widgets = pn.Param(
            self.param,
            parameters=["benchmark", "pattern", "amplitude", "period", "start", "session", "profile", "seed"],
            widgets={"session": {"type": pn.widgets.IntSlider}, "amplitude": {"type": pn.widgets.FloatSlider}},
            show_name=False,
        )
        intro = pn.pane.Markdown(
            "### STEER\nFast dynamics x' = x + dt(-x + W_k φ(x) + B u), W_k = W_0 + Σ c_k,r m_r n_rᵀ; slow law "
            "c_{k+1} = g(c_k, ū_k) written over the library [1, c, ū, c·ū, c²].\n\nPaper: arXiv:2603.00213."
        )
        return dashboard_layout(
            "STEER: plasticity under stimulation",
            sidebar=[intro, widgets],
            main=[self.equations, self.coefficients, self.connectivity, self.activity],
        )


Dashboard = SteerDashboard


def app():
    return SteerDashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
