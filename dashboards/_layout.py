"""A plain page layout shared by the dashboards: works offline (no template fonts or CDN assets)."""

from __future__ import annotations

from collections.abc import Sequence

import panel as pn

HEADER_STYLE = {"background": "#1f5fa8", "color": "white", "padding": "4px 16px", "border-radius": "4px"}


def dashboard_layout(title: str, *, sidebar: Sequence, main: Sequence) -> pn.Column:
    """Title bar, a fixed-width sidebar of widgets and a main column of views."""
    header = pn.pane.HTML(f"<h2 style='margin:6px 0'>{title}</h2>", styles=HEADER_STYLE,
                          sizing_mode="stretch_width")
    side = pn.Column(*sidebar, width=320)
    body = pn.Column(*main, sizing_mode="stretch_width")
    return pn.Column(header, pn.Row(side, body, sizing_mode="stretch_width"), sizing_mode="stretch_width")
