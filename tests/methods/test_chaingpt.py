"""ChainGPT: the multi-substep state layer against the explicit product of its transitions and its step form, the
sparse mask and causality, truncated backprop through depth, the entropy-drop rule, matched parameter counts, bad
input (exit 2), the ci run with its claims, the live trace and the plots."""

import dataclasses

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from lab.config import ConfigError
from lab.core.chain import MultiSubstepState, StateGuidedAttention, sparse_mask
from lab.methods.chaingpt import model as M
from lab.methods.chaingpt.config import Config
from lab.methods.chaingpt.train import build, matched_width, n_params


def _layer(substeps=2, seed=0):
    torch.manual_seed(seed)
    return MultiSubstepState(12, 2, substeps, 3).double()


@pytest.mark.parametrize("substeps", [1, 2, 3])
def test_state_layer_is_the_product_of_its_transitions(substeps):
    """S_t = S_{t-1} Π_j diag(α_tj) (I - β_j k_j k_jᵀ) + Σ_j (later factors) β_j v_j k_jᵀ, read o_t = S_t q_t: the
    documented mapping of ChainGPT's diagonal-per-substep + rank-M transition onto the kernel's diagonal gates and
    Householder substeps."""
    layer = _layer(substeps)
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    y = layer(x)
    q, k, v, beta, gate = layer._inputs(x)
    b, h, L, m, e = k.shape
    S = torch.zeros(b, h, e, e, dtype=torch.float64)
    outs = []
    eye = torch.eye(e, dtype=torch.float64)
    assert gate.shape == (b, h, L, m, e)
    for t in range(L):
        for j in range(m):
            S = S * torch.exp(gate[:, :, t, j])[..., None, :]
            kj, vj, bj = k[:, :, t, j], v[:, :, t, j], beta[:, :, t, j][..., None, None]
            S = S @ (eye - bj * kj[..., :, None] * kj[..., None, :]) + bj * vj[..., :, None] * kj[..., None, :]
        outs.append((S @ q[:, :, t, :, None])[..., 0])
    torch.testing.assert_close(y, layer._read(torch.stack(outs, dim=2)))
    beta, gate = beta.detach(), gate.detach()
    assert float(beta.max()) < 2 and float(beta.min()) > 0 and float(gate.max()) < 0


def test_state_layer_step_form_agrees_with_the_parallel_form():
    layer = _layer(2, seed=1)
    x = torch.randn(3, 9, 12, dtype=torch.float64)
    y, (S_par, _) = layer(x, return_state=True)
    state = tuple(s.double() for s in layer.initial_state(3))
    ys = []
    for t in range(9):
        o, state = layer.step(x[:, t], state)
        ys.append(o)
    torch.testing.assert_close(torch.stack(ys, dim=1), y)
    torch.testing.assert_close(state[0], S_par)
    y2 = layer(x[:, 5:], state=layer(x[:, :5], return_state=True)[1])  # chunked with a carried state
    torch.testing.assert_close(y2, y[:, 5:])


def test_sparse_mask_reads_the_window_and_written_anchors():
    mask = sparse_mask(10, 3, 4, True)  # anchors written at positions 3 and 7
    assert mask.shape == (10, 12)
    assert mask[5, :10].nonzero().ravel().tolist() == [3, 4, 5]
    assert mask[0, :10].nonzero().ravel().tolist() == [0]
    assert mask[2, 10:].tolist() == [False, False] and mask[3, 10:].tolist() == [True, False]
    assert mask[9, 10:].tolist() == [True, True]
    assert not sparse_mask(10, 3, 4, False)[:, 10:].any()


