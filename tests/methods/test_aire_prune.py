"""AIRE-Prune: scores against brute-force impulse responses and frequency sweeps, normalisation, selection, state
removal, refused ratios, the ci run and its claims."""

import math

import numpy as np
import pytest
import torch

from lab.config import ConfigError
from lab.core.models import SequenceClassifier, state_sizes
from lab.core.ssm import LRU, S5
from lab.methods.aire_prune import model as P
from lab.methods.aire_prune.config import Config


def _layer(kind, seed=0, d_model=5, d_state=9):
    torch.manual_seed(seed)
    layer = (LRU(d_model, d_state, r_min=0.6, r_max=0.97) if kind == "lru" else S5(d_model, d_state)).double()
    return layer


def _model(kind="lru", n_layers=3, d_state=10, seed=0):
    torch.manual_seed(seed)
    return SequenceClassifier(1, 4, kind=kind, d_model=6, n_layers=n_layers, d_state=d_state).double().eval()


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_aire_energy_is_the_infinite_horizon_impulse_response_energy(kind):
    """E_i equals Σ_k ||C_i λ_i^k B̄_i||_F² summed over a long horizon (brute force, per state)."""
    layer = _layer(kind)
    lam, Bbar, C = layer.system()
    horizon = int(np.ceil(np.log(1e-13) / np.log(np.abs(lam).max()))) + 10
    brute = np.zeros(len(lam))
    for i in range(len(lam)):
        block = np.outer(C[:, i], Bbar[i])  # (H_out, H_in): the state's response at lag 0
        powers = lam[i] ** np.arange(horizon)
        brute[i] = np.sum(np.abs(block) ** 2) * np.sum(np.abs(powers) ** 2)
    np.testing.assert_allclose(P.impulse_energy(lam, Bbar, C), brute, rtol=1e-10)


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_aire_energy_of_a_state_is_the_energy_of_its_own_kernel(kind):
    """Brute force through the layer itself: a copy keeping only state i has the complex kernel C_i λ_i^k B̄_i,
    whose energy over many steps is E_i."""
    layer = _layer(kind, seed=1)
    lam, Bbar, C = layer.system()
    E = P.impulse_energy(lam, Bbar, C)
    for i in (0, 4, 8):
        k = np.arange(int(np.log(1e-14) / np.log(abs(lam[i]))) + 10)
        kern = C[:, i][None, :, None] * (lam[i] ** k)[:, None, None] * Bbar[i][None, None, :]
        assert np.sum(np.abs(kern) ** 2) == pytest.approx(E[i], rel=1e-9)


def test_last_score_is_the_squared_peak_gain_over_frequency():
    layer = _layer("lru", seed=2)
    lam, Bbar, C = layer.system()
    w = np.linspace(-np.pi, np.pi, 200_001)
    gain = np.sum(np.abs(C) ** 2, 0) * np.sum(np.abs(Bbar) ** 2, 1)
    peak = np.array([np.max(gain[i] / np.abs(np.exp(1j * w) - lam[i]) ** 2) for i in range(len(lam))])
    np.testing.assert_allclose(P.last_score(lam, Bbar, C), peak, rtol=1e-6)
    # LAST weighs slow states more than AIRE does: the ratio is (1 + |λ|) / (1 - |λ|)
    ratio = P.last_score(lam, Bbar, C) / P.impulse_energy(lam, Bbar, C)
    np.testing.assert_allclose(ratio, (1 + np.abs(lam)) / (1 - np.abs(lam)), rtol=1e-10)


def test_layer_normalisation_by_tail_sums():
    s = np.array([3.0, 1.0, 6.0, 2.0])
    # ascending 1, 2, 3, 6 -> 1/12, 2/11, 3/9, 6/6
    expected = np.array([3 / 9, 1 / 12, 1.0, 2 / 11])
    np.testing.assert_allclose(P.layer_normalise(s), expected)
    np.testing.assert_allclose(P.layer_normalise(1e6 * s), expected)  # scale-free across layers
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.exponential(size=rng.integers(1, 30))
        n = P.layer_normalise(x)
        assert n.max() == pytest.approx(1.0) and np.argmax(n) == np.argmax(x)
        assert np.all(np.argsort(n, kind="stable") == np.argsort(x, kind="stable"))


