"""HoloViews plots for CompreSSM results (notebook ``03_compressm``)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

MODEL_STYLE = {
    "full": {"color": "black", "label": "full size", "marker": "square"},
    "compressm": {"color": PALETTE[0], "label": "CompreSSM", "marker": "circle"},
    "scratch": {"color": PALETTE[1], "label": "from scratch at the final size", "marker": "triangle"},
    "random": {"color": "#777777", "label": "random states kept", "marker": "x"},
}


def accuracy_vs_size(ds: xr.Dataset) -> hv.Overlay:
    """Final test accuracy against final total state size for every run (mean over seeds), τ next to the points."""
    items = []
    for model, st in MODEL_STYLE.items():
        acc = ds.accuracy.sel(model=model).mean("seed")
        size = ds.state_size.sel(model=model).sum("layer").mean("seed")
        keep = np.isfinite(acc.values)
        x, y = size.values[keep], acc.values[keep]
        if model == "full":
            x, y = x[:1], y[:1]
        elif len(x) > 1:
            order = np.argsort(x)
            items.append(hv.Curve((x[order], y[order]), "total states", "accuracy (%)").opts(
                color=st["color"], alpha=0.6))
        items.append(hv.Scatter((x, y), "total states", "accuracy (%)", label=st["label"]).opts(
            color=st["color"], marker=st["marker"], size=11, tools=["hover"]))
        if model == "compressm":
            taus = ds.tau.values[keep]
            items.append(hv.Labels({"total states": x, "accuracy (%)": y,
                                    "τ": [f"τ={t:g}" for t in taus]}, ["total states", "accuracy (%)"], "τ").opts(
                text_font_size="9pt", yoffset=0.6, text_color=st["color"]))
    return hv.Overlay(items).opts(title="accuracy against final state size", legend_position="bottom_right",
                                  **curve_opts())


def size_during_training(ds: xr.Dataset) -> hv.Overlay:
    """Total states after each reduction check: CompreSSM at every τ and random truncation."""
    items = []
    steps = np.concatenate([[0], ds.check.values])
    total0 = int(ds.attrs["d_state"]) * int(ds.attrs["n_layers"])
    for t, tau in enumerate(ds.tau.values):
        for model, dash in (("compressm", "solid"), ("random", "dotted")):
            h = ds.size_history.sel(model=model, tau=tau).sum("layer").mean("seed").values
            if model == "random" and not np.isfinite(ds.accuracy.sel(model="random", tau=tau)).any():
                continue
            y = np.concatenate([[total0], h])
            label = f"{MODEL_STYLE[model]['label']}, τ={tau:g}"
            items.append(hv.Curve((steps, y), "training step", "total states", label=label).opts(
                color=PALETTE[t % len(PALETTE)], line_dash=dash, interpolation="steps-post", line_width=2))
    return hv.Overlay(items).opts(title="state size during the reduction window", legend_position="top_right",
                                  **curve_opts())


def hsv_spectra(ds: xr.Dataset, tau: float | None = None, layer: int = 0) -> hv.Overlay:
    """Hankel singular values (relative to the largest) of one block at each check of a CompreSSM run, and those
    of the trained full model."""
    tau = float(ds.attrs["claim_tau"]) if tau is None else tau
    sub = ds.hsv_check.sel(tau=tau, layer=layer).isel(seed=0)
    items = []
    for c, step in enumerate(sub.check.values):
        h = sub.sel(check=step).dropna("sv").values
        if len(h) == 0 or h[0] <= 0:
            continue
        items.append(hv.Curve((np.arange(1, len(h) + 1), h / h[0]), "index", "σ / σ₁",
                              label=f"step {int(step)}").opts(color=PALETTE[c % len(PALETTE)]))
    full = ds.hsv_full.sel(layer=layer).isel(seed=0).dropna("sv").values
    if len(full) and full[0] > 0:
        items.append(hv.Curve((np.arange(1, len(full) + 1), full / full[0]), "index", "σ / σ₁",
                              label="full model, trained").opts(color="black", line_dash="dashed"))
    return hv.Overlay(items).opts(title=f"Hankel singular values, block {layer} (CompreSSM τ={tau:g})", logy=True,
                                  legend_position="top_right", **curve_opts())


def cut_comparison(ds: xr.Dataset, tau: float | None = None) -> hv.Bars:
    """Accuracy at each cut of a CompreSSM run: before it, after balanced truncation, after random states."""
    tau = float(ds.attrs["claim_tau"]) if tau is None else tau
    sub = ds.cut_accuracy.sel(tau=tau).mean("seed")
    labels = {"before": "before the cut", "hsv": "balanced truncation", "random": "random states"}
    colours = {"before the cut": "#bbbbbb", "balanced truncation": PALETTE[0], "random states": PALETTE[1]}
    rows = [(f"step {int(step)}", labels[str(c)], float(sub.sel(check=step, cut=c)))
            for step in sub.check.values for c in sub.cut.values if np.isfinite(sub.sel(check=step, cut=c))]
    cut = hv.Dimension("cut", values=list(labels.values()))
    return hv.Bars(rows, ["check", cut], "accuracy (%)").opts(
        title=f"right after each cut (τ={tau:g}): which states to keep", color=hv.dim("cut").categorize(colours),
        width=620, height=340, tools=["hover"], xrotation=30, show_legend=False)


def training_curves(ds: xr.Dataset, tau: float | None = None) -> hv.Overlay:
    """Test accuracy during training for each run at one τ."""
    tau = float(ds.attrs["claim_tau"]) if tau is None else tau
    items = []
    for model, st in MODEL_STYLE.items():
        y = ds.eval_accuracy.sel(model=model, tau=tau).mean("seed").values
        if not np.isfinite(y).any():
            continue
        items.append(hv.Curve((ds.point.values, y), "training step", "accuracy (%)", label=st["label"]).opts(
            color=st["color"], line_width=2))
        items.append(hv.Scatter((ds.point.values, y), "training step", "accuracy (%)").opts(
            color=st["color"], marker=st["marker"], size=7))
    if ds.sizes["check"]:
        items.append(hv.VLine(float(ds.check.values.max())).opts(color="gray", line_dash="dotted"))
    return hv.Overlay(items).opts(title=f"test accuracy during training (τ={tau:g}; dotted: end of reductions)",
                                  legend_position="bottom_right", **curve_opts(ylim=(0, 102)))


def training_time(ds: xr.Dataset) -> hv.Bars:
    """Training cost of each run (mean over seeds), at every τ: one-thread CPU seconds with stalls removed."""
    rows = []
    for tau in ds.tau.values:
        for model in MODEL_STYLE:
            v = float(ds.train_cost.sel(model=model, tau=tau).mean("seed"))
            if np.isfinite(v):
                rows.append((f"τ={tau:g}", MODEL_STYLE[model]["label"], v))
    run = hv.Dimension("run", values=[s["label"] for s in MODEL_STYLE.values()])
    colours = {s["label"]: s["color"] for s in MODEL_STYLE.values()}
    return hv.Bars(rows, ["tau", run], "CPU time (s)").opts(
        title="training time (one thread, CPU s, stalls removed)", color=hv.dim("run").categorize(colours),
        tools=["hover"], width=620, height=340, xrotation=30, show_legend=False)
