"""RecurrSim: FNO layers, RecurrFNO shapes and depth, truncated backprop, weight cache, metrics, run and config."""

import math
import warnings

import numpy as np
import pytest
import torch

from lab.config import ConfigError
from lab.core.fno import FNO, FourierLayer, SpectralConv, count_parameters
from lab.datasets.pde import rollout
from lab.methods.recurrsim import training
from lab.methods.recurrsim.config import Config
from lab.methods.recurrsim.experiment import CLAIMS, correlation_horizon, rollout_metrics
from lab.methods.recurrsim.model import FixedDepthFNO, LearnedStepper, RecurrFNO, build_model, sample_depth


@pytest.fixture
def data_dir(monkeypatch, tmp_path):
    """An empty data directory: PDE data and weights of a test never touch the project's data/."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    return tmp_path


def _perturbed(model: RecurrFNO, seed: int = 0) -> RecurrFNO:
    """The zero-initialised recurrent block made non-zero, so that K matters before any training."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.block.parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


# --------------------------------------------------------------------------------------------------------------------
# FNO layers
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dim", "shape"), [(1, (3, 4, 32)), (2, (2, 4, 16, 16)), (2, (2, 4, 16, 8))])
def test_spectral_conv_and_fno_shapes(dim, shape):
    x = torch.randn(shape)
    assert SpectralConv(4, 6, modes=4, dim=dim)(x).shape == (shape[0], 6) + shape[2:]
    assert FourierLayer(4, 4, dim)(x).shape == shape
    assert FNO(4, 2, width=8, modes=4, depth=2, dim=dim)(x).shape == (shape[0], 2) + shape[2:]


@pytest.mark.parametrize("dim", [1, 2])
def test_spectral_conv_is_resolution_invariant_on_band_limited_fields(dim):
    """A spectral convolution is a Fourier multiplier on low modes: on a band-limited field, the same weights give
    the same function on a coarse and a fine grid (up to rounding)."""
    torch.manual_seed(0)
    conv = SpectralConv(2, 3, modes=4, dim=dim).double()
    n_fine, n_coarse = 32, 16

    def field(n):
        x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
        if dim == 1:
            return torch.stack([torch.sin(x) + 0.5 * torch.cos(3 * x), torch.cos(2 * x)])[None]
        X, Y = torch.meshgrid(x, x, indexing="xy")
        return torch.stack([torch.sin(X + 2 * Y), torch.cos(3 * X) * torch.sin(Y)])[None]

    fine, coarse = conv(field(n_fine)), conv(field(n_coarse))
    sub = fine[..., ::2] if dim == 1 else fine[..., ::2, ::2]
    torch.testing.assert_close(sub, coarse, atol=1e-12, rtol=1e-10)


def test_spectral_conv_rejects_bad_dim_and_modes():
    with pytest.raises(ValueError, match="dim=3"):
        SpectralConv(2, 2, modes=4, dim=3)
    with pytest.raises(ValueError, match="modes=0"):
        SpectralConv(2, 2, modes=0)


# --------------------------------------------------------------------------------------------------------------------
# RecurrFNO
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dim", "spatial"), [(1, (32,)), (2, (16, 16))])
def test_recurrfno_shapes_and_parameter_count_do_not_depend_on_K(dim, spatial):
    model = _perturbed(RecurrFNO(dim, width=8, modes=4)).eval()
    n_params = count_parameters(model)
    u = torch.randn((3,) + spatial)
    outs = {}
    for K in (1, 2, 8, 32):
        outs[K] = model(u, K)
        assert outs[K].shape == u.shape
        assert count_parameters(model) == n_params
    assert not torch.allclose(outs[1], outs[8])  # K changes the prediction, not the parameters
    with pytest.raises(ValueError, match="K=0"):
        model(u, 0)
    with pytest.raises(ValueError, match="shape"):
        model(torch.randn((3,) + spatial + (2,)), 2)


def test_zero_initialised_block_is_identity_and_eval_state_is_fixed():
    model = RecurrFNO(1, width=6, modes=4).eval()
    h = torch.randn(2, 6, 32)
    torch.testing.assert_close(model.block(h) + h, h)  # R = identity at initialisation
    u = torch.randn(2, 32)
    torch.testing.assert_close(model(u, 5), model(u, 5))  # fixed z0 at evaluation: deterministic
    c = model.encode(u)
    z0 = model.initial_state(c)
    assert torch.equal(z0[0], z0[1])  # one draw shared by the batch
    model.train()
    assert not torch.equal(model.initial_state(c), model.initial_state(c))  # fresh N(0, I) while training


