"""REM: the masked MLP (expansion keeps the function, discarding equals switching the extra units off), example-tied
masks, the NPO loss against its closed form, the corruptions and their discovered parts, bad input (ConfigError and
exit 2), redirection into the extra units on a real cell, the ci run and the claims on synthetic Datasets."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner

from lab.config import ConfigError
from lab.methods.rem import model as M
from lab.methods.rem.config import Config
from lab.methods.rem.corruptions import FLIP_PAIRS, PATCH_SIZE, corrupt, discover


def _mlp(seed=0, extra=0):
    torch.manual_seed(seed)
    return M.MaskedMLP(12, 5, hidden=16, n_hidden=2, extra=extra)


def test_expansion_keeps_the_function_for_every_mask_and_discard_switches_the_units_off():
    small = _mlp()
    big = M.expand(small, 8, torch.Generator().manual_seed(1))
    x = torch.randn(20, 12)
    masks = M.example_masks(20, 2, 8, 0.5, torch.Generator().manual_seed(2))
    torch.testing.assert_close(big(x, masks), small(x))
    torch.testing.assert_close(big(x, None), small(x))
    with torch.no_grad():  # once the extra units are trained, the mask matters; discarding equals switching off
        for p in big.parameters():
            p.add_(0.3 * torch.randn_like(p))
    assert not torch.allclose(big(x, masks), big(x, None))
    torch.testing.assert_close(M.discard(big)(x), big(x, None))
    torch.testing.assert_close(M.discard(big)(x), big(x, torch.zeros_like(masks)))
    with pytest.raises(ValueError, match="extra=8 is not allowed"):
        M.expand(big, 4)


def test_example_masks_open_a_fixed_share_of_the_extra_units():
    m = M.example_masks(50, 3, 20, 0.25, torch.Generator().manual_seed(0))
    assert m.shape == (50, 3, 20)
    assert torch.all(m.sum(-1) == 5)  # exactly round(0.25 * 20) per example and layer
    assert len({tuple(r.flatten().tolist()) for r in m}) == 50  # every example its own mask
    assert torch.all(M.example_masks(4, 1, 10, 0.01, torch.Generator()).sum(-1) == 1)  # at least one unit


def test_npo_loss_matches_its_closed_form_and_pushes_the_forget_label_down():
    logits = torch.randn(6, 4, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    ref = torch.log_softmax(logits, -1).gather(1, y[:, None]).squeeze(1).detach()
    beta = 0.7
    loss = M.npo_loss(logits, y, ref, beta)
    assert float(loss.detach()) == pytest.approx(2 / beta * math.log(2))  # π_θ = π_ref: (2/β) log 2
    loss.backward()
    step = logits - 0.5 * logits.grad
    assert torch.all(torch.log_softmax(step, -1).gather(1, y[:, None]) < ref[:, None])


def _toy(n=200):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 64, generator=g), torch.arange(n) % 10


def test_random_labels_never_keep_the_true_label():
    x, y = _toy()
    bad = corrupt("random", x, y, fraction=0.3, seed=1)
    assert len(bad.index) == 60 and len(set(bad.index.tolist())) == 60
    assert torch.all(bad.y[bad.index] != y[bad.index])
    clean = ~bad.corrupted
    assert torch.equal(bad.y[clean], y[clean]) and torch.equal(bad.x, x) and torch.equal(bad.y_true, y)


def test_pair_flips_swap_labels_within_the_pairs():
    x, y = _toy()
    bad = corrupt("pair", x, y, fraction=0.2, seed=2, n_pairs=2)
    partner = {a: b for p in FLIP_PAIRS[:2] for a, b in (p, p[::-1])}
    assert all(partner[int(t)] == int(c) for t, c in zip(y[bad.index], bad.y[bad.index]))
    with pytest.raises(ConfigError, match="fraction=0.5 is not allowed; allowed: at most 0.200"):
        corrupt("pair", x, y, fraction=0.5, seed=2, n_pairs=1)


def test_backdoor_patches_exemplars_of_other_classes_with_the_target_label():
    x, y = _toy()
    bad = corrupt("backdoor", x, y, fraction=0.1, seed=3, target=4)
    assert torch.all(bad.y[bad.index] == 4) and torch.all(y[bad.index] != 4)
    assert torch.all(bad.x[bad.index, -PATCH_SIZE:] == x.max())
    assert torch.equal(bad.x[bad.index, :-PATCH_SIZE], x[bad.index, :-PATCH_SIZE])
    clean = ~bad.corrupted
    assert torch.equal(bad.x[clean], x[clean])


@pytest.mark.parametrize(("rate", "known"), [(0.1, 6), (0.5, 30), (1.0, 60)])
def test_discovery_takes_a_share_of_the_corrupted_examples_only(rate, known):
    x, y = _toy()
    bad = corrupt("random", x, y, fraction=0.3, seed=1)
    forget, retain = discover(bad, rate)
    assert len(forget) == known and len(forget) + len(retain) == len(y)
    assert bad.corrupted[forget].all()
    assert set(forget.tolist()).isdisjoint(retain.tolist())
    assert set(discover(bad, 0.1)[0].tolist()) <= set(discover(bad, 0.5)[0].tolist())  # nested


def test_bad_input_names_the_field_the_value_and_what_is_allowed():
    with pytest.raises(ConfigError, match=r"discovery_rates=\(0.0, 0.5\) is not allowed; allowed: .*\(0, 1\]"):
        Config(discovery_rates=(0.0, 0.5))
    with pytest.raises(ConfigError, match=r"discovery_rates=\(0.5, 1.5\) is not allowed"):
        Config(discovery_rates=(0.5, 1.5))
    with pytest.raises(ConfigError, match=r"corruptions=\('random', 'noise'\) is not allowed; allowed: each value "
                                          r"one of 'random', 'pair', 'backdoor'"):
        Config(corruptions=("random", "noise"))
    with pytest.raises(ConfigError, match="corruption='noise' is not allowed; allowed: one of 'random'"):
        corrupt("noise", *_toy(), fraction=0.1, seed=0)
    with pytest.raises(ConfigError, match="discovery_rate=0 is not allowed"):
        discover(corrupt("random", *_toy(), fraction=0.1, seed=0), 0)


@pytest.mark.parametrize(("arg", "fragment"), [
    ("discovery_rates=0.5,1.2", "discovery_rates=(0.5, 1.2) is not allowed; allowed: each value a finite number "
                                "in (0, 1]"),
    ("corruptions=random,labelnoise", "corruptions=('random', 'labelnoise') is not allowed; allowed: each value "
                                      "one of"),
])
def test_cli_exits_2_on_bad_input(tmp_path, monkeypatch, arg, fragment):
    from lab.cli import cli

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["run", "rem", "-P", "ci", "-p", arg])
    assert out.exit_code == 2, out.output
    assert fragment in out.output
    assert list(tmp_path.iterdir()) == []


def test_rem_redirects_the_discovered_data_into_the_extra_units(tmp_path, monkeypatch):
    """On a real cell (digits, a backdoor, half discovered): with their shared mask open, the extra units make the
    model predict the discovered examples' corrupted label; discarded, the model no longer does, and the extra
    units carry more of those examples' logits than of clean examples'."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.rem.train import corrupted, load_data, log_prob, original, rem

    cfg = Config.from_profile("ci", epochs=30, unlearn_epochs=20, hidden=64, extra_units=32)
    data = load_data(cfg)
    bad = corrupted(cfg, data, "backdoor", 0)
    start = original(cfg, data, bad, 0)
    forget, retain = discover(bad, 0.5)
    x_f, y_f = bad.x[forget], bad.y[forget]
    assert (start(x_f).argmax(-1) == y_f).float().mean() > 0.9  # the original model learned the backdoor
    big, masks, shared = rem(cfg, start, bad, forget, retain, log_prob(start, x_f, y_f), 0)
    assert torch.equal(masks[forget], shared.expand(len(forget), -1, -1))
    on = (big(x_f, masks[forget]).argmax(-1) == y_f).float().mean()
    off = (M.discard(big)(x_f).argmax(-1) == y_f).float().mean()
    assert on > 0.8 and off < 0.3, (on, off)
    clean = ~bad.corrupted
    assert M.extra_share(big, x_f, masks[forget]).mean() > 1.2 * M.extra_share(big, bad.x[clean], masks[clean]).mean()


