"""HoloViews plots of DiffusionBlocks results (notebook ``14_diffusion_blocks``), and the notebook's discussion built
from the Dataset."""

from __future__ import annotations

import functools

import holoviews as hv
import numpy as np
import xarray as xr

from lab.methods.diffusion_blocks import model as M
from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts

TOY_LABELS = {"e2e": "end to end", "blocks": "blocks, equal mass", "uniform": "blocks, uniform in ln σ",
              "blocks_b": "blocks, equal mass (2nd seed)", "small": "one block's size"}
CLS_LABELS = {"e2e": "end to end (CE)", "blocks": "blocks (denoising)", "small": "one block's size (CE)"}


def denoising_path(ds: xr.Dataset, size: int = 230) -> hv.Layout:
    """The same points along Euler sampling through the blocks (equal-mass partition, first seed): the start
    ``σ_max ε``, the state after each block's last step, and the data for comparison."""
    edges = ds.edges.sel(partition="equal_mass").values
    data = ds.data.values
    near = 1.3 * float(np.abs(data).max())  # the data's scale; the start is σ_max / σ_d times wider
    panels = []
    for i, stage in enumerate(ds.stage.values):
        pts = ds.path.sel(stage=stage).values
        if i == 0:
            title, lim = f"start: σ = {edges[0]:g}", 3.5 * float(edges[0])
        else:
            last = i == len(edges) - 1
            title, lim = "after the last block" if last else f"after block {i}: σ = {edges[i]:.3g}", near
        colour = "#999999" if i == 0 else PALETTE[(i - 1) % len(PALETTE)]
        panels.append(hv.Scatter((pts[:, 0], pts[:, 1]), "x", "y").opts(
            title=title, color=colour, size=2, alpha=0.6, width=size, height=size, xlim=(-lim, lim),
            ylim=(-lim, lim), framewise=True))
    panels.append(hv.Scatter((data[:, 0], data[:, 1]), "x", "y").opts(
        title=f"data ({ds.attrs['toy']})", color="black", size=2, alpha=0.6, width=size, height=size,
        xlim=(-near, near), ylim=(-near, near), framewise=True))
    return hv.Layout(panels).cols(len(panels)).opts(shared_axes=False)


def samples_compared(ds: xr.Dataset, size: int = 280) -> hv.Layout:
    """Final samples of the end-to-end denoiser and of the blocks beside the data (first seed)."""
    last = ds.path.isel(stage=-1).values
    e2e, data = ds.e2e_samples.values, ds.data.values
    opts = dict(size=2, alpha=0.6, width=size, height=size)
    return (hv.Scatter((e2e[:, 0], e2e[:, 1]), "x", "y").opts(title="end to end", color=PALETTE[1], **opts)
            + hv.Scatter((last[:, 0], last[:, 1]), "x", "y").opts(title="blocks (equal mass)", color=PALETTE[0],
                                                                 **opts)
            + hv.Scatter((data[:, 0], data[:, 1]), "x", "y").opts(title="data", color="black", **opts))


def noise_partition(ds: xr.Dataset) -> hv.Overlay:
    """The density of ln σ under EDM's log-normal over ``[σ_min, σ_max]``, with each partition's block edges:
    equal mass (solid, shaded blocks) and uniform in ln σ (dashed)."""
    p_mean, p_std = float(ds.attrs["p_mean"]), float(ds.attrs["p_std"])
    lo, hi = float(ds.attrs["sigma_min"]), float(ds.attrs["sigma_max"])
    grid = np.exp(np.linspace(np.log(lo), np.log(hi), 400))
    dens = M.lognormal_density(grid, p_mean, p_std)
    items = []
    edges = ds.edges.sel(partition="equal_mass").values
    for b in range(len(edges) - 1):
        keep = (grid <= edges[b]) & (grid >= edges[b + 1])
        items.append(hv.Area((grid[keep], dens[keep]), "σ", "density of ln σ", label=f"block {b + 1}").opts(
            color=PALETTE[b % len(PALETTE)], alpha=0.35, line_width=0))
    items.append(hv.Curve((grid, dens), "σ", "density of ln σ", label="log-normal").opts(color="black"))
    for kind, dash in (("equal_mass", "solid"), ("uniform", "dashed")):
        for e in ds.edges.sel(partition=kind).values[1:-1]:
            items.append(hv.VLine(float(e)).opts(color="#333333" if kind == "equal_mass" else PALETTE[1],
                                                 line_dash=dash, line_width=2))
    return hv.Overlay(items).opts(title="noise ranges: equal mass (solid, shaded) and uniform in ln σ (dashed, red)",
                                  logx=True, legend_position="top_right", **curve_opts(width=640, height=340))


