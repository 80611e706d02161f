"""Dense associative memory: the Numba update against plain numpy, energy descent, fixed points, theory, the config's
bounds, the measurements, and the claims with their n = 2 controls on the shared ci run."""

import math

import numpy as np
import pytest

from lab.methods.dam import measures, theory
from lab.methods.dam.claims import CLAIMS
from lab.methods.dam.config import Config
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
    # one step of the recursion, element-wise, is the trajectory's first step
    np.testing.assert_allclose(theory.recursion_step(np.array([0.6, 0.3]), 0.03, 3),
                               [theory.recursion(0.6, 0.03, 3, 1)[1], theory.recursion(0.3, 0.03, 3, 1)[1]])
    # the retrieval edge: m_u for n >= 3; 0 for n = 2 below 2/pi (m = 0 unstable in its recursion)
    assert theory.retrieval_edge(0.05, 3) == theory.basin_edge(0.05, 3)
    assert theory.retrieval_edge(0.1, 2) == 0.0 and math.isnan(theory.retrieval_edge(0.7, 2))
    assert theory.recursion(0.05, 0.1, 2, 30)[-1] == pytest.approx(theory.retrieval_overlap(0.1, 2), abs=1e-6)
    m_u = theory.basin_edge(0.05, 3)
    assert 0 < m_u < 1 and math.isnan(theory.basin_edge(0.2, 3))
    # m_u is a fixed point, unstable: just above it the recursion climbs, just below it falls
    assert theory.recursion(m_u + 0.01, 0.05, 3, 1)[1] > m_u + 0.01
    assert theory.recursion(m_u - 0.01, 0.05, 3, 1)[1] < m_u - 0.01


def test_config_bounds_and_cross_field_rules():
    with pytest.raises(ValueError, match=r"N=3 is not allowed; allowed: an integer in \[16, 100000\]"):
        Config(N=3)
    with pytest.raises(ValueError, match="alphas=.*strictly increasing"):
        Config(alphas=(0.1, 0.05))
    with pytest.raises(ValueError, match="loads=.*"):
        Config(loads=(0.5, 1.2))
    with pytest.raises(ValueError, match="lags=8 is not allowed; allowed: at most steps=6"):
        Config(steps=6, lags=8)
    with pytest.raises(ValueError, match="N=.*GiB"):
        Config(n=4, N=100_000)
    assert Config(N_n2=()).N_n2 == ()


def test_measures():
    m = np.array([[0.5, 0.9, 0.99, 1.0], [0.2, 0.1, 0.0, 0.0]])
    np.testing.assert_array_equal(measures.first_hit(m, 0.98), [2.0, np.nan])
    # a target per row (each load's own fixed point); a NaN target is never reached
    np.testing.assert_array_equal(measures.first_hit(m, np.array([0.9, 0.2])), [1.0, 0.0])
    np.testing.assert_array_equal(measures.first_hit(m, np.array([np.nan, 0.3])), [np.nan, np.nan])
    np.testing.assert_array_equal(measures.first_hit(m, np.array([1.0, 0.1])), [3.0, 0.0])
    assert measures.basin_edge(np.array([0.2, 0.4, 0.6]), np.array([0.0, 0.25, 1.0])) == pytest.approx(
        0.4 + 0.2 / 3)
    assert measures.critical_load(np.array([0.1, 0.2]), np.array([1.0, 0.0])) == pytest.approx(0.15)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 50))
    c = measures.row_correlation(a, np.stack([2 * a[0] + 1, -a[1]]))
    np.testing.assert_allclose(c, [1.0, -1.0])
    assert np.isnan(measures.row_correlation(np.ones((1, 5)), a[:1, :5]))[0]


