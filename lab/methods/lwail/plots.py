"""LWAIL's HoloViews builders (notebook and ``agents`` dashboard) and the notebook's discussion.

The maze maps take the dicts of :mod:`lab.methods.lwail.live`: positions in maze units, x to the right and y up,
``extent = (left, bottom, right, top)``.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE

__all__ = ["LABELS", "discussion", "distance_map_plot", "pendulum_plot", "reward_map_plot", "rollout_plot",
           "spearman_plot", "success_curve_plot", "success_plot"]

LABELS = {"lwail": "LWAIL", "lwail_b": "LWAIL (2nd agent)", "euclid": "Euclidean WAIL", "gaifo": "GAIfO",
          "no_icvf": "LWAIL w/o ICVF", "negative": "reward sigmoid(-f) - 1", "raw": "reward -f",
          "expert": "expert", "lwail_end": "LWAIL, walls end episodes", "lwail_b_end": "LWAIL (2nd), walls end",
          "negative_end": "sigmoid(-f) - 1, walls end", "oracle": "WAIL, oracle metric"}
#: one colour per variant: the palette's ten, then two more for the last variants
COLOURS = {**dict(zip(LABELS, PALETTE)), "negative_end": "#7a7a7a", "oracle": "#e07b00"}


def _label(v: str) -> str:
    return LABELS.get(v, v)


def _walls(info: dict) -> hv.Image:
    free = np.isfinite(np.asarray(info["geodesic"], float))
    return hv.Image(np.where(free, np.nan, 1.0), bounds=info["extent"]).opts(cmap=["#333333"], clipping_colors={
        "NaN": (0, 0, 0, 0)})


def _frame(extent, width: int = 440, colorbar: bool = True) -> dict:
    """A maze's plot ``width`` px wide whose cells come out about square: Bokeh warns (W-1005) for a fixed plot
    sized by its frame alone, so the outer size is given, the frame's share estimated (axes, title, colour bar)."""
    left, bottom, right, top = extent
    frame = width - (130 if colorbar else 60)
    return {"width": width, "height": max(1, round(frame * (top - bottom) / (right - left))) + 70}


def _map(grid, info: dict, title: str, label: str, cmap: str) -> hv.Overlay:
    img = hv.Image(np.asarray(grid, float), bounds=info["extent"], vdims=[label]).opts(
        cmap=cmap, colorbar=True, tools=["hover"], clipping_colors={"NaN": "#333333"},
        title=title, xlabel="x", ylabel="y", **_frame(info["extent"]))
    goal = hv.Points([tuple(info["goal"])]).opts(marker="star", size=16, color="#d1495b")
    return img * goal


def distance_map_plot(dmap: dict) -> hv.Layout:
    """The learned φ-distance to the goal over the maze's free cells beside the true geodesic distance
    (:func:`lab.methods.lwail.live.phi_distance_map`)."""
    phi = _map(dmap["grid"], dmap, f"||φ(s) - φ(goal)|| (ICVF, seed {dmap.get('seed', 0)})", "phi distance",
               "viridis")
    geo = _map(dmap["geodesic"], dmap, "geodesic distance to the goal (BFS)", "moves", "viridis")
    return (phi + geo).opts(shared_axes=False)


def reward_map_plot(rmap: dict) -> hv.Overlay:
    """The critic's reward for a step toward the goal from every free cell (:func:`...live.reward_map`)."""
    out = _map(rmap["grid"], rmap, f"{_label(rmap['variant'])}: reward of the shortest-path step (seed "
                                   f"{rmap['seed']})", "reward", "magma")
    path = rmap.get("expert_xy")
    if path is not None:
        out = out * hv.Path([np.asarray(path)]).opts(color="white", line_dash="dashed", line_width=2)
    return out


def rollout_plot(episode: dict, maze_info: dict) -> hv.Overlay:
    """One episode's path through the maze, coloured by time, with the start and the goal
    (``episode`` from :func:`...live.rollout`, ``maze_info`` any map dict of the same maze)."""
    xy = np.asarray(episode["xy"], float)
    t = np.arange(len(xy))
    free = np.isfinite(np.asarray(maze_info["geodesic"], float))
    ground = hv.Image(np.where(free, 0.0, 1.0), bounds=maze_info["extent"]).opts(
        cmap=["#f4f1ea", "#333333"], **_frame(maze_info["extent"], 390, False))
    line = hv.Path([xy]).opts(color="#888888", line_width=1)
    pts = hv.Points(np.column_stack([xy, t]), vdims=["step"]).opts(color="step", cmap="viridis", size=7,
                                                                    tools=["hover"])
    marks = (hv.Points([tuple(xy[0])]).opts(marker="square", size=14, color="#2e86ab")
             * hv.Points([tuple(maze_info["goal"])]).opts(marker="star", size=18, color="#d1495b"))
    verdict = "reached the goal" if episode["success"] else "did not reach the goal"
    return (ground * line * pts * marks).opts(  # the return under the axis: a 330 px frame's title holds no more
        title=f"{_label(episode.get('variant', ''))}: {verdict}",
        xlabel=f"x (critic's return {episode['return']:.1f})")