def test_baselines_match_parameter_counts():
    kinds = {k: build_model(k, 1, width=16, modes=8) for k in ("recurrsim", "fno", "fno_2x")}
    n = {k: count_parameters(m) for k, m in kinds.items()}
    assert abs(n["fno"] - n["recurrsim"]) / n["recurrsim"] < 0.01  # alpha and beta are the only difference
    assert 1.8 < n["fno_2x"] / n["recurrsim"] < 2.1
    assert isinstance(kinds["fno"], FixedDepthFNO)
    u = torch.randn(2, 32)
    torch.testing.assert_close(kinds["fno"](u, 1), kinds["fno"](u, 32))  # fixed depth ignores K
    with pytest.raises(ValueError, match="kind='mlp'"):
        build_model("mlp", 1, width=4, modes=2)


@pytest.mark.parametrize(("K", "B"), [(7, 3), (4, 4), (2, 5)])
def test_truncated_backprop_only_through_the_last_B_iterations(K, B):
    torch.manual_seed(0)
    model = _perturbed(RecurrFNO(1, width=6, modes=4))
    u, target = torch.randn(3, 32), torch.randn(3, 32)
    c = model.encode(u)
    z0 = torch.randn_like(c)
    trace: list[torch.Tensor] = []
    z = model.iterate(c, z0, K, grad_depth=B, trace=trace)
    assert len(trace) == K
    n_free = max(K - B, 0)
    assert [t.requires_grad for t in trace] == [False] * n_free + [True] * (K - n_free)

    # the gradients equal those of full backprop with the state cut (detached) after K - B iterations
    loss = ((model.decode(u, z) - target) ** 2).mean()
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True, retain_graph=True)
    ref_z = z0
    for k in range(K):
        ref_z = model.step(c, ref_z)
        if k + 1 == n_free:
            ref_z = ref_z.detach()
    ref_loss = ((model.decode(u, ref_z) - target) ** 2).mean()
    ref_grads = torch.autograd.grad(ref_loss, list(model.parameters()), allow_unused=True, retain_graph=True)
    for g, r in zip(grads, ref_grads):
        if r is None:
            assert g is None or torch.count_nonzero(g) == 0
        else:
            torch.testing.assert_close(g, r)

    # and, when something is truncated, they differ from full backpropagation through depth
    if n_free:
        full = model.iterate(c, z0, K, grad_depth=None)
        full_loss = ((model.decode(u, full) - target) ** 2).mean()
        g_full = torch.autograd.grad(full_loss, [model.alpha], retain_graph=True)[0]
        g_trunc = torch.autograd.grad(((model.decode(u, model.iterate(c, z0, K, B)) - target) ** 2).mean(),
                                      [model.alpha])[0]
        assert not torch.allclose(g_full, g_trunc)


def test_deep_equilibrium_forward_reaches_the_fixed_point():
    model = RecurrFNO(1, width=4, modes=4, beta_init=0.5).eval()  # block = 0: z* = alpha c / (1 - beta) = 2 c
    u = torch.randn(2, 32)
    out, used = model.forward_equilibrium(u, max_iter=60, tol=1e-6)
    assert used < 61
    c = model.encode(u)
    z = model.iterate(c, model.initial_state(c), 60)
    torch.testing.assert_close(z, 2 * c, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, model.decode(u, 2 * c), atol=1e-4, rtol=1e-4)


def test_poisson_lognormal_depth():
    rng = np.random.default_rng(0)
    ks = np.array([sample_depth(rng, 8.0, 0.5) for _ in range(20_000)])
    assert ks.min() >= 1 and ks.dtype.kind == "i"
    assert abs(ks.mean() - 9.0) < 0.15  # E[K] = Kbar + 1
    # the log-normal spread makes K over-dispersed relative to Poisson(Kbar) + 1
    assert ks.var() > 1.5 * 8.0
    assert np.all(np.array([sample_depth(rng, 8.0, 0.0) for _ in range(100)]) >= 1)


def test_learned_stepper_has_the_solver_call_signature():
    model = RecurrFNO(1, width=4, modes=4)
    u0 = np.random.default_rng(0).standard_normal((2, 32)).astype(np.float32)
    traj = rollout(LearnedStepper(model, K=3), u0, 5)
    assert traj.shape == (2, 6, 32) and isinstance(traj, np.ndarray)
    np.testing.assert_array_equal(traj[:, 0], u0)
    assert isinstance(LearnedStepper(model, 2)(torch.from_numpy(u0)), torch.Tensor)


