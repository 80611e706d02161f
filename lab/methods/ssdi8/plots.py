"""HoloViews plots for SSDi8 (notebook ``10_ssdi8`` and the ssdi8 tab of the ``compact_models`` dashboard), and the
notebook's discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.methods.ssdi8.claims import MARGIN, clustered_difference
from lab.viz.style import PALETTE, curve_opts

VARIANT_STYLE = {
    "fp32": {"color": "black", "label": "FP32"},
    "input_only": {"color": "#777777", "label": "input only, per tensor (Quamba)"},
    "input_group": {"color": PALETTE[2], "label": "input only, per channel/group (Quamba2)"},
    "per_tensor": {"color": PALETTE[1], "label": "INT8 SSD, per tensor"},
    "axis_aware": {"color": PALETTE[3], "label": "INT8 SSD, axis-aware"},
    "ssdi8": {"color": PALETTE[0], "label": "SSDi8 (axis-aware + correction)"},
    "shuffled": {"color": PALETTE[5], "label": "correction on shuffled channels"},
}
WEIGHTS_LABEL = {"fp32": "FP32 projections", "w8a8": "W8A8", "w4a8": "W4A8"}


def _label(variant: str) -> str:
    return VARIANT_STYLE.get(variant, {"label": variant})["label"]


def _colours() -> dict:
    return {s["label"]: s["color"] for s in VARIANT_STYLE.values()}


def _log_range(values) -> tuple[float, float]:
    """Limits of a log axis showing every positive value with room around it (a bar on it starts at the lower one)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return (1e-3, 1.0)
    return (float(v.min()) / 2, float(v.max()) * 2)


def _bars(rows: list, kdims: list, label: str, title: str, colour_by: str, colours: dict, log: bool,
          **opts) -> hv.Bars:
    """Horizontal bars (one row per label: no two labels share a line), coloured by ``colour_by``; on a log axis
    each bar starts at the axis' lower limit (HoloViews starts log bars at the value dimension's range), not at a
    fixed 0.01."""
    values = [r[-1] for r in rows]
    if log:
        lo, hi = _log_range(values)
        vdim = hv.Dimension(label, range=(lo, hi))
    else:
        lo, hi = min(values), max(values)
        pad = 0.05 * (hi - lo or abs(hi) or 1)
        vdim = hv.Dimension(label, range=(lo - pad, hi + pad))
    size = {"width": 490, "height": 80 + 17 * len(rows), **opts}
    return hv.Bars(rows, kdims, vdim).opts(
        title=title, invert_axes=True, logx=log, logy=log, color=hv.dim(colour_by).categorize(colours),
        show_legend=False, tools=["hover"], toolbar="above", **size)


def _stems(index, values, kdim: str, vdim: str, lo: float, colour: str, label: str | None = None) -> hv.Overlay:
    """One stem per index from ``lo`` (the log axis' floor: spikes from 0 vanish on a log axis) up to its value, and
    a dot at the value."""
    index, values = np.asarray(index), np.asarray(values, float)
    kw = {} if label is None else {"label": label}
    stems = hv.Segments((index, np.full(len(values), lo), index, values), [kdim, vdim, f"{kdim}_", f"{vdim}_"])
    return stems.opts(color=colour, line_width=1.5) * hv.Scatter((index, values), kdim, vdim, **kw).opts(
        color=colour, size=5, tools=["hover"])


def perplexity_bars(table: xr.Dataset) -> hv.Bars:
    """Evaluation perplexity per SSD variant and weight setting (a run's Dataset or :func:`live.quant_table`)."""
    rows = [(WEIGHTS_LABEL.get(str(w), str(w)), _label(str(v)), float(table.perplexity.sel(variant=v, weights=w)))
            for w in table.weights.values for v in table.variant.values]
    variant = hv.Dimension("variant", values=[_label(str(v)) for v in table.variant.values])
    fp = float(table.perplexity.sel(variant="fp32", weights="fp32"))
    return _bars(rows, ["weights", variant], "perplexity", f"evaluation perplexity (FP32: {fp:.3f})", "variant",
                 _colours(), log=False, width=720)