def test_ci_run_has_documented_dims_and_every_claim_a_control(ci_result):
    res = ci_result("dam")
    ds = res.data
    assert ds.m.dims == ("alpha", "m0", "trial", "step")
    assert ds.m_cmp.dims == ("order", "load", "m0", "trial", "step")
    assert list(ds.order.values) == [3, 2]
    assert ds.self_corr_cmp.dims == ("order", "load", "m0", "trial", "lag")
    assert ds.one_step_error_cmp.dims == ds.m_cmp.dims and ds.basin_edge_theory_cmp.dims == ("order", "load")
    # the one-step-ahead error is the simulated m(t+1) against the recursion applied to the simulated m(t)
    for o, k in enumerate(ds.order.values):
        for r in range(ds.sizes["load"]):
            m = ds.m_cmp[o, r].values
            expected = m[..., 1:] - theory.recursion_step(m[..., :-1], float(ds.alpha_cmp[o, r]), int(k))
            np.testing.assert_allclose(ds.one_step_error_cmp[o, r].values[..., :-1], expected)
            assert np.isnan(ds.one_step_error_cmp[o, r].values[..., -1]).all()
            # convergence is to each load's own recursion fixed point, less eps; censored trials are counted
            target = theory.retrieval_overlap(float(ds.alpha_cmp[o, r]), int(k)) - ds.attrs["eps"]
            assert float(ds.target_cmp[o, r]) == pytest.approx(target)
            np.testing.assert_array_equal(ds.never_cmp[o, r], ds.t_conv_cmp[o, r].isnull().sum("trial"))
    assert float(ds.basin_edge_theory_cmp[1].max()) == 0.0  # n = 2: every positive start is in its recursion basin
    # the two orders share relative loads but not absolute ones: each refers to its own critical load
    np.testing.assert_allclose(ds.alpha_cmp / ds.critical_load_ref_cmp, np.stack([ds["load"]] * 2))
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)
    assert len(res.claims) == len(CLAIMS)
    for claim, r in zip(CLAIMS, res.claims):
        assert (claim.control is None) != (claim.no_control == ""), claim.name
        assert np.isfinite(r.measured), r.name
        if claim.control is not None:
            assert r.control_measured is not None and np.isfinite(r.control_measured), r.name
            # nothing is learned here: every control is the order swapped, stated as analytic
            assert "n = 2" in claim.control_analytic and not claim.competence, claim.name
    assert [c.name for c in CLAIMS if c.headline] == ["no_self_noise"]
    assert not _claim("no_self_noise").report and _claim("start_memory").report


def test_claims_recheck_from_saved_file(ci_result, tmp_path):
    import lab

    res = ci_result("dam")
    path = lab.save(res.data, tmp_path / "dam.nc")
    again = lab.check(path)
    assert [c.measured for c in again] == pytest.approx([c.measured for c in res.claims], nan_ok=True)
    assert [c.control_measured for c in again] == pytest.approx([c.control_measured for c in res.claims],
                                                               nan_ok=True)


def _claim(name):
    return next(c for c in CLAIMS if c.name == name)


def test_recursion_claim_fails_when_theory_is_off(ci_result):
    bad = ci_result("dam").data.copy()
    bad["m_theory_cmp"] = bad.m_theory_cmp * 0.5
    assert _claim("recursion_tracks_n").evaluate(bad).verdict == "fails"


def test_recursion_claim_does_not_discriminate_when_n2_tracks_too(ci_result):
    ds = ci_result("dam").data.copy()
    perfect = ds.m_theory_cmp.expand_dims(trial=ds.trial).transpose(*ds.m_cmp.dims)
    ds["m_cmp"] = perfect.copy()
    r = _claim("recursion_tracks_n").evaluate(ds)
    assert r.measured < 1e-12 and r.control_measured < 1e-12 and r.verdict == "does not discriminate"


def test_one_step_headline_needs_the_n2_control_to_overshoot(ci_result):
    ds = ci_result("dam").data.copy()
    e = ds.one_step_error_cmp.copy()
    m = ds.m_cmp.copy()
    m[:, :, :, :, 1:-1] = 0.5  # every point from t = 1 on is transient
    ds["m_cmp"] = m
    e[0, :, :, :, :-1] = 0.01
    e[1, :, :, :, :-1] = -0.3
    ds["one_step_error_cmp"] = e
    r = _claim("no_self_noise").evaluate(ds)
    # constant errors: no spread, so the bounds are the means themselves
    assert r.measured == pytest.approx(0.01) and r.control_measured == pytest.approx(0.3) and r.verdict == "holds"
    assert r.per_seed is not None and len(r.per_seed) == ds.sizes["trial"]
    e[1, :, :, :, :-1] = 0.02  # n = 2 follows the recursion too: the check cannot tell the orders apart
    ds["one_step_error_cmp"] = e
    assert _claim("no_self_noise").evaluate(ds).verdict == "does not discriminate"
    e[0, :, :, :, :-1] = -0.3  # an error of either sign counts
    ds["one_step_error_cmp"] = e
    assert _claim("no_self_noise").evaluate(ds).verdict == "fails"


