"""A notebook's headline figure: one of its HoloViews plots as a small PNG that the report's index shows beside the
method's claims.

In a notebook, right after the cell that shows the method's most telling plot::

    lab.viz.headline(plots.order_comparison(ds, load))

The plot is drawn again with HoloViews' matplotlib backend (a static image needs no JavaScript: the index stays
small and opens anywhere) and carried in the output's metadata, ``{"lab": {"headline": True, "png": ...}}`` (the
cell shows nothing: the plot is right above); ``lab report`` finds it there (:func:`find_headline`). The bokeh
options the method's plots set (colours, line widths and dashes, marker sizes, titles, log axes) are carried over
to the matplotlib drawing where matplotlib has an equivalent; the rest fall back to matplotlib's defaults. A plot on
its own gets its legend beside the axes, never over the data.
"""

from __future__ import annotations

import base64
import io
from typing import Any

__all__ = ["HEADLINE_KEY", "find_headline", "headline", "headline_png"]

#: the output metadata that marks the headline image: ``metadata["lab"]["headline"] is True``
HEADLINE_KEY = "lab"

#: the longest side of the image, in pixels (the index shows it at about half that on a high-density screen)
MAX_PIXELS = 720

#: bokeh style options and their matplotlib names (the value is kept unless a converter is given)
_STYLE = {
    "color": "color",
    "fill_color": "facecolor",
    "line_color": "edgecolor",
    "alpha": "alpha",
    "line_width": "linewidth",
    "line_dash": "linestyle",
    "marker": "marker",
    "size": "s",
    "cmap": "cmap",
    "text_color": "color",
    "text_font_size": "size",
}
_DASHES = {"solid": "-", "dashed": "--", "dotted": ":", "dotdash": "-.", "dashdot": "-."}
_MARKERS = {"circle": "o", "square": "s", "triangle": "^", "diamond": "D", "x": "x", "cross": "+", "asterisk": "*",
            "inverted_triangle": "v", "plus": "P", "star": "*", "hex": "h"}
#: bokeh plot options kept as they are (matplotlib uses the same names)
_PLOT = ("title", "logx", "logy", "logz", "xlim", "ylim", "invert_yaxis", "invert_xaxis", "xlabel", "ylabel",
         "show_legend", "colorbar", "xrotation", "yrotation", "show_grid", "xticks", "yticks", "clim",
         "clipping_colors")


def _mpl_options(element, hv) -> dict[str, Any]:
    """The matplotlib equivalents of the bokeh options set on ``element``."""
    style = hv.Store.lookup_options("bokeh", element, "style").kwargs
    plot = hv.Store.lookup_options("bokeh", element, "plot").kwargs
    mpl_style = hv.Store.options(backend="matplotlib")
    name = type(element).__name__
    allowed = set(mpl_style[name].groups["style"].allowed_keywords) if name in mpl_style.children else set()
    allowed_plot = set(mpl_style[name].groups["plot"].allowed_keywords) if name in mpl_style.children else set()
    out: dict[str, Any] = {}
    for key, value in style.items():
        target = _STYLE.get(key)
        if target is None or target not in allowed or callable(value) or hasattr(value, "apply"):
            continue  # dimension expressions and bokeh-only options are left to matplotlib's defaults
        if key == "text_font_size":  # bokeh's "8pt", matplotlib's 8 (points)
            if not (isinstance(value, str) and value.endswith("pt")):
                continue
            value = float(value[:-2])
        elif key == "text_color" and isinstance(value, str) and value in [d.name for d in element.dimensions()]:
            value = hv.dim(value)  # a colour per label, read from one of its value dimensions
        if key == "line_dash":
            if not isinstance(value, str) or value not in _DASHES:
                continue
            value = _DASHES[value]
        elif key == "marker":
            if value not in _MARKERS:
                continue
            value = _MARKERS[value]
        elif key == "size" and isinstance(value, (int, float)):
            value = float(value) ** 2  # bokeh sizes a marker by its diameter, matplotlib by its area
        out[target] = value
    for key in _PLOT:
        if key in plot and key in allowed_plot:
            out[key] = plot[key]
    if "legend_position" in plot and "legend_position" in allowed_plot:
        position = plot["legend_position"]
        out["legend_position"] = position if position in ("right", "left", "top", "bottom", "top_right",
                                                           "top_left", "bottom_left", "bottom_right") else "right"
    return out


def _categorical_labels(el, hv) -> bool:
    """Whether ``el`` is a Labels element placed by category names rather than numbers."""
    if not isinstance(el, hv.Labels):
        return False
    return any(el.dimension_values(d).dtype.kind in "OSU" for d in el.kdims)


