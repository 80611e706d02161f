"""SSM expressiveness: the hand-built constructions against the languages' definitions (float32 and int8), the
saturation point of the int8 counter, the float32 controls failing where fixed width says they must, the trained
layer's gating classes, the live trajectories, bad input, and the ci run and its claims."""

import re

import numpy as np
import pytest
import torch
import xarray as xr

import kernels
from lab.checks import ConfigError
from lab.datasets.languages import encode, language_task
from lab.methods.ssm_ltl import model as M
from lab.methods.ssm_ltl.config import Config


def _wrong(name, language, length, precision, n=6, seed=0, **params):
    options = {"modulus": params["modulus"]} if language == "mod_count" else {}
    task = language_task(language, n=n, length=length, seed=seed, **options)
    run = M.CONSTRUCTIONS[name](task.inputs, precision, **params)
    assert run.accept.shape == task.targets.shape and run.states.shape[:2] == task.targets.shape
    return np.flatnonzero((run.accept != task.targets.astype(bool)).any(axis=0))


@pytest.mark.parametrize("precision", M.PRECISIONS)
@pytest.mark.parametrize("name, params", [("since", {}), ("lti_rotation", {}), ("gated_rotation", {"modulus": 2}),
                                          ("counter", {}), ("dyck_counter", {})])
def test_constructions_are_exact_at_long_lengths(name, params, precision):
    language = M.CONSTRUCTIONS[name].language
    length = 381 if (name, precision) == ("counter", "int8") else 3000  # int8 counts to 127: n <= 127 only
    assert _wrong(name, language, length, precision, n=12, **params).size == 0


@pytest.mark.parametrize("modulus", [3, 5, 7])
def test_complex_gated_rotation_counts_mod_m_in_float32(modulus):
    assert _wrong("gated_rotation", "mod_count", 5000, "float32", modulus=modulus).size == 0
    with pytest.raises(ValueError, match="no int8 form"):
        M.CONSTRUCTIONS["gated_rotation"](np.zeros((1, 4), np.int64), "int8", modulus=modulus)


def test_since_state_is_the_formula_truth_value():
    x = encode("b_since_a", "bcabbcabab")[None]
    run = M.CONSTRUCTIONS["since"](x, "int8")
    assert run.states[0, :, 0].tolist() == [0, 0, 1, 1, 1, 0, 1, 1, 1, 1]
    assert run.accept[0].tolist() == [False, False, True, True, True, False, True, True, True, True]


def test_int8_counter_saturates_at_127_and_float32_does_not():
    counter = M.CONSTRUCTIONS["counter"]
    for n, int8_ok in ((127, True), (128, False), (1000, False)):
        word = encode("anbncn", "a" * n + "b" * n + "c" * n)[None]
        assert counter(word, "float32").accept[0, -1]
        assert bool(counter(word, "int8").accept[0, -1]) is int8_ok
    # a fixed-width false positive: 200 a's look like 127 a's
    near = encode("anbncn", "a" * 200 + "b" * 127 + "c" * 127)[None]
    assert counter(near, "int8").accept[0, -1] and not counter(near, "float32").accept[0, -1]
    # the star-free order check: right counts, wrong order
    assert not counter(encode("anbncn", "abacbc")[None], "float32").accept[0, -1]


