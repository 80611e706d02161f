"""HoloViews plots for dense associative memory results (notebook ``01_dam`` and the ``hopfield`` dashboard)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.methods.dam import theory
from lab.methods.dam.claims import TOLERANCE, TRANSIENT
from lab.viz.style import PALETTE, curve_opts, text_colour

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
    """Steps until m >= m_s(alpha) - eps against m0: simulated mean ± s.d. over the trials that got there, and the
    recursion."""
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
    # every trial in one Path: the overlay has the same three layers for any number of trials, so a dashboard can
    # update it in place (a DynamicMap) when the trials change
    items = [hv.Path([np.column_stack([t, sub.m.sel(trial=k).values]) for k in sub.trial.values], ["step", "m"]).opts(
        color=SIM, alpha=0.3, line_width=1, framewise=True)]
    items.append(hv.Curve((t, sub.m.mean("trial").values), "step", "m", label="simulation (mean)").opts(
        color=SIM, line_width=3, framewise=True))
    items.append(hv.Curve((t, sub.m_theory.values), "step", "m", label="recursion").opts(
        color=THEORY, line_dash="dashed", line_width=2, framewise=True))
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
    sim = hv.Curve((m0, mean), "m0", "steps to m >= m_s - eps", label="simulation").opts(
        color=SIM, framewise=True) * hv.Scatter((m0, mean), "m0", "steps to m >= m_s - eps").opts(
        color=SIM, size=7, framewise=True)
    th = hv.Curve((m0, ds.t_conv_theory.values), "m0", "steps to m >= m_s - eps", label="recursion").opts(
        color=THEORY, line_dash="dashed", framewise=True)
    return (sim * th).opts(title="convergence time against m0", **curve_opts())


def basin_edge_theory(n: int, alpha: float, edge_sim: float, alpha_max: float) -> hv.Overlay:
    """The recursion's basin edge m_u(alpha) over loads, with the chosen load's simulated edge as a point."""
    alphas = np.linspace(alpha_max / 60, alpha_max, 60)
    edge = np.array([theory.basin_edge(a, n) for a in alphas])
    # the axes' extents as dimension ranges, not xlim / ylim: a dashboard's DynamicMap rescales to them per frame
    kdim, vdim = hv.Dimension("alpha", range=(0, alpha_max)), hv.Dimension("basin edge m0", range=(0, 1.05))
    curve = hv.Curve((alphas, edge), kdim, vdim, label="theory m_u(alpha)").opts(
        color=THEORY, line_dash="dashed", framewise=True)
    point = hv.Scatter(([alpha], [edge_sim]), kdim, vdim, label="simulation").opts(
        color=SIM, size=12, marker="diamond", framewise=True)
    title = "basin edge against load" + (" (n = 2: no basin edge in theory)" if n < 3 else "")
    return (curve * point).opts(title=title, **curve_opts())


# ------------------------------------------------------------------------------------------------------------------
# Order n against the n = 2 control at the same relative loads (the ``*_cmp`` variables).
# ------------------------------------------------------------------------------------------------------------------
def _m0_colours(m0s) -> list[str]:
    """One colour per start m0, in order along viridis (low m0 dark, high m0 light)."""
    from matplotlib import colormaps, colors

    return [colors.to_hex(colormaps["viridis"](x)) for x in np.linspace(0.0, 0.9, len(m0s))]


def _mask(ds: xr.Dataset, o: int) -> xr.DataArray:
    """(load, m0) starts at least 0.1 above order position o's own recursion basin edge (the claims' mask)."""
    edge = ds.basin_edge_theory_cmp.isel(order=o)
    return (ds.m0 >= edge + 0.1) & edge.notnull()


def order_comparison(ds: xr.Dataset, loads=None) -> hv.Layout:
    """m(t) of order n (top row) and of n = 2 (bottom row) at each load relative to each one's critical load, from
    every start m0: the simulation's mean over trials (solid) and the recursion (dashed), one colour per m0."""
    loads = ds["load"].values if loads is None else loads
    colours = _m0_colours(ds.m0.values)
    panels = []
    for o in range(ds.sizes["order"]):
        for j, load in enumerate(loads):
            sub = ds.isel(order=o).sel(load=load, method="nearest")
            t = sub.step.values
            items = []
            for k, m0 in enumerate(sub.m0.values):
                mean = sub.m_cmp.sel(m0=m0).mean("trial").values
                items.append(hv.Curve((t, mean), "step", "m", label=f"m0 = {m0:.2g}").opts(
                    color=colours[k], line_width=2))
                items.append(hv.Curve((t, sub.m_theory_cmp.sel(m0=m0).values), "step", "m").opts(
                    color=colours[k], line_dash="dashed", line_width=1.5))
            last = j == len(loads) - 1
            title = (f"n = {int(sub.order)}, {float(sub['load']):.2g} alpha_c (alpha = {float(sub.alpha_cmp):.3g})")
            panels.append(hv.Overlay(items).opts(
                title=title, show_legend=last, legend_position="right",
                **curve_opts(ylim=(-0.05, 1.05), width=440 if last else 340, height=300)))
    return hv.Layout(panels).cols(len(loads))


