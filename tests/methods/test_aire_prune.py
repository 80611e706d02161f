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
    with pytest.raises(ConfigError, match="headline_ratio"):
        Config(ratios=(0.0, 0.3), headline_ratio=0.5)
    with pytest.raises(ConfigError, match="ratios"):
        Config(ratios=(0.0, 1.0), headline_ratio=0.0)
    with pytest.raises(ConfigError, match="ratios"):
        Config(ratios=(0.5, 0.0))
    with pytest.raises(ConfigError, match="kinds"):
        Config(kinds=("gru",))
    with pytest.raises(ConfigError, match="scores"):
        Config(scores=("last",))


@pytest.fixture
def data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    return tmp_path


def test_ci_run_has_the_documented_dims_and_the_claims_evaluate(data_dir):
    import lab
    from lab.methods.aire_prune import experiment

    res = lab.run("aire_prune", "ci", progress=False)
    ds = res.data
    cfg = Config.from_profile("ci")
    assert dict(ds.sizes) == {"kind": 2, "seed": 1, "score": 5, "ratio": 3, "layer": 2, "state": cfg.d_state}
    assert ds.accuracy.dims == ("kind", "seed", "score", "ratio")
    assert ds.states_kept.dims == ("kind", "seed", "score", "ratio", "layer")
    assert ds.inference_time.dims == ("kind", "seed", "ratio")
    for name in ds.data_vars:
        assert "long_name" in ds[name].attrs and "units" in ds[name].attrs, name
    # at ratio 0 every score keeps the unpruned model
    np.testing.assert_allclose(ds.accuracy.sel(ratio=0.0), ds.accuracy_full.broadcast_like(
        ds.accuracy.sel(ratio=0.0)))
    assert int(ds.states_kept.sel(ratio=0.95).min()) >= 1
    assert len(res.claims) == len(experiment.CLAIMS)
    for r in res.claims:
        assert math.isfinite(r.measured), (r.name, r.detail)
    # the weights were cached: a second run loads them and measures the same accuracies
    assert list((data_dir / "aire_prune").glob("*.pt"))
    again = lab.run("aire_prune", "ci", progress=False)
    assert again.data.from_cache.all()
    np.testing.assert_allclose(again.data.accuracy_full, ds.accuracy_full)
