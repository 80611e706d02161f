"""STEER: factor alignment, the sparse rule regression, the fast model's pieces, run() in the ci profile, claims,
Config validation and the cached fits of the dashboard (live.py, on lab.cache)."""

import math

import numpy as np
import pytest
import torch
import xarray as xr

import lab
from lab.config import ConfigError
from lab.core.runtime import threads
from lab.datasets import plasticity as P
from lab.methods.steer import live
from lab.methods.steer import model as M
from lab.methods.steer import train as F
from lab.methods.steer.claims import CLAIMS, rule_error
from lab.methods.steer.config import Config
from lab.methods.steer.fitted import design_schedule


def _orthonormal(rng, n, r):
    return np.linalg.qr(rng.standard_normal((n, r)))[0]


# --------------------------------------------------------------------------------------------------------------------
# alignment and the rule regression
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_align_factors_recovers_a_known_permutation_sign_and_scale(seed):
    rng = np.random.default_rng(seed)
    m, n = _orthonormal(rng, 20, 3), _orthonormal(rng, 15, 3)
    perm = rng.permutation(3)
    sm, sn = rng.choice([-1.0, 1.0], 3) * rng.uniform(0.5, 2, 3), rng.choice([-1.0, 1.0], 3) * rng.uniform(0.5, 2, 3)
    m_hat, n_hat = (m * sm)[:, perm], (n * sn)[:, perm]  # learned column perm[j]... is true column j scaled
    c_true = rng.uniform(0.5, 2.0, (7, 3))
    c_hat = (c_true / (sm * sn))[:, perm]  # same connectivity: c m nᵀ unchanged
    W = np.einsum("kr,ir,jr->kij", c_true, m, n)
    np.testing.assert_allclose(np.einsum("kr,ir,jr->kij", c_hat, m_hat, n_hat), W)
    got_perm, gain, score = M.align_factors(m_hat, n_hat, m, n)
    np.testing.assert_allclose(c_hat[:, got_perm] * gain, c_true)
    np.testing.assert_allclose(score, 1.0)


def test_align_factors_handles_extra_learned_components():
    rng = np.random.default_rng(4)
    m, n = _orthonormal(rng, 12, 3), _orthonormal(rng, 12, 3)
    perm, gain, _ = M.align_factors(m[:, [2, 0, 1]], -n[:, [2, 0, 1]], m[:, :2], n[:, :2])
    assert perm.tolist() == [1, 2]
    np.testing.assert_allclose(gain, [-1.0, -1.0])


def _law_path(xi, c0, ub):
    c = np.empty((len(ub), len(c0)))
    x = np.asarray(c0, float)
    for k, u in enumerate(ub):
        c[k] = x
        x = x + np.einsum("rj,rj->r", xi, P.library(x, u))
    return c


@pytest.mark.parametrize("rule", ["linear", "bcm"])
@pytest.mark.parametrize("horizon", [1, 6])
def test_sparse_regression_recovers_a_known_rule_from_noiseless_data(rule, horizon):
    xi = P.LowRankPlasticNetwork.RULES[rule]
    ub = P.stimulation_schedule("random", 40, period=3, rng=np.random.default_rng(0))
    c = _law_path(xi, [0.8, 1.2], ub)
    got = M.fit_library(c, ub, horizon)
    np.testing.assert_array_equal(got != 0, xi != 0)  # exactly the true support
    np.testing.assert_allclose(got, xi, atol=1e-8)
    assert rule_error(got, xi) < 1e-6


def test_sparse_regression_works_at_lorenz_scale():
    bench = P.make_benchmark("lorenz")
    ub = P.stimulation_schedule("random", 30, period=3, rng=np.random.default_rng(1))
    rho = np.empty(30)
    r = 30.0
    for k, u in enumerate(ub):
        rho[k], r = r, bench.law(r, u)
    np.testing.assert_allclose(M.fit_library(rho[:, None], ub), bench.true_rule(), atol=1e-8)


