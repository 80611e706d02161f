"""`lab bench scan --quick`: every part of the scan benchmark measured, its child processes real modules."""

import os

import pytest


def test_scan_bench_quick_smoke():
    from lab.bench.scan import format_scan_bench, run_scan_bench

    ds = run_scan_bench(quick=True, progress=False)
    for var in ("bandwidth_gbs", "ls_times", "ls_gbs", "ls_pct_bandwidth", "ls_speedup", "ss_time", "ssd_time",
                "target_passed", "first_call_s"):  # fmt: skip
        assert var in ds, var
    assert set(ds["impl"].values) >= {"numba", "torch_loop", "pscan"}
    assert (ds["ls_time"].sel(impl="numba", mode="fwd") > 0).all()
    assert (ds["ss_paired_fwd_times"] > 0).all()  # the fwd+bwd / fwd target's paired forwards (2 repeats quick)
    assert "selective_scan numba fwd+bwd / fwd (paired)" in ds["target"].values
    assert ds.attrs["quick"] == 1 and "description" in ds.attrs
    text = format_scan_bench(ds)
    assert "targets" in text and ("PASS" in text or "FAIL" in text)
    pytest.importorskip("h5netcdf")
    ds.to_netcdf(
        os.devnull if False else os.path.join(os.environ.get("TMPDIR", "/tmp"), f"scan_bench_{os.getpid()}.nc"),
        engine="h5netcdf",
    )


def test_scan_bench_children_run_as_modules():
    """The benchmark's child processes are real modules (``python -m lab.bench.scan.<name>``), not code strings."""
    from lab.bench.scan.first_call import first_call
    from lab.bench.scan.selective import bench_selective

    r = bench_selective("numba", "fwd_bwd", (1, 16, 64, 4), 2)  # in a fresh process: a real peak-memory figure
    assert len(r["times"]) == 2 and all(t > 0 for t in r["times"])
    assert len(r["fwd_times"]) == 2 and all(t > 0 for t in r["fwd_times"])  # a paired forward per fwd_bwd call
    assert r["peak_extra_bytes"] >= 0 and r["max_tensor_bytes"] == 1 * 16 * 64 * 4  # largest: one (B, D, L) tensor
    local = bench_selective("numba", "fwd_bwd", (1, 16, 64, 4), 1, in_process=True)
    assert local["max_tensor_bytes"] == r["max_tensor_bytes"]
    assert local["peak_extra_bytes"] != local["peak_extra_bytes"]  # NaN: no memory figure in process
    assert first_call(cold=False) > 0
    with pytest.raises(RuntimeError, match="child failed"):
        bench_selective("numba", "fwd", (1, 16, -1, 4), 1)  # a negative length: the child fails and says so