def test_controls_fail_only_where_fixed_width_bites():
    """The time-invariant since is exact on short words (float32 is not fixed width there) and fails once a run of
    b's underflows its memories; the decaying (aa)* counter fails after float32 merges its states. At 8 bits (fixed
    point) both fail within a few dozen letters, while the input-gated since and the rotation stay exact."""
    x = encode("b_since_a", "a" + "b" * 300)[None]
    run = M.CONSTRUCTIONS["lti_since"](x, "float32", decay=0.4)
    first = int(np.flatnonzero(~run.accept[0])[0])
    assert 100 < first < 130  # 0.4^k underflows float32 near k = 113
    assert run.accept[0, :first].all()
    q8 = M.CONSTRUCTIONS["lti_since"](x, "int8", decay=0.4)
    assert q8.accept[0, :6].all() and not q8.accept[0, 6:].any()  # 0.4^6 < 1/128: gone after a run of 6 b's
    assert q8.states[0, :3, 0].tolist() == [1.0, 26 / 64, 11 / 64]  # 6 fractional bits, rounded to nearest
    wrong = _wrong("decay_parity", "aa_star", 1000, "float32", n=1, gate=0.9)
    assert 100 < wrong[0] < 200 and _wrong("decay_parity", "aa_star", 100, "float32", n=1, gate=0.9).size == 0
    q8 = _wrong("decay_parity", "aa_star", 100, "int8", n=1, gate=0.9)
    assert 10 < q8[0] < 40 and q8.size > 30  # at the fixed point: wrong on every other position
    assert _wrong("since", "b_since_a", 100, "int8", n=8).size == 0
    assert _wrong("lti_since", "b_since_a", 100, "int8", n=8, decay=0.4).size > 0
    assert _wrong("lti_since", "b_since_a", 100, "float32", n=8, decay=0.4).size == 0


def test_fixed_point_scan_rounds_and_saturates():
    inc = np.ones((1, 6, 1))
    h = M.fixed_point_scan(0.5, inc, bound=2.0)  # 6 fractional bits: exact halvings
    np.testing.assert_array_equal(h[0, :, 0], [1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875])
    sat = M.fixed_point_scan(0.5, 10 * inc, bound=1.0)  # 7 fractional bits: clamped at 127 / 128
    assert sat.max() == 127 / 128