def test_rule_error_counts_wrong_and_spurious_terms():
    true = np.array([[0.1, -0.2, 0.5, 0.0, 0.0]])
    assert rule_error(true, true) == 0.0
    assert math.isclose(rule_error(np.array([[0.1, -0.2, 0.6, 0.0, 0.0]]), true), 0.2)
    assert math.isclose(rule_error(np.array([[0.1, -0.2, 0.5, 0.0, 0.05]]), true), 0.5)  # 0.05 / min |true| 0.1


def test_torch_library_law_matches_numpy():
    xi = P.LowRankPlasticNetwork.RULES["linear"]
    c, u = np.array([[0.7, 1.3], [1.5, 0.4]]), np.array([0.0, 0.75])
    law = M.LibraryLaw(2, xi)
    with torch.no_grad():
        got = law(torch.tensor(c, dtype=torch.float32), torch.tensor(u, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got, c + np.einsum("rj,krj->kr", xi, P.library(c, u)), rtol=1e-6)
    np.testing.assert_allclose(M.library(torch.tensor(c), torch.tensor(u)).numpy(), P.library(c, u))
    assert M.equation_text(xi)[0] == "Δc1 = 0.12 - 0.2 c1 + 0.5 ū - 0.15 c1·ū"


# --------------------------------------------------------------------------------------------------------------------
# the fast model
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def noiseless():
    bench = P.make_benchmark("lowrank_linear", N=10, T=150, sigma_process=0.0, sigma_obs=0.0, n_probe=6)
    rng = np.random.default_rng(0)
    ub = P.stimulation_schedule("random", 12, period=3, rng=rng)
    s = bench.simulate(bench.initial_state(), ub, rng)
    return bench, s, F.prepare(s, "tanh", bench.dt)


def _true_model(bench, K):
    model = M.SteerModel(bench.N, bench.P, 2, 1 + bench.n_probe, K, feature="tanh", dt=bench.dt, shared=False)
    with torch.no_grad():
        model.m.copy_(torch.tensor(bench.m))
        model.n.copy_(torch.tensor(bench.n))
        model.B.copy_(torch.tensor(bench.B))
    return model


def test_coefficients_of_new_sessions_are_exact_least_squares(noiseless):
    bench, s, p = noiseless
    c = _true_model(bench, s.K).fit_coefficients(p.z, p.phi, p.u).numpy()
    np.testing.assert_allclose(c, s.c, atol=1e-4)


def test_window_predictions_with_the_true_model_reproduce_noiseless_recordings(noiseless):
    bench, s, _ = noiseless
    pred = M.simulate_windows(s.W, bench.B, np.zeros(bench.N), s.y, s.u, bench.dt, "tanh", 10)
    np.testing.assert_allclose(pred, s.y, atol=1e-10)
    assert M.r2(pred, s.y) == pytest.approx(1.0)


def test_joint_fit_recovers_factors_and_coefficients_on_noiseless_data(noiseless):
    bench, s, p = noiseless
    model, law = F.train_steer(p, R=2, feature="tanh", dt=bench.dt, shared=False, iterations=60, lambda_cons=0.0,
                               lambda_smooth=0.0, lambda_orth=1.0, rule_horizon=1, als_iterations=10)
    m, n = model.m.detach().double().numpy(), model.n.detach().double().numpy()
    np.testing.assert_allclose(np.linalg.norm(m, axis=0), 1.0, atol=1e-5)
    perm, gain, score = M.align_factors(m, n, bench.m, bench.n)
    assert score.min() > 0.999
    c = model.c.detach().double().numpy()[:, perm] * gain
    np.testing.assert_allclose(c, s.c, atol=0.02)
    assert law.xi.shape == (2, len(P.LIBRARY_TERMS))


def test_design_with_the_true_law_reaches_a_reachable_target():
    xi = P.LowRankPlasticNetwork.RULES["linear"]
    law = M.LibraryLaw(2, xi)
    hidden = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.0])
    start = np.array([1.0, 1.0])
    target = _law_path(xi, start, np.r_[hidden, 0.0])[-1]
    designed = design_schedule(law, start, target, 6, 1.0, rng=np.random.default_rng(0))
    reached = _law_path(xi, start, np.r_[designed, 0.0])[-1]
    assert designed.shape == (6,) and designed.min() >= 0 and designed.max() <= 1
    assert np.linalg.norm(reached - target) < 0.01
    constant = min(np.linalg.norm(_law_path(xi, start, np.r_[np.full(6, v), 0.0])[-1] - target)
                   for v in (0, 0.25, 0.5, 0.75, 1))
    assert constant > 5 * np.linalg.norm(reached - target)