def one_step_errors(ds: xr.Dataset, window: tuple[float, float] = TRANSIENT,
                    tolerance: float = TOLERANCE) -> hv.Overlay:
    """The one-step-ahead error e = m(t+1) - f_n(m(t)) against m(t) on the transient (``window``, t >= 1), every
    load, start and trial, one colour per order; the lines are each order's mean, the band the lab's tolerance."""
    items = [hv.HSpan(-tolerance, tolerance).opts(color="gray", alpha=0.15),
             hv.HLine(0.0).opts(color="gray", line_dash="dotted")]
    for o, colour in zip(range(ds.sizes["order"]), (SIM, THEORY)):
        sub = ds.isel(order=o).sel(step=slice(1, None))
        x, e = sub.m_cmp.values.ravel(), sub.one_step_error_cmp.values.ravel()
        ok = (x > window[0]) & (x < window[1]) & np.isfinite(e)
        mean = float(e[ok].mean()) if ok.any() else np.nan
        label = f"n = {int(ds.order[o])}: mean {mean:+.3f}"
        items.append(hv.Scatter((x[ok], e[ok]), "m(t)", "e", label=label).opts(color=colour, alpha=0.4, size=4))
        items.append(hv.HLine(mean).opts(color=colour, line_width=2))
    return hv.Overlay(items).opts(
        title=f"one step ahead, t >= 1 (band: ±{tolerance:g}; lines: means)", xlabel="simulated overlap m(t)",
        ylabel="e = m(t+1) - f_n(m(t))", legend_position="bottom_left", **curve_opts(width=640, height=380))


def convergence_comparison(ds: xr.Dataset) -> hv.Layout:
    """Per order, on the starts inside its own basin (the claim's mask): sweeps until m >= m_s(alpha) - eps against
    m0 (simulation: mean over the trials that got there, solid with markers; the recursion dashed; one colour per
    load); and how many trials never got there."""
    panels = []
    for o in range(ds.sizes["order"]):
        sub = ds.isel(order=o).where(_mask(ds, o))
        items = []
        for r, colour in zip(range(ds.sizes["load"]), PALETTE):
            s = sub.isel(load=r)
            m0, mean = s.m0.values, s.t_conv_cmp.mean("trial", skipna=True).values
            label = f"{float(s['load']):.2g} alpha_c (target {float(ds.target_cmp[o, r]):.3f})"
            items.append(hv.Curve((m0, mean), "m0", "sweeps", label=label).opts(color=colour, line_width=2))
            items.append(hv.Scatter((m0, mean), "m0", "sweeps").opts(color=colour, size=6))
            items.append(hv.Curve((m0, s.t_conv_theory_cmp.values), "m0", "sweeps").opts(
                color=colour, line_dash="dashed"))
        panels.append(hv.Overlay(items).opts(title=f"n = {int(sub.order)}: sweeps to m_s - eps (dashed: recursion)",
                                             legend_position="top_right", **curve_opts(width=460, height=320)))
    rows = [f"n = {int(ds.order[o])}, {float(x):.2g} alpha_c" for o in range(ds.sizes["order"])
            for x in ds["load"].values]
    cols = [f"{float(x):.2g}" for x in ds.m0.values]
    inside = np.stack([_mask(ds, o).transpose("load", "m0").values for o in range(ds.sizes["order"])])
    never = np.where(inside, ds.never_cmp.values, np.nan).reshape(len(rows), len(cols))
    clim = (0, ds.sizes["trial"])
    data = [(c, r, never[i, j]) for i, r in enumerate(rows) for j, c in enumerate(cols)]
    heat = hv.HeatMap(data, ["m0", "order, load"], "never").opts(
        cmap="Oranges", clim=clim, colorbar=True, tools=["hover"], width=600, height=320, invert_yaxis=True,
        clipping_colors={"NaN": "#e6e6e6"},
        title=f"trials (of {ds.sizes['trial']}) never at m_s - eps (grey: outside the basin)")
    shown = [d for d in data if np.isfinite(d[2])]
    labels = hv.Labels([(c, r, int(v), text_colour(v, "Oranges", clim)) for c, r, v in shown],
                       ["m0", "order, load"], ["never", "colour"]).opts(text_font_size="9pt", text_color="colour")
    return hv.Layout([*panels, heat * labels]).cols(3)


