"""Package-level checks: lazy imports, the public API's documented shapes."""

import os
import subprocess
import sys

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
