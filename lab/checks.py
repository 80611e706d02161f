"""One way to say a value is wrong, for the whole lab: the name, the value given, what is allowed.

Every check here raises :class:`ConfigError` (a ``ValueError``) whose message reads::

    N=-3 is not allowed; allowed: an integer in [16, 100000]

Config fields declare their bounds with :class:`Range`, :class:`Choices` and :class:`Each` (``typing.Annotated``
metadata, checked by :class:`lab.config.BaseConfig`); functions that take plain arguments (solvers, generators)
call :func:`check_int`, :func:`check_real`, :func:`check_choice` directly, or raise :func:`bad_value` for a rule of
their own.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Choices", "ConfigError", "Each", "Range", "bad_value", "check_choice", "check_int", "check_real"]


class ConfigError(ValueError):
    """A bad value: the message names the field or argument, the value given and what is allowed."""


def bad_value(name: str, value: Any, allowed: str) -> ConfigError:
    """The error for ``name=value``; raise it: ``raise bad_value("N", N, "a power of two")``."""
    return ConfigError(f"{name}={value!r} is not allowed; allowed: {allowed}")


def _num(x: float) -> str:
    """A bound as the messages print it: whole numbers without a decimal point (``Range(0.0, 1.0)`` and
    ``Range(0, 1)`` are equal, and typing may hand either to a field)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class Range:
    """A number in an interval (closed unless ``lo_open`` / ``hi_open``; None: unbounded on that side).

    Use on a field: ``N: Annotated[int, Range(16, 100_000)] = 512``.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def describe(self, integer: bool = False) -> str:
        kind = "an integer" if integer else "a finite number"
        if self.lo is None and self.hi is None:
            return kind
        lo = "-inf" if self.lo is None else _num(self.lo)
        hi = "inf" if self.hi is None else _num(self.hi)
        return f"{kind} in {'(' if self.lo_open or self.lo is None else '['}{lo}, {hi}" \
               f"{')' if self.hi_open or self.hi is None else ']'}"

    def contains(self, value: float) -> bool:
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            return False
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            return False
        return True

    def check(self, name: str, value: Any, integer: bool = False, shown: Any = None) -> None:
        """Raise :class:`ConfigError` unless ``value`` is in the range (``shown``: the whole tuple it came from)."""
        each = "each value " if shown is not None else ""
        shown = value if shown is None else shown
        if integer:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise bad_value(name, shown, each + self.describe(True))
        elif isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise bad_value(name, shown, each + self.describe(False))
        if not self.contains(value):
            raise bad_value(name, shown, each + self.describe(integer))


@dataclass(frozen=True)
class Choices:
    """One of a fixed set of values (for a field typed ``str`` or ``int``; ``Literal`` types need no marker)."""

    options: tuple

    def __init__(self, *options: Any):
        if len(options) == 1 and isinstance(options[0], (tuple, list)):
            options = tuple(options[0])
        object.__setattr__(self, "options", tuple(options))

    def describe(self) -> str:
        return "one of " + ", ".join(map(repr, self.options))

    def check(self, name: str, value: Any, shown: Any = None) -> None:
        if value not in self.options:
            raise bad_value(name, value if shown is None else shown, self.describe())


@dataclass(frozen=True)
class Each:
    """Rules for a tuple field: its length and order (each element is checked by the field's Range or Choices).

    Arguments:
        min_len, max_len: allowed number of values.
        increasing: values strictly increasing (no repeats).
        unique: no value twice (any order).
    """

    min_len: int = 1
    max_len: int | None = None
    increasing: bool = False
    unique: bool = False

    def describe(self) -> str:
        parts = []
        if self.max_len is None:
            parts.append(f"at least {self.min_len} value{'s' if self.min_len != 1 else ''}" if self.min_len
                         else "any number of values")
        else:
            parts.append(f"{self.min_len} to {self.max_len} values")
        if self.increasing:
            parts.append("strictly increasing")
        elif self.unique:
            parts.append("no repeats")
        return ", ".join(parts)

    def check(self, name: str, values: Sequence[Any]) -> None:
        n = len(values)
        if n < self.min_len or (self.max_len is not None and n > self.max_len):
            raise bad_value(name, values, self.describe())
        if self.increasing and any(b <= a for a, b in zip(values, values[1:])):
            raise bad_value(name, values, self.describe())
        if self.unique and len(set(values)) != n:
            raise bad_value(name, values, self.describe())


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum] (``bool`` refused); raises :class:`ConfigError`."""
    Range(minimum, maximum).check(name, value, integer=True)
    return int(value)


def check_real(name: str, value: Any, minimum: float | None = None, maximum: float | None = None, *,
               lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite float in the interval; raises :class:`ConfigError`."""
    Range(minimum, maximum, lo_open, hi_open).check(name, value)
    return float(value)


def check_choice(name: str, value: Any, options: Iterable[Any]) -> Any:
    """``value`` if it is one of ``options`` (any iterable: a mapping gives its keys); raises :class:`ConfigError`."""
    Choices(*options).check(name, value)
    return value
