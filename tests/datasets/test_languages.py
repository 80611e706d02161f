"""Formal languages: the vectorised prefix labels against the brute-force definitions on every prefix, the samplers'
balance, and bad input."""

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets.languages import LANGUAGES, decode, encode, language_task, prefix_labels


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_labels_match_brute_force_membership_on_every_prefix(name):
    lang = LANGUAGES[name]
    for options in ([{}] if not lang.options else [{}, {"modulus": 2}, {"modulus": 5}]):
        task = language_task(name, n=60, length=30, seed=3, **options)
        assert task.inputs.shape == task.targets.shape == (60, 30)
        assert task.vocab_size == len(lang.alphabet) and task.n_classes == 2
        assert set(np.unique(task.inputs)) <= set(range(len(lang.alphabet)))
        for i in range(task.n):
            word = decode(name, task.inputs[i])
            for t in range(task.length):
                assert bool(task.targets[i, t]) == lang.accepts(word[: t + 1], **options), (name, word[: t + 1])


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_labels_of_random_words_match_brute_force(name):
    """Uniformly random words (not the sampler's) exercise every kind of non-member."""
    lang = LANGUAGES[name]
    rng = np.random.default_rng(0)
    x = rng.integers(0, len(lang.alphabet), size=(200, 12))
    y = prefix_labels(name, x)
    for i in range(len(x)):
        word = decode(name, x[i])
        assert [lang.accepts(word[: t + 1]) for t in range(12)] == y[i].tolist()


def test_definitions_on_hand_picked_words():
    L = LANGUAGES
    assert L["aa_star"].accepts("aaaa") and not L["aa_star"].accepts("aaa") and L["aa_star"].accepts("")
    assert L["mod_count"].accepts("abbaab") and not L["mod_count"].accepts("ab")  # 3 a's, mod 3
    assert L["mod_count"].accepts("abab", modulus=2) and not L["mod_count"].accepts("abab", modulus=3)
    assert L["dyck1"].accepts("(()())") and not L["dyck1"].accepts("())(()") and not L["dyck1"].accepts("((")
    assert L["anbncn"].accepts("aabbcc") and not L["anbncn"].accepts("aabbc") and not L["anbncn"].accepts("abcabc")
    assert not L["anbncn"].accepts("")
    assert L["b_since_a"].accepts("cabbb") and L["b_since_a"].accepts("a") and not L["b_since_a"].accepts("abcb")
    assert not L["b_since_a"].accepts("bbb") and L["b_since_a"].accepts("cacbab")
    assert not L["dyck1"].accepts("(x)")  # a letter outside the alphabet


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_members_and_non_members_are_both_frequent(name):
    task = language_task(name, n=200, length=60, seed=1)
    share = task.targets.mean()
    assert 0 < share < 1
    if name == "anbncn":  # at most one member prefix per word: count the words with one instead
        with_member = task.targets.any(axis=1).mean()
        assert 0.3 < with_member < 0.7
    else:
        assert 0.1 < share < 0.9, (name, share)


def test_sampler_is_seeded_and_long_words_work():
    a = language_task("b_since_a", n=4, length=50, seed=7)
    b = language_task("b_since_a", n=4, length=50, seed=7)
    c = language_task("b_since_a", n=4, length=50, seed=8)
    assert np.array_equal(a.inputs, b.inputs) and not np.array_equal(a.inputs, c.inputs)
    long = language_task("b_since_a", n=2, length=20_000, seed=0)
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, (long.inputs[0] == 1).astype(int), 0])))
    assert runs.max() > 200  # long runs of b's occur at long lengths (the decaying memories' hard case)
    spoiled = language_task("anbncn", n=400, length=30, seed=0)
    swapped = [decode("anbncn", w) for w in spoiled.inputs if "ba" in decode("anbncn", w)]
    assert swapped  # right counts, wrong order


def test_encode_decode_round_trip():
    assert decode("dyck1", encode("dyck1", "(()")) == "(()"
    with pytest.raises(ConfigError, match=r"word='a\(' is not allowed; allowed: letters of"):
        encode("dyck1", "a(")


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="abc", n=2, length=5), r"language='abc' is not allowed; allowed: one of 'aa_star'"),
    (dict(name="dyck1", n=2, length=0), r"length=0 is not allowed; allowed: an integer in \[1, 100000\]"),
    (dict(name="dyck1", n=2, length=100_001), r"length=100001 is not allowed; allowed: an integer in \[1, 100000\]"),
    (dict(name="dyck1", n=0, length=5), r"n=0 is not allowed"),
    (dict(name="mod_count", n=2, length=5, modulus=1), r"modulus=1 is not allowed; allowed: an integer in \[2, 64\]"),
    (dict(name="dyck1", n=2, length=5, modulus=3), r"modulus=3 is not allowed; allowed: an option of language "
                                                   r"'dyck1': none"),
])
def test_bad_input_names_the_field_value_and_allowed(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(ConfigError, match=match):
        language_task(name, **kwargs)
