"""Multi-query associative recall (MQAR), the zoology benchmark's task (Arora et al. 2023, "Zoology: measuring and
improving recall in efficient language models"), in the lab's :class:`~lab.datasets.tokens.TokenTask` format.

A sequence opens with ``n_pairs`` key-value pairs ``k_1 v_1 k_2 v_2 ...``; later, at random positions, keys come
back as queries, and the label at a query is the value bound to that key. Everything else is filler. Solving it
needs content-based lookup over the whole context: attention does it in one layer, a fixed-size recurrent state
must hold all ``n_pairs`` bindings at once.

Vocabulary (``vocab_size`` V, ``noise_vocab`` F filler tokens), three disjoint ranges:

* filler: tokens ``[0, F)``, drawn uniformly at every position that is neither a pair nor a query (F = 1: a blank);
* keys: ``K = (V - F) // 2`` tokens ``[F, F + K)``; each sequence draws its ``n_pairs`` keys without replacement;
* values: the other ``C = V - F - K`` tokens ``[F + K, V)``, drawn uniformly (with replacement) per key.

Queries sit at ``n_queries`` distinct positions drawn uniformly from ``[2 * n_pairs, length)``. With
``n_queries <= n_pairs`` every query asks a different key; with more, the keys are cycled in a random order so each
is asked ``floor`` or ``ceil(n_queries / n_pairs)`` times. Targets: at a query, the class ``value - (F + K)`` in
``[0, C)``; :data:`~lab.datasets.tokens.IGNORE` elsewhere (the pairs themselves carry no label).
"""

from __future__ import annotations

import numpy as np

from lab.checks import bad_value, check_int
from lab.datasets.tokens import IGNORE, TokenTask

__all__ = ["MAX_LENGTH", "MAX_VOCAB", "check_mqar", "mqar_layout", "mqar_task"]

#: longest sequence the generator makes
MAX_LENGTH = 4096
#: largest vocabulary
MAX_VOCAB = 16384
#: most examples in one task
MAX_N = 1_000_000


def mqar_layout(vocab_size: int, noise_vocab: int = 1) -> tuple[range, range, range]:
    """The filler, key and value token ranges of a vocabulary (see the module docstring)."""
    n_keys = (vocab_size - noise_vocab) // 2
    return range(0, noise_vocab), range(noise_vocab, noise_vocab + n_keys), range(noise_vocab + n_keys, vocab_size)