def test_window_alone_ignores_tokens_beyond_the_window_and_anchors_do_not():
    torch.manual_seed(0)
    x, s = torch.randn(1, 12, 8), torch.randn(1, 12, 8)
    x2, s2 = x.clone(), s.clone()
    x2[:, 1], s2[:, 3] = 5.0, 5.0  # token 1 and the summary written at anchor position 3
    win = StateGuidedAttention(8, 2, window=3, every=4, anchors=False)
    torch.testing.assert_close(win(x, s)[:, 4:], win(x2, s2)[:, 4:])
    anc = StateGuidedAttention(8, 2, window=3, every=4, anchors=True)
    assert not torch.allclose(anc(x, s)[:, 4:], anc(x2, s2)[:, 4:])  # the anchor at 3 reaches beyond the window
    torch.testing.assert_close(anc(x, s)[:, :1], anc(x2, s2)[:, :1])  # nothing reads the future


def _chain(**kw):
    torch.manual_seed(0)
    opts = dict(d_model=16, n_heads=2, substeps=2, delta_rank=2, window=3, every=4, iterations=3)
    return M.ChainGPT(6, 6, **{**opts, **kw}).double()


def test_chaingpt_is_causal():
    model = _chain()
    x = torch.randint(0, 6, (2, 13))
    x2 = x.clone()
    x2[:, 8] = (x[:, 8] + 1) % 6
    a, b = model(x), model(x2)
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])


def test_truncated_backprop_reaches_only_the_last_iterations():
    """Gradients of a depth-3 run with bptt 1 equal those of one iteration from the detached warm-up state."""
    model = _chain()
    x, y = torch.randint(0, 6, (2, 9)), torch.randint(0, 6, (2, 9))
    model.zero_grad()
    model.loss(x, y, iterations=3, bptt=1).backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    e = model.encode(x)
    with torch.no_grad():
        h = model.core_step(model.core_step(torch.zeros_like(e), e), e)
    logits = model.readout(model.core_step(h, e))
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    want = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == want.keys() and "embedding.weight" in got and "bottom.0.state.q.weight" in got
    for n in want:
        torch.testing.assert_close(got[n], want[n])


def test_entropy_drop_rule():
    model = _chain(iterations=5)
    x = torch.randint(0, 6, (3, 11))
    fixed = model(x, iterations=5, return_all=True)
    never = model.adaptive(x, 5, tau=-1e9, lag=1)  # the entropy never drops by more than -1e9: never stops
    assert (never.iterations == 5).all()
    torch.testing.assert_close(never.logits, fixed[-1])
    torch.testing.assert_close(never.entropies, torch.stack([M.entropy(f) for f in fixed], dim=1))
    at_once = model.adaptive(x, 5, tau=1e9, lag=2)  # stops as soon as the rule can be read: after k + 1
    assert (at_once.iterations == 3).all()
    torch.testing.assert_close(at_once.logits, fixed[2])
    tau, lag = 0.02, 1
    out = model.adaptive(x, 5, tau=tau, lag=lag)
    H, n = out.entropies, out.iterations
    for b in range(3):
        for t in range(11):
            k = int(n[b, t])
            drops = [float(H[b, i - lag, t] - H[b, i, t]) for i in range(lag, k)]
            assert all(d > tau for d in drops[:-1])  # it ran on while the entropy dropped by more than τ
            if k < 5:
                assert drops[-1] <= tau  # and stopped at the first small drop
            torch.testing.assert_close(H[b, k - 1:, t], H[b, k - 1, t].expand(5 - k + 1))  # frozen after


def test_controls_and_baselines_have_matched_parameter_counts():
    cfg = Config()
    from lab.datasets.synthetic import make_task

    task = make_task("s3", n=4, length=8, cache=False)
    counts = {r: n_params(build(cfg, r, task)) for r in ("chaingpt", "one_substep", "transformer", "mamba")}
    assert abs(counts["one_substep"] / counts["chaingpt"] - 1) < 0.01  # only the M β gates differ
    for r in ("transformer", "mamba"):
        assert abs(counts[r] / counts["chaingpt"] - 1) < 0.1, counts  # widths move in steps of n_heads
    assert matched_width(cfg, "transformer", task) % cfg.n_heads == 0


