"""HoloViews plots for RecurrSim results (notebook ``04_recurrsim`` and the ``recurrsim`` dashboard).

Run-level plots take the Dataset of :func:`lab.methods.recurrsim.experiment.run` and an equation; the dashboard's
plots take the small Datasets of :func:`lab.methods.recurrsim.live.simulate` (one rollout) and
:func:`lab.methods.recurrsim.live.depth_sweep` (one initial condition at every K).
"""

from __future__ import annotations

import json

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts, log_ticks

MODEL_STYLE = {
    "recurrsim": dict(color=PALETTE[0], label="RecurrSim (RecurrFNO)"),
    "fixed_k": dict(color=PALETTE[1], label="trained at one K"),
    "deq": dict(color=PALETTE[2], label="FNO-DEQ"),
    "fno": dict(color=PALETTE[3], label="FNO, same params"),
    "fno_2x": dict(color=PALETTE[5], label="FNO, 2x params"),
    "kblind": dict(color="#999999", label="K-blind (depth frozen)"),
}
RECURRENT = ("recurrsim", "fixed_k", "deq")
TRUTH, PRED = "#222222", PALETTE[0]


def _models(ds: xr.Dataset, names=None):
    return [m for m in (names or MODEL_STYLE) if m in ds.model.values]


def _by_K(ds: xr.Dataset, var: str, equation: str, ylabel: str, title: str, logy: bool = True,
          extra=()) -> hv.Overlay:
    d = ds[var].sel(equation=equation)
    K = d.K.values
    items = []
    for m in _models(ds):
        style = MODEL_STYLE[m]
        y = d.sel(model=m).values
        if m in RECURRENT:
            items.append(hv.Curve((K, y), "K", ylabel, label=style["label"]).opts(color=style["color"], line_width=2))
            items.append(hv.Scatter((K, y), "K", ylabel).opts(color=style["color"], size=6))
        else:
            items.append(hv.Curve((K, y), "K", ylabel, label=style["label"]).opts(color=style["color"],
                                                                                 line_dash="dashed"))
    return hv.Overlay(items + list(extra)).opts(title=title, logx=True, logy=logy, legend_position="right",
                                  **curve_opts(width=640))


def _untrained_depths(ds: xr.Dataset) -> list:
    """A grey band over the depths no training ever ran at: K above 4 x mean_depth (past the Poisson-log-normal's
    reach) and above the fixed-K model's and the DEQ's depths."""
    lo = 4 * max(ds.attrs.get("mean_depth", 0), ds.attrs.get("fixed_depth", 0), ds.attrs.get("deq_max_iter", 0))
    hi = float(ds.K.max())
    return [hv.VSpan(float(lo), hi).opts(color="gray", alpha=0.12)] if 0 < lo < hi else []


