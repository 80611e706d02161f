"""A results chain you can trust: a results file carries a content digest that lab.results.load checks, and what the
caller expected to load (method, config, lab version); `lab check` verifies both and says so in one line."""

from __future__ import annotations

import json
import warnings

import h5netcdf
import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import lab
from lab import results
from lab.cache import dataset_checksum
from lab.cli import cli
from lab.config import ConfigError


@pytest.fixture(scope="module")
def dam_run():
    return lab.run("dam", "ci", progress=False, trials=2)


@pytest.fixture
def saved(dam_run, tmp_path):
    return results.save(dam_run.data, tmp_path / "dam.nc")


def _expect(run) -> dict:
    return {"method": "dam", "config": run.config.to_json(), "lab_version": results.lab_version()}


def _toy() -> xr.Dataset:
    return xr.Dataset({"u": (("i",), np.arange(4.0), {"units": "1", "long_name": "u"})}, coords={"i": np.arange(4)},
                      attrs={"method": "dam", "config": json.dumps({"seed": 0}), "note": "x"})


def test_the_digest_is_the_cache_checksum_with_the_attributes():
    ds = _toy()
    assert results.content_digest(ds) == dataset_checksum(ds, attrs=True, skip=(results.DIGEST_ATTR,))
    assert dataset_checksum(ds) == dataset_checksum(ds.assign_attrs(note="y"))  # the cache's: values only
    assert results.content_digest(ds) != results.content_digest(ds.assign_attrs(note="y"))
    changed = ds.copy(deep=True)
    changed["u"].attrs["units"] = "s"
    assert results.content_digest(ds) != results.content_digest(changed)


def test_save_then_load_checks_the_digest_and_what_was_expected(dam_run, saved):
    back = results.load(saved, expect=_expect(dam_run))
    assert back.attrs[results.DIGEST_ATTR] == results.content_digest(back)
    assert back.attrs["lab_version"] == results.lab_version()
    xr.testing.assert_identical(back.drop_attrs(), results.load(saved).drop_attrs())
    again = results.save(back, saved.parent / "again.nc")  # a loaded Dataset saved again gets a fresh digest
    results.load(again, expect=_expect(dam_run))


@pytest.mark.parametrize("change", ["value", "attribute", "variable attribute"])
def test_a_file_changed_after_it_was_written_is_refused(saved, change):
    with h5netcdf.File(saved, "a") as f:
        if change == "value":
            data = f.variables["m"][...]
            f.variables["m"][...] = data + 0.5
        elif change == "attribute":
            f.attrs["config"] = f.attrs["config"].replace('"seed": 0', '"seed": 1')
        else:
            f.variables["m"].attrs["units"] = "furlongs"
    with pytest.raises(ConfigError, match="changed after it was written") as err:
        results.load(saved)
    assert "\n" not in str(err.value) and str(err.value).startswith("path=")


def test_a_foreign_file_is_refused_when_the_caller_says_what_it_expects(dam_run, saved, tmp_path):
    with pytest.raises(ConfigError, match=r"config.seed=0 is not allowed; allowed: 1"):
        results.load(saved, expect={**_expect(dam_run), "config": dam_run.config.to_json().replace(
            '"seed": 0', '"seed": 1')})
    with pytest.raises(ConfigError, match="method='dam' is not allowed; allowed: 'rem'"):
        results.load(saved, expect={"method": "rem"})
    with pytest.raises(ConfigError, match="lab_version="):
        results.load(saved, expect={"lab_version": "0.0.0"})


def test_a_file_written_before_digests_loads_quietly_unless_expected(dam_run, tmp_path):
    old = tmp_path / "old.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # h5netcdf on invalid_netcdf, as save writes it too
        dam_run.data.to_netcdf(old, engine=results.NETCDF_ENGINE, invalid_netcdf=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = results.load(old)
    assert results.DIGEST_ATTR not in ds.attrs
    with pytest.raises(ConfigError, match="written before lab.results.save stored digests"):
        results.load(old, expect=_expect(dam_run))


def test_api_check_refuses_another_method(dam_run):
    assert lab.check(dam_run.data, "dam").all_passed == dam_run.claims.all_passed
    with pytest.raises(ConfigError, match="method='dam' is not allowed; allowed: 'rem'"):
        lab.check(dam_run.data, "rem")
    with pytest.raises(ConfigError, match="method=None is not allowed") as err:
        lab.check(dam_run.data.drop_attrs())
    assert "slug=" not in str(err.value)


def _check(*args):
    return CliRunner().invoke(cli, ["check", *map(str, args)])


def test_lab_check_verifies_the_digest_and_the_method(dam_run, saved, tmp_path):
    ok = _check(saved, "--method", "dam")
    assert ok.exit_code in (0, 1) and "Traceback" not in ok.output, ok.output
    for args, fragment in [
        ((saved, "--method", "rem"), "method='dam' is not allowed; allowed: 'rem'"),
        ((saved, "--method", "nosuch"), "--method='nosuch' is not allowed; allowed: one of"),
    ]:
        out = _check(*args)
        assert out.exit_code == 2 and fragment in out.output, out.output
        assert len(out.output.strip().splitlines()) == 1 and "slug=" not in out.output
    foreign = results.save(dam_run.data.assign_attrs(method="nosuch"), tmp_path / "foreign.nc")
    out = _check(foreign)
    assert out.exit_code == 2 and "nosuch" in out.output and len(out.output.strip().splitlines()) == 1, out.output
    with h5netcdf.File(saved, "a") as f:
        f.attrs["method"] = "rem"  # another method's name written into the file: the digest no longer holds
    out = _check(saved)
    assert out.exit_code == 2 and "changed after it was written" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1
