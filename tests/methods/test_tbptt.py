"""Truncated BPTT with burn-in: the subsequences and the burn-in loss, the regressors' zero start and causality, the
stacked LSTM kernel against torch's LSTM (outputs, gradients, independent trainings), the forgetting rate and the
bound's m*, the bound's shape and its leave-one-out comparison, bad input (m >= N, unknown system: exit 2), the device
reaching fit, claims that can fail, and the ci run."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner

from lab.checks import ConfigError
from lab.cli import cli
from lab.methods.tbptt import claims as C
from lab.methods.tbptt import model as M
from lab.methods.tbptt.config import Config
from lab.methods.tbptt.fused import StackedLSTM, window_sampler


def test_subsequences_are_the_overlapping_windows():
    u = np.arange(20, dtype=float)[:, None]
    y = np.stack([u[:, 0] * 10, -u[:, 0]], axis=1)
    x, t = M.subsequences(u, y, N=6, stride=3)
    assert x.shape == (5, 6, 1) and t.shape == (5, 6, 2)  # starts 0, 3, 6, 9, 12 (12 + 6 <= 20)
    assert x[2, :, 0].tolist() == list(range(6, 12))
    assert t[4, -1].tolist() == [170.0, -17.0]
    with pytest.raises(ValueError, match="N=21"):
        M.subsequences(u, y, N=21, stride=1)


def test_burn_in_loss_skips_the_first_m_outputs():
    torch.manual_seed(0)
    pred = torch.randn(4, 10, 2, requires_grad=True)
    target = torch.randn(4, 10, 2)
    m = 3
    loss = M.burn_in_loss(pred, target, m)
    manual = sum(((pred[b, j] - target[b, j]) ** 2).sum() for b in range(4) for j in range(m, 10)) / (4 * 7 * 2)
    assert loss.item() == pytest.approx(manual.item(), rel=1e-6)
    loss.backward()
    assert torch.all(pred.grad[:, :m] == 0) and torch.all(pred.grad[:, m:] != 0)
    assert M.burn_in_loss(pred, target, 0).item() == pytest.approx(((pred - target) ** 2).mean().item())
    with pytest.raises(ValueError, match="m=10"):
        M.burn_in_loss(pred, target, 10)


@pytest.mark.parametrize("kind", M.KINDS)
def test_regressors_start_from_zero_and_are_causal(kind):
    model = M.build_model(kind, 1, 2, 8, seed=0)
    x = torch.randn(3, 12, 1)
    out = model(x)
    assert out.shape == (3, 12, 2)
    x2 = x.clone()
    x2[:, 6:] += 1.0  # change the future: the past outputs stay
    torch.testing.assert_close(model(x2)[:, :6], out[:, :6])
    assert not torch.allclose(model(x2)[:, 6:], out[:, 6:])
    # a window is a fresh start: the output at t = 0 depends on u_0 alone (zero initial state)
    y0 = model(x[:, :1])
    torch.testing.assert_close(y0[:, 0], out[:, 0])
    again = M.build_model(kind, 1, 2, 8, seed=0)
    torch.testing.assert_close(again(x), out)  # the weights come from the seed alone
    np.testing.assert_allclose(M.simulate(model, x[0].numpy()), out[0].detach().numpy(), atol=1e-5)


def _batch_last(x):
    return x.permute(0, 2, 3, 1).contiguous()  # (K, B, N, c) -> (K, N, c, B)


def test_stacked_lstm_matches_torch_outputs_and_gradients():
    models = [M.build_model("lstm", 2, 3, 8, seed=s) for s in range(3)]
    stack = StackedLSTM.from_models(models)
    x = torch.randn(3, 5, 17, 2)
    ref = torch.stack([m(x[k]) for k, m in enumerate(models)])  # (K, B, N, n_out)
    out = stack(_batch_last(x)).permute(0, 3, 1, 2)
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)
    y = torch.randn_like(ref)
    ((ref - y) ** 2).sum().backward()
    ((out - y) ** 2).sum().backward()
    pairs = {"w_ih": "core.weight_ih_l0", "w_hh": "core.weight_hh_l0", "bias": "core.bias_ih_l0",
             "w_out": "head.weight", "b_out": "head.bias"}
    for mine, theirs in pairs.items():
        expected = torch.stack([m.get_parameter(theirs).grad for m in models])
        torch.testing.assert_close(getattr(stack, mine).grad, expected, atol=1e-4, rtol=1e-4)
    again = M.build_model("lstm", 2, 3, 8, seed=99)
    stack.unstack(1, again)
    torch.testing.assert_close(again(x[1]), ref[1], atol=2e-6, rtol=1e-5)


def test_stacked_models_train_as_separate_ones():
    """Two models trained in one stack end where each ends trained alone (same seed: same batches)."""
    from lab.core.train import fit

    rng = np.random.default_rng(0)
    u, y = rng.standard_normal((200, 1)), rng.standard_normal((200, 2))
    x, t = M.subsequences(u, y, 20, 5)

    def train(seeds, ms):
        stack = StackedLSTM.from_models([M.build_model("lstm", 1, 2, 4, seed=s) for s in seeds])
        w = torch.zeros(len(seeds), 20)
        for k, m in enumerate(ms):
            w[k, m:] = 1.0 / (20 - m)
        fit(stack, window_sampler(x, t, seeds, 8), steps=15, lr=1e-2, clip=None, progress=False,
            loss=lambda model, b: ((((model(b[0]) - b[1]) ** 2).mean((2, 3)) * w).sum(1)).sum())
        return stack

    both = train([0, 7], [0, 10])
    for k, (s, m) in enumerate([(0, 0), (7, 10)]):
        alone = train([s], [m])
        torch.testing.assert_close(both.w_hh[k], alone.w_hh[0], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(both.b_out[k], alone.b_out[0], atol=1e-5, rtol=1e-4)


class _Leaky(torch.nn.Module):
    """``h_t = a h_{t-1} + u_t``, ``y_t = h_t``: forgets its initial state as ``a^t``."""

    def __init__(self, a):
        super().__init__()
        self.a = a

    def forward(self, x):
        h, out = torch.zeros(x.shape[0], 1), []
        for j in range(x.shape[1]):
            h = self.a * h + x[:, j]
            out.append(h)
        return torch.stack(out, 1)


def test_forgetting_rate_and_the_bounds_m_star():
    u = np.random.default_rng(0).standard_normal((600, 1))
    assert M.forgetting_rate(_Leaky(0.9), u, length=100) == pytest.approx(0.9, abs=1e-3)
    assert M.forgetting_rate(_Leaky(0.985), u, length=200) == pytest.approx(0.985, abs=1e-3)
    lam = math.exp(-1 / 66.7)  # the RLC circuit's memory: 2 L0 / R over the sampling time
    assert M.bound_m_star(lam, 50) == 0.0  # the memory outlasts the window
    assert M.bound_m_star(lam, 100) == pytest.approx(100 - 66.7, abs=0.01)
    assert M.bound_m_star(1.0, 100) == 0.0


def test_window_sampler_draws_per_seed():
    x = torch.arange(30, dtype=torch.float32)[:, None, None].expand(30, 4, 1)
    t = torch.zeros(30, 4, 2)
    sample = window_sampler(x, t, [0, 0, 5], batch_size=8)
    xb, tb = sample(0)
    assert xb.shape == (3, 4, 1, 8) and tb.shape == (3, 4, 2, 8)
    assert torch.equal(xb[0], xb[1]) and not torch.equal(xb[0], xb[2])
    seen = torch.cat([sample(i)[0][0, 0, 0] for i in range(1, 3)] + [xb[0, 0, 0]])
    assert len(set(seen.tolist())) == 24  # an epoch draws without replacement


def test_bound_fit_recovers_the_shape_and_its_optimum():
    N, lam, a, c = 100, 0.96, 0.05, 2.0
    m = np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 90], float)
    y = a + c * lam**m / (N - m)
    fit = M.fit_bound(m, y, N)
    assert fit.lam == pytest.approx(lam, abs=2e-3)
    assert fit.sse < 1e-4 * ((y - y.mean()) ** 2).sum()  # λ on a grid of ~0.2% steps in 1 - λ
    grid = np.arange(0, N, dtype=float)
    assert fit.m_star == pytest.approx(grid[np.argmin(lam**grid / (N - grid))], abs=1.0)  # N + 1/ln λ
    assert fit.m_star == pytest.approx(N + 1 / math.log(lam), abs=1.0)
    r2, sb, sf = M.loo_r2(m, y, N)
    assert r2 > 0.99 and sb < sf


def test_loo_r2_does_not_credit_the_shape_with_noise():
    rng = np.random.default_rng(0)
    m = np.array([0, 10, 20, 30, 40], float)
    r2s = [M.loo_r2(m, 1.0 + 0.01 * rng.standard_normal(5), 50)[0] for _ in range(30)]
    assert np.mean(r2s) < 0.0  # a 3-parameter shape over noise predicts left-out points worse than the mean
    with pytest.raises(ValueError, match="below N=40"):
        M.fit_bound(m, np.ones(5), 40)


def test_bad_config_names_field_value_and_allowed():
    with pytest.raises(ConfigError, match=r"burn_in_fractions=\(0.0, 0.5, 0.505\) is not allowed; allowed: "
                                          r"fractions whose burn-ins .* \(at N = 50: \(0, 25, 25\)\)"):
        Config(lengths=(50,), burn_in_fractions=(0.0, 0.5, 0.505))  # 25.25 rounds to 25
    with pytest.raises(ConfigError, match=r"burn_in_fractions=\(0.1, 0.5, 0.9\) is not allowed; allowed: values "
                                          r"starting with 0"):
        Config(burn_in_fractions=(0.1, 0.5, 0.9))
    assert Config().burn_ins(200) == (0, 50, 110, 150, 180) and Config().burn_ins(50) == (0, 12, 28, 38, 45)
    with pytest.raises(ConfigError, match=r"system='pendulum' is not allowed; allowed: one of 'linear', 'rlc'"):
        Config.from_profile("ci", system="pendulum")
    with pytest.raises(ConfigError, match="models="):
        Config(models=("lstm", "transformer"))


def test_the_benchmark_record_is_the_papers_rlc_data():
    from lab.methods.tbptt import train as T

    s = T.load_benchmark()
    assert {k: v.shape for k, v in s.u.items()} == {"train": (6667, 1), "val": (3333, 1), "test": (3333, 1)}
    assert {k: v.shape for k, v in s.y.items()} == {"train": (6667, 2), "val": (3333, 2), "test": (3333, 2)}
    assert all(np.isfinite(v).all() for v in (*s.u.values(), *s.y.values()))
    # the CSVs' statistics: input 83.2 V, capacitor voltage 98.7 V, inductor current 4.72 A (training record)
    np.testing.assert_allclose(s.u["train"].std(0), [83.198], rtol=1e-4)
    np.testing.assert_allclose(s.y["train"].std(0), [98.658, 4.7239], rtol=1e-4)
    assert s.u["train"][0, 0] == pytest.approx(-2.1327, abs=1e-4) and s.y["train"][0].tolist() == [0.0, 0.0]
    rec = T.load_records(Config())  # the default: standardised with the training record's statistics
    np.testing.assert_allclose(rec.y["train"].mean(0), 0.0, atol=1e-9)
    np.testing.assert_allclose(rec.y["train"].std(0), 1.0, rtol=1e-9)
    assert rec.n_in == 1 and rec.n_out == 2 and (T.BENCHMARK.parent / "README.md").read_text().count("MIT") >= 1


@pytest.mark.parametrize("args, fragment", [
    (["run", "tbptt", "-P", "ci", "-p", "burn_in_fractions=0,0.3,0.33"], "burn_in_fractions=(0.0, 0.3, 0.33) is not "
                                                                           "allowed"),
    (["run", "tbptt", "-p", "system=pendulum"], "system='pendulum' is not allowed"),
])
def test_cli_bad_input_exits_2(tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 2, out.output
    assert fragment in out.output


def test_device_reaches_fit(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    import lab.core.train
    from lab.methods.tbptt import train as T

    seen = {}
    real = lab.core.train.fit

    def spy(*args, **kwargs):
        seen["device"] = kwargs.get("device")
        return real(*args, **kwargs)

    monkeypatch.setattr(lab.core.train, "fit", spy)
    cfg = Config.from_profile("ci", device="auto")
    rec = T.load_records(cfg)
    tr = T.train_run(cfg, rec, "lstm", 12, 4, seed=0)
    assert seen["device"] == "auto"
    assert next(tr.model.parameters()).device.type == "cpu"
    assert set(T.evaluate(tr.model, rec)) == {"train", "val", "test"}


#: the synthetic runs' burn-in grids: N = 50 and N = 200, fractions 0, 0.2, 0.4, 0.6, 0.8
GRID = {50: np.array([0, 10, 20, 30, 40]), 200: np.array([0, 40, 80, 120, 160])}


def _synthetic(train_curve_short, train_curve_long, rerun_gain=0.0, test_factor=1.0, lam=0.95):
    """A results Dataset with given seed-mean training curves over :data:`GRID` (validation = training, test =
    factor x training), the m = 0 networks forgetting at ``lam`` (memory -1/ln λ: 19.5 samples at 0.95)."""
    mse = np.zeros((1, 2, 5, 2, 3))
    for i, c in enumerate((train_curve_short, train_curve_long)):
        c = np.asarray(c, float)
        for s, jitter in enumerate((0.999, 1.001)):
            mse[0, i, :, s, 0] = c * jitter
            mse[0, i, :, s, 1] = c * jitter
            mse[0, i, :, s, 2] = c * jitter * np.where(np.arange(5) > 0, test_factor, 1.0)
    rerun = mse[:, :, 0] * (1 - rerun_gain)
    return xr.Dataset({"mse": (("model", "N", "frac", "seed", "split"), mse),
                       "burn_in": (("N", "frac"), np.stack([GRID[50], GRID[200]])),
                       "mse_rerun": (("model", "N", "seed", "split"), rerun),
                       "forget_lambda": (("model", "N", "seed"), np.full((1, 2, 2), lam))},
                      coords={"model": ["lstm"], "N": [50, 200], "frac": [0.0, 0.2, 0.4, 0.6, 0.8], "seed": [0, 1],
                              "split": ["train", "val", "test"]}, attrs={"system": "synthetic"})


def _curves(a_short=0.05, c_short=10.0):
    short = a_short + c_short * 0.95 ** GRID[50] / (50 - GRID[50])  # the bound's shape, optimum m* = 30
    long = 0.07 + 1.0 * 0.95 ** GRID[200] / (200 - GRID[200])
    return short, long


def test_claims_hold_on_the_papers_shape_and_fail_without_it():
    short, long = _curves()
    good = _synthetic(short, long, rerun_gain=0.01)
    table = {c.name: c.evaluate(good) for c in C.CLAIMS}
    assert C.m_star(good, 50) == 30 and C.claim_length(good) == 50
    assert C.predicted_m_star(good, 50) == pytest.approx(50 - 1 / -math.log(0.95), abs=1e-6)  # 30.5
    assert table["burn_in_gain"].verdict == "holds"
    assert table["bound_shape"].verdict == "holds"
    assert table["bound_m_star"].verdict == "holds", table["bound_m_star"].detail
    flat = _synthetic(np.full(5, 0.1) + 0.001 * np.array([0, 1, -1, 1, 0]), np.full(5, 0.1))
    table = {c.name: c.evaluate(flat) for c in C.CLAIMS}
    assert table["burn_in_gain"].verdict == "fails"
    assert table["bound_shape"].verdict == "fails"
    assert table["bound_m_star"].verdict != "holds"
    # the training gain is there, but the test error got worse: the claim fails on its second half
    worse = _synthetic(short, long, test_factor=3.0)
    assert C.CLAIMS[0].evaluate(worse).verdict == "fails"
    # re-running m = 0 gives the same gain: the claim does not discriminate
    noisy = _synthetic(short, long, rerun_gain=0.9)
    assert C.CLAIMS[0].evaluate(noisy).verdict == "does not discriminate"


def test_the_bounds_m_star_can_fail_and_its_control_can_pass():
    short, long = _curves()
    # networks that never forget: the bound predicts m* = 0 everywhere, the curves say 30 and 160
    ds = _synthetic(short, long, lam=0.9999)
    assert C.claim_length(ds) == 200  # no N with a predicted m* > 0: the longest
    assert C.CLAIMS[1].name == "bound_m_star" and C.CLAIMS[1].evaluate(ds).verdict == "fails"
    # curves whose best burn-in is 0 at every N: the bound (30.5 at N = 50) misses, the control m* = 0 is right
    rising = _synthetic(0.05 + 0.001 * GRID[50], 0.05 + 0.0001 * GRID[200])
    result = C.CLAIMS[1].evaluate(rising)
    assert result.verdict == "fails" and result.control_measured == pytest.approx(0.0)


def test_a_gain_over_an_m0_model_that_never_learned_proves_nothing():
    short, long = _curves()  # m = 0: MSE 0.25, competent
    good = {c.name: c.evaluate(_synthetic(short, long, rerun_gain=0.01)) for c in C.CLAIMS}
    assert good["burn_in_gain"].competence[0].measured == pytest.approx(0.25 * 1.001)
    assert good["burn_in_gain"].competent
    # the same relative curve, scaled so that m = 0 explains no more than the mean (MSE 1): the same gain, no proof
    bad = {c.name: c.evaluate(_synthetic(4 * short, long, rerun_gain=0.01)) for c in C.CLAIMS}
    assert bad["burn_in_gain"].measured == pytest.approx(good["burn_in_gain"].measured)
    assert bad["burn_in_gain"].verdict == "control not competent"
    assert [c.name for c in C.CLAIMS if c.headline] == ["burn_in_gain"]


def test_ci_run(ci_result):
    res = ci_result("tbptt")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert ds.mse.dims == ("model", "N", "frac", "seed", "split")
    assert ds.sizes["model"] == 3 and list(ds.N.values) == list(cfg.lengths)
    assert [list(ds.burn_in.sel(N=N).values) for N in cfg.lengths] == [list(cfg.burn_ins(N)) for N in cfg.lengths]
    assert np.all(np.isfinite(ds.mse.values)) and np.all(np.isfinite(ds.mse_rerun.values))
    assert np.all((ds.forget_lambda.values > 0) & (ds.forget_lambda.values <= 1))
    assert len(res.claims) == len(C.CLAIMS)
    for r in res.claims:
        assert math.isfinite(r.measured), r.detail
    # every model learned something: better than predicting the mean (MSE 1 on standardised outputs)
    assert float(ds.mse.sel(split="train").min()) < 1.0
