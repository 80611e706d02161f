"""HoloViews plots for ChainGPT results (notebook ``09_chaingpt``) and its live stopping trace, and the notebook's
discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

STATE_STYLE = {
    "chaingpt": ("ChainGPT", PALETTE[0], "solid"),
    "one_substep": ("one substep (control)", PALETTE[0], "dashed"),
    "transformer": ("transformer", PALETTE[1], "solid"),
    "mamba": ("Mamba", PALETTE[2], "solid"),
}
RECALL_STYLE = {"anchors": ("window + anchors", PALETTE[0], "solid"),
                "window_only": ("window alone (control)", PALETTE[0], "dashed")}


def _curves(da: xr.DataArray, run_dim: str, length_dim: str, style: dict, title: str) -> hv.Overlay:
    items = []
    x = da[length_dim].values
    for run, (label, color, dash) in style.items():
        per_seed = da.sel({run_dim: run})
        y = per_seed.mean("seed").values
        items.append(hv.Curve((x, y), "length", "accuracy (%)", label=label).opts(color=color, line_dash=dash,
                                                                                   line_width=2))
        items.append(hv.Scatter((x, y), "length", "accuracy (%)").opts(color=color, size=7, tools=["hover"]))
        if da.sizes["seed"] > 1:
            lo, hi = per_seed.min("seed").values, per_seed.max("seed").values
            items.append(hv.ErrorBars((x, y, y - lo, hi - y), "length", ["accuracy (%)", "lo", "hi"]).opts(
                color=color))
    items.append(hv.VLine(float(x[0])).opts(color="gray", line_dash="dotted"))
    return hv.Overlay(items).opts(title=title, legend_position="bottom_left", logx=True,
                                  **curve_opts(ylim=(0, 102)))


def accuracy_vs_length(ds: xr.Dataset) -> hv.Layout:
    """Accuracy against sequence length (dotted: the training length), mean over seeds with the seeds' range: the
    word problem (ChainGPT, its one-substep control, the baselines) and MQAR (anchors against the window alone)."""
    return (_curves(ds.state_accuracy, "state_run", "state_length", STATE_STYLE,
                    f"{ds.attrs['state_task']} word problem")
            + _curves(ds.recall_accuracy, "recall_run", "recall_length", RECALL_STYLE, "MQAR")).cols(2)


def depth_curves(ds: xr.Dataset) -> hv.Overlay:
    """ChainGPT's word-problem accuracy at each fixed depth, one curve per length; the stars are adaptive stopping
    at its mean iterations."""
    items = []
    depth = ds.depth.values
    for k, L in enumerate(ds.state_length.values):
        color = PALETTE[k % len(PALETTE)]
        y = ds.depth_accuracy.sel(state_length=L).mean("seed").values
        items.append(hv.Curve((depth, y), "core iterations", "accuracy (%)", label=f"length {int(L)}").opts(
            color=color, line_width=2))
        ax = float(ds.adaptive_iterations.sel(state_length=L).mean("seed"))
        ay = float(ds.adaptive_accuracy.sel(state_length=L).mean("seed"))
        items.append(hv.Scatter(([ax], [ay]), "core iterations", "accuracy (%)").opts(
            color=color, marker="star", size=16, tools=["hover"]))
    return hv.Overlay(items).opts(title="accuracy against recurrent depth (★: adaptive stopping)",
                                  legend_position="bottom_right", **curve_opts(ylim=(0, 102)))


def entropy_curves(ds: xr.Dataset) -> hv.Overlay:
    """Mean output entropy after each core iteration (fixed depth), per length: what the stopping rule reads."""
    items = [hv.Curve((ds.depth.values, ds.depth_entropy.sel(state_length=L).mean("seed").values),
                      "core iterations", "entropy (nats)", label=f"length {int(L)}").opts(
                          color=PALETTE[k % len(PALETTE)], line_width=2)
             for k, L in enumerate(ds.state_length.values)]
    return hv.Overlay(items).opts(title="output entropy by iteration", legend_position="top_right", **curve_opts())


def stop_histogram(ds: xr.Dataset) -> hv.Bars:
    """Share of labelled tokens the entropy-drop rule stops after each number of iterations, per length."""
    share = ds.stop_share.mean("seed")
    rows = [(str(int(d)), f"length {int(L)}", float(share.sel(depth=d, state_length=L)))
            for d in ds.depth.values for L in ds.state_length.values]
    return hv.Bars(rows, ["iterations", "length"], "share of tokens").opts(
        title=f"where the rule stops (τ = {ds.attrs['stop_tau']:g} nats, k = {ds.attrs['stop_lag']})",
        width=620, height=340, tools=["hover"], multi_level=True, xrotation=0)


def training_curves(ds: xr.Dataset) -> hv.Overlay:
    """Training loss of every run (mean over seeds), smoothed over 20 steps."""
    items = []
    kernel = np.ones(20) / 20
    for k, run in enumerate(ds.run.values):
        y = ds.train_loss.sel(run=run).mean("seed").values
        y = y[np.isfinite(y)]
        y = np.convolve(y, kernel[: len(y)], mode="valid")
        items.append(hv.Curve((np.arange(1, len(y) + 1), y), "training step", "loss (nats)", label=str(run)).opts(
            color=PALETTE[k % len(PALETTE)]))
    return hv.Overlay(items).opts(title="training loss", legend_position="top_right", logy=True, **curve_opts())


def stopping_trace(trace) -> hv.Layout:
    """One sequence under the entropy-drop rule (:func:`lab.methods.chaingpt.live.stopping_trace`): the iterations
    each token took (red: wrong prediction), and the entropy after each iteration per position."""
    pos = np.arange(trace.length)
    labelled = trace.targets != -100
    wrong = labelled & (trace.predictions != trace.targets)
    bars = hv.Bars((pos, trace.iterations), "position", "iterations").opts(color="#1f5fa8", tools=["hover"])
    miss = hv.Scatter((pos[wrong], trace.iterations[wrong] + 0.15), "position", "iterations").opts(
        color="#d1495b", marker="x", size=9)
    acc = 100 * float((~wrong[labelled]).mean()) if labelled.any() else float("nan")
    top = (bars * miss).opts(title=f"iterations per token ({trace.task}, length {trace.length}, τ = {trace.tau:g}; "
                                   f"accuracy {acc:.0f}%, mean {trace.iterations.mean():.2f} of "
                                   f"{trace.max_iterations})", width=760, height=260,
                             ylim=(0, trace.max_iterations + 0.5))
    heat = hv.HeatMap([(int(t), int(i + 1), float(trace.entropy[i, t])) for i in range(trace.entropy.shape[0])
                       for t in range(trace.length)], ["position", "iteration"], "entropy (nats)").opts(
        title="entropy after each iteration", cmap="viridis", colorbar=True, width=760, height=220, tools=["hover"])
    return (top + heat).cols(1)


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def _acc(da: xr.DataArray) -> str:
    v = np.asarray(da.values, float).ravel()
    return f"{v.mean():.1f}" + (f" ({v.min():.1f}-{v.max():.1f})" if v.size > 1 else "")


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    s_len, r_len = ds.state_length.values, ds.recall_length.values
    rows = []
    for run, (label, _, _) in STATE_STYLE.items():
        pts = ", ".join(f"{int(L)}: {_acc(ds.state_accuracy.sel(state_run=run, state_length=L))}" for L in s_len)
        rows.append(f"  - {label} ({int(ds.n_params.sel(run=run))} parameters): {pts}")
    recall = []
    for run, (label, _, _) in RECALL_STYLE.items():
        pts = ", ".join(f"{int(L)}: {_acc(ds.recall_accuracy.sel(recall_run=run, recall_length=L))}" for L in r_len)
        recall.append(f"  - {label} ({int(ds.n_params.sel(run=run))} parameters): {pts}")
    R = int(ds.depth.max())
    it = ", ".join(f"{int(L)}: {float(ds.adaptive_iterations.sel(state_length=L).mean()):.2f}" for L in s_len)
    prefix = ""
    if "prefix_iterations" in ds:  # the adaptive claim's control (runs saved before it lack it)
        prefix = (f" On the first {int(s_len[0])} positions of the longest sequences, as easy as the training length,"
                  f" it spends {float(ds.prefix_iterations.isel(state_length=-1).mean()):.2f} (standard errors over "
                  f"the test sequences up to {float(ds.adaptive_iterations_se.max()):.3f}).")
    if "random_accuracy" in ds:  # the control of adaptive_within_a_point (runs saved before it lack it)
        prefix += (f" Adaptive stopping reaches {float(ds.adaptive_accuracy.mean()):.2f}% (mean over lengths), "
                   f"random per-token stopping at the same depths {float(ds.random_accuracy.mean()):.2f}%, fixed "
                   f"depth {R} {float(ds.depth_accuracy.sel(depth=R).mean()):.2f}%.")
    trained = (~ds.from_cache.values).sum()
    return "\n".join([
        f"- **Accuracy against length** (%, mean over {ds.sizes['seed']} seed(s), range in brackets; first length "
        f"= training), {ds.attrs['state_task']} word problem:", *rows,
        f"- **MQAR** ({ds.attrs['n_pairs']} pairs, window {ds.attrs['window']}, an anchor every "
        f"{ds.attrs['anchor_every']} tokens):", *recall,
        f"- **Recurrent depth**: accuracy at depth 1..{R} at the longest length "
        f"{np.round(ds.depth_accuracy.isel(state_length=-1).mean('seed').values, 1).tolist()}; adaptive stopping "
        f"spends {it} mean iterations by length (of {R}).{prefix}",
        f"- **Training**: {float(ds.train_time.sum()):.0f} s over {ds.sizes['seed'] * ds.sizes['run']} runs "
        f"({int(trained)} trained in this run, the rest loaded from the cache); accuracy is measured on "
        f"{ds.attrs['n_test']} test sequences per length.",
    ])
