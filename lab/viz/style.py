"""Shared plot styling for notebooks and dashboards."""

from __future__ import annotations

from typing import Any

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  registers the bokeh backend so .opts() work outside notebooks

if hv.Store.current_backend != "bokeh":
    hv.Store.set_current_backend("bokeh")

PALETTE = ("#1f5fa8", "#d1495b", "#2e933c", "#edae49", "#66a182", "#8d5a97", "#00798c", "#30638e", "#a23b72",
           "#3b1f2b")


def curve_opts(**extra: Any) -> dict[str, Any]:
    """Common options of line/scatter overlays (bokeh backend)."""
    opts = dict(width=560, height=340, show_grid=True, tools=["hover"])
    opts.update(extra)
    return opts
