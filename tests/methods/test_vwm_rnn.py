"""VWM behaviour-fitting RNN: the swap function, the input code, the fixed output plane, the DDPM schedule and
loss against their closed forms, reverse diffusion with the exact denoiser recovering the target mixture, the Bays
mixture's EM recovering known weights, bad input (a swap probability outside [0, 1]: exit 2), the device reaching
fit, claims that can fail, and the ci run."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner

from lab.checks import ConfigError
from lab.cli import cli
from lab.methods.vwm_rnn import claims as C
from lab.methods.vwm_rnn import model as M
from lab.methods.vwm_rnn.config import Config
from tests.conftest import assert_trained_here_as_pooled


def test_swap_probability_falls_with_distance_and_matches_the_softmax():
    d = np.linspace(0, np.pi, 50)
    p = M.swap_probability(d, 0.5, 1.5)
    assert p[0] == pytest.approx(0.5) and np.all(np.diff(p) < 0)
    # p_max = 1/2: the two-item softmax over -Δ² / w
    np.testing.assert_allclose(p, np.exp(-d**2 / 1.5) / (1 + np.exp(-d**2 / 1.5)), rtol=1e-12)
    np.testing.assert_allclose(M.swap_probability(d + 2 * np.pi, 0.5, 1.5), p, atol=1e-12)  # circular
    torch.testing.assert_close(M.swap_probability(torch.tensor(d), 0.3, 1.5), torch.tensor(0.6 * p))


def test_generator_swaps_at_its_probability():
    g = torch.Generator().manual_seed(0)
    tr = M.sample_trials(40_000, g, 0.5, 1.5)
    close, far = tr.distance < 0.3, tr.distance > 2.0
    assert tr.swapped[close].float().mean().item() == pytest.approx(tr.p_swap[close].mean().item(), abs=0.02)
    assert tr.swapped[far].float().mean().item() < 0.02
    x = M.behaviour(tr, 2.5, 0.1, g)
    ang = torch.atan2(x[:, 1], x[:, 0])
    chosen = torch.where(tr.swapped, tr.col[:, 1], tr.col[:, 0])
    assert M.wrap(ang - chosen).abs().max().item() < 0.3  # every draw sits at the chosen colour


def test_input_code_is_conjunctive_and_timed():
    g = torch.Generator().manual_seed(1)
    tr = M.sample_trials(3, g, 0.5, 1.5)
    tim = M.Timing(2, 1, 1, 1, 4)
    s = M.inputs(tr, tim, n_loc=8, tuning=2.0)
    assert s.shape == (3, 9, 26)
    phi = torch.arange(8) * (2 * math.pi / 8)
    f = torch.exp(2.0 * (torch.cos(tr.loc[0, :, None] - phi) - 1))  # (2, 8)
    expect = (f[:, :, None] * torch.stack([tr.col[0].cos(), tr.col[0].sin()], -1)[:, None]).sum(0).reshape(16)
    torch.testing.assert_close(s[0, 0, :16], expect)
    torch.testing.assert_close(s[0, 3, 16:24], f[0])  # the cue: the cued (first) item's location
    assert torch.all(s[:, 2] == 0) and torch.all(s[:, 4] == 0)  # the delays
    assert torch.all(s[:, 5:, -2] == 1) and s[0, 5:, -1].tolist() == pytest.approx([1.0, 0.75, 0.5, 0.25])
    # swapping the items' order changes nothing: the code sums them
    tr2 = M.Trials(tr.loc.flip(1), tr.col.flip(1), tr.p_swap, tr.swapped)
    torch.testing.assert_close(M.inputs(tr2, tim)[:, 0, :16], s[:, 0, :16])


def test_readout_is_fixed_orthonormal_and_teacher_forcing_sets_only_the_plane():
    net = M.RateRNN(20, 26, 0.5, 0.0, seed=0)
    torch.testing.assert_close(net.W_x @ net.W_x.T, torch.eye(2), atol=1e-6, rtol=0)
    assert "W_x" not in dict(net.named_parameters())  # not trained
    r, x = torch.randn(4, 20), torch.randn(4, 2)
    forced = net.with_output(r, x)
    torch.testing.assert_close(net.readout(forced), x, atol=1e-6, rtol=0)
    torch.testing.assert_close(net.perp(forced), net.perp(r), atol=1e-6, rtol=0)
    noisy = M.RateRNN(20, 26, 0.5, 1.0, seed=0)
    a, b = noisy.step(r, torch.zeros(4, 26)), net.step(r, torch.zeros(4, 26))
    torch.testing.assert_close(noisy.readout(a), net.readout(b), atol=1e-5, rtol=0)  # η stays off the plane
    assert not torch.allclose(a, b)


def test_schedule_and_the_noise_read_out_of_the_posterior_mean():
    sched = M.Schedule(10, 0.05, 0.5)
    ab = torch.cumprod(1 - torch.linspace(0.05, 0.5, 10, dtype=torch.float64), 0)
    torch.testing.assert_close(sched.alpha_bar, ab)
    # β̃_1 = 0 and β̃_k = β_k (1 - ᾱ_{k-1}) / (1 - ᾱ_k)
    assert float(sched.beta_tilde[0]) == 0.0
    assert float(sched.beta_tilde[4]) == pytest.approx(float(sched.beta[4] * (1 - ab[3]) / (1 - ab[4])))
    # the DDPM posterior mean of x_{k-1}, solved for ε, gives back ε exactly
    x0, eps = torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64)
    for k in (1, 5, 10):
        a_b, sab, sa, beta = sched.coef(k)
        xk = a_b * x0 + sab * eps
        mu = (xk - beta / sab * eps) / sa
        torch.testing.assert_close((xk - sa * mu) * sab / beta, eps)



def test_reverse_diffusion_with_the_exact_denoiser_samples_the_mixture():
    """The sampler of RateRNN run with the exact mixture denoiser in place of the network's F reproduces the target
    mixture's weights: the sampling code (x_T, the reverse steps, β̃ noise) is right."""
    T, R, sd, w = 30, 2.5, 0.3, 0.3
    sched = M.Schedule(T, 0.01, 0.5)
    m = torch.tensor([[R, 0.0], [-R, 0.0]], dtype=torch.float32)
    net = M.RateRNN(6, 26, 1.0, 0.0, seed=0)
    k_of_step = {}

    def step(r, s, gen=None):  # leak 1: r_{t+1} = F; F puts the posterior mean into the plane
        k = int(round(float(s[0, -1]) * T))
        if k == 0:  # before the response period
            return r
        a_b, sab, sa, beta = sched.coef(k)
        x = net.readout(r)
        var = a_b**2 * sd**2 + sab**2
        logp = -((x[:, None] - a_b * m) ** 2).sum(-1) / (2 * var) + torch.log(torch.tensor([1 - w, w]))
        resp = torch.softmax(logp, -1)
        x0_hat = (resp[:, :, None] * (m + a_b * sd**2 / var * (x[:, None] - a_b * m))).sum(1)
        eps_hat = (x - a_b * x0_hat) / sab
        mu = (x - beta / sab * eps_hat) / sa
        k_of_step[k] = True
        return net.with_output(torch.zeros_like(r), mu)

    net.step = step
    s = torch.zeros(4000, 2 + T, 26)
    s[:, 2:, -1] = torch.linspace(1.0, 1.0 / T, T)
    g = torch.Generator().manual_seed(0)
    x = net.sample(s, 2, sched, g)
    assert sorted(k_of_step) == list(range(1, T + 1))
    frac = (x[:, 0] < 0).float().mean().item()
    assert frac == pytest.approx(w, abs=0.03)
    # each mode's spread: the reverse noise β̃ (the posterior variance given x_0) makes it somewhat narrower than
    # the target's over 30 large steps, never wider
    assert 0.7 * sd < x[:, 1].std().item() < 1.05 * sd


