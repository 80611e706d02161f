"""The arena's HoloViews builders: the model x task heat map with theory's prediction in each cell, one cell's
accuracy against length over seeds, and state bytes against accuracy."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import curve_opts, log_ticks, text_colour

THEORY_MARK = {1.0: "yes", 0.0: "no", 0.5: "?"}
#: one colour per architecture, the same in every plot; the negative-eigenvalue twins are drawn with triangles
COLOURS = {"mamba": "#1f5fa8", "gla": "#d1495b", "gla_neg": "#2e933c", "deltanet": "#edae49",
           "deltanet_neg": "#8d5a97", "gru": "#00798c", "transformer": "#3b1f2b", "lru": "#a23b72",
           "s5": "#30638e", "mamba2": "#66a182", "lstm": "#7f7f7f", "transformer_rope": "#b5651d",
           "psm": "#e07a5f", "chaingpt": "#3d405b"}


def _marker(model: str) -> str:
    return "triangle" if model.endswith("_neg") else "circle"
_CMAP, _CLIM = "viridis", (0.4, 1.0)


def _accuracy_at(ds: xr.Dataset, factor: int) -> xr.DataArray:
    """Mean over seeds at ``factor``: beyond the training length where there is such a part, else all positions."""
    var = "accuracy" if factor == 1 else "accuracy_beyond"
    return ds[var].sel(factor=factor).mean("seed")


def heatmap(ds: xr.Dataset, factor: int | None = None, *, width: int = 760, height: int = 380) -> hv.Overlay:
    """Accuracy of every model (columns) on every task (rows, the run's first task on top) at the test length
    ``factor`` x the training length (default: the claims' factor; beyond the training length there), mean over
    seeds; each cell says the accuracy and theory's prediction at every length (yes / no / ?).

    The cells sit at integer positions with the names as tick labels (an Image, not a categorical HeatMap), so that
    the matplotlib drawing of the report's headline puts every cell, label and tick where the Bokeh one does (a
    categorical HeatMap with Labels came out with its rows flipped against their ticks and its texts piled up)."""
    factor = int(ds.attrs["claim_factor"] if factor is None else factor)
    acc = _accuracy_at(ds, factor).transpose("task", "model")
    models, tasks = [str(m) for m in ds.model.values], [str(t) for t in acc.task.values]
    n_x, n_y = len(models), len(tasks)
    labels = []
    for j, task in enumerate(tasks):
        for i, model in enumerate(models):
            v = float(acc.sel(task=task, model=model))
            mark = THEORY_MARK[float(ds.theory.sel(task=task, model=model))]
            if np.isnan(v):  # a cell the run does not train (A5 outside a5_models): blank, theory still said
                labels.append((i, n_y - 1 - j, f"not run\n{mark}", "#555555"))
            else:
                labels.append((i, n_y - 1 - j, f"{v:.2f}\n{mark}", text_colour(v, _CMAP, _CLIM)))
    where = "beyond the training length" if factor > 1 else "at the training length"
    heat = hv.Image(acc.values.astype(float), bounds=(-0.5, -0.5, n_x - 0.5, n_y - 0.5), kdims=["model", "task"],
                    vdims=["accuracy"]).opts(
        cmap=_CMAP, clim=_CLIM, colorbar=True, clipping_colors={"NaN": "#eeeeee"}, width=width, height=height,
        tools=["hover"], xrotation=30, xticks=list(enumerate(models)),
        yticks=[(n_y - 1 - j, task) for j, task in enumerate(tasks)],
        title=f"Accuracy at {factor}x the training length ({where}), mean over {ds.sizes['seed']} seeds; "
              f"theory: yes / no / ?", fontsize={"title": "10pt"})
    text = hv.Labels(labels, ["model", "task"], ["text", "colour"]).opts(text_color="colour", text_font_size="8pt")
    return heat * text


def length_curve(ds: xr.Dataset, task: str, models=None, *, width: int = 620) -> hv.Overlay:
    """Accuracy over every labelled position against the test length on ``task``, one curve per model (mean over
    seeds, band min-max); a model the run did not train on ``task`` is left out (say so in the title)."""
    models = [str(m) for m in (ds.model.values if models is None else models)]
    trained = [m for m in models if np.isfinite(ds.accuracy.sel(task=task, model=m).values).all()]
    untrained = sorted(set(models) - set(trained))
    missing = f"; {len(untrained)} not trained on {task}" if untrained else ""
    models = trained
    if not models:  # nothing to draw: say why where the curve would be
        return hv.Overlay([hv.Text(2.0, 0.5, f"{', '.join(untrained)}: not trained on {task} in this run",
                                   fontsize=10)]).opts(**curve_opts(
            logx=True, ylim=(0, 1.05), xlim=(0.9, 1.12 * float(ds.factor.max())), width=width, height=360,
            xticks=[int(f) for f in ds.factor.values], xlabel="test length / training length", ylabel="accuracy",
            title=f"{task}: accuracy against length"))
    layers = []
    for model in models:
        acc = ds.accuracy.sel(task=task, model=model)
        x, colour = ds.factor.values, COLOURS[str(model)]
        layers.append(hv.Area((x, acc.min("seed").values, acc.max("seed").values), "test length / training length",
                              ["accuracy", "accuracy high"], label=str(model)).opts(color=colour, alpha=0.15,
                                                                                    line_alpha=0))
        layers.append(hv.Curve((x, acc.mean("seed").values), "test length / training length", "accuracy",
                               label=str(model)).opts(color=colour, line_width=2))
        layers.append(hv.Scatter((x, acc.mean("seed").values), "test length / training length", "accuracy",
                                 label=str(model)).opts(color=colour, size=7, marker=_marker(str(model))))
    return hv.Overlay(layers).opts(**curve_opts(
        logx=True, ylim=(0, 1.05), xlim=(0.9, 1.12 * float(ds.factor.max())),
        xticks=[int(f) for f in ds.factor.values], width=width, height=360, legend_position="right",
        title=f"{task}: accuracy against length ({ds.sizes['seed']} seeds, min-max band){missing}"))


def state_vs_accuracy(ds: xr.Dataset, task: str = "mqar", *, width: int = 620) -> hv.Overlay:
    """Inference state bytes (log) against accuracy at the training length on ``task``, one colour per model."""
    points, sizes = [], ds.state_bytes.sel(task=task, factor=1).values
    for model in ds.model.values:
        b = float(ds.state_bytes.sel(task=task, model=model, factor=1))
        a = float(ds.accuracy.sel(task=task, model=model, factor=1).mean("seed"))
        if np.isnan(a):  # not trained on this task
            continue
        points.append(hv.Scatter([(b, a)], "state bytes", "accuracy", label=str(model)).opts(
            color=COLOURS[str(model)], size=11, marker=_marker(str(model))))
    ticks = log_ticks(0.8 * float(sizes.min()), 1.25 * float(sizes.max()))
    return hv.Overlay(points).opts(**curve_opts(
        logx=True, ylim=(0, 1.05), xlim=(0.8 * float(sizes.min()), 1.25 * float(sizes.max())),
        xticks=[(t, f"{t:g}") for t in ticks], legend_position="right", width=width,
        title=f"{task}: inference state against accuracy at 1x"))


def discussion(ds: xr.Dataset, claims) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    f = int(ds.attrs["claim_factor"])
    beyond = ds.accuracy_beyond.sel(factor=f)
    parity = beyond.sel(task="parity")
    best = {str(m): float(parity.sel(model=m).min()) for m in ds.model.values}
    holds = [m for m, v in best.items() if v > 0.9]
    fit = ds.accuracy.sel(factor=1).min("seed")
    unfit = [f"{m} on {t}" for t in ds.task.values for m in ds.model.values
             if float(fit.sel(task=t, model=m)) <= 0.9]
    a5 = ""
    if "a5" in ds.task.values:
        at1 = ds.accuracy.sel(task="a5", factor=1).min("seed")
        fitted = {str(m): float(at1.sel(model=m)) for m in ds.model.values if np.isfinite(float(at1.sel(model=m)))}
        a5 = (f"**A5 at its training length** ({ds.attrs.get('a5_length', '?')}), worst seed: "
              + ", ".join(f"{m} {v:.2f}" for m, v in sorted(fitted.items(), key=lambda kv: -kv[1])) + ". ")
    return (f"**Parity at {f}x the training length**, worst seed: "
            + ", ".join(f"{m} {v:.2f}" for m, v in sorted(best.items(), key=lambda kv: -kv[1]))
            + f". Above 0.9 on every seed: {', '.join(holds) or 'none'}. " + a5
            + "Cells not fitted at the training length on their worst seed (accuracy at most 0.9): "
            + f"{', '.join(unfit) if unfit else 'none'}; their failures beyond it say little. "
            + f"{claims.summary()}.")


def cell_table(ds: xr.Dataset) -> np.ndarray:
    """The heat map's numbers: ``(task, model)`` mean accuracy at the claims' factor (rows in ``ds.task`` order)."""
    return _accuracy_at(ds, int(ds.attrs["claim_factor"])).values