def error_bars(table: xr.Dataset) -> hv.Bars:
    """SSD output error against the float model (mean over layers; log scale) per variant and weight setting."""
    err = table.ssd_error.mean("layer") if "layer" in table.ssd_error.dims else table.ssd_error
    rows = [(WEIGHTS_LABEL.get(str(w), str(w)), _label(str(v)), max(float(err.sel(variant=v, weights=w)), 1e-12))
            for w in table.weights.values for v in table.variant.values if v != "fp32" or w != "fp32"]
    variant = hv.Dimension("variant", values=[_label(str(v)) for v in table.variant.values])
    return _bars(rows, ["weights", variant], "relative error (mean over layers)", "SSD output error Σ|Y'-Y|²/Σ|Y|²",
                 "variant", _colours(), log=True, width=720)


def channel_ranges(ds: xr.Dataset, layer: int = 0) -> hv.Overlay:
    """Calibration amax of the SSD input per channel (largest over chunks), the injected outlier channels marked;
    the dashed line is the one range a per-tensor scale has to cover."""
    amax = ds.x_amax.sel(layer=layer).max("chunk").values
    out = ds.outlier.sel(layer=layer).values > 1
    ch = ds.channel.values
    lo, hi = _log_range(amax)
    items = [_stems(ch[~out], amax[~out], "channel", "amax", lo, PALETTE[0], "channels"),
             hv.Scatter((ch[out], amax[out]), "channel", "amax", label="injected outliers").opts(
                 color=PALETTE[1], size=8, marker="triangle"),
             hv.HLine(float(amax.max())).opts(color=PALETTE[1], line_dash="dashed", line_width=1)]
    return hv.Overlay(items).opts(title=f"layer {layer}: range of x per channel (one scale each, axis-aware)",
                                  logy=True, legend_position="right", **curve_opts(ylim=(lo, hi), width=720))


def chunk_ranges(ds: xr.Dataset, layer: int = 0) -> hv.HeatMap:
    """Calibration amax of the SSD input per (chunk, channel), relative to each channel's largest: how much a scale
    per chunk gains over one per channel."""
    a = ds.x_amax.sel(layer=layer)
    rel = (a / a.max("chunk")).values
    rows = [(int(p), int(c), float(rel[i, j])) for i, c in enumerate(ds["chunk"].values)
            for j, p in enumerate(ds.channel.values)]  # (channel, chunk, value), as the key dimensions read
    return hv.HeatMap(rows, ["channel", "chunk"], "amax / channel max").opts(
        title=f"layer {layer}: range of x per chunk (relative to the channel's largest)", cmap="viridis",
        colorbar=True, width=720, height=260, tools=["hover"])


def correction_profile(ds: xr.Dataset, layer: int = 0) -> hv.Overlay:
    """The correction's c* per SSD output channel (the calibration mean of Y - Y'), for each weight setting."""
    items = []
    for k, w in enumerate(ds.weights.values):
        items.append(hv.Curve((ds.channel.values, ds.correction.sel(layer=layer, weights=w).values), "channel",
                              "c*", label=WEIGHTS_LABEL.get(str(w), str(w))).opts(color=PALETTE[k % len(PALETTE)]))
    return hv.Overlay(items).opts(title=f"layer {layer}: correction c* per channel (before the coefficient "
                                        f"{ds.attrs['correction_scale']:g})", legend_position="top_right",
                                  **curve_opts())


def cpu_costs(ds: xr.Dataset) -> hv.Bars:
    """CPU wall time of the SSD, in_proj and the whole model: float32, INT8 (int32 sums) and fake-quant."""
    labels = {"fp32": "float32", "int8": "INT8 (int32 sums)", "fake_quant": "fake-quant twin"}
    colours = {"float32": "black", "INT8 (int32 sums)": PALETTE[0], "fake-quant twin": "#999999"}
    rows = [(str(op), labels[str(i)], 1e3 * float(ds.cpu_time.sel(op=op, impl=i)))
            for op in ds.op.values for i in ds.impl.values]
    impl = hv.Dimension("implementation", values=list(labels.values()))
    return _bars(rows, ["operation", impl], "ms", f"CPU wall time ({ds.attrs['threads']} thread(s), load "
                 f"{ds.attrs['load_before']:.1f}); no GPU figure", "implementation", colours, log=True, width=560)


