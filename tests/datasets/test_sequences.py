"""Sequence tasks: sklearn digits pixel by pixel, MNIST-1D from its generator, permuted variants, the cache."""

import random

import numpy as np
import pytest
import torch

from lab.datasets.sequences import load_sequence_task, sequence_dataset


def test_digits_pixel_by_pixel(tmp_path):
    from sklearn.datasets import load_digits

    task = load_sequence_task("digits", root=tmp_path)
    assert task.x_train.shape == (1347, 64, 1) and task.x_test.shape == (450, 64, 1)
    assert task.x_train.dtype == torch.float32 and task.y_train.dtype == torch.int64
    assert task.length == 64 and task.d_input == 1 and task.n_classes == 10 and task.name == "digits"
    assert abs(float(task.x_train.mean())) < 1e-5 and abs(float(task.x_train.std()) - 1) < 1e-3
    # stratified: every class in both parts, in proportion
    counts = torch.bincount(task.y_test, minlength=10)
    assert counts.min() >= 40 and counts.max() <= 50
    # the sequences are the images in raster order, affinely rescaled
    flat = load_digits().images.reshape(-1, 64)
    x0 = task.x_train[0, :, 0].double().numpy()
    best = max(np.corrcoef(f, x0)[0, 1] for f in flat if f.std() > 0)
    assert best > 1 - 1e-6
    assert list(tmp_path.glob("seq-digits-*.nc"))


def test_cache_returns_identical_data_and_splits_are_seeded(tmp_path):
    a = load_sequence_task("digits", root=tmp_path)
    b = load_sequence_task("digits", root=tmp_path)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    c = load_sequence_task("digits", root=tmp_path, split_seed=1)
    assert not torch.equal(a.y_train, c.y_train)
    assert len(list(tmp_path.glob("seq-digits-*.nc"))) == 2


def test_permuted_variant_is_a_fixed_permutation(tmp_path):
    plain = load_sequence_task("digits", root=tmp_path)
    perm = load_sequence_task("digits", permuted=True, root=tmp_path)
    again = load_sequence_task("digits", permuted=True, root=tmp_path)
    other = load_sequence_task("digits", permuted=True, permutation_seed=1, root=tmp_path)
    assert perm.name == "pdigits" and sorted(perm.permutation.tolist()) == list(range(64))
    assert torch.equal(perm.x_train, plain.x_train[:, perm.permutation])
    assert torch.equal(perm.x_test, plain.x_test[:, perm.permutation])
    assert torch.equal(perm.x_train, again.x_train) and not torch.equal(perm.x_train, other.x_train)
    assert torch.equal(perm.y_train, plain.y_train)


def test_mnist1d_comes_from_its_generator_and_leaves_global_rngs_alone(tmp_path):
    from mnist1d.data import get_dataset_args, make_dataset

    random.seed(123)
    np.random.seed(123)
    before = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    task = load_sequence_task("mnist1d", root=tmp_path)
    assert (random.random(), np.random.random()) == before
    assert task.x_train.shape == (4000, 40, 1) and task.x_test.shape == (1000, 40, 1)
    ref = make_dataset(get_dataset_args())
    np.testing.assert_allclose(task.x_test[:, :, 0].numpy(), ref["x_test"].astype(np.float32))
    np.testing.assert_array_equal(task.y_train.numpy(), ref["y"])
    perm = load_sequence_task("mnist1d", permuted=True, root=tmp_path)
    assert perm.x_train.shape == (4000, 40, 1)


def test_unknown_task_and_bad_split_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown sequence task 'cifar'; allowed: digits, mnist1d"):
        load_sequence_task("cifar", root=tmp_path)
    with pytest.raises(ValueError, match="test_fraction"):
        sequence_dataset("digits", test_fraction=1.5, root=tmp_path)


def test_subset():
    task = load_sequence_task("digits").subset(100, 20)
    assert len(task.x_train) == 100 and len(task.y_test) == 20


def test_every_registered_task_loads_through_the_registry(tmp_path, monkeypatch):
    """TASKS is the one list of task names: each entry's loader gives the data ``sequence_dataset`` returns, and a
    name outside it is refused with the registry's names."""
    from lab.datasets.sequences import TASKS

    assert list(TASKS) == ["digits", "mnist1d"]
    lengths = {"digits": 64, "mnist1d": 40}
    for name, loader in TASKS.items():
        ds = loader(root=tmp_path)
        assert ds.sizes["time"] == lengths[name]
        assert sequence_dataset(name, root=tmp_path).equals(ds)
    monkeypatch.setitem(TASKS, "tiny", lambda **_: sequence_dataset("digits", root=tmp_path).isel(train=slice(8)))
    assert load_sequence_task("tiny").x_train.shape == (8, 64, 1)
    monkeypatch.delitem(TASKS, "tiny")
    with pytest.raises(ValueError, match="allowed: digits, mnist1d"):
        sequence_dataset("tiny", root=tmp_path)