def check_mqar(*, length: int, vocab_size: int = 64, n_pairs: int = 8, n_queries: int | None = None,
               noise_vocab: int = 1) -> dict[str, int]:
    """Validate MQAR settings; return them with ``n_queries`` resolved (None: ``n_pairs``).

    Raises:
        ConfigError: naming the field: a bound of its own, too few keys in the vocabulary for ``n_pairs``, or a
            ``length`` shorter than ``2 * n_pairs + n_queries``.
    """
    vocab_size = check_int("vocab_size", vocab_size, 3, MAX_VOCAB)
    noise_vocab = check_int("noise_vocab", noise_vocab, 1, vocab_size - 2)
    _, keys, _ = mqar_layout(vocab_size, noise_vocab)  # noise_vocab <= vocab_size - 2 leaves >= 1 key and value
    n_pairs = check_int("n_pairs", n_pairs, 1, MAX_LENGTH // 2)
    if n_pairs > len(keys):
        raise bad_value("n_pairs", n_pairs, f"an integer in [1, {len(keys)}] (the key tokens of "
                                            f"vocab_size={vocab_size} with noise_vocab={noise_vocab}: "
                                            f"(vocab_size - noise_vocab) // 2)")
    n_queries = n_pairs if n_queries is None else check_int("n_queries", n_queries, 1, MAX_LENGTH)
    shortest = 2 * n_pairs + n_queries
    if shortest > MAX_LENGTH:
        raise bad_value("n_queries", n_queries, f"an integer in [1, {MAX_LENGTH - 2 * n_pairs}] "
                                                f"(2 * n_pairs + n_queries <= {MAX_LENGTH})")
    length = check_int("length", length, 1, MAX_LENGTH)
    if length < shortest:
        raise bad_value("length", length, f"an integer in [{shortest}, {MAX_LENGTH}] (2 * n_pairs + n_queries "
                                          f"with n_pairs={n_pairs}, n_queries={n_queries})")
    return {"vocab_size": vocab_size, "n_pairs": n_pairs, "n_queries": n_queries, "noise_vocab": noise_vocab}


def _random_subsets(rng: np.random.Generator, n: int, population: int, k: int) -> np.ndarray:
    """``(n, k)`` int64: per row, ``k`` distinct integers of ``[0, population)``, uniformly, in increasing order.

    Floyd's algorithm, vectorised over rows: for ``j = population - k, ..., population - 1`` draw ``t`` in
    ``[0, j]`` and take ``t``, or ``j`` when ``t`` is taken already; every k-subset comes out equally likely.
    """
    rows = np.arange(n)
    taken = np.zeros((n, population), dtype=bool)  # (n, population)
    for j in range(population - k, population):
        t = rng.integers(0, j + 1, size=n)  # (n,)
        taken[rows, np.where(taken[rows, t], j, t)] = True
    return np.nonzero(taken)[1].reshape(n, k).astype(np.int64)  # row-major: each row's picks in order


def _shuffle_rows(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """``a`` ``(n, k)`` with each row in an independent uniformly random order."""
    return np.take_along_axis(a, np.argsort(rng.random(a.shape), axis=1), axis=1)


def mqar_task(*, n: int, length: int, seed: int, vocab_size: int = 64, n_pairs: int = 8,
              n_queries: int | None = None, noise_vocab: int = 1) -> TokenTask:
    """Multi-query associative recall sequences.

    Arguments:
        n: number of sequences. length: positions, in ``[2 * n_pairs + n_queries, MAX_LENGTH]``.
        seed: seed of ``numpy.random.default_rng``.
        vocab_size: tokens in all (filler, keys and values). n_pairs: key-value pairs opening each sequence.
        n_queries: keys asked later (default ``n_pairs``). noise_vocab: number of filler tokens.

    Returns:
        :class:`TokenTask` ``mqar``: inputs ``(n, length)`` in ``[0, vocab_size)``; targets ``(n, length)``, the
        value class in ``[0, n_classes)`` at the ``n_queries`` query positions, IGNORE elsewhere;
        ``n_classes`` = number of value tokens; options: the four settings (``n_queries`` resolved) and ``seed``.
    """
    opts = check_mqar(length=length, vocab_size=vocab_size, n_pairs=n_pairs, n_queries=n_queries,
                      noise_vocab=noise_vocab)
    n = check_int("n", n, 1, MAX_N)
    seed = check_int("seed", seed, 0)
    n_pairs, n_queries, noise_vocab = opts["n_pairs"], opts["n_queries"], opts["noise_vocab"]
    filler, keys, values = mqar_layout(opts["vocab_size"], noise_vocab)
    rng = np.random.default_rng(seed)
    rows = np.arange(n)[:, None]  # (n, 1)

    key_tok = keys.start + _shuffle_rows(rng, _random_subsets(rng, n, len(keys), n_pairs))  # (n, n_pairs)
    val_cls = rng.integers(0, len(values), size=(n, n_pairs), dtype=np.int64)  # (n, n_pairs)

    if len(filler) == 1:
        inputs = np.zeros((n, length), dtype=np.int64)  # (n, length) the blank everywhere
    else:
        inputs = rng.integers(0, len(filler), size=(n, length), dtype=np.int64)  # (n, length) random filler
    inputs[:, 0:2 * n_pairs:2] = key_tok
    inputs[:, 1:2 * n_pairs:2] = values.start + val_cls
    targets = np.full((n, length), IGNORE, dtype=np.int64)  # (n, length)

    # which pair each query asks: the pairs in a random order, cycled when n_queries > n_pairs (so every pair is
    # asked floor or ceil(n_queries / n_pairs) times), then shuffled over the (sorted) query positions
    order = _shuffle_rows(rng, np.tile(np.arange(n_pairs), (n, 1)))  # (n, n_pairs)
    asked = _shuffle_rows(rng, np.tile(order, (1, -(-n_queries // n_pairs)))[:, :n_queries])  # (n, n_queries)
    where = 2 * n_pairs + _random_subsets(rng, n, length - 2 * n_pairs, n_queries)  # (n, n_queries) positions
    inputs[rows, where] = key_tok[rows, asked]
    targets[rows, where] = val_cls[rows, asked]
    return TokenTask("mqar", inputs, targets, opts["vocab_size"], len(values), {**opts, "seed": seed})
