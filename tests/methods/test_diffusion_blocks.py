"""DiffusionBlocks: the equal-mass partition against the log-normal CDF, the truncated σ sampler, EDM's
preconditioning and weighting, Euler sampling against the exact flow of a Gaussian, the energy distance, the measured
step cost on a network whose saved tensors are known, one block's gradients per step, the classifiers' update counts
per parameter group (equal optimiser budgets), bad input (exit 2), the device reaching fit, claims that can fail,
and the ci run."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner
from scipy.stats import norm

from lab.checks import ConfigError
from lab.cli import cli
from lab.methods.diffusion_blocks import claims as C
from lab.methods.diffusion_blocks import model as M
from lab.methods.diffusion_blocks.config import Config
from tests.conftest import assert_trained_here_as_pooled


@pytest.mark.parametrize("B", [1, 2, 3, 5])
def test_equal_mass_partition_holds_equal_lognormal_mass(B):
    edges = M.partition(B, p_mean=-1.2, p_std=1.2, sigma_min=0.002, sigma_max=80)
    assert edges[0] == 80 and edges[-1] == 0.002 and np.all(np.diff(edges) < 0)
    mass = -np.diff(norm.cdf((np.log(edges) + 1.2) / 1.2))
    np.testing.assert_allclose(mass, mass.sum() / B, rtol=1e-9)
    uni = M.partition(B, "uniform")
    np.testing.assert_allclose(np.diff(np.log(uni)), np.full(B, -np.log(80 / 0.002) / B), rtol=1e-9)


def test_equal_mass_for_three_blocks_matches_the_hand_computation():
    # q = 1/3, 2/3 of (nearly) the whole log-normal: σ = exp(-1.2 ± 1.2 · 0.4307)
    edges = M.partition(3)
    np.testing.assert_allclose(edges[1:3], np.exp(-1.2 + 1.2 * norm.ppf([2 / 3, 1 / 3])), rtol=1e-3)


def test_training_range_overlaps_neighbours_and_stays_inside():
    edges = M.partition(3)
    lo, hi = M.training_range(edges, 1, gamma=0.05)
    ratio = edges[1] / edges[2]
    assert lo == pytest.approx(edges[2] / ratio ** 0.05) and hi == pytest.approx(edges[1] * ratio ** 0.05)
    assert M.training_range(edges, 0)[1] == 80 and M.training_range(edges, 2)[0] == 0.002
    assert M.training_range(edges, 1, gamma=0.0) == (edges[2], edges[1])


def test_sigma_sampler_follows_the_truncated_lognormal():
    lo, hi = 0.18, 0.51
    s = M.sample_sigmas(20000, lo, hi, -1.2, 1.2, torch.Generator().manual_seed(0)).double()
    assert s.min() >= lo and s.max() <= hi
    a, b = (math.log(lo) + 1.2) / 1.2, (math.log(hi) + 1.2) / 1.2
    median = math.exp(-1.2 + 1.2 * norm.ppf(0.5 * (norm.cdf(a) + norm.cdf(b))))
    assert float((s < median).double().mean()) == pytest.approx(0.5, abs=0.015)


def test_preconditioning_limits_and_unit_weighted_target():
    z, sd = torch.randn(7, 3), 0.5
    one = lambda z_in, c: torch.ones_like(z_in)  # noqa: E731
    tiny = torch.full((7,), 1e-6)
    torch.testing.assert_close(M.precondition(one, z, tiny, sd), z, atol=1e-5, rtol=0)  # D -> z as σ -> 0
    big = torch.full((7,), 1e4)
    torch.testing.assert_close(M.precondition(one, z, big, sd), torch.full_like(z, sd), atol=1e-3, rtol=0)
    # λ(σ) c_out(σ)² = 1: an error δ in F costs mean δ² at every σ
    sigma = torch.tensor([0.01, 0.3, 5.0, 60.0])
    c_out = sigma * sd / (sigma ** 2 + sd ** 2).sqrt()
    clean, delta = torch.randn(4, 2), torch.randn(4, 2)
    loss = M.edm_loss(clean + c_out[:, None] * delta, clean, sigma, sd)
    assert float(loss) == pytest.approx(float((delta ** 2).mean()), rel=1e-5)


def test_euler_sampling_follows_the_exact_flow_of_a_gaussian():
    """Data N(0, s²): the ideal denoiser is s²/(s²+σ²) z and the flow maps σ_max ε to s ε √... exactly; Euler
    with many steps lands at standard deviation s."""
    s = 0.7
    denoise = lambda z, sigma: s ** 2 / (s ** 2 + sigma[:, None] ** 2) * z  # noqa: E731
    z0 = 80.0 * torch.randn(4000, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out, _ = M.euler_sample(denoise, z0, M.karras_sigmas(400, 0.002, 80.0))
    exact = z0 * math.sqrt(s ** 2) / math.sqrt(s ** 2 + 80.0 ** 2)
    torch.testing.assert_close(out, exact, rtol=0.02, atol=1e-3)


def test_blocks_own_their_ranges_and_sampling_records_each_block():
    edges = M.partition(3)
    blocks = M.DiffusionBlocks([M.MLPDenoiser(2, 8, 1) for _ in range(3)], edges)
    assert [blocks.owner(s) for s in (80.0, 1.0, 0.3, 0.01, 0.002)] == [0, 0, 1, 2, 2]
    _, path = M.euler_sample(lambda z, s: blocks(z, sigma=s), torch.randn(5, 2), M.karras_sigmas(12, 0.002, 80),
                             blocks.owner)
    assert sorted(path) == [0, 1, 2]


def test_energy_distance_of_point_masses_and_of_one_distribution():
    a, b = torch.zeros(50, 2), torch.zeros(60, 2) + torch.tensor([3.0, 4.0])
    assert M.energy_distance(a, b) == pytest.approx(10.0)  # 2 |x - y| - 0 - 0
    g = torch.Generator().manual_seed(0)
    same = M.energy_distance(torch.randn(1500, 2, generator=g), torch.randn(1500, 2, generator=g))
    shifted = M.energy_distance(torch.randn(1500, 2, generator=g), torch.randn(1500, 2, generator=g) + 0.3)
    assert abs(same) < 0.01 < shifted


def test_step_cost_counts_the_saved_activations_once_and_excludes_weights():
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(5, 4)
    saved, with_grad = M.step_cost(net, lambda: net(x).sum())
    # the input (5 x 4) for the first weight's gradient, the ReLU output (5 x 8) for ReLU and the second layer
    assert saved == 4 * (5 * 4 + 5 * 8)
    assert with_grad == sum(p.numel() for p in net.parameters())
    assert all(p.grad is None for p in net.parameters())


def test_a_block_step_gives_gradients_to_that_block_only():
    blocks = M.DiffusionBlocks([M.MLPDenoiser(2, 8, 2) for _ in range(3)], M.partition(3))
    y, sigma = torch.randn(16, 2), torch.full((16,), 0.3)
    _, with_grad = M.step_cost(blocks, lambda: M.edm_loss(blocks.blocks[1](y + sigma[:, None], sigma), y, sigma,
                                                          0.5))
    assert with_grad == sum(p.numel() for p in blocks.blocks[1].parameters())


def test_config_refuses_bad_block_counts():
    with pytest.raises(ConfigError, match=r"n_blocks=0 is not allowed; allowed: an integer in \[1, 48\]"):
        Config(n_blocks=0)
    with pytest.raises(ConfigError, match=r"n_blocks=8 is not allowed; allowed: an integer in \[1, n_layers=6\]"):
        Config(n_blocks=8)
    with pytest.raises(ConfigError, match="n_blocks=4 is not allowed; allowed: a divisor of n_layers=6"):
        Config(n_blocks=4)
    with pytest.raises(ConfigError, match="toy='spiral' is not allowed"):
        Config(toy="spiral")
    with pytest.raises(ConfigError, match="n_blocks=0"):
        M.partition(0)


@pytest.mark.parametrize("args, fragment", [
    (["run", "diffusion_blocks", "-P", "ci", "-p", "n_blocks=7"], "n_blocks=7 is not allowed"),
    (["run", "diffusion_blocks", "-p", "n_blocks=0"], "n_blocks=0 is not allowed"),
])
def test_cli_bad_input_exits_2(tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 2, out.output
    assert fragment in out.output


def test_device_reaches_fit(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.diffusion_blocks import train as T

    seen = []
    real = T.fit

    def spy(*args, **kwargs):
        seen.append(kwargs.get("device"))
        return real(*args, **kwargs)

    monkeypatch.setattr(T, "fit", spy)
    cfg = Config.from_profile("ci", device="auto", toy_steps=3)
    trained = T.toy_run(cfg, "blocks", 0)
    assert seen == ["auto"] and len(trained.curves["loss"]) == 3 * cfg.n_blocks  # block_budget = compute
    assert next(trained.model.parameters()).device.type == "cpu"


# --- the claims on synthetic Datasets ------------------------------------------------------------------------------
def _ds(ed, acc, saved=(900.0, 330.0, 950.0), grads=(100.0, 36.0, 108.0), seeds=3):
    toy_models, cls_models = ("e2e", "blocks", "uniform", "blocks_b", "small"), ("e2e", "blocks", "small")
    energy = np.array([[ed[m] * (1 + 0.01 * s) for m in toy_models] for s in range(seeds)])
    accuracy = np.array([[acc[m] + 0.1 * s for m in cls_models] for s in range(seeds)])
    return xr.Dataset(
        {"energy_distance": (("seed", "toy_model"), energy), "energy_floor": (("seed",), np.zeros(seeds)),
         "gaussian_energy": (("seed",), np.full(seeds, 0.03)),
         "accuracy": (("seed", "cls_model"), accuracy),
         "saved_bytes": (("task", "variant"), np.array([saved, saved]), {"units": "bytes"}),
         "grad_params": (("task", "variant"), np.array([grads, grads]), {"units": "parameters"})},
        coords={"seed": np.arange(seeds), "toy_model": list(toy_models), "cls_model": list(cls_models),
                "task": ["toy", "classify"], "variant": ["e2e", "block", "joint"]},
        attrs={"n_blocks": 3, "dataset": "digits", "n_test": 450, "n_classes": 10},
    )


GOOD_ED = {"e2e": 0.010, "blocks": 0.0105, "uniform": 0.014, "blocks_b": 0.0104, "small": 0.020}
GOOD_ACC = {"e2e": 90.0, "blocks": 89.0, "small": 80.0}


def _verdicts(ds):
    return {c.name: c.evaluate(ds) for c in C.CLAIMS}


def test_claims_hold_with_the_papers_effect_and_their_controls_fail():
    v = _verdicts(_ds(GOOD_ED, GOOD_ACC))
    for name in ("blocks_match_e2e_accuracy", "equal_mass_beats_uniform", "grad_params_per_step",
                 "activation_memory_per_step"):
        assert v[name].verdict == "holds", (name, v[name])
    assert v["blocks_match_e2e_accuracy"].measured == pytest.approx(1.0)
    assert v["activation_memory_per_step"].measured == pytest.approx(3 * 330 / 900)
    assert v["activation_memory_per_step_mlp"].verdict == "reported"
    assert v["blocks_match_e2e_samples"].verdict == "reported"  # eight Gaussians do not need the depth


def test_claims_fail_or_do_not_discriminate_without_the_effect():
    # a small network as good as the deep one: the block-wise claims cannot discriminate
    v = _verdicts(_ds({**GOOD_ED, "small": 0.0101}, {**GOOD_ACC, "small": 89.5}))
    assert v["blocks_match_e2e_accuracy"].verdict == "does not discriminate"
    # blocks far behind; uniform no worse; seeds alone as far apart as the partitions
    v = _verdicts(_ds({**GOOD_ED, "blocks": 0.02, "uniform": 0.02}, {**GOOD_ACC, "blocks": 70.0}))
    assert v["blocks_match_e2e_accuracy"].verdict == "fails"
    assert v["equal_mass_beats_uniform"].verdict == "fails"
    v = _verdicts(_ds({**GOOD_ED, "blocks_b": 0.014}, GOOD_ACC))
    assert v["equal_mass_beats_uniform"].verdict == "does not discriminate"
    # a block that keeps as much as the whole network
    v = _verdicts(_ds(GOOD_ED, GOOD_ACC, saved=(900.0, 800.0, 950.0), grads=(100.0, 90.0, 108.0)))
    assert v["activation_memory_per_step"].verdict == "fails" and v["grad_params_per_step"].verdict == "fails"


def test_models_that_did_not_learn_make_no_claim_hold():
    """Each claim's verdict would be 'holds' but for one model that never learned its task."""
    cases = [  # (claim, energy distances, accuracies, the competence check that fails)
        ("blocks_match_e2e_accuracy", GOOD_ED, {"e2e": 60.0, "blocks": 59.0, "small": 56.0}, 0),
        ("blocks_match_e2e_accuracy", GOOD_ED, {**GOOD_ACC, "small": 12.0}, 1),
        ("equal_mass_beats_uniform", {**GOOD_ED, "uniform": 0.04}, GOOD_ACC, 1),
    ]
    for name, ed, acc, bad in cases:
        r = _verdicts(_ds(ed, acc))[name]
        assert r.verdict == "control not competent", (name, r)
        assert [c.passed for c in r.competence] == [k != bad for k in range(len(r.competence))], (name, r)
    e2e = _verdicts(_ds({**GOOD_ED, "e2e": 0.02, "blocks": 0.021, "small": 0.028}, GOOD_ACC))
    assert e2e["blocks_match_e2e_samples"].competence[0].measured == pytest.approx(0.02 * 1.02 / 0.03)
    acc = _verdicts(_ds(GOOD_ED, GOOD_ACC))["blocks_match_e2e_accuracy"]
    assert [c.measured for c in acc.competence] == pytest.approx([90.0 - 97.0, 80.0 - 55.0])


