"""Truncated BPTT with burn-in: the subsequences and the burn-in loss, the regressors' zero start and causality, the
bound's shape and its leave-one-out comparison, bad input (m >= N, unknown system: exit 2), the device reaching
fit, claims that can fail, and the ci run."""

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
    with pytest.raises(ConfigError, match=r"burn_ins=\(0, 10, 50\) is not allowed; allowed: each value below the "
                                          r"shortest N = 50 \(m < N\)"):
        Config(burn_ins=(0, 10, 50))
    with pytest.raises(ConfigError, match=r"burn_ins=\(5, 10, 20\) is not allowed; allowed: values starting with 0"):
        Config(burn_ins=(5, 10, 20))
    with pytest.raises(ConfigError, match=r"system='pendulum' is not allowed; allowed: one of 'linear', 'rlc'"):
        Config.from_profile("ci", system="pendulum")
    with pytest.raises(ConfigError, match="models="):
        Config(models=("lstm", "transformer"))


@pytest.mark.parametrize("args, fragment", [
    (["run", "tbptt", "-P", "ci", "-p", "burn_ins=0,4,12"], "burn_ins=(0, 4, 12) is not allowed"),
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


def _synthetic(train_curve_short, train_curve_long, rerun_gain=0.0, test_factor=1.0):
    """A results Dataset with given seed-mean training curves (validation = training, test = factor x training)."""
    ms = np.array([0, 10, 20, 30, 40])
    mse = np.zeros((1, 2, 5, 2, 3))
    for i, c in enumerate((train_curve_short, train_curve_long)):
        c = np.asarray(c, float)
        for s, jitter in enumerate((0.999, 1.001)):
            mse[0, i, :, s, 0] = c * jitter
            mse[0, i, :, s, 1] = c * jitter
            mse[0, i, :, s, 2] = c * jitter * np.where(ms > 0, test_factor, 1.0)
    rerun = mse[:, :, 0] * (1 - rerun_gain)
    return xr.Dataset({"mse": (("model", "N", "m", "seed", "split"), mse),
                       "mse_rerun": (("model", "N", "seed", "split"), rerun)},
                      coords={"model": ["lstm"], "N": [50, 200], "m": ms, "seed": [0, 1],
                              "split": ["train", "val", "test"]}, attrs={"system": "synthetic"})


def test_claims_hold_on_the_papers_shape_and_fail_without_it():
    m = np.array([0, 10, 20, 30, 40], float)
    short = 0.05 + 10.0 * 0.95**m / (50 - m)  # a bound-shaped curve with an interior optimum (m* = 30)
    long = 0.07 + 1.0 * 0.95**m / (200 - m)
    good = _synthetic(short, long, rerun_gain=0.01)
    table = {c.name: c.evaluate(good) for c in C.CLAIMS}
    assert C.m_star(good, 50) == 30
    assert table["burn_in_gain"].verdict == "holds"
    assert table["bound_shape"].verdict == "holds"
    assert table["short_vs_long"].verdict == "holds"
    flat = _synthetic(np.full(5, 0.1) + 0.001 * np.array([0, 1, -1, 1, 0]), np.full(5, 0.1))
    table = {c.name: c.evaluate(flat) for c in C.CLAIMS}
    assert table["burn_in_gain"].verdict == "fails"
    assert table["bound_shape"].verdict == "fails"
    assert table["short_vs_long"].verdict == "fails"
    # the training gain is there, but the test error got worse: the claim fails on its second half
    worse = _synthetic(short, long, test_factor=3.0)
    assert C.CLAIMS[0].evaluate(worse).verdict == "fails"
    # re-running m = 0 gives the same gain: the claim does not discriminate
    noisy = _synthetic(short, long, rerun_gain=0.9)
    assert C.CLAIMS[0].evaluate(noisy).verdict == "does not discriminate"


def test_a_gain_over_an_m0_model_that_never_learned_proves_nothing():
    m = np.array([0, 10, 20, 30, 40], float)
    short = 0.05 + 10.0 * 0.95**m / (50 - m)  # m = 0: MSE 0.25, competent
    long = 0.07 + 1.0 * 0.95**m / (200 - m)
    good = {c.name: c.evaluate(_synthetic(short, long, rerun_gain=0.01)) for c in C.CLAIMS}
    assert good["burn_in_gain"].competence[0].measured == pytest.approx(0.25 * 1.001)
    assert good["burn_in_gain"].competent and good["short_vs_long"].competent
    # the same relative curve, scaled so that m = 0 explains no more than the mean (MSE 1): the same gain, no proof
    bad = {c.name: c.evaluate(_synthetic(4 * short, long, rerun_gain=0.01)) for c in C.CLAIMS}
    assert bad["burn_in_gain"].measured == pytest.approx(good["burn_in_gain"].measured)
    assert bad["burn_in_gain"].verdict == "control not competent"
    assert bad["short_vs_long"].verdict == "control not competent"  # it checks both lengths
    assert [c.name for c in C.CLAIMS if c.headline] == ["burn_in_gain"]


def test_ci_run(ci_result):
    res = ci_result("tbptt")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert ds.mse.dims == ("model", "N", "m", "seed", "split")
    assert ds.sizes["model"] == 3 and list(ds.N.values) == list(cfg.lengths)
    assert np.all(np.isfinite(ds.mse.values)) and np.all(np.isfinite(ds.mse_rerun.values))
    assert len(res.claims) == len(C.CLAIMS)
    for r in res.claims:
        assert math.isfinite(r.measured), r.detail
    # every model learned something: better than predicting the mean (MSE 1 on standardised outputs)
    assert float(ds.mse.sel(split="train").min()) < 1.0
