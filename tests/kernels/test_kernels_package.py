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
    assert ds.attrs["quick"] == 1 and "description" in ds.attrs
    text = format_scan_bench(ds)
    assert "targets" in text and ("PASS" in text or "FAIL" in text)
    pytest.importorskip("h5netcdf")
    ds.to_netcdf(
        os.devnull if False else os.path.join(os.environ.get("TMPDIR", "/tmp"), f"scan_bench_{os.getpid()}.nc"),
        engine="h5netcdf",
    )