# --------------------------------------------------------------------------------------------------------------------
# run() in the ci profile, the claims, Config
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ci_run(ci_result):
    return ci_result("steer")


def test_run_ci_gives_the_documented_dataset(ci_run, tmp_path):
    ds = ci_run.data
    cfg = ci_run.config
    assert list(ds.benchmark.values) == list(cfg.benchmarks)
    assert ds.sizes["session"] == cfg.K_train and ds.sizes["test_session"] == cfg.K_test
    assert ds.sizes["schedule"] == len(cfg.test_patterns) and ds.sizes["target"] == cfg.n_targets
    assert list(ds.model.values) == ["steer", "steer_mlp", "frozen", "free", "blackbox"]
    assert list(ds.term.values) == list(P.LIBRARY_TERMS)
    assert ds.c_pred.dims == ("benchmark", "model", "schedule", "test_session", "component")
    assert ds.design_distance.dims == ("benchmark", "target", "protocol")
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
    assert np.isfinite(ds.conn_error).all() and np.isfinite(ds.r2_recurrent).all()
    assert np.isfinite(ds.design_distance).all() and np.isfinite(ds.design_distance_blind).all()
    assert np.isfinite(ds.conn_error_two_stage).all() and np.isfinite(ds.rollout_r_wrong_schedule).all()
    # the GRU gets STEER's optimiser and budget: L-BFGS for cfg.iterations iterations (a few evaluations each)
    evals = ds.fit_evaluations.sel(fit=["steer", "blackbox"]).values
    assert (evals >= 1).all() and (evals <= 2 * cfg.iterations).all()
    lorenz = ds.sel(benchmark="lorenz")  # one coefficient, padded with NaN
    assert np.isfinite(lorenz.c_true_train.sel(component=1)).all()
    assert np.isnan(lorenz.c_true_train.sel(component=2)).all()
    assert "Δrho" in ds.attrs["equation_true_lorenz"]
    path = lab.save(ds, tmp_path / "steer.nc")
    again = lab.check(path)
    assert [r.measured for r in again] == pytest.approx([r.measured for r in ci_run.claims], nan_ok=True)


def test_claims_evaluate_on_the_ci_run(ci_run):
    results = list(ci_run.claims)
    assert [r.name for r in results] == [c.name for c in CLAIMS]
    for r in results:
        assert math.isfinite(r.measured), (r.name, r.detail)
        assert r.detail and r.threshold_source
        if r.verdict != "reported":
            assert r.control_measured is not None and math.isfinite(r.control_measured), (r.name, r.control_detail)


def test_claims_can_fail(ci_run):
    ds = ci_run.data.copy(deep=True)
    ds["conn_error"].loc[{"model": "steer"}] = 1e6
    ds["design_distance"].loc[{"protocol": "designed"}] = 1e6
    ds["r2_recurrent_schedule"][:] = 0.5
    ds["xi_inferred"][:] = ds["xi_true"].values * 2
    ds["rollout_r"][:] = 0.0
    verdicts = {r.name: r.verdict for r in lab.check(ds, "steer")}
    for name in ("joint_vs_two_stage", "heldout_r2_off_assumption", "off_assumption_bcm"):
        assert verdicts.pop(name) == "reported"
    assert set(verdicts.values()) == {"fails"}, verdicts