def test_the_control_without_expansion_is_npo_on_rems_batches(tmp_path, monkeypatch):
    """REM's schedule with no extra units: no masks, no redirection, so its training is the retain cross-entropy
    plus NPO through the (only) base units, on the batches REM draws: the NPO baseline's loss fed REM's batch
    stream gives the same weights."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    import copy

    from lab.core.train import fit
    from lab.methods.rem import train as T

    cfg = Config.from_profile("ci")
    data = T.load_data(cfg)
    bad = T.corrupted(cfg, data, "random", 0)
    start = T.original(cfg, data, bad, 0)
    forget, retain = discover(bad, 0.5)
    x_f, y_f = bad.x[forget], bad.y[forget]
    ref = T.log_prob(start, x_f, y_f)
    small, masks, shared = T.rem(cfg, start, bad, forget, retain, ref, 0, expand=False)
    assert small.extra == 0 and masks.shape == (len(bad.y), cfg.n_hidden, 0) and shared.numel() == 0
    npo = copy.deepcopy(start)
    sample = T._sampler((bad.x[retain], bad.y[retain]), (x_f, y_f, ref), cfg.batch_size, 0 + 31)
    fit(npo, sample, steps=T._steps(cfg, len(bad.y)), loss=M.retain_and_forget_loss("npo", cfg.forget_weight,
                                                                                    cfg.npo_beta),
        lr=cfg.unlearn_lr, seed=0, progress=False)
    for a, b in zip(small.parameters(), npo.parameters()):
        torch.testing.assert_close(a, b)


def test_cells_scored_in_workers_equal_cells_scored_here(tmp_path, monkeypatch):
    """score_all's worker processes (lab.core.parallel) give the same scores as score_corruption called here."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.core.parallel import Job, run_jobs
    from lab.methods.rem import pool

    cfg = Config.from_profile("ci", discovery_rates=(1.0,))
    kinds = ("random", "backdoor")
    done = run_jobs([Job(k, pool.score_corruption, (cfg, 0, k)) for k in kinds], workers=2, progress=False)
    assert all(r.ran for r in done)
    for kind, result in zip(kinds, done):
        here = pool.score_corruption(cfg, 0, kind)
        assert set(here) == set(result.value)
        for key, value in here.items():
            np.testing.assert_array_equal(result.value[key], value, err_msg=f"{kind} {key}")


