"""`lab bench pde --quick`: every case timed for the lab's solvers and the NumPy baseline, which agree; the fused
CPU step agrees with the torch step."""

import numpy as np
import pytest

from lab.bench.pde import BENCH_CASES, _initial, _lab_stepper, format_pde_bench, numpy_etdrk4_rollout, run_pde_bench
from lab.datasets.pde import KolmogorovFlowStepper, rollout


def test_pde_bench_quick() -> None:
    ds = run_pde_bench(quick=True, progress=False)
    assert list(ds["case"].values) == ["ks", "burgers", "kdv", "ns64", "ns128"]
    assert np.all(ds["lab_steps_per_s"].values > 0) and np.all(ds["numpy_steps_per_s"].values > 0)
    assert np.all(ds["max_abs_diff_first_step"].values < 1e-4)
    assert np.all(np.isnan(ds["exponax_steps_per_s"].values) | (ds["exponax_steps_per_s"].values > 0))
    text = format_pde_bench(ds)
    assert "ks" in text and "ns128" in text and "trajectory-steps/s" in text


@pytest.mark.parametrize("name", list(BENCH_CASES))
def test_rollouts_match_the_plain_numpy_etdrk4(name: str) -> None:
    """Every bench case agrees with the plain NumPy ETDRK4: to 1e-11 in float64, to float32 rounding in float32."""
    case = BENCH_CASES[name]
    u0 = _initial({**case, "batch": 2}, np.random.default_rng(3))
    stepper = _lab_stepper(case)
    geometry = (case["equation"], case["L"], case["N"], case["dt"])
    for dtype, steps, tol in ((np.float64, 6, 1e-11), (np.float32, 3, 2e-6)):
        x0 = u0.astype(dtype)
        lab = rollout(stepper, x0, steps)
        ref = numpy_etdrk4_rollout(*geometry, x0, steps, **case["coef"])
        assert lab.dtype == dtype
        scale = np.abs(ref).max()
        assert np.abs(lab.astype(np.float64) - ref).max() <= tol * scale, (name, dtype)


@pytest.mark.parametrize("name", [*BENCH_CASES, "kolmogorov"])
def test_fused_cpu_step_matches_the_torch_step(name: str) -> None:
    """The fused Numba stage loops give the torch path's rollout to rounding (float64) / float32 rounding."""
    if name == "kolmogorov":
        stepper, case = KolmogorovFlowStepper(2 * np.pi, 32, 0.01), {**BENCH_CASES["ns64"], "N": 32}
    else:
        case = BENCH_CASES[name]
        stepper = _lab_stepper(case)
    u0 = _initial({**case, "batch": 3}, np.random.default_rng(4))
    for dtype, tol in ((np.float64, 1e-13), (np.float32, 2e-6)):
        x0 = u0.astype(dtype)
        fused = rollout(stepper, x0, 4)
        stepper.fused = False
        try:
            plain = rollout(stepper, x0, 4)
        finally:
            del stepper.fused
        assert np.abs(fused - plain).max() <= tol * np.abs(plain).max(), (name, dtype)