def test_extra_seeds_repeat_the_run_s_own_procedure(ci_run):
    """The per-seed errors of off_assumption_bcm: at the run's seed they are the run's own connectivity errors; the
    report row is the mean over seeds of the best baseline's error over STEER's."""
    from lab.methods.steer.experiment import _seed_errors

    cfg = ci_run.config
    got, fit = _seed_errors("bcm_network", cfg)
    np.testing.assert_allclose(got, ci_run.data.conn_error.sel(benchmark="bcm_network").values, rtol=1e-6)
    np.testing.assert_allclose(fit, ci_run.data.train_fit_share.sel(benchmark="bcm_network").values, rtol=1e-6)
    seeds = ci_run.data.conn_error_seeds.sel(benchmark="bcm_network")
    assert seeds.sizes["run_seed"] == cfg.seeds and np.isfinite(seeds).all()
    result = {r.name: r for r in ci_run.claims}["off_assumption_bcm"]
    assert result.verdict == "reported" and result.per_seed is not None and len(result.per_seed) == cfg.seeds
    models = list(seeds.model.values)
    err = seeds.transpose("run_seed", "model").values
    steer = err[:, models.index("steer")]
    best = np.min([err[:, models.index(m)] for m in ("frozen", "free", "blackbox")], axis=0)
    np.testing.assert_allclose(result.per_seed, best / steer, rtol=1e-9)
    assert result.measured == pytest.approx(float(np.mean(best / steer)))
    assert f"of {len(best)} seeds" in result.detail and "would take about" in result.detail
    assert np.isfinite(ci_run.data.train_fit_share_seeds.sel(benchmark="bcm_network")).all()


def _in_scope(ds):
    """The ci run with every true model's rollout passing (every benchmark within the assumptions in scope) and
    competent no-plasticity models."""
    ds = ds.copy(deep=True)
    ds["r2_oracle"][:], ds["r2_oracle_recurrent"][:], ds["r2_oracle_recurrent_schedule"][:] = 1.0, 1.0, 1.0
    ds["r2_recurrent_fitted"][:], ds["train_fit_share"][:] = 0.99, 0.99
    return ds


def _heldout(ds):
    return {r.name: r for r in lab.check(ds, "steer")}["heldout_r2"]


def test_a_claim_whose_control_passes_does_not_discriminate(ci_run):
    """The held-out claim with a no-plasticity model as good as STEER: its verdict says so."""
    ds = _in_scope(ci_run.data)
    ds["r2_recurrent_schedule"][:] = 0.99
    assert _heldout(ds).verdict == "does not discriminate"


def test_the_heldout_control_is_the_better_no_plasticity_model(ci_run):
    """Each no-plasticity model is measured as STEER (its worst schedule): frozen at the first session and carried
    forward from the last, each failing on some schedule, both fail and the claim holds; once the carried-forward c
    passes on every schedule, the claim does not discriminate."""
    ds = _in_scope(ci_run.data)
    ds["r2_recurrent_schedule"].loc[{"model": "steer"}] = 0.97
    ds["r2_recurrent_schedule"].loc[{"model": "frozen", "schedule": "periodic"}] = 0.95
    ds["r2_recurrent_schedule"].loc[{"model": "frozen", "schedule": "ramp"}] = 0.5
    ds["r2_recurrent_schedule"].loc[{"model": "free", "schedule": "periodic"}] = 0.6
    ds["r2_recurrent_schedule"].loc[{"model": "free", "schedule": "ramp"}] = 0.93
    r = _heldout(ds)
    assert r.measured == pytest.approx(0.97) and r.control_measured == pytest.approx(0.6) and r.verdict == "holds"
    assert "frozen worst 0.500 (ramp)" in r.control_detail and "free worst 0.600 (periodic)" in r.control_detail
    ds["r2_recurrent_schedule"].loc[{"model": "free"}] = 0.93
    r = _heldout(ds)
    assert r.control_measured == pytest.approx(0.93) and r.verdict == "does not discriminate"