def test_ddpm_loss_is_the_eps_loss_and_trains_down():
    torch.manual_seed(0)
    tim, sched = M.Timing(1, 1, 1, 1, 4), M.Schedule(4, 0.05, 0.5)
    g = torch.Generator().manual_seed(0)
    tr = M.sample_trials(64, g, 0.5, 1.5)
    s, x0 = M.inputs(tr, tim), M.behaviour(tr, 2.5, 0.4, g)
    net = M.RateRNN(24, 26, 0.5, 0.0, seed=0)
    loss = net.ddpm_loss(s, x0, sched, tim.before_response)
    assert loss.item() > 0 and loss.requires_grad
    loss.backward()
    assert net.W.grad.abs().sum() > 0 and net.U.grad.abs().sum() > 0
    mse = net.mse_loss(s, x0, tim.before_response)
    assert mse.item() > 0


@pytest.mark.parametrize("w_t, w_nt", [(0.8, 0.15), (0.55, 0.4), (0.95, 0.0)])
def test_mixture_em_recovers_known_weights(w_t, w_nt):
    rng = np.random.default_rng(0)
    n, kappa = 6000, 12.0
    target, nontarget = rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, n)
    which = rng.choice(3, n, p=[w_t, w_nt, 1 - w_t - w_nt])
    centre = np.where(which == 0, target, nontarget)
    resp = np.where(which == 2, rng.uniform(-np.pi, np.pi, n), centre + rng.vonmises(0, kappa, n))
    fit = M.fit_mixture(resp, target, nontarget)
    assert fit.w_t == pytest.approx(w_t, abs=0.03) and fit.w_nt == pytest.approx(w_nt, abs=0.03)
    assert fit.kappa == pytest.approx(kappa, rel=0.1)
    assert fit.w_t + fit.w_nt + fit.w_u == pytest.approx(1.0)


