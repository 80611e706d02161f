"""Formal languages as token tasks: per-position prefix membership, for the expressiveness experiments.

Each :class:`Language` has an alphabet, a readable brute-force membership test (:meth:`Language.accepts`, the
definition the tests hold the fast labels to), a vectorised labeller of every prefix of a batch of words, and a
sampler that makes members and non-members both frequent. :func:`language_task` turns them into a
:class:`lab.datasets.tokens.TokenTask` whose target at position ``t`` (0-based) is whether the prefix
``w[0..t]`` is in the language.

=============  ==============  ======================================================================================
name           alphabet        a prefix is a member when ...
=============  ==============  ======================================================================================
``aa_star``    ``a``           ... its length is even: (aa)* over a one-letter alphabet, so the only thing to track is
                               the parity of the length (gates in (0, 1) cannot; a rotation by π can). Every word is
                               ``a^length``: the task's rows are identical by design.
``mod_count``  ``a b``         ... its number of a's is 0 mod ``modulus`` (option, default 3; 2 is parity).
``dyck1``      ``( )``         ... it is balanced: the depth never went below 0 and is 0 now.
``anbncn``     ``a b c``       ... it is ``a^n b^n c^n``, n >= 1 (at most one member prefix per word).
``b_since_a``  ``a b c``       ... it satisfies the pure-past LTL formula ``b S a`` at its last position: some
                               ``j <= t`` has ``a`` and every ``k`` in ``(j, t]`` has ``b`` (the last non-b is an a).
=============  ==============  ======================================================================================

Samplers (seeded, vectorised over words): ``mod_count`` uniform letters; ``dyck1`` a random walk that closes with
probability 0.6 above depth 0, half the words "spoiled" by one close at depth 0 after a random time (so balanced
and broken prefixes are both common); ``anbncn`` near misses ``a^i b^j c^k`` with ``i = j = n`` for half the words
and ``|i - n|, |j - n| <= 2`` otherwise, and in a tenth of the words one adjacent pair swapped at a letter boundary
(right counts, wrong order); ``b_since_a`` segments "a or c, then a run of b's" with log-uniform run lengths up to
a quarter of the length, so long runs (the hard case for decaying memories) occur at every length.

Bad input raises :class:`lab.checks.ConfigError` naming the argument, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lab.checks import bad_value, check_int
from lab.datasets.tokens import TokenTask

__all__ = ["LANGUAGES", "MAX_LENGTH", "VERSION", "Language", "decode", "encode", "get", "language_task",
           "prefix_labels"]

#: longest word any sampler makes
MAX_LENGTH = 100_000
#: bump when a sampler or a labeller changes (part of the synthetic-task cache key)
VERSION = 1


@dataclass(frozen=True)
class Language:
    """A formal language over a small alphabet.

    Attributes:
        name: the key in :data:`LANGUAGES`. alphabet: its letters; token ``i`` is ``alphabet[i]``.
        description: one line. max_length: the longest word the sampler makes.
        options: the language's options and their defaults (``mod_count``: ``modulus``).
        option_bounds: ``(lo, hi)`` of each integer option.
    """

    name: str
    alphabet: tuple[str, ...]
    description: str
    member: Callable[..., bool] = field(repr=False)
    labeller: Callable[..., np.ndarray] = field(repr=False)
    sampler: Callable[..., np.ndarray] = field(repr=False)
    max_length: int = MAX_LENGTH
    options: Mapping[str, int] = field(default_factory=dict)
    option_bounds: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def resolve(self, **options) -> dict[str, int]:
        """The options with their defaults filled in; unknown names and out-of-range values raise."""
        out = dict(self.options)
        for key, value in options.items():
            if key not in self.options:
                allowed = ", ".join(self.options) if self.options else "none"
                raise bad_value(key, value, f"an option of language {self.name!r}: {allowed}")
            lo, hi = self.option_bounds[key]
            out[key] = check_int(key, value, lo, hi)
        return out

    def accepts(self, word: str, **options) -> bool:
        """Whether ``word`` is in the language (brute force, straight from the definition)."""
        if any(ch not in self.alphabet for ch in word):
            return False
        return bool(self.member(word, **self.resolve(**options)))

    def labels(self, tokens: np.ndarray, **options) -> np.ndarray:
        """Prefix membership of every position: ``(n, length)`` int64 tokens -> ``(n, length)`` bool."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be (n, length), got shape {tokens.shape}")
        return self.labeller(tokens, **self.resolve(**options))

    def sample(self, n: int, length: int, seed: int = 0, **options) -> np.ndarray:
        """``n`` words of ``length`` tokens, ``(n, length)`` int64 (see the module docstring)."""
        n = check_int("n", n, 1, 10_000_000)
        length = check_int("length", length, 1, self.max_length)
        rng = np.random.default_rng([int(seed), sum(map(ord, self.name))])
        return self.sampler(rng, n, length, **self.resolve(**options))


