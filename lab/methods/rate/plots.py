"""RATE's HoloViews builders (notebook and ``agents`` dashboard) and the notebook's discussion."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, log_ticks

__all__ = ["LABELS", "discussion", "memory_attention_plot", "rollout_plot", "success_plot", "success_table"]

LABELS = {"rate": "RATE", "rate_no_valve": "RATE w/o valve", "rate_detached": "RATE, memory detached",
          "dt_short": "DT, context K", "dt_long": "DT, context K x N", "gru": "GRU (BC)"}
COLOURS = {"rate": PALETTE[0], "rate_no_valve": PALETTE[1], "rate_detached": PALETTE[6], "dt_short": PALETTE[3],
           "dt_long": PALETTE[5], "gru": PALETTE[4]}
_GREEN, _RED = PALETTE[2], PALETTE[1]


def _label(variant: str) -> str:
    return LABELS.get(variant, variant)


def rollout_plot(episode: dict, *, width: int = 760, height: int = 260) -> hv.Overlay:
    """The agent's path in the maze (:func:`lab.methods.rate.live.rollout`): for a T-Maze the corridor, the
    junction's two arms (the clue's arm green, the other red), the clue at the start and the agent's steps."""
    pos = np.asarray(episode["positions"], float)
    verdict = "success" if episode["success"] else "failure"
    if episode.get("env", "tmaze") != "tmaze":
        path = hv.Curve((pos[:, 0], -pos[:, 1]), "x", "y").opts(color=PALETTE[0], line_width=3)
        ends = hv.Scatter([(pos[0, 0], -pos[0, 1]), (pos[-1, 0], -pos[-1, 1])], "x", "y").opts(
            color="black", size=10)
        what = "key" if episode["clue"] > 0 else "ball"
        return (path * ends).opts(width=width, height=height, show_grid=True, title=(
            f"{_label(episode['variant'])} on MiniGrid-Memory: the room's object is a {what}; {verdict} in "
            f"{len(episode['actions'])} steps"))
    L = int(episode["corridor_length"])
    clue = int(episode["clue"])
    corridor = hv.Path([[(0, 0), (L - 1, 0)]]).opts(color="#bbbbbb", line_width=12)
    good = hv.Path([[(L - 1, 0), (L - 1, clue)]]).opts(color=_GREEN, line_width=12, alpha=0.6)
    bad = hv.Path([[(L - 1, 0), (L - 1, -clue)]]).opts(color=_RED, line_width=12, alpha=0.6)
    steps = np.arange(len(pos))
    path = hv.Path([{"x": pos[:, 0], "y": pos[:, 1], "step": steps}], vdims="step").opts(
        color="step", cmap="viridis", line_width=3, colorbar=True)
    clue_mark = hv.Scatter([(0, 0)], "x", "y").opts(marker="star", size=22, color=_GREEN if clue > 0 else _RED,
                                                    line_color="black")
    clue_text = hv.Text(0.02 * L + 0.3, 0.5, f"clue {clue:+d} ({'up' if clue > 0 else 'down'})",
                        halign="left").opts(text_font_size="10pt")
    end = hv.Scatter([tuple(pos[-1])], "x", "y").opts(marker="circle", size=12, color="black")
    K = int(episode.get("segment_length") or 0)
    cuts = [(x - 0.5, -1.5, x - 0.5, 1.5) for x in range(K, L, K)] if K and L // K <= 300 else []
    bounds = hv.Segments(cuts, ["x0", "y0", "x1", "y1"]).opts(color="#cccccc", line_dash="dotted", line_width=1)
    return (bounds * corridor * good * bad * path * clue_mark * clue_text * end).opts(
        width=width, height=height, xlim=(-0.05 * L - 1, 1.05 * L), ylim=(-1.6, 1.6), show_grid=False,
        xlabel="x (corridor)", ylabel="y", title=(
            f"{_label(episode['variant'])}, corridor of {L} steps: turned "
            f"{'up' if pos[-1, 1] > 0 else 'down' if pos[-1, 1] < 0 else 'nowhere'}: {verdict}"
            + (f" (dotted: every K = {K} steps)" if K else "")))