def test_the_worst_seed_decides_the_quality_claims():
    """Two seeds with the paper's effect and one without: a mean over seeds would pass, the worst seed does not."""
    ds = _ds(GOOD_ED, GOOD_ACC)
    ds.energy_distance.loc[{"seed": 0, "toy_model": "uniform"}] = float(ds.energy_distance.sel(
        seed=0, toy_model="blocks"))
    ds.accuracy.loc[{"seed": 0, "cls_model": "blocks"}] = 85.0
    v = _verdicts(ds)
    uni, acc = v["equal_mass_beats_uniform"], v["blocks_match_e2e_accuracy"]
    assert np.mean(uni.per_seed) >= 1.1 and uni.measured == pytest.approx(1.0) and uni.verdict == "fails"
    assert np.mean(acc.per_seed) <= 3 and acc.measured == pytest.approx(5.0) and acc.verdict == "fails"


def test_the_shallow_control_must_fall_short_on_every_seed():
    """The control takes the smallest end-to-end minus small gap: one seed where the shallow network keeps up is
    enough for the accuracy claim not to discriminate."""
    ds = _ds(GOOD_ED, GOOD_ACC)
    ds.accuracy.loc[{"seed": 1, "cls_model": "small"}] = float(ds.accuracy.sel(seed=1, cls_model="e2e")) - 1.0
    r = _verdicts(ds)["blocks_match_e2e_accuracy"]
    assert r.control_measured == pytest.approx(1.0) and r.verdict == "does not discriminate"


