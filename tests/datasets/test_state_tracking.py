"""State tracking: the groups against permutations composed by hand, the labels against a brute-force fold."""

import itertools

import numpy as np
import pytest

from lab.checks import ConfigError
from lab.datasets.state_tracking import (
    GENERATORS,
    GROUPS,
    generator_tokens,
    get_group,
    running_product,
    state_tracking_task,
)


def then(a: tuple, b: tuple) -> tuple:
    """``a`` then ``b`` for permutations written as image tuples: k -> b[a[k]]."""
    return tuple(b[a[k]] for k in range(len(a)))


def sign(p: tuple) -> int:
    """+1 for an even permutation, -1 for an odd one, from its cycle decomposition."""
    seen, cycles = set(), 0
    for start in range(len(p)):
        if start not in seen:
            cycles += 1
            k = start
            while k not in seen:
                seen.add(k)
                k = p[k]
    return (-1) ** (len(p) - cycles)


def as_tuples(name, **kw):
    return [tuple(row) for row in get_group(name, **kw).perms.tolist()]


def test_registry_and_sizes():
    assert set(GROUPS) == {"parity", "cyclic", "s3", "a5"}
    sizes = {"parity": 2, "cyclic": 5, "s3": 6, "a5": 60}
    for name, size in sizes.items():
        g = get_group(name)
        assert g.size == size and g.table.shape == (size, size) and g.table.dtype == np.int64
    assert get_group("cyclic", modulus=7).size == 7


def test_s3_is_all_permutations_and_a5_all_even_ones_identity_first():
    assert set(as_tuples("s3")) == set(itertools.permutations(range(3)))
    even = {p for p in itertools.permutations(range(5)) if sign(p) == 1}
    assert len(even) == 60 and set(as_tuples("a5")) == even
    for name in GROUPS:
        elems = as_tuples(name)
        assert elems[0] == tuple(range(len(elems[0])))  # identity = 0
        assert len(set(elems)) == len(elems)
    # deterministic order: lexicographic for the permutation groups, residues for Z_m
    assert as_tuples("s3") == sorted(as_tuples("s3")) and as_tuples("a5") == sorted(as_tuples("a5"))
    assert [p[0] for p in as_tuples("cyclic", modulus=6)] == list(range(6))  # element a sends 0 to a


@pytest.mark.parametrize("name,kw", [("parity", {}), ("cyclic", {"modulus": 5}), ("cyclic", {"modulus": 12}),
                                     ("s3", {}), ("a5", {})])
def test_table_is_composition_then_and_satisfies_group_axioms(name, kw):
    g = get_group(name, **kw)
    elems = as_tuples(name, **kw)
    index = {p: i for i, p in enumerate(elems)}
    for i, a in enumerate(elems):
        for j, b in enumerate(elems):
            assert g.table[i, j] == index[then(a, b)]
    t, k = g.table, g.size
    e = np.arange(k)
    assert np.array_equal(t[0], e) and np.array_equal(t[:, 0], e)  # identity
    for row in range(k):  # a Latin square: each row and column a permutation of the elements
        assert sorted(t[row]) == list(e) and sorted(t[:, row]) == list(e)
    assert np.all(t[e, g.inverse] == 0) and np.all(t[g.inverse, e] == 0)  # inverses
    i, j, m = np.meshgrid(e, e, e, indexing="ij")
    assert np.array_equal(t[t[i, j], m], t[i, t[j, m]])  # associativity


def test_which_groups_commute_and_which_are_solvable():
    assert get_group("parity").abelian and get_group("cyclic", modulus=9).abelian
    assert not get_group("s3").abelian and not get_group("a5").abelian

    def commutators(name):
        g = get_group(name)
        t, inv = g.table, g.inverse
        return {int(t[t[t[inv[a], inv[b]], a], b]) for a in range(g.size) for b in range(g.size)}

    assert len(commutators("s3")) == 3  # [S3, S3] = A3: solvable
    assert len(commutators("a5")) == 60  # every element of A5 is a commutator: perfect, not solvable


def brute_force_labels(name, x, **kw):
    """Fold each sequence with :func:`then` over permutation tuples, independent of the table."""
    elems = as_tuples(name, **kw)
    index = {p: i for i, p in enumerate(elems)}
    out = np.empty_like(x)
    for r, seq in enumerate(x.tolist()):
        state = elems[0]
        for c, tok in enumerate(seq):
            state = then(state, elems[tok])
            out[r, c] = index[state]
    return out


@pytest.mark.parametrize("name,kw", [("parity", {}), ("cyclic", {}), ("cyclic", {"modulus": 3}), ("s3", {}),
                                     ("a5", {})])
