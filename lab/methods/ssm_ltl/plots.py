"""HoloViews plots of the expressiveness experiments (notebook ``07_ssm_ltl`` and the ``expressiveness``
dashboard), and the notebook's discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

KIND_STYLE = {
    "lti": {"color": PALETTE[0], "label": "time-invariant"},
    "gate01": {"color": PALETTE[1], "label": "gates in (0, 1)"},
    "gate11": {"color": PALETTE[2], "label": "gates in (-1, 1)"},
}
PRECISION_DASH = {"float32": "solid", "int8": "dashed"}


def kind_style(kind: str) -> dict:
    """Colour and label of a trained gating class."""
    return KIND_STYLE.get(kind, {"color": "black", "label": kind})


def handbuilt_accuracy(ds: xr.Dataset) -> hv.Overlay:
    """Share of right prefix decisions of every construction against the word length (float32 solid, int8
    dashed); a construction without an int8 form has no dashed line."""
    items = []
    for c, name in enumerate(ds.construction.values):
        for precision in ds.precision.values:
            wrong = ds.wrong.sel(construction=name, precision=precision)
            if not bool(wrong.notnull().any()):
                continue
            acc = 1 - wrong / ds.decisions.sel(construction=name, precision=precision)
            items.append(hv.Curve((ds.length.values, acc.values), "word length", "right decisions",
                                  label=f"{name} ({precision})").opts(
                color=PALETTE[c % len(PALETTE)], line_dash=PRECISION_DASH[str(precision)], line_width=2))
            items.append(hv.Scatter((ds.length.values, acc.values), "word length", "right decisions").opts(
                color=PALETTE[c % len(PALETTE)], size=5))
    return hv.Overlay(items).opts(title="hand-built constructions: right prefix decisions", logx=True,
                                  legend_position="bottom_left", **curve_opts(ylim=(-0.02, 1.05), width=680))


def counter_range(ds: xr.Dataset) -> hv.Overlay:
    """The a^n b^n c^n counter's decision on the member a^n b^n c^n (1: accepted) and the share of near misses
    rejected, against n, in float32 and int8; the dotted line is int8's largest value, 127."""
    items = []
    for p, precision in enumerate(ds.precision.values):
        grid = ds.counter_accepts.sel(precision=precision)
        member = grid.sel(word="member").values
        rejected = (1 - grid.drop_sel(word="member")).mean("word").values
        colour = PALETTE[p]
        items.append(hv.Curve((ds.n.values, member), "n", "share", label=f"member accepted ({precision})").opts(
            color=colour, line_width=2.5))
        items.append(hv.Curve((ds.n.values, rejected), "n", "share", label=f"near misses rejected ({precision})")
                     .opts(color=colour, line_dash="dashed", line_width=1.8))
    items.append(hv.VLine(127).opts(color="gray", line_dash="dotted", line_width=1))
    return hv.Overlay(items).opts(title="counters (A = 1) on a^n b^n c^n: float32 vs int8", logx=True,
                                  legend_position="bottom_left", **curve_opts(ylim=(-0.05, 1.1)))


def length_generalisation(ds: xr.Dataset, language: str) -> hv.Overlay:
    """Trained models on ``language``: accuracy on the positions beyond the training length (at the training
    length: all positions) against the test length, one curve per class (mean over seeds, every seed as a dot; the
    dotted line is the training length)."""
    items = []
    sub = ds.sel(language=language)
    acc = sub.accuracy_beyond.where(sub.factor > 1, sub.accuracy)
    lengths = sub.factor.values * int(ds.attrs["train_length"])
    dims = ("test length", "accuracy")
    for kind in sub.kind.values:
        st = kind_style(str(kind))
        a = acc.sel(kind=kind)
        items.append(hv.Curve((lengths, a.mean("seed").values), *dims, label=f"{st['label']}: mean").opts(
            color=st["color"], line_width=2.2))
        dots = np.concatenate([np.stack([lengths, a.sel(seed=s).values], axis=1) for s in a.seed.values])
        items.append(hv.Scatter(dots, *dims, label=f"{st['label']}: each seed").opts(
            color=st["color"], size=6, alpha=0.55))
    items.append(hv.VLine(int(ds.attrs["train_length"])).opts(color="gray", line_dash="dotted", line_width=1))
    return hv.Overlay(items).opts(title=f"trained one-layer models on {language}", logx=True,
                                  legend_position="bottom_left", legend_cols=2, xticks=[int(x) for x in lengths],
                                  **curve_opts(ylim=(0.0, 1.03), xlim=(lengths[0] / 1.3, lengths[-1] * 1.3),
                                               width=460, height=400))


