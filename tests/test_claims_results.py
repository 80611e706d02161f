"""Claims evaluate from a Dataset alone; results save atomically with provenance and load back."""

import dataclasses
import json
import math

import numpy as np
import pytest
import xarray as xr

from lab import results
from lab.claims import (
    MIN_SEED_SHARE,
    SEED_SHARE_UNIT,
    Claim,
    ClaimsTable,
    Competence,
    evaluate,
    over_seeds,
    seed_share,
)


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


def test_values_over_trials_are_named_trials_not_seeds():
    from lab.report.headlines import _glance

    claim = _claim(measure=lambda ds: over_seeds([0.05, 0.08, 0.2], "mean", repeats="trials"), op="<",
                   threshold=0.12)
    res = claim.evaluate(_ds(0.0, 1.0))
    assert res.repeats == "trials" and res.seeds_holding == 2
    text = ClaimsTable([res]).to_text()
    assert "2/3 trials" in text and "seeds" not in text
    assert "(2/3 trials)" in _glance(res)[0]


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


# competence: a control that never learned its task proves nothing

def _competence(bar=0.9, **kw):
    base = dict(label="the control at its training length", measure=lambda ds: float(ds.control_id), op=">=",
                threshold=bar, threshold_source="the task's in-distribution bar")
    return Competence(**(base | kw))


def _ds_competence(value, control, control_id):
    ds = _ds(value, control=control)
    ds["control_id"] = ((), control_id)
    return ds


def test_a_control_that_fails_its_competence_check_gives_control_not_competent():
    claim = _claim(competence=_competence())
    res = claim.evaluate(_ds_competence(0.05, 0.5, control_id=0.11))  # the claim passes, the control fails, ...
    assert res.verdict == "control not competent" and not res.passed and not res.ok  # ... but never learned
    assert res.competent is False and res.competence[0].measured == pytest.approx(0.11)
    good = claim.evaluate(_ds_competence(0.05, 0.5, control_id=0.98))
    assert good.verdict == "holds" and good.competent is True


def test_competence_does_not_rescue_a_failing_measurement_nor_a_passing_control():
    claim = _claim(competence=_competence())
    assert claim.evaluate(_ds_competence(0.5, 0.6, control_id=0.11)).verdict == "fails"
    assert claim.evaluate(_ds_competence(0.5, 0.6, control_id=0.99)).verdict == "fails"
    assert claim.evaluate(_ds_competence(0.05, 0.01, control_id=0.99)).verdict == "does not discriminate"


def test_every_competence_check_must_pass_ties_and_nan_fail():
    claim = _claim(competence=(_competence(), _competence(label="a baseline", measure=lambda ds: 0.9)))
    res = claim.evaluate(_ds_competence(0.05, 0.5, control_id=0.95))
    assert res.verdict == "control not competent"  # the baseline sits on its bar: a tie fails
    assert [c.passed for c in res.competence] == [True, False]
    text = ClaimsTable([res]).to_text()
    assert "the control at its training length: 0.95" in text and "a baseline: 0.9" in text  # one line each
    nan = _claim(competence=_competence(measure=lambda ds: ds.missing)).evaluate(_ds(0.05, control=0.5))
    assert nan.verdict == "control not competent" and "could not be measured" in nan.competence[0].detail


def test_competence_travels_in_to_dict_text_and_html():
    res = _claim(competence=_competence(), headline=True).evaluate(_ds_competence(0.05, 0.5, control_id=0.11))
    d = res.to_dict()
    assert d["verdict"] == "control not competent" and d["competent"] is False and d["headline"] is True
    (c,) = d["competence"]
    assert c["measured"] == pytest.approx(0.11) and c["threshold"] == 0.9 and c["passed"] is False
    assert c["threshold_source"] == "the task's in-distribution bar"
    json.dumps(d)
    table = ClaimsTable([res])
    assert table.headline is res
    text = " ".join(table.to_text().split())  # wrapped to the terminal's width at word boundaries
    assert "NOT competent" in text and "small*" in text
    assert "NOT competent" in table.to_html() and "(headline)" in table.to_html()
    assert table.to_frame()["competence"][0].startswith("the control at its training length: 0.11")