def test_scan_agrees_with_the_kernels_references():
    rng = np.random.default_rng(0)
    gate, inc = rng.integers(-1, 2, size=(2, 50, 3)), rng.integers(-3, 4, size=(2, 50, 3))
    ref = kernels.saturating_scan_ref(torch.tensor(gate).transpose(1, 2), torch.tensor(inc).transpose(1, 2))
    assert np.array_equal(M.scan(gate, inc, "int8"), ref.transpose(1, 2).numpy())
    g, b = rng.uniform(-1, 1, size=(2, 50, 3)), rng.normal(size=(2, 50, 3))
    ref = kernels.linear_scan_ref(torch.tensor(g, dtype=torch.float32), torch.tensor(b, dtype=torch.float32), dim=1)
    np.testing.assert_allclose(M.scan(g, b, "float32"), ref.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no int8 form"):
        M.scan(g, b, "int8")


@pytest.mark.parametrize("kind", M.CLASSES)
def test_trained_layer_classes_have_their_gates(kind):
    torch.manual_seed(0)
    model = M.build(3, kind, d_state=6, d_hidden=8)
    x = torch.randint(0, 3, (4, 20))
    logits = model(x)
    assert logits.shape == (4, 20, 2)
    gate = model.gates(x)
    if kind == "lti":
        assert gate.shape == (1, 1, 6) and gate.is_complex()
        assert torch.all(gate.abs() < 1) and torch.all(gate[..., :3].imag == 0)  # half real eigenvalues
    elif kind == "gate01":
        assert gate.shape == (4, 20, 6) and torch.all((gate > 0) & (gate < 1))
    else:
        assert torch.all((gate > -1) & (gate < 1)) and (gate < 0).any()
    # the parallel scan equals the step-by-step recurrence
    h = model.states(x)
    inc = torch.complex(model.inc_re[x], model.inc_im[x]) if kind == "lti" else model.inc[x]
    step = torch.zeros_like(h[:, 0])
    for t in range(20):
        step = gate.expand_as(h)[:, t] * step + inc[:, t]
        torch.testing.assert_close(h[:, t], step, rtol=1e-4, atol=1e-5)
    logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_count_lookup_reads_a_count_only_as_far_as_its_table_was_set():
    """A (0, 1) gate at 1 in float32 counts the a's exactly; a lookup set to the parity of counts 1..C reads it right
    to C and has nothing beyond (its bumps vanish: the logits fall back to the MLP's); gradients reach the table
    and the stretch."""
    torch.manual_seed(0)
    model = M.build(1, "gate01", d_state=1, d_hidden=4, lookup=8)
    assert model.lookup_table.shape == (1, 17, 2) and (model.inc.abs() == 1).all()
    assert bool((torch.sigmoid(model.gate_logit) > 0.95).all())  # started near 1: where a count lives
    with torch.no_grad():
        model.gate_logit.fill_(30.0)  # sigmoid(30) is 1.0 in float32
        model.inc.fill_(1.0)
        for p in model.readout.parameters():
            p.zero_()
        for k in range(1, 9):
            model.lookup_table[0, 8 + k, (k + 1) % 2] = 5.0  # odd count: reject (class 0 wins); even: accept
    x = torch.zeros(1, 12, dtype=torch.long)
    logits = model(x)[0]
    accept = logits.argmax(-1).numpy().astype(bool)
    assert accept[:8].tolist() == [t % 2 == 0 for t in range(1, 9)]
    assert float(logits[10:].abs().max()) < 1e-3  # counts 11, 12: no entry, nothing read
    logits.sum().backward()
    assert model.lookup_table.grad is not None and model.lookup_scale.grad is not None


def test_only_the_count_controls_get_the_lookup():
    import dataclasses

    from lab.methods.ssm_ltl.train import LOOKUP_MODELS, lookup_of, training_key

    cfg = Config.from_profile("quick")
    assert set(LOOKUP_MODELS) == {("aa_star", "gate01"), ("mod_count", "gate01")}
    for language in ("aa_star", "mod_count", "b_since_a"):
        for kind in M.CLASSES:
            key = training_key(cfg, language, kind, 0)
            if (language, kind) in LOOKUP_MODELS:
                assert key["lookup"] == cfg.control_lookup == lookup_of(cfg, language, kind) > 0
            else:
                assert "lookup" not in key and lookup_of(cfg, language, kind) == 0  # their cached weights stand
    off = dataclasses.replace(cfg, control_lookup=0)
    assert "lookup" not in training_key(off, "aa_star", "gate01", 0)


def test_expressibility_table_follows_the_paper():
    assert M.expressible("aa_star", "lti") and not M.expressible("aa_star", "gate01")
    assert M.expressible("mod_count", "gate11") and not M.expressible("mod_count", "gate11", modulus=3)
    assert not M.expressible("b_since_a", "lti") and M.expressible("b_since_a", "gate01")


def test_config_refuses_bad_values():
    with pytest.raises(ConfigError, match=r"check_length=0 is not allowed; allowed: an integer in \[16, 100000\]"):
        Config(check_length=0)
    with pytest.raises(ConfigError, match=r"check_length=100001 is not allowed"):
        Config(check_length=100_001)
    with pytest.raises(ConfigError, match="claim_factor=3 is not allowed; allowed: one of test_factors"):
        Config(claim_factor=3)
    with pytest.raises(ConfigError, match=r"test_factors=\(1, 1000\) is not allowed"):
        Config(train_length=4096, test_factors=(1, 1000), claim_factor=1000)


def test_cli_bad_input_exits_2_naming_field_value_allowed():
    from click.testing import CliRunner

    from lab.cli import cli

    res = CliRunner().invoke(cli, ["run", "ssm_ltl", "--profile", "ci", "-q", "-p", "check_length=5"])
    assert res.exit_code == 2, res.output
    assert "check_length=5 is not allowed; allowed: an integer in [16, 100000]" in res.output


def test_live_trajectory_for_constructions_and_bad_input():
    from lab.methods.ssm_ltl import live

    traj = live.trajectory("anbncn", "counter", word="a" * 128 + "b" * 128 + "c" * 128, precision="int8",
                           profile="ci")
    assert traj.source == "hand-built" and traj.truth[-1] and not traj.accept[-1]
    assert traj.first_failure == 3 * 128 and traj.states.shape == (384, 5)
    ok = live.trajectory("b_since_a", "since", 500, seed=2, profile="ci")
    assert ok.first_failure is None and ok.accuracy == 1.0 and len(ok.word) == 500
    assert "lti" in live.models_for("b_since_a") and "counter" in live.models_for("anbncn")
    assert "lti" not in live.models_for("anbncn")
    for kwargs, match in [
        (dict(language="abc", model="since"), "language='abc' is not allowed; allowed: one of"),
        (dict(language="b_since_a", model="counter"), "model='counter' is not allowed; allowed: one of 'since'"),
        (dict(language="b_since_a", model="since", length=0), r"length=0 is not allowed; allowed: an integer in "
                                                              r"\[1, 100000\]"),
        (dict(language="b_since_a", model="since", length=200_000), "length=200000 is not allowed"),
        (dict(language="aa_star", model="lti", precision="int8"), "precision='int8' is not allowed"),
    ]:
        with pytest.raises(ConfigError, match=match):
            live.trajectory(profile="ci", **kwargs)


def test_live_trajectory_of_a_trained_model(tmp_path, monkeypatch):
    from lab.methods.ssm_ltl import live

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    traj = live.trajectory("aa_star", "gate11", 40, profile="ci")
    assert traj.source == "trained" and traj.states.shape == (40, Config.from_profile("ci").d_state)
    assert traj.truth.tolist() == [t % 2 == 1 for t in range(40)]


def test_ci_run_has_the_documented_dims(ci_result):
    from lab.methods.ssm_ltl.claims import CLAIMS

    res = ci_result("ssm_ltl")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert ds.wrong.dims == ("construction", "precision", "length")
    assert list(ds.length.values) == [10, 100, cfg.check_length]
    assert ds.accuracy.dims == ("language", "kind", "seed", "factor") and ds.sizes["seed"] == cfg.n_seeds
    assert (ds.wrong.sel(construction="since") == 0).all()
    for control in ("lti_since", "decay_parity"):  # 8-bit fixed point: wrong from 100 letters on
        assert float(ds.wrong.sel(construction=control, precision="int8", length=100)) > 0
    assert ds.accuracy_train.dims == ("language", "kind", "seed")
    np.testing.assert_array_equal(ds.accuracy_train.values, ds.accuracy.sel(factor=1).values)  # the same words
    assert 128 in ds.n.values and int(ds.counter_accepts.sel(precision="int8", n=128, word="member")) == 0
    assert [r.name for r in res.claims] == [c.name for c in CLAIMS]
    assert ds.run_accuracy.dims == ("kind", "seed", "run") and list(ds.run.values) == list(cfg.run_lengths)
    assert float(ds.hand_horizon.sel(since_model="lti_since")) == 113 and np.isnan(ds.hand_horizon.sel(
        since_model="since"))
    assert (ds.run_wrong.sel(since_model="since") == 0).all()
    for name in ("since_every_length", "rotation_aa_star_every_length", "counter_float32_anbncn",
                 "since_past_float32_horizon"):
        assert res.claims[name].verdict == "holds", res.claims[name]


def test_since_training_words_have_runs_as_long_as_the_word():
    from lab.datasets.languages import prefix_labels
    from lab.methods.ssm_ltl.train import long_run_words, train_task

    cfg = Config.from_profile("quick")
    task = train_task(cfg, "b_since_a", 0)
    assert task.inputs.shape == (cfg.n_train, cfg.train_length)
    np.testing.assert_array_equal(task.targets, prefix_labels("b_since_a", task.inputs))
    runs = [len(r) for w in task.inputs for r in re.split("[ac]", "".join("abc"[t] for t in w))]
    assert max(runs) > cfg.train_length // 4 + 1  # longer than the language's own sampler gives
    words, truth = long_run_words(cfg, 0, 50)
    assert words.shape == (cfg.n_test, cfg.train_length + 51) and (words[:, -50:] == 1).all()
    np.testing.assert_array_equal(truth, prefix_labels("b_since_a", words)[:, -1])


# --- the claims on synthetic Datasets ------------------------------------------------------------------------------
def _ds(lti_aa=(1.0, 0.5), gate01_aa=(0.5, 0.5), int8_wrong=5.0, lti_since_wrong=10.0, gate01_aa_train=(0.95, 0.95),
        lti_horizon=(100.0, 150.0), lti_runs=(0.5, 0.5), gate01_runs=(0.95, 0.6), lti_since_run_wrong=4):
    """A synthetic run; ``gate01_aa_train``: the (0, 1) control's accuracy on (aa)* at the training length;
    ``lti_horizon``: the trained time-invariant b S a seeds' float32 horizons; ``*_runs``: accuracy per seed at the
    end of runs of 256 b's (runs of 16: 1.0); ``lti_since_run_wrong``: the hand-built control's wrong run ends
    (float32, runs of 256)."""
    from lab.methods.ssm_ltl.train import TRAINED_LANGUAGES

    names, precisions = list(M.CONSTRUCTIONS), list(M.PRECISIONS)
    wrong = np.zeros((len(names), 2, 2))
    wrong[names.index("decay_parity"), 1, 1] = 7
    wrong[names.index("decay_parity"), 0, 1] = 0  # float32 right at these lengths: not the control
    wrong[names.index("lti_since"), 1, 1] = lti_since_wrong
    wrong[names.index("counter"), 1, 1] = int8_wrong
    first = np.where(wrong > 0, 50.0, np.nan)
    acc = np.full((3, 3, 2, 2), 0.95)
    acc[0, 0, :, 1], acc[0, 1, :, 1] = lti_aa, gate01_aa
    acc[1, :2, :, 1] = 0.5
    acc[2, 0, :, 1] = 0.7
    beyond = acc.copy()
    beyond[..., 0] = np.nan
    acc_train = acc[..., 0].copy()
    acc_train[0, 1] = gate01_aa_train
    grid = np.ones((2, 1, 5))
    grid[:, :, 1:] = 0
    trained = ("language", "kind", "seed")
    run_acc = np.ones((3, 2, 2))
    run_acc[0, :, 1], run_acc[1, :, 1] = lti_runs, gate01_runs
    run_wrong = np.zeros((2, 2, 2))
    run_wrong[1, 0, 1], run_wrong[1, 1, 1] = lti_since_run_wrong, 4
    horizon = np.array([lti_horizon, [400.0, np.nan], [500.0, 600.0]])
    return xr.Dataset(
        {"wrong": (("construction", "precision", "length"), wrong),
         "decisions": (("construction", "precision", "length"), np.full(wrong.shape, 100.0)),
         "first_failure": (("construction", "precision", "length"), first),
         "counter_accepts": (("precision", "n", "word"), grid),
         "counter_truth": (("n", "word"), grid[0]),
         "accuracy": ((*trained, "factor"), acc),
         "accuracy_beyond": ((*trained, "factor"), beyond),
         "accuracy_train": (trained, acc_train),
         "final_loss": (trained, np.full(acc_train.shape, 0.1)),
         "expressible": (("language", "kind"), np.array([[1, 0, 1], [0, 0, 1], [0, 1, 1]], float)),
         "run_wrong": (("since_model", "precision", "run"), run_wrong),
         "hand_horizon": (("since_model",), np.array([np.nan, 113.0])),
         "run_accuracy": (("kind", "seed", "run"), run_acc),
         "horizon": (("kind", "seed"), horizon)},
        coords={"construction": names, "precision": precisions, "length": [10, 100], "n": [5],
                "word": ["member", "w1", "w2", "w3", "w4"], "language": list(TRAINED_LANGUAGES),
                "kind": list(M.CLASSES), "seed": [0, 1], "factor": [1, 4], "since_model": ["since", "lti_since"],
                "run": [16, 256]},
        attrs={"claim_factor": 4, "train_length": 16, "modulus": 2, "n_test": 8},
    )


def _verdicts(ds):
    from lab.methods.ssm_ltl.claims import CLAIMS

    return {c.name: c.evaluate(ds) for c in CLAIMS}


def test_claims_hold_when_the_separations_show():
    from lab.methods.ssm_ltl.claims import CLAIMS

    v = _verdicts(_ds())
    for name in ("since_every_length", "rotation_aa_star_every_length", "counter_float32_anbncn",
                 "rotation_learns_aa_star", "negative_gates_learn_parity", "gates_learn_since",
                 "since_past_float32_horizon"):
        assert v[name].verdict == "holds", (name, v[name])
    assert v["rotation_learns_aa_star"].measured == 1.0 and v["rotation_learns_aa_star"].seeds_holding == 1
    assert v["counter_float32_anbncn"].control_measured == 5.0
    assert v["expressible_vs_learnable"].verdict == "reported" and v["expressible_vs_learnable"].measured == 1.0
    assert [c.name for c in CLAIMS if c.headline] == ["since_every_length"]


def test_claims_fail_or_do_not_discriminate_without_the_separation():
    v = _verdicts(_ds(lti_aa=(0.6, 0.5)))
    assert v["rotation_learns_aa_star"].verdict == "fails"
    v = _verdicts(_ds(gate01_aa=(0.95, 0.5)))  # one (0, 1) seed generalises: the control passes
    assert v["rotation_learns_aa_star"].verdict == "does not discriminate"
    v = _verdicts(_ds(int8_wrong=0.0))  # int8 never wrong: the check cannot tell precisions apart
    assert v["counter_float32_anbncn"].verdict == "does not discriminate"
    v = _verdicts(_ds(lti_since_wrong=0.0))  # the 8-bit time-invariant since right: no separation at this width
    assert v["since_every_length"].verdict == "does not discriminate"


def test_a_control_that_never_fit_its_training_length_proves_nothing():
    """The issue's quick run: the (0, 1) control at 0.56 on (aa)* at the training length."""
    v = _verdicts(_ds(gate01_aa_train=(0.56, 0.95)))
    r = v["rotation_learns_aa_star"]
    assert r.verdict == "control not competent" and r.competence[0].measured == 0.56  # the worst seed decides
    v = _verdicts(_ds(gate01_aa_train=(0.9, 0.95)))  # a tie with the bar never passes
    assert v["rotation_learns_aa_star"].verdict == "control not competent"
    assert v["gates_learn_since"].verdict == "holds" and v["gates_learn_since"].competent


def test_hand_built_controls_are_read_at_the_same_fixed_width():
    ds = _ds()
    ds.wrong.loc[dict(construction="lti_since", precision="float32")] = 99.0  # float32 underflow is not the control
    ds.wrong.loc[dict(construction="lti_since", precision="int8")] = 0.0
    assert _verdicts(ds)["since_every_length"].verdict == "does not discriminate"


def test_since_horizon_is_where_float32_states_merge():
    """The hand-built since never loses the a; the time-invariant one at λ = 0.4 once λ^k underflows (k = 113); a
    decaying gate with a bias merges in float32 where the closed form says (a few b's either side)."""
    assert np.isnan(M.since_horizon(*M.construction_tables("since")))
    assert M.since_horizon(*M.construction_tables("lti_since", 0.4)) == np.ceil(149 * np.log(2) / -np.log(0.4))
    gate, inc = np.full((3, 2), np.float32(0.9)), np.array([[1.0, -0.3], [0.5, 0.2], [0.0, 0.7]], dtype=np.float32)
    horizon = int(M.since_horizon(gate, inc))
    assert 100 < horizon < 400
    runs = horizon + 20
    x = np.array([[0] + [1] * runs, [2] + [1] * runs])
    h = kernels.linear_scan(torch.tensor(gate[x]), torch.tensor(inc[x]), dim=1).numpy()
    same = np.all(h[0] == h[1], axis=-1)
    assert not same[horizon - 10] and same[horizon + 10:].all()
    with pytest.raises(ValueError, match="lti_since"):
        M.construction_tables("rotation")


def test_trained_since_claim_reads_past_the_control_horizon():
    from lab.methods.ssm_ltl.claims import _past_horizon

    ds = _ds()
    assert _past_horizon(ds) == 256  # every lti seed's horizon (100, 150) lies between 16 and 256
    v = _verdicts(_ds(lti_horizon=(100.0, 300.0)))  # no run past every horizon: the longest run is read
    assert "read at runs of 256" in v["gates_learn_since"].detail
    v = _verdicts(_ds(gate01_runs=(0.5, 0.5)))  # the trained gates forget too: the claim fails
    assert v["gates_learn_since"].verdict == "fails"
    v = _verdicts(_ds(lti_runs=(0.95, 0.5)))
    assert v["gates_learn_since"].verdict == "does not discriminate"
    v = _verdicts(_ds(lti_since_run_wrong=0))  # no run past the control's horizon: no separation
    assert v["since_past_float32_horizon"].verdict == "does not discriminate"
    assert v["float32_horizons"].verdict == "reported" and v["float32_horizons"].measured == 150.0
