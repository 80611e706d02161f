"""The lab's one trainer (lab.core.train): classification on tensors, regression, a sampler with a loss callable,
the callbacks, the one learning-rate schedule, parameter groups and clear errors for bad calls."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lab.core.models import SequenceClassifier
from lab.core.train import LOSSES, evaluate, fit, lr_factor, param_groups, seed_everything


def _toy(n=96, length=12):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, length, 1, generator=g)
    y = (x[:, :, 0].sum(1) > 0).long()
    return x, y


def _regression(n=128):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 3, generator=g)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.3
    return x, y


def test_fit_learns_and_is_deterministic():
    x, y = _toy()

    def once():
        torch.manual_seed(0)
        model = SequenceClassifier(1, 2, kind="lru", d_model=8, n_layers=1, d_state=8)
        res = fit(model, x, y, epochs=20, batch_size=32, lr=2e-2, seed=0, progress=False, eval_data=(x, y),
                  eval_every=15)  # fmt: skip
        return model, res

    m1, r1 = once()
    m2, r2 = once()
    np.testing.assert_array_equal(r1.loss, r2.loss)
    assert r1.steps == 60 and r1.eval_steps == [15, 30, 45, 60] and len(r1.eval_accuracy) == 4
    assert r1.loss[-6:].mean() < 0.6 * r1.loss[:6].mean()
    assert evaluate(m1, x, y)[0] > 0.8
    assert r1.eval_accuracy[-1] == evaluate(m1, x, y)[0]
    assert r1.wall_time_s > 0 and r1.step_wall.shape == (60,) and math.isclose(r1.step_wall.sum(), r1.wall_time_s)


def test_fit_steps_caps_the_epochs():
    x, y = _toy(40)
    model = SequenceClassifier(1, 2, kind="lru", d_model=4, n_layers=1, d_state=4)
    res = fit(model, x, y, steps=7, batch_size=16, progress=False)  # 3 batches an epoch: 3 epochs, cut at 7
    assert res.steps == 7 and res.loss.shape == (7,)
    res = fit(model, x, y, epochs=2, steps=100, batch_size=16, progress=False)
    assert res.steps == 6


def test_fit_mse_regression_learns():
    x, y = _regression()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    with torch.no_grad():
        before = float(F.mse_loss(model(x), y))
    res = fit(model, x, y, loss="mse", epochs=40, batch_size=32, lr=5e-2, clip=None, progress=False)
    with torch.no_grad():
        after = float(F.mse_loss(model(x), y))
    assert res.steps == 160
    assert after < 0.05 * before
    torch.testing.assert_close(model.weight.detach(), torch.tensor([[1.5, -2.0, 0.5]]), atol=0.1, rtol=0)
    assert LOSSES["mse"](model, (x, y)).item() == pytest.approx(after)


def test_fit_with_a_sampler_and_a_loss_callable_calls_back_every_step():
    x, y = _regression(64)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    asked, batches, on_steps, callbacks, lrs = [], [], [], [], []

    def sample(step):
        asked.append(step)
        idx = torch.arange(step % 4 * 16, step % 4 * 16 + 16)
        return x[idx], y[idx]

    def loss(m, batch):
        batches.append(batch[0].shape)
        return (m(batch[0]) - batch[1]).abs().mean()  # L1: not one of the named losses

    def on_step(step, m, opt):
        assert m is model
        on_steps.append(step)
        lrs.append(opt.param_groups[0]["lr"])

    res = fit(model, sample, steps=25, loss=loss, lr=1e-2, warmup=0.2, on_step=on_step,
              callback=lambda step, total, value: callbacks.append((step, total, value)), progress=False)  # fmt: skip
    assert res.steps == 25 and asked == list(range(25)) and batches == [(16, 3)] * 25
    assert on_steps == list(range(1, 26))
    assert [c[:2] for c in callbacks] == [(s, 25) for s in range(1, 26)]
    np.testing.assert_allclose([c[2] for c in callbacks], res.loss)
    # the optimiser's learning rate after step s is lr * lr_factor(s, total, warmup)
    np.testing.assert_allclose(lrs, [1e-2 * lr_factor(s, 25, 0.2) for s in range(1, 26)], rtol=1e-12)
    assert res.loss[-5:].mean() < res.loss[:5].mean()


def test_lr_factor_warms_up_linearly_then_decays_by_cosine():
    total, warmup = 100, 0.1
    f = np.array([lr_factor(s, total, warmup) for s in range(total + 1)])
    np.testing.assert_allclose(f[:10], np.arange(1, 11) / 10)  # 10 warm-up steps up to the peak
    assert f[10] == 1.0 and np.all(np.diff(f[10:]) < 0)
    assert f[55] == pytest.approx(0.5) and f[total] == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(0, 10, 0.0) == 1.0  # at least one warm-up step, then the cosine
    assert lr_factor(3, 10, 0.5) == pytest.approx(4 / 5)


def test_param_groups_put_the_recurrence_apart():
    model = SequenceClassifier(1, 2, kind="s5", d_model=8, n_layers=1, d_state=4)
    groups = param_groups(model, 1e-2, 1e-3, 0.1)
    rec = [g for g in groups if g["lr"] == 1e-3]
    assert len(rec) == 1 and rec[0]["weight_decay"] == 0.0
    layer = model.ssm_layers()[0]
    assert {id(p) for p in rec[0]["params"]} == {id(getattr(layer, n)) for n in layer.RECURRENT}
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    decayed = [p for g in groups if g["weight_decay"] > 0 for p in g["params"]]
    assert decayed and all(p.dim() >= 2 for p in decayed)


def test_seed_everything_repeats_draws():
    seed_everything(3)
    a = (np.random.rand(), torch.rand(2))
    seed_everything(3)
    b = (np.random.rand(), torch.rand(2))
    assert a[0] == b[0] and torch.equal(a[1], b[1])


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((lambda step: None,), {}, "steps=None is not allowed with a sampler"),
        ((), {"epochs": 1}, "needs data"),
        (("xy",), {}, "give epochs or steps"),
        (("xy",), {"epochs": 1, "loss": "hinge"}, r"loss='hinge' is not allowed; allowed: .*cross_entropy.*mse"),
    ],
)
def test_bad_calls_raise_clear_errors(args, kwargs, match):
    x, y = _toy(8)
    args = (x, y) if args == ("xy",) else args
    with pytest.raises(ValueError, match=match):
        fit(torch.nn.Linear(1, 2), *args, progress=False, **kwargs)


def test_device_field_resolves_and_a_missing_gpu_is_a_clear_error():
    from lab.config import ConfigError
    from lab.core.runtime import resolve_device

    assert resolve_device(None).type == "cpu" and resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="device='tpu' is not allowed"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device='cuda' is not allowed; allowed: cpu or auto on this machine"):
            resolve_device("cuda")
        x, y = _regression()
        with pytest.raises(ConfigError, match="device='cuda'"):
            fit(torch.nn.Linear(3, 1), x, y, loss="mse", epochs=1, progress=False, device="cuda")


def test_fit_on_cpu_device_equals_the_default():
    x, y = _regression()
    losses = []
    for device in (None, "cpu", "auto" if not torch.cuda.is_available() else "cpu"):
        torch.manual_seed(0)
        res = fit(torch.nn.Linear(3, 1), x, y, loss="mse", epochs=3, progress=False, device=device)
        losses.append(res.loss)
    np.testing.assert_array_equal(losses[0], losses[1])
    np.testing.assert_array_equal(losses[0], losses[2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the device machine)")
def test_fit_on_cuda_trains_there_and_returns_the_model_on_the_cpu():
    x, y = _regression()
    model = torch.nn.Linear(3, 1)
    res = fit(model, x, y, loss="mse", epochs=20, lr=5e-2, progress=False, device="cuda", eval_data=None)
    assert next(model.parameters()).device.type == "cpu"
    assert res.loss[-1] < 0.5 * res.loss[0]


@pytest.mark.parametrize("kind", ["mamba", "lru"])
def test_fit_s_foreach_adamw_gives_the_one_tensor_at_a_time_weights_bit_for_bit(kind, monkeypatch):
    """fit runs AdamW's foreach form (fewer dispatches); every weight after training equals, bit for bit, the
    weights of AdamW's one-tensor-at-a-time form: cached weights keep meaning the same training. The model has
    every parameter group (decayed matrices, undecayed vectors, the recurrence at its own rate)."""
    import lab.core.train as train

    x, y = _toy()
    weights, adamw = {}, torch.optim.AdamW
    for foreach in (True, False):
        if not foreach:
            monkeypatch.setattr(train.torch.optim, "AdamW", lambda *a, **k: adamw(*a, **{**k, "foreach": False}))
        torch.manual_seed(0)
        model = SequenceClassifier(1, 2, kind=kind, d_model=8, n_layers=2, d_state=4)
        assert len(param_groups(model, 1e-2, 1e-3, 0.1)) == 3
        fit(model, x, y, epochs=8, batch_size=32, lr=1e-2, ssm_lr=1e-3, weight_decay=0.1, seed=0, progress=False)
        weights[foreach] = {k: v.clone() for k, v in model.state_dict().items()}
    for name, w in weights[True].items():
        assert torch.equal(w, weights[False][name]), name
    assert any(not torch.equal(w, v) for w, v in zip(weights[True].values(), _untrained(kind).values()))


def _untrained(kind):
    torch.manual_seed(0)
    return SequenceClassifier(1, 2, kind=kind, d_model=8, n_layers=2, d_state=4).state_dict()
