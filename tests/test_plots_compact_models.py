"""What the compact-models plots show, read back from the Bokeh models they render to: images the right way up with
square pixels (checked against the source array), one colour per model in PSNR against size, SSDi8's plots drawing
their data (bars from a base the values sit on, ranges with their spikes, a histogram over the data's own range)."""

import logging
import types

import holoviews as hv
import numpy as np
import pytest
import xarray as xr
from bokeh.models import GlyphRenderer

from lab.methods.ssdi8 import plots as qplots
from lab.methods.ssm_inr import plots


def _glyphs(fig, kind=None) -> list:
    return [r for r in fig.renderers if isinstance(r, GlyphRenderer) and (kind is None or isinstance(r.glyph, kind))]


def _drawn_top_row(element) -> tuple[np.ndarray, object]:
    """The row of the array Bokeh draws at the top of the frame, and the figure: Bokeh's image glyph puts its
    array's row 0 at ``y`` (the bottom) and its last row at the top when the y range increases."""
    fig = hv.render(element)
    (renderer,) = [r for r in _glyphs(fig) if "image" in r.data_source.data]
    drawn = np.asarray(renderer.data_source.data["image"][0])
    assert fig.y_range.start < fig.y_range.end  # y increases upwards: the array's last row is at the top
    return drawn[-1], fig


def _square_pixels(fig, rows: int, cols: int) -> None:
    """The frame's sides in the array's proportions, to the pixel."""
    assert abs(fig.frame_height - fig.frame_width * rows / cols) < 1, (fig.frame_width, fig.frame_height)


def test_an_image_is_drawn_with_its_row_0_at_the_top_and_square_pixels():
    rng = np.random.default_rng(0)
    src = rng.random((3, 12, 8))
    top, fig = _drawn_top_row(plots.image(src, "t"))
    rgba = top.view(np.uint8).reshape(-1, 4)  # Bokeh's RGBA words, little-endian bytes
    assert np.allclose(rgba[:, :3] / 255, src[:, 0, :].T, atol=1 / 255)
    _square_pixels(fig, 12, 8)


@pytest.mark.parametrize("build", [
    lambda a, b: plots.error_map(a, b, "error"),
    lambda a, b: plots.pyramid_level(a - b, 0, last=False),
])
def test_error_maps_and_pyramid_levels_are_the_right_way_up(build):
    src = np.zeros((3, 10, 6))
    src[:, 0, 0] = 1.0  # one bright pixel at the source's top-left corner
    top, fig = _drawn_top_row(build(src, np.zeros_like(src)))
    assert top[0] == 1 and np.count_nonzero(top) == 1
    _square_pixels(fig, 10, 6)


def test_the_low_pass_level_is_an_rgb_image_the_right_way_up():
    src = np.linspace(0, 1, 3 * 4 * 4).reshape(3, 4, 4)
    top, _ = _drawn_top_row(plots.pyramid_level(src, 2, last=True))
    assert np.allclose(top.view(np.uint8).reshape(-1, 4)[:, :3] / 255, src[:, 0, :].T, atol=1 / 255)


def _legend_colours(fig) -> dict[str, set]:
    colours: dict[str, set] = {}
    for item in fig.legend[0].items:
        label = item.label["value"]
        for r in item.renderers:
            glyph = r.glyph
            colours.setdefault(label, set()).add(getattr(glyph, "line_color", None) if not hasattr(
                glyph, "fill_color") else glyph.fill_color)
    return colours


def test_every_model_has_its_own_colour_in_psnr_against_size():
    rows = {v: (np.array([1000, 2000, 3000]), np.array([20.0, 21.0, 22.0]) + i) for i, v in enumerate(plots.LABELS)}
    fig = hv.render(plots.rd_curves(rows))
    colours = _legend_colours(fig)
    assert set(colours) == set(plots.LABELS.values())
    assert all(len(c) == 1 for c in colours.values()), colours  # a model's curve and points share its colour
    flat = [next(iter(c)) for c in colours.values()]
    assert len(set(flat)) == len(flat), colours  # and no two models share one
    assert len(set(plots.COLOURS.values())) == len(plots.LABELS)


def _table() -> xr.Dataset:
    """A quantisation table like :func:`lab.methods.ssdi8.live.quant_table`'s, values spread over three decades."""
    variants = list(qplots.VARIANT_STYLE)
    weights = ["fp32", "w8a8", "w4a8"]
    shape = (len(variants), len(weights))
    return xr.Dataset({"perplexity": (("variant", "weights"), np.linspace(7, 8, np.prod(shape)).reshape(shape)),
                       "ssd_error": (("layer", "variant", "weights"),
                                     np.geomspace(1e-4, 1e-1, 2 * np.prod(shape)).reshape(2, *shape))},
                      coords={"variant": variants, "weights": weights})


@pytest.mark.parametrize("build", [qplots.perplexity_bars, qplots.error_bars])
def test_quantisation_bars_give_each_label_its_own_line(build):
    fig = hv.render(build(_table()))
    factors = list(fig.y_range.factors)  # horizontal bars: the labels are rows of the y axis, one per bar
    (bars,) = _glyphs(fig)
    assert type(bars.glyph).__name__ == "HBar"
    assert len(set(factors)) == len(factors) and (fig.height - 80) / len(factors) >= 12  # a text line each


