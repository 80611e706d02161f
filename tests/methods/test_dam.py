"""Dense associative memory: the Numba update against plain numpy, energy descent, fixed points, theory."""

import math

import numpy as np
import pytest

from lab.methods.dam import theory
from lab.methods.dam.model import DenseAssociativeMemory, fields_reference, flip_to_overlap


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fields_equal_plain_numpy_exact_rule(n, seed):
    rng = np.random.default_rng(seed)
    P, N = int(rng.integers(3, 60)), int(rng.integers(5, 40))
    dam = DenseAssociativeMemory.random(P, N, n=n, rng=rng)
    sigma = rng.choice([-1.0, 1.0], size=N)
    ref = fields_reference(dam.xi, sigma, lambda x: x**n)
    np.testing.assert_allclose(dam.fields(sigma)[0], ref, rtol=1e-12, atol=1e-9)


def test_exp_separation_gives_the_same_signs_as_numpy():
    rng = np.random.default_rng(3)
    dam = DenseAssociativeMemory.random(30, 25, F="exp", rng=rng)
    for _ in range(5):
        sigma = rng.choice([-1.0, 1.0], size=25)
        ref = fields_reference(dam.xi, sigma, np.exp)
        np.testing.assert_array_equal(np.sign(dam.fields(sigma)[0]), np.sign(ref))


@pytest.mark.parametrize("n", [2, 3])
def test_sync_step_equals_sign_of_reference_fields(n):
    rng = np.random.default_rng(4)
    dam = DenseAssociativeMemory.random(40, 30, n=n, rng=rng)
    sigma = rng.choice([-1.0, 1.0], size=(3, 30))
    new = dam.step(sigma, "sync")
    for b in range(3):
        f = fields_reference(dam.xi, sigma[b], lambda x: x**n)
        expected = np.where(f > 0, 1.0, np.where(f < 0, -1.0, sigma[b]))
        np.testing.assert_array_equal(new[b], expected)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_asynchronous_updates_never_increase_the_energy(n):
    rng = np.random.default_rng(5)
    N = 48
    dam = DenseAssociativeMemory.random(max(2, int(0.3 * N ** (n - 1))), N, n=n, rng=rng)
    sigma = rng.choice([-1.0, 1.0], size=(4, N))
    energy = dam.energy(sigma)
    for _ in range(6):
        sigma = dam.step(sigma, "async", rng=rng)
        new_energy = dam.energy(sigma)
        assert np.all(new_energy <= energy + 1e-6 * np.abs(energy))
        energy = new_energy


@pytest.mark.parametrize(("n", "alpha"), [(2, 0.02), (3, 0.01)])
def test_stored_patterns_are_fixed_points_at_low_load(n, alpha):
    rng = np.random.default_rng(6)
    N = 200
    dam = DenseAssociativeMemory.random(max(1, round(alpha * N ** (n - 1))), N, n=n, rng=rng)
    np.testing.assert_array_equal(dam.step(dam.xi[:5], "sync"), dam.xi[:5])


def test_incremental_trajectories_match_fresh_steps():
    rng = np.random.default_rng(7)
    dam = DenseAssociativeMemory.random(400, 64, n=3, rng=rng)
    start = np.stack([flip_to_overlap(dam.xi[0], m0, rng) for m0 in (0.2, 0.5, 0.9)])
    m, final = dam.trajectories(start, 8)
    states = start.copy()
    for t in range(1, 9):
        states = dam.step(states)
        np.testing.assert_allclose(m[:, t], states @ dam.xi[0] / 64)
    np.testing.assert_array_equal(final, states)


def test_flip_to_overlap_sets_the_exact_overlap():
    rng = np.random.default_rng(8)
    pattern = rng.choice([-1.0, 1.0], size=100)
    for m0 in (0.1, 0.5, 1.0):
        assert flip_to_overlap(pattern, m0, rng) @ pattern / 100 == pytest.approx(m0)


def test_theory_values():
    a_c, m_c = theory.ags_capacity()
    assert a_c == pytest.approx(0.138, abs=5e-4) and m_c == pytest.approx(0.967, abs=1e-3)
    assert theory.critical_load(3) == pytest.approx(0.084, abs=1e-3)
    # the brief's worked example: alpha = 0.03, m0 = 0.6 -> 0.77 -> 0.95 -> 1.00
    np.testing.assert_allclose(theory.recursion(0.6, 0.03, 3, 3), [0.6, 0.77, 0.952, 0.997], atol=2e-3)
    m_u = theory.basin_edge(0.05, 3)
    assert 0 < m_u < 1 and math.isnan(theory.basin_edge(0.2, 3))
    # m_u is a fixed point, unstable: just above it the recursion climbs, just below it falls
    assert theory.recursion(m_u + 0.01, 0.05, 3, 1)[1] > m_u + 0.01
    assert theory.recursion(m_u - 0.01, 0.05, 3, 1)[1] < m_u - 0.01


def test_ci_run_has_documented_dims_and_claims_evaluate():
    import lab

    res = lab.run("dam", "ci", progress=False)
    ds = res.data
    assert ds.m.dims == ("alpha", "m0", "trial", "step")
    assert ds.m_n2.dims == ("alpha_n2", "m0", "trial", "step")
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)
    assert len(res.claims) == 8 and all(np.isfinite(c.measured) for c in res.claims)


def test_claims_recheck_from_saved_file(tmp_path):
    import lab

    res = lab.run("dam", "ci", progress=False)
    path = lab.save(res.data, tmp_path / "dam.nc")
    again = lab.check(path)
    assert [c.measured for c in again] == pytest.approx([c.measured for c in res.claims], nan_ok=True)


def test_claim_can_fail_when_theory_is_off():
    """The recursion claim compares against the simulation: corrupt the theory curve and it must fail."""
    import lab
    from lab.methods.dam.experiment import CLAIMS

    ds = lab.run("dam", "ci", progress=False).data
    bad = ds.copy()
    bad["m_theory"] = bad.m_theory * 0.5
    claim = next(c for c in CLAIMS if c.name == "recursion_tracks_n")
    assert not claim.evaluate(bad).passed


def test_explore_for_the_dashboard():
    from lab.methods.dam.experiment import explore

    ds = explore(n=3, N=96, alpha=0.04, m0=0.7, trials=2, steps=5)
    assert ds.m.dims == ("m0", "trial", "step") and 0.7 in ds.m0.values
    with pytest.raises(ValueError, match="N="):
        explore(N=-3)