def self_noise(ds: xr.Dataset) -> hv.Overlay:
    """C(0, s): the crosstalk s sweeps after the start against the start, averaged over trials and over the points
    inside each order's own basin (m0 >= edge + 0.1), for order n and the n = 2 control."""
    items = [hv.HLine(0.0).opts(color="gray", line_dash="dotted")]
    for o, colour in zip(range(ds.sizes["order"]), (SIM, THEORY)):
        c = ds.self_corr_cmp.isel(order=o).where(_mask(ds, o))
        mean = c.mean(("load", "m0", "trial"), skipna=True)
        sd = c.mean(("load", "m0"), skipna=True).std("trial").values
        lag = ds.lag.values
        label = f"n = {int(ds.order[o])}"
        items.append(hv.ErrorBars((lag, mean.values, sd), "lag", ["C(0, s)", "sd"]).opts(color=colour))
        items.append(hv.Curve((lag, mean.values), "lag", "C(0, s)", label=label).opts(color=colour, line_width=2))
    return hv.Overlay(items).opts(title="crosstalk against the pattern's own start, C(0, s) (± s.d. over trials)",
                                  xlabel="s (sweeps)", **curve_opts())


def _outside(ds: xr.Dataset) -> str:
    """Order n's starts outside its basin margin (m0 < m_u + 0.1): where the finite-N simulation leaves the
    recursion."""
    out = ~_mask(ds, 0) & ds.basin_edge_theory_cmp.isel(order=0).notnull()
    if int(out.sum()) == 0:
        return "- Every side-by-side start of order n lies inside its basin margin."
    err = abs(ds.m_cmp.mean("trial") - ds.m_theory_cmp).isel(order=0).sel(step=slice(1, None)).max("step")
    err = err.where(out)
    worst = err.where(err == err.max(), drop=True)
    n = int(ds.order[0])
    return (
        f"- **Outside order {n}'s basin margin** ({int(out.sum())} (load, m0) starts below m_u + 0.1, not in the "
        f"claims' mask) the recursion's worst error is {float(err.max()):.3g} (at m0 = {float(worst['m0'][0]):.2g}, "
        f"load {float(worst['load'][0]):.2g} of its critical load): near the basin edge a finite network decides "
        "between retrieval and m = 0 by its own fluctuations, which the N → ∞ recursion does not have."
    )


def _censored(ds: xr.Dataset, o: int) -> str:
    mask = _mask(ds, o)
    never = int(ds.never_cmp.isel(order=o).where(mask).sum())
    return f"{never} of {int(mask.sum()) * ds.sizes['trial']}"


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
        f"({', '.join(f'{x:.2g}' for x in ds['load'].values)}), from the same m0s, for the same sweeps; each is "
        f"read inside its own recursion basin (order {n}: m0 ≥ m_u + 0.1; n = 2, whose recursion retrieves from any "
        f"positive start: m0 ≥ 0.1). There the recursion's worst error is {val('recursion_tracks_n')} for n = {n} "
        f"and {val('recursion_tracks_n', True)} for n = 2 (verdict: {c['recursion_tracks_n'].verdict}); from step "
        f"2 on, n = 2's is {val('n2_recursion_fails_later')} against {val('n2_recursion_fails_later', True)} for "
        f"n = {n} (verdict of n2_recursion_fails_later: {c['n2_recursion_fails_later'].verdict}).",
        f"- **Self-noise, one step ahead (the headline).** {c['no_self_noise'].detail}. For the control: "
        f"{c['no_self_noise'].control_detail}. Verdict: {c['no_self_noise'].verdict}. The memory of the start "
        f"itself, |C(0, s ≥ 2)| per trial, is {val('start_memory')} for n = {n} and {val('start_memory', True)} "
        f"for n = 2 (report row start_memory: both orders forget their start once they converge, so it does not "
        f"separate them); one sweep after the start C(0, 1) = {val('one_step_reaction')} for n = {n} and "
        f"{val('one_step_reaction', True)} for n = 2.",
        f"- **Convergence time**, to each load's own recursion fixed point within eps (m_s(α) − eps), over the "
        f"trials that got there: worst gap {val('convergence_time')} sweeps for n = {n} and "
        f"{val('convergence_time', True)} for n = 2 (verdict: {c['convergence_time'].verdict}). Trials that never "
        f"got there in {ds.sizes['step'] - 1} sweeps, inside each order's basin: "
        f"{_censored(ds, 0)} for n = {n}, {_censored(ds, 1)} for n = 2 (the heat map above).",
        _outside(ds),
        "- The recursion is an N → ∞ statement; at finite N the simulation departs from it near the basin edge and "
        "the critical load. Dashboard: `lab serve hopfield`.",
    ]
    return "\n".join(lines)
