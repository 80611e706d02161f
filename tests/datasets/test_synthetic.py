"""The synthetic-task registry: every task builds, seeds, the cache, length splits, bad input, the languages."""

import importlib.util

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets import synthetic
from lab.datasets.recall import mqar_task
from lab.datasets.state_tracking import state_tracking_task
from lab.datasets.synthetic import TASKS, make_splits, make_task, split_seeds, task_names, tokens_to_text
from lab.datasets.tokens import IGNORE

ALL = ["parity", "cyclic", "s3", "a5", "mqar", "aa_star", "dyck1", "anbncn", "b_since_a", "mod_count",
       "selective_copying", "noisy_recall", "compression", "memorisation"]
HAVE_LANGUAGES = importlib.util.find_spec("lab.datasets.languages") is not None
needs_languages = pytest.mark.skipif(not HAVE_LANGUAGES, reason="lab/datasets/languages.py not written yet")
BUILDABLE = [pytest.param(name, marks=needs_languages) if TASKS[name].kind == "language" else name for name in ALL]


def test_registry_names_and_kinds():
    assert task_names() == ALL
    assert task_names("state") == ["parity", "cyclic", "s3", "a5"]
    assert task_names("recall") == ["mqar"]
    assert task_names("language") == ["aa_star", "dyck1", "anbncn", "b_since_a", "mod_count"]
    assert task_names("mad") == ["selective_copying", "noisy_recall", "compression", "memorisation"]
    assert TASKS["a5"].max_length == 4096 and TASKS["mqar"].max_length == 4096
    assert TASKS["cyclic"].options["modulus"].default == 5


@pytest.mark.parametrize("name", BUILDABLE)
def test_every_task_builds_is_deterministic_and_seeded(name):
    a = make_task(name, n=6, length=32, seed=1, cache=False)
    b = make_task(name, n=6, length=32, seed=1, cache=False)
    c = make_task(name, n=6, length=32, seed=2, cache=False)
    assert a.name == name and a.inputs.shape == a.targets.shape == (6, 32)
    assert a.inputs.min() >= 0 and a.inputs.max() < a.vocab_size
    assert np.all((a.targets == IGNORE) | ((a.targets >= 0) & (a.targets < a.n_classes)))
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    if name != "aa_star":  # one letter: a single word of each length, whatever the seed
        assert not (np.array_equal(a.inputs, c.inputs) and np.array_equal(a.targets, c.targets))


def test_dispatches_to_the_generators_with_resolved_options():
    t = make_task("cyclic", n=5, length=9, seed=4, modulus=7, cache=False)
    direct = state_tracking_task("cyclic", n=5, length=9, seed=4, modulus=7)
    assert np.array_equal(t.targets, direct.targets) and t.options == {"modulus": 7, "seed": 4}
    assert make_task("cyclic", n=5, length=9, seed=4, cache=False).options["modulus"] == 5
    assert make_task("cyclic", n=5, length=9, seed=4, modulus=None, cache=False).options["modulus"] == 5
    m = make_task("mqar", n=5, length=30, seed=4, n_pairs=3, cache=False)
    assert np.array_equal(m.inputs, mqar_task(n=5, length=30, seed=4, n_pairs=3).inputs)
    assert m.options == {"vocab_size": 64, "n_pairs": 3, "n_queries": 3, "noise_vocab": 1, "seed": 4}


def test_cache_round_trip(tmp_path):
    first = make_task("mqar", n=7, length=40, seed=3, root=tmp_path, n_queries=5)
    files = list(tmp_path.glob("synthetic-mqar-*.nc"))
    assert len(files) == 1
    mtime = files[0].stat().st_mtime_ns
    again = make_task("mqar", n=7, length=40, seed=3, root=tmp_path, n_queries=5)
    assert files[0].stat().st_mtime_ns == mtime  # read, not rebuilt
    fresh = make_task("mqar", n=7, length=40, seed=3, n_queries=5, cache=False)
    for t in (first, again):
        assert np.array_equal(t.inputs, fresh.inputs) and np.array_equal(t.targets, fresh.targets)
        assert t.options == fresh.options and all(type(v) is int for v in t.options.values())
        assert (t.name, t.vocab_size, t.n_classes) == (fresh.name, fresh.vocab_size, fresh.n_classes)
    # defaults spelled out or left out are the same data set; another seed or length is another file
    make_task("mqar", n=7, length=40, seed=3, root=tmp_path, n_queries=5, vocab_size=64, n_pairs=8)
    assert len(list(tmp_path.glob("synthetic-mqar-*.nc"))) == 1
    make_task("mqar", n=7, length=40, seed=4, root=tmp_path, n_queries=5)
    make_task("s3", n=7, length=41, seed=3, root=tmp_path)
    assert len(list(tmp_path.glob("synthetic-*.nc"))) == 3


