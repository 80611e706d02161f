"""A claim and its competence checks: the measurement, the control, the verdict (see :mod:`lab.claims`)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import xarray as xr

from lab.claims.measures import Measurement

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

VERDICTS = ("holds", "fails", "control not competent", "does not discriminate", "reported")

def _passes(value: float, op: str, threshold: float) -> bool:
    """Whether ``value`` meets ``op threshold``; NaN and ties never do."""
    return bool(math.isfinite(value) and value != threshold and _OPS[op](value, threshold))


def _measure(fn: Callable[[xr.Dataset], Any], ds: xr.Dataset) -> Measurement:
    try:
        out = fn(ds)
        if isinstance(out, Measurement):
            return Measurement(float(out.value), str(out.detail), out.per_seed, out.repeats)
        if isinstance(out, tuple):
            value, detail = out
            return Measurement(float(value), str(detail))
        return Measurement(float(out))
    except Exception as exc:  # a claim that cannot be measured fails, with the reason
        return Measurement(math.nan, f"could not be measured: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class Competence:
    """A competence check: a learned control (or baseline) on the task it was trained for, in the same run.

    Arguments:
        label: which model and what it is checked on, in a few words (e.g. "tool-less model, exact accuracy at the
            training lengths").
        measure: Dataset -> the measured value, ``(value, detail)`` or a :class:`Measurement`.
        op: how the value must compare with ``threshold`` (``<``, ``<=``, ``>``, ``>=``; ties never pass).
        threshold: the bar.
        threshold_source: why this bar: the paper's number for that model, the task's chance level, a stated
            convention.
        unit: unit of the measured value.
    """

    label: str
    measure: Callable[[xr.Dataset], Any]
    op: str
    threshold: float
    threshold_source: str
    unit: str = ""

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"Competence op={self.op!r} is not allowed; allowed: {', '.join(_OPS)}")
        if not self.label or not self.threshold_source:
            raise ValueError(f"Competence {self.label!r}: label and threshold_source must be given")

    def evaluate(self, ds: xr.Dataset) -> CompetenceResult:
        m = _measure(self.measure, ds)
        passed = _passes(m.value, self.op, self.threshold)
        return CompetenceResult(self.label, m.value, self.op, float(self.threshold), self.threshold_source,
                                self.unit, m.detail, passed)


@dataclass(frozen=True)
class CompetenceResult:
    """One evaluated competence check."""

    label: str
    measured: float
    op: str
    threshold: float
    threshold_source: str
    unit: str = ""
    detail: str = ""
    passed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return (f"{self.label}: {fmt(self.measured)}{unit} (needs {self.op} {fmt(self.threshold)}: "
                f"{'competent' if self.passed else 'NOT competent'})")


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper, with its control.

    Arguments:
        name: short identifier, unique within a method.
        statement: what the paper says, in words.
        source: where the paper says it (figure, table, section, number).
        measure: Dataset -> the measured value, ``(value, detail)`` or a :class:`Measurement`.
        op: how the measured value must compare with ``threshold`` (``<``, ``<=``, ``>``, ``>=``; ties never pass).
        threshold: the bound.
        threshold_source: why this bound: the paper's number, a theory value, or a stated convention.
        unit: unit of the measured value, for the table.
        control: the same measurement on a variant without the claimed property (same return types as
            ``measure``); the claim holds only when the control fails.
        control_label: what the control variant is, in a few words (shown in the table).
        no_control: when ``control`` is None, why no control makes sense (e.g. agreement with an analytic
            solution). Every claim has a control or states why not (the contract test checks it).
        report: a comparison the paper reports either way: shown with its value, no verdict.
        competence: the competence checks of the learned control and of every learned baseline the claim compares
            against (:class:`Competence`, one or several); when one fails, the verdict is ``control not competent``.
        control_analytic: when the control has no learned part (n = 2, W = 0, random selection, an untrained
            network), why it needs no competence check. A claim with a control gives ``competence`` or this.
        headline: the method's central claim at this scale (exactly one per method; never a report row).
    """

    name: str
    statement: str
    source: str
    measure: Callable[[xr.Dataset], Any]
    op: str
    threshold: float
    threshold_source: str
    unit: str = ""
    control: Callable[[xr.Dataset], Any] | None = None
    control_label: str = ""
    no_control: str = ""
    report: bool = False
    competence: Competence | tuple[Competence, ...] = ()
    control_analytic: str = ""
    headline: bool = False

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"op={self.op!r} is not allowed; allowed: {', '.join(_OPS)}")
        if isinstance(self.competence, Competence):
            object.__setattr__(self, "competence", (self.competence,))
        else:
            object.__setattr__(self, "competence", tuple(self.competence))
        if self.headline and self.report:
            raise ValueError(f"claim {self.name!r}: a headline claim is a verdict, never a report row")

    def passes(self, value: float) -> bool:
        """Whether ``value`` meets the threshold (NaN and ties never do)."""
        return _passes(value, self.op, self.threshold)

    def evaluate(self, ds: xr.Dataset) -> ClaimResult:
        m = _measure(self.measure, ds)
        passed = self.passes(m.value)
        if self.control is not None:
            c = _measure(self.control, ds)
            control_measured, control_passed, control_detail = c.value, self.passes(c.value), c.detail
        else:
            control_measured, control_passed, control_detail = None, None, ""
        competence = tuple(check.evaluate(ds) for check in self.competence)  # type: ignore[union-attr]
        if self.report:
            verdict = "reported"
        elif not passed:
            verdict = "fails"
        elif not all(c.passed for c in competence):
            verdict = "control not competent"
        elif control_passed:
            verdict = "does not discriminate"
        elif control_passed is False and control_measured is not None and not math.isfinite(control_measured):
            verdict = "does not discriminate"  # a control that could not be measured proves nothing
        else:
            verdict = "holds"
        seeds_holding = None
        if m.per_seed is not None and not self.report:  # a report row has no verdict to hold on a seed
            seeds_holding = sum(self.passes(v) for v in m.per_seed)
        return ClaimResult(
            name=self.name,
            statement=self.statement,
            source=self.source,
            measured=m.value,
            op=self.op,
            threshold=float(self.threshold),
            threshold_source=self.threshold_source,
            unit=self.unit,
            detail=m.detail,
            control_measured=control_measured,
            control_passed=control_passed,
            control_why=self.no_control if self.control is None else "",
            control_label=self.control_label,
            control_detail=control_detail,
            verdict=verdict,
            per_seed=m.per_seed,
            seeds_holding=seeds_holding,
            repeats=m.repeats,
            competence=competence,
            control_analytic=self.control_analytic,
            headline=self.headline,
        )