def _for_matplotlib(obj, hv):
    """A copy of ``obj`` whose elements and overlays carry their bokeh look as matplotlib options. A plot on its own
    gets its legend beside the axes (bokeh's corner positions lie over the data) and a wider frame to make room for
    it; the panels of a layout keep bokeh's placement (a legend beside one panel would run into the next)."""
    alone = not isinstance(obj, (hv.Layout, hv.NdLayout, hv.GridSpace))
    def element(el):
        opts = _mpl_options(el, hv)
        return el.opts(backend="matplotlib", clone=True, **opts) if opts else el

    def overlay(ov):  # an overlay keeps its own title, legend placement and axis scales
        if isinstance(ov, hv.Overlay) and any(isinstance(e, hv.HeatMap) for e in ov):
            # matplotlib draws a heat map on numbered cells: text placed by category names cannot go on it
            ov = ov.clone([(k, e) for k, e in ov.data.items() if not _categorical_labels(e, hv)])
        keep = ("title", "legend_position", "logx", "logy", "show_legend", "xlabel", "ylabel")
        opts = {k: v for k, v in _mpl_options(ov, hv).items() if k in keep}
        if alone and isinstance(ov, hv.Overlay) and not any(isinstance(e, (hv.HeatMap, hv.Image, hv.RGB))
                                                             for e in ov):
            opts["legend_position"] = "right"
            opts["aspect"] = 1.5
        return ov.opts(backend="matplotlib", clone=True, **opts) if opts else ov

    out = obj.map(element, [hv.Element])
    out = out.map(overlay, [hv.Overlay, hv.NdOverlay])
    if isinstance(out, (hv.Layout, hv.NdLayout, hv.GridSpace)):
        out = out.opts(backend="matplotlib", clone=True, sublabel_format="")
    return out


def _readable_log_ticks(ax) -> None:
    """Log axes labelled as plain numbers at 1, 2, 5 of each decade (1, 3 up to two decades, 1 alone past them),
    minor ticks unlabelled: matplotlib's default labels every minor tick of a short range ("2x10^1 3x10^1 ...")
    over each other."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() != "log" or min(lim) <= 0:
            continue
        decades = math.log10(max(lim) / min(lim))
        subs = (1.0, 2.0, 5.0) if decades <= 1 else (1.0, 3.0) if decades <= 2 else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=30))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def headline_png(obj, *, max_pixels: int = MAX_PIXELS) -> bytes:
    """``obj`` (a HoloViews element, overlay or layout) drawn with matplotlib as PNG bytes, its longest side
    ``max_pixels`` pixels.

    Raises:
        ConfigError: ``obj`` is not a HoloViews object, or ``max_pixels`` is not an integer in [64, 4096].
    """
    import holoviews as hv

    from lab.checks import bad_value, check_int

    check_int("max_pixels", max_pixels, 64, 4096)
    if not isinstance(obj, hv.core.Dimensioned):
        raise bad_value("obj", type(obj).__name__, "a HoloViews object (an element, overlay or layout)")
    import warnings

    import holoviews.plotting.mpl  # noqa: F401  registers the matplotlib backend beside bokeh
    from matplotlib import pyplot as plt

    current = hv.Store.current_backend
    try:
        with warnings.catch_warnings():  # HoloViews passes edgecolors="none" to every scatter, 'x' markers too
            warnings.filterwarnings("ignore", "You passed an edgecolor/edgecolors", UserWarning)
            fig = hv.render(_for_matplotlib(obj, hv), backend="matplotlib")
    finally:
        hv.Store.set_current_backend(current)  # rendering must not change the notebook's backend (bokeh)
    try:
        for ax in fig.axes:
            _readable_log_ticks(ax)
        width, height = fig.get_size_inches()
        dpi = max_pixels / max(width, height)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    finally:
        plt.close(fig)  # or the notebook's inline backend shows the figure a second time
    return buf.getvalue()


def headline(obj, *, max_pixels: int = MAX_PIXELS) -> None:
    """Mark ``obj`` as the notebook's headline figure: a PNG that ``lab report`` puts in the index row.

    Call it once per notebook, in its own cell right after the cell that shows the plot interactively. Shows nothing
    (the plot is right above): the PNG rides in the output's metadata, ``{"lab": {"headline": True, "png":
    <base64>}}``, and the report's notebook page leaves the cell out.

    Arguments:
        obj: a HoloViews object, typically one of the method's ``plots.py`` builders.
        max_pixels: the image's longest side in pixels.
    """
    from IPython.display import display

    png = base64.b64encode(headline_png(obj, max_pixels=max_pixels)).decode("ascii")
    display({"text/plain": ""}, raw=True, metadata={HEADLINE_KEY: {"headline": True, "png": png}})


def find_headline(nb) -> bytes | None:
    """The headline PNG of an executed notebook (an ``nbformat`` node or a dict), or None when it has none (also
    read from a displayed ``image/png``, as notebooks run before the PNG moved to the metadata carry it)."""
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            meta = (output.get("metadata") or {}).get(HEADLINE_KEY) or {}
            if not meta.get("headline"):
                continue
            data = meta.get("png") or output.get("data", {}).get("image/png")
            if data:
                return base64.b64decode("".join(data) if isinstance(data, list) else data)
    return None