def test_global_selection_keeps_each_layers_best_and_the_global_top():
    scores = [np.array([0.9, 0.1, 0.5]), np.array([0.2, 0.3]), np.array([0.05, 0.8, 0.7, 0.6])]
    keep = P.select_global(scores, 3)
    assert [k.tolist() for k in keep] == [[0], [1], [1]]
    keep = P.select_global(scores, 6)
    assert [k.tolist() for k in keep] == [[0, 2], [1], [1, 2, 3]]
    with pytest.raises(ValueError, match="n_keep"):
        P.select_global(scores, 2)


def test_uniform_selection_prunes_every_layer_by_the_same_share():
    scores = [np.arange(10.0), np.arange(20.0)[::-1]]
    keep = P.select_uniform(scores, 0.5)
    assert [len(k) for k in keep] == [5, 10]
    assert keep[0].tolist() == [5, 6, 7, 8, 9] and keep[1].tolist() == list(range(10))


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, math.nan, math.inf, "0.5", None, True])
def test_bad_pruning_ratios_are_refused_with_a_clear_error(bad):
    model = _model()
    with pytest.raises(ValueError, match=r"ratio=.*(allowed|expected)"):
        P.prune_by(model, "aire", bad)


def test_unknown_score_is_refused():
    with pytest.raises(ValueError, match="allowed: aire, last"):
        P.plan(_model(), "taylor", 0.5)


@pytest.mark.parametrize("kind", ["lru", "s5"])
@pytest.mark.parametrize("score", P.SCORES)
def test_pruning_all_but_the_top_state_per_layer_still_runs(kind, score):
    model = _model(kind)
    pruned = P.prune_by(model, score, 0.99, np.random.default_rng(0))
    assert state_sizes(pruned) == [1, 1, 1] and state_sizes(model) == [10, 10, 10]
    out = pruned(torch.randn(2, 12, 1, dtype=torch.float64))
    assert out.shape == (2, 4) and torch.isfinite(out).all()
    if score in ("aire", "last"):  # the one kept state is the layer's largest
        raw = P.state_scores(model, score)
        for full, layer, s in zip(P.diagonal_layers(model), P.diagonal_layers(pruned), raw):
            assert layer.system()[0][0] == pytest.approx(full.system()[0][np.argmax(s)])


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_pruning_removes_each_states_whole_contribution(kind):
    """The pruned layer's kernel is the full kernel minus the removed states' Re(C_i λ_i^k B̄_i) (for S5: the
    conjugate pair through 2 Re)."""
    model = _model(kind, n_layers=2)
    keep = P.plan(model, "aire", 0.5)
    pruned = P.prune(model, keep)
    for full_layer, layer, idx in zip(P.diagonal_layers(model), P.diagonal_layers(pruned), keep):
        lam, Bbar, C = full_layer.system()
        removed = np.setdiff1d(np.arange(len(lam)), idx)
        k = np.arange(15)[:, None]
        gone = np.einsum("on,kn,ni->koi", C[:, removed], lam[removed][None] ** k, Bbar[removed]).real
        np.testing.assert_allclose(layer.impulse_response(15), full_layer.impulse_response(15) - gone,
                                   atol=1e-12)


def test_kept_counts_follow_the_ratio():
    assert P.kept_total([10, 10, 10], 0.0) == 30
    assert P.kept_total([10, 10, 10], 0.5) == 15
    assert P.kept_total([10, 10, 10], 0.99) == 3
    model = _model()
    for ratio in (0.2, 0.5, 0.8):
        for score in ("aire", "last", "magnitude", "random"):
            keep = P.plan(model, score, ratio, np.random.default_rng(1))
            assert sum(len(k) for k in keep) == P.kept_total([10, 10, 10], ratio)