def test_ci_run_has_the_documented_dims_and_measured_costs(ci_result):
    from lab.methods.diffusion_blocks.train import CLS_MODELS, TOY_MODELS

    res = ci_result("diffusion_blocks")
    ds = res.data
    cfg = Config.from_profile("ci")
    assert ds.energy_distance.dims == ("seed", "toy_model") and ds.sizes["toy_model"] == len(TOY_MODELS)
    assert ds.accuracy.dims == ("seed", "cls_model") and ds.sizes["cls_model"] == len(CLS_MODELS)
    assert ds.sizes["seed"] == cfg.n_seeds and ds.sizes["stage"] == cfg.n_blocks + 1
    assert np.isfinite(ds.path.values).all() and np.isfinite(ds.energy_distance.values).all()
    # each classifier's mean probability of the true class (what sampling its label scores), a percentage
    p = ds.true_class_probability
    assert p.dims == ("seed", "cls_model") and ((p > 0) & (p < 100)).all()
    # one Gaussian fitted to eight modes is far from the data: well above the estimator's noise
    assert (ds.gaussian_energy > 2 * abs(ds.energy_floor)).all()
    assert [r.name for r in res.claims if r.headline] == ["blocks_match_e2e_accuracy"]
    # the measured cost: one block well under the whole network, every block at once about as much
    for var in ("saved_bytes", "grad_params"):
        for task in ("toy", "classify"):
            v = ds[var].sel(task=task)
            assert float(v.sel(variant="block") / v.sel(variant="e2e")) < 0.5
            assert float(v.sel(variant="joint") / v.sel(variant="e2e")) > 0.9
    assert [r.name for r in res.claims] == [c.name for c in C.CLAIMS]


