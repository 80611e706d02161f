"""``lab.viz.bands.spread_text``: the mean and range over seeds in words, shared by the methods' discussions."""

import numpy as np
import pytest
import xarray as xr

from lab.viz.bands import spread_text


@pytest.mark.parametrize(
    ("values", "kwargs", "text"),
    [
        ([1.234], {}, "1.23"),
        ([1.0, 2.5, -0.3], {}, "1.07 (seeds -0.30 to 2.50)"),
        ([1.0, 2.5, -0.3], {"fmt": ".1f"}, "1.1 (seeds -0.3 to 2.5)"),
        ([3.14159, 2.71828], {"fmt": ".4g"}, "2.93 (seeds 2.718 to 3.142)"),
        ([1.0, 2.5, -0.3], {"fmt": "+.2f", "prefix": "from"}, "+1.07 (from -0.30 to +2.50)"),
        ([np.nan, 1.0, 2.0], {}, "1.50 (seeds 1.00 to 2.00)"),
        ([np.nan, 4.0], {"fmt": ".3f"}, "4.000"),
        ([np.nan, np.inf], {}, "n/a"),
        ([], {}, "n/a"),
    ],
)
def test_spread_text(values, kwargs, text):
    assert spread_text(values, **kwargs) == text


def test_spread_text_flattens_any_array():
    arr = xr.DataArray([[0.5, 0.25], [0.125, 1e-3]], dims=("seed", "x"))
    assert spread_text(arr) == spread_text(arr.values.ravel()) == "0.22 (seeds 0.00 to 0.50)"


def test_no_method_keeps_its_own_copy():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "lab" / "methods"
    assert not [p for p in root.glob("*/plots.py") if "def _spread(" in p.read_text(encoding="utf-8")]