def test_kappa_from_r_inverts_a1():
    from scipy.special import i0e, i1e

    for k in (0.1, 0.8, 2.0, 5.0, 30.0, 200.0):
        assert M.kappa_from_r(i1e(k) / i0e(k)) == pytest.approx(k, rel=1e-4)


def test_bad_config_names_field_value_and_allowed():
    with pytest.raises(ConfigError, match=r"swap_max=1.5 is not allowed; allowed: a finite number in \[0, 1\]"):
        Config(swap_max=1.5)
    with pytest.raises(ConfigError, match=r"swap_max=-0.1 is not allowed"):
        Config.from_profile("ci", swap_max=-0.1)
    with pytest.raises(ConfigError, match=r"beta_last=0.01 is not allowed; allowed: a number >= beta_first"):
        Config(beta_first=0.05, beta_last=0.01)
    with pytest.raises(ConfigError, match=r"far=0.5 is not allowed"):
        Config(close=1.0, far=0.5)
    with pytest.raises(ConfigError, match="activation="):
        Config(activation="sigmoid")


@pytest.mark.parametrize("args, fragment", [
    (["run", "vwm_rnn", "-P", "ci", "-p", "swap_max=1.2"], "swap_max=1.2 is not allowed"),
    (["run", "vwm_rnn", "-p", "diffusion_steps=1"], "diffusion_steps=1 is not allowed"),
])
def test_cli_bad_input_exits_2(tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 2, out.output
    assert fragment in out.output


def test_device_reaches_fit(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    import lab.core.train
    from lab.methods.vwm_rnn import train as T

    seen = {}
    real = lab.core.train.fit

    def spy(*args, **kwargs):
        seen["device"] = kwargs.get("device")
        return real(*args, **kwargs)

    monkeypatch.setattr(lab.core.train, "fit", spy)
    cfg = Config.from_profile("ci", device="auto", ddpm_steps=3)
    tr = T.train_run(cfg, "ddpm", seed=0)
    assert seen["device"] == "auto" and len(tr.curves["loss"]) == 3
    assert next(tr.model.parameters()).device.type == "cpu"
    again = T.train_run(cfg, "ddpm", seed=0)  # from the cache
    assert again.loaded
    torch.testing.assert_close(again.model.W, tr.model.W)


def _synthetic(ddpm_close, ddpm_far, mse_close, mse_far, n=3000, seed=0, mse_skill=0.9):
    """A results Dataset whose responses come from known mixtures: DDPM and MSE swap at the given rates on close
    and far trials; the MSE responses on swap trials sit at the colours' midpoint (averaging); the MSE-trained
    RNN's competence is ``mse_skill``."""
    rng = np.random.default_rng(seed)
    target, nontarget = rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, n)
    dist = rng.uniform(0, np.pi, n)
    close, far = dist < np.pi / 4, dist > np.pi / 2

    def responses(p_close, p_far, average):
        p = np.where(close, p_close, np.where(far, p_far, 0.5 * (p_close + p_far)))
        swap = rng.random(n) < p
        mid = target + M.wrap(nontarget - target) / 2
        centre = np.where(swap, mid if average else nontarget, target)
        return centre + rng.vonmises(0, 20.0, n)

    models = ("ddpm", "mse", "untrained", "generator")
    resp = np.stack([responses(ddpm_close, ddpm_far, False), responses(mse_close, mse_far, True),
                     rng.uniform(-np.pi, np.pi, n), responses(0.45, 0.05, False)])[None]  # (1, 4, n)
    fits = np.zeros((1, 4, 3, 4))
    for k in range(4):
        for j, m in enumerate((np.ones(n, bool), close, far)):
            f = M.fit_mixture(resp[0, k, m], target[m], nontarget[m])
            fits[0, k, j] = [f.w_t, f.w_nt, f.w_u, f.kappa]
    return xr.Dataset(
        {"response": (("seed", "model", "trial"), resp), "mixture": (("seed", "model", "subset", "param"), fits),
         "target": ("trial", target), "nontarget": ("trial", nontarget), "distance": ("trial", dist),
         "mse_mean_skill": ("seed", [mse_skill])},
        coords={"seed": [0], "model": list(models), "subset": ["all", "close", "far"],
                "param": ["w_t", "w_nt", "w_u", "kappa"]},
        attrs={"close": np.pi / 4, "far": np.pi / 2, "generator_swap_rate": 0.2, "cued_colour_mean_skill": 0.8})


def test_claims_hold_on_a_swapping_network_and_its_averaging_control():
    ds = _synthetic(0.45, 0.05, 0.45, 0.05)
    results = {c.name: c.evaluate(ds) for c in C.CLAIMS}
    assert results["multimodal"].verdict == "holds"
    assert results["distance_dependent_swaps"].verdict == "holds"  # the midpoint is not the non-target
    # the MSE-trained control remembers the cued item as well: w_T cannot tell the two apart, so it is a report row
    assert results["target_weight"].verdict == "reported"
    assert results["target_weight"].control_measured >= 0.5
    # as precise as the generator (both von Mises κ 20 about their centres): κ ratio near 1, a report row
    assert results["precision"].verdict == "reported"
    assert results["precision"].measured == pytest.approx(1.0, abs=0.3)
    assert results["multimodal"].control_measured < 0.1
    assert all(r.competent for r in results.values())
    assert [r.name for r in results.values() if r.headline] == ["multimodal"]


def test_an_incompetent_mse_control_proves_nothing():
    ds = _synthetic(0.45, 0.05, 0.45, 0.05, mse_skill=0.2)  # an MSE-trained RNN that never learned the mean
    r = C.CLAIMS[0].evaluate(ds)
    assert r.verdict == "control not competent" and r.competence[0].measured == pytest.approx(0.2)


def test_uniform_responses_are_not_multimodal():
    """Uniform responses put 1/6 to 1/4 of themselves in the non-target's window: the bar is above that level."""
    ds = _synthetic(0.45, 0.05, 0.45, 0.05)
    rng = np.random.default_rng(3)
    ds["response"].loc[dict(model="ddpm")] = rng.uniform(-np.pi, np.pi, ds.sizes["trial"])
    raw = float(C.swap_mode_mass(ds, "ddpm")[0])
    assert raw > 0.1  # the old bar, on the raw share, passed a network that answers at random
    assert raw == pytest.approx(C.uniform_mode_mass(ds), abs=0.04)
    assert 1 / 6 <= C.uniform_mode_mass(ds) <= 1 / 4
    assert C.CLAIMS[0].evaluate(ds).verdict == "fails"


def test_behaviour_mean_and_the_mse_skill():
    g = torch.Generator().manual_seed(4)
    tr = M.sample_trials(20_000, g, 0.5, 1.5)
    m = M.behaviour_mean(tr, radius=2.5)
    # the mean of many draws of one trial's behaviour is its behaviour_mean
    one = M.Trials(tr.loc[:1].repeat(20_000, 1), tr.col[:1].repeat(20_000, 1), tr.p_swap[:1].repeat(20_000), None)
    one.swapped = torch.rand(20_000, generator=g) < one.p_swap
    torch.testing.assert_close(M.behaviour(one, 2.5, 0.4, g).mean(0), m[0], atol=0.05, rtol=0)
    assert M.mean_skill(m, m) == pytest.approx(1.0) and M.mean_skill(torch.zeros_like(m), m) == pytest.approx(0.0)
    # reporting the cued colour is close to, not at, the mean; a random colour is far worse than an output of 0
    cued = M.behaviour_mean(tr, torch.zeros(len(m)), 2.5)
    assert 0.6 < M.mean_skill(cued, m) < 0.95
    rand = 2.5 * torch.stack([torch.cos(c := torch.rand(len(m), generator=g) * 6.283), torch.sin(c)], -1)
    assert M.mean_skill(rand, m) < -0.5


def test_claims_can_fail():
    ds = _synthetic(0.02, 0.02, 0.0, 0.0)  # a network that never swaps
    results = {c.name: c.evaluate(ds) for c in C.CLAIMS}
    assert results["multimodal"].verdict == "fails"
    assert results["distance_dependent_swaps"].verdict == "fails"
    assert results["swap_rate"].verdict == "fails"
    flat = _synthetic(0.25, 0.25, 0.0, 0.0)  # swaps, but not distance-dependent
    assert C.CLAIMS[2].evaluate(flat).verdict == "fails"
    # imprecise on close trials (uniform there), precise on far ones: no mode, so no distance-dependent swaps
    vague = _synthetic(0.0, 0.0, 0.45, 0.05)
    close = vague.distance.values < np.pi / 4
    resp = vague.response.sel(model="ddpm").values.copy()
    resp[0, close] = np.random.default_rng(5).uniform(-np.pi, np.pi, int(close.sum()))
    vague["response"].loc[dict(model="ddpm")] = resp
    assert C.CLAIMS[2].evaluate(vague).verdict == "fails"
    # an imprecise network: its κ a quarter of the generator's reads as 0.25, below the factor-2 tolerance
    blunt = _synthetic(0.45, 0.05, 0.45, 0.05)
    gen_kappa = float(blunt.mixture.sel(model="generator", subset="all", param="kappa")[0])
    blunt["mixture"].loc[dict(model="ddpm", subset="all", param="kappa")] = gen_kappa / 4
    precision = {c.name: c for c in C.CLAIMS}["precision"]
    r = precision.evaluate(blunt)
    assert r.measured == pytest.approx(0.25) and not precision.passes(r.measured)
    # a control that also swaps makes the check unable to discriminate
    both = _synthetic(0.45, 0.05, 0.45, 0.05)
    both["response"].loc[dict(model="mse")] = both.response.sel(model="ddpm").values
    assert C.CLAIMS[0].evaluate(both).verdict == "does not discriminate"


def test_ci_run(ci_result):
    res = ci_result("vwm_rnn")
    ds = res.data
    assert set(ds.model.values) == {"ddpm", "mse", "untrained", "generator"}
    assert np.isfinite(ds.response).all()
    w = ds.mixture.sel(param=["w_t", "w_nt", "w_u"]).sum("param")
    np.testing.assert_allclose(w.values[np.isfinite(w.values)], 1.0, atol=1e-6)
    gen = ds.mixture.sel(model="generator", subset="all")
    # the generator's own draws: the fitted swap rate near its mean swap probability, narrow report noise
    assert float(gen.sel(param="w_nt").mean()) == pytest.approx(ds.attrs["generator_swap_rate"], abs=0.08)
    assert float(gen.sel(param="kappa").mean()) > 10
    assert len(res.claims) == len(C.CLAIMS)
    # the control's competence is measured: a skill of at most 1 (1 only for the behaviour's mean itself)
    assert np.isfinite(ds.mse_mean_skill).all() and (ds.mse_mean_skill <= 1).all()
    assert 0.6 < ds.attrs["cued_colour_mean_skill"] < 0.95


def test_trainings_in_worker_processes_give_the_weights_of_a_training_here(tmp_path, monkeypatch):
    """train_all trains the missing networks side by side in worker processes (lab.core.parallel), into the weight
    cache; each is bit for bit the network trained in this process, and a second call has nothing left to train."""
    from lab.methods.vwm_rnn import train as T

    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(T, "SERIAL_BELOW_S", 0.0)  # a pool even for a few steps
    cfg = Config.from_profile("ci", ddpm_steps=3, mse_steps=2)
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "pool"))
    ran = T.train_all(cfg, progress=False)
    assert set(ran) == {(kind, seed) for kind in T.KINDS for seed in cfg.seeds}
    assert all(meta["cpu_s"] > 0 for meta in ran.values())
    pooled = [T.train_run(cfg, kind, cfg.seed) for kind in T.KINDS]
    assert all(t.loaded for t in pooled) and T.train_all(cfg, progress=False) == {}
    assert_trained_here_as_pooled(monkeypatch, tmp_path, cfg.threads, pooled,
                                  lambda: [T.train_run(cfg, kind, cfg.seed) for kind in T.KINDS])