def test_label_objective_shares_the_stem_and_inference_steps_once_per_block_and_chain():
    from lab.datasets.sequences import SequenceTask
    from lab.methods.diffusion_blocks import train as T

    cfg = Config.from_profile("ci", dataset="digits")
    x, y = torch.randn(12, 8, 8), torch.arange(12) % 10
    task = SequenceTask("t", x, y, x, y, 10)
    blocks = T.build_cls(cfg, task, "blocks", 0)
    # one stem, counted once among the parameters: the blocks own only their layers
    assert all(block.stem is blocks.stem for block in blocks.blocks)
    stem_params = sum(p.numel() for p in blocks.stem.parameters())
    layers = [sum(p.numel() for p in block.layers.parameters()) for block in blocks.blocks]
    assert sum(p.numel() for p in blocks.parameters()) == stem_params + sum(layers)
    loss = T._label_loss(cfg)
    torch.nn.init.normal_(blocks.stem.head.weight)  # zero at the start (adaLN-Zero): no gradient would reach the rest
    for b in range(cfg.n_blocks):  # every block's cross-entropy trains the shared stem and its own layers only
        blocks.zero_grad(set_to_none=True)
        sigma = torch.full((12,), float(blocks.edges[b]))
        loss(blocks, (x, y, sigma, torch.randn(12, cfg.d_model), torch.tensor(b))).backward()
        assert blocks.stem.class_emb.grad is not None and blocks.stem.class_emb.grad.abs().sum() > 0
        assert blocks.stem.tok.weight.grad is not None  # zero: the layers start as the identity (adaLN-Zero)
        for other, block in enumerate(blocks.blocks):
            assert all((p.grad is not None) == (other == b) for p in block.layers.parameters())
    calls = []
    for b, block in enumerate(blocks.blocks):
        block.register_forward_hook(lambda mod, inp, out, b=b: calls.append((b, float(inp[2][0]))))
    path: list = []
    pred = T.classify(cfg, blocks, x, 0, path=path)
    # every chain visits each block once, in order; the path holds the first chain's levels
    assert pred.shape == (12,) and [c[0] for c in calls] == list(range(cfg.n_blocks)) * cfg.n_chains
    assert len(path) == cfg.n_blocks and cfg.n_chains > 1
    # the reference's levels: evenly spaced in the log-normal's CDF from σ_max to σ_min, one in each block's range
    levels = T.inference_levels(cfg)
    q = norm.cdf((np.log(levels) + 1.2) / 1.2)
    np.testing.assert_allclose(np.diff(q), np.full(cfg.n_blocks - 1, (q[-1] - q[0]) / (cfg.n_blocks - 1)), rtol=1e-6)
    assert levels[0] == cfg.sigma_max and levels[-1] == cfg.sigma_min
    np.testing.assert_allclose([c[1] for c in calls], np.tile(levels, cfg.n_chains), rtol=1e-6)
    # one chain is the reference's inference: its class is the argmax of its last logits
    one: list = []
    single = T.classify(Config.from_profile("ci", dataset="digits", n_chains=1), blocks, x, 0, path=one)
    torch.testing.assert_close(single, one[-1].argmax(-1))
    torch.testing.assert_close(one[-1], path[-1])  # the same first chain
    # the class embeddings are unit vectors (the reference's F.normalize)
    torch.testing.assert_close(T.label_embeddings(cfg, blocks).norm(dim=-1), torch.ones(10))
    acc = T.noised_accuracy(cfg, blocks, x, y, 0)
    assert acc.shape == (cfg.n_blocks, 2) and ((acc >= 0) & (acc <= 100)).all()


