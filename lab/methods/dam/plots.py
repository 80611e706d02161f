"""HoloViews plots for dense associative memory results (notebook ``01_dam`` and the ``hopfield`` dashboard)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.methods.dam import theory
from lab.viz.style import PALETTE, curve_opts

SIM, THEORY = "#1f5fa8", "#d1495b"


def overlap_curves(ds: xr.Dataset, alpha: float, suffix: str = "", m0s=None) -> hv.Overlay:
    """Mean simulated overlap m(t) (markers, ±1 s.d. band) against the recursion (dashed), one colour per m0."""
    a = f"alpha{suffix}"
    sub = ds.sel({a: alpha}, method="nearest")
    m0s = sub.m0.values if m0s is None else m0s
    items = []
    for k, m0 in enumerate(m0s):
        colour = PALETTE[k % len(PALETTE)]
        m = sub[f"m{suffix}"].sel(m0=m0)
        mean, sd = m.mean("trial").values, m.std("trial").values
        t = sub.step.values
        items.append(hv.Area((t, mean - sd, mean + sd), vdims=["lo", "hi"]).opts(color=colour, alpha=0.15,
                                                                                 line_alpha=0))
        items.append(hv.Curve((t, mean), "step", "m", label=f"m0={m0:.2g}").opts(color=colour, line_width=2))
        items.append(hv.Scatter((t, mean), "step", "m").opts(color=colour, size=4))
        th = sub[f"m_theory{suffix}"].sel(m0=m0).values
        if np.isfinite(th).any():
            items.append(hv.Curve((t, th), "step", "m").opts(color=colour, line_dash="dashed", line_width=1.5))
    n = ds.attrs.get(f"order{suffix}", ds.attrs.get("n"))
    return hv.Overlay(items).opts(
        title=f"n = {n}, alpha = {float(sub[a]):.3g}: simulation (solid) vs recursion (dashed)",
        legend_position="right", **curve_opts(ylim=(-0.05, 1.05)),
    )


def convergence_time(ds: xr.Dataset, alpha: float, suffix: str = "") -> hv.Overlay:
    """Steps until m >= 1 - eps against m0: simulated mean ± s.d. and the recursion."""
    a = f"alpha{suffix}"
    sub = ds.sel({a: alpha}, method="nearest")
    t = sub[f"t_conv{suffix}"]
    mean, sd = t.mean("trial", skipna=True).values, t.std("trial", skipna=True).values
    m0 = sub.m0.values
    sim = hv.ErrorBars((m0, mean, sd), "m0", ["steps", "sd"]).opts(color=SIM) * hv.Scatter(
        (m0, mean), "m0", "steps", label="simulation").opts(color=SIM, size=7)
    th = hv.Curve((m0, sub[f"t_conv_theory{suffix}"].values), "m0", "steps", label="recursion").opts(
        color=THEORY, line_dash="dashed")
    return (sim * th).opts(title=f"convergence time, alpha = {float(sub[a]):.3g}", **curve_opts())


def basin_edge(ds: xr.Dataset) -> hv.Overlay:
    """Basin edge against load: simulated (p_retrieve = 1/2) and the recursion's unstable fixed point m_u."""
    sim = hv.Curve((ds.alpha.values, ds.basin_edge.values), "alpha", "basin edge m0", label="simulation").opts(
        color=SIM) * hv.Scatter((ds.alpha.values, ds.basin_edge.values), "alpha", "basin edge m0").opts(
        color=SIM, size=7)
    th = hv.Curve((ds.alpha.values, ds.basin_edge_theory.values), "alpha", "basin edge m0",
                  label="theory m_u(alpha)").opts(color=THEORY, line_dash="dashed")
    crit = hv.VLine(float(ds.critical_load_theory)).opts(color="gray", line_dash="dotted")
    return (sim * th * crit).opts(title="basin edge (dotted: theory's critical load)", **curve_opts(ylim=(0, 1.05)))


