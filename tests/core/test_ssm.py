"""SSM layers (lab.core.ssm): the parallel form (kernels) equals the recurrent step(), shapes, gradients,
discretisation, state removal. The models built from them are tested in test_models.py, the trainer in
test_train.py."""

import numpy as np
import pytest
import scipy.linalg
import torch

from lab.core.models import SequenceClassifier, state_sizes
from lab.core.ssm import LRU, MIXERS, S5, Mamba2, hippo_n_eigenvalues, make_mixer
from lab.core.train import param_groups

KINDS = ["lru", "s5", "mamba", "mamba2"]
D_MODEL, D_STATE = 16, 8


def _mixer(kind, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    extra = {"chunk_size": 8} if kind == "mamba2" else {}
    return make_mixer(kind, D_MODEL, D_STATE, **extra, **kw).to(dtype)


def _run_steps(layer, x, state):
    ys = []
    for t in range(x.shape[1]):
        y_t, state = layer.step(x[:, t], state)
        ys.append(y_t)
    return torch.stack(ys, dim=1), state


def _flat(state):
    if isinstance(state, tuple):
        return torch.cat([s.reshape(-1) for s in state])
    return state.reshape(-1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", [1, 13, 37])
def test_parallel_form_equals_recurrent_steps(kind, length):
    layer = _mixer(kind)
    x = torch.randn(3, length, D_MODEL, dtype=torch.float64)
    y_par, last = layer(x, return_state=True)
    y_rec, state = _run_steps(layer, x, layer.initial_state(3))
    assert y_par.shape == (3, length, D_MODEL)
    torch.testing.assert_close(y_par, y_rec, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(_flat(last), _flat(state), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_form_resumes_from_a_state(kind):
    """Reading a prefix in parallel, then the rest in parallel from the returned state, equals one pass."""
    layer = _mixer(kind)
    x = torch.randn(2, 30, D_MODEL, dtype=torch.float64)
    whole = layer(x)
    y1, s1 = layer(x[:, :11], return_state=True)
    y2 = layer(x[:, 11:], state=s1)
    torch.testing.assert_close(torch.cat([y1, y2], dim=1), whole, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_reach_every_parameter(kind):
    layer = _mixer(kind, dtype=torch.float32)
    x = torch.randn(4, 20, D_MODEL, requires_grad=True)
    layer(x).pow(2).mean().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    for name, p in layer.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_diagonal_layer_gradients_match_finite_differences(kind):
    layer = _mixer(kind)
    x = torch.randn(2, 9, D_MODEL, dtype=torch.float64)
    names = list(layer.STATE_AXES)
    params = [getattr(layer, n) for n in names]

    def f(*ps):
        saved = [p.data for p in params]
        for p, v in zip(params, ps):
            p.data = v
        out = layer(x).pow(2).sum()
        for p, v in zip(params, saved):
            p.data = v
        return out

    inputs = tuple(p.detach().clone().requires_grad_() for p in params)
    out = layer(x).pow(2).sum()
    grads = torch.autograd.grad(out, params)
    eps = 1e-6
    for k, (p, g) in enumerate(zip(params, grads)):
        idx = tuple(np.unravel_index(3 % p.numel(), p.shape))
        plus = [q.detach().clone() for q in inputs]
        minus = [q.detach().clone() for q in inputs]
        plus[k][idx] += eps
        minus[k][idx] -= eps
        fd = (f(*plus) - f(*minus)) / (2 * eps)
        assert float(g[idx].detach()) == pytest.approx(float(fd.detach()), rel=1e-5, abs=1e-7), names[k]


def test_lru_parametrisation_is_stable_and_normalised():
    torch.manual_seed(1)
    layer = LRU(8, 64, r_min=0.4, r_max=0.95)
    lam = layer.eigenvalues().detach()
    assert torch.all(lam.abs() < 1) and torch.all(lam.abs() >= 0.4 - 1e-6) and torch.all(lam.abs() <= 0.95 + 1e-6)
    gamma = torch.exp(layer.gamma_log.detach())
    torch.testing.assert_close(gamma, torch.sqrt(1 - lam.abs() ** 2))


def test_lru_set_system_round_trips():
    torch.manual_seed(2)
    layer = LRU(6, 10).double()
    rng = np.random.default_rng(0)
    lam = 0.9 * rng.uniform(0.2, 1.0, 7) * np.exp(1j * rng.uniform(-np.pi, np.pi, 7))
    B = rng.normal(size=(7, 6)) + 1j * rng.normal(size=(7, 6))
    C = rng.normal(size=(6, 7)) + 1j * rng.normal(size=(6, 7))
    layer.set_system(lam, B, C)
    lam2, B2, C2 = layer.system()
    assert layer.d_state == 7
    np.testing.assert_allclose(lam2, lam, rtol=1e-12)
    np.testing.assert_allclose(B2, B, rtol=1e-10)
    np.testing.assert_allclose(C2, C, rtol=1e-12)


def test_s5_zero_order_hold_matches_the_matrix_exponential():
    """ZOH of dx/dt = Λx + B̃u over Δ: exp([[ΛΔ, B̃Δ], [0, 0]]) holds λ̄ and B̄ in its first block row."""
    torch.manual_seed(3)
    layer = S5(4, 5).double()
    lam_bar, Bbar, _ = layer.system()
    lam_c = layer.continuous_eigenvalues().detach().numpy()
    dt = torch.exp(layer.log_dt).detach().numpy()
    Bt = (layer.B_re + 1j * layer.B_im).detach().numpy()
    for i in range(5):
        M = np.zeros((5, 5), dtype=complex)
        M[0, 0] = lam_c[i] * dt[i]
        M[0, 1:] = Bt[i] * dt[i]
        E = scipy.linalg.expm(M)
        assert lam_bar[i] == pytest.approx(E[0, 0], rel=1e-12)
        np.testing.assert_allclose(Bbar[i], E[0, 1:], rtol=1e-10)


def test_hippo_n_eigenvalues():
    ev = hippo_n_eigenvalues(6)
    assert ev.shape == (6,)
    np.testing.assert_allclose(ev.real, -0.5, atol=1e-8)
    assert np.all(ev.imag > 0) and np.all(np.diff(ev.imag) > 0)


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_impulse_response_equals_the_layer_response_to_an_impulse(kind):
    layer = _mixer(kind)
    L = 12
    K = layer.impulse_response(L)  # (L, H_out, H_in)
    j = 3
    x = torch.zeros(1, L, D_MODEL, dtype=torch.float64)
    x[0, 0, j] = 1.0
    y = layer(x)[0].detach().numpy()  # (L, H)
    y[0] -= layer.D.detach().numpy() * x[0, 0].numpy()
    np.testing.assert_allclose(y, K[:, :, j], atol=1e-12)


@pytest.mark.parametrize("kind", ["lru", "s5"])
def test_select_states_removes_exactly_those_states(kind):
    """The kept layer's kernel is the sum of the kept states' contributions Re(C_i λ_i^k B̄_i)."""
    layer = _mixer(kind)
    lam, Bbar, C = layer.system()
    keep = [0, 3, 5]
    layer.select_states(keep)
    assert layer.d_state == 3
    k = np.arange(10)[:, None]
    expected = np.einsum("on,kn,ni->koi", C[:, keep], lam[keep][None, :] ** k, Bbar[keep]).real
    np.testing.assert_allclose(layer.impulse_response(10), expected, atol=1e-12)
    with pytest.raises(ValueError, match="at least one state"):
        layer.select_states([])
    with pytest.raises(ValueError, match="distinct indices"):
        layer.select_states([0, 0])


def test_select_states_cuts_the_optimiser_state_and_training_continues():
    torch.manual_seed(4)
    model = SequenceClassifier(1, 3, kind="lru", d_model=8, n_layers=2, d_state=12)
    opt = torch.optim.AdamW(param_groups(model, 1e-2, 1e-3), lr=1e-2)
    x, y = torch.randn(16, 10, 1), torch.randint(0, 3, (16,))
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    layer = model.ssm_layers()[0]
    old = layer.B_re
    before = opt.state[old]["exp_avg"].clone()
    layer.select_states([1, 4, 7], opt)
    after = opt.state[layer.B_re]["exp_avg"]
    torch.testing.assert_close(after, before[[1, 4, 7]])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert id(layer.B_re) in ids and id(old) not in ids and old not in opt.state
    for _ in range(2):  # a fresh Parameter keeps autograd and Adam consistent
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    assert torch.isfinite(loss) and state_sizes(model) == [3, 12]


def test_mamba2_rejects_bad_head_sizes():
    with pytest.raises(ValueError, match="headdim"):
        Mamba2(10, 4, headdim=16)
    with pytest.raises(ValueError, match="ngroups"):
        Mamba2(16, 4, headdim=8, ngroups=3)
    assert Mamba2(16, 4, headdim=8, ngroups=2).nheads == 4


def test_lru_and_s5_reject_bad_ranges():
    with pytest.raises(ValueError, match="r_min"):
        LRU(4, 4, r_min=0.5, r_max=0.4)
    with pytest.raises(ValueError, match="dt_min"):
        S5(4, 4, dt_min=0.2, dt_max=0.1)


def test_make_mixer_builds_each_kind_and_rejects_others():
    for kind, cls in MIXERS.items():
        layer = make_mixer(kind, 16, 4)
        assert type(layer) is cls and layer.d_model == 16
    assert set(MIXERS) == set(KINDS)
    with pytest.raises(ValueError, match="unknown SSM kind 'rnn'"):
        make_mixer("rnn", 8, 4)


def test_package_reexports_every_public_name():
    import lab.core.ssm as ssm

    assert set(ssm.__all__) == {"LRU", "S5", "Mamba", "Mamba2", "DiagonalSSM", "hippo_n_eigenvalues", "MIXERS",
                                "make_mixer"}  # fmt: skip
    for name in ssm.__all__:
        assert hasattr(ssm, name), name
    # one module per layer
    assert [ssm.LRU.__module__, ssm.S5.__module__, ssm.Mamba.__module__, ssm.Mamba2.__module__] == [
        "lab.core.ssm.lru", "lab.core.ssm.s5", "lab.core.ssm.mamba", "lab.core.ssm.mamba2"
    ]  # fmt: skip


def test_mamba_out_projection_gradients():
    """The Mamba block's out-projection (scan layout in, block layout out, its own backward) against F.linear on the
    transposed input, and float64 gradcheck; its input gradient comes back in the scan's contiguous layout."""
    from lab.core.ssm.mamba import _OutProj

    torch.manual_seed(0)
    y = torch.randn(2, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    out = _OutProj.apply(y, w)
    assert out.shape == (2, 5, 3) and out.is_contiguous()
    assert torch.allclose(out, torch.nn.functional.linear(y.transpose(1, 2), w))
    assert torch.autograd.gradcheck(_OutProj.apply, (y, w))
    (dy,) = torch.autograd.grad(_OutProj.apply(y, w).sum(), (y,))
    assert dy.is_contiguous()