def trained_overview(ds: xr.Dataset) -> hv.Layout:
    """:func:`length_generalisation` for every trained language, side by side."""
    return hv.Layout([length_generalisation(ds, str(lang)) for lang in ds.language.values]).cols(2)


def expressible_vs_learnable(ds: xr.Dataset) -> hv.Overlay:
    """Best seed's accuracy beyond the training length at the claim factor per (language, class), each cell
    labelled with the paper's verdict (expressible or not)."""
    best = ds.accuracy_beyond.sel(factor=int(ds.attrs["claim_factor"])).max("seed")
    rows, labels = [], []
    for lang in ds.language.values:
        for kind in ds.kind.values:
            value = float(best.sel(language=lang, kind=kind))
            says = "expressible" if bool(ds.expressible.sel(language=lang, kind=kind)) else "not expressible"
            rows.append((kind_style(str(kind))["label"], str(lang), value))
            labels.append((kind_style(str(kind))["label"], str(lang), f"{value:.2f}\n{says}"))
    heat = hv.HeatMap(rows, ["class", "language"], "accuracy").opts(
        cmap="RdYlGn", clim=(0.4, 1.0), colorbar=True, tools=["hover"], width=560, height=320,
        title=f"learned (best seed, {ds.attrs['claim_factor']}x length) vs the paper's expressibility")
    return heat * hv.Labels(labels, ["class", "language"], "text").opts(text_font_size="9pt")


def since_runs(ds: xr.Dataset) -> hv.Overlay:
    """b S a at the end of a run of b's against the run's length: the hand-built input-gated since (float32 and
    int8), its time-invariant control (float32, int8 as 8-bit fixed point), the trained classes (mean over seeds as
    a line, every seed as a dot); vertical lines at the float32 horizons (the hand-built control's, grey; each
    trained time-invariant seed's, blue dashed): past a horizon float32 holds the same state after an a as after a
    c. Every mark has a legend entry."""
    items, n = [], float(ds.attrs["n_test"])
    runs = ds.run.values
    dims = ("run of b's", "right at the run's end")
    for name in ds.since_model.values:
        colour = "black" if name == "since" else "gray"
        for precision in ds.precision.values:
            right = 1 - ds.run_wrong.sel(since_model=name, precision=precision).values / n
            items.append(hv.Curve((runs, right), *dims, label=f"hand-built {name} ({precision})").opts(
                color=colour, line_dash=PRECISION_DASH[str(precision)], line_width=2))
    for kind in ds.kind.values:
        st = kind_style(str(kind))
        acc = ds.run_accuracy.sel(kind=kind)
        items.append(hv.Curve((runs, acc.mean("seed").values), *dims, label=f"trained {st['label']}: mean").opts(
            color=st["color"], line_width=2.2))
        dots = np.concatenate([np.stack([runs, acc.sel(seed=s).values], axis=1) for s in acc.seed.values])
        items.append(hv.Scatter(dots, *dims, label=f"trained {st['label']}: each seed").opts(
            color=st["color"], size=6, alpha=0.55))
    # horizons as labelled vertical segments (solid and dashed, never dotted: a dotted line beside a dashed one
    # draws as a row of small arcs), spanning the plot's y range
    ylo, yhi = 0.3, 1.05
    hand = float(ds.hand_horizon.sel(since_model="lti_since"))
    if np.isfinite(hand):
        items.append(hv.Curve(([hand, hand], [ylo, yhi]), *dims, label="horizon: hand-built lti_since").opts(
            color="gray", line_width=1.5, alpha=0.8, ylim=(ylo, yhi)))
    seeds = [float(h) for h in ds.horizon.sel(kind="lti").values if np.isfinite(h)]
    if seeds:
        xs = np.concatenate([[h, h, np.nan] for h in seeds])
        ys = np.tile([ylo, yhi, np.nan], len(seeds))
        items.append(hv.Curve((xs, ys), *dims, label="horizon: trained time-invariant (each seed)").opts(
            color=kind_style("lti")["color"], line_dash="dashed", line_width=1.2, ylim=(ylo, yhi)))
    title = "b S a at the end of a run of b's, with float32 horizons"
    return hv.Overlay(items).opts(title=title, logx=True, legend_position="right",
                                  **curve_opts(ylim=(ylo, yhi), width=980, height=420))