# --------------------------------------------------------------------------------------------------------------------
# Data, metrics
# --------------------------------------------------------------------------------------------------------------------
def test_fourier_resample_is_exact_for_band_limited_fields():
    def grid(n):
        return np.arange(n) * 2 * np.pi / n

    f = lambda x, y=0.0: np.sin(3 * x + y) + 0.2 * np.cos(7 * x - 2 * y)  # noqa: E731
    np.testing.assert_allclose(training.fourier_resample(f(grid(64))[None], 32, 1)[0], f(grid(32)), atol=1e-12)
    X, Y = np.meshgrid(grid(64), grid(64), indexing="xy")
    x2, y2 = np.meshgrid(grid(32), grid(32), indexing="xy")
    out = training.fourier_resample(f(X, Y)[None], 32, 2)[0]
    np.testing.assert_allclose(out, f(x2, y2), atol=1e-12)
    with pytest.raises(ValueError, match="n=33"):
        training.fourier_resample(f(grid(64)), 33, 1)


def test_rollout_metrics_and_correlation_horizon():
    rng = np.random.default_rng(0)
    truth = rng.standard_normal((2, 6, 16))
    m = rollout_metrics(truth.copy(), truth)
    assert np.all(m["nrmse"] == 0) and np.allclose(m["correlation"], 1)
    m = rollout_metrics(2 * truth, truth)  # scaled: nRMSE 1, correlation still 1
    np.testing.assert_allclose(m["nrmse"], 1.0)
    np.testing.assert_allclose(m["correlation"], 1.0)
    corr = np.array([[1.0, 0.99, 0.95, 0.8, 0.6], [1.0, 1.0, 1.0, 1.0, 1.0]])
    tau = correlation_horizon(corr, np.array([0.7, 0.9, 0.98]))
    np.testing.assert_array_equal(tau, [[3, 2, 1], [4, 4, 4]])  # frames before the first drop; H if never


# --------------------------------------------------------------------------------------------------------------------
# Weight cache
# --------------------------------------------------------------------------------------------------------------------
def test_weight_cache_round_trips(data_dir):
    cfg = Config.from_profile("ci")
    model, info = training.get_model(cfg, "burgers", "recurrsim", progress=False)
    assert not info["cached"] and (data_dir / "recurrsim").is_dir()
    again, info2 = training.get_model(cfg, "burgers", "recurrsim", progress=False)
    assert info2["cached"] and info2["path"] == info["path"]
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        torch.testing.assert_close(a, b, msg=k)
    np.testing.assert_array_equal(info["loss"], info2["loss"])
    u = torch.randn(2, cfg.grid_1d)
    torch.testing.assert_close(model(u, 3), again(u, 3))
    # another training config is another file
    other = training.weights_path(cfg.replace(iterations=cfg.iterations + 1), "burgers", "recurrsim")
    assert str(other) != info["path"]