def test_labels_match_brute_force(name, kw):
    task = state_tracking_task(name, n=40, length=33, seed=3, **kw)
    size = get_group(name, **kw).size
    assert task.inputs.shape == task.targets.shape == (40, 33) and task.inputs.dtype == np.int64
    assert task.vocab_size == task.n_classes == size and task.name == name
    assert task.inputs.min() >= 0 and task.inputs.max() < size
    assert np.array_equal(task.targets, brute_force_labels(name, task.inputs, **kw))
    assert np.array_equal(task.targets, running_product(get_group(name, **kw), task.inputs))
    assert task.options["seed"] == 3
    assert task.options.get("modulus") == (size if name == "cyclic" else None)


def test_parity_and_cyclic_are_running_xor_and_sums():
    p = state_tracking_task("parity", n=30, length=50, seed=1)
    assert np.array_equal(p.targets, np.bitwise_xor.accumulate(p.inputs, axis=1))
    c = state_tracking_task("cyclic", n=30, length=50, seed=1, modulus=7)
    for x, y in zip(c.inputs.tolist(), c.targets.tolist()):
        total = 0
        for tok, label in zip(x, y):
            total = (total + tok) % 7
            assert label == total


def test_deterministic_per_seed_uniform_inputs():
    a = state_tracking_task("s3", n=50, length=20, seed=0)
    b = state_tracking_task("s3", n=50, length=20, seed=0)
    c = state_tracking_task("s3", n=50, length=20, seed=1)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.inputs, c.inputs)
    big = state_tracking_task("a5", n=20_000, length=512, seed=0)  # speed belongs in benchmarks, not tests
    counts = np.bincount(big.inputs.ravel(), minlength=60)
    assert counts.min() > 0.95 * counts.mean() and counts.max() < 1.05 * counts.mean()
    # long products of uniform elements are uniform too
    last = np.bincount(big.targets[:, -1], minlength=60)
    assert last.min() > 0.7 * last.mean()


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match=r"group='s4' is not allowed; allowed: one of 'parity'"):
        state_tracking_task("s4", n=2, length=4, seed=0)
    with pytest.raises(ConfigError, match=r"length=0 is not allowed; allowed: an integer in \[1, 4096\]"):
        state_tracking_task("a5", n=2, length=0, seed=0)
    with pytest.raises(ConfigError, match=r"length=4097 is not allowed"):
        state_tracking_task("a5", n=2, length=4097, seed=0)
    with pytest.raises(ConfigError, match=r"modulus=1 is not allowed; allowed: an integer in \[2, 256\]"):
        state_tracking_task("cyclic", n=2, length=4, seed=0, modulus=1)
    with pytest.raises(ConfigError, match=r"n=0 is not allowed"):
        state_tracking_task("parity", n=0, length=4, seed=0)


@pytest.mark.parametrize("name, kw, size", [("parity", {}, 2), ("cyclic", {"modulus": 7}, 2), ("s3", {}, 3),
                                            ("a5", {}, 3)])
def test_generator_inputs_reach_the_whole_group_and_fold_by_hand(name, kw, size):
    """``generators=1``: tokens are the identity and GENERATORS, the labels the products of those permutations, and
    the generating set reaches every element (A_5 from a 5-cycle and a 3-cycle)."""
    g = get_group(name, **kw)
    task = state_tracking_task(name, n=64, length=12, seed=3, generators=1, **kw)
    assert task.vocab_size == size and task.n_classes == g.size and task.options["generators"] == 1
    elements = generator_tokens(g)
    assert elements[0] == 0 and len(set(elements.tolist())) == size
    if name in GENERATORS:
        assert [tuple(g.perms[e]) for e in elements[1:]] == list(GENERATORS[name])
    perms = [tuple(row) for row in g.perms.tolist()]
    for x, y in zip(task.inputs[:4], task.targets[:4]):
        state = tuple(range(g.degree))
        for token, label in zip(x, y):
            state = then(state, perms[elements[token]])
            assert perms[label] == state
    reached, frontier = {0}, [0]
    while frontier:
        a = frontier.pop()
        for b in elements:
            if int(g.table[a, b]) not in reached:
                reached.add(int(g.table[a, b]))
                frontier.append(int(g.table[a, b]))
    assert len(reached) == g.size


def test_every_element_stays_the_default_input():
    a = state_tracking_task("a5", n=8, length=5, seed=1)
    b = state_tracking_task("a5", n=8, length=5, seed=1, generators=0)
    assert a.vocab_size == 60 and "generators" not in a.options
    np.testing.assert_array_equal(a.inputs, b.inputs)
    with pytest.raises(ConfigError, match="generators"):
        state_tracking_task("a5", n=8, length=5, seed=1, generators=2)