def quality(ds: xr.Dataset) -> hv.Layout:
    """Energy distance of each 2-D model and test accuracy of each classifier: mean over seeds (bars), seeds
    (points)."""
    def bars(var, dim, labels, ylabel, title):
        mean = [(labels[str(m)], float(ds[var].sel({dim: m}).mean())) for m in ds[dim].values]
        pts = [(labels[str(m)], float(v)) for m in ds[dim].values for v in ds[var].sel({dim: m}).values]
        return (hv.Bars(mean, "model", ylabel).opts(color=PALETTE[0], alpha=0.6, xrotation=20)
                * hv.Scatter(pts, "model", ylabel).opts(color="black", size=6)).opts(
            title=title, width=480, height=340)

    return (bars("energy_distance", "toy_model", TOY_LABELS, "energy distance", "2-D samples (lower is better)")
            + bars("accuracy", "cls_model", CLS_LABELS, "test accuracy (%)", f"{ds.attrs['dataset']} accuracy")
            ).opts(shared_axes=False)  # each panel its own models (a shared categorical axis listed all eight twice)


def level_accuracy(ds: xr.Dataset) -> hv.Overlay:
    """The blocks' accuracy at each inference level (one per block, σ descending): along the inference, given the
    true class's embedding noised at that level, and the same with the inputs shuffled (the label read back from the
    noise alone); dashed: one block's depth and the full depth trained end to end (means over seeds); lines: means
    over seeds, points: seeds."""
    levels = [f"block {b + 1}: σ = {float(v):.3g}" for b, v in enumerate(ds.level.values)]
    items = []
    for k, reading in enumerate(ds.reading.values):
        acc = ds.level_accuracy.sel(reading=reading)
        colour = PALETTE[k % len(PALETTE)]
        items.append(hv.Curve((levels, acc.mean("seed").values), "inference level", "test accuracy (%)",
                              label=str(reading)).opts(color=colour, line_width=2))
        items.append(hv.Scatter([(levels[i], float(v)) for i in range(len(levels)) for v in acc.isel(level=i).values],
                                "inference level", "test accuracy (%)").opts(color=colour, size=6))
    for model, colour, label in (("small", "#777777", "one block's depth, end to end"),
                                 ("e2e", "black", "full depth, end to end")):
        mean = float(ds.accuracy.sel(cls_model=model).mean())
        items.append(hv.Curve((levels, [mean] * len(levels)), "inference level", "test accuracy (%)",
                              label=label).opts(color=colour, line_dash="dashed", line_width=1.5))
    return hv.Overlay(items).opts(title="the blocks' accuracy at each inference level", legend_position="right",
                                  ylim=(0, 105), **curve_opts(width=860, height=360))


def step_cost(ds: xr.Dataset) -> hv.Bars:
    """Measured cost of one training step relative to the end-to-end network's, for each task: saved activations
    and parameters with gradients (1/B marked by the dashed line)."""
    B = int(ds.attrs["n_blocks"])
    rows = []
    for task in ds.task.values:
        for var, what in (("saved_bytes", "activations"), ("grad_params", "params with grad")):
            v = ds[var].sel(task=task)
            for variant in ("block", "joint"):
                rows.append((f"{task}: {what}", variant, float(v.sel(variant=variant) / v.sel(variant="e2e"))))
    kind = hv.Dimension("variant", values=["block", "joint"])
    return (hv.Bars(rows, ["measure", kind], "relative to end to end").opts(
        color=hv.dim("variant").categorize({"block": PALETTE[0], "joint": "#999999"}), xrotation=20,
        tools=["hover"], show_legend=False)
        * hv.HLine(1 / B).opts(color="black", line_dash="dashed")).opts(
        title=f"one training step, measured (dashed: 1/B = 1/{B}; grey: every block's loss in one step)",
        width=680, height=360)


def _levels_text(ds: xr.Dataset) -> str:
    """The discussion's bullet on where the blocks' accuracy is made, from ``level_accuracy``."""
    if "level_accuracy" not in ds:
        return "- (this run did not record the accuracy along the inference)"
    acc = ds.level_accuracy.mean("seed")
    chain = ", ".join(f"{float(v):.1f}" for v in acc.sel(reading="inference").values)
    own = ", ".join(f"{float(v):.1f}" for v in acc.sel(reading="true label noised").values)
    shuf = ", ".join(f"{float(v):.1f}" for v in acc.sel(reading="true label noised, inputs shuffled").values)
    part = ds.attrs.get("cls_partition", "equal_mass").replace("_", " ")
    return (f"- **Where the blocks' accuracy is made** (means over seeds, %, one level per block from σ_max down, "
            f"the classifier's blocks on the {part} partition): along one inference chain {chain}; given the true "
            f"class's embedding noised at each level {own}, and with the inputs shuffled {shuf}. Only the first "
            "block meets a label hidden by the noise and classifies from the input; the later ones find most of the "
            "label in the noisy embedding (the shuffled inputs' row) and keep the class the first step moved toward."
            + _sampling_text(ds))


