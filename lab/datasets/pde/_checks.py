"""Argument checks of the PDE solvers and data generators, in the lab's one message style (:mod:`lab.checks`).

Every check raises :class:`lab.checks.ConfigError` (a ``ValueError``) whose message names the argument, repeats the
value given and says what is allowed, e.g. ``num_points=-3 is not allowed; allowed: an integer in [4, inf)``. The
keyword forms below (``minimum``, ``positive``, ``nonnegative``, ``upper``) are the solvers' shorthand for
:func:`lab.checks.check_int` and :func:`lab.checks.check_real`.
"""

from __future__ import annotations

from collections.abc import Iterable

from lab import checks

bad_value = checks.bad_value

__all__ = ["bad_value", "check_choice", "check_int", "check_real"]


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` as an ``int`` (NumPy integers accepted, ``bool`` refused), at least ``minimum`` when given."""
    return checks.check_int(name, value, minimum)


def check_real(name: str, value: object, *, positive: bool = False, nonnegative: bool = False,
               upper: float | None = None) -> float:
    """``value`` as a finite ``float``: ``> 0`` with ``positive``, ``>= 0`` with ``nonnegative``, ``<= upper``."""
    lower = 0.0 if positive or nonnegative else None
    return checks.check_real(name, value, lower, upper, lo_open=positive)


def check_choice(name: str, value: object, allowed: Iterable[str]) -> str:
    """``value`` if it is one of the strings ``allowed``."""
    return checks.check_choice(name, value, tuple(allowed))