def trajectory(traj, max_channels: int = 8) -> hv.Layout:
    """One word through one model (a :class:`lab.methods.ssm_ltl.live.Trajectory`): the state channels against the
    position, and the decision on each prefix against the truth; a red line marks the first mistake."""
    pos = np.arange(1, len(traj.tokens) + 1)
    states = [hv.Curve((pos, traj.states[:, k]), "position", "state", label=traj.state_names[k]).opts(
        color=PALETTE[k % len(PALETTE)], line_width=1.6) for k in range(min(max_channels, traj.states.shape[1]))]
    title = f"{traj.model} on {traj.language} ({traj.source}, {traj.precision})"
    decisions = [
        hv.Curve((pos, traj.truth.astype(float)), "position", "member", label="truth").opts(
            color="gray", line_width=4, alpha=0.5, interpolation="steps-mid"),
        hv.Curve((pos, traj.accept.astype(float)), "position", "member", label="model accepts").opts(
            color=PALETTE[0], line_width=1.6, interpolation="steps-mid"),
    ]
    if traj.first_failure is not None:
        marker = hv.VLine(traj.first_failure).opts(color=PALETTE[1], line_width=1.5)
        states.append(marker)
        decisions.append(marker)
    failed = "no mistake" if traj.first_failure is None else f"first mistake at position {traj.first_failure}"
    short = traj.word if len(traj.word) <= 40 else traj.word[:40] + "..."
    # the word goes under the axis (a title holds about 80 characters at this width)
    top = hv.Overlay(states).opts(title=f"{title}: states", legend_position="right", xlabel=f"position in {short}",
                                  **curve_opts(width=760, height=260))
    bottom = hv.Overlay(decisions).opts(
        title=f"decisions: {traj.accuracy:.1%} right, {failed}", legend_position="right",
        **curve_opts(width=760, height=260, ylim=(-0.1, 1.1)))
    return (top + bottom).cols(1)


# ------------------------------------------------------------------------------------------------------------------
# The notebook's discussion: its numbers read from the Dataset.
# ------------------------------------------------------------------------------------------------------------------
def _first(ds: xr.Dataset, name: str, precision: str) -> str:
    first = ds.first_failure.sel(construction=name, precision=precision).min()
    if not bool(ds.wrong.sel(construction=name, precision=precision).notnull().any()):
        return "no such form"
    return "never wrong" if np.isnan(first) else f"first wrong at position {int(first)}"


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    top = int(ds.length.max())
    member = ds.counter_accepts.sel(word="member")
    ints = ds.n.values[(member.sel(precision="int8") == 1).values]
    factor = int(ds.attrs["claim_factor"])
    best = ds.accuracy_beyond.sel(factor=factor)
    cells = "; ".join(
        f"{lang}: " + ", ".join(f"{kind_style(str(k))['label']} {float(best.sel(language=lang, kind=k).max()):.2f}"
                                f" (mean {float(best.sel(language=lang, kind=k).mean()):.2f})"
                                for k in ds.kind.values)
        for lang in ds.language.values)
    return "\n".join([
        f"- **Since** (gate [x = b], inc [x = a]) on words up to {top} letters: float32 "
        f"{_first(ds, 'since', 'float32')}, int8 {_first(ds, 'since', 'int8')}. The time-invariant attempt (decay "
        f"{ds.attrs['lti_decay']:g}, exact over the reals): float32 {_first(ds, 'lti_since', 'float32')}, int8 "
        f"{_first(ds, 'lti_since', 'int8')}: it needs ever smaller numbers to remember a run of b's.",
        f"- **(aa)\\*** by a rotation by π: float32 {_first(ds, 'lti_rotation', 'float32')}, int8 "
        f"{_first(ds, 'lti_rotation', 'int8')}. A gate {ds.attrs['decay_gate']:g} in (0, 1) with a readout that "
        f"decodes the length: float32 {_first(ds, 'decay_parity', 'float32')} (float32 at short lengths is not "
        "fixed width; the contraction merges the states once they are closer than its resolution), int8 (8-bit "
        f"fixed point, the claims' control) {_first(ds, 'decay_parity', 'int8')}.",
        f"- **a^n b^n c^n** by counters: float32 accepts every member of the grid up to n = "
        f"{int(ds.n.values[(member.sel(precision='float32') == 1).values].max())}; int8 accepts members up to "
        f"n = {int(ints.max()) if ints.size else 0} (its range ends at 127).",
        f"- **Trained** (best seed, with the mean over {ds.sizes['seed']} seeds, accuracy beyond the training "
        f"length {ds.attrs['train_length']} at {factor}x): {cells}. Learnability is not expressibility: a class "
        "that can express a language may still not find the rule at one training length.",
    ] + ([_competence_line(ds)] if "accuracy_train" in ds else [])
        + ([_runs_line(ds)] if "run_accuracy" in ds else []))