def test_classifier_partition_follows_the_config():
    from lab.datasets.sequences import SequenceTask
    from lab.methods.diffusion_blocks import train as T

    x, y = torch.randn(4, 8, 8), torch.arange(4)
    task = SequenceTask("t", x, y, x, y, 10)
    for part in ("equal_mass", "uniform"):
        cfg = Config.from_profile("ci", dataset="digits", cls_partition=part)
        np.testing.assert_allclose(T.build_cls(cfg, task, "blocks", 0).edges.numpy(), M.partition(cfg.n_blocks, part))
    # uniform in ln σ: the first block's range starts where the equal-mass one's second block ends, far above
    assert M.partition(3, "uniform")[1] > 4 * M.partition(3, "equal_mass")[1]


@pytest.mark.parametrize("stem_updates", ["every_step", "equal"])
def test_equal_budgets_give_every_end_to_end_parameter_its_counterparts_updates(tmp_path, monkeypatch, stem_updates):
    """Counted in training as the parameters whose gradient reaches the optimiser at a step (and checked unchanged at
    the steps that skip them): under every_step the blocks' shared stem is updated at each of B x cls_steps steps
    and their layers cls_steps times per block on average, and the end-to-end classifiers match it, their stem B x
    the cls_steps updates of their layers; under equal every group gets cls_steps."""
    from lab.methods.diffusion_blocks import train as T

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    cfg = Config.from_profile("ci", dataset="digits", cls_steps=5, n_train=64, stem_updates=stem_updates)
    task, B, real_fit, counted = T.load_tokens(cfg), cfg.n_blocks, T.fit, []

    def fit(model, *args, **kwargs):
        if isinstance(model, M.DiffusionBlocks):
            groups = {"stem": list(model.stem.parameters()),
                      **{f"layers {b}": list(block.layers.parameters()) for b, block in enumerate(model.blocks)}}
        else:
            inner = {id(p) for p in model.layers.parameters()}
            groups = {"stem": [p for p in model.parameters() if id(p) not in inner],
                      "layers": list(model.layers.parameters())}
        counts, last = dict.fromkeys(groups, 0), {k: [p.detach().clone() for p in ps] for k, ps in groups.items()}

        def on_step(step, m, opt):
            for k, ps in groups.items():
                got = {p.grad is not None for p in ps}
                assert len(got) == 1, k  # a group is updated whole or not at all
                if got == {True}:
                    counts[k] += 1
                else:
                    assert all(torch.equal(p, q) for p, q in zip(ps, last[k])), k
                last[k] = [p.detach().clone() for p in ps]

        counted.append(counts)
        return real_fit(model, *args, on_step=on_step, **kwargs)

    monkeypatch.setattr(T, "fit", fit)
    for kind in ("e2e", "small", "blocks"):
        assert not T.cls_run(cfg, task, kind, cfg.seed).loaded
    e2e, small, blocks = counted
    layers = sum(blocks[f"layers {b}"] for b in range(B))
    if stem_updates == "every_step":
        assert T.matched_schedule(cfg)
        assert e2e == small == {"stem": B * cfg.cls_steps, "layers": cfg.cls_steps}
        assert blocks["stem"] == layers == B * cfg.cls_steps  # each block's layers cls_steps on average
    else:
        assert not T.matched_schedule(cfg)
        assert e2e == small == {"stem": cfg.cls_steps, "layers": cfg.cls_steps}
        assert blocks["stem"] == cfg.cls_steps and layers == B * cfg.cls_steps


