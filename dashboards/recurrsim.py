"""RecurrSim dashboard: slide the recurrent depth K of a neural PDE simulator, watch its rollout against the solver.

Weights come from the method's cache (``data/recurrsim/``); a model that is not there yet is trained in the
background on first use, with a progress bar (a preparation of :class:`dashboards.panels.MethodPanel`). The widgets'
ranges come from the method's Config: the equations it offers, the profile's test trajectories, rollout frames and
depths K.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param

from dashboards.panels import MethodPanel, field_param, preparation, profile_from_env, view
from lab.config import field_specs
from lab.methods.recurrsim import Config, live, plots

METHOD = "recurrsim"
TITLE = "RecurrSim: test-time depth K of a neural PDE simulator"
DESCRIPTION = "Slide the recurrent depth K of a neural PDE simulator; rollouts against the solver"

_SPECS = field_specs(Config)
_QUICK = Config()
EQUATION_LABELS = {"burgers": "Burgers", "kdv": "KdV", "ks": "Kuramoto-Sivashinsky",
                   "navier_stokes": "2-D Navier-Stokes"}
MODEL_LABELS = {plots.MODEL_STYLE[m]["label"]: m for m in live.MODELS}


def _placeholder(title: str) -> hv.Image:
    """An empty vorticity field titled with why no frame is shown (the frame view's waiting or error state)."""
    return hv.Image(np.zeros((2, 2)), bounds=(0, 0, 1, 1), kdims=["x", "y"], vdims=["vorticity"]).opts(
        title=title, width=300, height=300, cmap="RdBu_r", colorbar=False, xaxis=None, yaxis=None)


class Dashboard(MethodPanel):
    """Pick an equation, an initial condition and a model; slide K; play the rollout against the solver."""

    method = METHOD
    title = TITLE
    intro = ("### RecurrSim\nOne step of the simulator: c = E(u), z_k = R(α⊙c + β⊙z_(k-1)) for k = 1..K, "
             "u' = u + D(z_K). Trained with a random K per batch (Poisson-log-normal), so the same weights run at "
             "any K: more iterations, more cost, a more accurate step.")
    controls = ("equation", "model", "ic", "K", "rollout_steps", "profile")
    widget_options = {"equation": {"css_classes": ["recurrsim-equation"]},
                      "K": {"type": pn.widgets.IntSlider, "css_classes": ["recurrsim-k"]},
                      "ic": {"type": pn.widgets.IntSlider, "name": "Initial condition"},
                      "profile": pn.widgets.RadioButtonGroup}

    equation = param.Selector(default="navier_stokes" if "navier_stokes" in _QUICK.equations else _QUICK.equations[0],
                              objects={EQUATION_LABELS.get(e, e): e for e in _SPECS["equations"].choices},
                              doc=_SPECS["equations"].doc)
    model = param.Selector(default="recurrsim", objects=MODEL_LABELS,
                           doc="RecurrSim or a baseline (fixed-depth FNOs ignore K).")
    ic = param.Integer(default=0, bounds=(0, _QUICK.n_test - 1), doc=_SPECS["n_test"].doc)
    K = param.Integer(default=_QUICK.fixed_depth, bounds=(int(_SPECS["K_eval"].range.lo), max(_QUICK.K_eval)),
                      doc=_SPECS["K_eval"].doc)
    rollout_steps = field_param(Config, "rollout_steps", bounds=(1, _QUICK.traj_steps), label="Rollout frames")
    frame = param.Integer(default=0, bounds=(0, _QUICK.rollout_steps), doc="Rollout frame shown by the animation.")

    def __init__(self, **params):
        if "equation" not in params:  # open on the fluid when the profile (and so the report's cache) has it
            profile = params.get("profile") or profile_from_env()
            eqs = Config.from_profile(profile).equations
            params["equation"] = "navier_stokes" if "navier_stokes" in eqs else eqs[0]
        super().__init__(**params)
        self._player = pn.widgets.Player.from_param(self.param.frame, interval=150, loop_policy="loop",
                                                    show_loop_controls=False, width=380, name="Rollout frame",
                                                    css_classes=["recurrsim-player"])
        self._fit_bounds()

    # -- preparation: the chosen model, loaded from the cache or trained in the background ---------------------------
    @preparation(on=("profile", "equation", "model"), label="the model",
                 cached=lambda s: live.is_ready(Config.from_profile(s.profile), s.equation, s.model),
                 describe=lambda s, info: (f"**Training** {plots.MODEL_STYLE[s.model]['label']} on {s.equation}: "
                                           f"step {int(info['done'])} / {int(info['total'])}, loss "
                                           f"{info.get('loss', float('nan')):.3g} (first use; cached afterwards)"))
    def trained(self, s, report) -> None:
        cfg = self.config_of(s.profile)
        report(0, cfg.iterations)
        live.test_trajectories(cfg, s.equation)
        live.trained(cfg, s.equation, s.model, callback=lambda i, n, loss: report(i, n, loss=float(loss)))

    @param.depends("profile", watch=True)
    def _fit_bounds(self) -> None:
        """The profile's test trajectories, trajectory length and depths bound the sliders."""
        cfg = self.config
        self.param.ic.bounds = (0, cfg.n_test - 1)
        self.param.K.bounds = (int(_SPECS["K_eval"].range.lo), max(cfg.K_eval))
        self.param.rollout_steps.bounds = (1, cfg.traj_steps)
        self.ic, self.K = min(self.ic, cfg.n_test - 1), min(self.K, max(cfg.K_eval))
        self.rollout_steps = cfg.rollout_steps
        self._fit_frames()

    @param.depends("rollout_steps", watch=True)
    def _fit_frames(self) -> None:
        self.param.frame.bounds = (0, self.rollout_steps)
        if hasattr(self, "_player"):
            self._player.end = self.rollout_steps
        self.frame = min(self.frame, self.rollout_steps)

    # -- computations ------------------------------------------------------------------------------------------------
    def _sim(self):
        return live.simulate(self.config, self.equation, self.ic, self.K, self.model, self.rollout_steps)

    def _sweep(self):
        return live.depth_sweep(self.config, self.equation, self.ic, self.model, steps=self.rollout_steps)

    # -- views -------------------------------------------------------------------------------------------------------
    @view("equation", "model", "profile", "ic", "K", "rollout_steps", needs="trained")
    def summary(self):
        sim, sweep, cfg = self._sim(), self._sweep(), self.config
        tau = live.correlation_horizon(sim.correlation.values[None], cfg.alphas).mean()
        ignores = " (this fixed-depth FNO ignores K)" if self.model in ("fno", "fno_2x") else ""
        return pn.pane.Markdown(
            f"**K = {self.K}**{ignores}: rollout nRMSE **{sim.attrs['nrmse']:.4g}** over {self.rollout_steps} "
            f"frames, correlation horizon {tau:.1f} frames, rollout took {sim.attrs['seconds']:.2f} s. "
            f"Best over K in {list(cfg.K_eval)}: {float(sweep.nrmse.min()):.4g}.{self._outside_run()}",
            sizing_mode="stretch_width",
        )

    def _outside_run(self) -> str:
        """A note when the equation is not in the profile's run: its model was trained here, at sizes not chosen
        for it, and which profile's run covers it."""
        if self.equation in self.config.equations:
            return ""
        where = [p for p in ("quick", "full") if self.equation in Config.from_profile(p).equations]
        full = Config.from_profile("full")
        grid = f"grid {full.grid_2d}^2" if live.dims_of(self.equation) == 2 else f"grid {full.grid_1d}"
        return (f"\n\n*{EQUATION_LABELS.get(self.equation, self.equation)} is not in the {self.profile} profile's "
                f"run: this model was trained here on first use at the profile's sizes, not chosen for it. The "
                f"{' and '.join(where) or 'no'} profile's run covers it"
                + (f" ({grid}, {full.iterations} training steps)." if where == ["full"] else ".") + "*")

    @view("equation", "model", "profile", "ic", "K", "rollout_steps", needs="trained")
    def side_by_side(self):
        sim = self._sim()
        plot = plots.rollout_spacetime(sim) if sim.truth.ndim == 2 else plots.rollout_final_fields(sim)
        return pn.Row(*(pn.pane.HoloViews(p) for p in plot))  # one pane per panel: bokeh grids squash in Rows

    @param.depends("frame", "K", "ic", "rollout_steps", "trained")
    def _line_frame(self):
        if not self.ready:
            return hv.Overlay([hv.Curve([], "x", "u"), hv.Curve([], "x", "u")])
        sim = self._sim()
        lim = 1.1 * float(np.abs(sim.truth).max())
        return plots.rollout_frame(sim, self.frame, ylim=(-lim, lim))

    def _field_frame(self, which: str):
        @param.depends(self.param.frame, self.param.K, self.param.ic, self.param.rollout_steps, self.param.trained)
        def field(frame, **_):  # called with every dependency by name (K, ic, rollout_steps, trained)
            if not self.ready:
                return _placeholder(f"{which}: waiting for the model")
            try:
                return plots.rollout_frame(self._sim(), frame)[0 if which == "truth" else 1]
            except Exception as exc:  # shown in place of the frame (a 1-D model asked for a field, a failed rollout)
                return _placeholder(f"{which}: no frame ({type(exc).__name__}: {exc})"[:120])

        return hv.DynamicMap(field)

    @view("equation", "model", "profile", needs="trained")
    def animation(self):
        if live.dims_of(self.equation) == 1:
            return pn.pane.HoloViews(hv.DynamicMap(self._line_frame))
        return pn.Row(pn.pane.HoloViews(self._field_frame("truth")), pn.pane.HoloViews(self._field_frame("pred")))

    @param.depends("frame")
    def _frame_marker(self):
        return hv.VLine(float(self.frame)).opts(color="gray", line_dash="dotted")

    @view("equation", "model", "profile", "ic", "K", "rollout_steps", needs="trained")
    def error_over_time(self):
        return pn.pane.HoloViews(plots.rollout_error(self._sim(), marker=hv.DynamicMap(self._frame_marker)))

    @view("equation", "model", "profile", "ic", "K", "rollout_steps", needs="trained")
    def error_and_cost(self):
        p = plots.sweep_error_cost(self._sweep(), self.K, self._sim().attrs["nrmse"])
        return pn.Row(*(pn.pane.HoloViews(x) for x in p))

    def main(self) -> list:
        return [self.summary, self.side_by_side, self._player, self.animation,
                self.error_over_time, self.error_and_cost]  # one plot a row, then two: they fit a 1400 px window


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