def retrieval_map(ds: xr.Dataset, suffix: str = "") -> hv.Overlay:
    """Fraction of trials that retrieve, over (alpha, m0), with the theory's basin edge on top."""
    a = f"alpha{suffix}"
    p = ds[f"p_retrieve{suffix}"]
    img = hv.HeatMap((np.repeat(p[a].values, p.m0.size), np.tile(p.m0.values, p[a].size), p.values.ravel()),
                     [a, "m0"], "p_retrieve").opts(cmap="Blues", colorbar=True, tools=["hover"], clim=(0, 1))
    return img.opts(title="fraction of trials that retrieve", width=520, height=340)


def capacity_scaling(ds: xr.Dataset) -> hv.Overlay:
    """n = 2 critical load at each N against 1/sqrt(N), the fit and its extrapolation, and AGS's 0.138."""
    x = 1.0 / np.sqrt(ds.N_n2.values.astype(float))
    y = ds.critical_load_by_N_n2.values
    a, c = float(ds.critical_load_extrapolated_n2), float(ds.critical_load_slope_n2)
    xs = np.linspace(0, x.max() * 1.05, 50)
    pts = hv.Scatter((x, y), "1/sqrt(N)", "alpha_c", label="simulation").opts(color=SIM, size=8)
    fit = hv.Curve((xs, a + c * xs), "1/sqrt(N)", "alpha_c", label="fit a + c/sqrt(N)").opts(color=SIM,
                                                                                             line_dash="dashed")
    ags = hv.HLine(float(ds.critical_load_theory_n2)).opts(color=THEORY, line_dash="dotted")
    return (pts * fit * ags).opts(title="n = 2 capacity vs size (dotted: AGS 0.138)", **curve_opts())


def noise_ratio(ds: xr.Dataset) -> hv.Overlay:
    """Crosstalk variance at retrieved states over that at random states, for order n and the n = 2 reference."""
    items = [hv.HLine(1.0).opts(color="gray", line_dash="dotted")]
    for suffix, colour in (("", SIM), ("_n2", THEORY)):
        if f"noise_var_retrieved{suffix}" not in ds:
            continue
        r = (ds[f"noise_var_retrieved{suffix}"] / ds[f"noise_var_random{suffix}"])
        a = r[f"alpha{suffix}"].values
        n = ds.attrs.get(f"order{suffix}", ds.attrs.get("n"))
        items.append(hv.Scatter((a, r.values), "alpha", "variance ratio", label=f"n = {n}").opts(color=colour,
                                                                                                size=8))
    return hv.Overlay(items).opts(title="crosstalk variance: retrieved / random", **curve_opts())


# ------------------------------------------------------------------------------------------------------------------
# The hopfield dashboard's views of ``live.explore`` results.
# ------------------------------------------------------------------------------------------------------------------
def explore_trajectories(ds: xr.Dataset) -> hv.Overlay:
    """Each trial's m(t) from the chosen m0 (thin), their mean (thick) and the recursion (dashed)."""
    sub = ds.sel(m0=ds.attrs["chosen_m0"], method="nearest")
    t = sub.step.values
    items = [hv.Curve((t, sub.m.sel(trial=k).values), "step", "m").opts(color=SIM, alpha=0.3, line_width=1)
             for k in sub.trial.values]
    items.append(hv.Curve((t, sub.m.mean("trial").values), "step", "m", label="simulation (mean)").opts(
        color=SIM, line_width=3))
    items.append(hv.Curve((t, sub.m_theory.values), "step", "m", label="recursion").opts(
        color=THEORY, line_dash="dashed", line_width=2))
    return hv.Overlay(items).opts(
        title=f"n = {ds.attrs['n']}, N = {ds.attrs['N']}, P = {ds.attrs['P']}, alpha = {ds.attrs['alpha']:.3g}, "
              f"m0 = {float(sub.m0):.2f}",
        legend_position="bottom_right", **curve_opts(ylim=(-0.05, 1.05)),
    )


def explore_convergence(ds: xr.Dataset) -> hv.Overlay:
    """Convergence time against m0 at the chosen load: simulation and recursion."""
    m0 = ds.m0.values
    t = ds.t_conv
    mean = t.mean("trial", skipna=True).values
    sim = hv.Curve((m0, mean), "m0", "steps to m >= 1 - eps", label="simulation").opts(color=SIM) * hv.Scatter(
        (m0, mean), "m0", "steps to m >= 1 - eps").opts(color=SIM, size=7)
    th = hv.Curve((m0, ds.t_conv_theory.values), "m0", "steps to m >= 1 - eps", label="recursion").opts(
        color=THEORY, line_dash="dashed")
    return (sim * th).opts(title="convergence time against m0", **curve_opts())


