"""HoloViews plots for STEER results and the dashboard's views (notebook ``05_steer`` and the ``steer`` dashboard)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

TRUE, STEER, OTHER = "#222222", "#1f5fa8", "#d1495b"
MODEL_COLOURS = {"steer": STEER, "steer_mlp": "#66a182", "frozen": "#999999", "free": "#edae49",
                 "blackbox": OTHER}
MODEL_LABELS = {"steer": "STEER (library law)", "steer_mlp": "STEER (MLP law)", "frozen": "frozen first session",
                "free": "free c, carried forward", "blackbox": "black-box GRU"}


def _log_range(values) -> tuple[float, float]:
    """Bounds of a log axis holding every positive value with some margin (bars start at the lower bound)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return (0.1, 10.0)
    return (float(v.min()) / 3, float(v.max()) * 3)


def _components(sub: xr.Dataset, var: str) -> list[int]:
    return [int(r) for r in sub["component"].values if np.isfinite(sub[var].sel(component=r).values).any()]


def _schedule_bars(x: np.ndarray, ubar: np.ndarray, title: str = "") -> hv.Curve:
    return hv.Curve((x, ubar), "session", "ū").opts(interpolation="steps-post", color="#8d5a97", width=560,
                                                    height=200, show_grid=True, title=title, ylim=(-0.05, None),
                                                    yticks=3)


def training_coefficients(ds: xr.Dataset, benchmark: str) -> hv.Layout:
    """True and inferred (aligned) coefficients over the training sessions, with the training schedule below."""
    sub = ds.sel(benchmark=benchmark)
    k = sub.session.values
    items = []
    for i, r in enumerate(_components(sub, "c_true_train")):
        colour = PALETTE[i % len(PALETTE)]
        items.append(hv.Curve((k, sub.c_true_train.sel(component=r).values), "session", "c",
                              label=f"true c{r}").opts(color=colour, line_width=2))
        items.append(hv.Scatter((k, sub.c_inferred_train.sel(component=r).values), "session", "c",
                                label=f"inferred c{r}").opts(color=colour, size=5, marker="x"))
    top = hv.Overlay(items).opts(title=f"{benchmark}: coefficients of the training sessions", legend_position="right",
                                 **curve_opts(height=300))
    return (top + _schedule_bars(k, sub.ubar_train.values, "training schedule")).cols(1)


def unseen_predictions(ds: xr.Dataset, benchmark: str, schedule: str,
                       models=("steer", "steer_mlp", "frozen", "free", "blackbox")) -> hv.Layout:
    """Coefficients under an unseen schedule: the truth against each model's prediction, schedule below."""
    sub = ds.sel(benchmark=benchmark, schedule=schedule)
    k = sub.test_session.values
    items = []
    for i, r in enumerate(_components(sub, "c_true_test")):
        items.append(hv.Curve((k, sub.c_true_test.sel(component=r).values), "session", "c",
                              label=f"true c{r}").opts(color=TRUE, line_width=3,
                                                       line_dash=["solid", "dotted"][i % 2]))
        for m in models:
            items.append(hv.Curve((k, sub.c_pred.sel(model=m, component=r).values), "session", "c",
                                  label=f"{MODEL_LABELS[m]} c{r}").opts(color=MODEL_COLOURS[m], line_width=1.5,
                                                                         line_dash=["solid", "dotted"][i % 2]))
    top = hv.Overlay(items).opts(title=f"{benchmark}, unseen '{schedule}' schedule", legend_position="right",
                                 **curve_opts(width=760, height=320))
    return (top + _schedule_bars(k, sub.ubar_test.values)).cols(1)


def rule_comparison(ds: xr.Dataset) -> hv.Bars:
    """True against inferred library coefficients, per benchmark, component and term."""
    rows = []
    for b in ds.benchmark.values:
        sub = ds.sel(benchmark=b)
        for r in sub["component"].values:
            true = sub.xi_true.sel(component=r).values
            if not np.isfinite(true).all():
                continue
            for term, t, e in zip(sub.term.values, true, sub.xi_inferred.sel(component=r).values):
                rows.append((f"{b} c{r}", str(term), "true", float(t)))
                rows.append((f"{b} c{r}", str(term), "inferred", float(e)))
    bars = hv.Bars(rows, ["component", "term", "source"], "coefficient")
    return bars.opts(multi_level=False, xrotation=90, width=900, height=360, show_grid=True, tools=["hover"],
                     color="source", cmap={"true": TRUE, "inferred": STEER}, show_legend=True,
                     title="update equation: true (black) and inferred (blue) library coefficients")


