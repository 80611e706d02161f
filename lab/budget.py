"""Work bounded before it starts: every Config states the memory and the work its run needs.

A method's ``Config.run_budget()`` returns a :class:`Budget` estimated from its own fields (what its experiment
allocates and loops over; within a factor of about 3), and :func:`check_budget` refuses, before any work, a run
that needs more than this machine allows, with one line that names the fields driving it::

    trials=10000, steps=10000 is not allowed: the run needs 74.6 GiB (...) and this machine allows 14.0 GiB
    (60% of its 23.4 GiB; LAB_MAX_MEMORY_GIB); allowed: a run within 14.0 GiB and 1e+15 operations ...

Limits: memory at most :data:`MEMORY_SHARE` of the machine's (``psutil.virtual_memory().total``), or
``LAB_MAX_MEMORY_GIB`` GiB; work at most :data:`DEFAULT_MAX_WORK` operations, or ``LAB_MAX_WORK``. Work counts
floating-point operations (a multiply-add is 2; training a model of P weights on T tokens about 6 P T), so that one
cap serves every method: 10^16 is about ten days at the ~10^10 operations per second two CPU cores reach, hours
on a GPU; the full profiles need up to a quarter of it.

The helpers below (:func:`train_ops`, :func:`train_bytes`, :func:`mlp_weights`, :data:`SEQUENCE_TASKS`) keep the
methods' estimates short and alike.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

from lab.checks import ConfigError

__all__ = ["Budget", "DEFAULT_MAX_WORK", "GIB", "MEMORY_SHARE", "SEQUENCE_TASKS", "STEP_OPS", "budget_of",
           "check_budget", "drivers", "limits", "mlp_weights", "ssm_weights", "task_sizes", "train_bytes",
           "train_ops", "training"]

GIB = 2.0**30
#: share of the machine's memory a run may take (the rest: the OS, the notebook, the other people on the machine)
MEMORY_SHARE = 0.6
#: most operations a run may take unless ``LAB_MAX_WORK`` says otherwise (the heaviest full profiles, recurrsim's and
#: ssm_inr's, need about a quarter of it; quick ones at most a hundredth)
DEFAULT_MAX_WORK = 1e16
#: operations a small model's optimiser step costs beyond its arithmetic (about a millisecond at 10^10 per second)
STEP_OPS = 1e7
#: (training examples, test examples, length) of the sequence tasks (lab.datasets.sequences: sklearn digits at
#: test_fraction 0.25, MNIST-1D's own split), and of the flat data sets the MLP methods read
SEQUENCE_TASKS = {"digits": (1348, 449, 64), "mnist1d": (4000, 1000, 40)}


@dataclasses.dataclass(frozen=True)
class Budget:
    """What a run needs, estimated from its Config before it starts.

    Attributes:
        memory_bytes: peak memory of the run's largest arrays, models and optimiser states (bytes).
        work: operations of the run's dominant loops (a multiply-add counts 2; training about 6 x weights x tokens).
        what: what dominates, in words (shown in the error).
        fields: the Config fields that drive the estimate, most important first (the error names those set beyond
            the quick profile, or the first three).
        memory_what: what dominates the memory, in words, where it is not ``what``.
    """

    memory_bytes: float
    work: float
    what: str
    fields: tuple[str, ...] = ()
    memory_what: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    def __add__(self, other: Budget) -> Budget:
        """Two parts of a run one after the other: the larger memory, the summed work."""
        what = self.what if self.work >= other.work else other.what
        heavier = self if self.memory_bytes >= other.memory_bytes else other
        fields = tuple(dict.fromkeys((*self.fields, *other.fields)))
        return Budget(max(self.memory_bytes, other.memory_bytes), self.work + other.work, what, fields,
                      heavier.memory_what or heavier.what)


# --------------------------------------------------------------------------------------------------------------------
# Helpers for the estimates
# --------------------------------------------------------------------------------------------------------------------
def mlp_weights(widths: Sequence[int], bias: bool = True) -> int:
    """Weights of a dense MLP through ``widths`` (input, hidden..., output)."""
    return sum(a * b + (b if bias else 0) for a, b in zip(widths, widths[1:]))


def ssm_weights(d_model: int, d_state: int, layers: int, d_in: int = 1, n_out: int = 10) -> int:
    """Weights of a :class:`lab.core.models.SequenceClassifier`: per layer the complex B and C (4 d_state d_model)
    and the GLU (2 d_model^2), the encoder and the head."""
    return layers * (4 * d_state * d_model + 2 * d_model * d_model) + d_in * d_model + d_model * n_out


def task_sizes(dataset: str, n_train: int = 0, n_test: int = 0) -> tuple[int, int, int]:
    """(training examples, test examples, length or features) of a data set of :data:`SEQUENCE_TASKS`, cut to
    ``n_train`` / ``n_test`` (0: all), as the methods cut them."""
    train, test, length = SEQUENCE_TASKS[dataset]
    return min(n_train or train, train), min(n_test or test, test), length


def train_ops(weights: float, tokens: float, steps: float = 0.0) -> float:
    """Operations of training ``weights`` on ``tokens`` token-passes (forward and backward: 6 per weight), plus
    :data:`STEP_OPS` per optimiser step of ``steps`` (a small model's step costs about a millisecond whatever its
    size: Python, autograd, kernel launches)."""
    return 6.0 * weights * tokens + STEP_OPS * steps


def train_bytes(weights: float, activations: float, data: float = 0.0) -> float:
    """Bytes of a float32 training run: weights, gradients and two Adam moments; ``activations`` floats kept for
    the backward pass (with a factor 2 for autograd's temporaries); ``data`` bytes of the data set."""
    return 4.0 * (4 * weights + 2 * activations) + data


def training(runs: float, steps: float, batch: float, length: float, weights: float, width: float, layers: float,
             attend: float = 0.0, heads: float = 1.0) -> tuple[float, float]:
    """(memory bytes, operations) of ``runs`` trainings of a sequence model: ``steps`` of ``batch`` sequences of
    ``length`` tokens through ``layers`` layers of ``width`` features (about 16 floats kept per feature and layer),
    attending to ``attend`` earlier tokens (0: no attention; ``heads`` score matrices kept per layer)."""
    tokens = steps * batch * length
    work = runs * (train_ops(weights, tokens, steps) + 12.0 * attend * width * layers * tokens)
    activations = batch * length * layers * (16.0 * width + heads * attend)
    return train_bytes(weights, activations), work


# --------------------------------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------------------------------
def _env_number(name: str, allowed: str) -> float | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={text!r} is not allowed; allowed: {allowed}")
    return value


def limits() -> tuple[float, float, str, str]:
    """(memory bytes, operations) a run may take on this machine, and where each limit comes from, in words."""
    gib = _env_number("LAB_MAX_MEMORY_GIB", "a positive number of GiB (unset: 60% of the machine's memory)")
    if gib is None:
        import psutil

        total = psutil.virtual_memory().total
        memory, memory_src = MEMORY_SHARE * total, (f"{MEMORY_SHARE:.0%} of its {total / GIB:.1f} GiB; "
                                                     "LAB_MAX_MEMORY_GIB")
    else:
        memory, memory_src = gib * GIB, "LAB_MAX_MEMORY_GIB"
    work = _env_number("LAB_MAX_WORK", f"a positive number of operations (unset: {DEFAULT_MAX_WORK:.0e})")
    work_src = "LAB_MAX_WORK" if work is not None else "the default; LAB_MAX_WORK"
    return memory, (DEFAULT_MAX_WORK if work is None else work), memory_src, work_src


def budget_of(cfg: Any) -> Budget:
    """``cfg.run_budget()``, checked to be a :class:`Budget` of finite, non-negative numbers."""
    missing = ConfigError(f"config={type(cfg).__module__}.{type(cfg).__qualname__} is not allowed: it states no "
                          "budget; allowed: a Config whose run_budget() returns a lab.budget.Budget")
    if not callable(getattr(cfg, "run_budget", None)):
        raise missing
    try:
        b = cfg.run_budget()
    except NotImplementedError:
        raise missing from None
    if not isinstance(b, Budget) or not all(math.isfinite(x) and x >= 0 for x in (b.memory_bytes, b.work)):
        raise TypeError(f"{type(cfg).__module__}.Config.run_budget() returned {b!r}, not a Budget of finite numbers")
    return b


def _size(value: Any) -> float | None:
    """A field value's size, to compare with the profiles' (None: not a size)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, tuple):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return float(sum(abs(v) for v in value))
        return float(len(value))
    return None


def drivers(cfg: Any, fields: Sequence[str]) -> list[str]:
    """Of ``fields``, those set beyond the quick profile (the field defaults); the first three when none is."""
    known = {f.name: f for f in dataclasses.fields(type(cfg))}
    fields = [n for n in fields if n in known]
    out = []
    for name in fields:
        size, default = _size(getattr(cfg, name)), _size(known[name].default)
        if size is not None and default is not None and size > default:
            out.append(name)
    return out or fields[:3]


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def check_budget(cfg: Any) -> Budget:
    """Refuse, before any work, a Config whose run needs more memory or work than this machine allows.

    Raises:
        ConfigError: one line naming the fields that drive the estimate, the GiB or operations it needs and the
        limit (``LAB_MAX_MEMORY_GIB``, ``LAB_MAX_WORK`` raise them).
    Returns:
        the Config's :class:`Budget`.
    """
    b = budget_of(cfg)
    max_memory, max_work, memory_src, work_src = limits()
    if b.memory_bytes <= max_memory and b.work <= max_work:
        return b
    names = drivers(cfg, b.fields)
    given = ", ".join(f"{n}={_shown(getattr(cfg, n))}" for n in names) or f"config={type(cfg).__module__}"
    if b.memory_bytes > max_memory:
        need = (f"the run needs {b.memory_gib:.1f} GiB ({b.memory_what or b.what}) and this machine allows "
                f"{max_memory / GIB:.1f} GiB ({memory_src})")
    else:
        need = f"the run needs {b.work:.1e} operations ({b.what}) and this machine allows {max_work:.0e} ({work_src})"
    lower = ", ".join(names) if names else "the run's sizes"
    return_allowed = (f"a run within {max_memory / GIB:.1f} GiB and {max_work:.0e} operations (lower {lower}, or "
                      "raise LAB_MAX_MEMORY_GIB / LAB_MAX_WORK)")
    raise ConfigError(f"{given} is not allowed: {need}; allowed: {return_allowed}")