@pytest.mark.parametrize("run", ["transformer", "mamba"])
def test_baselines_read_a_start_token_and_stay_causal(run):
    """The baselines prepend a start token (its own id, output dropped): one output per input position, causal, and
    the same tagger as without it once the start token's row is read."""
    from lab.datasets.synthetic import make_task
    from lab.methods.chaingpt.train import Started

    task = make_task("cyclic", n=4, length=8, cache=False, modulus=3)
    torch.manual_seed(0)
    model = build(Config(), run, task)
    assert isinstance(model, Started) and model.start == task.vocab_size
    x = torch.randint(0, task.vocab_size, (2, 9))
    x2 = x.clone()
    x2[:, 5] = (x[:, 5] + 1) % task.vocab_size
    a, b = model(x), model(x2)
    assert a.shape == (2, 9, task.n_classes)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])
    start = torch.full((2, 1), task.vocab_size)
    torch.testing.assert_close(a, model.tagger(torch.cat([start, x], 1))[:, 1:])
    assert not isinstance(build(Config(baseline_start=False), run, task), Started)


@pytest.mark.parametrize("field, value, allowed", [
    ("state_task", "z7", "one of 's3', 'a5', 'cyclic', 'parity'"),
    ("state_train_length", 0, "an integer in [2, 4096]"),
    ("recall_test_lengths", (-4,), "each value an integer in [2, 4096]"),
    ("state_test_lengths", (8, 32), "lengths longer than the training length 16"),
    ("recall_test_lengths", (32, 64), "lengths longer than the training length 32"),
    ("n_pairs", 11, "an integer in [1, 10]"),
    ("bptt_iterations", 4, "max_iterations=3"),
])
def test_bad_input_names_field_value_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError, match=f"{field}=.* is not allowed; allowed: .*") as info:
        Config(**{field: value})
    assert allowed in str(info.value)


def test_cli_exits_2_on_bad_input():
    from lab.cli import cli

    res = CliRunner().invoke(cli, ["run", "chaingpt", "-P", "ci", "-p", "state_test_lengths=4"])
    assert res.exit_code == 2 and "state_test_lengths=(4,) is not allowed" in res.output
    res = CliRunner().invoke(cli, ["run", "chaingpt", "-P", "ci", "-p", "state_task=dyck"])
    assert res.exit_code == 2 and "state_task='dyck'" in res.output


def test_ci_run_is_consistent(ci_result):
    res = ci_result("chaingpt")
    ds = res.data
    R = int(ds.depth.max())
    # the fixed-depth accuracy of the depth profile is the accuracy the comparison reads
    np.testing.assert_allclose(ds.depth_accuracy.sel(depth=R), ds.state_accuracy.sel(state_run="chaingpt"))
    assert ((ds.adaptive_iterations >= 2) & (ds.adaptive_iterations <= R)).all()  # at least k + 1 = 2
    np.testing.assert_allclose(ds.stop_share.sum("depth"), 1.0)
    assert ((ds.state_accuracy >= 0) & (ds.state_accuracy <= 100)).all()
    assert ((ds.random_accuracy >= 0) & (ds.random_accuracy <= 100)).all()
    assert {r.name for r in res.claims} == {"beats_strongest_baseline", "substeps_raise_accuracy",
                                           "anchors_carry_recall", "adaptive_fewer_iterations_on_easier",
                                           "adaptive_within_a_point", "beats_transformer", "beats_mamba"}
    assert res.claims["beats_mamba"].verdict == "reported"
    assert res.claims.headline.name == "beats_strongest_baseline"
    # at the training length the prefix is the whole sequence; every sequence has as many labelled positions
    np.testing.assert_allclose(ds.prefix_iterations.isel(state_length=0), ds.adaptive_iterations.isel(state_length=0))
    np.testing.assert_allclose(ds.prefix_iterations_se.isel(state_length=0),
                               ds.adaptive_iterations_se.isel(state_length=0))
    assert ((ds.adaptive_iterations_se > 0) & (ds.adaptive_iterations_se < 1)).all()
    assert ((ds.prefix_iterations >= 2) & (ds.prefix_iterations <= R)).all()