def memory_attention_plot(episode: dict, *, width: int = 760, height: int = 300) -> hv.Layout | hv.Div:
    """The Memory Retention Valve at every segment boundary of a RATE episode: left, each old memory token's
    attention over the written tokens across boundaries; right, the last boundary's matrix."""
    att = episode.get("memory_attention")
    if att is None:
        return hv.Div(f"<i>{_label(episode['variant'])} has no memory valve.</i>")
    att = np.asarray(att)
    if att.shape[0] == 0:
        return hv.Div("<i>No segment was completed before the turn: the valve never ran.</i>")
    n, m, _ = att.shape
    rows = [(b + 1, f"M{i} <- M~{j}", float(att[b, i, j])) for b in range(n) for i in range(m) for j in range(m)]
    evolution = hv.HeatMap(rows, ["segment boundary", "old token <- written token"], "attention").opts(
        cmap="viridis", clim=(0, 1), colorbar=True, width=int(width * 0.62), height=height, tools=["hover"],
        title=f"Valve attention over {n} segment boundaries", invert_yaxis=True)
    last = hv.HeatMap([(f"M~{j}", f"M{i}", float(att[-1, i, j])) for i in range(m) for j in range(m)],
                      ["written token", "old token"], "attention").opts(
        cmap="viridis", clim=(0, 1), width=int(width * 0.38), height=height, tools=["hover"], invert_yaxis=True,
        title=f"boundary {n}: Q = old memory")
    return (evolution + last).opts(shared_axes=False)


def success_plot(result: xr.Dataset, *, width: int = 760, height: int = 380) -> hv.Overlay:
    """Success (%) against corridor length (log axis) per agent: mean over seeds with a band from the worst to the
    best seed, on the lengths the agent was tested on; dotted lines at K (the short DT's context) and T_train (the
    longest training corridor), dashed at chance. RATE is drawn last (on top)."""
    ds = result
    K, T = int(ds.attrs["segment_length"]), int(ds.attrs["train_max"])
    marks = (hv.VLine(K).opts(color="#999999", line_dash="dotted") * hv.VLine(T).opts(color="black",
                                                                                      line_dash="dotted")
             * hv.HLine(50).opts(color="#999999", line_dash="dashed"))
    layers = []
    order = [str(v) for v in ds.variant.values if v != "rate"] + (["rate"] if "rate" in ds.variant.values else [])
    for variant in order:
        succ = ds.success.sel(variant=variant)
        succ = succ.sel(length=[L for L in ds.length.values if bool(np.isfinite(succ.sel(length=L)).all())])
        xs, label = succ.length.values.astype(float), _label(variant)
        color = COLOURS.get(variant, "#444444")
        mean, lo, hi = succ.mean("seed").values, succ.min("seed").values, succ.max("seed").values
        dash = "solid" if variant.startswith("rate") else "dashed"
        layers += [hv.Area((xs, lo, hi), "corridor length", ["low", "high"], label=label).opts(
                       color=color, alpha=0.15, line_alpha=0),
                   hv.Curve((xs, mean), "corridor length", "success", label=label).opts(
                       color=color, line_width=4 if variant == "rate" else 2, line_dash=dash),
                   hv.Scatter((xs, mean), "corridor length", "success", label=label).opts(color=color, size=6)]
    return (marks * hv.Overlay(layers)).opts(
        width=width, height=height, logx=True, ylim=(-5, 105), show_grid=True, legend_position="right",
        xticks=log_ticks(ds.length.values.min(), ds.length.values.max()),
        xlabel=f"corridor length (steps; dotted: K = {K}, T_train = {T})", ylabel="success (%)",
        title=f"T-Maze success, {ds.sizes['seed']} seeds (band: worst to best seed)"
              + ("; DTs tested up to 10 x T_train" if ds.length.values.max() > 10 * T else ""))


def success_table(ds: xr.Dataset):
    """Mean success (%) over seeds: agents x corridor lengths (a pandas DataFrame)."""
    table = ds.success.mean("seed").to_pandas().round(1)
    table.index = [_label(str(v)) for v in table.index]
    return table


def _pct(values, missing: str = "not tested") -> str:
    values = np.asarray(values, float).ravel()
    if not np.isfinite(values).any():
        return missing
    values = values[np.isfinite(values)]
    if np.ptp(values) == 0:
        return f"{values[0]:.0f}%"
    return f"{values.mean():.0f}% (seeds {values.min():.0f} to {values.max():.0f})"


