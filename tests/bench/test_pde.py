"""`lab bench pde --quick`: every case timed for the lab's solvers and the NumPy baseline, which agree."""

import numpy as np

from lab.bench.pde import format_pde_bench, run_pde_bench


def test_pde_bench_quick() -> None:
    ds = run_pde_bench(quick=True, progress=False)
    assert list(ds["case"].values) == ["ks", "burgers", "kdv", "ns64", "ns128"]
    assert np.all(ds["lab_steps_per_s"].values > 0) and np.all(ds["numpy_steps_per_s"].values > 0)
    assert np.all(ds["max_abs_diff_first_step"].values < 1e-4)
    assert np.all(np.isnan(ds["exponax_steps_per_s"].values) | (ds["exponax_steps_per_s"].values > 0))
    text = format_pde_bench(ds)
    assert "ks" in text and "ns128" in text and "trajectory-steps/s" in text