def test_multiply_adds_shrink_with_the_states():
    model = _model(n_layers=2)
    full_ssm, full_all = P.macs_per_token(model)
    assert full_ssm == 2 * 10 * (4 * 6 + 4)
    ssm, total = P.macs_per_token(P.prune_by(model, "aire", 0.5))
    assert ssm == full_ssm // 2 and full_all - total == full_ssm - ssm


def test_config_refuses_bad_values():
    with pytest.raises(ConfigError, match="headline_ratio=0.5 is not allowed; allowed: one of ratios"):
        Config(ratios=(0.0, 0.3), headline_ratio=0.5)
    with pytest.raises(ConfigError, match=r"ratios=\(0.0, 1.0\) is not allowed; allowed: each value .*\[0, 1\)"):
        Config(ratios=(0.0, 1.0), headline_ratio=0.0)
    with pytest.raises(ConfigError, match="ratios=.*strictly increasing"):
        Config(ratios=(0.5, 0.0))
    with pytest.raises(ConfigError, match="ratios=.*starting at 0.0"):
        Config(ratios=(0.1, 0.5))
    with pytest.raises(ConfigError, match="kinds=.*one of 'lru', 's5'"):
        Config(kinds=("gru",))
    with pytest.raises(ConfigError, match="scores=.*'aire'"):
        Config(scores=("last",))
    with pytest.raises(ConfigError, match="dataset='cifar' is not allowed; allowed: one of 'digits', 'mnist1d'"):
        Config(dataset="cifar")