def test_cached_files_are_validated_on_load(tmp_path):
    task = make_task("s3", n=4, length=10, seed=0, cache=False)
    ds = task.to_dataset()
    synthetic._validator("s3", 4, 10)(ds)
    with pytest.raises(ValueError, match="shapes"):
        synthetic._validator("s3", 5, 10)(ds)
    with pytest.raises(ValueError, match="name"):
        synthetic._validator("a5", 4, 10)(ds)
    bad = ds.copy(deep=True)
    bad["targets"].values[0, 0] = 6
    with pytest.raises(ValueError, match="targets outside"):
        synthetic._validator("s3", 4, 10)(bad)


def test_length_splits_use_distinct_seeds(tmp_path):
    splits = make_splits("parity", n_train=20, n_test=10, train_length=16, test_lengths=[16, 64], seed=2,
                         root=tmp_path)
    assert list(splits) == ["train", "test_16", "test_64"]
    assert splits["train"].inputs.shape == (20, 16)
    assert splits["test_16"].inputs.shape == (10, 16) and splits["test_64"].inputs.shape == (10, 64)
    seeds = split_seeds(2, [16, 64])
    assert [t.options["seed"] for t in splits.values()] == [seeds["train"], seeds["test_16"], seeds["test_64"]]
    assert len(set(seeds.values())) == 3 and 2 not in seeds.values()
    # no leakage: the in-distribution test is not the training set's first rows
    assert not np.array_equal(splits["train"].inputs[:10], splits["test_16"].inputs)
    assert np.array_equal(splits["test_64"].inputs,
                          make_task("parity", n=10, length=64, seed=seeds["test_64"], root=tmp_path).inputs)
    # splits of different experiment seeds are different too, and every seed of one is new to the other
    other = split_seeds(3, [16, 64])
    assert not set(other.values()) & set(seeds.values())
    assert split_seeds(2, [16, 64]) == seeds  # deterministic


def test_splits_check_everything_before_building(tmp_path):
    with pytest.raises(ConfigError, match=r"test_lengths=5000 is not allowed; allowed: an integer in \[1, 4096\]"):
        make_splits("s3", n_train=2, n_test=2, train_length=8, test_lengths=[8, 5000], root=tmp_path)
    with pytest.raises(ConfigError, match=r"test_lengths=\[8, 8\] is not allowed; allowed: .*no repeats"):
        make_splits("s3", n_train=2, n_test=2, train_length=8, test_lengths=[8, 8], root=tmp_path)
    with pytest.raises(ConfigError, match=r"test_lengths=\[\] is not allowed"):
        make_splits("s3", n_train=2, n_test=2, train_length=8, test_lengths=[], root=tmp_path)
    with pytest.raises(ConfigError, match=r"train_length=0 is not allowed"):
        make_splits("s3", n_train=2, n_test=2, train_length=0, test_lengths=[8], root=tmp_path)
    with pytest.raises(ConfigError, match=r"n_test=0 is not allowed"):
        make_splits("s3", n_train=2, n_test=0, train_length=8, test_lengths=[8], root=tmp_path)
    # mqar's length rule is checked for every split: the short test length fails before the training set is built
    with pytest.raises(ConfigError, match=r"length=20 is not allowed; allowed: an integer in \[24, 4096\]"):
        make_splits("mqar", n_train=2, n_test=2, train_length=64, test_lengths=[128, 20], root=tmp_path)
    assert not list(tmp_path.glob("*.nc"))


