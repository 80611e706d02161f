"""Claims evaluate from a Dataset alone; results save atomically with provenance and load back."""

import json
import math

import numpy as np
import pytest
import xarray as xr

from lab import results
from lab.claims import Claim, ClaimsTable, evaluate, over_seeds


def _ds(value, control=None):
    data = {"err": ((), value)}
    if control is not None:
        data["err_control"] = ((), control)
    return xr.Dataset(data, attrs={"method": "dam"})


def _claim(**kw):
    base = dict(name="small", statement="error is small", source="Fig. 1", measure=lambda ds: float(ds.err),
                op="<=", threshold=0.1, threshold_source="paper", control=lambda ds: float(ds.err_control),
                control_label="the variant without the property")
    return Claim(**(base | kw))


def test_claim_holds_only_when_the_measurement_passes_and_the_control_fails():
    claim = _claim()
    held = claim.evaluate(_ds(0.05, control=0.5))
    assert held.verdict == "holds" and held.passed and held.control_passed is False
    assert held.control_measured == 0.5
    both = claim.evaluate(_ds(0.05, control=0.01))
    assert both.verdict == "does not discriminate" and not both.passed and both.control_passed
    failed = claim.evaluate(_ds(0.5, control=0.6))
    assert failed.verdict == "fails" and not failed.passed


def test_a_control_that_cannot_be_measured_proves_nothing():
    res = _claim(control=lambda ds: ds.missing).evaluate(_ds(0.05))
    assert res.verdict == "does not discriminate" and math.isnan(res.control_measured)


def test_a_claim_without_control_states_why_and_is_judged_on_its_measurement():
    claim = _claim(control=None, no_control="agreement with an analytic solution")
    res = claim.evaluate(_ds(0.05))
    assert res.verdict == "holds" and res.control_measured is None and res.control_passed is None
    assert res.control_why == "agreement with an analytic solution"


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_ties_never_pass(op):
    claim = _claim(op=op, threshold=0.1, control=None, no_control="x")
    assert claim.evaluate(_ds(0.1)).verdict == "fails"


def test_report_rows_have_no_verdict_and_do_not_fail_the_table():
    row = _claim(report=True, control=None).evaluate(_ds(5.0))
    assert row.verdict == "reported" and row.ok and not row.passed
    table = ClaimsTable([row, _claim().evaluate(_ds(0.05, 1.0))])
    assert table.all_passed and table.summary() == "1/1 claims hold"


def test_seeded_claims_report_their_spread_and_the_seeds_holding():
    claim = _claim(measure=lambda ds: over_seeds([0.05, 0.08, 0.2], "mean"), op="<", threshold=0.12)
    res = claim.evaluate(_ds(0.0, 1.0))
    assert res.measured == pytest.approx(0.11) and res.verdict == "holds"
    assert res.spread == (0.05, 0.2) and res.seeds_holding == 2
    worst = _claim(measure=lambda ds: over_seeds([0.05, 0.08, 0.2], "max"), op="<", threshold=0.12)
    assert worst.evaluate(_ds(0.0, 1.0)).verdict == "fails"
    assert "2/3 seeds" in ClaimsTable([res]).to_text()


def test_a_seeded_report_row_shows_its_spread_but_no_seeds_holding():
    row = _claim(report=True, control=None, measure=lambda ds: over_seeds([0.1, 0.3])).evaluate(_ds(0.0))
    assert row.verdict == "reported" and row.spread == (0.1, 0.3) and row.seeds_holding is None
    assert "[0.1, 0.3] (2)" in ClaimsTable([row]).to_text()


def test_to_dict_carries_control_and_verdict():
    d = _claim().evaluate(_ds(0.05, 0.5)).to_dict()
    assert d["control_measured"] == 0.5 and d["control_passed"] is False and d["control_why"] == ""
    assert d["verdict"] == "holds"
    json.dumps(d)
    d = _claim(control=None, no_control="why").evaluate(_ds(0.05)).to_dict()
    assert d["control_measured"] is None and d["control_passed"] is None and d["control_why"] == "why"


def test_a_claim_that_cannot_be_measured_fails_with_the_reason():
    claim = _claim(measure=lambda ds: ds.missing, op=">=", threshold=1)
    res = claim.evaluate(_ds(1.0, 0.0))
    assert res.verdict == "fails" and math.isnan(res.measured) and "could not be measured" in res.detail


def test_nan_never_passes():
    assert _claim(measure=lambda ds: float("nan")).evaluate(_ds(0.0, 1.0)).verdict == "fails"


def test_bad_operator_is_refused():
    with pytest.raises(ValueError, match="allowed"):
        _claim(op="==")


def test_table_renders_text_html_and_frame():
    table = ClaimsTable(evaluate([_claim(measure=lambda ds: (0.02, "why"))], _ds(0.0, 0.7)))
    text = table.to_text()
    assert "1/1 claims hold" in text and "0.7 (fails)" in text and "control: the variant" in text
    page = table.to_html()
    assert "<th>control</th>" in page and "holds" in page and "0.7 (fails)" in page
    frame = table.to_frame()
    assert frame.loc[0, "verdict"] == "holds" and frame.loc[0, "control"] == 0.7



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
