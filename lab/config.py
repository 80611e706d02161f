"""Method configurations: frozen dataclasses with profiles, bounds on the fields and per-field docs.

Every method's ``Config`` subclasses :class:`BaseConfig`. The field defaults *are* the ``quick`` profile (one source
of truth); ``PROFILES["ci"]`` and ``PROFILES["full"]`` are overrides on top of them. Each field carries a docstring
(a string literal right under it), which :func:`field_docs` reads for the CLI, the notebooks' parameters cell, the
dashboards and the error messages, and declares its bounds on itself::

    N: Annotated[int, Range(16, 100_000)] = 512
    '''Number of spins.'''
    update: Literal["sync", "async"] = "sync"
    '''Synchronous or asynchronous sweeps.'''
    alphas: Annotated[tuple[float, ...], Range(0, 10, lo_open=True), Each(increasing=True)] = (0.02, 0.04)
    '''Loads.'''

:class:`BaseConfig` checks every declared bound (a ``Range`` or ``Choices`` applies to each element of a tuple,
``Each`` to its length and order; ``Literal`` types are choices); a subclass's ``validate()`` keeps only the rules
that tie several fields together. Every error names the field, the value given and what is allowed
(:mod:`lab.checks`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import textwrap
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar

from lab.checks import Choices, ConfigError, Each, Range, bad_value

if typing.TYPE_CHECKING:
    from lab.budget import Budget

__all__ = ["PROFILE_NAMES", "BaseConfig", "Choices", "ConfigError", "Each", "FieldSpec", "Range", "bad_value",
           "coerce", "describe_fields", "field_docs", "field_specs", "profile_values", "type_name"]

PROFILE_NAMES = ("ci", "quick", "full")


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """Base class for method configs. Subclasses are frozen dataclasses with a docstring under every field."""

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"ci": {}, "quick": {}, "full": {}}

    seed: Annotated[int, Range(0, 2**31 - 1)] = 0
    """Random seed; a run is deterministic for a given seed on a given machine."""

    def __post_init__(self) -> None:
        for spec in field_specs(type(self)).values():
            spec.check(getattr(self, spec.name))
        self.validate()

    def validate(self) -> None:
        """Rules that tie several fields together (each field's own bounds are declared on it)."""

    def run_budget(self) -> Budget:
        """The memory and work the run needs, estimated from the fields (:class:`lab.budget.Budget`), which
        :func:`lab.budget.check_budget` compares with the machine before any work. Every method states its own:
        there is no default (a Config without one is refused by the check and fails tests/test_budget.py). Named
        ``run_budget``, not ``budget``: a method may have a field called budget (ssm_inr's parameter budget)."""
        raise NotImplementedError(f"{type(self).__module__}.{type(self).__qualname__} states no run_budget()")

    # ----------------------------------------------------------------------------------------------------------------
    @classmethod
    def from_profile(cls, profile: str = "quick", **overrides: Any):
        """Build the config of a profile, with field overrides on top.

        Arguments:
            profile: one of ``ci``, ``quick`` (the field defaults) or ``full``.
            overrides: field values; strings are parsed to the field's type (as the CLI passes them).
        """
        if profile not in PROFILE_NAMES:
            raise bad_value("profile", profile, ", ".join(PROFILE_NAMES))
        values = dict(cls.PROFILES.get(profile, {}))
        names = [f.name for f in dataclasses.fields(cls)]
        for key, value in overrides.items():
            if key not in names:
                raise ConfigError(
                    f"{key}={value!r} is not allowed: {_owner(cls)} has no parameter {key!r}; "
                    f"allowed: {', '.join(names)}"
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


def _owner(cls: type) -> str:
    parts = cls.__module__.split(".")
    return parts[-2] if len(parts) >= 2 and parts[-1] == "config" else cls.__name__


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
    """The declared type of field ``name``, without its ``Annotated`` bounds."""
    return _hints(cls)[name][0]


@functools.cache
def _hints(cls: type) -> dict[str, tuple[Any, tuple]]:
    out = {}
    for name, tp in typing.get_type_hints(cls, include_extras=True).items():
        if typing.get_origin(tp) is Annotated:
            base, *meta = typing.get_args(tp)
            out[name] = (base, tuple(meta))
        else:
            out[name] = (tp, ())
    return out


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """A Config field as the CLI, the notebooks and the dashboards see it.

    Attributes:
        name, type, default, doc: the field (``type`` without its bounds; ``default`` is the quick profile's).
        range: the declared :class:`Range` (of each element, for a tuple), or None.
        choices: the allowed values (a ``Literal`` type or a :class:`Choices` marker), or None.
        each: the tuple's :class:`Each` rules, or None.
    """

    name: str
    type: Any
    default: Any
    doc: str
    range: Range | None = None
    choices: tuple | None = None
    each: Each | None = None

    @property
    def is_tuple(self) -> bool:
        return typing.get_origin(self.type) is tuple

    @property
    def element_type(self) -> Any:
        tp = typing.get_args(self.type)[0] if self.is_tuple else self.type
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) is typing.Literal:
            return type(typing.get_args(tp)[0])
        if args and typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            return args[0]
        return tp

    @property
    def optional(self) -> bool:
        return type(None) in typing.get_args(self.type)

    @property
    def bounded(self) -> bool:
        """Whether the field declares what values it allows (bools and strings of a Literal count)."""
        if self.element_type is bool:
            return True
        return self.range is not None or self.choices is not None

    def allowed(self) -> str:
        """What the field allows, in words."""
        parts = []
        if self.choices is not None:
            parts.append("one of " + ", ".join(map(repr, self.choices)))
        elif self.range is not None:
            parts.append(self.range.describe(self.element_type is int))
        if self.is_tuple:
            parts = [("each value " + parts[0]) if parts else "values", (self.each or Each()).describe()]
        if self.optional:
            parts.append("or None")
        return ", ".join(parts)

    def check(self, value: Any) -> None:
        if value is None and self.optional:
            return
        values = value if self.is_tuple else (value,)
        if self.is_tuple:
            if not isinstance(value, tuple):
                raise bad_value(self.name, value, "a tuple: " + self.allowed())
            (self.each or Each()).check(self.name, value)
        integer = self.element_type is int
        for v in values:
            if self.element_type is bool and not isinstance(v, bool):
                raise bad_value(self.name, value, "true or false")
            if self.choices is not None and v not in self.choices:
                raise bad_value(self.name, value, self.allowed())
            if self.range is not None:
                self.range.check(self.name, v, integer=integer, shown=value if self.is_tuple else None)
            elif integer and (isinstance(v, bool) or not isinstance(v, int)):
                raise bad_value(self.name, value, "an integer")


@functools.cache
def field_specs(cls: type) -> dict[str, FieldSpec]:
    """Every field of a Config class with its type, quick default, doc and declared bounds, in order."""
    docs = field_docs(cls)
    out = {}
    for f in dataclasses.fields(cls):
        base, meta = _hints(cls)[f.name]
        rng = next((m for m in meta if isinstance(m, Range)), None)
        each = next((m for m in meta if isinstance(m, Each)), None)
        marker = next((m for m in meta if isinstance(m, Choices)), None)
        inner = typing.get_args(base)[0] if typing.get_origin(base) is tuple else base
        choices = marker.options if marker is not None else None
        if typing.get_origin(inner) is typing.Literal:
            choices = typing.get_args(inner)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out[f.name] = FieldSpec(f.name, base, default, docs.get(f.name, ""), rng, choices, each)
    return out


def coerce(cls: type, name: str, value: Any) -> Any:
    """Parse ``value`` (possibly a CLI string) into the declared type of field ``name``."""
    tp = field_type(cls, name)
    try:
        return _coerce(tp, value)
    except (TypeError, ValueError):
        spec = field_specs(cls)[name]
        allowed = (spec.allowed() or "true or false") if spec.bounded else type_name(tp)
        if spec.is_tuple and spec.bounded:
            allowed = f"{type_name(tp)}; {allowed}"
        raise bad_value(name, value, allowed) from None


def type_name(tp: Any) -> str:
    """A field's type in words (``int``, ``comma-separated list of float``, ``one of 'a', 'b'``)."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        return f"comma-separated list of {args[0].__name__}"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(tp)))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _coerce(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        for option in allowed:
            if value == option or (isinstance(value, str) and str(option) == value):
                return option
        raise ValueError("not one of them")
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


def describe_fields(cls: type) -> list[dict[str, Any]]:
    """Name, type, quick default, doc and allowed values of every field: the CLI's ``lab run SLUG --fields``."""
    return [
        {"name": s.name, "type": type_name(s.type), "default": s.default, "doc": s.doc, "allowed": s.allowed()}
        for s in field_specs(cls).values()
    ]


def profile_values(cls: type, profile: str) -> Mapping[str, Any]:
    return dict(cls.PROFILES.get(profile, {}))