def baseline_errors(ds: xr.Dataset) -> hv.Bars:
    """Connectivity error under unseen schedules, each model over STEER's (log scale: > 1 means worse)."""
    rows = []
    for b in ds.benchmark.values:
        err = ds.conn_error.sel(benchmark=b)
        for m in ds.model.values:
            rows.append((str(b), str(m), float(err.sel(model=m) / err.sel(model="steer"))))
    return hv.Bars(rows, ["benchmark", "model"], "error / STEER's").opts(
        width=900, height=340, logy=True, ylim=_log_range([r[-1] for r in rows]), xrotation=90, show_grid=True,
        tools=["hover"], color="model",
        cmap=MODEL_COLOURS, title="connectivity error on unseen schedules, relative to STEER")


def heldout_schedules(ds: xr.Dataset, bar: float, models=("steer", "frozen", "free", "blackbox")) -> hv.Layout:
    """Held-out R² of the recurrent part (free rollout of whole sessions), each unseen schedule apart, one panel
    per benchmark: the true model (the ceiling) and each model; a dashed line at the claim's bar (axis floored at
    -1)."""
    short = {"steer": "STEER", "steer_mlp": "STEER MLP", "frozen": "frozen c", "free": "carried c",
             "blackbox": "GRU"}
    colours = {"true": TRUE, **{short[m]: MODEL_COLOURS[m] for m in models}}
    panels = []
    for b in ds.benchmark.values:
        sub = ds.sel(benchmark=b)
        rows = [(str(s), "true", float(sub.r2_oracle_recurrent_schedule.sel(schedule=s)))
                for s in sub.schedule.values]
        rows += [(str(s), short[m], float(sub.r2_recurrent_schedule.sel(schedule=s, model=m)))
                 for s in sub.schedule.values for m in models]
        low = max(min(0.0, min(r[-1] for r in rows)), -1.0)
        scope = "within the assumptions" if bool(sub.within_assumptions) else "off the low-rank assumption"
        panels.append(hv.Bars(rows, ["schedule", "model"], "R² of the recurrent part").opts(
            color="model", cmap=colours, ylim=(low, 1.02), width=560, height=320, show_grid=True, tools=["hover"],
            xrotation=60, show_legend=False,
            title=f"{b} ({scope})") * hv.HLine(bar).opts(color="black", line_dash="dashed", line_width=1))
    title = f"held-out sessions by a free rollout (carried c: the last training session's; dashed: the bar {bar:g})"
    return hv.Layout(panels).cols(2).opts(shared_axes=False, title=title)


def off_assumption_seeds(ds: xr.Dataset) -> hv.Overlay:
    """Off the assumptions, each seed: each baseline's connectivity error over STEER's (log scale; above 1: STEER
    ahead); a line at 1."""
    names = [str(b) for b, w in zip(ds.benchmark.values, ds.within_assumptions.values) if not bool(w)]
    err = ds.conn_error_seeds.sel(benchmark=names)
    rows = [(f"seed {int(s)}", MODEL_LABELS[m], float((err.sel(run_seed=s, model=m)
                                                       / err.sel(run_seed=s, model="steer")).min()))
            for s in ds.run_seed.values for m in ("frozen", "free", "blackbox")]
    return hv.Bars(rows, ["seed", "baseline"], "baseline error / STEER's").opts(
        color="baseline", cmap={MODEL_LABELS[m]: MODEL_COLOURS[m] for m in ("frozen", "free", "blackbox")},
        logy=True, ylim=_log_range([r[-1] for r in rows] + [1.0]), width=860, height=380, show_grid=True,
        tools=["hover"], xrotation=30, show_legend=False, title=f"{', '.join(names)}, off the low-rank assumption: "
        "baseline error / STEER's per seed (above 1: STEER ahead)") * hv.HLine(1.0).opts(color="black", line_width=1)


