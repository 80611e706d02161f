"""RecurrSim dashboard: slide the recurrent depth K of a neural PDE simulator, watch its rollout against the solver.

Weights come from the method's cache (``data/recurrsim/``); a model that is not there yet is trained in a background
thread on first use, with a progress bar. Settings follow the method's ``quick`` profile (the environment variable
``LAB_RECURRSIM_DASHBOARD_PROFILE`` can switch the default to ``ci``, as the browser tests do).
"""

from __future__ import annotations

import os

import holoviews as hv
import numpy as np
import panel as pn
import param

from dashboards._layout import BackgroundJob, dashboard_layout
from lab.methods.recurrsim import experiment, training
from lab.methods.recurrsim.config import MODELS, Config
from lab.viz import recurrsim as viz

TITLE = "RecurrSim: test-time depth K of a neural PDE simulator"
PROFILE_ENV = "LAB_RECURRSIM_DASHBOARD_PROFILE"
PROFILES = ("quick", "ci")
EQUATION_LABELS = {"Burgers": "burgers", "KdV": "kdv", "Kuramoto-Sivashinsky": "ks",
                   "2-D Navier-Stokes": "navier_stokes"}
MODEL_LABELS = {viz.MODEL_STYLE[m]["label"]: m for m in MODELS}


def _default_profile() -> str:
    value = os.environ.get(PROFILE_ENV, "quick")
    if value not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={value!r} is not allowed; allowed: {', '.join(PROFILES)}")
    return value


def _config(profile: str) -> Config:
    return Config.from_profile(profile)


@pn.cache(max_items=256)
def _simulate(profile: str, equation: str, ic: int, K: int, model: str):
    return experiment.simulate(_config(profile), equation, ic, K, model)


@pn.cache(max_items=64)
def _sweep(profile: str, equation: str, ic: int, model: str):
    return experiment.depth_sweep(_config(profile), equation, ic, model)


def _ready(profile: str, equation: str, model: str) -> bool:
    cfg = _config(profile)
    return str(training.weights_path(cfg, equation, model)) in experiment._MODELS or training.is_cached(
        cfg, equation, model)