def test_log_error_bars_start_at_the_axis_floor_under_every_value():
    table = _table()
    fig = hv.render(qplots.error_bars(table))
    (bars,) = _glyphs(fig)
    values = np.asarray(bars.data_source.data[bars.glyph.right])
    assert type(fig.x_scale).__name__ == "LogScale"
    assert bars.glyph.left == pytest.approx(fig.x_range.start)  # not a fixed 0.01 above the smallest values
    assert 0 < fig.x_range.start < values.min() and fig.x_range.end > values.max()


def _activations(n: int = 16) -> xr.DataArray:
    rng = np.random.default_rng(1)
    v = rng.standard_normal((n, 200)) * np.geomspace(0.1, 30, n)[:, None]
    return xr.DataArray(v, dims=("channel", "sample"), coords={"channel": np.arange(n)}, attrs={"tensor": "x"})


def test_the_range_per_index_draws_a_stem_per_index_on_its_log_axis():
    values = _activations()
    fig = hv.render(qplots.activation_ranges(values))
    (stems,) = [r for r in _glyphs(fig) if type(r.glyph).__name__ == "Segment"]
    data = stems.data_source.data
    amax = np.abs(values.values).max(1)
    assert np.allclose(np.sort(data["amax_"]), np.sort(amax))  # one stem per channel, up to its amax
    assert np.all(np.asarray(data["amax"]) > 0)  # from a floor a log axis can draw (spikes started at 0)
    assert fig.y_range.start <= min(data["amax"]) and fig.y_range.end >= amax.max()


def test_the_histogram_spans_the_data_and_its_bars_start_under_one_count():
    values = _activations() + 100.0  # far from 0: the axis must follow the data, not include 0
    fig = hv.render(qplots.activation_histogram(values, 3))
    one = values.isel(channel=3).values
    assert fig.x_range.start == pytest.approx(one.min()) and fig.x_range.end == pytest.approx(one.max())
    assert fig.y_range.start == 0.5 and type(fig.y_scale).__name__ == "LogScale"


def test_chunk_ranges_put_channels_on_the_channel_axis():
    amax = np.arange(1, 1 + 2 * 3 * 5, dtype=float).reshape(2, 3, 5)  # layer, chunk, channel
    ds = xr.Dataset({"x_amax": (("layer", "chunk", "channel"), amax)},
                    coords={"layer": [0, 1], "chunk": [0, 1, 2], "channel": np.arange(5)})
    heat = qplots.chunk_ranges(ds)
    assert sorted(set(heat.dimension_values("channel"))) == list(range(5))
    assert sorted(set(heat.dimension_values("chunk"))) == [0, 1, 2]
    cell = heat[4, 0]  # channel 4, chunk 0
    assert cell == pytest.approx(amax[0, 0, 4] / amax[0, :, 4].max())


# ------------------------------------------------------------------------------------------------------------------
# The dashboard: no Frame slider for a still image, both tabs within a 1400 px window.
# ------------------------------------------------------------------------------------------------------------------
def _sliders(panel) -> list:
    import panel as pn
    from bokeh.models import Slider

    root = pn.Column(*panel.sidebar()).get_root()
    return [m for m in root.references() if isinstance(m, Slider)]


def test_a_still_image_gets_no_frame_slider_and_a_video_one_over_its_frames(monkeypatch):
    """Bokeh logged E-1021 (EQUAL_SLIDER_START_END) on every open: the Frame slider ran from 0 to 0 for an image."""
    from bokeh.core.validation import check_integrity

    from dashboards import compact_models
    from lab.methods.ssm_inr import live

    monkeypatch.setattr(live, "prepared", lambda datum, profile: True)  # no fits: only the widgets are looked at
    monkeypatch.setattr("panel.state.add_periodic_callback", lambda *a, **k: types.SimpleNamespace(stop=lambda: 0))
    panel = compact_models.InrPanel(profile="ci")
    assert panel.datum == "astronaut"
    sliders = _sliders(panel)
    assert not [s for s in sliders if s.title == "Frame"], [s.title for s in sliders]
    issues = check_integrity([s for s in sliders])
    assert not [e for e in issues.error if e.code == 1021], issues.error
    panel.datum = "shapes_video"
    (frame,) = [s for s in _sliders(panel) if s.title == "Frame"]
    assert (frame.start, frame.end) == (0, live.config("ci").frames - 1)
    panel.datum = "camera"
    assert not [s for s in _sliders(panel) if s.title == "Frame"]


@pytest.mark.browser
def test_compact_models_fits_a_1400_px_window_on_both_tabs(page, serve_app, monkeypatch, tmp_path):
    from lab.methods.ssm_inr import live
    from tests.conftest import TITLES_JS, ci_dashboard_data

    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    validation = logging.getLogger("bokeh.core.validation.check")
    validation.addHandler(handler)
    try:
        with ci_dashboard_data(monkeypatch, tmp_path, live.fitted, live.explore):
            page.goto(serve_app("compact_models"), wait_until="networkidle", timeout=120_000)
            page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('PSNR against size'))",
                                   timeout=240_000)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
            page.locator(".bk-tab", has_text="SSDi8").first.click()
            page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.includes(' values ('))", timeout=240_000)
            page.wait_for_timeout(500)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    finally:
        validation.removeHandler(handler)
    assert not [m for m in logged if "E-1021" in m], logged
    console = [e for e in page.console_errors if "favicon" not in e]
    assert console == [], console