def training_curve(ds: xr.Dataset) -> hv.Curve:
    """The language model's training loss."""
    return hv.Curve((ds.step.values, ds.train_loss.values), "step", "loss (nats/char)").opts(
        title="training loss (Mamba-2, Python standard-library characters)", color=PALETTE[0],
        **curve_opts(logy=True))


def activation_ranges(values: xr.DataArray) -> hv.Overlay:
    """amax of the activation per index along its axis (:func:`live.activations`), and the per-tensor amax."""
    axis = values.dims[0]
    a = np.abs(values).max("sample").values
    lo, hi = _log_range(a)
    # the y extent as the value's range, not ylim, and every layer framewise: a dashboard updating the plot in place
    # (another tensor or axis) rescales to each frame
    amax = hv.Dimension("amax", range=(lo, hi))
    stems = _stems(values[axis].values, a, axis, amax, lo, PALETTE[0])
    return hv.Overlay([
        *(el.opts(framewise=True) for el in stems),
        hv.HLine(float(a.max())).opts(color=PALETTE[1], line_dash="dashed", line_width=1),
    ]).opts(title=f"{values.attrs.get('tensor', '')}: range per {axis} (dashed: per tensor)", logy=True,
            **curve_opts(width=500, toolbar="above"))


def activation_histogram(values: xr.DataArray, index: int | None = None, bins: int = 80) -> hv.Histogram:
    """Histogram of the activation's values (all indices, or one index along its axis) over their own range, log
    counts: the bars start at the axis floor, 0.5, under a single count."""
    axis = values.dims[0]
    v = values.values.ravel() if index is None else values.isel({axis: index}).values.ravel()
    v = v[np.isfinite(v)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
    where = "all" if index is None else f"{axis} {int(values[axis].values[index])}"
    name = values.attrs.get("tensor", "value")
    # the extents as the dimensions' ranges, not xlim / ylim: a dashboard updating it in place rescales per frame
    x = hv.Dimension(name, range=(float(edges[0]), float(edges[-1])))
    y = hv.Dimension("count", range=(0.5, 2.0 * max(int(counts.max()), 1)))
    return hv.Histogram((edges, np.maximum(counts, 0.5)), kdims=[x], vdims=[y]).opts(
        title=f"{values.attrs.get('tensor', '')} values ({where})", logy=True, color=PALETTE[0], line_alpha=0,
        width=500, height=340, tools=["hover"], toolbar="above", framewise=True)


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def _own_paragraph(ds: xr.Dataset) -> str:
    """The headline's regime: W8A8 on the model's own activations, the rises, the paired noise, the SSD errors."""
    fp = float(ds.loss_own.sel(variant="fp32", weights="fp32"))
    own = lambda v, w: 100 * np.expm1(float(ds.loss_own.sel(variant=v, weights=w)) - fp)  # noqa: E731
    seq = ds.seq_loss_own.sel(weights="w8a8")
    files = ds.eval_file.values
    d = clustered_difference(seq.sel(variant="ssdi8").values, seq.sel(variant="fp32").values, files)
    base = min(("input_only", "input_group"), key=lambda v: float(ds.loss_own.sel(variant=v, weights="w8a8")))
    pt = clustered_difference(seq.sel(variant="per_tensor").values, seq.sel(variant=base).values, files)
    err = ds.ssd_error_own.sel(weights="fp32").mean("layer")
    e = {v: float(err.sel(variant=v)) for v in ("input_only", "input_group", "per_tensor", "ssdi8")}
    return (f"- **The model's own activations** (no injected outliers, calibrated and corrected anew), at W8A8, "
            f"perplexity over FP32: input-only per tensor {own('input_only', 'w8a8'):+.3f}%, per channel and group "
            f"{own('input_group', 'w8a8'):+.3f}%, INT8 SSD per tensor {own('per_tensor', 'w8a8'):+.3f}%, SSDi8 "
            f"{own('ssdi8', 'w8a8'):+.3f}% (the W8A8 projections alone {own('fp32', 'w8a8'):+.3f}%; the paired "
            f"standard error over the {seq.sizes['eval_seq']} evaluation sequences, clustered by their {d.files} "
            f"source files, is about {100 * d.se:.3f}%). One scale per tensor lies {pt.z:.1f} clustered standard "
            f"errors above the strongest input-only quantiser ({base}), {100 * pt.mean / fp:+.3f}% of the loss: "
            + (f"a difference the loss resolves, but {MARGIN / max(100 * pt.mean / fp, 1e-9):.0f} times smaller than "
               f"the paper's tolerance ({MARGIN:.2f}%), so the non-inferiority test does not discriminate on these "
               "activations (a report row; the headline is measured with the injected outliers). "
               if pt.z >= 2 else "the loss cannot tell the INT8 SSD's scales apart here. ")
            + f"The SSD output error (float projections): per tensor {e['per_tensor']:.2e}, SSDi8 "
            f"{e['ssdi8']:.2e}, input-only per tensor {e['input_only']:.2e}, per channel and group "
            f"{e['input_group']:.2e} (which keeps everything after the SSD's inputs in float). The regime where "
            "the scales matter for the loss is that of the injected outliers above."
            + _seeds_sentence(ds, outliers=False))


def _seeds_sentence(ds: xr.Dataset, outliers: bool) -> str:
    """The non-inferiority bounds on every trained model, with the injected outliers (the headline) or on the model's
    own activations (a report row), and the clustered standard errors."""
    var = "seq_loss_seeds_outliers" if outliers else "seq_loss_seeds"
    if var not in ds:
        return ""
    parts, inside = [], {"ssdi8": 0, "per_tensor": 0}
    for seed in ds.seed.values:
        seq = ds[var].sel(seed=seed)
        base = min(("input_only", "input_group"), key=lambda v: float(seq.sel(candidate=v).mean()))
        ref = float(seq.sel(candidate=base).mean())
        d = {v: clustered_difference(seq.sel(candidate=v).values, seq.sel(candidate=base).values,
                                     ds.eval_file.values) for v in inside}
        parts.append(f"seed {int(seed)}: SSDi8 {100 * d['ssdi8'].upper / ref:+.3f}% ({d['ssdi8'].z:+.1f} SE), per "
                     f"tensor {100 * d['per_tensor'].upper / ref:+.3f}% ({d['per_tensor'].z:+.1f} SE)")
        inside = {v: inside[v] + (100 * d[v].upper / ref < MARGIN) for v in inside}
    n = ds.sizes["seed"]
    where = (f"with the {ds.attrs['outlier_channels']} injected outlier channels per layer (the headline)" if outliers
             else "on the models' own activations (a report row: it was the headline until its control passed too)")
    same = ""
    if outliers and "seq_loss_seeds" in ds:
        moved = abs(ds[var] - ds.seq_loss_seeds).max(("seed", "eval_seq"))
        same = (" A scale per channel absorbs a channel's factor, so SSDi8 and the per-channel input-only quantiser "
                f"are all but blind to the injected outliers (no sequence's loss moves by more than "
                f"{float(moved.sel(candidate=['ssdi8', 'input_group']).max()):.0e} nats; per tensor up to "
                f"{float(moved.sel(candidate='per_tensor')):.2f}): SSDi8's bounds here are its own-activation ones, "
                "and what the outliers change is the control.")
    return (f" Over the trained models, {where}, the upper 95% bound of the loss excess over the strongest "
            "input-only quantiser of each (and the excess in clustered standard errors): " + "; ".join(parts)
            + f". Inside the paper's {MARGIN:.2f}% margin: SSDi8 on {inside['ssdi8']} of {n} models, one scale "
            f"per tensor on {inside['per_tensor']} of {n}." + same)


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    fp = float(ds.loss.sel(variant="fp32", weights="fp32"))
    rise = lambda v, w: 100 * (float(ds.loss.sel(variant=v, weights=w)) / fp - 1)  # noqa: E731
    w = ds.attrs["correction_weights"]
    err = ds.ssd_error.mean("layer")
    t = ds.cpu_time
    ratio = {op: float(t.sel(op=op, impl="int8") / t.sel(op=op, impl="fp32")) for op in t.op.values}
    mem = float(ds.ssd_bytes.sel(path="int8") / ds.ssd_bytes.sel(path="fp32"))
    return "\n".join([
        f"- **Model.** {ds.sizes['layer']} Mamba-2 layers trained to {ds.attrs['train_final_loss']:.3f} nats/char "
        f"(last tenth of training; {ds.attrs['train_time_s']:.0f} s when trained"
        f"{', loaded from the cache' if ds.attrs['from_cache'] else ''}); evaluation on "
        f"{ds.attrs['eval_chars']} characters ({ds.sizes.get('eval_seq', 0)} sequences) of "
        f"{ds.attrs['files_eval']} held-out files, the injected outliers and the SSD errors on "
        f"{ds.attrs.get('n_eval_grid', ds.sizes.get('eval_seq', 0))} of those sequences (float model {fp:.4f} "
        f"nats/char there), calibration on {ds.attrs['calib_chars']} characters of other files.",
        f"- **The SSD in INT8** (projections in float): axis-aware scales with the correction change the loss by "
        f"{rise('ssdi8', 'fp32'):+.3f}%, one scale per tensor by {rise('per_tensor', 'fp32'):+.2f}%, Quamba-style "
        f"input-only quantisation by {rise('input_only', 'fp32'):+.2f}%. The injected outlier channels "
        f"(x{ds.attrs['outlier_scale']:g}, {ds.attrs['outlier_channels']} per layer) leave a per-tensor scale a few "
        "levels for every other channel; a scale per (chunk, head, headdim) does not care."
        + _seeds_sentence(ds, outliers=True),
        *([_own_paragraph(ds)] if "loss_own" in ds else []),
        f"- **SSD output error** (mean over layers, at FP32 projections): per tensor "
        f"{float(err.sel(variant='per_tensor', weights='fp32')):.2e}, axis-aware "
        f"{float(err.sel(variant='axis_aware', weights='fp32')):.2e}, SSDi8 "
        f"{float(err.sel(variant='ssdi8', weights='fp32')):.2e}.",
        f"- **Correction** at {w}: error {float(err.sel(variant='axis_aware', weights=w)):.3e} without, "
        f"{float(err.sel(variant='ssdi8', weights=w)):.3e} with (coefficient {ds.attrs['correction_scale']:g}), "
        f"{float(ds.ssd_error_full_correction.sel(weights=w).mean()):.3e} with the whole mean (coefficient 1), "
        f"{float(err.sel(variant='shuffled', weights=w)):.3e} with the values on shuffled channels. The "
        "correction can remove only the mean part of the error, and at coefficient c at most 1 - (1 - c)² of it "
        f"({100 * (1 - (1 - float(ds.attrs['correction_scale'])) ** 2):.2f}%); round-to-nearest codes leave little "
        "of it.",
        f"- **CPU.** INT8 / float32 wall time: SSD x{ratio['ssd']:.2f}, in_proj x{ratio['in_proj']:.2f}, whole "
        f"model x{ratio['model']:.2f} (torch {ds.attrs['torch']}, {ds.attrs['threads']} thread(s), load "
        f"{ds.attrs['load_before']:.1f} on {ds.attrs['cpu_count']} CPUs): the INT8 SSD is "
        f"{'slower' if ratio['ssd'] > 1 else 'faster'} than float32 here: torch's CPU int8 product is called once "
        "per (batch, chunk, group) block of these small matrices (`lab bench int8` times the SSD against the best "
        "float32 kernel and a large int8 projection, which runs several times faster than float32). The paper's "
        f"speed-up is a GPU kernel's and is not claimed here. Bytes held between the SSD's stages: x{mem:.2f} of "
        "float32 (chunk states and passed states int8, as upstream); on the same inputs the INT8 SSD and its "
        f"fake-quant twin differ in {int(ds.twin_codes_differ.sum())} of {int(ds.twin_codes.sum())} codes and "
        f"agree to {float(ds.twin_ssd_difference.max()):.1e} (relative), the whole model's logits to "
        f"{float(ds.twin_difference):.1e}.",
    ])