def test_ci_run_has_the_documented_dims(ci_result):
    from lab.methods.rem.claims import CLAIMS
    from lab.methods.rem.train import METHODS

    res = ci_result("rem")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert ds.score.dims == ("seed", "corruption", "rate", "algorithm")
    assert list(ds.algorithm.values) == list(METHODS) and list(ds.corruption.values) == list(cfg.corruptions)
    np.testing.assert_allclose(ds.rate.values, cfg.discovery_rates)
    np.testing.assert_allclose(ds.score, ds.utility * ds.healed / 100)
    assert ((ds.score >= 0) & (ds.score <= 100)).all()
    # the original model is the same at every discovery rate; more discovered data means a larger forget set
    orig = ds.score.sel(algorithm="original")
    np.testing.assert_allclose(orig, orig.isel(rate=0).broadcast_like(orig).transpose(*orig.dims))
    assert (ds.n_forget.diff("rate") > 0).all()
    assert np.isnan(ds.healed_undiscovered.sel(rate=1.0)).all()
    assert [r.name for r in res.claims] == [c.name for c in CLAIMS]


# --- the claims on synthetic Datasets ------------------------------------------------------------------------------
def _ds(scores: dict, seeds=3, fit=None, kept=None):
    """A Dataset of scores: method -> (corruption x rate) grid, the same on every seed up to a small offset; every
    model fits 99% of its clean training examples and keeps 5% of the forget set's corrupted labels (the original
    100%) unless ``fit`` / ``kept`` (method -> %) say otherwise."""
    from lab.methods.rem.train import METHODS

    grid = np.array([[np.asarray(scores[m], float) + 0.2 * s for m in METHODS] for s in range(seeds)])
    grid = np.moveaxis(grid, 1, -1)  # (seed, corruption, rate, method)
    dims = ("seed", "corruption", "rate", "algorithm")

    def per_method(values: dict, default: float):
        return np.broadcast_to([values.get(m, default) for m in METHODS], grid.shape).copy()

    return xr.Dataset({"score": (dims, grid),
                       "clean_train": (dims, per_method(fit or {}, 99.0)),
                       "memorised_discovered": (dims, per_method({"original": 100.0, **(kept or {})}, 5.0))},
                      coords={"seed": np.arange(seeds), "corruption": ["random", "pair", "backdoor"],
                              "rate": [0.1, 1.0], "algorithm": list(METHODS)})


