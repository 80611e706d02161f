"""HoloViews plots for PSM results (notebook ``06_psm``) and the binary counter's trace (:mod:`.live`), and the
notebook's discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts, log_ticks

MODEL_STYLE = {
    "psm": {"color": PALETTE[0], "label": "Transformer-PSM"},
    "psm_affine": {"color": PALETTE[6], "label": "PSM, affine (SSM) combine"},
    "transformer": {"color": PALETTE[1], "label": "causal transformer"},
    "lru": {"color": PALETTE[2], "label": "LRU"},
    "mamba": {"color": PALETTE[3], "label": "Mamba"},
}
BRACKET_STYLE = {"counter": ("binary counter", PALETTE[0]), "fold": ("left fold", PALETTE[1]),
                 "naive": ("naive recompute", "#777777")}


def accuracy_by_position(ds: xr.Dataset, task: str = "state") -> hv.Overlay:
    """Test accuracy at each position of the longest test sequences (mean over seeds), the training length
    marked."""
    f = int(ds.factor.values[-1])
    items = []
    for model in ds.model.values:
        acc = ds.accuracy_position.sel(task=task, model=model, factor=f).mean("seed")
        keep = np.isfinite(acc.values)
        st = MODEL_STYLE[str(model)]
        items.append(hv.Curve((ds.position.values[keep] + 1, acc.values[keep]), "position", "accuracy (%)",
                              label=st["label"]).opts(color=st["color"], line_width=2))
    items.append(hv.VLine(int(ds.attrs["train_length"])).opts(color="black", line_dash="dashed"))
    return hv.Overlay(items).opts(title=f"{ds.attrs[f'{task}_task']}: accuracy by position at {f}x the training "
                                        "length", legend_position="top_right", **curve_opts())


def accuracy_vs_factor(ds: xr.Dataset, task: str = "state") -> hv.Overlay:
    """Accuracy past the training length (and over the whole sequence at 1x) against the test length factor,
    per model (mean over seeds, seeds as points)."""
    items = []
    for model in ds.model.values:
        st = MODEL_STYLE[str(model)]
        acc = ds.accuracy_beyond.sel(task=task, model=model).copy()
        acc.loc[{"factor": 1}] = ds.accuracy.sel(task=task, model=model, factor=1)
        items.append(hv.Curve((ds.factor.values, acc.mean("seed").values), "length factor", "accuracy (%)",
                              label=st["label"]).opts(color=st["color"], line_width=2))
        for s in ds.seed.values:
            items.append(hv.Scatter((ds.factor.values, acc.sel(seed=s).values), "length factor",
                                    "accuracy (%)").opts(color=st["color"], size=5, alpha=0.6))
    return hv.Overlay(items).opts(title=f"{ds.attrs[f'{task}_task']}: accuracy past the training length (1x: all)",
                                  # the state curves fall from 100 and leave the lower left free; MQAR's do not
                                  legend_position="bottom_left" if task == "state" else "top_right", logx=True,
                                  **curve_opts())


def streaming_agreement(ds: xr.Dataset) -> hv.Overlay:
    """max |parallel - streaming| logit against the number of chunks, per bracketing (log scale; 0 drawn at
    1e-12)."""
    items = []
    for psm in ds.psm.values:
        for b in ds.bracketing.values:
            label, color = BRACKET_STYLE[str(b)]
            d = np.maximum(ds.stream_diff.sel(psm=psm, bracketing=b).values, 1e-12)
            items.append(hv.Curve((ds.n_chunks.values, d), "chunks", "max |Δ logit|",
                                  label=f"{MODEL_STYLE[str(psm)]['label']}: {label}").opts(
                color=color, line_dash="solid" if psm == "psm" else "dotted", line_width=2))
    items.append(hv.HLine(1e-4).opts(color="black", line_dash="dashed"))
    return hv.Overlay(items).opts(title="parallel vs streaming logits", logy=True, legend_position="right",
                                  **curve_opts(width=700))


def resources(ds: xr.Dataset) -> hv.Layout:
    """Most live states and aggregator calls per chunk against the number of chunks: the counter, the naive
    recompute, the bound floor(log2 n) + 1."""
    n = ds.n_chunks.values
    live, calls = [], []
    for b in ("counter", "naive"):
        label, color = BRACKET_STYLE[b]
        live.append(hv.Curve((n, ds.stream_live.sel(psm="psm", bracketing=b).values), "chunks", "live states",
                             label=label).opts(color=color, line_width=2))
        calls.append(hv.Curve((n, ds.stream_calls.sel(psm="psm", bracketing=b).values / n), "chunks",
                              "calls per chunk", label=label).opts(color=color, line_width=2))
    live.append(hv.Curve((n, np.floor(np.log2(n)) + 1), "chunks", "live states", label="floor(log2 n) + 1").opts(
        color="black", line_dash="dashed"))
    return (hv.Overlay(live).opts(title="states held while streaming", logx=True, logy=True,
                                  legend_position="top_left", **curve_opts(width=420))
            + hv.Overlay(calls).opts(title="aggregator calls per chunk", logx=True,
                                     legend_position="top_left", **curve_opts(width=420)))


def counter_trace(trace: xr.Dataset, last: int = 64) -> hv.Layout:
    """The binary counter chunk by chunk (:func:`lab.methods.psm.live.counter_trace`): live states against the
    bound, calls per chunk, and the stack of blocks after each of the first ``last`` pushes (one column per push,
    one box per block, labelled by its size in chunks)."""
    n = trace.pushed.values
    left = hv.Overlay([
        hv.Curve((n, trace.live.values), "chunks pushed", "states", label="live states").opts(
            color=PALETTE[0], interpolation="steps-post"),
        hv.Curve((n, trace.bound.values), "chunks pushed", "states", label="floor(log2 n) + 1").opts(
            color="black", line_dash="dashed", interpolation="steps-post"),
        hv.Curve((n, trace.calls_per_chunk.values), "chunks pushed", "states", label="calls per chunk").opts(
            color=PALETTE[1]),
    ]).opts(title="binary counter", logx=True, legend_position="top_left", xticks=log_ticks(n.min(), n.max()),
            **curve_opts(width=560))
    rects, labels = [], []
    for i in range(min(last, len(n))):
        for j, size in enumerate(trace.block_size.values[i]):
            if size:
                rects.append((i + 0.55, j, i + 1.45, j + 0.9, float(np.log2(size))))
                labels.append((i + 1, j + 0.45, str(int(size))))
    stack = hv.Rectangles(rects, vdims="log2 size").opts(color="log2 size", cmap="viridis", line_color="white",
                                                         tools=["hover"])
    text = hv.Labels(labels, ["chunks pushed", "slot"], "size").opts(text_font_size="7pt", text_color="white")
    right = (stack * text).opts(title=f"blocks on the stack, first {min(last, len(n))} pushes", width=700,
                                height=300, xlabel="chunks pushed", ylabel="stack slot")
    return left + right


def training_curves(ds: xr.Dataset, task: str = "state") -> hv.Overlay:
    """Training loss per model (mean over seeds)."""
    items = []
    for model in ds.model.values:
        st = MODEL_STYLE[str(model)]
        loss = ds.train_loss.sel(task=task, model=model).mean("seed").values
        items.append(hv.Curve((ds.step.values, loss), "step", "loss", label=st["label"]).opts(color=st["color"]))
    return hv.Overlay(items).opts(title=f"{ds.attrs[f'{task}_task']}: training loss", legend_position="top_right",
                                  **curve_opts())


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def _mean(da: xr.DataArray) -> str:
    v = da.values.ravel()
    return f"{np.nanmean(v):.1f}" + (f" ({np.nanmin(v):.1f}-{np.nanmax(v):.1f})" if v.size > 1 else "")


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    n = ds.n_chunks.values
    d = ds.stream_diff.sel(psm="psm")
    live = ds.stream_live.sel(psm="psm").values[:, -1]  # (bracketing,) at the most chunks
    per = ds.stream_calls.sel(psm="psm").values[:, -1] / n.max()
    counter, naive = list(ds.bracketing.values).index("counter"), list(ds.bracketing.values).index("naive")
    lines = [
        f"- **Duality.** Over sequences of up to {int(n.max())} chunks the binary-counter stream differs from the "
        f"parallel Blelloch tree by at most {float(d.sel(bracketing='counter').max()):.2g} in any logit; a left fold "
        f"of the same aggregator differs by up to {float(d.sel(bracketing='fold').max()):.2g}: the bracketing is "
        "part of the model.",
        f"- **Resources.** At {int(n.max())} chunks the counter held at most {int(live[counter])} states (bound "
        f"{int(np.log2(n.max())) + 1}) and made {per[counter]:.2f} calls per chunk; the naive recompute held "
        f"{int(live[naive])} and made {per[naive]:.1f}. The counting "
        f"trace over {ds.sizes['pushed']} chunks never exceeds the bound "
        f"({int((ds.trace_live > ds.trace_bound).sum())} violations; calls per chunk "
        f"{float(ds.trace_calls_per_chunk.values[-1]):.3f}).",
    ]
    if "psm_affine" in ds.psm.values:
        lines.append(f"- The affine (SSM) combine is associative: its left fold agrees with the tree up to rounding "
                     f"({float(ds.stream_diff.sel(psm='psm_affine', bracketing='fold').max()):.2g}).")
    for task in ("state", "recall"):
        parts = []
        for model in ds.model.values:
            one = ds.accuracy.sel(task=task, model=model, factor=1)
            four = ds.accuracy_beyond.sel(task=task, model=model, factor=4)
            parts.append(f"{MODEL_STYLE[str(model)]['label']} {_mean(one)} / {_mean(four)}")
        lines.append(f"- **{ds.attrs[f'{task}_task']}** (accuracy % at the training length / past it at 4x, mean "
                     f"over {ds.sizes['seed']} seed(s), range): " + "; ".join(parts) + ". State-blind PSM at the "
                     f"training length: {_mean(ds.blind_accuracy.sel(task=task, factor=1))}."
                     + (f" Trained: {ds.attrs[f'{task}_regime']}." if f"{task}_regime" in ds.attrs else ""))
    counts = ds.n_params.sel(task="state")
    widths = ds.width.sel(task="state")
    lines.append("- **Sizes** (trainable parameters, state task): " + ", ".join(
        f"{MODEL_STYLE[str(m)]['label']} {int(counts.sel(model=m))} (width {int(widths.sel(model=m))})"
        for m in ds.model.values) + ".")
    return "\n".join(lines)
