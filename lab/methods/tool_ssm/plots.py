"""HoloViews plots of the tool-use results (notebook ``08_tool_ssm``) and of one episode (dashboard ``reasoning``),
and the notebook's discussion built from the Dataset."""

from __future__ import annotations

import html

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

MODEL_COLOUR = {"mamba": PALETTE[0], "lru": PALETTE[1], "gru": PALETTE[2], "transformer": PALETTE[3]}
REGIME_DASH = {"tool": "solid", "cot": "dashed", "direct": "dotted"}
SOURCE_COLOUR = {"question": "#777777", "model": "#1f5fa8", "tool": "#2e933c"}


def accuracy_vs_length(ds: xr.Dataset, task: str = "add", var: str = "exact") -> hv.Overlay:
    """Closed-loop accuracy against operand length, per model (colour) and regime (dash), mean over seeds; the
    grey line marks the longest training problem."""
    items = []
    for model in ds.model.values:
        for regime in ds.regime.values:
            y = ds[var].sel(task=task, model=model, regime=regime).mean("seed").values
            if not np.isfinite(y).any():
                continue
            items.append(hv.Curve((ds.length.values, y), "operand digits", f"{var} (%)",
                                  label=f"{model}, {regime}").opts(
                color=MODEL_COLOUR.get(str(model), "black"), line_dash=REGIME_DASH[str(regime)], line_width=2))
            items.append(hv.Scatter((ds.length.values, y), "operand digits", f"{var} (%)").opts(
                color=MODEL_COLOUR.get(str(model), "black"), size=6))
    items.append(hv.VLine(float(ds.attrs["train_max"])).opts(color="grey", line_dash="dotted"))
    return hv.Overlay(items).opts(title=f"{task}: {var} accuracy against length (train <= {ds.attrs['train_max']})",
                                  logx=True, legend_position="right", **curve_opts(width=700),
                                  xlim=(0.8 * float(ds.length.min()), 1.25 * float(ds.length.max())),
                                  xticks=[int(n) for n in ds.length.values])  # the training line off the edge


def tape(ep: dict, step: int) -> hv.Labels:
    """The tool's tapes (operands a, b and the output) after ``step`` tokens of the tool episode, heads marked."""
    rec = ep["tool"]
    s = rec["steps"][min(step, len(rec["steps"]) - 1)]
    width = max(len(ep["a"]), len(ep["answer"])) + 1
    xs, ys, text = [], [], []
    rows = {"a": ep["a"], "b": ep["b"], "out": s["out"]}
    for row, digits in rows.items():
        for i in range(width):
            head = (row in ("a", "b") and s[row] == i) or (row == "out" and len(digits) == i)
            cell = str(digits[i]) if i < len(digits) else "_"
            xs.append(i)
            ys.append(row)
            text.append(f"[{cell}]" if head else cell)
    title = f"step {step}: {s['token']} ({s['source']}); heads a={s['a']}, b={s['b']}, out={len(s['out'])}"
    return hv.Labels({"cell": xs, "tape": ys, "symbol": text}, ["cell", "tape"], "symbol").opts(
        title=title, width=max(420, min(1000, 22 * width)), height=220, text_font_size="10pt",
        yaxis="left", invert_yaxis=True, xlabel="cell (least significant digit first)")


def digits_right(ep: dict) -> hv.Overlay:
    """Which answer digits each model got right (1) or wrong (0), by position, with and without the tool."""
    items = []
    for key, label, colour in (("tool", "with the tool", PALETTE[0]), ("no_tool", "without (chain of thought)",
                                                                        PALETTE[1])):
        out = ep[key]["out"]
        right = [float(i < len(out) and out[i] == d) for i, d in enumerate(ep["answer"])]
        items.append(hv.Curve((np.arange(len(right)), right), "answer digit", "right", label=label).opts(
            color=colour, interpolation="steps-mid", line_width=2))
    items.append(hv.VLine(float(ep["train_max"])).opts(color="grey", line_dash="dotted"))
    return hv.Overlay(items).opts(title=f"{ep['length']}-digit {ep['task']}, {ep['model']}: digits right",
                                  legend_position="bottom_left", **curve_opts(width=700, height=240))


def tokens_html(ep: dict, key: str = "tool", step: int | None = None, limit: int = 400) -> str:
    """The episode's tokens as HTML, coloured by who wrote them (question, model, tool), errors in red, the
    current ``step`` boxed; at most ``limit`` tokens around it."""
    steps = ep[key]["steps"]
    step = len(steps) - 1 if step is None else min(step, len(steps) - 1)
    lo = max(0, step - limit // 2)
    parts = [] if lo == 0 else ["… "]
    for i, s in enumerate(steps[lo: lo + limit], start=lo):
        colour = "#b00020" if s["error"] else SOURCE_COLOUR[s["source"]]
        box = "border:2px solid black;" if i == step else ""
        parts.append(f"<span style='color:{colour};{box}padding:0 2px'>{html.escape(s['token'])}</span>")
    return "<div style='font-family:monospace;line-height:1.6'>" + " ".join(parts) + "</div>"


def discussion(ds: xr.Dataset) -> str:
    """Markdown: the accuracy-versus-length key points of this run."""
    m, n = int(ds.attrs["train_max"]), int(ds.attrs["claim_length"])
    lines = [f"Trained on 1..{m}-digit problems; tested closed loop on {ds.attrs['n_test']} problems per length.", ""]
    for task in ds.task.values:
        for model in ds.model.values:
            for regime in ds.regime.values:
                y = ds.exact.sel(task=task, model=model, regime=regime).mean("seed")
                if not np.isfinite(y.values).any():
                    continue
                points = ", ".join(f"{int(L)}: {float(v):.0f}%" for L, v in zip(ds.length.values, y.values))
                lines.append(f"- **{task}, {model}, {regime}**: {points}")
    tool = ds.exact.sel(task=ds.task.values[0], regime="tool", length=n).mean("seed") if "tool" in ds.regime else None
    if tool is not None:
        best = str(tool.idxmax("model").values) if np.isfinite(tool.values).any() else "none"
        lines += ["", f"At {n} digits ({n // m}x the longest training problem) the best model with tools is {best}."]
    if "exact_train_max" in ds and "cot" in ds.regime.values:  # the controls' competence inside the training range
        task = ds.task.values[0]
        cot = ds.exact_train_max.sel(task=task, regime="cot").min("seed")
        parts = ", ".join(f"{k} {float(v):.0f}%" for k, v in zip(ds.model.values, cot.values) if np.isfinite(v))
        count = ds.attrs.get("n_competence", ds.attrs["n_test"])
        lines += ["", f"Without the tool, exact match at {m} digits, inside the training range ({count} problems, "
                      "worst seed): "
                      f"{parts}. A tool-less model that never learned addition where it was trained proves nothing "
                      "by failing beyond it: the claims then say 'control not competent'."]
    return "\n".join(lines)
