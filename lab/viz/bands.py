"""Error bands over seeds: the mean of a measurement against a swept field, with a band of its spread.

A seed sweep (:func:`lab.sweep.sweep` with ``seeds=``) gives a Dataset with a ``seed`` dimension; a method's own
run with ``n_seeds`` gives the same shape. :func:`seed_band` draws, for each value of ``x``, the mean over seeds and a
band of one standard deviation (or the min-max range), one curve per value of an optional ``by`` dimension.
:func:`spread_text` says the same in words for a notebook's discussion: the mean and the range over seeds.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE, curve_opts

__all__ = ["seed_band", "spread_text"]


def seed_band(values: xr.DataArray, x: str, *, by: str | None = None, seed_dim: str = "seed",
              spread: str = "std", label: str | None = None, **opts) -> hv.Overlay:
    """Mean over ``seed_dim`` against ``x`` with a band of the spread.

    Arguments:
        values: a DataArray with dims ``(seed_dim, x)`` and, optionally, ``by`` (other dims must be reduced first).
        x: the dimension on the horizontal axis.
        by: a dimension to draw one curve per value of (None: one curve).
        spread: ``"std"`` (mean ± one standard deviation over seeds) or ``"range"`` (min to max over seeds).
        label: the vertical axis' label (default: the array's name).
        opts: extra bokeh options of the curves (:func:`lab.viz.style.curve_opts`).

    Returns:
        an Overlay of ``hv.Area`` bands and ``hv.Curve`` means (with points), one colour per ``by`` value.
    """
    if spread not in ("std", "range"):
        from lab.checks import bad_value

        raise bad_value("spread", spread, "std, range")
    extra = set(values.dims) - {seed_dim, x} - ({by} if by else set())
    if seed_dim not in values.dims or x not in values.dims or extra:
        raise ValueError(f"values has dims {values.dims}; ({seed_dim!r}, {x!r}"
                         + (f", {by!r}" if by else "") + ") are required and no others")
    name = label or values.name or "value"
    groups = [(None, values)] if by is None else [(v, values.sel({by: v})) for v in values[by].values]
    layers = []
    for i, (key, arr) in enumerate(groups):
        xs = np.asarray(arr[x].values)
        mean = arr.mean(seed_dim).values
        if spread == "std":
            dev = arr.std(seed_dim, ddof=1).values if arr.sizes[seed_dim] > 1 else np.zeros_like(mean)
            lo, hi = mean - dev, mean + dev
        else:
            lo, hi = arr.min(seed_dim).values, arr.max(seed_dim).values
        color = PALETTE[i % len(PALETTE)]
        tag = f"{by}={key}" if by is not None else name
        layers.append(hv.Area((xs, lo, hi), kdims=[x], vdims=[f"{name} low", f"{name} high"], label=tag)
                      .opts(color=color, alpha=0.2, line_alpha=0))
        layers.append(hv.Curve((xs, mean), kdims=[x], vdims=[name], label=tag).opts(color=color, line_width=2))
        layers.append(hv.Scatter((xs, mean), kdims=[x], vdims=[name], label=tag).opts(color=color, size=5))
    n_seeds = values.sizes[seed_dim]
    band = "± 1 sd" if spread == "std" else "min-max"
    title = f"{name}: mean over {n_seeds} seeds, band {band}"
    opts = curve_opts(**opts)
    tools = opts.pop("tools", [])
    for el in layers:
        if isinstance(el, hv.Curve) and not isinstance(el, hv.Area):
            el.opts(tools=tools)
    return hv.Overlay(layers).opts(title=title, legend_position="right", **opts)


def spread_text(values, fmt: str = ".2f", *, prefix: str = "seeds") -> str:
    """The mean of ``values`` with their range, for a discussion's sentence: ``"0.53 (seeds 0.41 to 0.66)"``.

    Non-finite values (a seed without a value) are left out; one value left is shown alone, none as ``"n/a"``.

    Arguments:
        values: any array-like (a DataArray, a NumPy array, a list), flattened.
        fmt: the format of every number (``".1f"``, ``"+.2f"``, ``".4g"``).
        prefix: the word before the range (``"seeds"``; ``"from"`` when the values are not only seeds).
    """
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "n/a"
    if v.size == 1:
        return format(v[0], fmt)
    return f"{format(v.mean(), fmt)} ({prefix} {format(v.min(), fmt)} to {format(v.max(), fmt)})"