# ------------------------------------------------------------------------------------------------------------------
# Definitions (brute force, one word at a time)
# ------------------------------------------------------------------------------------------------------------------
def _aa_star(word: str) -> bool:
    return len(word) % 2 == 0


def _mod_count(word: str, modulus: int) -> bool:
    return word.count("a") % modulus == 0


def _dyck1(word: str) -> bool:
    depth = 0
    for ch in word:
        depth += 1 if ch == "(" else -1
        if depth < 0:
            return False
    return depth == 0


def _anbncn(word: str) -> bool:
    n = len(word) // 3
    return n >= 1 and word == "a" * n + "b" * n + "c" * n


def _b_since_a(word: str) -> bool:
    t = len(word) - 1
    return any(word[j] == "a" and all(word[k] == "b" for k in range(j + 1, t + 1)) for j in range(t + 1))


# ------------------------------------------------------------------------------------------------------------------
# Every prefix of a batch at once
# ------------------------------------------------------------------------------------------------------------------
def _lab_aa_star(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to((np.arange(1, x.shape[1] + 1) % 2 == 0), x.shape).copy()


def _lab_mod_count(x: np.ndarray, modulus: int) -> np.ndarray:
    return np.cumsum(x == 0, axis=1) % modulus == 0


def _lab_dyck1(x: np.ndarray) -> np.ndarray:
    depth = np.cumsum(np.where(x == 0, 1, -1), axis=1)
    return (depth == 0) & (np.minimum.accumulate(depth, axis=1) >= 0)


def _lab_anbncn(x: np.ndarray) -> np.ndarray:
    counts = [np.cumsum(x == k, axis=1) for k in range(3)]
    descents = np.zeros(x.shape, dtype=np.int64)
    descents[:, 1:] = np.cumsum(x[:, 1:] < x[:, :-1], axis=1)  # a letter after a later one: not in a*b*c*
    return (descents == 0) & (counts[0] == counts[1]) & (counts[1] == counts[2]) & (counts[0] >= 1)


def _lab_b_since_a(x: np.ndarray) -> np.ndarray:
    idx = np.where(x != 1, np.arange(x.shape[1])[None, :], -1)
    last = np.maximum.accumulate(idx, axis=1)  # position of the last non-b so far (-1: none)
    letter = np.take_along_axis(x, np.maximum(last, 0), axis=1)
    return (last >= 0) & (letter == 0)


# ------------------------------------------------------------------------------------------------------------------
# Samplers
# ------------------------------------------------------------------------------------------------------------------
def _sample_aa_star(rng, n, length):
    return np.zeros((n, length), dtype=np.int64)


def _sample_mod_count(rng, n, length, modulus):
    return rng.integers(0, 2, size=(n, length)).astype(np.int64)


def _sample_dyck1(rng, n, length):
    out = np.empty((n, length), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    spoil = rng.random(n) < 0.5
    spoil_after = rng.integers(0, length, size=n)
    spoiled = np.zeros(n, dtype=bool)
    u = rng.random((n, length))
    for t in range(length):
        close = np.where(depth > 0, u[:, t] < 0.6, False)
        kill = spoil & ~spoiled & (depth == 0) & (t >= spoil_after)
        close |= kill
        spoiled |= kill
        out[:, t] = np.where(close, 1, 0)
        depth += np.where(close, -1, 1)
        depth = np.maximum(depth, 0)  # after a spoiling close, walk on as if balanced (the prefix stays broken)
    return out


def _sample_anbncn(rng, n, length):
    out = np.full((n, length), 2, dtype=np.int64)
    top = max(1, length // 3)
    for r in range(n):
        m = int(rng.integers(1, top + 1))
        i = j = m
        if rng.random() >= 0.5:
            di, dj = 0, 0
            while di == 0 and dj == 0:
                di, dj = rng.integers(-2, 3, size=2)
            i, j = max(0, m + int(di)), max(0, m + int(dj))
        i = min(i, length)
        j = min(j, length - i)
        out[r, :i] = 0
        out[r, i:i + j] = 1
        if rng.random() < 0.1 and 0 < i < length - 1:  # swap at the a/b boundary: right counts, wrong order
            out[r, i - 1], out[r, i] = out[r, i], out[r, i - 1]
    return out


def _sample_b_since_a(rng, n, length):
    out = np.empty((n, length), dtype=np.int64)
    top = np.log(length / 4 + 1)
    for r in range(n):
        t = int(np.expm1(rng.uniform(0, top)))  # words start with a run of b's (no a yet)
        out[r, :t] = 1
        while t < length:
            out[r, t] = 0 if rng.random() < 0.5 else 2
            run = int(np.expm1(rng.uniform(0, top)))
            out[r, t + 1:t + 1 + run] = 1
            t += 1 + run
    return out


LANGUAGES: dict[str, Language] = {
    lang.name: lang for lang in (
        Language("aa_star", ("a",), "(aa)*: words of even length over one letter", _aa_star, _lab_aa_star,
                 _sample_aa_star),
        Language("mod_count", ("a", "b"), "the number of a's is 0 mod m (m = 2: parity)", _mod_count,
                 _lab_mod_count, _sample_mod_count, options={"modulus": 3}, option_bounds={"modulus": (2, 64)}),
        Language("dyck1", ("(", ")"), "balanced parentheses (Dyck-1)", _dyck1, _lab_dyck1, _sample_dyck1),
        Language("anbncn", ("a", "b", "c"), "a^n b^n c^n, n >= 1", _anbncn, _lab_anbncn, _sample_anbncn),
        Language("b_since_a", ("a", "b", "c"), "the pure-past LTL formula b S a at the last position", _b_since_a,
                 _lab_b_since_a, _sample_b_since_a),
    )
}


def get(name: str) -> Language:
    """The language called ``name``; an unknown name raises, listing the known ones."""
    if name not in LANGUAGES:
        raise bad_value("language", name, "one of " + ", ".join(map(repr, LANGUAGES)))
    return LANGUAGES[name]


def encode(language: str, word: str) -> np.ndarray:
    """A word as token ids ``(len(word),)``; a letter outside the alphabet raises."""
    lang = get(language)
    bad = [ch for ch in word if ch not in lang.alphabet]
    if bad:
        raise bad_value("word", word, f"letters of {lang.alphabet!r} only (got {bad[0]!r})")
    return np.array([lang.alphabet.index(ch) for ch in word], dtype=np.int64)


def decode(language: str, tokens) -> str:
    """Token ids as a word."""
    alphabet = get(language).alphabet
    return "".join(alphabet[int(t)] for t in np.asarray(tokens).ravel())


def prefix_labels(language: str, tokens: np.ndarray, **options) -> np.ndarray:
    """Whether each prefix of each word is a member: ``(n, length)`` tokens -> ``(n, length)`` bool."""
    return get(language).labels(tokens, **options)


def language_task(name: str, *, n: int, length: int, seed: int = 0, **options) -> TokenTask:
    """``n`` sampled words of ``length`` letters of language ``name`` with per-position prefix membership.

    Arguments:
        name: a key of :data:`LANGUAGES`. n: words. length: letters per word, in ``[1, max_length]``.
        seed: the sampler's seed. options: the language's options (``mod_count``: ``modulus``).

    Returns:
        :class:`TokenTask` with inputs ``(n, length)`` in ``[0, len(alphabet))`` and targets ``(n, length)`` in
        {0, 1} (1: the prefix through that position is a member).
    """
    lang = get(name)
    opts = lang.resolve(**options)
    x = lang.sample(n, length, seed, **opts)
    y = lang.labels(x, **opts).astype(np.int64)
    return TokenTask(name, x, y, vocab_size=len(lang.alphabet), n_classes=2,
                     options={**opts, "seed": int(seed)})