def test_trainings_in_worker_processes_give_the_weights_of_a_training_here(tmp_path, monkeypatch):
    """train_all trains the missing models side by side in worker processes (lab.core.parallel), into the weight
    cache; each is bit for bit the model trained in this process, and a second call has nothing left to train."""
    from lab.methods.diffusion_blocks import train as T

    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(T, "SERIAL_BELOW_S", 0.0)  # a pool even for a few steps
    cfg = Config.from_profile("ci", toy_steps=3, cls_steps=2)
    task = T.load_tokens(cfg)
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "pool"))
    done = T.train_all(cfg, task, progress=False)
    assert len(done) == cfg.n_seeds * (len(T.TOY_MODELS) + len(T.CLS_MODELS)) and all(r.ran for r in done)
    pooled = [T.toy_run(cfg, kind, cfg.seed) for kind in T.TOY_MODELS] + [
        T.cls_run(cfg, task, kind, cfg.seed) for kind in T.CLS_MODELS]
    assert all(t.loaded for t in pooled) and not any(r.ran for r in T.train_all(cfg, task, progress=False))
    assert_trained_here_as_pooled(monkeypatch, tmp_path, cfg.threads, pooled, lambda: [
        T.toy_run(cfg, kind, cfg.seed) for kind in T.TOY_MODELS] + [
        T.cls_run(cfg, task, kind, cfg.seed) for kind in T.CLS_MODELS])
