"""HoloViews plots for AIRE-Prune results (notebook ``02_aire_prune`` and the ``pruning`` dashboard), and the
notebook's discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr
from scipy import stats

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts, log_ticks

SCORE_STYLE = {
    "aire": {"color": PALETTE[0], "label": "AIRE (global)", "dash": "solid"},
    "last": {"color": PALETTE[1], "label": "LAST", "dash": "solid"},
    "magnitude": {"color": PALETTE[3], "label": "|λ| magnitude", "dash": "dashed"},
    "random": {"color": "#777777", "label": "random", "dash": "dotted"},
    "aire_uniform": {"color": PALETTE[2], "label": "AIRE per layer", "dash": "dashdot"},
}


def score_style(score: str) -> dict:
    """Colour, label and line dash of a pruning score (the notebook's and the dashboard's legend)."""
    return SCORE_STYLE.get(score, {"color": "black", "label": score, "dash": "solid"})


def accuracy_curves(ds: xr.Dataset, kind: str, ratio: float | None = None) -> hv.Overlay:
    """Test accuracy against the share of states pruned, one curve per score (mean over seeds; random ± s.d.).

    A dotted line marks one point below the unpruned accuracy; a vertical line marks ``ratio`` (default: the
    headline ratio of the run).
    """
    sub = ds.sel(kind=kind)
    full = float(sub.accuracy_full.mean())
    items = []
    for score in sub.score.values:
        st = score_style(str(score))
        x = sub.pruned_fraction.sel(score=score).mean("seed").values
        y = sub.accuracy.sel(score=score).mean("seed").values
        if str(score) == "random" and "accuracy_sd" in sub:
            sd = sub.accuracy_sd.sel(score=score).mean("seed").values
            items.append(hv.Area((x, y - sd, y + sd), "pruned fraction", ["lo", "hi"]).opts(
                color=st["color"], alpha=0.15, line_alpha=0))
        items.append(hv.Curve((x, y), "pruned fraction", "accuracy (%)", label=st["label"]).opts(
            color=st["color"], line_dash=st["dash"], line_width=2.5 if score == "aire" else 1.8))
        items.append(hv.Scatter((x, y), "pruned fraction", "accuracy (%)").opts(color=st["color"], size=5))
    r = float(ds.attrs.get("headline_ratio", 0.5)) if ratio is None else ratio
    items.append(hv.HLine(full - 1.0).opts(color="gray", line_dash="dotted", line_width=1))
    items.append(hv.VLine(r).opts(color="black", line_dash="dashed", line_width=1))
    return hv.Overlay(items).opts(
        title=f"{kind.upper()}: accuracy after pruning (no retraining)",
        legend_position="bottom_left", **curve_opts(ylim=(0, 102), xlim=(-0.02, 1.0)),
    )


def states_per_layer(ds: xr.Dataset, kind: str, ratio: float) -> hv.Bars:
    """States each layer keeps at ``ratio`` for every score (first seed)."""
    sub = ds.states_kept.sel(kind=kind).sel(ratio=ratio, method="nearest").isel(seed=0)
    scores = [str(s) for s in sub.score.values]
    labels = [score_style(s)["label"] for s in scores]
    rows = [(f"layer {int(layer)}", score_style(s)["label"], int(sub.sel(score=s, layer=layer)))
            for layer in sub.layer.values for s in scores]
    score_dim = hv.Dimension("score", values=labels)
    colours = {score_style(s)["label"]: score_style(s)["color"] for s in scores}
    return hv.Bars(rows, ["layer", score_dim], "states kept").opts(
        title=f"{kind.upper()}: states kept per layer at {float(sub.ratio):.0%} pruned", width=560, height=340,
        xrotation=45, tools=["hover"], show_legend=False, color=hv.dim("score").categorize(colours))


def eigenvalues(ds: xr.Dataset, kind: str, layer: int = 0) -> hv.Overlay:
    """One layer's eigenvalues λ in the complex plane: kept (blue) or pruned (red) by AIRE at the headline ratio,
    marker area growing with the AIRE energy."""
    sub = ds.sel(kind=kind, layer=layer).isel(seed=0)
    sub = sub.isel(state=np.flatnonzero(np.isfinite(sub.energy.values)))  # the kind's own states
    kept = sub.kept_headline.values.astype(bool)
    e = sub.energy.values
    size = 4 + 14 * np.sqrt(e / e.max())
    t = np.linspace(0, 2 * np.pi, 200)
    circle = hv.Curve((np.cos(t), np.sin(t)), "Re λ", "Im λ").opts(color="gray", line_dash="dotted")
    pts = []
    for mask, colour, label in ((kept, PALETTE[0], "kept"), (~kept, PALETTE[1], "pruned")):
        data = {"Re λ": sub.eig_real.values[mask], "Im λ": sub.eig_imag.values[mask], "size": size[mask],
                "energy": e[mask]}
        pts.append(hv.Points(data, ["Re λ", "Im λ"], ["size", "energy"], label=label).opts(
            color=colour, size="size", alpha=0.7, tools=["hover"]))
    r = float(ds.attrs.get("headline_ratio", 0.5))
    return hv.Overlay([circle, *pts]).opts(
        title=f"{kind.upper()} layer {layer}: λ kept by AIRE at {r:.0%}", width=420,
        height=420, data_aspect=1, show_grid=True, legend_position="top_left")


def energy_spectrum(ds: xr.Dataset, kind: str) -> hv.Overlay:
    """Each layer's AIRE energies sorted in decreasing order, as shares of the layer's total (log scale)."""
    sub = ds.energy.sel(kind=kind).isel(seed=0)
    items = []
    for k, layer in enumerate(sub.layer.values):
        e = np.sort(sub.sel(layer=layer).values)[::-1]
        e = e[np.isfinite(e)]  # the kind's own states
        items.append(hv.Curve((np.arange(1, len(e) + 1), e / e.sum()), "rank", "share of layer energy",
                              label=f"layer {int(layer)}").opts(color=PALETTE[k % len(PALETTE)]))
    return hv.Overlay(items).opts(title=f"{kind.upper()}: AIRE energy by rank", logy=True,
                                  legend_position="top_right", **curve_opts())


def compute_saved(ds: xr.Dataset) -> hv.Overlay:
    """SSM multiply-adds and measured inference time of the AIRE-pruned models, relative to unpruned."""
    items = []
    for k, kind in enumerate(ds.kind.values):
        sub = ds.sel(kind=kind)
        x = sub.pruned_fraction.sel(score="aire").mean("seed").values
        macs = (sub.ssm_macs.sel(score="aire") / sub.ssm_macs.sel(score="aire", ratio=0.0)).mean("seed").values
        total = (sub.model_macs.sel(score="aire") / sub.model_macs.sel(score="aire", ratio=0.0)).mean("seed").values
        t = (sub.inference_time / sub.inference_time.sel(ratio=0.0)).mean("seed").values
        c = PALETTE[k % len(PALETTE)]
        items += [
            hv.Curve((x, macs), "pruned fraction", "relative cost", label=f"{kind}: SSM multiply-adds").opts(
                color=c, line_dash="dashed"),
            hv.Curve((x, total), "pruned fraction", "relative cost", label=f"{kind}: model multiply-adds").opts(
                color=c, line_dash="dotted"),
            hv.Curve((x, t), "pruned fraction", "relative cost", label=f"{kind}: inference time").opts(
                color=c, line_width=2.5),
            hv.Scatter((x, t), "pruned fraction", "relative cost").opts(color=c, size=5),
        ]
    return hv.Overlay(items).opts(title="compute of the AIRE-pruned models (1 = unpruned)",
                                  legend_position="bottom_left", **curve_opts())


# ------------------------------------------------------------------------------------------------------------------
# The pruning dashboard's views of a live model.
# ------------------------------------------------------------------------------------------------------------------
def sweep_curves(sweep: xr.Dataset, full_accuracy: float, ratio: float, score: str, kind: str) -> hv.Overlay:
    """Accuracy against ratio for each score of a live model, the chosen ratio marked."""
    items = []
    for s in sweep.score.values:
        st = score_style(str(s))
        y = sweep.accuracy.sel(score=s).values
        items.append(hv.Curve((sweep.ratio.values, y), "pruning ratio", "accuracy (%)", label=st["label"]).opts(
            color=st["color"], line_dash=st["dash"], line_width=3 if s == score else 1.5))
    current = float(sweep.accuracy.sel(score=score).interp(ratio=ratio))
    items.append(hv.HLine(full_accuracy - 1.0).opts(color="gray", line_dash="dotted", line_width=1))
    items.append(hv.VLine(ratio).opts(color="black", line_dash="dashed", line_width=1))
    items.append(hv.Scatter(([ratio], [current]), "pruning ratio", "accuracy (%)").opts(
        color=score_style(score)["color"], size=10, marker="diamond"))
    return hv.Overlay(items).opts(title=f"{kind.upper()}: accuracy against pruning ratio (ratio = {ratio:.2f})",
                                  legend_position="bottom_left",
                                  **curve_opts(width=520, ylim=(0, 102), xlim=(0, 1)))


def kept_bars(kept: list[int], sizes: list[int], score: str, ratio: float) -> hv.Bars:
    """States kept (and pruned) in each layer."""
    rows = [(f"layer {k}", part, n) for k, (m, n0) in enumerate(zip(kept, sizes))
            for part, n in (("kept", m), ("pruned", n0 - m))]
    part = hv.Dimension("part", values=["kept", "pruned"])
    return hv.Bars(rows, ["layer", part], "states").opts(
        stacked=True, color=hv.dim("part").categorize({"kept": PALETTE[0], "pruned": "#d9d9d9"}), tools=["hover"],
        width=480, height=340,
        title=f"states kept per layer, ratio = {ratio:.2f} ({sum(kept)} of {sum(sizes)})",
        legend_position="right")


def impulse_before_after(k_full: np.ndarray, k_pruned: np.ndarray, layer: int) -> hv.Layout:
    """A layer's SSM kernel before and after pruning: its norm over lags (log scale) and one channel's response.

    Arguments:
        k_full, k_pruned: ``(length, H_out, H_in)`` kernels (:meth:`lab.core.ssm.DiagonalSSM.impulse_response`).
    """
    lags = np.arange(len(k_full))
    nf = np.linalg.norm(k_full.reshape(len(k_full), -1), axis=1)
    npr = np.linalg.norm(k_pruned.reshape(len(k_pruned), -1), axis=1)
    floor = max(nf.max() * 1e-8, 1e-30)
    lag = hv.Dimension("lag")
    norm_dim = hv.Dimension("kernel_norm", label="‖K_k‖ (Frobenius)")
    resp_dim = hv.Dimension("response", label="K_k[0, 0]")
    norm = (hv.Curve((lags, np.maximum(nf, floor)), lag, norm_dim, label="before").opts(color=PALETTE[0],
                                                                                         line_width=2.5)
            * hv.Curve((lags, np.maximum(npr, floor)), lag, norm_dim, label="after").opts(
                color=PALETTE[1], line_dash="dashed", line_width=2)).opts(
        title=f"layer {layer}: kernel norm per lag", logy=True, legend_position="top_right",
        yticks=log_ticks(min(np.maximum(nf, floor).min(), np.maximum(npr, floor).min()), nf.max()),
        **curve_opts(width=460))
    ch = (hv.Curve((lags, k_full[:, 0, 0]), lag, resp_dim, label="before").opts(color=PALETTE[0], line_width=2.5)
          * hv.Curve((lags, k_pruned[:, 0, 0]), lag, resp_dim, label="after").opts(
              color=PALETTE[1], line_dash="dashed", line_width=2)).opts(
        title=f"layer {layer}: impulse response, channel 0 -> 0", legend_position="top_right",
        **curve_opts(width=460))
    return (norm + ch).cols(2)


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    r = float(ds.attrs["headline_ratio"])
    beyond = ds.ratio[ds.ratio >= r]
    lines = []
    for kind in ds.kind.values:
        sub = ds.sel(kind=kind)
        full = sub.accuracy_full.values
        aire = sub.accuracy.sel(score="aire")
        drop = full - aire.sel(ratio=r).values
        within = sub.ratio.values[((sub.accuracy_full - aire) < 1.0).all("seed").values]
        gaps = {other: (aire - sub.accuracy.sel(score=other)).sel(ratio=beyond).mean("ratio").values
                for other in ("random", "magnitude", "last", "aire_uniform") if other in sub.score.values}
        text = (f"- **{kind.upper()}** (unpruned {spread_text(full)}%): at {r:.0%} of the states pruned AIRE loses "
                f"{spread_text(drop)} pt; every seed stays within one point up to {within.max():.0%} pruned.")
        names = {"random": "random states", "magnitude": "|λ| magnitude", "last": "LAST",
                 "aire_uniform": "AIRE per layer"}
        text += f" Mean gap of AIRE over ratios ≥ {r:.0%}: " + "; ".join(
            f"{names[k]} {spread_text(v)} pt" for k, v in gaps.items()) + "."
        lines.append(text)
    energy = ds.energy.isel(seed=0)
    share = (energy / energy.sum("state")).max("state").mean("layer")
    lines.append("- **Where the energy sits**: the largest state holds on average " + ", ".join(
        f"{float(share.sel(kind=k)):.1%} of its layer's energy in the {k.upper()}" for k in ds.kind.values)
        + " (a flat spectrum means every state matters and pruning must cost accuracy).")
    removed = ((ds.energy * (1 - ds.kept_headline)).sum(("layer", "state")) / ds.energy.sum(("layer", "state")))
    text = f"- **What AIRE removes** at {r:.0%} pruned: " + ", ".join(
        f"{100 * float(removed.sel(kind=k).mean()):.0f}% of the {k.upper()}'s energy (seeds "
        f"{100 * float(removed.sel(kind=k).min()):.0f}-{100 * float(removed.sel(kind=k).max()):.0f}%)"
        for k in ds.kind.values)
    if "gamma_norm" in ds and "lru" in ds.kind.values:
        norm = ds.gamma_norm.sel(kind="lru").values
        text += (f". The trained LRU's γ²/(1 − |λ|²) has median {np.nanmedian(norm):.2f} (5-95%: "
                 f"{np.nanpercentile(norm, 5):.2f}-{np.nanpercentile(norm, 95):.2f}): its γ still cancels AIRE's "
                 "denominator")
    lines.append(text + ".")
    radius = np.hypot(ds.eig_real, ds.eig_imag)
    rho = {k: np.mean([stats.spearmanr(*[v[np.isfinite(v)] for v in (
        ds.energy.sel(kind=k, seed=j, layer=m).values, radius.sel(kind=k, seed=j, layer=m).values)])[0]
        for j in ds.seed.values for m in ds.layer.values]) for k in ds.kind.values}
    lines.append("- **Energy against |λ|**: Spearman's ρ between a state's energy and its |λ| (mean over layers and "
                 "seeds) is " + ", ".join(f"{rho[k]:+.2f} in the {k.upper()}" for k in ds.kind.values)
                 + ". Where it is negative (S5 starts with Re Λ = -1/2 for every state, so its slow states are those "
                 "with small steps Δ, whose B̄ ≈ Δ B̃ is small), keeping the largest |λ| keeps low-energy states and "
                 "can do worse than random states.")
    saved = 1 - (ds.ssm_macs.sel(score="aire", ratio=r) / ds.ssm_macs.sel(score="aire", ratio=0.0)).mean()
    lines.append(f"- **Compute**: at {r:.0%} pruned the SSM layers' multiply-adds fall by {float(saved):.0%}.")
    lines.append(f"- Accuracy is measured on {ds.attrs['n_test']} test sequences of {ds.attrs['dataset']} "
                 f"(one sequence = {100 / ds.attrs['n_test']:.2f} pt), over {ds.sizes['seed']} seed(s); the claims "
                 "table states each statistic and its spread. Dashboard: `lab serve pruning`.")
    return "\n".join(lines)
