"""RecurrSim: RecurrFNO shapes and depth, truncated backprop, the trainer and its cache, metrics, run, claims, config.

The FNO layers are tested in tests/core/test_fno.py."""

import numpy as np
import pytest
import torch

from lab.config import ConfigError
from lab.core.fno import count_parameters
from lab.datasets.pde import rollout
from lab.methods.recurrsim import train
from lab.methods.recurrsim.claims import CLAIMS
from lab.methods.recurrsim.config import Config
from lab.methods.recurrsim.metrics import correlation_horizon, rollout_metrics
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
    np.testing.assert_allclose(train.fourier_resample(f(grid(64))[None], 32, 1)[0], f(grid(32)), atol=1e-12)
    X, Y = np.meshgrid(grid(64), grid(64), indexing="xy")
    x2, y2 = np.meshgrid(grid(32), grid(32), indexing="xy")
    out = train.fourier_resample(f(X, Y)[None], 32, 2)[0]
    np.testing.assert_allclose(out, f(x2, y2), atol=1e-12)
    with pytest.raises(ValueError, match="n=33"):
        train.fourier_resample(f(grid(64)), 33, 1)


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


def test_persistence_is_the_error_of_the_zero_increment():
    """Predicting no change scores ||u(t) - u(t + dt)|| / ||u(t + dt)||, the same pairs one_step_nrmse reads: a
    model whose step adds nothing matches it exactly, the true step scores 0."""
    from lab.methods.recurrsim.metrics import one_step_nrmse, persistence_one_step_nrmse

    traj = np.stack([np.full((3, 8), 1.0 + 0.1 * t) for t in range(5)], axis=1)  # (3, 5, 8): u grows by 0.1
    expected = np.mean([0.1 / (1.0 + 0.1 * t) for t in range(1, 4)])  # the first horizon = 3 pairs
    assert persistence_one_step_nrmse(traj, 3) == pytest.approx(expected)
    assert one_step_nrmse(lambda u, K: u, traj, None, 3) == pytest.approx(expected)
    assert one_step_nrmse(lambda u, K: u + 0.1, traj, None, 3) == pytest.approx(0.0, abs=1e-7)


