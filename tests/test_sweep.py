"""Sweeps on a local Dask cluster: one run per grid point, claims per point, one combined Dataset."""

import pytest

from lab.config import ConfigError
from lab.sweep import grid_points, sweep


def test_grid_points_is_the_cartesian_product():
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


def test_sweep_on_a_local_cluster(tmp_path):
    res = sweep("dam", {"seed": ["0", "1"]}, profile="ci", base={"trials": 2}, workers=1, out=tmp_path,
                progress=False)
    assert [p["seed"] for p in res.points] == [0, 1]
    assert set(res.table["seed"]) == {0, 1} and "passed" in res.table
    assert res.data.m.dims[0] == "seed" and res.data.sizes["seed"] == 2
    assert len(list(tmp_path.glob("dam-ci-*.nc"))) == 2


def test_bad_point_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="N="):
        sweep("dam", {"N": [64, -1]}, profile="ci", out=tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []
