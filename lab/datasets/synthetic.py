"""The lab's synthetic sequence tasks by name: one registry, one validated and cached entry point, length splits.

Tasks (:data:`TASKS`), all :class:`~lab.datasets.tokens.TokenTask` with integer inputs and per-position targets:

* state tracking (:mod:`lab.datasets.state_tracking`): ``parity``, ``cyclic`` (option ``modulus``), ``s3``, ``a5``:
  the running product of uniform random group elements (option ``generators=1``: of the identity and a generating
  set), every position labelled;
* associative recall (:mod:`lab.datasets.recall`): ``mqar`` (options ``vocab_size``, ``n_pairs``, ``n_queries``,
  ``noise_vocab``): labels at the query positions only;
* formal languages (:mod:`lab.datasets.languages`): ``aa_star``, ``dyck1``, ``anbncn``, ``b_since_a``,
  ``mod_count``: per-position membership (0/1) of the prefix read so far;
* MAD's skills (:mod:`lab.datasets.mad`): ``selective_copying``, ``noisy_recall``, ``compression``,
  ``memorisation``.

:func:`make_task` checks everything before building (an unknown task or option, a length outside ``[1, max_length]``
of the task, a bad option value all raise :class:`~lab.checks.ConfigError`, which the CLI turns into exit status 2)
and caches the result through :func:`lab.cache.cached_dataset` (``data/synthetic-<task>-<key>.nc``).
:func:`make_splits` builds a length-generalisation experiment: a training split at one length and one test split
per test length, each from its own seed (:func:`split_seeds`), so no split repeats another's sequences by
construction.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from lab.cache import cached_dataset
from lab.checks import bad_value, check_int
from lab.datasets import mad, recall, state_tracking
from lab.datasets.tokens import IGNORE, TokenTask

__all__ = ["MAX_N", "TASKS", "VERSION", "Option", "TaskSpec", "make_splits", "make_task", "split_seeds",
           "task_names", "tokens_to_text"]

#: bump when a generator here, in state_tracking or in recall changes its output (invalidates the cache)
VERSION = 1
#: most examples in one task
MAX_N = 1_000_000
#: the formal languages of lab.datasets.languages, in registry order
LANGUAGE_NAMES = ("aa_star", "dyck1", "anbncn", "b_since_a", "mod_count")


@dataclass(frozen=True)
class Option:
    """An integer option of a task.

    Attributes:
        default: the value when not given (None: derived from other options, see ``doc``).
        lo, hi: allowed closed range (None, None: not checked here, the generator checks it). doc: what it sets.
    """

    default: Any
    lo: int | None
    hi: int | None
    doc: str


@dataclass(frozen=True)
class TaskSpec:
    """A registered task.

    Attributes:
        name: registry key. kind: ``state``, ``recall``, ``language`` or ``mad``. doc: one line.
        build: ``build(n=, length=, seed=, **options) -> TokenTask``.
        options: option name -> :class:`Option` (languages: read from the language, see :meth:`option_specs`).
        limit: longest length, or None for a language (read from ``Language.max_length``).
    """

    name: str
    kind: str
    doc: str
    build: Callable[..., TokenTask]
    options: Mapping[str, Option] = field(default_factory=dict)
    limit: int | None = None

    @property
    def max_length(self) -> int:
        """Longest sequence the generator makes."""
        if self.limit is not None:
            return self.limit
        return int(_language(self.name).max_length)

    def option_specs(self) -> Mapping[str, Option] | None:
        """The options and their defaults; None when a language does not declare them (then ``language_task``
        checks what it is given)."""
        if self.kind != "language":
            return self.options
        lang = _language(self.name)
        declared = getattr(lang, "options", None)
        if not isinstance(declared, Mapping):
            return None
        bounds = getattr(lang, "option_bounds", None) or {}
        return {k: Option(v, *bounds.get(k, (None, None)), "") for k, v in declared.items()}


def _language(name: str):
    from lab.datasets.languages import LANGUAGES

    return LANGUAGES[name]


def _language_builder(name: str) -> Callable[..., TokenTask]:
    def build(*, n: int, length: int, seed: int, **options) -> TokenTask:
        from lab.datasets.languages import language_task

        return language_task(name, n=n, length=length, seed=seed, **options)

    return build


def _group_builder(name: str) -> Callable[..., TokenTask]:
    def build(*, n: int, length: int, seed: int, **options) -> TokenTask:
        return state_tracking.state_tracking_task(name, n=n, length=length, seed=seed, **options)

    return build


_ST = state_tracking.MAX_LENGTH
#: the word problems' option: inputs from a generating set (None: every element, the option left out of the key)
_GEN = {"generators": Option(None, 0, 1, "1: the inputs are the identity and a generating set "
                                         "(state_tracking.GENERATORS); 0 or unset: every element")}
#: name -> :class:`TaskSpec`; config fields, the CLI and the dashboards take their choices from here.
TASKS: dict[str, TaskSpec] = {
    "parity": TaskSpec("parity", "state", "running XOR of bits (Z2)", _group_builder("parity"), {**_GEN},
                       limit=_ST),
    "cyclic": TaskSpec("cyclic", "state", "running sum mod m (Z_m)", _group_builder("cyclic"),
                       {"modulus": Option(5, 2, state_tracking.MAX_MODULUS, "m of Z_m"), **_GEN}, limit=_ST),
    "s3": TaskSpec("s3", "state", "word problem of S3 (6 permutations of 3 points)", _group_builder("s3"), {**_GEN},
                   limit=_ST),
    "a5": TaskSpec("a5", "state", "word problem of A5 (60 even permutations of 5 points; NC1-complete)",
                   _group_builder("a5"), {**_GEN}, limit=_ST),
    "mqar": TaskSpec("mqar", "recall", "multi-query associative recall (zoology)", recall.mqar_task, {
        "vocab_size": Option(64, 3, recall.MAX_VOCAB, "tokens in all: filler, keys, values"),
        "n_pairs": Option(8, 1, recall.MAX_LENGTH // 2, "key-value pairs opening each sequence"),
        "n_queries": Option(None, 1, recall.MAX_LENGTH, "keys asked later (default: n_pairs)"),
        "noise_vocab": Option(1, 1, recall.MAX_VOCAB - 2, "filler tokens (1: a blank)"),
    }, limit=recall.MAX_LENGTH),
    **{name: TaskSpec(name, "language", f"formal language {name}: prefix membership", _language_builder(name))
       for name in LANGUAGE_NAMES},
    "selective_copying": TaskSpec("selective_copying", "mad", "copy the data tokens hidden in noise (MAD)",
                                  mad.selective_copying_task, {
        "vocab_size": Option(16, 3, mad.MAX_VOCAB, "noise, data and the copy marker"),
        "n_tokens": Option(4, 1, mad.MAX_LENGTH // 2, "data tokens to copy"),
        "noise_vocab": Option(1, None, None, "noise tokens, in [1, vocab_size - 2]")}, limit=mad.MAX_LENGTH),
    "noisy_recall": TaskSpec("noisy_recall", "mad", "in-context recall with noise tokens (MAD)",
                             mad.noisy_recall_task, {
        "vocab_size": Option(32, 5, mad.MAX_VOCAB, "noise, keys and values"),
        "n_keys": Option(4, None, None, "keys bound per sequence, at most (vocab_size - noise_vocab) // 2"),
        "noise_vocab": Option(4, None, None, "noise tokens, in [1, vocab_size - 4]"),
        "noise_percent": Option(20, 0, 90, "slots holding noise, %")}, limit=mad.MAX_LENGTH),
    "compression": TaskSpec("compression", "mad", "reconstruct the first half after a marker (MAD)",
                            mad.compression_task, {"vocab_size": Option(10, 3, mad.MAX_VOCAB, "data, marker, blank")},
                            limit=mad.MAX_LENGTH),
    "memorisation": TaskSpec("memorisation", "mad", "a fixed key-value table, learnt in the weights (MAD)",
                             mad.memorisation_task, {
        "n_keys": Option(64, 2, mad.MAX_VOCAB, "keys (the input tokens)"),
        "n_values": Option(16, 2, mad.MAX_VOCAB, "values (the classes)"),
        "table_seed": Option(0, 0, 2**62, "seed of the table, the same in every split")}, limit=mad.MAX_LENGTH),
}


def task_names(kind: str | None = None) -> list[str]:
    """Names in :data:`TASKS`, in registry order; ``kind`` (``state``, ``recall``, ``language``, ``mad``) filters."""
    return [name for name, spec in TASKS.items() if kind is None or spec.kind == kind]


def _spec(name: Any) -> TaskSpec:
    if not isinstance(name, str) or name not in TASKS:
        raise bad_value("task", name, "one of " + ", ".join(map(repr, TASKS)))
    return TASKS[name]


def _resolve_options(spec: TaskSpec, length: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check the options of ``spec`` and fill in their defaults (raises ConfigError naming the option)."""
    specs = spec.option_specs()
    if specs is None:  # a language that does not declare its options: language_task checks them
        return {k: options[k] for k in sorted(options)}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in specs:
            allowed = ", ".join(map(repr, specs)) if specs else "none"
            raise bad_value(key, value, f"an option of task {spec.name!r}; its options: {allowed}")
        if value is None:  # None: the default
            continue
        lo, hi = specs[key].lo, specs[key].hi
        out[key] = value if lo is None and hi is None else check_int(key, value, lo, hi)
    for key, opt in specs.items():
        out.setdefault(key, opt.default)
    if spec.name == "mqar":  # cross-field rules; resolves n_queries
        out = recall.check_mqar(length=length, **out)
    return {k: out[k] for k in sorted(out) if out[k] is not None}


def _plain(value: Any) -> Any:
    """NetCDF attributes come back as NumPy scalars: give the options back as Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _validator(name: str, n: int, length: int) -> Callable[[xr.Dataset], None]:
    def validate(ds: xr.Dataset) -> None:
        if ds.attrs.get("name") != name:
            raise ValueError(f"task name {ds.attrs.get('name')!r}, expected {name!r}")
        if ds["inputs"].shape != (n, length) or ds["targets"].shape != (n, length):
            raise ValueError(f"shapes {ds['inputs'].shape}, {ds['targets'].shape}, expected {(n, length)}")
        vocab, classes = int(ds.attrs["vocab_size"]), int(ds.attrs["n_classes"])
        x, y = ds["inputs"].values, ds["targets"].values
        if x.min() < 0 or x.max() >= vocab:
            raise ValueError(f"inputs outside [0, {vocab})")
        if not np.all((y == IGNORE) | ((y >= 0) & (y < classes))):
            raise ValueError(f"targets outside [0, {classes}) and not IGNORE")

    return validate


def _checked(name: Any, n: Any, length: Any, seed: Any, options: Mapping[str, Any]
             ) -> tuple[TaskSpec, int, int, int, dict[str, Any]]:
    """Every check of :func:`make_task`: the spec, n, length, seed and the resolved options."""
    spec = _spec(name)
    n = check_int("n", n, 1, MAX_N)
    length = check_int("length", length, 1, spec.max_length)
    seed = check_int("seed", seed, 0)
    return spec, n, length, seed, _resolve_options(spec, length, options)


def make_task(name: str, *, n: int, length: int, seed: int = 0, root: str | os.PathLike[str] | None = None,
              cache: bool = True, **options) -> TokenTask:
    """A synthetic task by name, validated, built once and cached.

    Arguments:
        name: a key of :data:`TASKS`.
        n: number of sequences, in ``[1, MAX_N]``. length: positions, in ``[1, TASKS[name].max_length]``.
        seed: seed of the generator (an integer >= 0).
        root: cache directory (default ``data/``, see :func:`lab.cache.data_root`).
        cache: False builds without reading or writing the cache.
        **options: the task's options (:attr:`TaskSpec.options`), e.g. ``modulus=7`` for ``cyclic``.

    Returns:
        :class:`TokenTask` with inputs and targets ``(n, length)``; its ``options`` hold every option resolved.

    Raises:
        ConfigError: unknown task or option, or a value out of its range; the message names the field, the value
            and what is allowed.
    """
    spec, n, length, seed, opts = _checked(name, n, length, seed, options)

    def build() -> TokenTask:
        return spec.build(n=n, length=length, seed=seed, **opts)

    if not cache:
        return build()
    config: dict[str, Any] = {"task": name, "n": n, "length": length, "seed": seed, "options": opts,
                              "version": VERSION}
    if spec.kind == "language":
        from lab.datasets import languages

        config["languages_version"] = getattr(languages, "VERSION", 0)
    ds = cached_dataset(f"synthetic-{name}", config, lambda: build().to_dataset(), root=root,
                        validate=_validator(name, n, length))
    task = TokenTask.from_dataset(ds)
    return dataclasses.replace(task, options={k: _plain(v) for k, v in task.options.items()})


def split_seeds(seed: int, test_lengths: Sequence[int]) -> dict[str, int]:
    """The seed of every split of :func:`make_splits`: ``{"train": s, "test_<L>": s_L, ...}``.

    Each is drawn from ``numpy.random.SeedSequence([seed, split])`` (``split`` 0 for training, ``1 + L`` for the
    test at length L): 63-bit integers, distinct from each other and from those of any other ``seed`` except with
    negligible probability (checked: a clash raises).
    """
    seed = check_int("seed", seed, 0)
    tags = {"train": 0, **{f"test_{int(L)}": 1 + int(L) for L in test_lengths}}
    out = {key: int(np.random.SeedSequence([seed, tag]).generate_state(1, np.uint64)[0] >> np.uint64(1))
           for key, tag in tags.items()}
    if len(set(out.values())) != len(out):  # pragma: no cover - a 2**-63 event
        raise RuntimeError(f"split seeds clash: {out}")
    return out


def make_splits(name: str, *, n_train: int, n_test: int, train_length: int, test_lengths: Sequence[int],
                seed: int = 0, root: str | os.PathLike[str] | None = None, cache: bool = True,
                **options) -> dict[str, TokenTask]:
    """A length-generalisation experiment: train at one length, test at several.

    Arguments:
        name: a key of :data:`TASKS`. n_train, n_test: sequences per split.
        train_length: length of the training sequences. test_lengths: one test split per length (no repeats; may
            include ``train_length`` for an in-distribution test).
        seed: the experiment's seed; each split's own seed comes from :func:`split_seeds`.
        root, cache, **options: as for :func:`make_task` (the same options for every split).

    Returns:
        ``{"train": TokenTask (n_train, train_length), "test_<L>": TokenTask (n_test, L), ...}`` in the order of
        ``test_lengths``.
    """
    _spec(name)
    n_train = check_int("n_train", n_train, 1, MAX_N)
    n_test = check_int("n_test", n_test, 1, MAX_N)
    train_length = _length("train_length", name, train_length)
    if isinstance(test_lengths, (str, bytes)) or not isinstance(test_lengths, Sequence) or not test_lengths:
        raise bad_value("test_lengths", test_lengths, "a non-empty sequence of integer lengths, no repeats")
    lengths = [_length("test_lengths", name, L) for L in test_lengths]
    if len(set(lengths)) != len(lengths):
        raise bad_value("test_lengths", test_lengths, "a non-empty sequence of integer lengths, no repeats")
    seeds = split_seeds(seed, lengths)
    plan = {"train": (n_train, train_length), **{f"test_{L}": (n_test, L) for L in lengths}}
    # check the options (and their rules against every length) before building anything
    for n, L in plan.values():
        _checked(name, n, L, seed, options)
    return {key: make_task(name, n=n, length=L, seed=seeds[key], root=root, cache=cache, **options)
            for key, (n, L) in plan.items()}


def _length(field_name: str, task: str, length: Any) -> int:
    """A length checked against the task's limit, the error naming the field it came from."""
    return check_int(field_name, length, 1, TASKS[task].max_length)


def tokens_to_text(task: TokenTask, i: int, alphabet: Sequence[str] | None = None) -> str:
    """Example ``i`` as two aligned lines, inputs over targets (``.`` where IGNORE), for plots and notebooks.

    Arguments:
        task: the task. i: example index. alphabet: optional names of the input tokens (e.g. a language's letters).
    """
    x, y = task.inputs[i], task.targets[i]  # (length,), (length,)
    xs = [alphabet[t] if alphabet is not None else str(t) for t in x.tolist()]
    ys = ["." if t == IGNORE else str(t) for t in y.tolist()]
    width = max(map(len, xs + ys))
    return "inputs:  " + " ".join(s.rjust(width) for s in xs) + "\ntargets: " + " ".join(s.rjust(width) for s in ys)