def design_paths(ds: xr.Dataset, benchmark: str, target: int = 0) -> hv.Overlay:
    """True coefficients along the designed, random (median) and best constant protocols, and the target.

    Two coefficients: a phase plane (c1, c2); one: c against sessions.
    """
    sub = ds.sel(benchmark=benchmark, target=target)
    comps = _components(sub, "design_c")
    colours = {"designed": STEER, "random": "#edae49", "constant": "#999999", "target": OTHER}
    items = []
    for q in sub.protocol_or_target.values:
        path = sub.design_c.sel(protocol_or_target=q)
        label = {"target": "hidden target schedule"}.get(str(q), str(q))
        if len(comps) >= 2:
            x, y = path.sel(component=comps[0]).values, path.sel(component=comps[1]).values
            items.append(hv.Curve((x, y), f"c{comps[0]}", f"c{comps[1]}", label=label).opts(
                color=colours[str(q)], line_width=2, line_dash="dashed" if q == "target" else "solid"))
            items.append(hv.Scatter((x[-1:], y[-1:]), f"c{comps[0]}", f"c{comps[1]}").opts(
                color=colours[str(q)], size=12 if q == "target" else 8, marker="star" if q == "target" else "circle"))
        else:
            s = sub.design_step.values
            items.append(hv.Curve((s, path.sel(component=comps[0]).values), "session", "c", label=label).opts(
                color=colours[str(q)], line_width=2, line_dash="dashed" if q == "target" else "solid"))
    d = sub.design_distance
    title = (f"{benchmark}: designed protocol (distance {float(d.sel(protocol='designed')):.3g}) vs random "
             f"{float(d.sel(protocol='random')):.3g}, best constant {float(d.sel(protocol='constant')):.3g}")
    return hv.Overlay(items).opts(title=title, legend_position="right", **curve_opts(width=760, height=360))


def design_distances(ds: xr.Dataset) -> hv.Bars:
    """Mean distance of the true system to the target after each protocol, per benchmark."""
    rows = [(str(b), str(p), float(ds.design_distance.sel(benchmark=b, protocol=p).mean()))
            for b in ds.benchmark.values for p in ds.protocol.values]
    return hv.Bars(rows, ["benchmark", "protocol"], "distance to target").opts(
        width=760, height=320, logy=True, ylim=_log_range([r[-1] for r in rows]), show_grid=True, tools=["hover"],
        color="protocol", cmap={"designed": STEER, "random": "#edae49", "constant": "#999999"}, xrotation=90,
        title="designed intervention on the true system (lower is better)")


# ------------------------------------------------------------------------------------------------------------------
# The steer dashboard's views of ``explore`` results.
# ------------------------------------------------------------------------------------------------------------------
def explore_coefficients(ex: xr.Dataset) -> hv.Overlay:
    """c over sessions: true, STEER (inferred during training, predicted after) and frozen; a line at the session."""
    k = ex.session.values
    K_train, shown = int(ex.attrs["K_train"]), int(ex.attrs["session_shown"])
    items = [hv.VSpan(K_train - 0.5, k[-1] + 0.5).opts(color="#f3e9d2", alpha=0.5)]
    for i, r in enumerate(ex["component"].values):
        colour = PALETTE[i % len(PALETTE)]
        items.append(hv.Curve((k, ex.c_true.sel(component=r).values), "session", ex.attrs["c_label"],
                              label=f"true c{r}").opts(color=colour, line_width=3, alpha=0.6))
        items.append(hv.Curve((k[:K_train], ex.c_model.sel(component=r).values[:K_train]), "session",
                              ex.attrs["c_label"], label=f"inferred c{r}").opts(color=colour, line_dash="dotted"))
        items.append(hv.Curve((k[K_train - 1:], ex.c_model.sel(component=r).values[K_train - 1:]), "session",
                              ex.attrs["c_label"], label=f"predicted c{r}").opts(color=colour, line_dash="dashed",
                                                                                  line_width=2))
        items.append(hv.Curve((k, ex.c_frozen.sel(component=r).values), "session", ex.attrs["c_label"],
                              label=f"frozen c{r}").opts(color="#999999", line_width=1))
    items.append(hv.VLine(shown).opts(color="black", line_width=1))
    items = [item.opts(framewise=True) for item in items]  # a dashboard updating it in place rescales per frame
    return hv.Overlay(items).opts(
        title=f"{ex.attrs['benchmark']}: plasticity coefficients (shaded: unseen '{ex.attrs['pattern']}' schedule; "
              f"line: session {shown})", legend_position="right", xlabel="session", ylabel=ex.attrs["c_label"],
        **curve_opts(width=820, height=320))


def explore_schedule(ex: xr.Dataset) -> hv.Curve:
    """The stimulation summaries of every session (training, then the chosen schedule)."""
    return _schedule_bars(ex.session.values, ex.ubar.values, "stimulation schedule").opts(width=820, framewise=True)