def _sampling_text(ds: xr.Dataset) -> str:
    """The sentences on one chain (a sampled class) against the argmax, from ``true_class_probability``."""
    if "true_class_probability" not in ds:
        return ""
    p, acc = ds.true_class_probability.mean("seed"), ds.accuracy.mean("seed")
    one = float(ds.level_accuracy.mean("seed").sel(reading="inference").values[-1])
    return (f" One chain thus samples a class from the blocks' predictive distribution: it ends at {one:.1f}, near "
            f"the first level's mean probability of the true class ({float(p.sel(cls_model='blocks')):.1f}); the "
            f"argmax of the class probabilities averaged over {ds.attrs.get('n_chains', 1)} chains scores "
            f"{float(acc.sel(cls_model='blocks')):.1f}. Sampling costs every classifier its margin over the argmax: "
            f"from the end-to-end network's own probabilities it would score {float(p.sel(cls_model='e2e')):.1f} "
            f"(argmax {float(acc.sel(cls_model='e2e')):.1f}), from the small one's "
            f"{float(p.sel(cls_model='small')):.1f} (argmax {float(acc.sel(cls_model='small')):.1f}); so the claim "
            "reads every classifier by its argmax.")


def _budget_text(ds: xr.Dataset) -> str:
    """The sentence on the optimiser budgets, from the ``stem_updates`` attribute (absent in older runs)."""
    if ds.attrs.get("stem_updates") == "every_step":
        return (" Budgets: the blocks' shared stem is updated at every block's step, B times each block's layers, "
                "and both end-to-end networks train as many steps, their stem at each and their layers at every "
                "B-th: every parameter as many updates x batch as its counterpart in the blocks.")
    if ds.attrs.get("stem_updates") == "equal":
        return (" Budgets: the blocks' shared stem is updated at every B-th step only, so no parameter of either "
                "gets more updates than the end-to-end network's.")
    return ""


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    spread = functools.partial(spread_text, fmt=".4g")  # mean (seeds min to max)
    ed, acc = ds.energy_distance, ds.accuracy
    B = int(ds.attrs["n_blocks"])
    eq, un = ds.edges.sel(partition="equal_mass").values, ds.edges.sel(partition="uniform").values
    ratio = {t: ds.saved_bytes.sel(task=t, variant="block").item() / ds.saved_bytes.sel(task=t, variant="e2e").item()
             for t in ds.task.values}
    return "\n".join([
        f"- **Noise ranges** (B = {B}): equal mass cuts at σ = {', '.join(f'{e:.3g}' for e in eq[1:-1])}; uniform "
        f"in ln σ at {', '.join(f'{e:.3g}' for e in un[1:-1])}. The log-normal puts most of its mass between "
        "σ ≈ 0.05 and 2, so equal mass gives the middle of the range narrow blocks and the extremes wide ones.",
        f"- **2-D samples** ({ds.attrs['toy']}, energy distance, lower is better): end to end "
        f"{spread(ed.sel(toy_model='e2e'))}; blocks, equal mass {spread(ed.sel(toy_model='blocks'))}; the same "
        f"from another seed {spread(ed.sel(toy_model='blocks_b'))}; uniform {spread(ed.sel(toy_model='uniform'))}; "
        f"one block's size alone {spread(ed.sel(toy_model='small'))}. The estimator's noise floor (two data "
        f"samples of {ds.attrs['n_eval']} points) is {spread(ds.energy_floor)}"
        + (f"; one Gaussian with the data's mean and covariance scores {spread(ds.gaussian_energy)}, the bar every "
           "denoiser must beat (the end-to-end one by half) to count as having learned the data."
           if "gaussian_energy" in ds else "."),
        f"- **Classification** ({ds.attrs['dataset']}, {ds.attrs['n_test']} test examples, %): end to end "
        f"{spread(acc.sel(cls_model='e2e'))}, blocks {spread(acc.sel(cls_model='blocks'))}, one block's size "
        f"trained end to end {spread(acc.sel(cls_model='small'))}. When the small network is as good as the deep "
        "one, the task does not need the depth and the accuracy claim cannot tell block-wise training from "
        "simply training a smaller network (the claims table then says \"does not discriminate\")."
        + _budget_text(ds),
        _levels_text(ds),
        f"- **Memory per step**, measured: one block keeps {ratio['classify']:.2f} of the end-to-end transformer's "
        f"saved activations and {ratio['toy']:.2f} of the MLP's (1/B = {1 / B:.2f}); the excess over 1/B is each "
        "block's own input, noise-embedding and output layers (the classifier's shared stem). Training every "
        "block's loss in one step keeps "
        "about as much as end to end.",
    ])
