"""Multi-query associative recall: labels against a brute-force scan, the layout, the placement of queries."""

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets.recall import check_mqar, mqar_layout, mqar_task
from lab.datasets.tokens import IGNORE


def brute_force_labels(inputs, n_pairs, value_start):
    """For every position after the pairs holding a key, the token that followed that key's first appearance."""
    out = np.full(inputs.shape, IGNORE, dtype=np.int64)
    for r, seq in enumerate(inputs.tolist()):
        bound = {}
        for s in range(0, 2 * n_pairs, 2):
            bound[seq[s]] = seq[s + 1]
        for t in range(2 * n_pairs, len(seq)):
            if seq[t] in bound:
                first = seq.index(seq[t])  # the key's earlier appearance, in the pairs
                assert first < t and first % 2 == 0
                out[r, t] = seq[first + 1] - value_start
    return out


@pytest.mark.parametrize("kw", [{}, {"n_pairs": 4, "n_queries": 11}, {"n_pairs": 3, "n_queries": 1},
                                {"vocab_size": 20, "n_pairs": 9, "noise_vocab": 2},
                                {"vocab_size": 3, "n_pairs": 1, "n_queries": 2}])
def test_labels_match_brute_force_scan(kw):
    task = mqar_task(n=60, length=40, seed=5, **kw)
    opts = check_mqar(length=40, **kw)
    n_pairs, n_queries, vocab, noise = opts["n_pairs"], opts["n_queries"], opts["vocab_size"], opts["noise_vocab"]
    n_keys = (vocab - noise) // 2
    value_start = noise + n_keys
    assert task.inputs.shape == task.targets.shape == (60, 40) and task.name == "mqar"
    assert task.vocab_size == vocab and task.n_classes == vocab - value_start
    assert task.options == {**opts, "seed": 5}
    assert np.array_equal(task.targets, brute_force_labels(task.inputs, n_pairs, value_start))
    for x, y in zip(task.inputs.tolist(), task.targets.tolist()):
        keys, values = x[0:2 * n_pairs:2], x[1:2 * n_pairs:2]
        assert len(set(keys)) == n_pairs and all(noise <= k < value_start for k in keys)
        assert all(value_start <= v < vocab for v in values)
        assert all(y[t] == IGNORE for t in range(2 * n_pairs))  # the pairs carry no label
        queries = [t for t in range(2 * n_pairs, 40) if y[t] != IGNORE]
        assert len(queries) == n_queries
        rest = [x[t] for t in range(2 * n_pairs, 40) if y[t] == IGNORE]
        assert all(0 <= tok < noise for tok in rest)  # filler only, never a key or a value
        asked = [x[t] for t in queries]
        counts = [asked.count(k) for k in keys]
        assert sum(counts) == n_queries
        assert max(counts) - min(counts) <= 1  # keys cycled: each asked floor or ceil(n_queries / n_pairs) times


def test_default_layout_and_ranges():
    filler, keys, values = mqar_layout(64)
    assert (filler, keys, values) == (range(0, 1), range(1, 32), range(32, 64))
    task = mqar_task(n=8, length=64, seed=0)
    assert task.n_classes == 32 and task.options["n_queries"] == 8
    labelled = task.targets[task.targets != IGNORE]
    assert labelled.min() >= 0 and labelled.max() < task.n_classes


def test_queries_and_values_are_spread_uniformly():
    task = mqar_task(n=4000, length=32, seed=1, n_pairs=4, n_queries=4, vocab_size=20)
    per_position = (task.targets != IGNORE).sum(axis=0)
    assert per_position[:8].sum() == 0
    expected = 4000 * 4 / 24  # four queries among the 24 positions after the pairs
    assert np.all(np.abs(per_position[8:] - expected) < 0.15 * expected)
    slots = np.bincount(task.targets[task.targets != IGNORE], minlength=task.n_classes)
    assert slots.min() > 0.8 * slots.mean()
    first_key = np.bincount(task.inputs[:, 0], minlength=20)[1:10]  # keys 1..9 all open sequences
    assert first_key.min() > 0.8 * first_key.mean()


def test_deterministic_per_seed():
    a, b, c = (mqar_task(n=20, length=40, seed=s) for s in (0, 0, 1))
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.inputs, c.inputs)


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match=r"length=20 is not allowed; allowed: an integer in \[24, 4096\]"):
        mqar_task(n=2, length=20, seed=0)
    with pytest.raises(ConfigError, match=r"length=0 is not allowed; allowed: an integer in \[1, 4096\]"):
        mqar_task(n=2, length=0, seed=0)
    with pytest.raises(ConfigError, match=r"n_pairs=32 is not allowed; allowed: an integer in \[1, 31\]"):
        mqar_task(n=2, length=100, seed=0, n_pairs=32)
    with pytest.raises(ConfigError, match=r"vocab_size=2 is not allowed; allowed: an integer in \[3, 16384\]"):
        mqar_task(n=2, length=100, seed=0, vocab_size=2)
    with pytest.raises(ConfigError, match=r"n_queries=0 is not allowed"):
        mqar_task(n=2, length=100, seed=0, n_queries=0)
    with pytest.raises(ConfigError, match=r"noise_vocab=63 is not allowed; allowed: an integer in \[1, 62\]"):
        mqar_task(n=2, length=100, seed=0, noise_vocab=63)
