"""Package-level checks: lazy imports and the benchmark smoke test."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_does_not_load_triton_or_numba_kernels():
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); import kernels\n"
        "assert 'triton' not in sys.modules, 'triton imported'\n"
        "assert 'kernels._numba.linear_scan' not in sys.modules\n"
        "print(sorted(kernels.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "linear_scan" in out.stdout


def test_reuse_freed_memory_runs_in_a_subprocess():
    code = f"import sys; sys.path.insert(0, {ROOT!r}); import kernels; print(kernels.reuse_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("True", "False")


def test_public_api_documents_shapes():
    import kernels

    for name in ("linear_scan", "selective_scan", "ssd", "associative_scan", "linear_scan_ref", "selective_scan_ref",
                 "ssd_ref", "linear_scan_pscan"):  # fmt: skip
        doc = getattr(kernels, name).__doc__
        assert "Arguments:" in doc and "Returns:" in doc, name


def test_scan_bench_quick_smoke():
    from kernels.bench import format_scan_bench, run_scan_bench

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
    """The benchmark's child processes are real modules (``python -m kernels.bench.<name>``), not code strings."""
    from kernels.bench.first_call import first_call
    from kernels.bench.selective import bench_selective

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