def success_plot(result) -> hv.Overlay:
    """Goal-reach rate per maze variant: mean over seeds (bars), each seed (dots), the expert (dashed line)."""
    ds = getattr(result, "data", result)
    variants = [str(v) for v in ds.variant.values]
    mean = ds.success.mean("seed")
    bars = hv.Bars([(_label(v), float(mean.sel(variant=v))) for v in variants], "variant", "success").opts(
        color=hv.dim("variant").categorize({_label(v): COLOURS.get(v, "#999999") for v in variants}),
        xrotation=30, tools=["hover"])
    dots = hv.Scatter([(_label(v), float(x)) for v in variants for x in ds.success.sel(variant=v).values],
                      "variant", "success").opts(color="black", size=6, jitter=0.3)
    # the expert's line in a dark grey that no variant's bar has (the palette's red is the second LWAIL agent's)
    expert = hv.HLine(float(ds.expert_success.mean())).opts(color="#444444", line_dash="dashed", line_width=2)
    return (bars * dots * expert).opts(
        title=f"Maze goal-reach rate, {ds.sizes['seed']} seed(s) (bars: mean, dots: seeds, dashed: expert)",
        width=720, height=340, ylim=(0, 1.05), show_legend=False)


def success_curve_plot(ds: xr.Dataset) -> hv.Overlay:
    """Goal-reach rate along training (mean over seeds, band: min to max) for every maze variant."""
    steps = ds.env_steps.values
    layers = []
    for v in ds.variant.values:
        c = ds.success_curve.sel(variant=v)
        colour = COLOURS.get(str(v), "#999999")
        lo, hi, mu = c.min("seed").values, c.max("seed").values, c.mean("seed").values
        layers.append(hv.Area((steps, lo, hi), "env steps", ["lo", "hi"]).opts(alpha=0.15, color=colour))
        layers.append(hv.Curve((steps, mu), "env steps", "success", label=_label(str(v))).opts(color=colour))
    return hv.Overlay(layers).opts(title="Goal-reach rate along training (mean, band: seeds' range)", width=720,
                                   height=340, ylim=(0, 1.05), legend_position="right")


def spearman_plot(ds: xr.Dataset) -> hv.Overlay:
    """Spearman correlation with the geodesic distance: ICVF's latent distance and value, Euclidean, a random φ,
    the oracle's embedding (bars: mean; dots: seeds)."""
    names = {"icvf": "ICVF ||φ(s)-φ(g)||", "icvf_value": "ICVF -V(s,g,g)", "euclid": "Euclidean",
             "random_phi": "random φ", "oracle": "oracle (geodesic MDS)"}
    rows = [(names[str(m)], float(ds.spearman.sel(metric=m).mean())) for m in ds.metric.values]
    bars = hv.Bars(rows, "metric", "Spearman ρ").opts(color=hv.dim("metric").categorize(
        dict(zip(names.values(), PALETTE))), tools=["hover"])
    dots = hv.Scatter([(names[str(m)], float(x)) for m in ds.metric.values for x in ds.spearman.sel(metric=m).values],
                      "metric", "Spearman ρ").opts(color="black", size=6)
    return (bars * dots).opts(title="Does the metric follow the geodesic distance?", width=480, height=320,
                              ylim=(0, 1.03), show_legend=False, xrotation=20)


