"""lab.viz.bands: mean over seeds with a band of the spread."""

import holoviews as hv
import numpy as np
import pytest
import xarray as xr

from lab.config import ConfigError
from lab.viz.bands import seed_band


def _values():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(5, 4, 2)) + np.arange(4)[None, :, None]
    return xr.DataArray(data, dims=("seed", "N", "kind"),
                        coords={"seed": range(5), "N": [16, 32, 64, 128], "kind": ["a", "b"]}, name="error")


def test_band_is_mean_plus_minus_std_per_curve():
    v = _values()
    overlay = seed_band(v, "N", by="kind")
    areas = [el for el in overlay if isinstance(el, hv.Area)]
    curves = [el for el in overlay if isinstance(el, hv.Curve) and not isinstance(el, hv.Area)]
    assert len(areas) == 2 and len(curves) == 2
    a = v.sel(kind="a")
    np.testing.assert_allclose(curves[0].dimension_values(1), a.mean("seed").values)
    lo, hi = areas[0].dimension_values(1), areas[0].dimension_values(2)
    np.testing.assert_allclose(hi - lo, 2 * a.std("seed", ddof=1).values)
    rng = seed_band(v.sel(kind="b"), "N", spread="range")
    area = next(el for el in rng if isinstance(el, hv.Area))
    np.testing.assert_allclose(area.dimension_values(2), v.sel(kind="b").max("seed").values)
    assert "5 seeds" in rng.opts.get().kwargs["title"]
    hv.render(overlay)  # draws with bokeh


def test_bad_calls():
    with pytest.raises(ConfigError, match="spread='sd' is not allowed"):
        seed_band(_values().sel(kind="a"), "N", spread="sd")
    with pytest.raises(ValueError, match="no others"):
        seed_band(_values(), "N")
