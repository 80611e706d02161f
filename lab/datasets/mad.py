"""The synthetic skills of MAD (Poli et al. 2024, "Mechanistic design and scaling of hybrid architectures"), as
:class:`~lab.datasets.tokens.TokenTask` generators with per-position targets, so that a model is trained at one length
and tested at several (the arena's scheme; MAD itself tests at the training length only).

Four of MAD's six skills (fuzzy recall and plain in-context recall are left out: noisy recall with no noise is the
latter, and MQAR in :mod:`lab.datasets.recall` is zoology's version of it). What "length" means differs per task, and
is stated with each:

* ``selective_copying``: ``n_tokens`` data tokens scattered among noise in the context, then ``n_tokens`` copy
  markers at the end; the label at the j-th marker is the j-th data token. **Length** is the whole sequence: the
  context the data tokens hide in grows with it, the number of tokens to copy does not (Gu & Dao 2023: a
  time-invariant layer cannot select them, an input-dependent gate can, at any length).
* ``noisy_recall``: a stream of key-value pairs over ``n_keys`` keys bound per sequence, with noise tokens from their
  own vocabulary inserted between pairs (``noise_percent`` of the slots); the label sits at every key seen before
  in the sequence, and is its value. **Length** is the stream: more repeats of the same ``n_keys`` bindings over a
  longer context (the state a solution needs does not grow).
* ``compression``: ``n = (length - 1) // 2`` random tokens, a marker, then the model reconstructs them in order, one
  per position (the label at the j-th position after the marker is the j-th token). MAD decodes a queried position
  from the model's output at the marker through an extra network; here the model emits the sequence itself, so no
  position token is unseen at a longer test. **Length** grows the number of tokens to keep: a fixed state of b bits
  cannot hold more than b / log2(vocab) of them (Jelassi et al. 2024).
* ``memorisation``: keys drawn uniformly, each labelled with its value in one fixed table (``table_seed``, the same
  for every split and seed of the data): the mapping lives in the weights, not in the sequence. **Length** is the
  number of keys read; every position is independent of the others, so length should not matter.

Every generator is vectorised over examples (a loop over positions at most) and checks its settings, raising
:class:`~lab.checks.ConfigError` that names the field.
"""

from __future__ import annotations

import numpy as np

from lab.checks import bad_value, check_int
from lab.datasets.tokens import IGNORE, TokenTask

__all__ = ["MAX_LENGTH", "MAX_VOCAB", "NAMES", "compression_task", "memorisation_table", "memorisation_task",
           "noisy_recall_task", "recall_layout", "selective_copying_task"]

#: longest sequence a generator makes
MAX_LENGTH = 4096
#: largest vocabulary
MAX_VOCAB = 16384
#: most examples in one task
MAX_N = 1_000_000
#: the tasks of this module, in registry order
NAMES = ("selective_copying", "noisy_recall", "compression", "memorisation")


def _common(n: int, length: int, seed: int, shortest: int = 1) -> tuple[int, int, np.random.Generator]:
    n = check_int("n", n, 1, MAX_N)
    length = check_int("length", length, 1, MAX_LENGTH)
    if length < shortest:
        raise bad_value("length", length, f"an integer in [{shortest}, {MAX_LENGTH}]")
    return n, length, np.random.default_rng(check_int("seed", seed, 0))


def _sorted_choice(rng: np.random.Generator, n: int, population: int, k: int) -> np.ndarray:
    """``(n, k)``: per row, ``k`` distinct integers of ``[0, population)`` drawn uniformly, in increasing order."""
    return np.sort(np.argsort(rng.random((n, population)), axis=1)[:, :k], axis=1)


