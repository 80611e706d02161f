"""HoloViews plots for CompreSSM results (notebook ``03_compressm``), and the notebook's discussion built from the
Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts

MODEL_STYLE = {
    "full": {"color": "black", "label": "full size", "marker": "square"},
    "compressm": {"color": PALETTE[0], "label": "CompreSSM", "marker": "circle"},
    "scratch": {"color": PALETTE[1], "label": "from scratch at the final size", "marker": "triangle"},
    "random": {"color": "#777777", "label": "random states kept", "marker": "x"},
}
#: the second runs of the controls: a second from-scratch seed, a second random truncation
SECOND_STYLE = {
    "scratch_b": {"color": PALETTE[2], "label": "from scratch, second seed", "marker": "inverted_triangle"},
    "random_b": {"color": "#bbbbbb", "label": "random states, other draws", "marker": "x"},
}


def per_seed_accuracy(ds: xr.Dataset, tau: float | None = None) -> hv.Overlay:
    """Final test accuracy of every run on each seed at one τ: what the claims count (the regime: full above from
    scratch by more than 2 pt; CompreSSM above from scratch and above random truncation by more than 1 pt)."""
    tau = float(ds.attrs["claim_tau"]) if tau is None else tau
    items = []
    styles = {**MODEL_STYLE, **SECOND_STYLE}
    seeds = ds.seed.values.astype(float)
    offsets = np.linspace(-0.3, 0.3, len(styles))
    for dx, (model, st) in zip(offsets, styles.items()):
        acc = ds.accuracy.sel(model=model, tau=tau).values
        items.append(hv.Scatter((seeds + dx, acc), "seed", "accuracy (%)", label=st["label"]).opts(
            color=st["color"], marker=st["marker"], size=12, tools=["hover"]))
    return hv.Overlay(items).opts(title=f"final accuracy per seed (τ={tau:g}): what the claims count",
                                  legend_position="right", xticks=[(s, str(int(s))) for s in seeds],
                                  **curve_opts(width=820, height=380))


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
        width=620, height=400, tools=["hover"], xrotation=90, show_legend=False)


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
    """Training cost of each run relative to the full model (mean over seeds), at every τ: counted multiply-adds
    (the claim's measure) and the training time replayed with each size's step timed in turn in one process."""
    rows = []
    for tau in ds.tau.values:
        for model in MODEL_STYLE:
            for var, what in (("train_work", "multiply-adds"), ("train_time_replayed", "replayed time")):
                v = float((ds[var].sel(model=model, tau=tau) / ds[var].sel(model="full", tau=tau)).mean("seed"))
                if np.isfinite(v):
                    rows.append((f"τ={tau:g}, {what}", MODEL_STYLE[model]["label"], v))
    run = hv.Dimension("run", values=[s["label"] for s in MODEL_STYLE.values()])
    colours = {s["label"]: s["color"] for s in MODEL_STYLE.values()}
    return hv.Bars(rows, ["measure", run], "relative to full").opts(
        title="training cost relative to the full model", color=hv.dim("run").categorize(colours),
        tools=["hover"], width=680, height=360, xrotation=30, show_legend=False)


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    total = int(ds.attrs["d_state"]) * int(ds.attrs["n_layers"])
    tau = float(ds.attrs["claim_tau"])
    final = ds.state_size.sel(model="compressm").sum("layer").mean("seed") / total
    sizes = ", ".join(f"τ = {t:g}: {float(final.sel(tau=t)):.0%}" for t in ds.tau.values)
    acc = {m: ds.accuracy.sel(model=m, tau=tau).values for m in ds.model.values}
    work = (ds.train_work.sel(model="compressm") / ds.train_work.sel(model="full")).sel(tau=tau).values
    cpu = (ds.train_cost.sel(model="compressm") / ds.train_cost.sel(model="full")).sel(tau=tau).values
    replay = (ds.train_time_replayed.sel(model="compressm") / ds.train_time_replayed.sel(model="full")).sel(
        tau=tau).values
    cond = float(ds.gramian_condition.max())
    size = ds.state_size.sel(model="compressm").sum("layer")
    gaps = "; ".join(
        f"τ = {t:g} (~{float(size.sel(tau=t).mean()):.0f} states): "
        + ", ".join(f"{g:+.1f}" for g in (ds.accuracy.sel(model="full", tau=t)
                                          - ds.accuracy.sel(model="scratch", tau=t)).values)
        for t in ds.tau.values)
    return "\n".join([
        f"- **Regime** (H = {ds.attrs['d_model']}, N = {ds.attrs['d_state']}): the full model minus the "
        f"from-scratch model at CompreSSM's final size, seed by seed (pt): {gaps}. Only where this gap exceeds 2 pt "
        f"on every seed does the state size limit the model, and only there "
        "can starting large and shrinking beat training small: the paper's claims are gated on it.",
        f"- **Final size** (mean over seeds, share of the {total} initial states): {sizes}. Each check cuts τ of "
        f"the current HSV mass, so the final size depends on τ and on the number of checks ({ds.sizes['check']} "
        "here).",
        f"- **Accuracy at τ = {tau:g}** (%): full {spread_text(acc['full'])}, "
        f"CompreSSM {spread_text(acc['compressm'])}, "
        f"from scratch at the same sizes {spread_text(acc['scratch'])} (a second from-scratch seed "
        f"{spread_text(acc['scratch_b'])}), random truncation {spread_text(acc['random'])} (a second one "
        f"{spread_text(acc['random_b'])}). The second runs show how far seeds and draws alone move the numbers.",
        f"- **Training cost** relative to the full model: counted multiply-adds {spread_text(work)}; time replayed "
        f"with each size's step timed in turn in one process {spread_text(replay)} (per-step overheads that do not "
        f"shrink with the states included); CPU time measured during training {spread_text(cpu)} (it moves with the "
        "machine's load). The first part of training runs at (nearly) full size, so the saving is smaller than the "
        "final size suggests.",
        f"- The Gramians' worst condition number was {cond:.3g}; the square-root method (eigen-based factors, SVD "
        "of Loᴴ Lc, inverting only the kept σ) handles it, and the tests check the H∞ bound on such systems.",
        f"- Accuracy is measured on {ds.attrs['n_test']} test sequences of {ds.attrs['dataset']} (one sequence = "
        f"{100 / ds.attrs['n_test']:.2f} pt), over {ds.sizes['seed']} seed(s).",
    ])