def test_the_heldout_control_must_fail_on_every_benchmark(ci_run):
    """A no-plasticity model that passes on one benchmark in scope, failing on the others, is a passing control."""
    ds = _in_scope(ci_run.data)
    ds["r2_recurrent_schedule"].loc[{"model": "steer"}] = 0.97
    ds["r2_recurrent_schedule"].loc[{"model": ["frozen", "free"]}] = 0.5
    assert _heldout(ds).verdict == "holds"
    ds["r2_recurrent_schedule"].loc[{"model": "free", "benchmark": "lowrank_linear"}] = 0.95
    r = _heldout(ds)
    assert r.control_measured == pytest.approx(0.95) and r.verdict == "does not discriminate"
    assert "best benchmark: lowrank_linear" in r.control_detail


def test_the_heldout_claim_takes_the_worst_schedule_within_the_assumptions(ci_run):
    """One unseen schedule below the bar fails the claim; the full-rank bcm_network (off the assumptions) never
    enters it and has its own report row, against the true model's value."""
    ds = _in_scope(ci_run.data)
    ds["r2_recurrent_schedule"].loc[{"model": "steer"}] = 0.97
    ds["r2_recurrent_schedule"].loc[{"model": ["frozen", "free"]}] = 0.5
    ds["r2_recurrent_schedule"].loc[{"model": "steer", "benchmark": "bcm_network"}] = -3.0
    ds["r2_oracle_recurrent_schedule"].loc[{"benchmark": "bcm_network"}] = 0.999
    by_name = {r.name: r for r in lab.check(ds, "steer")}
    held, off = by_name["heldout_r2"], by_name["heldout_r2_off_assumption"]
    assert held.verdict == "holds" and "bcm_network (off the low-rank" in held.detail
    assert off.verdict == "reported" and off.measured == pytest.approx(-3.0)
    assert "true model worst 0.999" in off.detail
    ds["r2_recurrent_schedule"].loc[{"model": "steer", "benchmark": "lowrank_linear", "schedule": "ramp"}] = 0.8
    r = _heldout(ds)
    assert r.measured == pytest.approx(0.8) and r.verdict == "fails"


def test_heldout_controls_that_cannot_reproduce_their_own_session_make_no_proof(ci_run):
    """The no-plasticity models must pass the claim's own measure on the training session their c was fitted on."""
    ds = _in_scope(ci_run.data)
    ds["r2_recurrent_schedule"].loc[{"model": "steer"}] = 0.97
    ds["r2_recurrent_schedule"].loc[{"model": ["frozen", "free"]}] = 0.5
    ds["r2_recurrent_fitted"].loc[{"model": "free", "benchmark": "lowrank_linear"}] = 0.6
    r = _heldout(ds)
    assert r.verdict == "control not competent" and r.competence[1].measured == pytest.approx(0.6)


def test_per_schedule_r2_pools_to_the_run_s_r2(ci_run):
    """Pooled R² of the recurrent part is 1 - sum SSE / sum SSE(W = 0): a weighted mean of the per-schedule values,
    so it lies between their extremes, for every model and for the true model."""
    ds = ci_run.data
    for pooled, per in ((ds.r2_recurrent, ds.r2_recurrent_schedule),
                        (ds.r2_oracle_recurrent, ds.r2_oracle_recurrent_schedule)):
        assert np.isfinite(per).all()
        assert (pooled >= per.min("schedule") - 1e-9).all() and (pooled <= per.max("schedule") + 1e-9).all()


