"""HoloViews plots for WSC results (notebook ``16_wsc``, the ``forgetting`` dashboard), and the notebook's
discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts, text_colour

__all__ = ["VARIANT_STYLE", "ablation", "accuracy_matrix", "accuracy_vs_memory", "cost", "discussion",
           "last_task_loss", "stability_plasticity"]

VARIANT_STYLE = {
    "replay": {"color": "black", "label": "replay", "marker": "square"},
    "reset": {"color": PALETTE[1], "label": "reset only", "marker": "triangle"},
    "swa": {"color": PALETTE[2], "label": "averaging only", "marker": "diamond"},
    "wsc": {"color": PALETTE[0], "label": "WSC (reset + averaging)", "marker": "circle"},
    "replay_b": {"color": "#999999", "label": "replay, other batch order", "marker": "x"},
    "replay_rewarm": {"color": PALETTE[6], "label": "replay, re-warmed (WSC's schedule)", "marker": "square_pin"},
    "wsc_noavg": {"color": PALETTE[3], "label": "WSC without averaging", "marker": "inverted_triangle"},
    "wsc_official": {"color": PALETTE[5], "label": "WSC, official (no-op) reset", "marker": "hex"},
}


def _label(variant: str) -> str:
    return VARIANT_STYLE.get(variant, {"label": variant})["label"]


def accuracy_vs_memory(ds: xr.DataArray | xr.Dataset) -> hv.Overlay:
    """Final average accuracy (ACC) against the replay memory share for every variant: mean over seeds with a
    min-max band, and full retraining as the dashed upper reference (the paper's main figure)."""
    items = []
    shares = ds.share.values
    for variant in ("replay", "reset", "swa", "wsc"):
        st = VARIANT_STYLE[variant]
        a = ds.acc.sel(variant=variant)
        mean, lo, hi = a.mean("seed").values, a.min("seed").values, a.max("seed").values
        items.append(hv.Area((shares, lo, hi), "memory share", ["ACC low", "ACC high"]).opts(
            color=st["color"], alpha=0.12, line_alpha=0))
        items.append(hv.Curve((shares, mean), "memory share", "ACC (%)", label=st["label"]).opts(
            color=st["color"], line_width=2))
        items.append(hv.Scatter((shares, mean), "memory share", "ACC (%)", label=st["label"]).opts(
            color=st["color"], marker=st["marker"], size=9, tools=["hover"]))
    joint = float(ds.joint_accuracy.mean())
    items.append(hv.HLine(joint, label="full retraining").opts(color="#777777", line_dash="dashed"))
    n = ds.sizes["seed"]
    return hv.Overlay(items).opts(title=f"final average accuracy against memory ({n} seeds, band min-max; dashed: "
                                        f"full retraining {joint:.1f}%)", legend_position="bottom_right",
                                  **curve_opts(width=640, height=380))


def accuracy_matrix(R: xr.DataArray, title: str | None = None) -> hv.HeatMap:
    """The accuracy matrix as a heat map: row ``after`` (task just trained) against column ``task`` (task tested).

    Arguments:
        R: ``(after, task)`` accuracies in %, e.g. ``ds.accuracy_matrix.sel(share=0.8, variant="wsc").mean("seed")``
            or :func:`lab.methods.wsc.live.accuracy_matrix`.
    """
    if set(R.dims) != {"after", "task"}:
        raise ValueError(f"R must have dims (after, task), got {R.dims}")
    R = R.transpose("after", "task")
    after, task = np.meshgrid(R.after.values, R.task.values, indexing="ij")
    data = (task.ravel().astype(str), after.ravel().astype(str), R.values.ravel())
    heat = hv.HeatMap(data, ["task tested", "after training task"], "accuracy (%)")
    labels = hv.Labels({"task tested": task.ravel().astype(str), "after training task": after.ravel().astype(str),
                        "text": [f"{v:.0f}" for v in R.values.ravel()],
                        "colour": [text_colour(v, "Blues", (0, 100)) for v in R.values.ravel()]},
                       ["task tested", "after training task"], ["text", "colour"])
    return (heat.opts(cmap="Blues", clim=(0, 100), colorbar=True, tools=["hover"], invert_yaxis=True)
            * labels.opts(text_font_size="9pt", text_color="colour")).opts(title=title or "accuracy matrix",
                                                                             width=420, height=360)


def stability_plasticity(ds: xr.Dataset, share: float | None = None) -> hv.Overlay:
    """Backward transfer against newest-task accuracy at one memory share: one point per seed and variant, the
    means large. Up is stabler (less forgetting), right is more plastic."""
    share = float(ds.attrs["claim_share"]) if share is None else share
    items = []
    for variant, st in VARIANT_STYLE.items():
        p, b = ds.plasticity.sel(share=share, variant=variant), ds.bwt.sel(share=share, variant=variant)
        if not np.isfinite(p.values).any():
            continue
        items.append(hv.Scatter((p.values, b.values), "newest-task accuracy (%)", "BWT (%)").opts(
            color=st["color"], marker=st["marker"], size=6, alpha=0.5))
        hollow = variant == "wsc_official"  # lands on averaging only: drawn open so that both show
        items.append(hv.Scatter(([float(p.mean())], [float(b.mean())]), "newest-task accuracy (%)", "BWT (%)",
                                label=st["label"]).opts(color=st["color"], marker=st["marker"],
                                                        size=20 if hollow else 14, fill_alpha=0 if hollow else 1,
                                                        line_width=2, tools=["hover"]))
    return hv.Overlay(items).opts(title=f"stability against plasticity at memory share {share:g}",
                                  legend_position="right", **curve_opts(width=820))


def last_task_loss(ds: xr.Dataset, share: float | None = None, seed: int | None = None) -> hv.Overlay:
    """Training loss on the last task (one seed): the reset's jump and the averaging phase, with its start
    marked."""
    share = float(ds.attrs["claim_share"]) if share is None else share
    sub = ds.last_task_loss.sel(share=share)
    sub = sub.isel(seed=0) if seed is None else sub.sel(seed=seed)
    items = []
    for variant in ("replay", "reset", "swa", "wsc"):
        st = VARIANT_STYLE[variant]
        items.append(hv.Curve((sub.step.values, sub.sel(variant=variant).values), "step", "loss",
                              label=st["label"]).opts(color=st["color"], line_width=1.5))
    start = int(round(float(ds.attrs["reset_at"]) * ds.sizes["step"]))
    items.append(hv.VLine(start).opts(color="#777777", line_dash="dotted"))
    return hv.Overlay(items).opts(title=f"training loss on the last task (reset and averaging from step {start})",
                                  legend_position="top_right", **curve_opts())


def ablation(ds: xr.Dataset) -> hv.Overlay:
    """ACC minus replay's at the claim share for every other variant: the mean over seeds as a bar (one colour per
    variant), each seed as a point. WSC's halves, WSC, and its ablations on WSC's own schedule side by side."""
    share = float(ds.attrs["claim_share"])
    at = ds.acc.sel(share=share)
    base = at.sel(variant="replay").values
    bars, points = [], []
    for variant, st in VARIANT_STYLE.items():
        if variant == "replay":
            continue
        gain = at.sel(variant=variant).values - base
        bars.append((st["label"], float(np.mean(gain)), st["color"]))
        points += [(st["label"], float(g)) for g in gain]
    n = ds.sizes["seed"]
    return (hv.Bars(bars, "variant", ["ACC minus replay (pt)", "colour"]).opts(color="colour", tools=["hover"])
            * hv.Scatter(points, "variant", "ACC minus replay (pt)").opts(color="black", size=5, alpha=0.7)
            * hv.HLine(0).opts(color="#777777", line_width=1)).opts(
        title=f"ACC gain over replay at memory share {share:g} (bars: mean of {n} seeds; points: seeds)",
        width=700, height=400, xrotation=25, show_legend=False)


def cost(ds: xr.Dataset) -> hv.Bars:
    """Training CPU time of tasks 1.. per variant at the claim share (mean over seeds), with equal step budgets."""
    share = float(ds.attrs["claim_share"])
    rows = []
    for variant in VARIANT_STYLE:
        t = ds.train_cpu_time.sel(share=share, variant=variant)
        if np.isfinite(t.values).any():
            rows.append((_label(variant), float(t.mean())))
    return hv.Bars(rows, "variant", "CPU seconds").opts(
        title=f"training CPU time (tasks 1.., {int(ds.train_steps.max())} steps each run)", tools=["hover"],
        width=560, height=340, xrotation=20, color=PALETTE[0])


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    share = float(ds.attrs["claim_share"])
    at = ds.sel(share=share)

    def gain(var, a, b="replay"):
        return spread_text(at[var].sel(variant=a).values - at[var].sel(variant=b).values)

    by_share = ", ".join(
        f"{s:g}: {float((ds.acc.sel(share=s, variant='wsc') - ds.acc.sel(share=s, variant='replay')).mean()):+.2f}"
        for s in ds.share.values)
    cpu = at.train_cpu_time.sel(variant="wsc").values / at.train_cpu_time.sel(variant="replay").values
    no_avg, paper = gain("acc", "wsc", "wsc_noavg"), gain("acc", "wsc", "wsc_official")
    official_moved = float(np.nanmax(at.reset_moved.sel(variant="wsc_official")))
    paper_moved = float(np.nanmean(at.reset_moved.sel(variant="wsc")))
    return "\n".join([
        f"- **Accuracy** at memory share {share:g} (ACC, %): replay {spread_text(at.acc.sel(variant='replay'))}, WSC "
        f"{spread_text(at.acc.sel(variant='wsc'))}, averaging only {spread_text(at.acc.sel(variant='swa'))}, reset "
        f"only {spread_text(at.acc.sel(variant='reset'))}; full retraining "
        f"{spread_text(ds.joint_accuracy.mean('task'))}, of which replay keeps "
        f"{spread_text(at.acc.sel(variant='replay').values / ds.joint_accuracy.mean('task').values)} (the claims' "
        f"competence check). WSC minus replay per seed: {gain('acc', 'wsc')}; WSC minus averaging only: "
        f"{gain('acc', 'wsc', 'swa')}; a second replay run with another batch order minus replay: "
        f"{gain('acc', 'replay_b')} (what chance alone moves).",
        f"- **WSC minus replay at each memory share** (mean over seeds, pt): {by_share}.",
        f"- **Memory against plasticity** (%): replay's newest-task accuracy falls from "
        f"{spread_text(ds.plasticity.sel(share=ds.share.min(), variant='replay'))} at memory share "
        f"{float(ds.share.min()):g} to {spread_text(at.plasticity.sel(variant='replay'))} at {share:g}, while its "
        f"BWT rises from {spread_text(ds.bwt.sel(share=ds.share.min(), variant='replay'))} to "
        f"{spread_text(at.bwt.sel(variant='replay'))}: the paper's shift from stability to plasticity.",
        f"- **Plasticity** (newest-task accuracy, gain over replay, pt): reset only {gain('plasticity', 'reset')}, "
        f"averaging only {gain('plasticity', 'swa')}, WSC {gain('plasticity', 'wsc')}.",
        f"- **Stability** (BWT gain over replay, pt): averaging only {gain('bwt', 'swa')}, reset only "
        f"{gain('bwt', 'reset')}, WSC {gain('bwt', 'wsc')}.",
        f"- **Ablations on WSC's schedule** (ACC, pt): WSC minus WSC without the averaging {no_avg}; WSC (the "
        f"paper's reset) minus WSC with the official code's reset {paper}; replay re-warmed minus replay "
        f"{gain('acc', 'replay_rewarm')}; WSC minus replay re-warmed {gain('acc', 'wsc', 'replay_rewarm')}.",
        f"- **The official reset** moved the weights by {official_moved:g} (L2, largest over seeds and tasks; the "
        f"paper's reset: {paper_moved:.3g} on average); WSC as the official code runs it minus averaging only: "
        f"{gain('acc', 'wsc_official', 'swa')} pt, so the code's WSC is averaging plus the re-warm.",
        f"- **Resets** kept {float(np.nanmean(at.reset_kept.sel(variant='wsc'))):.0%} of the weights, holding "
        f"{float(np.nanmean(at.reset_score_mass.sel(variant='wsc'))):.0%} of the importance |m|·v.",
        f"- **Cost**: every run took {int(at.train_steps.max())} optimiser steps on tasks 1..; WSC's CPU time was "
        f"{spread_text(cpu)} x replay's.",
        f"- {ds.sizes['seed']} seed(s) of a {ds.attrs['stream']} stream of {ds.attrs['n_tasks']} tasks, "
        f"{ds.attrs['steps_per_task']} steps per task.",
    ])
