"""Sweeps on a local Dask cluster: seeds as an axis, resumable points, isolated failures, and the fault tests
(a worker killed mid-point, the sweep's own process killed mid-sweep, a result file damaged by hand)."""

import os
import signal
import subprocess
import sys
import time

import pytest
import xarray as xr
from click.testing import CliRunner

from lab import registry
from lab.cli import cli
from lab.config import ConfigError
from lab.inputs import parse_seeds
from lab.sweep import FAULT_ENV, grid_points, sweep

BASE = {"trials": 2}  # DAM's ci profile with fewer trials: a point takes about a second


def _same_data(a: xr.Dataset, b: xr.Dataset) -> None:
    """Equal values (provenance attributes such as wall times differ between runs)."""
    xr.testing.assert_allclose(a, b)


@pytest.fixture(scope="module")
def scheduler():
    """One local cluster for the tests that inject no fault (a fault needs the environment of fresh workers)."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, scheduler):
    out = tmp_path_factory.mktemp("sweep-undisturbed")
    return sweep("dam", {}, seeds=[0, 1, 2], profile="ci", base=BASE, scheduler=scheduler, out=out,
                 progress=False)


def test_grid_points_is_the_cartesian_product():
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


def test_parse_seeds():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("0,3,7") == [0, 3, 7]
    assert parse_seeds("0-1,5") == [0, 1, 5]
    for bad in ("a", "3-1", "-2", "1-x"):
        with pytest.raises(ConfigError, match="seeds="):
            parse_seeds(bad)


def test_seeds_are_an_axis_with_a_summary(undisturbed):
    res = undisturbed
    assert [p["seed"] for p in res.points] == [0, 1, 2] and res.axes == ["seed"]
    assert res.data.sizes["seed"] == 3 and res.data.m.dims[0] == "seed"
    assert res.computed == 3 and res.skipped == 0 and not res.failures
    summary = res.summary()
    assert set(summary["seeds"]) == {3}
    assert {"measured_mean", "measured_std", "control_mean", "holds_share"} <= set(summary.columns)
    assert summary["holds_share"].between(0, 1).all()
    # the share is the mean of the per-seed verdicts
    table = res.table
    name = summary["name"].iloc[0]
    assert summary["holds_share"].iloc[0] == pytest.approx(table[table["name"] == name]["passed"].mean())


def test_rerun_skips_finished_points_and_force_recomputes(tmp_path, scheduler):
    kw = dict(profile="ci", base=BASE, scheduler=scheduler, out=tmp_path, progress=False)
    first = sweep("dam", {"N": [64, 96]}, **kw)
    assert first.computed == 2 and len(list((tmp_path / "dam").glob("*.nc"))) == 2
    again = sweep("dam", {"N": [64, 96]}, **kw)
    assert again.skipped == 2 and again.computed == 0
    _same_data(first.data, again.data)
    forced = sweep("dam", {"N": ["64"]}, force=True, **kw)
    assert forced.computed == 1 and forced.skipped == 0


def test_bad_point_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="N="):
        sweep("dam", {"N": [64, -1]}, profile="ci", out=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="seeds="):
        sweep("dam", {"seed": [0]}, seeds=[1], profile="ci", out=tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_point_is_recorded_and_the_rest_run_on(tmp_path, monkeypatch, undisturbed):
    monkeypatch.setenv(FAULT_ENV, "raise-seed:1")
    res = sweep("dam", {}, seeds=[0, 1, 2], profile="ci", base=BASE, workers=2, out=tmp_path, retries=0,
                progress=False)
    assert [f["point"] for f in res.failures] == [{"seed": 1}]
    assert "injected fault" in res.failures[0]["error"] and res.failures[0]["traceback"]
    assert res.datasets[1] is None and res.data.sizes["seed"] == 2
    assert set(res.table[res.table["status"] == "error"]["seed"]) == {1}
    _same_data(res.data, undisturbed.data.sel(seed=[0, 2]))


def test_cli_exits_non_zero_and_names_the_failed_point(tmp_path, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "raise-seed:1")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["sweep", "dam", "-P", "ci", "-p", "trials=2", "--seeds", "0-1", "--retries", "0",
                                 "--out", str(out)])
    assert r.exit_code == 1, r.output
    assert "failed: seed=1" in r.output and "1 computed" not in r.output
    assert "2 points: 2 computed, 0 reused" in r.output
    r = CliRunner().invoke(cli, ["sweep", "dam", "-P", "ci", "--seeds", "x"])
    assert r.exit_code == 2 and "seeds='x' is not allowed" in r.output


def test_fault_a_worker_killed_mid_point_is_retried(tmp_path, monkeypatch, undisturbed):
    marker = tmp_path / "killed"
    monkeypatch.setenv(FAULT_ENV, f"kill-once:{marker}")
    res = sweep("dam", {}, seeds=[0, 1, 2], profile="ci", base=BASE, workers=2, out=tmp_path / "out",
                progress=False)
    assert marker.exists(), "no worker was killed: the fault was not injected"
    assert not res.failures and res.computed == 3
    _same_data(res.data, undisturbed.data)


def test_fault_the_sweep_process_killed_mid_sweep_then_rerun(tmp_path, undisturbed, scheduler):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lab", "sweep", "dam", "-P", "ci", "-p", "trials=2", "--seeds", "0-2",
           "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and not list((out / "dam").glob("*.nc")):
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its Dask workers
        proc.wait()
    done = list((out / "dam").glob("*.nc"))
    assert 1 <= len(done) < 3, f"killed too late or too early: {len(done)} points on disk"
    res = sweep("dam", {}, seeds=[0, 1, 2], profile="ci", base=BASE, scheduler=scheduler, out=out, progress=False)
    assert res.skipped == len(done) and res.computed == 3 - len(done)
    _same_data(res.data, undisturbed.data)


def test_fault_a_damaged_result_file_is_detected_and_recomputed(tmp_path, undisturbed, scheduler):
    out = tmp_path / "out"
    kw = dict(seeds=[0, 1], profile="ci", base=BASE, scheduler=scheduler, out=out, progress=False)
    sweep("dam", {}, **kw)
    files = sorted((out / "dam").glob("*.nc"))
    files[0].write_bytes(files[0].read_bytes()[:100])  # truncated
    files[1].write_bytes(b"garbage" * 100)  # overwritten
    with pytest.warns(RuntimeWarning, match="unreadable"):
        res = sweep("dam", {}, **kw)
    assert res.computed == 2 and res.skipped == 0
    _same_data(res.data, undisturbed.data.sel(seed=[0, 1]))


def test_a_point_file_copied_over_another_seeds_is_detected_and_recomputed(tmp_path, undisturbed, scheduler):
    """A swapped point: seed 0's file copied over seed 1's. Its digest holds, but its config (seed) is not the
    point's: the sweep says why it does not reuse it, recomputes it, and the summary equals an undisturbed sweep's."""
    import shutil

    import pandas as pd

    from lab.sweep import point_key

    out = tmp_path / "out"
    kw = dict(seeds=[0, 1, 2], profile="ci", base=BASE, scheduler=scheduler, out=out, progress=False)
    sweep("dam", {}, **kw)
    method = registry.get("dam")
    path = {s: out / "dam" / f"{point_key('dam', method.make_config('ci', **BASE, seed=s))}.nc" for s in (0, 1, 2)}
    shutil.copyfile(path[0], path[1])
    with pytest.warns(RuntimeWarning, match=r"point seed=1 not reused: config.seed=0 is not allowed; allowed: 1"):
        res = sweep("dam", {}, **kw)
    assert res.computed == 1 and res.skipped == 2
    assert [r["point"] for r in res.not_reused] == [{"seed": 1}] and "config.seed=0" in res.not_reused[0]["reason"]
    _same_data(res.data, undisturbed.data)
    pd.testing.assert_frame_equal(res.summary(), undisturbed.summary())
    assert sweep("dam", {}, **kw).skipped == 3  # the recomputed file is the point's now


def test_the_sweep_api_bounds_its_points_and_their_budgets_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match="seeds=range.* is not allowed; allowed: at most 10000 seeds"):
        sweep("dam", {}, seeds=range(10**8), profile="ci", out=tmp_path)
    with pytest.raises(ConfigError, match=r"grid=.* is not allowed; allowed: at most 10000 points .*20000"):
        sweep("dam", {"N": [64, 128]}, seeds=range(10_000), profile="ci", out=tmp_path)
    with pytest.raises(ConfigError, match="trials=10000, steps=10000 is not allowed: the run needs"):
        sweep("dam", {"trials": [10_000]}, base={"steps": 10_000}, profile="ci", out=tmp_path)
    assert list(tmp_path.iterdir()) == []