def test_the_rollout_competence_is_the_run_s_and_zero_without_connectivity(ci_run):
    """fitted_rollout: the run's values from the same fit; a model with no connectivity (W = 0) scores exactly 0."""
    from lab.methods.steer.fitted import MODELS, fitted_rollout
    from lab.methods.steer.train import fit_benchmark

    cfg = ci_run.config
    with threads(cfg.threads):
        fitted = fit_benchmark("lowrank_linear", cfg)
    got = fitted_rollout(fitted)
    np.testing.assert_allclose(got, ci_run.data.r2_recurrent_fitted.sel(benchmark="lowrank_linear"), rtol=1e-6)
    assert (got[[MODELS.index("frozen"), MODELS.index("free")]] > 0.5).all()
    fitted.model.c.data.zero_()
    fitted.model.W0.data.zero_()
    zero = fitted_rollout(fitted)
    np.testing.assert_allclose(zero[[MODELS.index(m) for m in ("steer", "frozen", "free")]], 0.0, atol=1e-12)


def test_baselines_that_never_learned_make_no_proof(ci_run):
    """The comparison with the baselines holds only while each baseline learned its training sessions."""
    ds = ci_run.data.copy(deep=True)
    ds["conn_error"].loc[{"model": "steer"}] = 1e-9  # STEER beats every baseline by far
    ds["train_fit_share"][:] = 0.9
    r = {r.name: r for r in lab.check(ds, "steer")}["beats_baselines"]
    assert r.verdict == "holds" and r.competence[0].measured == pytest.approx(0.9)
    ds["train_fit_share"].loc[{"model": "blackbox"}] = 0.0  # a GRU no better than its static start
    r = {r.name: r for r in lab.check(ds, "steer")}["beats_baselines"]
    assert r.verdict == "control not competent" and r.competence[0].measured == pytest.approx(0.0)
    assert "blackbox" in r.competence[0].detail


def test_the_fit_share_is_the_run_s_and_zero_for_a_static_connectivity(ci_run):
    """train_fit_share: the run's value from the same fit; a model whose every session has the mean coefficients
    (one static connectivity, where the GRU starts) scores 0."""
    from lab.core.runtime import threads
    from lab.methods.steer.experiment import training_fit
    from lab.methods.steer.train import fit_benchmark

    cfg = ci_run.config
    with threads(cfg.threads):  # the run's threads: a sum split over other threads rounds differently
        fitted = fit_benchmark("lowrank_linear", cfg)
    share = dict(zip(["steer", "steer_mlp", "frozen", "free", "blackbox"], training_fit(fitted, cfg)))
    np.testing.assert_allclose(share["blackbox"], ci_run.data.train_fit_share.sel(
        benchmark="lowrank_linear", model="blackbox"), rtol=1e-6)
    assert 0 < share["blackbox"] <= 1.2 and 0 < share["frozen"] <= 1.2
    fitted.model.c.data[:] = torch.as_tensor(fitted.c_model.mean(0), dtype=torch.float32)  # every session static
    assert training_fit(fitted, cfg)[0] == pytest.approx(0.0, abs=1e-4)


def test_the_heldout_measure_can_tell_plasticity_from_none():
    """A free rollout of the recurrent part separates the true connectivity from the first session's on the true
    system (the oracle of the claim's scope and its control), where the old 10-step windows could not."""
    bench = P.make_benchmark("lowrank_linear", N=12, T=300, seed=1)
    rng = np.random.default_rng(0)
    s = bench.simulate(bench.initial_state(), P.stimulation_schedule("constant", 10, amplitude=1.0), rng)
    args = (bench.B, np.zeros(bench.N), s.y, s.u, bench.dt, "tanh")
    frozen = np.repeat(s.W[:1], s.K, axis=0)
    sse = lambda W: float(((M.free_rollout(W, *args) - s.y) ** 2).sum())  # noqa: E731
    reference = sse(np.zeros_like(s.W))
    true_skill, frozen_skill = 1 - sse(s.W) / reference, 1 - sse(frozen) / reference
    assert true_skill > 0.95 and frozen_skill < true_skill - 0.1
    windows = M.r2(M.simulate_windows(frozen, *args[:-1], "tanh", 10), s.y)
    assert windows > 0.95  # the old measure: the no-plasticity model passes


