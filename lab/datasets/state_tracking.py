"""State tracking: running products in a finite group (the "word problem"), one label per position.

A sequence of group elements ``x_1, ..., x_L`` (drawn uniformly) is read left to right and every position is
labelled with the running product ``y_t = x_1 · x_2 · ... · x_t``. Abelian groups (parity, ``Z_m``) need only
counting; S3 is non-abelian but solvable (its word problem is in ACC0, Barrington & Thérien 1988); the word problem
of A5, the smallest non-solvable group, is NC1-complete (Barrington 1989), so unless TC0 = NC1 no fixed-depth
log-precision transformer or diagonal linear SSM tracks it at every length (Merrill, Petty & Sabharwal 2024, "The
illusion of state in state-space models"), while a one-layer RNN with a 60-state transition does.

Groups (:data:`GROUPS`, built by :func:`get_group`):

* ``parity``: Z2; input bits, target the running XOR.
* ``cyclic``: Z_m (``modulus`` m, default 5); input tokens ``0..m-1``, target the running sum mod m.
* ``s3``: the 6 permutations of 3 points.
* ``a5``: the 60 even permutations of 5 points.

With ``generators=1`` the inputs are not every element but the identity and a fixed generating set
(:data:`GENERATORS`: parity and Z_m the rotation by one, S3 a transposition and a 3-cycle, A5 the 5-cycle
``(0 1 2 3 4)`` and the 3-cycle ``(0 1 2)``, which generate A_n for odd n): three tokens (two for parity and Z_m)
whose running product still reaches every element. The word problem stays as hard (a word over every element is a
word over the generators of bounded length, a reduction in AC0), but a model no longer has to learn a 60 x 60 table
before it can compose: with every element as input no model of the arena fits A5 at 1x in quick's budget (0.14
at length 8, measured 2026-12-07), with the generators every one does at length 8 by memorising and only the ones
that compose do at length 16.

Conventions, shared by every group:

* Every group is a set of permutations of ``degree`` points, a permutation ``p`` written as the tuple of images
  ``(p(0), ..., p(degree - 1))``. Z_m is the rotations ``k ↦ k + a mod m`` (element ``a`` is the rotation by ``a``),
  so its indices are the residues; S3 and A5 are listed in lexicographic order of their tuples, which puts the
  identity at index 0 (this holds for every group here).
* ``a · b`` means "``a`` then ``b``": ``(a · b)(k) = b(a(k))``. The multiplication table is
  ``table[i, j] = index of (g_i then g_j)``, and the running product follows ``y_t = table[y_{t-1}, x_t]`` with
  ``y_0`` the identity.
* Token ids and class ids are element indices: ``vocab_size = n_classes = |G|``.

Generation loops over positions and is vectorised over examples (20000 x 512 of A5: about 0.15 s of CPU).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lab.checks import bad_value, check_int
from lab.datasets.tokens import TokenTask

__all__ = ["GENERATORS", "GROUPS", "MAX_LENGTH", "MAX_MODULUS", "Group", "generator_tokens", "get_group",
           "running_product", "state_tracking_task"]

#: longest sequence the generator makes
MAX_LENGTH = 4096
#: largest modulus of the cyclic group
MAX_MODULUS = 256
#: most examples in one task
MAX_N = 1_000_000


@dataclass(frozen=True)
class Group:
    """A finite group as permutations of ``degree`` points with its multiplication table.

    Attributes:
        name: ``parity``, ``cyclic``, ``s3`` or ``a5`` (Z_m's name carries no modulus; see ``perms``).
        perms: ``(size, degree)`` int64, row ``i`` the images of element ``g_i``; row 0 is the identity.
        table: ``(size, size)`` int64, ``table[i, j]`` the index of ``g_i`` then ``g_j``.
        inverse: ``(size,)`` int64, ``inverse[i]`` the index of ``g_i``'s inverse.
    """

    name: str
    perms: np.ndarray
    table: np.ndarray
    inverse: np.ndarray

    @property
    def size(self) -> int:
        return int(self.perms.shape[0])

    @property
    def degree(self) -> int:
        return int(self.perms.shape[1])

    @property
    def abelian(self) -> bool:
        return bool(np.array_equal(self.table, self.table.T))


def _from_perms(name: str, perms: list[tuple[int, ...]]) -> Group:
    """Build the table of a list of permutations (closed under composition, identity first)."""
    p = np.asarray(perms, dtype=np.int64)  # (size, degree)
    size, degree = p.shape
    if not np.array_equal(p[0], np.arange(degree)):
        raise ValueError(f"group {name}: element 0 must be the identity")
    index = {tuple(row): i for i, row in enumerate(p.tolist())}
    # (g_i then g_j)(k) = g_j(g_i(k)): composed[i, j, k] = p[j, p[i, k]]
    composed = p[np.arange(size)[None, :, None], p[:, None, :]]  # (size, size, degree)
    table = np.array([[index[tuple(composed[i, j])] for j in range(size)] for i in range(size)], dtype=np.int64)
    inverse = np.argmax(table == 0, axis=1).astype(np.int64)  # the j with g_i · g_j = e
    return Group(name, p, table, inverse)


def _cyclic(modulus: int) -> Group:
    m = check_int("modulus", modulus, 2, MAX_MODULUS)
    rotations = [tuple((k + a) % m for k in range(m)) for a in range(m)]  # element a: k -> k + a mod m
    return _from_perms("parity" if m == 2 else "cyclic", rotations)


def _even(perm: tuple[int, ...]) -> bool:
    """True when ``perm`` has an even number of inversions."""
    inversions = sum(1 for a, b in itertools.combinations(perm, 2) if a > b)
    return inversions % 2 == 0


def _symmetric(degree: int, name: str) -> Group:
    return _from_perms(name, list(itertools.permutations(range(degree))))


def _alternating(degree: int, name: str) -> Group:
    return _from_perms(name, [p for p in itertools.permutations(range(degree)) if _even(p)])


#: name -> builder ``(modulus) -> Group``; only ``cyclic`` reads the modulus.
GROUPS: dict[str, Callable[[int], Group]] = {
    "parity": lambda modulus=2: _cyclic(2),
    "cyclic": lambda modulus=5: _cyclic(modulus),
    "s3": lambda modulus=None: _symmetric(3, "s3"),
    "a5": lambda modulus=None: _alternating(5, "a5"),
}


#: name -> the generating set of ``generators=1`` as permutations (images of 0, 1, ...); Z_m: the rotation by one
GENERATORS: dict[str, tuple[tuple[int, ...], ...]] = {
    "parity": ((1, 0),),
    "s3": ((1, 0, 2), (1, 2, 0)),
    "a5": ((1, 2, 3, 4, 0), (1, 2, 0, 3, 4)),
}


def generator_tokens(g: Group) -> np.ndarray:
    """Element indices of the tokens of ``generators=1``: the identity (token 0), then :data:`GENERATORS`."""
    if g.name == "cyclic":
        return np.array([0, 1], dtype=np.int64)
    index = {tuple(row): i for i, row in enumerate(g.perms.tolist())}
    return np.array([0] + [index[p] for p in GENERATORS[g.name]], dtype=np.int64)


@functools.lru_cache(maxsize=64)
def _group_cached(name: str, modulus: int) -> Group:
    return GROUPS[name](modulus)


def get_group(name: str, *, modulus: int = 5) -> Group:
    """The group ``name`` (a key of :data:`GROUPS`); ``modulus`` is the m of ``cyclic`` (ignored otherwise).

    Raises:
        ConfigError: unknown name, or a modulus outside ``[2, MAX_MODULUS]`` for ``cyclic``.
    """
    if name not in GROUPS:
        raise bad_value("group", name, "one of " + ", ".join(map(repr, GROUPS)))
    if name == "cyclic":
        modulus = check_int("modulus", modulus, 2, MAX_MODULUS)
    else:
        modulus = 0  # one cache entry per fixed group
    return _group_cached(name, modulus)


def running_product(g: Group, x: np.ndarray) -> np.ndarray:
    """Running products of element sequences.

    Arguments:
        g: the group. x: ``(n, length)`` element indices.

    Returns:
        ``(n, length)`` int64, ``y[:, t] = x[:, 0] · ... · x[:, t]`` (left to right, "then").
    """
    x = np.asarray(x)
    return _running_product_t(g, np.ascontiguousarray(x.T, dtype=np.uint8)).T.astype(np.int64)


def _running_product_t(g: Group, xt: np.ndarray) -> np.ndarray:
    """The running products in time-major layout: ``xt`` ``(length, n)`` uint8 -> ``(length, n)`` uint8.

    Time-major rows and a flat table keep each step one contiguous gather (every group here has <= 256 elements).
    """
    flat = g.table.ravel()  # (size * size,) int64: flat[i * size + j] = table[i, j]
    yt = np.empty_like(xt)  # (length, n)
    state = np.zeros(xt.shape[1], dtype=np.int64)  # (n,) the identity
    for t in range(xt.shape[0]):
        state = flat[state * g.size + xt[t]]
        yt[t] = state
    return yt


def state_tracking_task(group: str, *, n: int, length: int, seed: int, modulus: int = 5,
                        generators: int = 0) -> TokenTask:
    """The word problem of a group: uniform random inputs, labelled with their running product.

    Arguments:
        group: ``parity``, ``cyclic``, ``s3`` or ``a5``.
        n: number of sequences. length: positions per sequence, in ``[1, MAX_LENGTH]``.
        seed: seed of the generator (``numpy.random.default_rng``).
        modulus: m of Z_m (``cyclic`` only).
        generators: 0: every element is an input token (token = element index); 1: the tokens are the identity and
            the generating set :func:`generator_tokens` (token ``k`` is its ``k``-th element).

    Returns:
        :class:`TokenTask` named ``group`` with inputs and targets ``(n, length)``, ``n_classes = |G|`` and
        ``vocab_size`` ``|G|`` (or the generating set's size plus one), every position labelled; options
        ``{"seed": seed}``, for ``cyclic`` ``"modulus": m``, with generators ``"generators": 1``.
    """
    g = get_group(group, modulus=modulus)
    n = check_int("n", n, 1, MAX_N)
    length = check_int("length", length, 1, MAX_LENGTH)
    seed = check_int("seed", seed, 0)
    generators = check_int("generators", generators, 0, 1)
    rng = np.random.default_rng(seed)
    alphabet = generator_tokens(g) if generators else np.arange(g.size)  # token -> element index
    tokens = rng.integers(0, len(alphabet), size=(length, n), dtype=np.uint8)  # (length, n), time-major for speed
    yt = _running_product_t(g, alphabet[tokens].astype(np.uint8) if generators else tokens)  # (length, n)
    x = np.ascontiguousarray(tokens.T).astype(np.int64)  # (n, length)
    y = np.ascontiguousarray(yt.T).astype(np.int64)  # (n, length)
    options = {"modulus": g.size, "seed": seed} if group == "cyclic" else {"seed": seed}
    if generators:
        options["generators"] = 1
    return TokenTask(group, x, y, len(alphabet), g.size, options)