def basin_edge_theory(n: int, alpha: float, edge_sim: float, alpha_max: float) -> hv.Overlay:
    """The recursion's basin edge m_u(alpha) over loads, with the chosen load's simulated edge as a point."""
    alphas = np.linspace(alpha_max / 60, alpha_max, 60)
    edge = np.array([theory.basin_edge(a, n) for a in alphas])
    curve = hv.Curve((alphas, edge), "alpha", "basin edge m0", label="theory m_u(alpha)").opts(
        color=THEORY, line_dash="dashed")
    point = hv.Scatter(([alpha], [edge_sim]), "alpha", "basin edge m0", label="simulation").opts(
        color=SIM, size=12, marker="diamond")
    title = "basin edge against load" + (" (n = 2: no basin edge in theory)" if n < 3 else "")
    return (curve * point).opts(title=title, **curve_opts(ylim=(0, 1.05), xlim=(0, alpha_max)))


# ------------------------------------------------------------------------------------------------------------------
# Order n against the n = 2 control at the same relative loads (the ``*_cmp`` variables).
# ------------------------------------------------------------------------------------------------------------------
def order_comparison(ds: xr.Dataset, load: float, m0s=None) -> hv.Layout:
    """m(t) of order n and of n = 2 at the same load relative to each one's critical load: simulation (solid) and
    the recursion (dashed), one colour per m0."""
    panels = []
    for o in range(ds.sizes["order"]):
        sub = ds.isel(order=o).sel(load=load, method="nearest")
        chosen = sub.m0.values if m0s is None else m0s
        items = []
        for k, m0 in enumerate(chosen):
            colour = PALETTE[k % len(PALETTE)]
            t = sub.step.values
            mean = sub.m_cmp.sel(m0=m0).mean("trial").values
            items.append(hv.Curve((t, mean), "step", "m", label=f"m0={m0:.2g}").opts(color=colour, line_width=2))
            items.append(hv.Curve((t, sub.m_theory_cmp.sel(m0=m0).values), "step", "m").opts(
                color=colour, line_dash="dashed", line_width=1.5))
        title = (f"n = {int(sub.order)}, alpha = {float(sub.alpha_cmp):.3g} "
                 f"({float(sub['load']):.2g} x {float(sub.critical_load_ref_cmp):.3g})")
        panels.append(hv.Overlay(items).opts(title=title, legend_position="right",
                                             **curve_opts(ylim=(-0.05, 1.05))))
    return hv.Layout(panels).cols(2)


def self_noise(ds: xr.Dataset) -> hv.Overlay:
    """C(0, s): the crosstalk s sweeps after the start against the start, averaged over trials and over the points
    inside order n's basin (m0 >= m_u + 0.1), for order n and the n = 2 control."""
    edge = ds.basin_edge_theory_cmp
    mask = (ds.m0 >= edge + 0.1) & edge.notnull()
    items = [hv.HLine(0.0).opts(color="gray", line_dash="dotted")]
    for o, colour in zip(range(ds.sizes["order"]), (SIM, THEORY)):
        c = ds.self_corr_cmp.isel(order=o).where(mask)
        mean = c.mean(("load", "m0", "trial"), skipna=True)
        sd = c.mean(("load", "m0"), skipna=True).std("trial").values
        lag = ds.lag.values
        label = f"n = {int(ds.order[o])}"
        items.append(hv.ErrorBars((lag, mean.values, sd), "lag", ["C(0, s)", "sd"]).opts(color=colour))
        items.append(hv.Curve((lag, mean.values), "lag", "C(0, s)", label=label).opts(color=colour, line_width=2))
    return hv.Overlay(items).opts(title="crosstalk against the pattern's own start, C(0, s) (± s.d. over trials)",
                                  xlabel="s (sweeps)", **curve_opts())