def test_weight_cache_survives_an_interrupted_write(data_dir, monkeypatch):
    cfg = Config.from_profile("ci")
    path = training.weights_path(cfg, "burgers", "fno")
    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        with open(f, "wb") as fh:
            fh.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        training.get_model(cfg, "burgers", "fno", progress=False)
    assert not path.exists()
    assert list(path.parent.glob("*.tmp")) == []  # the temporary file is gone too
    monkeypatch.setattr(torch, "save", real_save)
    model, info = training.get_model(cfg, "burgers", "fno", progress=False)
    assert not info["cached"] and path.exists()

    # a corrupt or foreign file at the path is rejected with a warning and the model retrained
    path.write_bytes(b"not a checkpoint")
    with pytest.warns(RuntimeWarning, match="rejected"):
        _, info = training.get_model(cfg, "burgers", "fno", progress=False)
    assert not info["cached"]
    torch.save({"key": "someone else's", "state_dict": {}}, path)
    with pytest.warns(RuntimeWarning, match="rejected"):
        _, info = training.get_model(cfg, "burgers", "fno", progress=False)
    assert not info["cached"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = training.get_model(cfg, "burgers", "fno", progress=False)
    assert info["cached"]


# --------------------------------------------------------------------------------------------------------------------
# run, claims, config
# --------------------------------------------------------------------------------------------------------------------
def test_run_ci_gives_the_documented_dataset_and_claims_evaluate(data_dir, tmp_path):
    import lab

    result = lab.run("recurrsim", "ci", progress=False)
    ds, cfg = result.data, result.config
    assert set(ds.dims) >= {"equation", "model", "K", "step", "alpha", "traj", "iteration", "x"}
    assert list(ds.model.values) == ["recurrsim", "fixed_k", "deq", "fno", "fno_2x"]
    assert list(ds.K.values) == list(cfg.K_eval)
    assert ds.step.size == cfg.rollout_steps + 1 and ds.alpha.size == cfg.n_alpha
    for name in ("nrmse", "tau_mean", "time_per_step", "one_step_nrmse"):
        assert ds[name].dims == ("equation", "model", "K")
        assert np.isfinite(ds[name].values).all(), name
        assert ds[name].attrs["units"] and ds[name].attrs["long_name"]
    assert (ds.nrmse_step.sel(step=0) == 0).all()
    fno = ds.nrmse.sel(model="fno")
    assert np.all(fno.values == fno.values[..., :1])  # fixed-depth values repeated along K
    assert ds.attrs["method"] == "recurrsim" and "wall_time_s" in ds.attrs
    assert [r.name for r in result.claims] == [c.name for c in CLAIMS]
    assert all(r.status in ("pass", "FAIL") for r in result.claims)
    # a saved result is re-checked without re-running
    path = lab.save(ds, tmp_path / "rs.nc")
    assert [r.measured for r in lab.check(path)] == pytest.approx([r.measured for r in result.claims], nan_ok=True)


def test_claims_can_fail_and_pass_on_synthetic_results(data_dir):
    import lab

    ds = lab.run("recurrsim", "ci", progress=False, K_eval="1,2,4,8,16,32").data
    good = ds.copy(deep=True)
    curve = np.array([1.0, 0.5, 0.2, 0.1, 0.1, 0.1])
    good["nrmse"].loc[dict(model="recurrsim")] = curve
    good["nrmse"].loc[dict(model="fixed_k")] = np.array([3.0, 2.0, 1.0, 0.1, 0.3, 0.9])
    good["nrmse"].loc[dict(model="deq")] = 1.5 * curve
    good["nrmse"].loc[dict(model="fno_2x")] = 0.12
    good["time_per_step"].loc[dict(model="recurrsim")] = 1e-3 * (1 + np.array([1, 2, 4, 8, 16, 32]))
    good.attrs["fixed_depth"] = 8
    table = lab.check(good, "recurrsim")
    assert table.all_passed, table.to_text()
    bad = good.copy(deep=True)
    bad["nrmse"].loc[dict(model="recurrsim")] = np.array([0.1, 0.1, 0.1, 0.1, 0.5, 1.0])
    bad["time_per_step"].loc[dict(model="recurrsim")] = np.array([5, 1, 7, 2, 9, 1]) * 1e-3
    bad["nrmse"].loc[dict(model="fno_2x")] = 0.05
    bad["nrmse"].loc[dict(model="deq")] = 0.05
    failed = {r.name for r in lab.check(bad, "recurrsim") if not r.passed}
    assert failed == {"error_falls_with_K", "error_saturates", "cost_linear_in_K", "recurrsim_holds_beyond",
                      "matches_fno_2x", "beats_deq"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"equations": "heat"}, "equations"),
        ({"equations": "burgers,burgers"}, "equations"),
        ({"K_eval": "4,2"}, "K_eval"),
        ({"K_eval": "0,1"}, "K_eval"),
        ({"rollout_steps": 100, "traj_steps": 10}, "rollout_steps"),
        ({"modes": 80}, "modes"),
        ({"grid_1d": 65}, "grid_1d"),
        ({"iterations": -1}, "iterations"),
        ({"mean_depth": 0.5}, "mean_depth"),
        ({"alpha_max": 0.5}, "alpha_max"),
        ({"deq_tol": 0.0}, "deq_tol"),
    ],
)
def test_config_errors_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        Config.from_profile("quick", **overrides)


def test_profiles_validate_and_unknown_fields_are_refused():
    for profile in ("ci", "quick", "full"):
        cfg = Config.from_profile(profile)
        assert set(cfg.equations) <= {"burgers", "kdv", "ks", "navier_stokes"}
    assert Config.from_profile("full").equations == ("burgers", "kdv", "ks", "navier_stokes")
    assert len(Config().alphas) == 30 and Config().alphas[0] == 0.7 and Config().alphas[-1] == 0.99
    with pytest.raises(ConfigError, match="Kbar"):
        Config.from_profile("quick", Kbar=3)