BASE = {"original": [[5, 5], [2, 2], [0, 0]], "retrain": [[15, 95], [6, 90], [0, 80]],
        "finetune": [[8, 86], [1, 70], [0, 10]], "ga": [[19, 50], [4, 7], [7, 1]],
        "npo": [[16, 94], [23, 88], [12, 86]]}
GOOD = {**BASE, "rem": [[50, 85], [48, 82], [70, 75]], "rem_noexpand": [[17, 93], [24, 87], [5, 85]],
        "rem_noredirect": [[29, 80], [30, 70], [5, 70]], "rem_b": [[51, 84], [47, 80], [69, 76]]}


def _verdicts(ds):
    from lab.methods.rem.claims import CLAIMS

    return {c.name: c.evaluate(ds) for c in CLAIMS}


def test_claims_hold_with_the_papers_effect_and_their_controls_fail():
    v = _verdicts(_ds(GOOD))
    for name, r in v.items():
        if r.verdict == "reported":
            continue
        assert r.verdict == "holds", (name, r)
        assert r.control_passed is False and len(r.per_seed) == 3 and r.competent
    assert v["best_mean_score"].headline and v["best_mean_score"].per_seed == (1.0, 1.0, 1.0)
    assert v["best_mean_margin"].measured == pytest.approx(np.mean(GOOD["rem"]) - np.mean(GOOD["npo"]))
    # the weak region: at full discovery REM (85, 82, 75) trails retrain (95, 90) and NPO (86) in every cell
    assert v["full_discovery_gap"].measured == pytest.approx(np.mean([85 - 95, 82 - 90, 75 - 86]))
    assert "(npo)" in v["worst_cell_beats_baselines"].detail  # NPO's worst cell, 12, is the baselines' best
    # the per-cell oracle: GA, retrain, NPO, retrain, NPO, NPO in the six cells
    oracle = np.mean([19, 95, 23, 90, 12, 86])
    assert v["vs_best_baseline_per_cell"].measured == pytest.approx(np.mean(GOOD["rem"]) - oracle)
    # REM's lowest share: the backdoor at full discovery, 75 against NPO's 86
    assert v["no_catastrophic_cell"].measured == pytest.approx(np.mean([75 / 86, 75.2 / 86.2, 75.4 / 86.4]))