def _outside(ds: xr.Dataset) -> str:
    """Where the orders differ: the side-by-side starts outside order n's basin margin (m0 < m_u + 0.1)."""
    edge = ds.basin_edge_theory_cmp
    out = (ds.m0 < edge + 0.1) & edge.notnull()
    if int(out.sum()) == 0:
        return "- Every side-by-side start lies inside order n's basin margin."
    err = abs(ds.m_cmp.mean("trial") - ds.m_theory_cmp).sel(step=slice(2, None)).max("step").where(out)
    mem = ds.self_corr_cmp.sel(lag=slice(2, None)).mean(("trial", "lag")).where(out)
    n = int(ds.order[0])
    worst = err[1].where(err[1] == err[1].max(), drop=True)
    return (
        f"- **Outside order {n}'s basin margin** ({int(out.sum())} (load, m0) starts, not in the claims' mask) the "
        f"recursion's worst error from step 2 on is {float(err[0].max()):.3g} for n = {n} and "
        f"{float(err[1].max()):.3g} for n = 2 (at m0 = {float(worst['m0'][0]):.2g}, load "
        f"{float(worst['load'][0]):.2g} of its critical load), and the largest mean C(0, s ≥ 2) is "
        f"{float(mem[0].max()):.3g} for n = {n} and {float(mem[1].max()):.3g} for n = 2."
    )


def discussion(ds: xr.Dataset, claims) -> str:
    """The notebook's discussion as Markdown, every number read from the Dataset and its claims table."""
    n = int(ds.attrs["n"])
    c = {r.name: r for r in claims}

    def val(name: str, control: bool = False) -> str:
        r = c[name]
        x = r.control_measured if control else r.measured
        return "n/a" if x is None else f"{x:.3g}"

    lines = [
        f"- **Critical load.** The order-{n} network started at the pattern keeps it up to "
        f"α ≈ {float(ds.critical_load):.3f} (N = {ds.attrs['N']}, {ds.sizes['step'] - 1} sweeps); the "
        f"signal-to-noise recursion run for the same sweeps loses it at {float(ds.critical_load_theory_T):.3f}, and "
        f"its saddle-node (N → ∞, t → ∞) is α_c = {float(ds.critical_load_theory):.4f}. This α_c is the "
        "recursion's, computed in `lab.methods.dam.theory`, not a number quoted from the paper.",
    ]
    if "critical_load_extrapolated_n2" in ds:
        sizes = ", ".join(f"{float(v):.3f} (N = {int(k)})"
                          for k, v in zip(ds.N_n2.values, ds.critical_load_by_N_n2.values))
        lines.append(
            f"- **n = 2 capacity.** Extrapolated in 1/√N the n = 2 network holds "
            f"{float(ds.critical_load_extrapolated_n2):.3f} against AGS's {float(ds.critical_load_theory_n2):.3f}; "
            f"the finite sizes give {sizes}."
        )
    lines += [
        f"- **Side by side.** Order {n} and n = 2 ran at the same loads relative to their own critical loads "
        f"({', '.join(f'{x:.2g}' for x in ds['load'].values)}), from the same m0s, for the same sweeps. Inside order "
        f"{n}'s basin the recursion's worst error is {val('recursion_tracks_n')} for n = {n} and "
        f"{val('recursion_tracks_n', True)} for n = 2 (verdict: {c['recursion_tracks_n'].verdict}); from step 2 on, "
        f"n = 2's is {val('n2_recursion_fails_later')} (verdict of n2_recursion_fails_later: "
        f"{c['n2_recursion_fails_later'].verdict}).",
        f"- **Self-noise.** The crosstalk's correlation with the pattern's own start, averaged over s ≥ 2, is "
        f"{val('no_self_noise')} for n = {n} and {val('no_self_noise', True)} for n = 2 (verdict: "
        f"{c['no_self_noise'].verdict}); one sweep after the start (report row one_step_reaction) C(0, 1) = "
        f"{val('one_step_reaction')} for n = {n} and {val('one_step_reaction', True)} for n = 2.",
        f"- **Convergence time.** Worst error over the points inside the basin, never-converged trials counted: "
        f"{val('convergence_time')} sweeps for n = {n}, {val('convergence_time', True)} for n = 2.",
        _outside(ds),
        "- The recursion is an N → ∞ statement; at finite N the simulation departs from it near the basin edge and "
        "the critical load. Dashboard: `lab serve hopfield`.",
    ]
    return "\n".join(lines)
