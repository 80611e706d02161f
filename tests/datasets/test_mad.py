"""MAD's synthetic skills (lab.datasets.mad): labels against a plain per-sequence scan, layouts, seeds, bad input."""

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets import mad
from lab.datasets.synthetic import make_splits, make_task
from lab.datasets.tokens import IGNORE


@pytest.mark.parametrize("kw", [dict(), dict(vocab_size=6, n_tokens=1, noise_vocab=3), dict(n_tokens=8)])
def test_selective_copying_labels_are_the_data_tokens_in_order(kw):
    t = mad.selective_copying_task(n=20, length=40, seed=3, **kw)
    k, f, v = t.options["n_tokens"], t.options["noise_vocab"], t.options["vocab_size"]
    assert t.n_classes == v - 1 - f
    for x, y in zip(t.inputs, t.targets):
        data = [tok - f for tok in x[:-k] if tok >= f]  # every non-noise token of the context, in order
        assert len(data) == k and np.all(x[-k:] == v - 1) and np.all(x[:-k] < v - 1)
        assert list(y[-k:]) == data and np.all(y[:-k] == IGNORE)


def _recall_scan(x, y, noise, keys, values):
    """Brute force: a key's label is its value (the next token) when the key was seen before; IGNORE elsewhere."""
    bound, seen = {}, set()
    after_key = False
    for t, tok in enumerate(x):
        if after_key:
            assert tok in values
            bound.setdefault(int(x[t - 1]), int(tok))
            assert bound[int(x[t - 1])] == tok  # one value per key in a sequence
            assert y[t] == IGNORE
            after_key = False
        elif tok in keys:
            assert y[t] == (bound_value(x, t) - values.start if tok in seen else IGNORE)
            seen.add(tok)
            after_key = True
        else:
            assert tok in noise and y[t] == IGNORE


def bound_value(x, t):
    """The value after the first sighting of the key at position t."""
    first = int(np.flatnonzero(x[:t + 1] == x[t])[0])
    return int(x[first + 1])


@pytest.mark.parametrize("kw", [dict(), dict(vocab_size=12, n_keys=2, noise_vocab=2, noise_percent=0),
                                dict(noise_percent=60)])
def test_noisy_recall_labels_match_a_scan(kw):
    t = mad.noisy_recall_task(n=30, length=50, seed=5, **kw)
    noise, keys, values = mad.recall_layout(t.options["vocab_size"], t.options["noise_vocab"])
    assert t.n_classes == len(values)
    for x, y in zip(t.inputs, t.targets):
        _recall_scan(x, y, noise, keys, values)
        assert len({int(tok) for tok in x if tok in keys}) <= t.options["n_keys"]
    labelled = (t.targets != IGNORE).mean()
    assert 0.05 < labelled < 0.5
    if t.options["noise_percent"] == 0:
        assert not np.isin(t.inputs, list(noise)).any()


def test_compression_reconstructs_the_prefix():
    for length in (3, 16, 17):
        t = mad.compression_task(n=8, length=length, seed=1, vocab_size=7)
        m = (length - 1) // 2
        assert np.all(t.inputs[:, m] == 5) and np.all(t.inputs[:, m + 1:] == 6) and np.all(t.inputs[:, :m] < 5)
        assert np.array_equal(t.targets[:, m + 1:2 * m + 1], t.inputs[:, :m])
        assert np.all(t.targets[:, :m + 1] == IGNORE) and np.all(t.targets[:, 2 * m + 1:] == IGNORE)


def test_memorisation_table_is_shared_by_every_split():
    splits = make_splits("memorisation", n_train=50, n_test=10, train_length=8, test_lengths=[8, 32], seed=2,
                         cache=False)
    table = mad.memorisation_table(64, 16, 0)
    for t in splits.values():
        assert np.array_equal(t.targets, table[t.inputs])
    assert not np.array_equal(splits["train"].inputs[:10], splits["test_8"].inputs)
    other = mad.memorisation_task(n=50, length=8, seed=0, table_seed=1)
    assert not np.array_equal(other.targets, mad.memorisation_table(64, 16, 0)[other.inputs])


@pytest.mark.parametrize("name", mad.NAMES)
def test_registered_deterministic_and_seeded(name):
    a = make_task(name, n=5, length=24, seed=1, cache=False)
    b = make_task(name, n=5, length=24, seed=1, cache=False)
    c = make_task(name, n=5, length=24, seed=2, cache=False)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.inputs, c.inputs)
    assert a.inputs.max() < a.vocab_size and np.all((a.targets == IGNORE) | (a.targets < a.n_classes))


@pytest.mark.parametrize("name, kw, field", [
    ("selective_copying", dict(length=7, n_tokens=4), "length"),
    ("selective_copying", dict(length=20, noise_vocab=15), "noise_vocab"),
    ("noisy_recall", dict(length=20, n_keys=20), "n_keys"),
    ("noisy_recall", dict(length=20, noise_percent=95), "noise_percent"),
    ("compression", dict(length=2), "length"),
    ("memorisation", dict(length=10, n_values=1), "n_values"),
])
def test_bad_input_names_the_field(name, kw, field):
    with pytest.raises(ConfigError, match=field):
        make_task(name, n=3, seed=0, cache=False, **kw)