def test_claims_without_benchmarks_in_scope_fail_with_a_reason(ci_run):
    ds = ci_run.data.sel(benchmark=["bcm_network"])
    by_name = {r.name: r for r in lab.check(ds, "steer")}
    assert not by_name["rule_recovered"].passed and "no benchmark" in by_name["rule_recovered"].detail


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("benchmarks", ("lowrank_linear", "cubic")),
        ("benchmarks", ("lorenz", "lorenz")),
        ("N", 3),
        ("rank", 0),
        ("T", 5),
        ("u_max", 0.0),
        ("test_patterns", ("random",)),
        ("lambda_cons", -1.0),
        ("horizon", 0),
        ("rule_horizon", 1000),
        ("sigma_process", float("nan")),
    ],
)
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ConfigError, match=f"{field}="):
        Config.from_profile("quick", **{field: value})


def test_profiles_are_valid_and_ci_is_small():
    for profile in ("ci", "quick", "full"):
        Config.from_profile(profile)
    ci = Config.from_profile("ci")
    assert ci.T * ci.K_train < Config().T * Config().K_train / 20


# --------------------------------------------------------------------------------------------------------------------
# cached fits (the dashboard)
# --------------------------------------------------------------------------------------------------------------------
def test_explore_saves_the_fit_atomically_and_reloads_it(tmp_path):
    live.fitted_model.cache_clear()
    live.explore.cache_clear()
    ex = live.explore("lowrank_linear", pattern="ramp", profile="ci", session=2, root=str(tmp_path))
    saved = list((tmp_path / "steer").glob("lowrank_linear-*.pt"))
    assert len(saved) == 1 and not list((tmp_path / "steer").glob(".*tmp"))
    torch.load(saved[0], weights_only=True)  # plain tensors and containers only
    assert live.fitted_model.cached("lowrank_linear", Config.from_profile("ci"), str(tmp_path))
    live.fitted_model.cache_clear()
    live.explore.cache_clear()
    again = live.explore("lowrank_linear", pattern="ramp", profile="ci", session=2, root=str(tmp_path))
    xr.testing.assert_allclose(ex, again)
    assert ex.attrs["session_shown"] == 2 and ex.W_true.shape == ex.W_model.shape
    assert ex.sizes["session"] == Config.from_profile("ci").K_train + Config.from_profile("ci").K_test
    saved[0].write_bytes(b"not a torch file")  # a corrupt file is refitted, not trusted
    live.fitted_model.cache_clear()
    live.explore.cache_clear()
    with pytest.warns(RuntimeWarning, match="rejected"):
        third = live.explore("lowrank_linear", pattern="ramp", profile="ci", session=2, root=str(tmp_path))
    xr.testing.assert_allclose(third, ex)


def test_the_cached_fit_is_the_fit_of_run():
    """The dashboard's fit (cached_fit) and run()'s (fit_benchmark) are one computation: same coefficients."""
    cfg = Config.from_profile("ci")
    cached = F.cached_fit("lorenz", cfg, use_cache=False)
    with threads(cfg.threads):  # the cached fit runs with the config's threads; float sums depend on them
        direct = F.fit_benchmark("lorenz", cfg, baselines=False)
    np.testing.assert_array_equal(cached.c_model, direct.c_model)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"benchmark": "nope"}, "benchmark"), ({"pattern": "zigzag"}, "pattern"), ({"session": 10_000}, "session")],
)
def test_explore_bad_input_names_the_field(kwargs, field, tmp_path):
    kwargs = {"benchmark": "lowrank_linear", "profile": "ci", "root": str(tmp_path)} | kwargs
    with pytest.raises(ConfigError, match=f"^{field}=.* is not allowed; allowed: "):
        live.explore(**kwargs)