def _row(ds: xr.Dataset, length: int, var: str = "success", missing: str = "not tested") -> str:
    return ", ".join(f"{_label(str(v))} {_pct(ds[var].sel(variant=v, length=length).values, missing)}"
                     for v in ds.variant.values)


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    K, T = int(ds.attrs["segment_length"]), int(ds.attrs["train_max"])
    lengths = [int(L) for L in ds.length.values]
    longest = lengths[-1]
    lines = [f"- **At the training length** ({T} steps), mean over {ds.sizes['seed']} seeds: {_row(ds, T)}."]
    tenfold = [L for L in lengths if T < L <= 10 * T]
    if tenfold and tenfold[-1] != longest:
        lines.append(f"- **At {tenfold[-1]} steps** ({tenfold[-1] / T:g} x T_train): {_row(ds, tenfold[-1])}.")
    lines += [
        f"- **At {longest} steps** ({longest / T:g} x the longest training corridor): {_row(ds, longest)}"
        + ("; the DTs are not tested beyond 10 x T_train (their context, K or T_train steps, is then under a tenth "
           "of the corridor)" if longest > 10 * T else "") + ".",
        f"- The short DT sees only the last {K} steps: at {K} steps (the clue inside its context) it succeeds "
        f"{float(ds.success.sel(variant='dt_short', length=K).mean()):.0f}% of the time; the long DT sees {T} "
        "steps and holds up to there.",
        f"- Episodes that reached the junction and turned at all (right or wrong) at {longest} steps: "
        f"{_row(ds, longest, 'turned')}: a failure below 100% here is an agent lost in the corridor, not a wrong "
        "guess.",
    ]
    if "turn_accuracy" in ds:
        lines.append(f"- **Turn accuracy** at {longest} steps (the clue's arm among the episodes that turned, 50% is "
                     f"a guess): {_row(ds, longest, 'turn_accuracy')}.")
    form = ds.attrs.get("valve_form", "official")
    detached = bool(int(ds.attrs.get("detach_memory", 0)))
    valve = ("the official code's `M_{n+1} = MultiHead(Q = M_n, K = V = ReLU(M~_{n+1}))`" if form == "official"
             else "the lab's `M_{n+1} = FFN(MultiHead(Q = M_n, K = V = M~_{n+1}))` with three LayerNorms")
    grad = ("detached between segments (the official trainer)" if detached else
            "carried with its gradient through every segment, as the paper describes")
    at = {str(v): ds.success.sel(variant=v, length=longest).values for v in ds.variant.values}
    lines.append(f"- RATE's valve here is {valve}; its memory is {grad}. " + (
        "With the memory detached between segments as the official trainer does (RATE, memory detached), the "
        "write path and the valve get no gradient: what the memory carries is whatever the write tokens happen to "
        f"hold, and only reading it is learned: {_pct(at['rate_detached'])} at {longest} steps against "
        f"{_pct(at['rate'])} for RATE." if "rate_detached" in at and not detached else ""))
    if {"rate", "gru"} <= set(at):
        gap = (ds.success.sel(variant="gru") - ds.success.sel(variant="rate")).mean("seed")
        lines.append("- **The GRU minus RATE** (mean success gap per length, points): "
                     + ", ".join(f"{L}: {float(gap.sel(length=L)):+.0f}" for L in lengths)
                     + f". The GRU at {longest} steps, per seed: "
                     + ", ".join(f"{x:.0f}%" for x in at["gru"])
                     + f"; {_pct(ds.turned.sel(variant='gru', length=longest).values)} of its episodes reached the "
                     "junction and turned" + (": where it fails it has lost the clue, not its way" if
                                              float(ds.turned.sel(variant="gru", length=longest).min()) >= 100
                                              else "") + ".")
    if "minigrid_success" in ds:
        mg = ds.minigrid_success.mean("seed")
        lines.append(f"- **MiniGrid-MemoryS{ds.attrs['minigrid_size']}-v0** (success, mean over seeds): "
                     + ", ".join(f"{_label(str(v))} {float(mg.sel(variant=v)):.0f}%" for v in ds.variant.values)
                     + ".")
    return "\n".join(lines)