def selective_copying_task(*, n: int, length: int, seed: int, vocab_size: int = 16, n_tokens: int = 4,
                           noise_vocab: int = 1) -> TokenTask:
    """Selective copying (MAD; Gu & Dao 2023, Fig. 2): copy the data tokens scattered in noise, in order.

    Vocabulary: noise ``[0, noise_vocab)``, data ``[noise_vocab, vocab_size - 1)``, the copy marker
    ``vocab_size - 1``. The first ``length - n_tokens`` positions hold ``n_tokens`` data tokens (uniform, at
    distinct uniform positions) and noise elsewhere; the last ``n_tokens`` are markers.

    Returns:
        :class:`TokenTask` ``selective_copying``: the label at the j-th marker is the class ``token - noise_vocab``
        of the j-th data token; IGNORE elsewhere. ``n_classes = vocab_size - 1 - noise_vocab``.
    """
    n_tokens = check_int("n_tokens", n_tokens, 1, MAX_LENGTH // 2)
    n, length, rng = _common(n, length, seed, shortest=2 * n_tokens)
    vocab_size = check_int("vocab_size", vocab_size, 3, MAX_VOCAB)
    noise_vocab = check_int("noise_vocab", noise_vocab, 1, vocab_size - 2)
    classes = vocab_size - 1 - noise_vocab
    context = length - n_tokens
    inputs = rng.integers(0, noise_vocab, size=(n, length), dtype=np.int64)  # (n, length) noise
    data = rng.integers(0, classes, size=(n, n_tokens), dtype=np.int64)  # (n, n_tokens)
    where = _sorted_choice(rng, n, context, n_tokens)  # (n, n_tokens)
    np.put_along_axis(inputs, where, noise_vocab + data, axis=1)
    inputs[:, context:] = vocab_size - 1
    targets = np.full((n, length), IGNORE, dtype=np.int64)
    targets[:, context:] = data
    return TokenTask("selective_copying", inputs, targets, vocab_size, classes,
                     {"vocab_size": vocab_size, "n_tokens": n_tokens, "noise_vocab": noise_vocab, "seed": seed})


def recall_layout(vocab_size: int, noise_vocab: int) -> tuple[range, range, range]:
    """Noisy recall's noise, key and value token ranges: keys take half of what the noise leaves (rounded down)."""
    n_keys = (vocab_size - noise_vocab) // 2
    return range(0, noise_vocab), range(noise_vocab, noise_vocab + n_keys), range(noise_vocab + n_keys, vocab_size)


def noisy_recall_task(*, n: int, length: int, seed: int, vocab_size: int = 32, n_keys: int = 4, noise_vocab: int = 4,
                      noise_percent: int = 20) -> TokenTask:
    """Noisy in-context recall (MAD): key-value pairs of one per-sequence dictionary, repeated, with noise between.

    Each sequence binds ``n_keys`` distinct keys (of the key tokens, :func:`recall_layout`) to uniform values. The
    stream: after a key comes its value; in every other slot a noise token (uniform over ``noise_vocab``) with
    probability ``noise_percent`` / 100, else a key drawn uniformly from the sequence's ``n_keys``.

    Returns:
        :class:`TokenTask` ``noisy_recall``: at a key that has appeared before in the sequence, the label is its
        value's class (``value - values.start``); IGNORE elsewhere (first sightings, values, noise).
    """
    n, length, rng = _common(n, length, seed, shortest=2)
    vocab_size = check_int("vocab_size", vocab_size, 5, MAX_VOCAB)
    noise_vocab = check_int("noise_vocab", noise_vocab, 1, vocab_size - 4)
    noise_percent = check_int("noise_percent", noise_percent, 0, 90)
    noise, keys, values = recall_layout(vocab_size, noise_vocab)
    n_keys = check_int("n_keys", n_keys, 1, len(keys))
    rows = np.arange(n)
    key_tok = keys.start + np.argsort(rng.random((n, len(keys))), axis=1)[:, :n_keys]  # (n, n_keys) distinct
    val_cls = rng.integers(0, len(values), size=(n, n_keys), dtype=np.int64)  # (n, n_keys)
    inputs = np.empty((n, length), dtype=np.int64)
    targets = np.full((n, length), IGNORE, dtype=np.int64)
    seen = np.zeros((n, n_keys), dtype=bool)
    prev = np.full(n, -1, dtype=np.int64)  # the key index emitted at t - 1, or -1
    for t in range(length):
        is_noise = rng.random(n) < noise_percent / 100.0  # (n,)
        pick = rng.integers(0, n_keys, size=n)  # (n,)
        noise_tok = rng.integers(0, len(noise), size=n)  # (n,)
        after_key = prev >= 0
        is_key = ~after_key & ~is_noise
        inputs[:, t] = np.where(after_key, values.start + val_cls[rows, np.maximum(prev, 0)],
                                np.where(is_key, key_tok[rows, pick], noise_tok))
        repeat = is_key & seen[rows, pick]
        targets[repeat, t] = val_cls[rows, pick][repeat]
        seen[rows[is_key], pick[is_key]] = True
        prev = np.where(is_key, pick, -1)
    return TokenTask("noisy_recall", inputs, targets, vocab_size, len(values),
                     {"vocab_size": vocab_size, "n_keys": n_keys, "noise_vocab": noise_vocab,
                      "noise_percent": noise_percent, "seed": seed})


def compression_task(*, n: int, length: int, seed: int, vocab_size: int = 10) -> TokenTask:
    """Compression (MAD), read back in order: ``(length - 1) // 2`` tokens, a marker, then their reconstruction.

    Vocabulary: data ``[0, vocab_size - 2)``, the marker ``vocab_size - 2``, the blank ``vocab_size - 1`` at every
    position after the marker.

    Returns:
        :class:`TokenTask` ``compression``: the label at the j-th blank is the j-th data token (its id is its class);
        IGNORE on the data, the marker and (even lengths) the last blank. ``n_classes = vocab_size - 2``.
    """
    n, length, rng = _common(n, length, seed, shortest=3)
    vocab_size = check_int("vocab_size", vocab_size, 3, MAX_VOCAB)
    classes, stored = vocab_size - 2, (length - 1) // 2
    data = rng.integers(0, classes, size=(n, stored), dtype=np.int64)  # (n, stored)
    inputs = np.full((n, length), vocab_size - 1, dtype=np.int64)
    inputs[:, :stored] = data
    inputs[:, stored] = vocab_size - 2
    targets = np.full((n, length), IGNORE, dtype=np.int64)
    targets[:, stored + 1:2 * stored + 1] = data
    return TokenTask("compression", inputs, targets, vocab_size, classes, {"vocab_size": vocab_size, "seed": seed})


def memorisation_table(n_keys: int, n_values: int, table_seed: int) -> np.ndarray:
    """``(n_keys,)``: memorisation's fixed value of every key, drawn from ``table_seed`` alone."""
    return np.random.default_rng([table_seed, n_keys, n_values]).integers(0, n_values, size=n_keys, dtype=np.int64)


def memorisation_task(*, n: int, length: int, seed: int, n_keys: int = 64, n_values: int = 16,
                      table_seed: int = 0) -> TokenTask:
    """Memorisation (MAD): keys drawn uniformly, each labelled with its value in a table fixed by ``table_seed``.

    Returns:
        :class:`TokenTask` ``memorisation``: inputs the keys ``[0, n_keys)``, every position labelled with
        ``memorisation_table(n_keys, n_values, table_seed)[key]``; ``n_classes = n_values``.
    """
    n, length, rng = _common(n, length, seed)
    n_keys = check_int("n_keys", n_keys, 2, MAX_VOCAB)
    n_values = check_int("n_values", n_values, 2, MAX_VOCAB)
    table_seed = check_int("table_seed", table_seed, 0)
    inputs = rng.integers(0, n_keys, size=(n, length), dtype=np.int64)
    targets = memorisation_table(n_keys, n_values, table_seed)[inputs]
    return TokenTask("memorisation", inputs, targets, n_keys, n_values,
                     {"n_keys": n_keys, "n_values": n_values, "table_seed": table_seed, "seed": seed})