def test_one_step_bound_widens_with_the_spread_over_trials(ci_result):
    ds = ci_result("dam").data.copy()
    m = ds.m_cmp.copy()
    m[:, :, :, :, 1:-1] = 0.5
    ds["m_cmp"] = m
    e = ds.one_step_error_cmp.copy()
    k = ds.sizes["trial"]
    signs = np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
    ours, control = 0.02 + 0.04 * signs, -0.3 + 0.2 * signs  # per-trial errors with a spread between trials
    e[0, :, :, :, :-1] = ours[None, None, :, None]
    e[1, :, :, :, :-1] = control[None, None, :, None]
    ds["one_step_error_cmp"] = e
    r = _claim("no_self_noise").evaluate(ds)

    def se(x):  # trials as clusters of equal size
        return np.sqrt(k / (k - 1) * np.sum((x - x.mean()) ** 2)) / k

    assert r.measured == pytest.approx(abs(ours.mean()) + 2 * se(ours))
    assert r.control_measured == pytest.approx(max(abs(control.mean()) - 2 * se(control), 0.0))


def test_one_step_reads_only_transient_points_from_t1(ci_result):
    ds = ci_result("dam").data.copy()
    e = ds.one_step_error_cmp.copy()
    e[...] = 0.0
    e[0, :, :, :, 0] = 0.9  # the first step is exact for every order: never read
    m = ds.m_cmp.copy()
    m[0, :, :, :, 1:] = 0.5
    m[0, :, :, 0, 1:] = 0.99  # a trial on the retrieved plateau: outside the window
    e[0, :, :, 0, 1:-1] = 0.9
    ds["m_cmp"], ds["one_step_error_cmp"] = m, e
    assert _claim("no_self_noise").evaluate(ds).measured == pytest.approx(0.0)


def test_start_memory_takes_the_absolute_value_per_trial(ci_result):
    ds = ci_result("dam").data.copy()
    c = ds.self_corr_cmp.copy()
    signs = np.where(np.arange(ds.sizes["trial"]) % 2 == 0, 1.0, -1.0)
    c[0] = 0.3 * signs[None, None, :, None]  # opposite signs on alternate trials do not cancel
    ds["self_corr_cmp"] = c
    r = _claim("start_memory").evaluate(ds)
    assert r.measured == pytest.approx(0.3) and r.verdict == "reported"


def test_each_order_is_read_inside_its_own_basin(ci_result):
    ds = ci_result("dam").data.copy()
    perfect = ds.m_theory_cmp.expand_dims(trial=ds.trial).transpose(*ds.m_cmp.dims)
    m = perfect.copy()
    low = float(ds.m0.min())
    assert low < float(ds.basin_edge_theory_cmp[0].min()) + 0.1 <= float(ds.m0.max())  # outside order n's mask
    # n = 2 leaves its recursion at the lowest start only: outside order n's basin, inside its own
    m.loc[{"order": 2, "m0": low}] = m.loc[{"order": 2, "m0": low}] - 0.5
    m.loc[{"order": 2, "m0": low, "step": 0}] = low
    ds["m_cmp"] = m
    later = _claim("n2_recursion_fails_later").evaluate(ds)
    assert later.measured == pytest.approx(0.5) and later.verdict == "holds"
    tracks = _claim("recursion_tracks_n").evaluate(ds)
    assert tracks.measured < 1e-12 and tracks.control_measured == pytest.approx(0.5) and tracks.verdict == "holds"