@pytest.mark.parametrize("kwargs,message", [
    ({"name": "s4"}, r"task='s4' is not allowed; allowed: one of 'parity', 'cyclic', 's3', 'a5', 'mqar', "),
    ({"name": "a5", "length": 0}, r"length=0 is not allowed; allowed: an integer in \[1, 4096\]"),
    ({"name": "a5", "length": 4097}, r"length=4097 is not allowed; allowed: an integer in \[1, 4096\]"),
    ({"name": "mqar", "length": 5000}, r"length=5000 is not allowed; allowed: an integer in \[1, 4096\]"),
    ({"name": "a5", "n": 0}, r"n=0 is not allowed; allowed: an integer in \[1, 1000000\]"),
    ({"name": "a5", "seed": -1}, r"seed=-1 is not allowed; allowed: an integer in \[0, inf\)"),
    ({"name": "s3", "modulus": 4}, r"modulus=4 is not allowed; allowed: an option of task 's3'; its options: "
                                   r"'generators'"),
    ({"name": "mqar", "n_keys": 4}, r"n_keys=4 is not allowed; allowed: an option of task 'mqar'; its options: "
                                    r"'vocab_size', 'n_pairs', 'n_queries', 'noise_vocab'"),
    ({"name": "cyclic", "modulus": 300}, r"modulus=300 is not allowed; allowed: an integer in \[2, 256\]"),
    ({"name": "cyclic", "modulus": 2.5}, r"modulus=2.5 is not allowed; allowed: an integer in \[2, 256\]"),
    ({"name": "mqar", "n_pairs": 40}, r"n_pairs=40 is not allowed; allowed: an integer in \[1, 31\]"),
])
def test_bad_input_names_field_value_and_what_is_allowed(kwargs, message, tmp_path):
    kw = {"n": 3, "length": 64, **kwargs}
    with pytest.raises(ConfigError, match=message):
        make_task(kw.pop("name"), root=tmp_path, **kw)
    assert not list(tmp_path.glob("*.nc"))


def test_tokens_to_text():
    task = make_task("mqar", n=1, length=24, seed=0, cache=False)
    text = tokens_to_text(task, 0)
    top, bottom = text.splitlines()
    assert top.startswith("inputs:") and bottom.startswith("targets:") and len(top) == len(bottom)
    assert bottom.count(".") == 24 - 8
    letters = tokens_to_text(make_task("parity", n=1, length=5, seed=0, cache=False), 0, alphabet="xy")
    assert set(letters.splitlines()[0].split()[1:]) <= {"x", "y"}


@needs_languages
def test_dispatches_to_the_formal_languages(tmp_path):
    from lab.datasets.languages import LANGUAGES, language_task

    assert set(LANGUAGES) == set(task_names("language"))
    for name, lang in LANGUAGES.items():
        assert TASKS[name].max_length == lang.max_length
        ours = make_task(name, n=5, length=12, seed=7, root=tmp_path)
        theirs = language_task(name, n=5, length=12, seed=7)
        assert np.array_equal(ours.inputs, theirs.inputs) and np.array_equal(ours.targets, theirs.targets)
        assert ours.vocab_size == len(lang.alphabet) and ours.n_classes == 2
        for word, labels in zip(ours.inputs.tolist(), ours.targets.tolist()):  # the targets are prefix membership
            text = "".join(lang.alphabet[t] for t in word)
            assert labels == [int(lang.accepts(text[:k + 1], **{k2: v for k2, v in ours.options.items()
                                                                 if k2 != "seed"})) for k in range(12)]
    with pytest.raises(ConfigError, match=r"length=0 is not allowed"):
        make_task("dyck1", n=2, length=0)
    limit = LANGUAGES["dyck1"].max_length
    too_long = rf"length={limit + 1} is not allowed; allowed: an integer in \[1, {limit}\]"
    with pytest.raises(ConfigError, match=too_long):
        make_task("dyck1", n=2, length=limit + 1)
    with pytest.raises(ConfigError, match=r"modulus=3 is not allowed"):
        make_task("dyck1", n=2, length=8, modulus=3, root=tmp_path)
