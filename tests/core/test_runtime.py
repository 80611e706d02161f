"""Process set-up and thread control (lab.core.runtime)."""

import subprocess
import sys

import numba
import pytest
import torch

from lab.core.runtime import setup_process, threads


def test_threads_sets_and_restores_torch_and_numba():
    before, before_numba = torch.get_num_threads(), numba.get_num_threads()
    with threads(1):
        assert torch.get_num_threads() == 1 and numba.get_num_threads() == 1
    assert torch.get_num_threads() == before and numba.get_num_threads() == before_numba


def test_threads_restores_after_an_error():
    before, before_numba = torch.get_num_threads(), numba.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"):
        with threads(1):
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before and numba.get_num_threads() == before_numba


def test_threads_caps_numba_at_its_pool_and_none_changes_nothing():
    before, before_numba = torch.get_num_threads(), numba.get_num_threads()
    many = numba.config.NUMBA_NUM_THREADS + 3
    with threads(many):
        assert torch.get_num_threads() == many
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    for n in (None, 0):
        with threads(n):
            assert torch.get_num_threads() == before and numba.get_num_threads() == before_numba


def test_setup_process_is_idempotent():
    first = setup_process()
    assert isinstance(first, bool)
    assert setup_process() is first
    if sys.platform.startswith("linux"):
        assert first  # glibc accepts the malloc settings


def test_setup_process_calls_reuse_freed_memory_once_per_process():
    code = (
        "import kernels, lab.core.runtime as rt\n"
        "calls = []\n"
        "orig = kernels.reuse_freed_memory\n"
        "kernels.reuse_freed_memory = lambda: calls.append(1) or orig()\n"
        "print(rt.setup_process(), rt.setup_process(), len(calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ok, again, calls = out.stdout.split()
    assert ok == again and calls == "1"


def test_threads_also_limits_blas_and_restores_it():
    import numpy  # noqa: F401  loads the BLAS whose threads are limited
    from threadpoolctl import threadpool_info

    from lab.core.runtime import threads

    before = [p["num_threads"] for p in threadpool_info()]
    assert before, "no BLAS/OpenMP pool found to limit"
    with threads(1):
        assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert [p["num_threads"] for p in threadpool_info()] == before
