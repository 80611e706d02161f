"""Argument checks shared by the PDE solvers and data generators.

Every check raises :class:`ValueError` whose message names the argument, repeats
the offending value and says what is allowed, e.g.
``num_points must be an integer >= 4, got -3``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

__all__ = [
    "check_choice",
    "check_int",
    "check_real",
]


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Validate an integer argument (``bool`` is refused).

    Arguments:
        name: argument name quoted in the error message.
        value: the value to check; Python and NumPy integers are accepted.
        minimum: smallest allowed value (inclusive), or ``None`` for no bound.

    Returns:
        ``value`` as a Python ``int``.
    """
    allowed = "an integer" if minimum is None else f"an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return value


def check_real(
    name: str,
    value: object,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    upper: float | None = None,
) -> float:
    """Validate a finite real argument.

    Arguments:
        name: argument name quoted in the error message.
        value: the value to check (any real number type; ``bool`` is refused).
        positive: require ``value > 0``.
        nonnegative: require ``value >= 0``.
        upper: if given, require ``value <= upper``.

    Returns:
        ``value`` as a Python ``float``.
    """
    parts = ["a finite real number"]
    if positive:
        parts.append("> 0")
    elif nonnegative:
        parts.append(">= 0")
    if upper is not None:
        parts.append(f"<= {upper}")
    allowed = " ".join(parts[:1]) + ("" if len(parts) == 1 else " " + " and ".join(parts[1:]))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if positive and not x > 0:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if nonnegative and not x >= 0:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if upper is not None and x > upper:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return x


def check_choice(name: str, value: object, allowed: Iterable[str]) -> str:
    """Validate a string chosen from a fixed set.

    Arguments:
        name: argument name quoted in the error message.
        value: the value to check.
        allowed: the accepted strings.

    Returns:
        ``value`` unchanged.
    """
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        listing = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {listing}, got {value!r}")
    return value
