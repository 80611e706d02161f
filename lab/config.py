"""Method configurations: frozen dataclasses with profiles, validation and per-field docs.

Every method's ``Config`` subclasses :class:`BaseConfig`. The field defaults *are* the ``quick`` profile (one source
of truth); ``PROFILES["ci"]`` and ``PROFILES["full"]`` are overrides on top of them. Each field carries a docstring
(a string literal right under it), which :func:`field_docs` reads for the CLI, the dashboards and the error messages.

Validation lives in ``__post_init__`` and uses the ``check_*`` helpers below, so that every bad value raises a
``ValueError`` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import math
import textwrap
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

PROFILE_NAMES = ("ci", "quick", "full")


class ConfigError(ValueError):
    """A bad configuration value: names the field, the value and what is allowed."""


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """Base class for method configs. Subclasses are frozen dataclasses with a docstring under every field."""

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"ci": {}, "quick": {}, "full": {}}

    seed: int = 0
    """Random seed; a run is deterministic for a given seed on a given machine."""

    def __post_init__(self) -> None:
        check_int(self, "seed", minimum=0)
        self.validate()

    def validate(self) -> None:
        """Subclasses check their fields here (called from ``__post_init__``)."""

    # ----------------------------------------------------------------------------------------------------------------
    @classmethod
    def from_profile(cls, profile: str = "quick", **overrides: Any):
        """Build the config of a profile, with field overrides on top.

        Arguments:
            profile: one of ``ci``, ``quick`` (the field defaults) or ``full``.
            overrides: field values; strings are parsed to the field's type (as the CLI passes them).
        """
        if profile not in PROFILE_NAMES:
            raise ConfigError(f"profile={profile!r} is not a profile; allowed: {', '.join(PROFILE_NAMES)}")
        values = dict(cls.PROFILES.get(profile, {}))
        names = [f.name for f in dataclasses.fields(cls)]
        for key, value in overrides.items():
            if key not in names:
                raise ConfigError(
                    f"unknown parameter {key!r} for {cls.__module__.split('.')[-2]}; allowed: {', '.join(names)}"
                )
            values[key] = coerce(cls, key, value)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str):
        data = json.loads(text)
        return cls(**{k: coerce(cls, k, v) for k, v in data.items()})

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **{k: coerce(type(self), k, v) for k, v in changes.items()})


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------------------------------
# Field docs and types
# --------------------------------------------------------------------------------------------------------------------
@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (inherited ones included)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def coerce(cls: type, name: str, value: Any) -> Any:
    """Parse ``value`` (possibly a CLI string) into the declared type of field ``name``."""
    tp = field_type(cls, name)
    try:
        return _coerce(tp, value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}={value!r} is not a valid {_type_name(tp)}: {exc}") from None


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        return f"comma-separated list of {args[0].__name__}"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(tp)))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _coerce(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        for option in allowed:
            if value == option or (isinstance(value, str) and str(option) == value):
                return option
        raise ValueError(f"allowed: {', '.join(map(repr, allowed))}")
    if origin is tuple:
        (inner, *_rest) = typing.get_args(tp)
        if isinstance(value, str):
            parts = [p for p in value.replace(" ", "").split(",") if p]
        elif isinstance(value, Sequence):
            parts = list(value)
        else:
            parts = [value]
        return tuple(_coerce(inner, p) for p in parts)
    if origin is typing.Union or type(tp).__name__ == "UnionType":
        args = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() == "none"):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        if isinstance(value, (int,)) and value in (0, 1):
            return bool(value)
        raise ValueError("expected true or false")
    if tp is int:
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("expected an integer")
            return int(value)
        if hasattr(value, "__index__"):
            return int(value)
        return int(str(value))
    if tp is float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return value
    return value


# --------------------------------------------------------------------------------------------------------------------
# Validation helpers: each raises ConfigError naming the field, the value and what is allowed.
# --------------------------------------------------------------------------------------------------------------------
def _fail(name: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{name}={value!r} is not allowed; {allowed}")


def check_int(cfg: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(name, value, "expected an integer")
    _check_bounds(name, value, minimum, maximum)


def check_float(
    cfg: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_min: bool = False,
    exclusive_max: bool = False,
) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(name, value, "expected a finite number")
    _check_bounds(name, value, minimum, maximum, exclusive_min, exclusive_max)


def check_choice(cfg: Any, name: str, allowed: Sequence[Any]) -> None:
    value = getattr(cfg, name)
    if value not in allowed:
        _fail(name, value, "allowed: " + ", ".join(map(repr, allowed)))


def check_seq(
    cfg: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_min: bool = False,
    exclusive_max: bool = False,
    nonempty: bool = True,
    choices: Sequence[Any] | None = None,
) -> None:
    values = getattr(cfg, name)
    if nonempty and len(values) == 0:
        _fail(name, values, "expected at least one value")
    for v in values:
        if choices is not None and v not in choices:
            _fail(name, values, "each value must be one of " + ", ".join(map(repr, choices)))
        if choices is None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                _fail(name, values, "each value must be a finite number")
            _check_bounds(name, v, minimum, maximum, exclusive_min, exclusive_max, whole=values)


def _check_bounds(
    name: str,
    value: float,
    minimum: float | None,
    maximum: float | None,
    exclusive_min: bool = False,
    exclusive_max: bool = False,
    whole: Any = None,
) -> None:
    shown = value if whole is None else whole
    lo = "(" if exclusive_min else "["
    hi = ")" if exclusive_max else "]"
    rng = f"allowed range {lo}{'-inf' if minimum is None else minimum}, {'inf' if maximum is None else maximum}{hi}"
    if minimum is not None and (value < minimum or (exclusive_min and value == minimum)):
        _fail(name, shown, rng)
    if maximum is not None and (value > maximum or (exclusive_max and value == maximum)):
        _fail(name, shown, rng)


def describe_fields(cls: type) -> list[dict[str, Any]]:
    """Name, type, quick default and doc of every field: the CLI's ``lab run SLUG --help-params``."""
    docs = field_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        rows.append(
            {
                "name": f.name,
                "type": _type_name(field_type(cls, f.name)),
                "default": default,
                "doc": docs.get(f.name, ""),
            }
        )
    return rows


def profile_values(cls: type, profile: str) -> Mapping[str, Any]:
    return dict(cls.PROFILES.get(profile, {}))