def test_claims_fail_or_do_not_discriminate_without_the_effect():
    # REM no better than NPO: the headline claims fail
    flat = {**GOOD, "rem": BASE["npo"], "rem_b": BASE["npo"]}
    v = _verdicts(_ds(flat))
    assert v["best_mean_score"].verdict == "fails" and v["worst_cell_beats_baselines"].verdict == "fails"
    # the extra units change nothing: REM's schedule without them is as good, so the claims against the baselines
    # do not discriminate
    v = _verdicts(_ds({**GOOD, "rem_noexpand": GOOD["rem_b"]}))
    for name in ("best_mean_score", "worst_cell_beats_baselines", "no_catastrophic_cell"):
        assert v[name].verdict == "does not discriminate", name
    # redirection changes nothing: the ablation is as good, so the redirection claim fails (the others still hold)
    v = _verdicts(_ds({**GOOD, "rem_noredirect": GOOD["rem_b"]}))
    assert v["redirection_carries_the_lead"].verdict == "fails" and v["best_mean_score"].verdict == "holds"
    # REM behind the strongest baseline on one seed of three: the headline fails (its mean margin stays positive)
    ds = _ds(GOOD)
    ds["score"].loc[{"seed": 2, "algorithm": "npo"}] = 90.0
    v = _verdicts(ds)
    assert v["best_mean_score"].measured == pytest.approx(2 / 3) and v["best_mean_score"].verdict == "fails"
    assert v["best_mean_margin"].measured > 0
    # one catastrophic cell
    bad = {**GOOD, "rem": [[50, 85], [48, 82], [70, 30]]}
    assert _verdicts(_ds(bad))["no_catastrophic_cell"].verdict == "fails"


@pytest.mark.parametrize(("fit", "kept", "why", "claims"), [
    # the model retrained from scratch fits 40% of its clean examples
    ({"retrain": 40.0}, None, "worst retrain", 4),
    (None, {"npo": 80.0}, "worst npo", 4),  # NPO kept most of the corrupted labels it was told to forget
    ({"rem_noexpand": 60.0}, None, "worst rem_noexpand", 3),  # the headline's control never learned its training set
    (None, {"rem_noexpand": 70.0}, "worst rem_noexpand", 3),  # ... or kept the labels it was told to forget
    ({"rem_noredirect": 60.0}, None, "worst rem_noredirect", 1),  # the ablation: the redirection claim only
])
def test_a_baseline_or_control_that_never_learned_makes_the_claims_not_competent(fit, kept, why, claims):
    v = _verdicts(_ds(GOOD, fit=fit, kept=kept))
    names = ("best_mean_score", "no_catastrophic_cell", "worst_cell_beats_baselines", "redirection_carries_the_lead")
    checked = names if claims == 4 else names[:3] if claims == 3 else names[3:]
    for name in names:
        if name in checked:
            assert v[name].verdict == "control not competent", (name, v[name])
            assert any(why in c.detail and not c.passed for c in v[name].competence), v[name].competence
        else:
            assert v[name].verdict == "holds", (name, v[name])
    # the second REM run is checked only where it is the control
    v = _verdicts(_ds(GOOD, fit={"rem_b": 60.0}))
    assert v["redirection_carries_the_lead"].verdict == "control not competent"
    assert v["best_mean_score"].verdict == "holds"


def test_gradient_ascent_is_checked_on_its_forget_term_only():
    """GA's loss (retain cross-entropy minus forget cross-entropy) is unbounded below: a collapse that wrecks its fit
    of the clean examples minimises it, so that is shown, not held against the claims; a GA that kept the corrupted
    labels it was told to forget is not competent."""
    v = _verdicts(_ds(GOOD, fit={"ga": 31.0}))
    assert v["best_mean_score"].verdict == "holds"
    assert "(GA, not checked here: 31.0)" in v["best_mean_score"].competence[0].detail
    v = _verdicts(_ds(GOOD, kept={"ga": 90.0}))
    assert v["best_mean_score"].verdict == "control not competent"