def test_convergence_time_counts_never_converged_trials_apart(ci_result):
    ds = ci_result("dam").data.copy()
    edge = ds.basin_edge_theory_cmp[0]
    inside = ((ds.m0 >= edge + 0.1) & ds.t_conv_theory_cmp[0].notnull()).transpose("load", "m0")
    load, m0 = (int(k[0]) for k in np.nonzero(inside.values))
    t = ds.t_conv_cmp.copy()
    t[...] = ds.t_conv_theory_cmp.broadcast_like(t).transpose(*t.dims)
    t[0, load, m0, 0] = np.nan  # one trial of this point never converges: counted apart, not as steps + 1
    ds["t_conv_cmp"] = t
    ds["never_cmp"] = t.isnull().sum("trial")
    r = _claim("convergence_time").evaluate(ds)
    assert r.measured == pytest.approx(0.0) and " 1 of " in r.detail and "never reached" in r.detail
    t[0, load, m0, :] = np.nan  # now every trial of it never converges: the point's gap is at least cap - t_theory
    ds["t_conv_cmp"] = t
    ds["never_cmp"] = t.isnull().sum("trial")
    r = _claim("convergence_time").evaluate(ds)
    cap = ds.sizes["step"]  # steps + 1
    assert r.measured == pytest.approx(cap - float(ds.t_conv_theory_cmp[0, load, m0]))
    assert "1 points where most never did" in r.detail


def test_n2_later_failure_ignores_loads_past_capacity(ci_result):
    ds = ci_result("dam").data.copy()
    before = _claim("n2_recursion_fails_later").evaluate(ds).measured
    ds["m_n2"] = ds.m_n2 * 0  # the absolute-load n = 2 grid runs past capacity; the claim must not read it
    assert _claim("n2_recursion_fails_later").evaluate(ds).measured == before
    assert float(ds.alpha_cmp[1].max()) < float(ds.critical_load_ref_cmp[1])


def test_critical_load_is_attributed_to_the_recursion():
    claim = _claim("critical_load_n")
    assert "recursion" in claim.statement and "paper" not in claim.statement


def test_live_explore_is_memoised_and_validated():
    from lab.methods.dam import live

    ds = live.explore(n=3, N=96, alpha=0.04, m0=0.7, trials=2, steps=5)
    assert ds.m.dims == ("m0", "trial", "step") and 0.7 in ds.m0.values
    assert live.explore.cached(n=3, N=96, alpha=0.04, m0=0.7, trials=2, steps=5)
    assert live.explore(n=3, N=96, alpha=0.04, m0=0.7, trials=2, steps=5) is ds
    with pytest.raises(ValueError, match="N="):
        live.explore(N=-3)


def test_plots_and_discussion_read_the_dataset(ci_result):
    import holoviews as hv

    from lab.methods.dam import plots

    res = ci_result("dam")
    ds = res.data
    for obj in (plots.self_noise(ds), plots.basin_edge(ds), plots.capacity_scaling(ds),
                plots.overlap_curves(ds, float(ds.alpha[0])), plots.one_step_errors(ds)):
        assert isinstance(obj, (hv.Overlay, hv.Layout)) and len(obj) >= 2
    # every start of the grid, both orders at every load, simulation and recursion (two curves per m0)
    grid = plots.order_comparison(ds)
    assert len(grid) == ds.sizes["order"] * ds.sizes["load"]
    assert all(len(panel) == 2 * ds.sizes["m0"] for panel in grid)
    assert len(plots.convergence_comparison(ds)) == ds.sizes["order"] + 1  # one per order and the censored map
    text = plots.discussion(ds, res.claims)
    assert f"{float(ds.critical_load_theory):.4f}" in text and "recursion's" in text
    assert "mean e =" in text and "never" in text


def test_crosstalk_is_the_field_without_the_target_pattern():
    rng = np.random.default_rng(9)
    dam = DenseAssociativeMemory.random(30, 24, n=3, rng=rng)
    sigma = rng.choice([-1.0, 1.0], size=(2, 24))
    others = fields_reference(dam.xi[1:], sigma[0], lambda x: x**3)
    np.testing.assert_allclose(dam.crosstalk(sigma)[0], others * dam.xi[0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(dam.crosstalk(sigma, fields=dam.fields(sigma)), dam.crosstalk(sigma))