def explore_connectivity(ex: xr.Dataset, which: str = "true") -> hv.Image:
    """True (``which='true'``) or STEER (``'model'``) connectivity at the chosen session, one colour scale."""
    W, Wm = ex.W_true.values, ex.W_model.values
    lim = float(max(np.abs(W).max(), np.abs(Wm).max(), 1e-9))
    rows, cols = W.shape
    s = int(ex.attrs["session_shown"])
    data, name = (W, "true W") if which == "true" else (Wm, "STEER W")
    # the colour scale as the value's range, not clim: a dashboard updating the image in place rescales to it
    value = hv.Dimension("W", range=(-lim, lim))
    return hv.Image(np.flipud(data), bounds=(0, 0, cols, rows), vdims=[value]).opts(
        title=f"{name}, session {s}", cmap="RdBu_r", width=380, height=330, colorbar=True, xaxis=None, yaxis=None,
        tools=["hover"], framewise=True)


def explore_activity(ex: xr.Dataset) -> hv.Overlay:
    """Recorded activity of the chosen session against the reconstruction, a few units."""
    t = ex.time.values
    items = []
    for i, u in enumerate(ex.unit_shown.values):
        colour = PALETTE[i % len(PALETTE)]
        items.append(hv.Curve((t, ex.y.sel(unit_shown=u).values), "time", "activity",
                              label=f"unit {u} recorded").opts(color=colour, line_width=2, alpha=0.5,
                                                                framewise=True))
        items.append(hv.Curve((t, ex.y_hat.sel(unit_shown=u).values), "time", "activity",
                              label=f"unit {u} model").opts(color=colour, line_dash="dashed", line_width=1.5,
                                                             framewise=True))
    return hv.Overlay(items).opts(
        title=f"session {int(ex.attrs['session_shown'])}: recorded (solid) vs reconstructed (dashed), "
              f"R² = {float(ex.attrs['r2_session']):.3f}", legend_position="right",
        **curve_opts(width=820, height=300))


def explore_equations(ex: xr.Dataset) -> str:
    """Markdown: the inferred and the true update equation and the shown session's R²."""
    inferred = "<br>".join(ex.attrs["equation_inferred"].split(" ; "))
    true = "<br>".join(ex.attrs["equation_true"].split(" ; "))
    notes = {"factors": "aligned to the true factors (sign, order)", "affine": "in units of rho (affine alignment)"}
    note = notes.get(ex.attrs["alignment"], "in the model's own coordinates")
    phase = "training" if int(ex.attrs["session_shown"]) < int(ex.attrs["K_train"]) else "predicted"
    return (f"**Inferred update equation** ({note}):<br>{inferred}<br><br>**True rule:**<br>{true}<br><br>"
            f"Session {ex.attrs['session_shown']} ({phase}); within-session R² {ex.attrs['r2_session']:.3f}.")


# ------------------------------------------------------------------------------------------------------------------
# Tables and the notebook's discussion, built from the Dataset
# ------------------------------------------------------------------------------------------------------------------
def ablation_table(ds: xr.Dataset):
    """The joint fit against the two-stage fit, per benchmark: rule error (where a true rule exists) and the
    connectivity error under unseen schedules (pandas DataFrame)."""
    import pandas as pd

    from lab.methods.steer.claims import rule_error

    rows = []
    for b in ds.benchmark.values:
        sub = ds.sel(benchmark=b)
        keep = np.isfinite(sub.xi_true.values).all(axis=1)
        rule = {v: (rule_error(sub[v].values[keep], sub.xi_true.values[keep]) if keep.any() else np.nan)
                for v in ("xi_inferred", "xi_two_stage")}
        rows.append({"benchmark": str(b), "rule error, joint": rule["xi_inferred"],
                     "rule error, two-stage": rule["xi_two_stage"],
                     "connectivity error, joint": float(sub.conn_error.sel(model="steer")),
                     "connectivity error, two-stage": float(sub.conn_error_two_stage)})
    return pd.DataFrame(rows).set_index("benchmark").round(4)