def _right_to(acc: xr.DataArray) -> int:
    """The longest run whose decisions the best seed gets right (> 0.9), 0 if none."""
    right = acc.run.values[(acc.max("seed") > 0.9).values]
    return int(right.max()) if right.size else 0


def _runs_line(ds: xr.Dataset) -> str:
    """The long-run test of b S a: float32 horizons against the runs each model keeps."""
    n = float(ds.attrs["n_test"])
    hand = ds.hand_horizon.sel(since_model="lti_since")
    since_right = 1 - ds.run_wrong.sel(since_model="since").sum() / (n * ds.sizes["run"] * ds.sizes["precision"])
    lti_f32 = 1 - ds.run_wrong.sel(since_model="lti_since", precision="float32") / n
    past = lti_f32.sel(run=ds.run.values[ds.run.values > float(hand)]) if np.isfinite(hand) else lti_f32[:0]
    kept = "; ".join(f"{kind_style(str(k))['label']} to runs of {_right_to(ds.run_accuracy.sel(kind=k))} "
                     f"(float32 horizons {', '.join(f'{h:g}' for h in ds.horizon.sel(kind=k).values)})"
                     for k in ds.kind.values)
    return (f"- **Over runs of b's** (to {int(ds.run.max())}): the hand-built since is right on "
            f"{float(since_right):.0%} of the run ends in both precisions; its time-invariant control has a float32 "
            f"horizon of {float(hand):g} b's and is right on "
            f"{float(past.mean()) if past.size else float('nan'):.0%} of the run ends past it. Trained (best seed "
            f"right, > 0.9): {kept}. Every trained class keeps Since only over runs a few times those it trained on "
            "(a gate below 1 forgets long before float32 does), so past the time-invariant control's horizon the "
            "trained gates are no better than it: the separation holds for the construction, whose gate on b is "
            "exactly 1.")


def _competence_line(ds: xr.Dataset) -> str:
    """The trained controls' accuracy at the training length (worst seed): whether their failing beyond means
    anything."""
    pairs = (("aa_star", "gate01"), ("mod_count", "gate01"), ("b_since_a", "lti"))
    acc = ds.accuracy_train.min("seed")
    cells = "; ".join(f"{kind_style(k)['label']} on {lang} {float(acc.sel(language=lang, kind=k)):.2f}"
                      for lang, k in pairs)
    return (f"- **The trained controls at the training length {ds.attrs['train_length']}** (worst seed): {cells}. "
            "Below 0.9 a control never fit the words it was trained on, and its failing beyond them proves nothing "
            "(the claims say 'control not competent'). The (0, 1) controls on (aa)* and parity read their states "
            "through a count lookup beside the MLP: a (0, 1) gate can only count, and the lookup reads a count as "
            "far as training took it.")
