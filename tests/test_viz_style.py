"""The shared plot helpers that keep plots readable: log-axis ticks that do not crowd, and cell numbers in black or
white by the cell's luminance (blue numbers on dark blue cells were unreadable)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.viz.style import log_ticks, text_colour


def test_log_ticks_step_1_2_5_inside_the_range():
    assert log_ticks(0.0175, 0.45) == [0.02, 0.05, 0.1, 0.2]
    assert log_ticks(1, 32) == [1, 2, 5, 10, 20]
    assert log_ticks(1e-5, 3) == [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1]  # powers of ten only over many decades
    assert len(log_ticks(0.31, 0.39)) == 2  # a narrow range: its ends
    assert log_ticks(0, 1) == [] and log_ticks(np.nan, 1) == []


def test_text_colour_follows_the_cells_luminance():
    assert text_colour(95, "viridis", (0, 100)) == "black"  # yellow
    assert text_colour(5, "viridis", (0, 100)) == "white"  # dark purple
    assert text_colour(95, "Blues", (0, 100)) == "white"  # dark blue
    assert text_colour(5, "Blues", (0, 100)) == "black"  # near white
    assert text_colour(500, "Blues", (0, 100)) == "white"  # clipped to the scale


def _labels(overlay):
    return next(el for el in overlay if type(el).__name__ == "Labels")


def test_heat_map_numbers_read_on_their_cells():
    from lab.methods.rem import plots as rem_plots
    from lab.methods.wsc import plots as wsc_plots

    R = xr.DataArray([[98.0, np.nan], [4.0, 97.0]], dims=("after", "task"), coords={"after": [0, 1], "task": [0, 1]})
    labels = _labels(wsc_plots.accuracy_matrix(R))
    colours = dict(zip(labels.dimension_values("text"), labels.dimension_values("colour")))
    assert colours["98"] == "white" and colours["4"] == "black"
    score = xr.DataArray(np.array([[[[3.0, 96.0]]]]), dims=("seed", "algorithm", "corruption", "rate"),
                         coords={"algorithm": ["rem"], "corruption": ["random"], "rate": [0.1, 1.0]})
    labels = _labels(rem_plots.score_grid(xr.Dataset({"score": score}), "rem"))
    colours = dict(zip(labels.dimension_values("text"), labels.dimension_values("colour")))
    assert colours == {"3": "white", "96": "black"}
