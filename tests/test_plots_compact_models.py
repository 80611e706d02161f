"""What the compact-models plots show, read back from the Bokeh models they render to: images the right way up with
square pixels (checked against the source array), one colour per model in PSNR against size, SSDi8's plots drawing
their data (bars from a base the values sit on, ranges with their spikes, a histogram over the data's own range)."""

import holoviews as hv
import numpy as np
import pytest
from bokeh.models import GlyphRenderer

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