def test_trained_model_is_cached_with_its_curve(monkeypatch, tmp_path):
    from lab.methods.aire_prune.train import trained_model

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    cfg = Config.from_profile("ci", kinds=("lru",))
    first = trained_model(cfg, "lru", 0, progress=False)
    assert not first.loaded and list((tmp_path / "aire_prune").glob("digits-lru-*.pt"))
    assert len(first.curves["loss"]) == first.meta["steps"] > 0 and first.meta["train_time_s"] > 0
    again = trained_model(cfg, "lru", 0, progress=False)
    assert again.loaded
    for (name, a), b in zip(first.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(a, b), name
    other = trained_model(cfg, "lru", 1, progress=False)  # another seed is another model
    assert not other.loaded


def test_ci_run_has_the_documented_dims(ci_result):
    from lab.methods.aire_prune.claims import CLAIMS

    res = ci_result("aire_prune")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert dict(ds.sizes) == {"kind": 2, "seed": 2, "score": 5, "ratio": 3, "draw": 2, "layer": 2,
                              "state": cfg.d_state}
    assert ds.accuracy.dims == ("kind", "seed", "score", "ratio")
    assert ds.states_kept.dims == ("kind", "seed", "score", "ratio", "layer")
    assert ds.random_accuracy.dims == ("kind", "seed", "ratio", "draw")
    # at ratio 0 every score keeps the unpruned model
    np.testing.assert_allclose(ds.accuracy.sel(ratio=0.0), ds.accuracy_full.broadcast_like(
        ds.accuracy.sel(ratio=0.0)))
    np.testing.assert_allclose(ds.random_accuracy.mean("draw"), ds.accuracy.sel(score="random"))
    assert ds.random_control_accuracy.dims == ("kind", "seed", "ratio")
    np.testing.assert_allclose(ds.random_control_accuracy.sel(ratio=0.0), ds.accuracy_full)
    # the LRU's γ² / (1 - |λ|²) starts at 1 and one epoch leaves it there; S5 has no γ
    assert np.isnan(ds.gamma_norm.sel(kind="s5")).all()
    np.testing.assert_allclose(ds.gamma_norm.sel(kind="lru"), 1.0, atol=0.1)
    assert sum(r.headline for r in res.claims) == 1 and res.claims["aire_prunes_half_for_under_a_point"].headline
    for r in res.claims:  # the ci models (one epoch on 256 sequences) have not learned digits
        assert r.verdict == "reported" or (r.competent is False and not r.passed)
    assert np.isfinite(res.claims["aire_on_lru"].measured)
    assert int(ds.states_kept.sel(ratio=0.95).min()) >= 1
    assert [r.name for r in res.claims] == [c.name for c in CLAIMS]


def test_each_kind_trains_and_reports_at_its_own_state_size(monkeypatch, tmp_path):
    """The LRU at lru_d_state, S5 at d_state: the cache keys, the models, the padded layer views (NaN past the LRU's
    states) and the pruned share (of each kind's own states) follow."""
    import lab
    from lab.methods.aire_prune.train import training_key

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    cfg = Config.from_profile("ci", lru_d_state=8, ratios=(0.0, 0.5), random_draws=1, n_seeds=2)
    assert training_key(cfg, "lru", 0)["d_state"] == 8 and training_key(cfg, "s5", 0)["d_state"] == 16
    assert cfg.run_budget().work < Config.from_profile("ci", n_seeds=2).run_budget().work
    ds = lab.run("aire_prune", "ci", config=cfg, progress=False).data
    assert ds.sizes["state"] == 16 and ds.attrs["lru_d_state"] == 8
    lru, s5 = ds.energy.sel(kind="lru"), ds.energy.sel(kind="s5")
    assert np.isfinite(lru.isel(state=slice(0, 8))).all() and np.isnan(lru.isel(state=slice(8, None))).all()
    assert np.isfinite(s5).all() and int(ds.kept_headline.sel(kind="lru").isel(state=slice(8, None)).sum()) == 0
    assert ds.states_kept.sel(kind="lru", ratio=0.0).sum("layer").values.tolist() == [[8 * cfg.n_layers] * 5] * 2
    np.testing.assert_allclose(ds.pruned_fraction.sel(ratio=0.5), 0.5)
    kept = ds.kept_headline.sel(kind="lru").sum(("layer", "state"))
    np.testing.assert_array_equal(kept, 4 * cfg.n_layers)


def test_lru_normalisation_cancels_aires_denominator():
    """The LRU's reason: with γ = sqrt(1 - |λ|²) (its initialisation), AIRE's energy is ||C_i||² ||B_i||² of the raw
    B, whatever |λ_i|; S5's energy keeps its denominator."""
    layer = _layer("lru", seed=3)
    lam, Bbar, C = layer.system()
    raw_B = (layer.B_re + 1j * layer.B_im).detach().numpy()
    np.testing.assert_allclose(P.impulse_energy(lam, Bbar, C),
                               np.sum(np.abs(C) ** 2, 0) * np.sum(np.abs(raw_B) ** 2, 1), rtol=1e-6)  # float32 init
    lam, Bbar, C = _layer("s5", seed=3).system()
    gain = np.sum(np.abs(C) ** 2, 0) * np.sum(np.abs(Bbar) ** 2, 1)
    assert np.ptp(np.log(P.impulse_energy(lam, Bbar, C) / gain)) > 0.1


def test_safe_ratio_and_lower_bound():
    import xarray as xr

    from lab.methods.aire_prune.claims import lower_bound, safe_ratio

    lost = xr.DataArray([[0.0, 0.5, 1.5, 0.2], [0.0, 0.1, 0.9, 3.0]], dims=("seed", "ratio"),
                        coords={"ratio": [0.0, 0.3, 0.5, 0.7]})
    assert safe_ratio(lost).values.tolist() == [0.3, 0.5]  # seed 0 stops at its first loss of 1 pt (0.7 is luck)
    # mean 2, s.d. 1, three seeds: 2 - t(0.95, 2) / sqrt(3) with t = 2.919986
    assert lower_bound([1.0, 2.0, 3.0]) == pytest.approx(2 - 2.919986 / np.sqrt(3), rel=1e-6)
    assert lower_bound([5.0, 5.0]) == 5.0 and np.isnan(lower_bound([5.0]))


# --- the claims on synthetic Datasets ------------------------------------------------------------------------------
def _ds(full=(98.0, 97.0), aire=(97.5, 96.5), random=(40.0, 40.0), magnitude=(60.0, 60.0), uniform=(96.0, 96.0),
        last=(90.0, 90.0), seeds=3, draws=(38.0, 42.0), control=None, dataset="digits"):
    """A run's Dataset with given accuracies per kind (lru, s5) at every ratio >= the headline, constant over seeds
    but for a small seed-to-seed wiggle; ratio 0 is the unpruned model. ``control``: the independent random draw
    per kind (default: the random baseline's mean). Two layers of four states: the LRU's energy flat, S5's not."""
    import xarray as xr

    scores = ["aire", "last", "magnitude", "random", "aire_uniform"]
    ratios = [0.0, 0.5, 0.9]
    acc = np.zeros((2, seeds, 5, 3))
    for k in range(2):
        for s, values in enumerate((aire, last, magnitude, random, uniform)):
            acc[k, :, s, 1:] = values[k] + 0.01 * np.arange(seeds)[:, None]
        acc[k, :, :, 0] = full[k]
    rnd = np.zeros((2, seeds, 3, len(draws)))
    ctl = np.zeros((2, seeds, 3))
    for k in range(2):
        rnd[k, :, 0], ctl[k, :, 0] = full[k], full[k]
        rnd[k, :, 1:] = np.asarray(draws) + (random[k] - np.mean(draws))
        ctl[k, :, 1:] = (control or random)[k]
    energy = np.broadcast_to(np.array([[1.0, 1.0, 1.0, 1.0], [8.0, 4.0, 0.1, 0.1]])[:, None, None], (2, seeds, 2, 4))
    kept = np.broadcast_to(np.array([1, 1, 0, 0]), (2, seeds, 2, 4))
    gamma = np.full((2, seeds, 2, 4), np.nan)
    gamma[0] = 1.02
    layer_vars = ("kind", "seed", "layer", "state")
    return xr.Dataset(
        {"accuracy": (("kind", "seed", "score", "ratio"), acc),
         "accuracy_full": (("kind", "seed"), np.repeat(np.asarray(full, float)[:, None], seeds, 1)),
         "random_accuracy": (("kind", "seed", "ratio", "draw"), rnd),
         "random_control_accuracy": (("kind", "seed", "ratio"), ctl),
         "energy": (layer_vars, energy.copy()), "kept_headline": (layer_vars, kept.copy()),
         "gamma_norm": (layer_vars, gamma),
         "ssm_macs": (("kind", "seed", "score", "ratio"), np.ones((2, seeds, 5, 3)))},
        coords={"kind": ["lru", "s5"], "seed": np.arange(seeds), "score": scores, "ratio": ratios},
        attrs={"headline_ratio": 0.5, "n_classes": 10, "dataset": dataset},
    )


def _verdicts(ds):
    from lab.methods.aire_prune.claims import CLAIMS

    return {c.name: c.evaluate(ds) for c in CLAIMS}


VERDICT_CLAIMS = ("aire_prunes_half_for_under_a_point", "aire_beats_random", "aire_beats_magnitude",
                  "global_beats_uniform")


def test_claims_hold_on_a_run_with_the_papers_effect():
    v = _verdicts(_ds())
    for name in VERDICT_CLAIMS:
        assert v[name].verdict == "holds", (name, v[name])
        assert v[name].control_passed is False and v[name].per_seed is not None and len(v[name].per_seed) == 3
    head = v["aire_prunes_half_for_under_a_point"]
    assert head.measured == pytest.approx(0.5 - 0.01) and head.control_measured == pytest.approx(7.0 - 0.01)
    assert v["aire_vs_last"].verdict == "reported" and v["aire_vs_last"].measured == pytest.approx(6.5)


def test_headline_fails_on_models_at_chance_even_without_a_drop():
    """A model at chance loses nothing when pruned: the floor (55% for ten classes) makes that a failure."""
    from lab.methods.aire_prune.claims import accuracy_floor

    ds = _ds(full=(10.0, 10.0), aire=(10.0, 10.0), random=(10.0, 10.0), magnitude=(10.0, 10.0),
             uniform=(10.0, 10.0), draws=(10.0, 10.0))
    assert accuracy_floor(ds) == 55.0
    v = _verdicts(ds)
    assert v["aire_prunes_half_for_under_a_point"].verdict == "fails"
    assert v["aire_prunes_half_for_under_a_point"].measured == pytest.approx(44.99)
    for name in ("aire_beats_random", "aire_beats_magnitude", "global_beats_uniform"):
        assert v[name].verdict == "fails", name


def test_the_verdicts_read_s5_and_the_lru_is_a_report_row_with_its_reason():
    """LRU loses 10 pt, S5 nothing: the S5 verdicts hold, the LRU row reports 10 pt with γ²/(1-|λ|²) and the
    energy share AIRE removes from each kind (flat LRU spectrum: half of it; S5: 0.2 of 13.2)."""
    v = _verdicts(_ds(aire=(88.0, 97.0), uniform=(80.0, 96.0)))
    assert v["aire_prunes_half_for_under_a_point"].verdict == "holds"
    assert v["global_beats_uniform"].verdict == "holds"
    lru = v["aire_on_lru"]
    assert lru.verdict == "reported" and lru.measured == pytest.approx(10.0 - 0.01)
    assert "is 1.02" in lru.detail and "50% of the LRU's energy" in lru.detail and "2% of the S5's" in lru.detail
    # a run without S5 cannot be measured: NaN, so every verdict fails
    no_s5 = _ds().sel(kind=["lru"])
    assert all(np.isnan(r.measured) and r.verdict == "fails" for n, r in _verdicts(no_s5).items()
               if n in VERDICT_CLAIMS)


def test_the_headline_is_measured_against_the_strongest_control():
    """LAST loses under a point too (S5 at 96.5 of 97): AIRE keeps accuracy, but not where every control loses it.
    |λ| or random alone (the old control) would have failed."""
    v = _verdicts(_ds(last=(90.0, 96.5)))["aire_prunes_half_for_under_a_point"]
    assert v.control_measured == pytest.approx(0.5 - 0.01) and v.verdict == "does not discriminate"
    v = _verdicts(_ds(magnitude=(60.0, 96.6)))["aire_prunes_half_for_under_a_point"]
    assert v.control_measured == pytest.approx(0.4 - 0.01) and v.verdict == "does not discriminate"
    v = _verdicts(_ds(control=(40.0, 96.9)))["aire_prunes_half_for_under_a_point"]  # a lucky independent draw
    assert v.control_measured == pytest.approx(0.1) and v.verdict == "does not discriminate"


def test_global_beats_uniform_needs_a_margin_above_seed_noise():
    """Gaps of +3, -1, +1 pt over three seeds: a positive mean (the old bar, 0) inside seed noise fails."""
    ds = _ds()
    for seed, gap in enumerate((3.0, -1.0, 1.0)):
        ds.accuracy.loc[{"kind": "s5", "seed": seed, "score": "aire_uniform", "ratio": [0.5, 0.9]}] = 96.5 - gap
    v = _verdicts(ds)["global_beats_uniform"]
    assert np.mean(v.per_seed) == pytest.approx(1.0 + 0.01, abs=0.02) and v.measured < 0 and v.verdict == "fails"


def test_ties_fail_and_a_passing_control_does_not_discriminate():
    tie = _verdicts(_ds(uniform=(97.5, 96.5), seeds=2))
    assert tie["global_beats_uniform"].measured == 0 and tie["global_beats_uniform"].verdict == "fails"
    # magnitude worse than random: beating it says nothing about the energy
    weak = _verdicts(_ds(magnitude=(20.0, 20.0)))
    assert weak["aire_beats_magnitude"].verdict == "does not discriminate"
    # an independent random draw beats the draws' mean by more than the threshold: the gap is within random noise
    noisy = _verdicts(_ds(random=(85.0, 85.0), draws=(100.0, 70.0), control=(95.0, 95.0)))
    assert noisy["aire_beats_random"].measured > 4
    assert noisy["aire_beats_random"].control_measured == pytest.approx(10.0 - 0.02)  # the worst seed
    assert noisy["aire_beats_random"].verdict == "does not discriminate"


def test_the_random_control_is_drawn_apart_from_the_baseline_draws():
    """The control reads its own draw only: a lucky baseline draw moves the baseline's mean, never the control (the
    old control, draw 0 against a mean that held draw 0, moved with it)."""
    lucky = _ds(random=(60.0, 60.0), draws=(100.0, 20.0), control=(41.0, 41.0))
    plain = _ds(random=(60.0, 60.0), draws=(60.0, 60.0), control=(41.0, 41.0))
    a, b = _verdicts(lucky)["aire_beats_random"], _verdicts(plain)["aire_beats_random"]
    assert a.control_measured == pytest.approx(b.control_measured) == pytest.approx(41.0 - 60.0 - 0.02)
    assert a.verdict == b.verdict == "holds"


def test_the_random_control_draws_from_its_own_stream(monkeypatch):
    """The sweep's random baseline and its control draw from two generators spawned apart, and LRU and S5 (same
    training seed) from different ones: the control never repeats the baseline's draws."""
    from types import SimpleNamespace

    from lab.methods.aire_prune import experiment as E

    cfg = Config.from_profile("ci")
    seen, real_plan = [], E.P.plan

    def plan(model, score, ratio, rng=None):
        if score == "random":
            seen.append(rng)
        return real_plan(model, score, ratio, rng)

    monkeypatch.setattr(E.P, "plan", plan)
    monkeypatch.setattr(E, "accuracy_on_test", lambda model, task: 50.0)
    monkeypatch.setattr(E, "_inference_time", lambda model, x, repeats: 0.0)
    model = _model(n_layers=cfg.n_layers, d_state=cfg.d_state)
    res = E.SCHEMA.new(kind=["lru", "s5"], seed=[0], score=list(cfg.scores), ratio=np.asarray(cfg.ratios),
                       draw=np.arange(cfg.random_draws), layer=np.arange(cfg.n_layers), state=np.arange(cfg.d_state))
    for k in (0, 1):
        E._sweep(res, k, 0, model, cfg, SimpleNamespace(x_test=None), seed=0)
    per_model = cfg.random_draws * len(cfg.ratios) + len(cfg.ratios)
    assert len(seen) == 2 * per_model
    for k in (0, 1):
        calls = seen[k * per_model:(k + 1) * per_model]
        baseline, control = calls[:-len(cfg.ratios)], calls[-len(cfg.ratios):]
        assert len({id(g) for g in baseline}) == 1 and len({id(g) for g in control}) == 1
    keys = {(str(g.bit_generator.seed_seq.entropy), g.bit_generator.seed_seq.spawn_key, tuple(g.bit_generator.seed_seq
            .pool)) for g in seen}
    assert len(keys) == 4  # baseline and control, for each of the two models


def test_models_that_did_not_learn_make_no_pruning_claim_hold():
    """Unpruned S5 models 20 pt below the reference lose nothing when pruned, and random pruning hurts them: without
    the competence check that would hold."""
    weak = _ds(full=(77.0, 77.0), aire=(76.8, 76.8), uniform=(70.0, 70.0), magnitude=(50.0, 50.0), last=(70.0, 70.0))
    v = _verdicts(weak)
    for name in VERDICT_CLAIMS:
        assert v[name].verdict == "control not competent", (name, v[name])
        assert v[name].competence[0].measured == pytest.approx(77.0 - 97.0)
    assert _verdicts(_ds(dataset="mnist1d"))["aire_beats_random"].competence[0].measured == pytest.approx(6.0)
    unknown = _verdicts(_ds(dataset="cifar"))["aire_beats_random"]
    assert unknown.verdict == "control not competent" and not np.isfinite(unknown.competence[0].measured)


def test_one_seed_cannot_carry_the_score_comparisons():
    """Seed 0's S5: |λ| as good as AIRE. The mean over seeds would clear 1 pt on the other two seeds' gap; the
    worst seed does not."""
    ds = _ds()
    ds.accuracy.loc[{"kind": "s5", "seed": 0, "score": "magnitude", "ratio": [0.5, 0.9]}] = 99.0
    v = _verdicts(ds)["aire_beats_magnitude"]
    assert np.mean(v.per_seed) > 1 and v.measured == min(v.per_seed) == pytest.approx(96.5 - 99.0)
    assert v.verdict == "fails" and v.seeds_holding == 2