def _claim_line(r) -> str:
    control = "" if r.control_measured is None else f", control {r.control_measured:.3g} ({r.control_label})"
    return f"`{r.name}`: measured {r.measured:.3g} (required {r.op} {r.threshold:g}){control}: **{r.verdict}**"


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown: every number read from the run's Dataset."""
    from lab.claims import evaluate
    from lab.methods.steer.claims import CLAIMS

    res = {r.name: r for r in evaluate(CLAIMS, ds)}
    names = [str(b) for b in ds.benchmark.values]
    lines = ["**Claims against their controls.**", ""]
    lines += [f"- {_claim_line(r)}" for r in res.values() if r.verdict != "reported"]
    r2 = ds.r2_predicted
    rec = ds.r2_recurrent
    raw = "; ".join(f"{b}: STEER {float(r2.sel(benchmark=b, model='steer')):.3f}, frozen "
                    f"{float(r2.sel(benchmark=b, model='frozen')):.3f}, free "
                    f"{float(r2.sel(benchmark=b, model='free')):.3f}" for b in names)
    recurrent = "; ".join(f"{b}: STEER {float(rec.sel(benchmark=b, model='steer')):.3f}, frozen "
                          f"{float(rec.sel(benchmark=b, model='frozen')):.3f}, free "
                          f"{float(rec.sel(benchmark=b, model='free')):.3f}, true model "
                          f"{float(ds.r2_oracle_recurrent.sel(benchmark=b)):.3f}" for b in names)
    lines += ["", "**Held-out sessions.** Scored by a free rollout over the whole session with the predicted "
              "connectivity, the activity R² of STEER and of the no-plasticity models (where the inputs drive most "
              f"of the activity, both are close to 1): {raw}. The R² of the recurrent part: {recurrent}."]
    if "heldout_r2" in res:
        r = res["heldout_r2"]
        lines += ["", f"**Held-out R², each unseen schedule apart** (the claim takes the worst schedule: one that "
                  "leaves the connectivity where training ended cannot tell plasticity from none): STEER "
                  f"{r.measured:.3f} at worst ({r.detail}). The control, no plasticity (c frozen at the first "
                  "training session or carried forward from the last, each measured as STEER, the better of the "
                  "two), reaches "
                  f"{r.control_measured:.3f} on its best benchmark ({r.control_detail}). The claim: **{r.verdict}**."]
    if "heldout_r2_off_assumption" in res:
        r = res["heldout_r2_off_assumption"]
        lines += ["", f"**Held-out R² off the assumptions** (report row, no verdict): {r.detail}."]
        if r.measured < r.threshold:
            lines[-1] += (" The true model reproduces these sessions and STEER does not reach the bar: a rank-R "
                          "change of the connectivity cannot follow the full-rank one.")
    if "train_fit_share" in ds:
        share = ds.train_fit_share
        lines += ["", "**Competence of the learned baselines** on the training sessions each was fitted on (the "
                  "share of a reference's excess error over the truth's that it removes; 1 the truth, 0 the "
                  "reference: one static connectivity for the GRU, none for frozen and free, one session's fit "
                  "each; the claims ask for more than 0.5): " + "; ".join(
                      f"{b}: " + ", ".join(f"{m} {float(share.sel(benchmark=b, model=m)):.3f}"
                                           for m in ("frozen", "free", "blackbox")) for b in names) + "."]
    ev = ds.fit_evaluations
    lines += ["", "**Black-box baseline budget.** The GRU is trained by the same L-BFGS with the same iteration "
              "budget as STEER; loss evaluations STEER / GRU: " + "; ".join(
                  f"{b}: {int(ev.sel(benchmark=b, fit='steer'))} / {int(ev.sel(benchmark=b, fit='blackbox'))}"
                  for b in names) + "."]
    if "joint_vs_two_stage" in res:
        r = res["joint_vs_two_stage"]
        lines += ["", f"**Joint loss against the two-stage fit** (report row, no verdict): connectivity error "
                  f"two-stage / joint {r.measured:.3f} at the worst benchmark ({r.detail})."]
    if "off_assumption_bcm" in res:
        r = res["off_assumption_bcm"]
        lines += ["", f"**Connectivity off the assumptions** (full-rank BCM synapses with a hidden sliding "
                  f"threshold; report row, no verdict): mean {r.measured:.3g} over {len(r.per_seed or ())} seeds, "
                  f"{r.detail}."]
    lines += ["", "**Departures from the paper.** The paper's optimiser, penalty weights and rule selection are not "
              f"public; here the joint loss (lambda_cons = {ds.attrs.get('lambda_cons', '?')}, lambda_smooth = "
              f"{ds.attrs.get('lambda_smooth', '?')}) starts from alternating least squares and runs L-BFGS, and "
              "the rule is chosen by best-subset BIC rather than thresholding. Every unit is recorded and φ is "
              "known. The DBS-rat and task-learning benchmarks are not reproduced. Dashboard: `lab serve steer`."]
    return "\n".join(lines)