def pendulum_plot(ds: xr.Dataset) -> hv.Overlay:
    """InvertedPendulum-v5 return along training of each TD3 imitator, with the expert's and random returns."""
    steps = ds.pendulum_steps.values
    layers = [hv.Curve((steps, ds.pendulum_curve.sel(pendulum_variant=v).mean("pendulum_seed").values),
                       "env steps", "return", label=_label(str(v))).opts(color=COLOURS.get(str(v), "#999"))
              for v in ds.pendulum_variant.values]
    layers += [hv.HLine(float(ds.pendulum_expert_return.mean())).opts(color="#d1495b", line_dash="dashed"),
               hv.HLine(float(ds.pendulum_random_return.mean())).opts(color="#999999", line_dash="dotted")]
    return hv.Overlay(layers).opts(title="InvertedPendulum-v5: return (dashed: expert, dotted: random)", width=720,
                                   height=320, legend_position="right")


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    rho = {str(m): ds.spearman.sel(metric=m).values for m in ds.metric.values}
    succ = {str(v): ds.success.sel(variant=v).values for v in ds.variant.values}
    prog = {str(v): ds.progress.sel(variant=v).values for v in ds.variant.values}
    lines = [
        f"- **Metric** (Spearman with the geodesic distance over all pairs of the {ds.attrs['maze_free_cells']} "
        f"free cells): ICVF's latent distance ||φ(s) - φ(g)|| {spread_text(rho['icvf'])}, ICVF's value "
        f"-V(s, g, g) {spread_text(rho['icvf_value'])}, Euclidean {spread_text(rho['euclid'])}, random φ "
        f"{spread_text(rho['random_phi'])}. Both ICVF forms track the geodesic "
        + ("better than Euclidean by more than the brief's 0.1." if min(np.mean(rho["icvf"]), np.mean(
            rho["icvf_value"])) - np.mean(rho["euclid"]) > 0.1 else "distance; see the claims for the margin."),
        "- **Goal-reach rate** (expert " + spread_text(ds.expert_success.values) + "): "
        + ", ".join(f"{_label(v)} {spread_text(succ[v])}" for v in succ) + ".",
        "- **Progress toward the goal** (1 - closest geodesic distance / the start's; expert 1): "
        + ", ".join(f"{_label(v)} {spread_text(prog[v])}" for v in prog)
        + f". LWAIL minus Euclidean WAIL: {spread_text(prog['lwail'] - prog['euclid'], '+.2f')}.",
        f"- The expert's one state-only episode has {ds.attrs.get('demonstration_length', ds.attrs['expert_length'])}"
        f" transitions ({ds.attrs['expert_length']} moves to the goal"
        + (", then dwelling there" if ds.attrs.get("demonstration_length", 0) > ds.attrs["expert_length"] else "")
        + f"); each agent gets {int(ds.env_steps.values[-1])} env steps.",
    ]
    if "expert_move_rate" in ds:
        lines.append("- **Competence** (the expert's moves each agent replays from the expert's own path states; a "
                     "random policy 1/8): " + ", ".join(
                         f"{_label(v)} {spread_text(ds.expert_move_rate.sel(variant=v).values)}" for v in succ) + ".")
    if "lwail_end" in succ and "crashed" in ds:
        crash = {v: float(np.mean(ds.crashed.sel(variant=v).values)) for v in ("lwail_end", "negative_end")}
        lines.append(
            f"- **Where episodes end** (a chosen move into a wall ends the episode): LWAIL reaches the goal "
            f"{spread_text(succ['lwail_end'])} and ends {crash['lwail_end']:.0%} of its episodes in a wall; with the "
            f"negative reward sigmoid(-f) - 1 the agent reaches it {spread_text(succ['negative_end'])} and ends "
            f"{crash['negative_end']:.0%} in a wall (a negative reward makes ending early pay). In the maze that "
            "never ends the two rewards differ by a constant, which leaves the optimal policy unchanged.")
    expert = float(np.mean(ds.expert_success.values))
    if "oracle" in rho and "oracle" in succ:
        margin = rho["icvf"] - rho["euclid"]
        lines.append(
            f"- **Is the metric competent?** Checked before imitation: ICVF's latent distance beats Euclidean by "
            f"{spread_text(margin, '+.3f')} in Spearman ({'more' if margin.min() > 0.1 else 'not more'} than 0.1 on "
            f"every seed). The oracle metric (the multidimensional scaling of the BFS distances, Spearman "
            f"{spread_text(rho['oracle'])}) in φ's place reaches the goal {spread_text(succ['oracle'])}: "
            + ("the imitation loop itself reaches the goal at this budget, so the learned metric decides." if
               np.mean(succ["oracle"]) >= 0.9 * expert else
               "even a perfect metric does not make the loop reach the goal at this budget, so quick cannot "
               "separate a good metric from a bad one; the metric is no longer the only bottleneck."))
    if np.mean(succ["lwail"]) < 0.9 * expert:
        lines.append(
            f"- At this budget LWAIL does not reach expert-level success ({np.mean(succ['lwail']):.2f} against the "
            f"expert's {expert:.2f}). Its final policy gets {np.mean(prog['lwail']):.2f} of the way to the goal, "
            f"Euclidean WAIL {np.mean(prog['euclid']):.2f}: "
            + ("the latent reward leads further around the wall, but the " if np.mean(prog["lwail"] - prog["euclid"])
               > 0 else "the latent reward does not lead further than the Euclidean one here; the ")
            + "DQN's exploration from the start crawls: each agent's greedy policy stops where its visits end (the "
            "oracle's stalled 8-9 moves from the goal with 24-step episodes, a bare 17-move demonstration and 12 000 "
            "env steps, although a policy optimal for its final reward reaches the goal). What moved it on one-seed "
            "probes: 48-step episodes, a demonstration that dwells at the goal, 3-step returns and 36 000 env steps; "
            "what did not (with 24-step episodes): a faster DQN target, γ 0.9-0.95, a tabular Q, centred rewards, "
            "random starts.")
    if np.isfinite(ds.pendulum_return.values).all():
        lines.append("- **InvertedPendulum-v5** returns: " + ", ".join(
            f"{_label(str(v))} {spread_text(ds.pendulum_return.sel(pendulum_variant=v).values)}"
            for v in ds.pendulum_variant.values)
            + f"; expert {spread_text(ds.pendulum_expert_return.values)}, random "
            f"{spread_text(ds.pendulum_random_return.values)}.")
    else:
        lines.append("- The pendulum did not run in this profile (it lives in `full`; `envs` selects it).")
    lines.append(f"- CPU seconds: maze {ds.attrs['maze_cpu_s']:.0f}, pendulum {ds.attrs['pendulum_cpu_s']:.0f}.")
    return "\n".join(lines)
