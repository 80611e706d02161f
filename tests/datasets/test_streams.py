"""Task streams: permutations and class splits correct and deterministic, cached; replay buffers keep their share."""

import numpy as np
import pytest
import torch

from lab.checks import ConfigError
from lab.datasets.streams import ReplayBuffer, StreamTask, TaskStream, task_stream


@pytest.fixture(scope="module")
def permuted():
    return task_stream("permuted", "digits", n_tasks=4, seed=3)


@pytest.fixture(scope="module")
def split():
    return task_stream("split", "digits", seed=1)


def test_permuted_tasks_are_permutations_of_the_same_data(permuted):
    assert len(permuted) == 4 and permuted.kind == "permuted" and permuted.d_input == 64
    base = permuted[0]
    np.testing.assert_array_equal(base.permutation, np.arange(64))  # identity first
    for t in permuted.tasks[1:]:
        assert sorted(t.permutation) == list(range(64)) and not np.array_equal(t.permutation, np.arange(64))
        torch.testing.assert_close(t.x_train, base.x_train[:, t.permutation])
        torch.testing.assert_close(t.x_test, base.x_test[:, t.permutation])
        assert torch.equal(t.y_train, base.y_train) and t.classes == tuple(range(10))
    perms = {tuple(t.permutation) for t in permuted}
    assert len(perms) == 4
    # standardised with the training set's statistics
    assert abs(float(base.x_train.mean())) < 1e-4 and abs(float(base.x_train.std()) - 1) < 1e-3


def test_split_tasks_partition_the_classes(split):
    assert len(split) == 5 and split.kind == "split"
    classes = [c for t in split for c in t.classes]
    assert sorted(classes) == list(range(10))
    for t in split:
        assert len(t.classes) == 2
        assert set(t.y_train.unique().tolist()) == set(t.classes) == set(t.y_test.unique().tolist())
    assert split.seen_classes(1) == tuple(sorted(split[0].classes + split[1].classes))
    # every digits training example of those classes is in its task
    from lab.datasets.sequences import sequence_dataset

    ds = sequence_dataset("digits")
    assert sum(len(t.y_train) for t in split) == ds.sizes["train"]
    assert sum(len(t.y_test) for t in split) == ds.sizes["test"]


def test_streams_are_deterministic_and_seeded(tmp_path):
    a = task_stream("permuted", "digits", n_tasks=3, seed=5, n_train=100, n_test=50, root=tmp_path)
    b = task_stream("permuted", "digits", n_tasks=3, seed=5, n_train=100, n_test=50, root=tmp_path / "other")
    assert len(a[0].y_train) == 100 and len(a[0].y_test) == 50
    for s, t in zip(a, b):
        assert np.array_equal(s.permutation, t.permutation) and torch.equal(s.x_train, t.x_train)
    c = task_stream("permuted", "digits", n_tasks=3, seed=6, n_train=100, n_test=50, root=tmp_path)
    assert not np.array_equal(a[1].permutation, c[1].permutation)
    assert len(list(tmp_path.glob("stream-permuted-digits-*.nc"))) == 2  # cached on disk
    fixed = task_stream("split", "digits", class_order=tuple(range(10)), n_tasks=2, root=tmp_path)
    assert [t.classes for t in fixed] == [(0, 1), (2, 3)]


def test_mnist1d_streams():
    s = task_stream("split", "mnist1d", classes_per_task=5)
    assert len(s) == 2 and s.d_input == 40
    assert sorted(s[0].classes + s[1].classes) == list(range(10))


@pytest.mark.parametrize("kwargs, field", [
    (dict(kind="rotated"), "kind"), (dict(source="cifar"), "source"), (dict(kind="split", n_tasks=6), "n_tasks"),
    (dict(kind="split", class_order=(0, 0, 1, 2, 3, 4, 5, 6, 7, 8)), "class_order"), (dict(n_train=-1), "n_train"),
])
def test_bad_stream_arguments_name_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=f"^{field}="):
        task_stream(**{"source": "digits", **kwargs})


def _task(n=200, classes=(0, 1), index=0, d=3):
    y = torch.tensor([classes[i % len(classes)] for i in range(n)])
    x = torch.arange(n * d, dtype=torch.float32).reshape(n, d)
    return StreamTask(index, tuple(classes), x, y, x[:10], y[:10])


@pytest.mark.parametrize("share", [0.0, 0.1, 0.25, 1.0])
@pytest.mark.parametrize("policy", ["reservoir", "exemplar"])
def test_replay_keeps_its_share_of_every_task(share, policy):
    buf = ReplayBuffer(share, policy, seed=0)
    buf.add_task(_task(200, (0, 1), 0))
    buf.add_task(_task(120, (2, 3), 1))
    assert len(buf) == round(share * 100) * 2 + round(share * 60) * 2
    assert int((buf.task == 0).sum()) == 2 * round(share * 100)
    if len(buf):
        # the kept rows are real rows of their task with their own labels
        assert torch.equal(buf.y, (buf.x[:, 0] / 3).long() % 2 + 2 * buf.task)
    if policy == "exemplar":  # the share of every class: balanced within a task
        counts = torch.bincount(buf.y, minlength=4).tolist()
        assert counts == [round(share * 100)] * 2 + [round(share * 60)] * 2


def test_exemplars_are_nearest_the_class_mean():
    x = torch.tensor([[0.0], [10.0], [1.0], [-1.0], [50.0]])
    buf = ReplayBuffer(0.4, "exemplar")
    buf.add(x, torch.zeros(5, dtype=torch.int64), 0)
    assert sorted(buf.x.ravel().tolist()) == [1.0, 10.0]  # mean 12: nearest are 10 and 1


def test_reservoir_with_a_fixed_capacity_is_uniform():
    counts = np.zeros(100)
    for seed in range(300):
        buf = ReplayBuffer(capacity=20, seed=seed)
        for t in range(4):
            x = torch.arange(25 * t, 25 * (t + 1), dtype=torch.float32)[:, None]
            buf.add(x, torch.zeros(25, dtype=torch.int64), t)
        assert len(buf) == 20
        counts[buf.x.ravel().long().numpy()] += 1
    # each of the 100 examples kept with probability 0.2: 60 of 300 runs, binomial sd ~6.9
    assert abs(counts.mean() - 60) < 1e-9 and counts.min() > 30 and counts.max() < 90
    assert abs(counts[:25].mean() - counts[75:].mean()) < 10  # early and late tasks alike
    exemplar = ReplayBuffer(capacity=8, policy="exemplar")
    exemplar.add_task(_task(40, (0, 1), 0))
    exemplar.add_task(_task(40, (2, 3), 1))
    assert torch.bincount(exemplar.y).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan")])
def test_replay_share_outside_unit_interval_is_refused(share):
    with pytest.raises(ConfigError, match=r"^replay_share=.*allowed: a finite number in \[0, 1\]"):
        ReplayBuffer(share)
    with pytest.raises(ConfigError, match="^policy="):
        ReplayBuffer(0.5, "fifo")


def test_sample_draws_from_the_buffer():
    buf = ReplayBuffer(0.5, seed=1)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(4)
    buf.add_task(_task(20))
    x, y = buf.sample(64, torch.Generator().manual_seed(0))
    assert x.shape == (64, 3) and y.shape == (64,)
    assert set(x[:, 0].tolist()) <= set(buf.x[:, 0].tolist())
    assert isinstance(TaskStream("s", "split", (_task(),)).seen_classes(0), tuple)