def test_standard_error_of_the_iterations_is_over_sequences():
    from lab.methods.chaingpt.train import depth_profile, load_tasks

    cfg = Config.from_profile("ci")
    _, tests = load_tasks(cfg, "state", 0)
    model = _chain(iterations=cfg.max_iterations).float()
    task = tests[cfg.state_test_lengths[-1]]
    prof = depth_profile(model, task, cfg)
    x, _ = task.tensors()
    its = model.adaptive(x, cfg.max_iterations, cfg.stop_tau, cfg.stop_lag).iterations.double()
    per_seq = its.mean(1).numpy()
    assert prof["adaptive_iterations"] == pytest.approx(per_seq.mean())
    assert prof["adaptive_iterations_se"] == pytest.approx(per_seq.std(ddof=1) / np.sqrt(len(per_seq)))
    assert prof["prefix_iterations"] == pytest.approx(its[:, : cfg.state_train_length].mean().item())


def test_claims_follow_the_numbers(ci_result):
    """Rewrite the ci Dataset so that each claim must hold, then so that its control passes too."""
    from lab import api

    ds = ci_result("chaingpt").data.copy(deep=True)
    ds["state_accuracy"].loc[dict(state_run="chaingpt")] = 95.0
    ds["state_accuracy"].loc[dict(state_run="one_substep")] = 60.0
    ds["recall_accuracy"].loc[dict(recall_run="anchors")] = 99.0
    ds["recall_accuracy"].loc[dict(recall_run="window_only")] = 99.5
    table = api.check(ds, "chaingpt")
    assert table["substeps_raise_accuracy"].verdict == "control not competent"  # 60% at its training length too
    ds["state_accuracy"].loc[dict(state_run="one_substep", state_length=int(ds.state_length[0]))] = 95.0
    table = api.check(ds, "chaingpt")
    assert table["substeps_raise_accuracy"].verdict == "holds"
    assert table["anchors_carry_recall"].verdict == "does not discriminate"
    ds["adaptive_iterations"][:] = np.linspace(2.0, 2.9, ds.sizes["state_length"])
    ds["adaptive_iterations_se"][:] = 0.01
    ds["prefix_iterations"][:] = 2.0  # the longest sequences' first positions: as many iterations as the short
    ds["prefix_iterations_se"][:] = 0.01
    ds["depth_accuracy"][:] = np.array([50.0, 70.0, 90.0])[None, :, None]
    ds["adaptive_accuracy"][:] = 89.5
    ds["random_accuracy"][:] = 80.0  # random stopping at the same depths loses 10 pt
    table = api.check(ds, "chaingpt")
    assert table["adaptive_fewer_iterations_on_easier"].verdict == "holds"
    assert table["adaptive_fewer_iterations_on_easier"].measured == pytest.approx(-0.9 / np.sqrt(2e-4))
    assert table["adaptive_within_a_point"].verdict == "holds"
    ds["prefix_iterations"][:] = 2.9  # the same gap at equal difficulty: the rule does not follow difficulty
    assert api.check(ds, "chaingpt")["adaptive_fewer_iterations_on_easier"].verdict == "does not discriminate"
    ds["adaptive_iterations"][:] = np.linspace(2.0, 2.01, ds.sizes["state_length"])  # -0.01 iterations: noise
    ds["adaptive_iterations_se"][:] = 0.05
    assert api.check(ds, "chaingpt")["adaptive_fewer_iterations_on_easier"].verdict == "fails"
    ds["random_accuracy"][:] = 89.6  # random stopping does as well: the rule's choice of tokens adds nothing
    assert api.check(ds, "chaingpt")["adaptive_within_a_point"].verdict == "does not discriminate"


