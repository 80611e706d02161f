"""REM's HoloViews builders (notebook and ``forgetting`` dashboard) and the notebook's discussion."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, text_colour

__all__ = ["BASELINES", "LABELS", "absorbed", "advantage", "advantage_map", "cell_accuracies", "discussion",
           "redirected", "score_grid", "score_grids", "selected_cell", "summary"]

LABELS = {"original": "original", "retrain": "retrain", "finetune": "fine-tune", "ga": "gradient ascent",
          "npo": "NPO", "rem": "REM", "rem_noexpand": "REM w/o extra units", "rem_noredirect": "REM w/o redirection",
          "rem_b": "REM (other masks)"}
#: the baselines REM is compared with (as in lab.methods.rem.train.BASELINES, without importing the trainer)
BASELINES = ("original", "retrain", "finetune", "ga", "npo")
#: the variants the task-space grids leave out: the second REM draw, and REM's schedule without units (NPO's loss on
#: REM's batches: its grid is NPO's)
_NOT_GRIDDED = ("rem_b", "rem_noexpand")
COLOURS = dict(zip(LABELS, PALETTE))


def _label(method: str) -> str:
    return LABELS.get(method, method)


def score_grid(ds: xr.Dataset, method: str, *, selected: tuple[str, float] | None = None, width: int = 330,
               height: int = 250, colorbar: bool = False) -> hv.Overlay:
    """One method's score (Utility x Healed, mean over seeds) over the task space: discovery rate x corruption
    (from irregular to regular, bottom to top), each cell's score printed in it (black or white, whichever reads on
    its colour; viridis over 0-100); ``selected`` outlines one cell."""
    mean = ds.score.sel(algorithm=method).mean("seed")
    rows = [(f"{float(r):g}", str(c), float(mean.sel(corruption=c, rate=r)))
            for c in ds.corruption.values for r in ds.rate.values]
    clim = (0, 100)
    heat = hv.HeatMap(rows, ["discovery rate", "corruption"], "score").opts(
        cmap="viridis", clim=clim, colorbar=colorbar, width=width, height=height, tools=["hover"],
        fontsize={"title": "10pt"}, ylabel="",  # the corruptions name themselves; the title gets the room
        title=f"{_label(method)}: mean {float(mean.mean()):.0f}, worst {float(mean.min()):.0f}")
    labels = hv.Labels([(r, c, f"{v:.0f}", text_colour(v, "viridis", clim)) for r, c, v in rows],
                       ["discovery rate", "corruption"], ["text", "colour"]).opts(text_color="colour",
                                                                                  text_font_size="9pt")
    out = heat * labels
    return out if selected is None else out * selected_cell(*selected)


def selected_cell(corruption: str, rate: float) -> hv.Points:
    """The outline of one cell of :func:`score_grid`'s task space (a dashboard overlays it on the grids and moves it
    with the chosen cell, the heat maps left as they are)."""
    return hv.Points([(f"{float(rate):g}", str(corruption))], ["discovery rate", "corruption"]).opts(
        marker="square", size=34, fill_alpha=0, line_color="#d1495b", line_width=3)


def score_grids(ds: xr.Dataset, methods=None, selected=None) -> hv.Layout:
    """:func:`score_grid` for every method (default: all but the second REM run), three a row (a dashboard shows
    each in a pane of its own: Bokeh's grid of heat maps loses their titles and colour bars)."""
    methods = [m for m in ds.algorithm.values if m not in _NOT_GRIDDED] if methods is None else methods
    return hv.Layout([score_grid(ds, m, selected=selected) for m in methods]).cols(3)


def advantage(ds: xr.Dataset, method: str = "rem") -> xr.Dataset:
    """Per cell: ``method``'s score minus the strongest baseline's (the best of :data:`BASELINES` on each seed), its
    mean over seeds (``gap``), whether it is ahead on every seed (``ahead``) and the baseline that is strongest on
    average (``best``)."""
    base = ds.score.sel(algorithm=list(BASELINES))
    gap = ds.score.sel(algorithm=method) - base.max("algorithm")  # (seed, corruption, rate)
    return xr.Dataset({"gap": gap.mean("seed"), "ahead": (gap > 0).all("seed"),
                       "best": base.mean("seed").idxmax("algorithm")})


def advantage_map(ds: xr.Dataset, method: str = "rem") -> hv.Overlay:
    """The task space (discovery rate across, corruption from irregular to regular upwards) coloured by
    ``method``'s score minus the strongest baseline's in each cell (mean over seeds; blue: ahead, red: behind), each
    cell labelled with the gap and that baseline; cells where ``method`` is ahead on every seed (its region of
    advantage) outlined in black. Cells sit at integer positions (an image, not a categorical heat map), so that the
    report's static drawing puts the labels and outlines where the interactive one does."""
    import holoviews.plotting.mpl  # noqa: F401  options for the report's static drawing (lab.viz.headline) too

    adv = advantage(ds, method)
    rates, kinds = [float(r) for r in ds.rate.values], [str(c) for c in ds.corruption.values]
    gap = adv.gap.transpose("corruption", "rate").values  # (corruption, rate)
    top = max(10.0, float(np.ceil(np.nanmax(np.abs(gap)) / 10) * 10))
    clim = (-top, top)
    z = hv.Dimension("gap", label=f"{_label(method)} - best baseline", unit="pts", range=clim)
    ticks = dict(xticks=list(enumerate(f"{r:g}" for r in rates)), yticks=list(enumerate(kinds)))
    image = hv.Image(gap[::-1], bounds=(-0.5, -0.5, len(rates) - 0.5, len(kinds) - 0.5),
                     kdims=["discovery rate", "corruption"], vdims=[z]).opts(
        cmap="RdBu", clim=clim, colorbar=True, width=640, height=340, tools=["hover"], ylabel="",
        fontsize={"title": "10pt"}, **ticks,
        title=f"{_label(method)} minus the strongest baseline per cell ({ds.sizes['seed']} seeds); outlined: "
              "ahead on every seed").opts(backend="matplotlib", **ticks)
    rows = [(i, j, float(gap[j, i]), _label(str(adv.best.sel(corruption=c, rate=r).values)))
            for j, c in enumerate(kinds) for i, r in enumerate(ds.rate.values)]
    labels = hv.Labels([(i, j, f"{v:+.0f} vs {b}", text_colour(v, "RdBu", clim)) for i, j, v, b in rows],
                       ["discovery rate", "corruption"], ["text", "colour"]).opts(
        text_color="colour", text_font_size="10pt").opts(backend="matplotlib", color="colour")
    boxes = [[(i - h, j - h), (i + h, j - h), (i + h, j + h), (i - h, j + h), (i - h, j - h)]
             for j, c in enumerate(kinds) for i, r in enumerate(ds.rate.values)
             if bool(adv.ahead.sel(corruption=c, rate=r)) for h in (0.46,)]
    region = hv.Path(boxes, ["discovery rate", "corruption"]).opts(color="black", line_width=3)
    return image * labels * region


def summary(ds: xr.Dataset) -> hv.Overlay:
    """Each method's mean score over the grid (bars, mean over seeds) and its worst cell (dots), with the seeds'
    spread of the mean (error bars)."""
    methods = [m for m in ds.algorithm.values if m != "rem_b"]
    grid_mean = ds.score.mean(("corruption", "rate"))  # (seed, algorithm)
    worst = ds.score.mean("seed").min(("corruption", "rate"))
    names = [_label(m) for m in methods]
    bars = hv.Bars([(n, float(grid_mean.sel(algorithm=m).mean())) for n, m in zip(names, methods)], "method",
                   "score").opts(color=hv.dim("method").categorize({_label(m): COLOURS[m] for m in methods}),
                                 xrotation=30, tools=["hover"])
    spread = hv.ErrorBars([(n, float(grid_mean.sel(algorithm=m).mean()), float(grid_mean.sel(algorithm=m).std()))
                           for n, m in zip(names, methods)], "method", ["score", "std"])
    dots = hv.Scatter([(n, float(worst.sel(algorithm=m))) for n, m in zip(names, methods)], "method",
                      "score").opts(color="black", marker="diamond", size=10)
    return (bars * spread * dots).opts(
        title=f"Utility x Healed: grid mean (bars, ± seeds' std), worst cell (◆), {ds.sizes['seed']} seed(s)",
        width=720, height=360, ylim=(0, 100), show_legend=False)


def cell_accuracies(ds: xr.Dataset, corruption: str, rate: float) -> hv.Bars:
    """One cell: each method's accuracy on clean data (test set, clean training examples) and on the corrupted
    examples (w.r.t. their true labels: Healed; w.r.t. the corrupted labels: memorised). ``original`` is before."""
    cell = ds.sel(corruption=corruption, rate=rate).mean("seed")
    measures = (("utility", "test (clean)"), ("clean_train", "clean training"), ("healed", "corrupted: true label"),
                ("memorised", "corrupted: corrupted label"))
    rows = [(_label(str(m)), label, float(cell[var].sel(algorithm=m))) for m in ds.algorithm.values if m != "rem_b"
            for var, label in measures]
    # grouped bars: the method under each group, the measures in a legend (four labels per group overprint)
    return hv.Bars(rows, ["method", "measure"], "accuracy").opts(
        title=f"{corruption}, discovery {float(rate):g}: accuracy before (original) and after unlearning",
        width=600, height=380, ylim=(0, 105), xrotation=30, tools=["hover"], multi_level=False,
        shared_axes=False,  # a page would merge its grouped method axis with the summary's
        cmap={label: c for (_, label), c in zip(measures, PALETTE)}, legend_position="bottom", legend_cols=2,
        framewise=True)  # a dashboard updating it in place (a DynamicMap) takes each cell's axes


def absorbed(ds: xr.Dataset, corruption: str, rate: float) -> hv.Bars:
    """What REM's extra units absorbed in one cell: accuracy w.r.t. the training labels (corrupted ones for the
    corrupted groups) with each example's mask open and after discarding the units."""
    cell = ds.rem_absorbed.sel(corruption=corruption, rate=rate).mean("seed")
    rows = [(str(g), {"on": "units on", "off": "discarded"}[str(u)], float(cell.sel(group=g, units=u)))
            for g in ds.group.values for u in ds.units.values if np.isfinite(float(cell.sel(group=g, units=u)))]
    return hv.Bars(rows, ["group", "units"], "accuracy").opts(
        title="REM's extra units: fit to the training labels", xlabel=f"{corruption} at discovery {float(rate):g}",
        width=420, height=380, ylim=(0, 105), tools=["hover"], multi_level=False,
        cmap={"units on": PALETTE[1], "discarded": PALETTE[0]}, legend_position="bottom", legend_cols=2,
        framewise=True)


def redirected(info: dict) -> hv.Bars:
    """Where one REM model's predictions of the corrupted examples go, units on and discarded
    (:func:`lab.methods.rem.live.redirected`): to the corrupted label, the true label or another class."""
    rows = [(f"{group}, {units}", outcome, 100.0 * info["outcomes"][group][units][outcome])
            for group in info["outcomes"] for units in ("units on", "discarded")
            for outcome in ("corrupted label", "true label", "other")]
    return hv.Bars(rows, ["examples", "prediction"], "share").opts(
        stacked=True, width=560, height=360, tools=["hover"], xrotation=20, ylim=(0, 105),
        cmap={"corrupted label": PALETTE[1], "true label": PALETTE[2], "other": "#999999"},  # a colour by the
        # stacked dimension, not a dim transform: Bokeh refuses the transform when a dashboard updates it in place
        # the legend in a row below: at the side it left the long x label no room
        legend_position="bottom", legend_opts={"orientation": "horizontal"}, framewise=True,
        title=f"REM seed {info['seed']}, {info['corruption']} at {info['rate']:g}: {info['n_forget']} redirected",
        xlabel=f"extra units' share of the logits: {info['share_forget']:.2f} on the redirected, "
               f"{info['share_clean']:.2f} on clean data")


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    grid = ds.score.mean(("corruption", "rate"))  # (seed, algorithm)
    means = {str(m): grid.sel(algorithm=m).values for m in ds.algorithm.values}
    cellmean = ds.score.mean("seed")
    best_cell = cellmean.sel(algorithm=[*BASELINES, "rem"]).idxmax("algorithm")
    wins = {str(c): [f"{float(r):g}: {str(best_cell.sel(corruption=c, rate=r).values)}" for r in ds.rate.values]
            for c in ds.corruption.values}
    rem_low = cellmean.sel(algorithm="rem").stack(cell=("corruption", "rate"))
    low = rem_low.cell.values[int(np.argmin(rem_low.values))]
    adv = advantage(ds)
    ahead = [f"{c} at {float(r):g} ({float(adv.gap.sel(corruption=c, rate=r)):+.1f})" for c in ds.corruption.values
             for r in ds.rate.values if bool(adv.ahead.sel(corruption=c, rate=r))]
    top = float(ds.rate.values.max())
    weak = ", ".join(f"{c} {float(adv.gap.sel(corruption=c, rate=top)):+.1f} (vs "
                     f"{_label(str(adv.best.sel(corruption=c, rate=top).values))})" for c in ds.corruption.values)
    units = grid.sel(algorithm="rem") - grid.sel(algorithm="rem_noexpand")
    absorbed_on = float(ds.rem_absorbed.sel(group="discovered", units="on").mean())
    absorbed_off = float(ds.rem_absorbed.sel(group="discovered", units="off").mean())
    return "\n".join([
        "- **Mean score over the grid** (Utility x Healed / 100, mean over seeds): "
        + ", ".join(f"{_label(m)} {spread_text(v, '.1f')}" for m, v in means.items()) + ".",
        "- **REM's region of advantage** (ahead of the strongest baseline of the cell on every seed; mean gap): "
        + (", ".join(ahead) if ahead else "none") + ".",
        f"- **REM's weak region, discovery {top:g}** (REM minus the strongest baseline of the cell, mean over "
        f"seeds): {weak}. With every corrupted example known, retraining without them or NPO on all of them "
        "leaves nothing for the extra units to catch, and the redirection costs Utility.",
        f"- **What the extra units add**: REM minus its schedule without them (NPO's loss on REM's batches), mean "
        f"score over the grid: {spread_text(units.values, '+.1f')}.",
        "- **Best method per cell** (REM and the baselines): "
        + "; ".join(f"{c}: " + ", ".join(w) for c, w in wins.items()) + ".",
        f"- REM's lowest cell is {low[0]} at discovery {float(low[1]):g} ({float(rem_low.min()):.1f}); "
        f"the original model scores {spread_text(grid.sel(algorithm='original').values, '.1f')} on average: the "
        "corruption costs Healed almost entirely (the MLP memorises the corrupted labels).",
        f"- **What the extra units absorbed**: with their shared mask open, REM fits the discovered corrupted "
        f"examples' corrupted labels to {absorbed_on:.1f}%; once the units are discarded, {absorbed_off:.1f}% "
        "(mean over cells and seeds).",
        f"- {ds.attrs['n_train']} training and {ds.attrs['n_test']} test examples of {ds.attrs['dataset']}, "
        f"{ds.attrs['corrupt_fraction']:.0%} corrupted, {ds.sizes['seed']} seed(s) (one test example = "
        f"{100 / ds.attrs['n_test']:.2f} pt of Utility).",
    ])