def error_vs_K(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """Rollout nRMSE against test-time depth K; fixed-depth FNOs as dashed lines; the fixed-K model's depth dotted,
    the depths never trained at shaded."""
    kf = ds.attrs.get("fixed_depth")
    title = f"{equation}: rollout nRMSE over {int(ds.step.size) - 1} frames against K"
    extra = _untrained_depths(ds) + ([] if kf is None else [hv.VLine(float(kf)).opts(color="gray",
                                                                                      line_dash="dotted")])
    return _by_K(ds, "nrmse", equation, "nRMSE", title, extra=extra)


def horizon_vs_K(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """Correlation horizon tau (averaged over alpha) against K, in frames, on the horizon_steps-frame rollout
    (horizon_steps = never decorrelated)."""
    H = ds.attrs.get("horizon_steps", int(ds.step.size) - 1)
    return _by_K(ds, "tau_mean", equation, "tau (frames)",
                 f"{equation}: correlation horizon, {H}-frame rollout (mean over α = "
                 f"{float(ds.alpha.min()):.2f}..{float(ds.alpha.max()):.2f})", logy=False,
                 extra=_untrained_depths(ds))


def cost_vs_K(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """RecurrSim's time per step against K with the least-squares line a + b K."""
    t = ds.time_per_step.sel(equation=equation, model="recurrsim")
    K, y = t.K.values.astype(float), t.values * 1e3
    slope, icpt = np.polyfit(K, y, 1)
    ks = np.linspace(0, K.max(), 50)
    pts = hv.Scatter((K, y), "K", "ms per step", label="measured").opts(color=PRED, size=8)
    fit = hv.Curve((ks, icpt + slope * ks), "K", "ms per step", label=f"{icpt:.2g} + {slope:.2g} K ms").opts(
        color="gray", line_dash="dashed")
    return (fit * pts).opts(title=f"{equation}: inference cost per step (batch {ds.traj.size})",
                            legend_position="top_left", **curve_opts())


def error_vs_cost(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """The accuracy-cost trade-off: nRMSE against time per step, each point one K (fixed-depth FNOs: one point)."""
    d = ds.sel(equation=equation)
    items = []
    for m in _models(ds):
        style = MODEL_STYLE[m]
        err, cost = d.nrmse.sel(model=m).values, d.time_per_step.sel(model=m).values * 1e3
        if m in RECURRENT:
            items.append(hv.Curve((cost, err), "ms per step", "nRMSE", label=style["label"]).opts(
                color=style["color"]))
            items.append(hv.Scatter((cost, err), "ms per step", "nRMSE").opts(color=style["color"], size=6))
        else:
            items.append(hv.Scatter((cost[:1], err[:1]), "ms per step", "nRMSE", label=style["label"]).opts(
                color=style["color"], size=11, marker="diamond"))
    return hv.Overlay(items).opts(title=f"{equation}: accuracy against cost", logx=True, logy=True,
                                  legend_position="right", **curve_opts(width=640))


def error_over_time(ds: xr.Dataset, equation: str, K: int) -> hv.Overlay:
    """nRMSE per rollout frame at one K, every model."""
    d = ds.nrmse_step.sel(equation=equation, K=K)
    items = [hv.Curve((d.step.values, d.sel(model=m).values), "frame", "nRMSE", label=MODEL_STYLE[m]["label"]).opts(
        color=MODEL_STYLE[m]["color"], line_dash="solid" if m in RECURRENT else "dashed") for m in _models(ds)]
    return hv.Overlay(items).opts(title=f"{equation}: error over the rollout at K = {K}", legend_position="right",
                                  **curve_opts(width=640))


def error_vs_layers(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """The accuracy-cost trade-off on counted compute: nRMSE against Fourier layers applied per step (K + 2 for
    RecurrFNO; 3 and 6 for the FNOs), free of the timer noise of a shared machine."""
    d = ds.sel(equation=equation)
    items = []
    for m in _models(ds):
        style = MODEL_STYLE[m]
        err, cost = d.nrmse.sel(model=m).values, d.layers_per_step.sel(model=m).values
        if m in RECURRENT:
            items.append(hv.Curve((cost, err), "Fourier layers per step", "nRMSE", label=style["label"]).opts(
                color=style["color"]))
            items.append(hv.Scatter((cost, err), "Fourier layers per step", "nRMSE").opts(color=style["color"],
                                                                                          size=6))
        else:
            items.append(hv.Scatter((cost[:1], err[:1]), "Fourier layers per step", "nRMSE",
                                    label=style["label"]).opts(color=style["color"], size=11, marker="diamond"))
    return hv.Overlay(items).opts(title=f"{equation}: accuracy against counted compute", logx=True, logy=True,
                                  legend_position="right", **curve_opts(width=640))


def validation_pick(ds: xr.Dataset, equation: str, K: int) -> hv.Overlay:
    """RecurrSim's validation and test errors against K, the depth picked on validation marked."""
    d = ds.sel(equation=equation)
    K_vals = d.K.values
    val = hv.Curve((K_vals, d.val_nrmse.sel(model="recurrsim").values), "K", "nRMSE",
                   label="validation").opts(color=PALETTE[1])
    test = hv.Curve((K_vals, d.nrmse.sel(model="recurrsim").values), "K", "nRMSE", label="test").opts(color=PRED)
    mark = hv.VLine(float(K)).opts(color="gray", line_dash="dotted")
    return (val * test * mark).opts(title=f"{equation}: depth picked on validation, K = {K}", logx=True, logy=True,
                                    legend_position="top_right", **curve_opts(width=480))


def training_curves(ds: xr.Dataset, equation: str) -> hv.Overlay:
    """One-step training loss of each trained model (running mean over 20 steps)."""
    d = ds.train_loss.sel(equation=equation)
    items = []
    for m in _models(ds):
        y = d.sel(model=m).values
        if not np.isfinite(y).any():  # the K-blind control is not trained
            continue
        w = min(20, len(y))
        smooth = np.convolve(y, np.ones(w) / w, mode="valid")
        items.append(hv.Curve((np.arange(len(smooth)) + w - 1, smooth), "Adam step", "loss",
                              label=MODEL_STYLE[m]["label"]).opts(color=MODEL_STYLE[m]["color"]))
    return hv.Overlay(items).opts(title=f"{equation}: training loss", logy=True, legend_position="right",
                                  **curve_opts(width=640))


def _spacetime(values: np.ndarray, L: float, dt: float, title: str, clim, cmap: str = "RdBu_r") -> hv.Image:
    """A 1-D rollout (frames, x) as an image with x across and time up (an hv.Image array's row 0 is its top)."""
    T, N = values.shape
    img = hv.Image(np.flipud(values), bounds=(0, -0.5 * dt, L, (T - 0.5) * dt), kdims=["x", "t"], vdims=["u"])
    return img.opts(cmap=cmap, clim=clim, colorbar=True, title=title, width=330, height=300, tools=["hover"])


def example_spacetime(ds: xr.Dataset, equation: str, Ks=None) -> hv.Layout:
    """Ground truth and RecurrSim rollouts of test trajectory 0 as space-time images (1-D equations)."""
    truth = ds.example_truth.sel(equation=equation).values
    if not np.isfinite(truth).any():
        raise ValueError(f"{equation} has no 1-D example")
    L, dt = float(ds.domain_extent.sel(equation=equation)), float(ds.dt.sel(equation=equation))
    Ks = list(ds.K.values) if Ks is None else Ks
    lim = float(np.nanmax(np.abs(truth)))
    panels = [_spacetime(truth, L, dt, "ground truth", (-lim, lim))]
    for K in Ks:
        pred = ds.example_pred.sel(equation=equation, K=K).values
        panels.append(_spacetime(pred, L, dt, f"RecurrSim, K = {int(K)}", (-lim, lim)))
    return hv.Layout(panels).cols(4)


def example_vorticity(ds: xr.Dataset, Ks=None) -> hv.Layout:
    """Navier-Stokes vorticity of test trajectory 0 at a few frames: truth and RecurrSim at each K (rows)."""
    truth = ds.example_vorticity_truth
    Ks = list(ds.K.values) if Ks is None else Ks
    lim = float(np.abs(truth).max())
    panels = []
    rows = [("truth", truth)] + [(f"K = {int(K)}", ds.example_vorticity_pred.sel(K=K)) for K in Ks]
    for name, field in rows:
        for f in ds.frame.values:
            panels.append(_field(field.sel(frame=f).values, f"{name}, frame {int(f)}", lim, size=200))
    return hv.Layout(panels).cols(int(ds.frame.size))


def _field(values: np.ndarray, title: str, lim: float, size: int = 300) -> hv.Image:
    return hv.Image(np.flipud(values), bounds=(0, 0, 1, 1), kdims=["x", "y"], vdims=["vorticity"]).opts(
        cmap="RdBu_r", clim=(-lim, lim), title=title, width=size, height=size, xaxis=None, yaxis=None,
        colorbar=False, tools=["hover"])


# --------------------------------------------------------------------------------------------------------------------
# The dashboard's views of one rollout (``simulate``) and one depth sweep (``depth_sweep``).
# --------------------------------------------------------------------------------------------------------------------
def rollout_spacetime(sim: xr.Dataset) -> hv.Layout:
    """Ground truth, prediction and their difference as space-time images (1-D)."""
    truth, pred = sim.truth.values, sim.pred.values
    lim = float(np.abs(truth).max())
    L, dt = sim.attrs["L"], sim.attrs["dt"]
    err = pred - truth
    elim = max(float(np.abs(err).max()), 1e-12)
    return (_spacetime(truth, L, dt, "ground truth (solver)", (-lim, lim))
            + _spacetime(pred, L, dt, f"prediction, K = {sim.attrs['K']}", (-lim, lim))
            + _spacetime(err, L, dt, "prediction - truth", (-elim, elim), cmap="PuOr_r"))


def rollout_frame(sim: xr.Dataset, step: int, ylim=None) -> hv.Overlay | hv.Layout:
    """One frame of the rollout: truth and prediction as lines (1-D) or side-by-side vorticity fields (2-D)."""
    step = int(min(max(step, 0), sim.step.size - 1))
    t = step * sim.attrs["dt"]
    if sim.truth.ndim == 2:
        N = sim.sizes["x"]
        x = np.arange(N) * sim.attrs["L"] / N
        lim = float(np.abs(sim.truth).max()) * 1.1
        truth = hv.Curve((x, sim.truth.values[step]), "x", "u", label="ground truth").opts(color=TRUTH, line_width=2)
        pred = hv.Curve((x, sim.pred.values[step]), "x", "u", label=f"prediction, K = {sim.attrs['K']}").opts(
            color=PRED, line_width=2, line_dash="dashed")
        return (truth * pred).opts(title=f"frame {step}, t = {t:.3g}", legend_position="top_right",
                                   **curve_opts(width=700, height=320, ylim=ylim or (-lim, lim)))
    lim = float(np.abs(sim.truth).max())
    return (_field(sim.truth.values[step], f"ground truth, frame {step}, t = {t:.3g}", lim)
            + _field(sim.pred.values[step], f"prediction, K = {sim.attrs['K']}, frame {step}", lim))


def rollout_error(sim: xr.Dataset, step: int | None = None, marker=None):
    """nRMSE and 1 - correlation of the rollout against the frame; the current frame marked by a line at ``step``
    or by ``marker`` (e.g. a DynamicMap of a VLine that follows an animation)."""
    s = sim.step.values
    err = hv.Curve((s, sim.nrmse_step.values), "frame", "error", label="nRMSE").opts(color=PRED, line_width=2)
    dec = hv.Curve((s, 1.0 - sim.correlation.values), "frame", "error", label="1 - correlation").opts(
        color=PALETTE[1], line_dash="dashed")
    plot = err * dec
    if step is not None:
        plot = plot * hv.VLine(float(step)).opts(color="gray", line_dash="dotted")
    if marker is not None:
        plot = plot * marker
    return plot.opts(title=f"error over time, K = {sim.attrs['K']} (nRMSE {sim.attrs['nrmse']:.3g})",
                     legend_position="top_left", **curve_opts(width=480, height=300))


def sweep_error_cost(sweep: xr.Dataset, K: int | None = None, current=None) -> hv.Layout:
    """Rollout nRMSE and time per step against K for one initial condition, the current K marked."""
    K_vals = sweep.K.values
    err = hv.Curve((K_vals, sweep.nrmse.values), "K", "rollout nRMSE").opts(color=PRED, line_width=2) * hv.Scatter(
        (K_vals, sweep.nrmse.values), "K", "rollout nRMSE").opts(color=PRED, size=7)
    cost = hv.Curve((K_vals, sweep.time_per_step.values * 1e3), "K", "ms per step").opts(
        color=PALETTE[2], line_width=2) * hv.Scatter((K_vals, sweep.time_per_step.values * 1e3), "K",
                                                     "ms per step").opts(color=PALETTE[2], size=7)
    if K is not None:
        err = err * hv.VLine(float(K)).opts(color="gray", line_dash="dotted")
        cost = cost * hv.VLine(float(K)).opts(color="gray", line_dash="dotted")
    if current is not None:
        err = err * hv.Scatter(([K], [current]), "K", "rollout nRMSE").opts(color=PALETTE[1], size=12,
                                                                            marker="diamond")
    ticks = [int(k) for k in K_vals]
    return (err.opts(title="error against K", logx=True, logy=True, xticks=ticks,
                     yticks=log_ticks(np.nanmin(sweep.nrmse.values), np.nanmax(sweep.nrmse.values)),
                     **curve_opts(width=420, height=300))
            + cost.opts(title="cost against K", logx=True, xticks=ticks, **curve_opts(width=420, height=300)))


def rollout_final_fields(sim: xr.Dataset) -> hv.Layout:
    """Ground truth, prediction and their difference at the last frame (2-D)."""
    last = int(sim.step.size) - 1
    truth, pred = sim.truth.values[last], sim.pred.values[last]
    lim = float(np.abs(sim.truth).max())
    elim = max(float(np.abs(pred - truth).max()), 1e-12)
    diff = hv.Image(np.flipud(pred - truth), bounds=(0, 0, 1, 1), kdims=["x", "y"], vdims=["difference"]).opts(
        cmap="PuOr_r", clim=(-elim, elim), title="prediction - truth", width=300, height=300, xaxis=None,
        yaxis=None, tools=["hover"])
    return (_field(truth, f"ground truth, frame {last}", lim)
            + _field(pred, f"prediction, K = {sim.attrs['K']}, frame {last}", lim) + diff)


# --------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers come from the Dataset and the claims table.
# --------------------------------------------------------------------------------------------------------------------
def discussion(ds: xr.Dataset, claims) -> str:
    """Markdown: what the run showed, equation by equation, with the verdicts of ``claims`` (a ClaimsTable)."""
    from lab.methods.recurrsim.claims import compute_matched_depth, needed_depth

    def err(d, m, K):
        return float(d.nrmse.sel(model=m, K=K))

    lines = [f"What this run showed ({claims.summary()}; profile `{ds.attrs.get('profile', '?')}`, mean training "
             f"depth {ds.attrs['mean_depth']:g}, fixed-K model trained at K = {ds.attrs['fixed_depth']}):"]
    K = [int(k) for k in ds.K.values]
    kf = int(ds.attrs["fixed_depth"])
    for eq in map(str, ds.equation.values):
        d = ds.sel(equation=eq)
        rs = [f"K = {k}: {err(d, 'recurrsim', k):.3g}" for k in K]
        fk = [f"K = {k}: {err(d, 'fixed_k', k):.3g}" for k in K if k >= kf]
        settle = err(d, "fixed_k", K[-1]) / err(d, "fixed_k", K[-2]) if len(K) > 1 else 1.0
        tau = d.tau_mean.sel(model="recurrsim")
        kv = needed_depth(d.val_nrmse.sel(model="recurrsim"))
        kd = needed_depth(d.val_nrmse.sel(model="deq"))
        kc = compute_matched_depth(d)
        fno, fno2 = float(d.nrmse.sel(model="fno").isel(K=0)), float(d.nrmse.sel(model="fno_2x").isel(K=0))
        r = d.nrmse.sel(model="recurrsim") / d.nrmse.sel(model="deq")
        lines += [
            f"- **{eq}.** RecurrSim's rollout nRMSE over {int(d.step.size) - 1} frames: {', '.join(rs)}; its weights "
            f"with the depth frozen at {ds.attrs.get('kblind_depth', '?')} (K-blind) stay at "
            f"{float(d.nrmse.sel(model='kblind').isel(K=0)):.3g} whatever K is asked. Correlation horizon "
            f"{float(tau.sel(K=K[0])):.3g} frames at K = {K[0]} and {float(tau.sel(K=K[-1])):.3g} at K = {K[-1]} "
            f"(rollout of {ds.attrs.get('horizon_steps', int(d.step.size) - 1)} frames; the fixed-K model: "
            f"{float(d.tau_mean.sel(model='fixed_k', K=K[0])):.3g} and "
            f"{float(d.tau_mean.sel(model='fixed_k', K=K[-1])):.3g}).",
            f"  The network trained at K = {kf} only, the depth claims' control: {', '.join(fk)} ("
            + (f"settled: x{settle:.3g} from K = {K[-2]} to {K[-1]}, a fixed point rather than a divergence)"
               if abs(settle - 1) < 0.01 else f"still moving: x{settle:.3g} from K = {K[-2]} to {K[-1]})")
            + (f"; its one-step error at K = {kf} is {float(d.one_step_nrmse.sel(model='fixed_k', K=kf)):.3g} "
               f"against {float(d.persistence_one_step_nrmse):.3g} for predicting no change (its competence)."
               if "persistence_one_step_nrmse" in d and kf in K else "."),
            f"  The depth RecurrSim needs, picked on {ds.attrs['n_val']} validation trajectories: K = {kv}, "
            f"test error {err(d, 'recurrsim', kv):.3g} against {fno2:.3g} for the FNO with twice its parameters and "
            f"{fno:.3g} for the FNO with as many. At the 2x FNO's compute (K = {kc}, "
            f"{int(d.layers_per_step.sel(model='recurrsim', K=kc))} Fourier layers per step): "
            f"{err(d, 'recurrsim', kc):.3g}. The DEQ at the depth it needs (K = {kd}, picked on validation): "
            f"{err(d, 'deq', kd):.3g}; against the DEQ at equal K, the error ratio is "
            f"{', '.join(f'{v:.2f}' for v in r.values)} (K = {', '.join(map(str, K))}).",
        ]
    failing = [c for c in claims if c.verdict == "fails"]
    blind = [c for c in claims if c.verdict == "does not discriminate"]
    def seeds(c):
        if not c.per_seed:
            return ""
        return f"; {c.seeds_holding} of {len(c.per_seed)} seeds pass, " + ", ".join(f"{v:.4g}" for v in c.per_seed)

    if failing:
        lines.append("- **Fails:** " + "; ".join(f"`{c.name}` ({c.measured:.4g}, needs {c.op} {c.threshold:g}"
                                                 f"{seeds(c)})" for c in failing) + ".")
    weak = [c for c in claims if c.verdict == "control not competent"]
    if weak:
        lines.append("- **Control not competent** (a learned control or baseline no better than its bar on what it "
                     "was trained for): " + "; ".join(
                         f"`{c.name}` ({'; '.join(x.text() for x in c.competence if not x.passed)})" for c in weak)
                     + ".")
    if blind:
        lines.append("- **Does not discriminate** (the control passes too): " + "; ".join(
            f"`{c.name}` ({c.measured:.3g}; control {c.control_measured:.3g}: {c.control_label})" for c in blind)
            + ".")
    cfg = json.loads(ds.attrs["config"]) if "config" in ds.attrs else None
    if cfg is not None:
        lines.append(
            f"- **Settings against the paper's.** Mean training depth {cfg['mean_depth']:g} (paper: 32), truncated "
            f"backprop through the last {cfg['grad_depth']} iterations (paper: 4), width {cfg['width']}, "
            f"{cfg['modes']} Fourier modes, {cfg['n_train']} training trajectories, {cfg['iterations']} optimiser "
            f"steps: {int(ds.n_params.sel(model='recurrsim').max())}-parameter models, where the paper's advantage "
            f"is measured at 10^8-10^9 parameters after long training.")
    return "\n".join(lines)