# --------------------------------------------------------------------------------------------------------------------
# Training and its cache
# --------------------------------------------------------------------------------------------------------------------
def _reference_training(cfg: Config, kind: str, data: np.ndarray) -> tuple[RecurrFNO, np.ndarray]:
    """The trainer as it was before lab.core.train.fit: torch.optim.Adam, warm-up over iterations // 20 steps,
    cosine decay, clipping at 1, the same generator drawing seeds, batches and depths in the same order, the same
    thread count."""
    import math

    from lab.core.runtime import threads

    rng = np.random.default_rng([cfg.seed, 0, ("recurrsim", "fixed_k", "deq", "fno", "fno_2x").index(kind)])
    x_all, y_all = train.pairs(data)
    in_scale, out_scale = float(x_all.std()), float((y_all - x_all).std())
    losses = []
    with torch.random.fork_rng(devices=[]), threads(cfg.threads):
        torch.manual_seed(int(rng.integers(2**31)))
        model = build_model(kind, 1, width=cfg.width, modes=cfg.modes, in_scale=in_scale, out_scale=out_scale)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        warm = max(1, cfg.iterations // 20)

        def factor(it):
            if it < warm:
                return (it + 1) / warm
            return 0.5 * (1.0 + math.cos(math.pi * (it - warm) / max(1, cfg.iterations - warm)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        model.train()
        for _ in range(cfg.iterations):
            idx = torch.from_numpy(rng.integers(0, x_all.shape[0], cfg.batch_size))
            x, y = x_all[idx], y_all[idx]
            if kind == "recurrsim":
                pred = model(x, sample_depth(rng, cfg.mean_depth, cfg.depth_sigma), cfg.grad_depth)
            else:
                pred = model(x)
            loss = torch.mean(((pred - y) / out_scale) ** 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    return model.eval(), np.asarray(losses, dtype=np.float32)


@pytest.mark.parametrize("kind", ["recurrsim", "fno"])
def test_training_on_the_lab_trainer_gives_the_numbers_of_the_plain_adam_loop(data_dir, kind):
    """fit (AdamW without decay, lr_factor with a 5% warm-up) reproduces the method's earlier Adam loop exactly:
    the refactor moved code, not numbers. 40 steps: warm-up round(0.05 * 40) = 40 // 20 = 2 steps."""
    cfg = Config.from_profile("ci", iterations=40)
    data = train.load_split(cfg, "burgers", "train", progress=False)
    got = train.trained_model(cfg, "burgers", kind, train=data, progress=False)
    ref, ref_loss = _reference_training(cfg, kind, data)
    np.testing.assert_array_equal(got.curves["loss"], ref_loss)
    for (k, a), (_, b) in zip(got.model.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)


def test_trained_models_are_cached_and_reloaded(data_dir):
    cfg = Config.from_profile("ci")
    first = train.trained_model(cfg, "burgers", "recurrsim", progress=False)
    assert not first.loaded and first.path.parent == data_dir / "recurrsim" and first.path.exists()
    assert train.is_cached(cfg, "burgers", "recurrsim") and not train.is_cached(cfg, "burgers", "deq")
    again = train.trained_model(cfg, "burgers", "recurrsim", progress=False)
    assert again.loaded and again.path == first.path
    for (k, a), (_, b) in zip(first.model.state_dict().items(), again.model.state_dict().items()):
        torch.testing.assert_close(a, b, msg=k)
    np.testing.assert_array_equal(first.curves["loss"], again.curves["loss"])
    assert again.meta["train_seconds"] == first.meta["train_seconds"] > 0
    u = torch.randn(2, cfg.grid_1d)
    torch.testing.assert_close(first.model(u, 3), again.model(u, 3))
    # another training config is another file; the evaluation-only fields are not part of the key
    assert not train.is_cached(cfg.replace(iterations=cfg.iterations + 1), "burgers", "recurrsim")
    assert train.is_cached(cfg.replace(K_eval=(1, 3)), "burgers", "recurrsim")
    # a corrupt file is rejected with a warning and the model retrained
    first.path.write_bytes(b"not a checkpoint")
    with pytest.warns(RuntimeWarning, match="rejected"):
        third = train.trained_model(cfg, "burgers", "recurrsim", progress=False)
    assert not third.loaded
    np.testing.assert_array_equal(third.curves["loss"], first.curves["loss"])  # deterministic retraining


def test_held_out_splits_run_to_the_horizon_and_training_data_do_not_change(data_dir):
    """The test and validation trajectories are generated horizon_steps long (tau's rollout); their first frames are
    those of a traj_steps-long run, and the training split (the weights' cache key) does not depend on the horizon."""
    cfg = Config.from_profile("ci", horizon_steps=16)
    assert train.data_config(cfg, "burgers", "test")["n_steps"] == 16
    assert train.data_config(cfg, "burgers", "val")["n_steps"] == 16
    assert train.data_config(cfg, "burgers", "train")["n_steps"] == cfg.traj_steps
    assert train.training_config(cfg, "burgers", "recurrsim") == train.training_config(
        cfg.replace(horizon_steps=cfg.rollout_steps), "burgers", "recurrsim")
    long = train.load_split(cfg, "burgers", "test")
    short = train.load_split(cfg.replace(horizon_steps=cfg.rollout_steps), "burgers", "test")
    assert long.shape[1] == 17 and short.shape[1] == cfg.traj_steps + 1
    np.testing.assert_array_equal(long[:, : cfg.traj_steps + 1], short)


def test_training_rejects_unknown_kinds_and_splits():
    cfg = Config.from_profile("ci")
    with pytest.raises(ConfigError, match="kind='mlp' is not allowed"):
        train.training_config(cfg, "burgers", "mlp")
    with pytest.raises(ConfigError, match="split='dev' is not allowed"):
        train.data_config(cfg, "burgers", "dev")


# --------------------------------------------------------------------------------------------------------------------
# run, claims, config
# --------------------------------------------------------------------------------------------------------------------
def test_run_ci_gives_the_documented_dataset(ci_result, tmp_path):
    import lab

    result = ci_result("recurrsim")
    ds, cfg = result.data, result.config
    assert set(ds.dims) >= {"equation", "model", "K", "step", "alpha", "traj", "iteration", "x"}
    assert list(ds.model.values) == ["recurrsim", "fixed_k", "deq", "fno", "fno_2x", "kblind"]
    assert list(ds.K.values) == list(cfg.K_eval)
    assert ds.step.size == cfg.rollout_steps + 1 and ds.alpha.size == cfg.n_alpha
    for name in ("nrmse", "tau_mean", "time_per_step", "one_step_nrmse", "layers_per_step", "val_nrmse"):
        assert ds[name].dims == ("equation", "model", "K")
        values = ds[name].values
        if name == "one_step_nrmse":  # evaluated up to the largest training depth, where competence reads it
            deepest = max(round(cfg.mean_depth), cfg.fixed_depth, cfg.deq_max_iter)
            values = ds[name].sel(K=[k for k in cfg.K_eval if k <= deepest]).values
            assert np.isnan(ds[name].sel(model="recurrsim", K=[k for k in cfg.K_eval if k > deepest])).all()
        assert np.isfinite(values).all(), name
    for name, var in ds.data_vars.items():
        assert var.attrs.get("long_name") and var.attrs.get("units"), name
    # tau is read on the rollout continued to horizon_steps frames, the nRMSE on its first rollout_steps
    assert cfg.horizon_steps > cfg.rollout_steps and ds.attrs["horizon_steps"] == cfg.horizon_steps
    assert (ds.tau <= cfg.horizon_steps).all() and (ds.tau >= 0).all()
    assert ds.seed_val_nrmse.dims == ("equation", "seed", "K") and np.isfinite(ds.seed_val_nrmse).all()
    np.testing.assert_array_equal(ds.seed_val_nrmse.isel(seed=0), ds.val_nrmse.sel(model="recurrsim"))
    assert (ds.nrmse_step.sel(step=0) == 0).all()
    assert ds.persistence_one_step_nrmse.dims == ("equation",) and (ds.persistence_one_step_nrmse > 0).all()
    assert ds.attrs["deq_max_iter"] == cfg.deq_max_iter
    for model in ("fno", "kblind"):  # K-blind models: their values repeated along K
        v = ds.nrmse.sel(model=model).values
        assert np.all(v == v[..., :1]), model
    # the K-blind control is RecurrSim's weights at round(mean_depth) (its K is in the ci profile's K_eval)
    kb = ds.attrs["kblind_depth"]
    assert kb == round(cfg.mean_depth)
    np.testing.assert_allclose(ds.nrmse.sel(model="kblind").values[..., 0], ds.nrmse.sel(model="recurrsim", K=kb))
    np.testing.assert_array_equal(ds.layers_per_step.sel(model="recurrsim").values[0], np.array(cfg.K_eval) + 2)
    assert (ds.layers_per_step.sel(model="fno_2x").isel(K=0) == 6).all()
    # ci runs both kinds of equation: Burgers (1-D) and the 2-D Navier-Stokes fluid, with its vorticity examples
    assert list(ds.equation.values) == list(cfg.equations) == ["burgers", "navier_stokes"]
    assert ds.example_vorticity_pred.dims == ("K", "frame", "y2", "x2")
    assert np.isfinite(ds.example_vorticity_pred).all() and np.isfinite(ds.example_vorticity_truth).all()
    assert np.isnan(ds.train_loss.sel(model="kblind")).all() and np.isfinite(ds.train_loss.sel(model="fno")).all()
    # RecurrSim's training seeds: the first is the model of nrmse; the others differ
    assert list(ds.seed.values) == [cfg.seed + i for i in range(cfg.seeds)] and cfg.seeds >= 2
    np.testing.assert_array_equal(ds.seed_nrmse.isel(seed=0), ds.nrmse.sel(model="recurrsim"))
    np.testing.assert_array_equal(ds.seed_kblind_nrmse.isel(seed=0), ds.nrmse.sel(model="kblind").isel(K=0))
    assert not np.array_equal(ds.seed_nrmse.isel(seed=1), ds.seed_nrmse.isel(seed=0))
    assert np.isfinite(ds.seed_tau_mean).all() and np.isfinite(ds.seed_kblind_tau_mean).all()
    # every claim computed, with its control value where it has one
    assert [r.name for r in result.claims] == [c.name for c in CLAIMS]
    for r, c in zip(result.claims, CLAIMS):
        assert np.isfinite(r.measured), (r.name, r.detail)
        if r.name in SEEDED:
            assert r.per_seed is not None and len(r.per_seed) == cfg.seeds, r.name
        assert (r.control_measured is None) == (c.control is None), r.name
        if r.control_measured is not None:
            assert np.isfinite(r.control_measured), (r.name, r.control_detail)
        for comp in r.competence:  # six iterations teach nothing: no better than predicting no change
            assert np.isfinite(comp.measured) and not comp.passed, (r.name, comp)
    # a saved result is re-checked without re-running
    path = lab.save(ds, tmp_path / "rs.nc")
    assert [r.measured for r in lab.check(path)] == pytest.approx([r.measured for r in result.claims], nan_ok=True)


def _synthetic(cfg: Config, *, recurrsim=None, val=None):
    """A Dataset with the shape of a profile's run (equations, models, K_eval, rollout frames) and the variables the
    claims read: RecurrSim's error falls with K and plateaus, the fixed-K model degrades past its training depth."""
    import xarray as xr

    Ks = np.array(cfg.K_eval, dtype=float)
    models = ["recurrsim", "fixed_k", "deq", "fno", "fno_2x", "kblind"]
    rs = 0.02 * (1 + 20 * np.exp(-Ks / 1.5)) if recurrsim is None else np.asarray(recurrsim, float)
    kf, kb = cfg.fixed_depth, max(1, round(cfg.mean_depth))
    kb_err = float(np.interp(kb, Ks, rs))
    H = cfg.rollout_steps
    tau_rs = H * (1 - 0.5 * np.exp(-Ks / 2))
    curves = {
        "recurrsim": rs, "fixed_k": 1.6 * rs * (1 + (Ks > kf) * Ks / kf), "deq": 1.5 * rs,
        "fno": np.full_like(Ks, 0.05), "fno_2x": np.full_like(Ks, 0.04), "kblind": np.full_like(Ks, kb_err),
    }
    taus = {m: (tau_rs if m in ("recurrsim", "fixed_k", "deq") else np.full_like(Ks, 0.9 * H)) for m in models}
    taus["kblind"] = np.full_like(Ks, float(np.interp(kb, Ks, tau_rs)))
    taus["fixed_k"] = tau_rs / (1 + (Ks > kf) * Ks / kf)  # the fixed-K model's horizon shrinks past its depth
    layers = {m: Ks + 2 for m in models} | {"fno": np.full_like(Ks, 3), "fno_2x": np.full_like(Ks, 6),
                                            "kblind": np.full_like(Ks, kb + 2)}
    # validation errors: 1.1 x the test curves (RecurrSim's own ``val`` when given)
    val_curves = {m: 1.1 * c for m, c in curves.items()} | ({} if val is None else {"recurrsim": np.asarray(val)})
    nE = len(cfg.equations)

    def stack(d):
        return np.broadcast_to(np.stack([d[m] for m in models]), (nE, len(models), len(Ks))).copy()

    dims = ("equation", "model", "K")
    ds = xr.Dataset(
        {"nrmse": (dims, stack(curves)), "tau_mean": (dims, stack(taus)), "layers_per_step": (dims, stack(layers)),
         "time_per_step": (dims, stack({m: 1e-3 * v for m, v in layers.items()})),
         "val_nrmse": (dims, stack(val_curves)),
         "n_params": (("equation", "model"), np.tile([1000, 1000, 1000, 1000, 2000, 1000], (nE, 1))),
         # every learned model steps a tenth as far off as predicting no change (competent)
         "one_step_nrmse": (dims, np.full((nE, len(models), len(Ks)), 0.002)),
         "persistence_one_step_nrmse": (("equation",), np.full(nE, 0.02))},
        coords={"equation": list(cfg.equations), "model": models, "K": np.array(cfg.K_eval),
                "step": np.arange(H + 1)},
        attrs={"fixed_depth": kf, "kblind_depth": kb, "deq_max_iter": cfg.deq_max_iter,
               "horizon_steps": cfg.horizon_steps},
    )
    return ds


@pytest.mark.parametrize("profile", ["ci", "quick", "full"])
def test_every_profile_can_compute_its_claims_and_their_controls(profile):
    """On a Dataset of the profile's shape where the paper's effects are present, every claim is computable, every
    claim holds and every control fails (the full profile once could not compute two claims: K_eval ended at its
    fixed_depth)."""
    from lab.claims import evaluate

    cfg = Config.from_profile(profile)
    results = evaluate(CLAIMS, _synthetic(cfg))
    for r in results:
        assert np.isfinite(r.measured), (profile, r.name, r.detail)
        if r.control_measured is not None:
            assert np.isfinite(r.control_measured), (profile, r.name, r.control_detail)
        assert r.verdict in (("reported",) if r.name in REPORT_ROWS else ("holds",)), (profile, r.name, r.verdict)
        if r.control_passed is not None and r.verdict != "reported":
            assert not r.control_passed, (profile, r.name)


REPORT_ROWS = {"compute_matched_fno_2x", "cost_linear_in_K"}
SEEDED = {"error_falls_with_K", "error_saturates", "horizon_grows_with_K", "recurrsim_holds_beyond", "matches_fno_2x",
          "beats_deq"}


def _with_seeds(ds, curves):
    """Add RecurrSim's per-seed curves (one row per seed) to a synthetic Dataset; the K-blind control's follow."""
    curves = np.asarray(curves, float)
    nE, S = ds.sizes["equation"], len(curves)
    kb = int(ds.attrs["kblind_depth"])
    Ks = ds.K.values.astype(float)
    ds = ds.assign_coords(seed=np.arange(S))
    ds["seed_nrmse"] = (("equation", "seed", "K"), np.broadcast_to(curves, (nE, S, len(Ks))).copy())
    tau = np.broadcast_to(ds.tau_mean.sel(model="recurrsim").values[:, None, :], (nE, S, len(Ks))).copy()
    ds["seed_tau_mean"] = (("equation", "seed", "K"), tau)
    ds["seed_kblind_nrmse"] = (("equation", "seed"), np.tile([np.interp(kb, Ks, c) for c in curves], (nE, 1)))
    ds["seed_kblind_tau_mean"] = (("equation", "seed"), np.tile([np.interp(kb, Ks, t) for t in tau[0]], (nE, 1)))
    return ds


def test_depth_claims_state_their_worst_seed():
    """A seed whose error rises past the training depth fails recurrsim_holds_beyond and the headline (its error
    rises with K) though the first seed holds; the spread is reported."""
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")  # K_eval 1, 2, 4, 8, 16, 32, 64, 128; fixed_depth 8
    ds = _synthetic(cfg)
    good = ds.nrmse.sel(model="recurrsim").values[0]
    bad = good * np.array([1, 1, 1, 1, 1.2, 1.3, 1.3, 1.3])  # +30% beyond K = 8
    r = {r.name: r for r in evaluate(CLAIMS, _with_seeds(ds, [good, good, bad]))}
    holds = r["recurrsim_holds_beyond"]
    assert holds.per_seed[0] < 1.05 < holds.per_seed[2] and holds.measured == max(holds.per_seed)
    assert holds.verdict == "fails" and holds.seeds_holding == 2
    falls = r["error_falls_with_K"]
    assert falls.headline and len(falls.per_seed) == 3 and falls.seeds_holding == 2 and falls.verdict == "fails"
    assert falls.per_seed[2] == pytest.approx(1.2 * good[4] / good[3] / 1.05)  # +9.5% at K = 8 -> 16
    r = {r.name: r for r in evaluate(CLAIMS, _with_seeds(ds, [good, good]))}
    assert r["recurrsim_holds_beyond"].verdict == "holds" and r["error_falls_with_K"].verdict == "holds"
    # the control, the model trained at K = 8 alone: falls from K = 1 to 8, then rises 2.7x at K = 16
    control = r["error_falls_with_K"]
    assert control.control_passed is False and "largest rise x2.74 at K=8->16" in control.control_detail


def test_the_headline_needs_a_competent_control_trained_without_random_depth():
    """A fixed-K model no better than predicting no change at its own depth proves nothing (control not competent);
    one that learned and whose error also falls and never rises with K takes the headline's claim away (does not
    discriminate): then the fall is not what randomised depth bought."""
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")
    ds = _synthetic(cfg)
    ds["one_step_nrmse"].loc[dict(model="fixed_k")] = 0.02  # the zero increment's error: it learned nothing
    r = {r.name: r for r in evaluate(CLAIMS, ds)}
    for name in ("error_falls_with_K", "error_saturates", "recurrsim_holds_beyond", "fixed_k_degrades", "beats_deq"):
        assert r[name].verdict == "control not competent", (name, r[name].verdict)
    assert r["matches_fno_2x"].verdict == "holds"  # its models are the FNOs
    ds = _synthetic(cfg)
    ds["nrmse"].loc[dict(model="fixed_k")] = 1.1 * ds.nrmse.sel(model="recurrsim")
    assert {r.name: r for r in evaluate(CLAIMS, ds)}["error_falls_with_K"].verdict == "does not discriminate"


def test_depth_claims_fail_for_a_model_that_ignores_K():
    """RecurrSim with K cut (its error the same at every K) fails every claim about depth, recurrsim_holds_beyond
    included (it once passed for an untrained model)."""
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")
    flat = np.full(len(cfg.K_eval), 0.03)
    results = {r.name: r for r in evaluate(CLAIMS, _synthetic(cfg, recurrsim=flat))}
    for name in ("error_falls_with_K", "error_saturates", "recurrsim_holds_beyond"):
        assert results[name].verdict == "fails", (name, results[name].measured)
    assert results["recurrsim_holds_beyond"].measured == pytest.approx(1 / 0.7)


def test_the_depth_needed_is_picked_on_validation_not_on_the_test_set():
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")  # K_eval 1, 2, 4, 8, 16, 32, 64, 128
    test = np.array([0.5, 0.2, 0.05, 0.02, 0.02, 0.02, 0.02, 0.02])
    val = np.array([0.5, 0.2, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03])  # on validation K = 4 is within 5% of the best
    r = {r.name: r for r in evaluate(CLAIMS, _synthetic(cfg, recurrsim=test, val=val))}["matches_fno_2x"]
    assert "K=4" in r.detail and r.measured == pytest.approx(0.05 / 0.04)
    assert r.verdict == "fails"  # the test set's best depth (K = 8: 0.5 of the 2x FNO) would have passed


def test_the_deq_comparison_reads_each_model_at_its_validation_picked_depth():
    """RecurrSim and the DEQ are each read at the smallest K within 5% of their own best validation error; RecurrSim
    more accurate but at a costlier depth than the DEQ's fails by its cost ratio."""
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")  # K_eval 1, 2, 4, 8, 16, 32, 64, 128
    ds = _synthetic(cfg)
    deq_val = np.array([0.5, 0.2, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05])  # the DEQ needs K = 8 on validation
    ds["val_nrmse"].loc[dict(model="deq")] = deq_val
    r = {r.name: r for r in evaluate(CLAIMS, ds)}["beats_deq"]
    rs, deq = ds.nrmse.sel(model="recurrsim"), ds.nrmse.sel(model="deq")
    assert "recurrsim at K=16" in r.detail and "DEQ at K=8" in r.detail  # RecurrSim needs 16 (18 layers vs 10)
    assert r.measured == pytest.approx(18 / 10) and r.verdict == "fails"
    assert float(rs.sel(K=16)[0]) < float(deq.sel(K=8)[0])  # though more accurate
    ds["val_nrmse"].loc[dict(model="deq")] = [0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.08, 0.05]  # now it needs K = 128
    r = {r.name: r for r in evaluate(CLAIMS, ds)}["beats_deq"]
    assert "DEQ at K=128" in r.detail and r.verdict == "holds"
    assert r.measured == pytest.approx(float(rs.sel(K=16)[0] / deq.sel(K=128)[0]))


def test_a_tie_with_the_deq_fails():
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")
    ds = _synthetic(cfg)
    ds["nrmse"].loc[dict(model="deq")] = ds.nrmse.sel(model="recurrsim")
    r = {r.name: r for r in evaluate(CLAIMS, ds)}["beats_deq"]
    assert r.measured == pytest.approx(1.0) and r.verdict == "fails"


def test_beating_the_deq_does_not_discriminate_when_the_fixed_k_model_beats_it_too():
    from lab.claims import evaluate

    cfg = Config.from_profile("quick")
    ds = _synthetic(cfg)
    assert {r.name: r for r in evaluate(CLAIMS, ds)}["beats_deq"].verdict == "holds"
    ds["nrmse"].loc[dict(model="fixed_k")] = ds.nrmse.sel(model="recurrsim")
    assert {r.name: r for r in evaluate(CLAIMS, ds)}["beats_deq"].verdict == "does not discriminate"


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
        ({"n_val": 0}, "n_val"),
        ({"horizon_steps": 30}, "horizon_steps"),  # below rollout_steps = 40
    ],
)
def test_config_errors_name_the_field_and_what_is_allowed(overrides, field):
    with pytest.raises(ConfigError, match=f"^{field}=.* is not allowed; allowed: "):
        Config.from_profile("quick", **overrides)


def test_profiles_evaluate_the_depths_the_claims_read():
    for profile in ("ci", "quick", "full"):
        cfg = Config.from_profile(profile)
        assert {1, 4, 8, 16} <= set(cfg.K_eval), profile
        assert max(cfg.K_eval) > max(16, cfg.fixed_depth), profile
        assert cfg.horizon_steps > cfg.rollout_steps, profile  # tau's rollout runs past the nRMSE's
    for profile in ("quick", "full"):  # evaluated (never trained) far past the trained depths
        cfg = Config.from_profile(profile)
        assert max(cfg.K_eval) >= 4 * max(cfg.fixed_depth, cfg.mean_depth), profile
        assert max(cfg.K_eval) >= 4 * cfg.mean_depth, profile
    assert max(Config.from_profile("quick").K_eval) == 16 * Config.from_profile("quick").mean_depth
    assert Config.from_profile("full").equations == ("burgers", "kdv", "ks", "navier_stokes")
    assert len(Config().alphas) == 30 and Config().alphas[0] == 0.7 and Config().alphas[-1] == 0.99
    with pytest.raises(ConfigError, match="Kbar"):
        Config.from_profile("quick", Kbar=3)