class RecurrSimDashboard(pn.viewable.Viewer):
    """Pick an equation, an initial condition and a model; slide K; play the rollout against the solver."""

    equation = param.Selector(default="burgers", objects=EQUATION_LABELS, doc="PDE the simulator was trained on.")
    model = param.Selector(default="recurrsim", objects=MODEL_LABELS,
                           doc="RecurrSim or a baseline (fixed-depth FNOs ignore K).")
    ic = param.Integer(default=0, bounds=(0, 15), doc="Held-out initial condition (test trajectory index).")
    K = param.Integer(default=8, bounds=(1, 32), doc="Recurrent iterations at test time.")
    frame = param.Integer(default=0, bounds=(0, 40), doc="Rollout frame shown by the animation.")
    profile = param.Selector(default="quick", objects=list(PROFILES),
                             doc="Method profile whose settings and weights are used (ci: tiny, for tests).")
    version = param.Integer(default=0, precedence=-1, doc="Bumped when a model becomes available.")

    def __init__(self, **params):
        params.setdefault("profile", _default_profile())
        super().__init__(**params)
        self._job = BackgroundJob()
        self._loaded = False  # set once _prepare ran: the first views are placeholders
        self._player = pn.widgets.Player.from_param(self.param.frame, interval=150, loop_policy="loop",
                                                    show_loop_controls=False, width=380, name="rollout frame",
                                                    css_classes=["recurrsim-player"])
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._prepare)  # served: show the page first, then load or train the model
        else:
            self._prepare()

    # -- models: loaded from the cache, or trained in the background on first use ----------------------------------
    def _cfg(self) -> Config:
        return _config(self.profile)

    def ready(self) -> bool:
        return self._loaded and not self._job.running and _ready(self.profile, self.equation, self.model)

    @param.depends("equation", "model", "profile", watch=True)
    def _prepare(self):
        cfg = self._cfg()
        self.param.ic.bounds = (0, cfg.n_test - 1)
        self.param.frame.bounds = (0, cfg.rollout_steps)
        self._player.end = cfg.rollout_steps
        self.ic, self.frame = min(self.ic, cfg.n_test - 1), min(self.frame, cfg.rollout_steps)
        if self._job.running:
            return  # one training at a time; it calls _prepare again when it ends
        if _ready(self.profile, self.equation, self.model):
            experiment.trained_model(cfg, self.equation, self.model, progress=False)
            experiment.test_trajectories(cfg, self.equation)
            self._job.clear()
            self._loaded = True
            self.version += 1
            return
        self._start_training(cfg, self.equation, self.model)

    def _start_training(self, cfg: Config, equation: str, model: str) -> None:
        def work(report):
            experiment.test_trajectories(cfg, equation)
            experiment.trained_model(cfg, equation, model, progress=False,
                                     callback=lambda i, n, loss: report(i, loss=float(loss)))

        self._job.start(
            work,
            total=cfg.iterations,
            message=(f"**Training {viz.MODEL_STYLE[model]['label']} on {equation}** (first use; "
                     f"{cfg.iterations} Adam steps, cached afterwards)..."),
            describe=lambda info: (f"**Training** step {int(info['done'])} / {int(info['total'])}, loss "
                                   f"{info.get('loss', float('nan')):.3g} (first use; cached afterwards)"),
            on_done=self._prepare,
            name=f"recurrsim-train-{equation}-{model}",
        )

    # -- computations ---------------------------------------------------------------------------------------------
    def _sim(self):
        return _simulate(self.profile, self.equation, self.ic, self.K, self.model)

    def _sweep(self):
        return _sweep(self.profile, self.equation, self.ic, self.model)

    def _placeholder(self):
        return pn.pane.Markdown("*waiting for the model...*")

    # -- views ----------------------------------------------------------------------------------------------------
    @param.depends("equation", "model", "profile", "ic", "K", "version")
    def summary(self):
        if not self.ready():
            return self._placeholder()
        sim = self._sim()
        sweep = self._sweep()
        tau = experiment.correlation_horizon(sim.correlation.values[None], self._cfg().alphas).mean()
        cfg = self._cfg()
        ignores = " (this fixed-depth FNO ignores K)" if self.model in ("fno", "fno_2x") else ""
        return pn.pane.Markdown(
            f"**K = {self.K}**{ignores}: rollout nRMSE **{sim.attrs['nrmse']:.4g}** over {cfg.rollout_steps} frames, "
            f"correlation horizon {tau:.1f} frames, rollout took {sim.attrs['seconds']:.2f} s. "
            f"Best over K in {list(cfg.K_eval)}: {float(sweep.nrmse.min()):.4g}.",
            sizing_mode="stretch_width",
        )

    @param.depends("equation", "model", "profile", "ic", "K", "version")
    def side_by_side(self):
        if not self.ready():
            return self._placeholder()
        sim = self._sim()
        plot = viz.rollout_spacetime(sim) if sim.truth.ndim == 2 else viz.rollout_final_fields(sim)
        return pn.Row(*(pn.pane.HoloViews(p) for p in plot))  # one pane per panel: bokeh grids squash in Rows

    @param.depends("frame", "K", "ic", "version")
    def _line_frame(self):
        if not self.ready():
            return hv.Overlay([hv.Curve([], "x", "u"), hv.Curve([], "x", "u")])
        sim = self._sim()
        lim = 1.1 * float(np.abs(sim.truth).max())
        return viz.rollout_frame(sim, self.frame, ylim=(-lim, lim))

    def _field_frame(self, which: str):
        @param.depends(self.param.frame, self.param.K, self.param.ic, self.param.version)
        def view(frame, K, ic, version):
            if not self.ready():
                return hv.Image(np.zeros((2, 2)), bounds=(0, 0, 1, 1), kdims=["x", "y"], vdims=["vorticity"])
            sim = self._sim()
            return viz.rollout_frame(sim, frame)[0 if which == "truth" else 1]

        return hv.DynamicMap(view)

    @param.depends("equation", "model", "profile", "version")
    def animation(self):
        if not self.ready():
            return self._placeholder()
        if training.dims_of(self.equation) == 1:
            plot = hv.DynamicMap(self._line_frame)
        else:
            return pn.Row(pn.pane.HoloViews(self._field_frame("truth")), pn.pane.HoloViews(self._field_frame("pred")))
        return pn.pane.HoloViews(plot)

    @param.depends("frame")
    def _frame_marker(self):
        return hv.VLine(float(self.frame)).opts(color="gray", line_dash="dotted")

    @param.depends("equation", "model", "profile", "ic", "K", "version")
    def error_over_time(self):
        if not self.ready():
            return self._placeholder()
        return pn.pane.HoloViews(viz.rollout_error(self._sim(), marker=hv.DynamicMap(self._frame_marker)))

    @param.depends("equation", "model", "profile", "ic", "K", "version")
    def error_and_cost(self):
        if not self.ready():
            return self._placeholder()
        plots = viz.sweep_error_cost(self._sweep(), self.K, self._sim().attrs["nrmse"])
        return pn.Row(*(pn.pane.HoloViews(p) for p in plots))

    def __panel__(self):
        widgets = pn.Param(
            self.param,
            parameters=["equation", "model", "ic", "K", "profile"],
            widgets={
                "K": {"type": pn.widgets.IntSlider, "css_classes": ["recurrsim-k"]},
                "ic": {"type": pn.widgets.IntSlider, "name": "initial condition"},
                "profile": pn.widgets.RadioButtonGroup,
            },
            show_name=False,
        )
        intro = pn.pane.Markdown(
            "### RecurrSim\nOne step of the simulator: c = E(u), z_k = R(α⊙c + β⊙z_(k-1)) for k = 1..K, "
            "u' = u + D(z_K). Trained with a random K per batch (Poisson-log-normal), so the same weights run at "
            "any K: more iterations, more cost, a more accurate step.\n\nPaper: OpenReview U2j9ZNgHqw."
        )
        main = [self._job.status, self._job.progress, self.summary, self.side_by_side, self._player, self.animation,
                pn.Row(self.error_over_time, self.error_and_cost)]
        return dashboard_layout("RecurrSim: recurrent-depth neural PDE simulator", sidebar=[intro, widgets],
                                main=main)


Dashboard = RecurrSimDashboard


def app():
    return RecurrSimDashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