@dataclass(frozen=True)
class ClaimResult:
    """One evaluated claim. ``passed`` is True only when the verdict is ``holds``."""

    name: str
    statement: str
    source: str
    measured: float
    op: str
    threshold: float
    threshold_source: str
    unit: str
    detail: str = ""
    control_measured: float | None = None
    control_passed: bool | None = None
    control_why: str = ""
    control_label: str = ""
    control_detail: str = ""
    verdict: str = "fails"
    per_seed: tuple[float, ...] | None = None
    seeds_holding: int | None = None
    competence: tuple[CompetenceResult, ...] = ()
    control_analytic: str = ""
    headline: bool = False
    repeats: str = "seeds"

    @property
    def competent(self) -> bool | None:
        """Whether every competence check passed (None when the claim has none)."""
        if not self.competence:
            return None
        return all(c.passed for c in self.competence)

    @property
    def passed(self) -> bool:
        return self.verdict == "holds"

    @property
    def ok(self) -> bool:
        """Holds, or is a report row (what ``lab run``'s exit code and the report's badge count)."""
        return self.verdict in ("holds", "reported")

    @property
    def status(self) -> str:
        return {"holds": "holds", "fails": "FAILS", "control not competent": "CONTROL NOT COMPETENT",
                "does not discriminate": "NO CONTROL FAIL", "reported": "reported"}[self.verdict]

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) over seeds, when measured over seeds."""
        if not self.per_seed:
            return None
        return (min(self.per_seed), max(self.per_seed))

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["per_seed"] = list(self.per_seed) if self.per_seed is not None else None
        out["competence"] = [c.to_dict() for c in self.competence]
        return out | {"status": self.status, "passed": self.passed, "competent": self.competent}


def evaluate(claims: Sequence[Claim], ds: xr.Dataset) -> list[ClaimResult]:
    return [c.evaluate(ds) for c in claims]


def fmt(x: float | None) -> str:
    """A number as the claims tables print it."""
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"