def test_an_analytic_control_says_so_instead_of_a_competence_check():
    res = _claim(control_analytic="random selection has nothing to learn").evaluate(_ds(0.05, control=0.5))
    assert res.verdict == "holds" and res.competent is None
    assert "analytic control: random selection" in ClaimsTable([res]).to_text()


def test_a_headline_claim_is_never_a_report_row():
    with pytest.raises(ValueError, match="headline"):
        _claim(headline=True, report=True)


def test_seed_share_counts_the_seeds_that_hold():
    m = seed_share([1, 1, 0, 1, 1], "4 of 5")
    assert m.value == pytest.approx(0.8) and m.per_seed == (1.0, 1.0, 0.0, 1.0, 1.0)
    claim = _claim(measure=lambda ds: m, op=">", threshold=MIN_SEED_SHARE, unit=SEED_SHARE_UNIT,
                   control=lambda ds: seed_share([1, 0, 1, 1, 0]), control_analytic="a coin")
    assert claim.evaluate(xr.Dataset()).verdict == "holds"  # 4 of 5 passes, 3 of 5 does not
    two_of_three = dataclasses.replace(claim, measure=lambda ds: seed_share([1, 1, 0]))
    assert two_of_three.evaluate(xr.Dataset()).verdict == "fails"


def test_measure_builders_read_per_seed_values_and_write_their_detail():
    import xarray as xr

    from lab.claims import Pick, difference, ratio, share, value

    ds = xr.Dataset(
        {"acc": (("seed", "model", "tau"),
                 np.array([[[80, 81], [70, 72]], [[90, 91], [60, 62]], [[85, 86], [84, 80]]], float))},
        coords={"seed": [0, 1, 2], "model": ["ours", "base"], "tau": [0.1, 0.2]},
        attrs={"claim_tau": 0.2},
    )
    ours = Pick("acc", "ours", sel={"model": "ours", "tau": lambda d: d.attrs["claim_tau"]}, unit="%")
    base = Pick("acc", "base", sel={"model": "base", "tau": lambda d: d.attrs["claim_tau"]}, unit="%")
    m = difference(ours, base, what="gap")(ds)
    assert m.per_seed == (9.0, 29.0, 6.0) and m.value == pytest.approx(44 / 3)
    assert m.detail == "gap: ours 86% vs base 71.33%, mean over 3 seeds"
    assert difference(ours, base, statistic="min")(ds).value == 6.0
    assert ratio(ours, base)(ds).per_seed == pytest.approx((81 / 72, 91 / 62, 86 / 80))
    s = share(ours, base, margin=8)(ds)
    assert s.value == pytest.approx(2 / 3) and "on 2 of 3 seeds" in s.detail
    both_tau = Pick("acc", "ours, both τ", sel={"model": "ours"})
    assert value(both_tau)(ds).per_seed == (80.5, 90.5, 85.5)  # the dims left but seed are averaged


def test_pick_takes_the_best_variant_and_builders_append_a_note():
    import xarray as xr

    from lab.claims import Pick, difference

    ds = xr.Dataset({"acc": (("seed", "model"), np.array([[70.0, 60, 65], [80, 50, 85]]))},
                    coords={"seed": [0, 1], "model": ["ours", "gru", "dt"]})
    ours = Pick("acc", "ours", sel={"model": "ours"})
    best = Pick("acc", "strongest baseline", sel={"model": ["gru", "dt"]}, reduce="max")
    m = difference(ours, best, note=lambda d: f"{d.sizes['model'] - 1} baselines")(ds)
    assert m.per_seed == (5.0, -5.0) and m.detail.endswith("; 2 baselines")
    with pytest.raises(ValueError, match="reduce='median' is not allowed"):
        Pick("acc", "x", reduce="median")
