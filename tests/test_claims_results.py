"""Claims evaluate from a Dataset alone; results save atomically with provenance and load back."""

import json
import math

import numpy as np
import pytest
import xarray as xr

from lab import results
from lab.claims import Claim, ClaimsTable, evaluate


def _ds(value):
    return xr.Dataset({"err": ((), value)}, attrs={"method": "dam"})


def test_claim_passes_and_fails_on_the_measured_value():
    claim = Claim("small", "error is small", "Fig. 1", lambda ds: float(ds.err), "<=", 0.1, "paper")
    assert claim.evaluate(_ds(0.05)).passed
    assert not claim.evaluate(_ds(0.5)).passed


def test_a_claim_that_cannot_be_measured_fails_with_the_reason():
    claim = Claim("x", "s", "src", lambda ds: ds.missing, ">=", 1, "t")
    res = claim.evaluate(_ds(1.0))
    assert not res.passed and math.isnan(res.measured) and "could not be measured" in res.detail


def test_nan_never_passes():
    claim = Claim("x", "s", "src", lambda ds: float("nan"), "<=", 1, "t")
    assert not claim.evaluate(_ds(0.0)).passed


def test_bad_operator_is_refused():
    with pytest.raises(ValueError, match="allowed"):
        Claim("x", "s", "src", lambda ds: 0, "==", 1, "t")


def test_table_renders_text_html_and_frame():
    table = ClaimsTable(evaluate([Claim("a", "s", "src", lambda ds: (0.2, "why"), "<", 1, "t")], _ds(0.0)))
    assert "1/1 claims hold" in table.to_text()
    assert "<table" in table.to_html() and "pass" in table._repr_html_()
    assert table.to_frame().loc[0, "status"] == "pass"


def test_save_is_atomic_and_round_trips(tmp_path):
    ds = xr.Dataset({"m": (("step",), np.arange(3.0), {"units": "1", "flag": True})}, attrs={"d": {"a": 1}})
    path = results.save(ds, tmp_path / "sub" / "r.nc")
    back = results.load(path)
    np.testing.assert_array_equal(back.m.values, ds.m.values)
    assert json.loads(back.attrs["d"]) == {"a": 1}
    assert [p.name for p in path.parent.iterdir()] == ["r.nc"]  # no temporary file left


def test_failed_save_leaves_nothing_behind(tmp_path, monkeypatch):
    def boom(self, path, **kwargs):
        open(path, "wb").write(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    with pytest.raises(RuntimeError):
        results.save(xr.Dataset({"a": ((), 1.0)}), tmp_path / "r.nc")
    assert list(tmp_path.iterdir()) == []


def test_provenance_attrs():
    from lab.methods.dam.config import Config

    ds = results.attach_provenance(xr.Dataset(), method="dam", profile="ci", config=Config(), wall_time_s=1.5)
    for key in ("config", "versions", "git_revision", "device", "wall_time_s", "created"):
        assert key in ds.attrs
    assert json.loads(ds.attrs["versions"])["numpy"]
