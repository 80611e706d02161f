"""Plasticity benchmarks: the recorded data follow the true fast dynamics and the true slow laws."""

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets import plasticity as P


def _sessions(name, K=6, T=60, **options):
    bench = P.make_benchmark(name, T=T, seed=3, **options)
    rng = np.random.default_rng(0)
    ub = P.stimulation_schedule("random", K, period=2, rng=rng)
    return bench, ub, bench.simulate(bench.initial_state(), ub, rng)


@pytest.mark.parametrize("rule", ["linear", "bcm"])
def test_low_rank_coefficients_follow_the_true_law(rule):
    bench, ub, s = _sessions(f"lowrank_{rule}", N=12)
    xi = bench.true_rule()
    assert s.y.shape == (6, 61, 12) and s.u.shape == (6, 60, 1 + bench.n_probe) and s.c.shape == (6, 2)
    for k in range(5):  # c_{k+1} = c_k + Ξ Θ(c_k, ū_k), per component
        np.testing.assert_allclose(s.c[k + 1], s.c[k] + np.einsum("rj,rj->r", xi, P.library(s.c[k], ub[k])))
    np.testing.assert_allclose(s.state_end, bench.law(s.c[-1], ub[-1]))
    np.testing.assert_allclose(s.W, np.einsum("kr,ir,jr->kij", s.c, bench.m, bench.n))
    np.testing.assert_allclose(bench.m.T @ bench.m, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(bench.n.T @ bench.n, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(np.diag(bench.m.T @ bench.n), 0.5)
    # each true rule uses four of the five library terms, a different four for the two laws
    assert (xi != 0).sum(axis=1).tolist() == [4, 4]


def test_library_terms_and_per_component_library_agree():
    c, u = np.array([[0.5, 2.0], [1.0, -1.0]]), np.array([0.25, 1.0])
    theta = P.library(c, u)
    assert theta.shape == (2, 2, len(P.LIBRARY_TERMS))
    np.testing.assert_allclose(theta[1, 0], [1.0, 1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(theta[0, 1], [1.0, 2.0, 0.25, 0.5, 4.0])
    np.testing.assert_allclose(P.library_terms(c[:, 1], u), theta[:, 1])


def test_noiseless_rate_network_recordings_follow_the_euler_step():
    bench, _, s = _sessions("lowrank_linear", N=10, sigma_process=0.0, sigma_obs=0.0)
    y, u = s.y, s.u
    step = y[:, :-1] + bench.dt * (-y[:, :-1] + np.einsum("kij,ktj->kti", s.W, np.tanh(y[:, :-1])) + u @ bench.B.T)
    np.testing.assert_allclose(y[:, 1:], step, atol=1e-12)


def test_bcm_network_synapses_follow_bcm_with_a_sliding_threshold():
    bench, _, s = _sessions("bcm_network", N=10, sigma_obs=0.0)
    state = bench.initial_state()
    for k in range(s.K):
        np.testing.assert_allclose(s.W[k], state[0])
        rates = np.tanh(s.y[k])
        W, theta = state
        expected = W + bench.eta * (rates * (rates - theta)).T @ rates / rates.shape[0] \
            - bench.decay * (W - bench.W_init)
        state = bench.plasticity(state, rates)
        np.testing.assert_allclose(state[0], expected)
        np.testing.assert_allclose(state[1], theta + ((rates**2).mean(0) - theta) / bench.tau_theta)
    np.testing.assert_allclose(s.state_end[0], state[0])
    # the change is not low rank: more than two singular values matter
    sv = np.linalg.svd(s.W[-1] - s.W[0], compute_uv=False)
    assert sv[2] > 1e-3 * sv[0]
    assert bench.true_rule() is None


def test_lorenz_connectivity_is_the_normalised_vector_field_and_rho_follows_the_law():
    bench, ub, s = _sessions("lorenz", T=40)
    rng = np.random.default_rng(1)
    pts = rng.standard_normal((20, 3))
    for k in (0, 3):
        rho = s.c[k, 0]
        field = bench.field(bench.MU + bench.SCALE * pts, rho) / bench.SCALE
        W, b = bench._normalised_model(rho)
        np.testing.assert_allclose(P.features(pts, "poly2") @ W.T + b - pts, field, atol=1e-8)
        np.testing.assert_allclose(s.W[k], W)
    np.testing.assert_allclose(s.c[1:, 0], s.c[:-1, 0] + bench.a * ub[:-1] - bench.b * (s.c[:-1, 0] - 28.0))
    # the change of W between sessions is rank one: rho times the x -> dy/dt entry
    dW = s.W[3] - s.W[0]
    assert np.linalg.matrix_rank(dW, tol=1e-8) == 1
    assert s.y.shape == (6, 41, 3) and bench.P == 9


def test_noiseless_lorenz_recordings_follow_the_vector_field():
    bench = P.make_benchmark("lorenz", T=50, sigma_process=0.0, sigma_obs=0.0)
    s = bench.simulate(30.0, np.zeros(2), np.random.default_rng(0))
    x = bench.MU + bench.SCALE * s.y  # physical units
    mid = 0.5 * (x[:, 1:] + x[:, :-1])
    deriv = (x[:, 1:] - x[:, :-1]) / bench.dt
    expected = bench.field(mid, s.c[:, :1]) + s.u @ bench.B_phys.T  # rho of each session (30, then 29.7)
    assert np.abs(deriv - expected).max() < 0.01 * np.abs(expected).max()


def test_schedules():
    assert P.stimulation_schedule("constant", 5, amplitude=0.5, start=2).tolist() == [0, 0, 0.5, 0.5, 0.5]
    assert P.stimulation_schedule("periodic", 6, period=2).tolist() == [1, 1, 0, 0, 1, 1]
    assert P.stimulation_schedule("burst", 5, period=2, start=1).tolist() == [0, 1, 1, 0, 0]
    np.testing.assert_allclose(P.stimulation_schedule("ramp", 5), [0, 0.25, 0.5, 0.75, 1.0])
    assert not P.stimulation_schedule("silent", 4).any()
    rnd = P.stimulation_schedule("random", 200, amplitude=2.0, period=3, rng=np.random.default_rng(0))
    assert set(np.unique(rnd)) <= {0.0, 0.5, 1.0, 1.5, 2.0}
    runs = np.diff(np.flatnonzero(np.diff(np.r_[np.nan, rnd, np.nan]) != 0))
    assert runs.max() <= 3 * 2  # a level is held 1..period sessions (two equal draws can abut)
    u = P.session_inputs(np.array([0.0, 0.3, 1.0]), 75, 2, 0.1, np.random.default_rng(0))
    assert u.shape == (3, 75, 3)
    np.testing.assert_allclose(u[..., 0].mean(axis=1), [0.0, 0.3, 1.0])


def test_generators_are_seeded():
    a = _sessions("lowrank_bcm", N=8)[2]
    b = _sessions("lowrank_bcm", N=8)[2]
    np.testing.assert_array_equal(a.y, b.y)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: P.make_benchmark("nope"), "benchmark"),
        (lambda: P.stimulation_schedule("zigzag", 4), "pattern"),
        (lambda: P.stimulation_schedule("constant", 0), "n_sessions"),
        (lambda: P.stimulation_schedule("constant", 4, amplitude=-1.0), "amplitude"),
        (lambda: P.make_benchmark("lowrank_linear", N=3), "N"),
        (lambda: P.make_benchmark("bcm_network", eta=float("nan")), "eta"),
        (lambda: P.features(np.zeros(3), "cubic"), "features"),
        (lambda: P.make_benchmark("lorenz", dt=1.0), "dt"),
        (lambda: P.make_benchmark("lowrank_linear", T=2.5), "T"),
    ],
)
def test_bad_input_names_the_field_in_the_lab_style(call, field):
    with pytest.raises(ConfigError, match=rf"^{field}=.* is not allowed; allowed: "):
        call()
