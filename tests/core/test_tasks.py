"""The shared sequence-task building blocks: the config mixin's fields and bounds, the task loader, the classifier
builder and its mixer settings, the training schedule and the accuracy."""

import dataclasses

import pytest
import torch

from lab.config import BaseConfig, ConfigError, field_docs, field_specs
from lab.core.tasks import (
    MIXER_KWARGS,
    Layers,
    SequenceTaskConfig,
    accuracy_on_test,
    build_classifier,
    fit_classifier,
    load_task,
    total_steps,
)
from lab.datasets.sequences import TASKS, SequenceTask


@dataclasses.dataclass(frozen=True)
class Demo(SequenceTaskConfig, BaseConfig):
    """A method's config built on the mixin."""

    n_layers: Layers = 1
    """One block."""


def _task(n=40, length=12, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, length, 1, generator=g)
    y = (x[:, :4, 0].sum(1) > 0).long() + (x[:, -4:, 0].sum(1) > 1).long()
    return SequenceTask("toy", x[: n // 2], y[: n // 2], x[n // 2:], y[n // 2:], classes)


def test_mixin_fields_are_documented_bounded_and_overridable():
    specs = field_specs(Demo)
    names = list(specs)
    assert names[:3] == ["seed", "threads", "device"]  # BaseConfig's, then the runtime mixin's (lab.core.runtime)
    assert names[3:6] == ["dataset", "permuted", "n_train"]
    assert specs["n_layers"].default == 1 and specs["d_state"].default == 64
    assert field_docs(Demo)["n_layers"] == "One block." and "states" in field_docs(Demo)["d_state"].lower()
    assert specs["dataset"].choices == tuple(TASKS)
    unbounded = [s.name for s in specs.values() if not s.bounded]
    assert not unbounded, unbounded
    with pytest.raises(ConfigError, match="n_layers=0 is not allowed; allowed: an integer in \\[1, 16\\]"):
        Demo(n_layers=0)
    with pytest.raises(ConfigError, match="dataset='cifar' is not allowed; allowed: one of 'digits', 'mnist1d'"):
        Demo(dataset="cifar")
    with pytest.raises(ConfigError, match="lr=0.0 is not allowed"):
        Demo(lr=0.0)
    assert Demo(seed=5, n_seeds=3).seeds == (5, 6, 7)


def test_training_key_holds_what_determines_the_weights():
    cfg = Demo()
    key = cfg.training_key(kind="lru", seed=0)
    assert key["kind"] == "lru" and key["n_layers"] == 1 and key["lr"] == cfg.lr
    assert "n_test" not in key and "threads" not in key  # evaluation and speed do not change the weights
    assert Demo(n_test=5).training_key() == cfg.training_key()
    assert Demo(epochs=3).training_key() != cfg.training_key()


def test_load_task_cuts_and_permutes():
    cfg = Demo(n_train=100, n_test=20)
    task = load_task(cfg)
    assert task.x_train.shape == (100, 64, 1) and task.x_test.shape == (20, 64, 1) and task.name == "digits"
    perm = load_task(Demo(n_train=100, n_test=20, permuted=True))
    assert perm.name == "pdigits"
    torch.testing.assert_close(perm.x_train[:, :, 0], task.x_train[:, perm.permutation, 0])


@pytest.mark.parametrize("mixer", ["lru", "s5"])
def test_build_classifier_uses_the_mixer_settings(mixer):
    task = _task()
    torch.manual_seed(0)
    model = build_classifier(task, mixer, d_model=6, n_layers=2, d_state=[5, 3])
    assert [layer.d_state for layer in model.ssm_layers()] == [5, 3]
    assert model(task.x_test).shape == (len(task.x_test), task.n_classes)
    if mixer == "lru":  # the ring initialisation of MIXER_KWARGS: |λ| in [r_min, r_max]
        lam = model.ssm_layers()[0].system()[0]
        lo, hi = MIXER_KWARGS["lru"]["r_min"], MIXER_KWARGS["lru"]["r_max"]
        assert lo - 1e-6 <= abs(lam).min() and abs(lam).max() <= hi + 1e-6
    with pytest.raises(ConfigError, match="mixer='gru' is not allowed"):
        build_classifier(task, "gru")


def test_fit_classifier_follows_the_config_schedule_and_learns():
    task = _task(n=256)
    cfg = Demo(epochs=4, batch_size=32, lr=2e-2, ssm_lr=1e-2, d_model=8, d_state=8)
    torch.manual_seed(0)
    model = build_classifier(task, "lru", **cfg.model_size())
    before = accuracy_on_test(model, task)
    res = fit_classifier(model, task, cfg, seed=0, progress=False)
    assert res.steps == total_steps(cfg, task) == 4 * 4
    assert res.loss[-4:].mean() < res.loss[:4].mean()
    after = accuracy_on_test(model, task)
    assert 0.0 <= before <= 100.0 and after > before