def test_headline_is_a_margin_over_the_strongest_competent_baseline(ci_result):
    from lab import api

    ds = ci_result("chaingpt").data.copy(deep=True)
    train, longest = int(ds.state_length[0]), int(ds.state_length[-1])
    ds["state_accuracy"][:] = 99.0
    ds["state_accuracy"].loc[dict(state_run="chaingpt")] = 95.0
    ds["state_accuracy"].loc[dict(state_run="transformer", state_length=longest)] = 60.0
    ds["state_accuracy"].loc[dict(state_run="mamba", state_length=longest)] = 70.0
    head = api.check(ds, "chaingpt")["beats_strongest_baseline"]
    assert head.verdict == "holds" and head.headline  # 25 pt over the stronger, Mamba
    assert head.measured == 1.0 and head.control_measured == 0.0 and "mamba" in head.detail
    ds["state_accuracy"].loc[dict(state_run="mamba", state_length=longest)] = 80.0  # 15 pt: inside the margin
    assert api.check(ds, "chaingpt")["beats_strongest_baseline"].verdict == "fails"
    ds["state_accuracy"].loc[dict(state_run="mamba", state_length=longest)] = 70.0
    ds["state_accuracy"].loc[dict(state_run="transformer", state_length=train)] = 50.0  # never learned the task
    head = api.check(ds, "chaingpt")["beats_strongest_baseline"]
    assert head.verdict == "control not competent" and [c.passed for c in head.competence] == [False, True]


def test_per_token_depths_reproduce_fixed_and_adaptive_depth():
    """The random-stopping control's forward: every token at r_max is the fixed depth, every token at its adaptive
    count is the adaptive rule's output."""
    model = _chain(iterations=4)
    x = torch.randint(0, 6, (2, 10))
    torch.testing.assert_close(model.per_token(x, torch.full_like(x, 4)), model(x, iterations=4))
    out = model.adaptive(x, 4, tau=0.02)
    torch.testing.assert_close(model.per_token(x, out.iterations), out.logits)


def test_live_trace_and_plots(ci_result):
    import holoviews as hv

    from lab.methods.chaingpt import live, plots

    ds = ci_result("chaingpt").data
    cfg = Config.from_profile("ci")
    trace = live.stopping_trace(cfg, index=1)
    assert live.stopping_trace(cfg, index=1) is trace  # memoised
    L, R = cfg.state_test_lengths[-1], cfg.max_iterations
    assert trace.tokens.shape == trace.iterations.shape == (L,) and trace.entropy.shape == (R, L)
    assert ((trace.iterations >= cfg.stop_lag + 1) & (trace.iterations <= R)).all()
    short = live.stopping_trace(cfg, index=0, length=cfg.state_train_length, tau=1e9)
    assert (short.iterations == cfg.stop_lag + 1).all()
    with pytest.raises(ConfigError, match="length=5 is not allowed"):
        live.stopping_trace(cfg, length=5)
    for fig in (plots.accuracy_vs_length(ds), plots.depth_curves(ds), plots.entropy_curves(ds),
                plots.stop_histogram(ds), plots.training_curves(ds), plots.stopping_trace(trace)):
        hv.render(fig)
    assert "word problem" in plots.discussion(ds)


def test_profiles_validate_and_quick_is_the_default():
    assert Config.from_profile("quick") == Config()
    full = Config.from_profile("full")
    assert full.state_test_lengths[-1] >= 4 * full.state_train_length
    assert dataclasses.replace(Config(), n_seeds=3).seeds == (0, 1, 2)


def test_baselines_trained_longer_than_chaingpt_fit_the_loss_record(tmp_path, monkeypatch):
    """Quick trains the baselines for more steps than ChainGPT: the loss record spans the longest run."""
    from lab.methods.chaingpt.experiment import run

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    cfg = Config.from_profile("ci", baseline_steps=9, steps=5, recall_steps=5)
    ds = run(cfg, progress=False)
    assert ds.sizes["step"] == 9
    assert np.isfinite(ds.train_loss.sel(run="transformer")).all()
