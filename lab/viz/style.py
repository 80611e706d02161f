"""Shared plot styling for notebooks and dashboards."""

from __future__ import annotations

from typing import Any

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  registers the bokeh backend so .opts() work outside notebooks
import numpy as np

if hv.Store.current_backend != "bokeh":
    hv.Store.set_current_backend("bokeh")

PALETTE = ("#1f5fa8", "#d1495b", "#2e933c", "#edae49", "#66a182", "#8d5a97", "#00798c", "#30638e", "#a23b72",
           "#3b1f2b")


def curve_opts(**extra: Any) -> dict[str, Any]:
    """Common options of line/scatter overlays (bokeh backend)."""
    opts = dict(width=560, height=340, show_grid=True, tools=["hover"])
    opts.update(extra)
    return opts


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick positions for a log axis over ``[lo, hi]``: 1-2-5 steps per decade (only the powers of ten over more than
    three decades), so the labels never crowd where Bokeh's own log ticker would print 0.3, 0.4, 0.5 on each other."""
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0 or hi <= 0:
        return []
    lo, hi = min(lo, hi), max(lo, hi)
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    steps = (1.0,) if last - first > 3 else (1.0, 2.0, 5.0)
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps if lo <= m * 10.0**e <= hi]
    if len(ticks) < 2:  # a narrow range: its ends, rounded
        ticks = sorted({float(f"{lo:.2g}"), float(f"{hi:.2g}")})
    return ticks


def text_colour(value: float, cmap: str, clim: tuple[float, float]) -> str:
    """Black or white, whichever reads on the colour ``cmap`` gives ``value`` within ``clim`` (by its luminance)."""
    import matplotlib

    lo, hi = clim
    r, g, b, _ = matplotlib.colormaps[cmap](float(np.clip((value - lo) / (hi - lo), 0.0, 1.0)))
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"
