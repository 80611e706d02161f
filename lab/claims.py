"""Claims: what a paper says, checked against a results Dataset alone, each with its control.

A :class:`Claim` measures one number from the Dataset (``measure``) and compares it with a threshold whose origin is
stated (``threshold_source``). Because the check reads only the Dataset, a saved NetCDF can be re-checked later
without re-running: ``lab.check(lab.load(path))``.

A claim proves itself with a **control**: ``control`` is the same measurement on a variant of the method that lacks
the claimed property (n = 2 for a dense-memory claim about n >= 3; the network without plasticity; a K-blind
model; random selection for a pruning score), computed in the same run and stored in the same Dataset. The verdict:

==========================  ====================================================================================
``holds``                   the measurement passes, every competence check passes and the control fails (or the
                            claim states why it has none)
``fails``                   the measurement does not pass
``control not competent``   the measurement passes, but a learned control (or a learned baseline the claim compares
                            against) fails its own competence check: it never learned what it was trained for, so
                            its failing proves nothing
``does not discriminate``   the measurement passes, but so does the control: the check cannot tell the effect
``reported``                a report row (``report=True``): a comparison the paper reports either way, no verdict
==========================  ====================================================================================

**Competent controls.** A control that never learned its task proves nothing (a tool-less model at 0% inside its
training range, a short-context baseline that cannot see the clue by construction). Every claim with a control says
which kind it is: a learned control, and every learned baseline a claim compares against, carries one or more
:class:`Competence` checks (the same model on what it was trained for, measured in the same run, with a bar and the
bar's source); an analytic control (n = 2, W = 0, random selection, an untrained reference) says so in
``control_analytic`` instead. The contract test checks that every control is one or the other.

**The headline.** Each method marks exactly one claim ``headline=True``: the paper's central result at this scale,
always a verdict, never a report row. The report index opens with every method's headline.

Ties never pass: a value equal to the threshold fails whatever the operator. A measurement that cannot be made, or
that is NaN, fails. A claim whose margin is within seed noise measures every seed and returns a
:class:`Measurement` with its ``per_seed`` values; the table shows the statistic (``value``), the spread and on how
many seeds the claim holds.
"""

from __future__ import annotations

import html
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

VERDICTS = ("holds", "fails", "control not competent", "does not discriminate", "reported")


@dataclass(frozen=True)
class Measurement:
    """A measured value with what explains it.

    Arguments:
        value: the statistic compared with the threshold (a mean, a worst seed, a bound...).
        detail: a few words that explain the value.
        per_seed: the value on each seed, when the claim is measured over seeds (the table shows their spread and
            on how many seeds the claim holds).
    """

    value: float
    detail: str = ""
    per_seed: tuple[float, ...] | None = None


def over_seeds(values: Any, statistic: str = "mean", detail: str = "") -> Measurement:
    """A :class:`Measurement` of per-seed ``values`` (NaN seeds kept: they make ``mean`` and ``worst`` NaN).

    Arguments:
        values: one value per seed.
        statistic: ``mean``, ``min`` or ``max`` (say the worst seed in the claim's statement).
    """
    arr = np.asarray(values, dtype=float).ravel()
    stat = {"mean": np.mean, "min": np.min, "max": np.max}[statistic]
    value = float(stat(arr)) if arr.size else math.nan
    return Measurement(value, detail, tuple(float(v) for v in arr))


#: the unit of a claim measured as the share of seeds on which something holds (:func:`seed_share`)
SEED_SHARE_UNIT = "of seeds"

#: the bar of a seed-majority claim: a share of seeds above 3/4 (ties never pass), so 4 of 5 seeds, or all of 3
#: or 4; a coin passes "more than half the seeds" too often (a batch-order control won 2 of 3)
MIN_SEED_SHARE = 0.75


def seed_share(wins: Any, detail: str = "") -> Measurement:
    """The share of seeds on which a claim holds, from per-seed 0/1 ``wins`` (unit :data:`SEED_SHARE_UNIT`).

    A claim over this measure requires ``> MIN_SEED_SHARE`` (4 of 5 seeds) or more; the contract test checks it.
    """
    return over_seeds(np.asarray(wins, dtype=float), "mean", detail)


def _passes(value: float, op: str, threshold: float) -> bool:
    """Whether ``value`` meets ``op threshold``; NaN and ties never do."""
    return bool(math.isfinite(value) and value != threshold and _OPS[op](value, threshold))


def _measure(fn: Callable[[xr.Dataset], Any], ds: xr.Dataset) -> Measurement:
    try:
        out = fn(ds)
        if isinstance(out, Measurement):
            return Measurement(float(out.value), str(out.detail), out.per_seed)
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


def _measured_text(r: ClaimResult) -> str:
    text = fmt(r.measured)
    if r.per_seed:
        lo, hi = r.spread  # type: ignore[misc]
        text += f" [{fmt(lo)}, {fmt(hi)}]"
        n = len(r.per_seed)
        text += f" {r.seeds_holding}/{n} seeds" if r.seeds_holding is not None else f" ({n})"
    return text


def _control_text(r: ClaimResult) -> str:
    if r.control_measured is None:
        return "none" if r.control_why else "-"
    return fmt(r.control_measured) + (" (passes)" if r.control_passed else " (fails)")


def competence_text(r: ClaimResult) -> str:
    """The control's competence in a few words: each check, or why the control needs none."""
    if r.competence:
        return "; ".join(c.text() for c in r.competence)
    if r.control_analytic:
        return f"analytic control: {r.control_analytic}"
    return ""


#: the CSS class of each verdict in the HTML tables
VERDICT_CLASS = {"holds": "pass", "fails": "fail", "control not competent": "fail", "does not discriminate": "fail",
                 "reported": "report"}


@dataclass
class ClaimsTable:
    """The evaluated claims of one run, printable as text, HTML or a pandas DataFrame."""

    results: list[ClaimResult] = field(default_factory=list)

    @property
    def all_passed(self) -> bool:
        """Every claim holds (report rows aside)."""
        return all(r.ok for r in self.results)

    @property
    def n_holding(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def n_claims(self) -> int:
        """Claims with a verdict (report rows excluded)."""
        return sum(r.verdict != "reported" for r in self.results)

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def headline(self) -> ClaimResult | None:
        """The method's headline claim (``headline=True``), or None when it marks none."""
        return next((r for r in self.results if r.headline), None)

    def __getitem__(self, name: str) -> ClaimResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no claim {name!r}; claims: {', '.join(r.name for r in self.results)}")

    def to_frame(self):
        import pandas as pd

        rows = [
            {
                "claim": r.name,
                "statement": r.statement,
                "source": r.source,
                "measured": r.measured,
                "spread": r.spread,
                "seeds holding": (f"{r.seeds_holding}/{len(r.per_seed)}" if r.seeds_holding is not None else ""),
                "control": r.control_measured,
                "control variant": r.control_label or r.control_why,
                "competence": competence_text(r),
                "headline": r.headline,
                "unit": r.unit,
                "required": f"{r.op} {fmt(r.threshold)}",
                "threshold source": r.threshold_source,
                "verdict": r.verdict,
                "detail": r.detail,
            }
            for r in self.results
        ]
        return pd.DataFrame(rows)

    def summary(self) -> str:
        return f"{self.n_holding}/{self.n_claims} claims hold"

    def to_text(self, width: int = 118) -> str:
        lines = []
        name_w = max([len(r.name) + 1 for r in self.results] + [5])
        lines.append(f"{'claim':<{name_w}}  {'measured':>12}  {'control':>16}  {'required':>10}  verdict")
        lines.append("-" * (name_w + 64))
        for r in self.results:
            req = "-" if r.verdict == "reported" else f"{r.op} {fmt(r.threshold)}"
            name = f"{r.name}*" if r.headline else r.name
            lines.append(f"{name:<{name_w}}  {fmt(r.measured):>12}  {_control_text(r):>16}  {req:>10}  "
                         f"{r.verdict}")
            lines.append(f"{'':<{name_w}}  {r.statement[: width - name_w - 2]}")
            if r.per_seed:
                lines.append(f"{'':<{name_w}}  seeds: {_measured_text(r)}")
            if r.control_label or r.control_why:
                what = f"control: {r.control_label}" if r.control_label else f"no control: {r.control_why}"
                lines.append(f"{'':<{name_w}}  {what[: width - name_w - 2]}")
            for c in r.competence:
                lines.append(f"{'':<{name_w}}  competence: {c.text()[: width - name_w - 14]}")
            if r.control_analytic and not r.competence:
                lines.append(f"{'':<{name_w}}  analytic control: {r.control_analytic[: width - name_w - 20]}")
            if r.detail:
                lines.append(f"{'':<{name_w}}  ({r.detail[: width - name_w - 4]})")
        lines.append(self.summary() + ("  (* the headline claim)" if self.headline else ""))
        return "\n".join(lines)

    def to_html(self) -> str:
        rows = []
        for r in self.results:
            cls = VERDICT_CLASS[r.verdict]
            control = html.escape(_control_text(r))
            if r.control_label:
                control += f"<br><small>{html.escape(r.control_label)}</small>"
            elif r.control_why:
                control += f"<br><small>{html.escape(r.control_why)}</small>"
            if r.control_detail:
                control += f"<br><small>{html.escape(r.control_detail)}</small>"
            for c in r.competence:
                mark = "competent" if c.passed else "NOT competent"
                control += (f'<br><small class="{"pass" if c.passed else "fail"}">competence: '
                            f"{html.escape(c.label)}: {html.escape(fmt(c.measured))} {html.escape(c.unit)} "
                            f"(needs {html.escape(c.op)} {html.escape(fmt(c.threshold))}, "
                            f"{html.escape(c.threshold_source)}): {mark}</small>")
                if c.detail:
                    control += f"<br><small>{html.escape(c.detail)}</small>"
            if r.control_analytic and not r.competence:
                control += f"<br><small>analytic control: {html.escape(r.control_analytic)}</small>"
            required = "-" if r.verdict == "reported" else f"{html.escape(r.op)} {html.escape(fmt(r.threshold))}"
            rows.append(
                "<tr>"
                f"<td><b>{html.escape(r.name)}</b>" + (" <small>(headline)</small>" if r.headline else "")
                + f"<br><small>{html.escape(r.statement)}</small></td>"
                f"<td>{html.escape(r.source)}</td>"
                f"<td>{html.escape(_measured_text(r))} {html.escape(r.unit)}"
                + (f"<br><small>{html.escape(r.detail)}</small>" if r.detail else "")
                + "</td>"
                f"<td>{control}</td>"
                f"<td>{required}<br><small>{html.escape(r.threshold_source)}</small></td>"
                f'<td class="{cls}">{html.escape(r.verdict)}</td>'
                "</tr>"
            )
        return (
            '<table class="claims"><thead><tr><th>claim</th><th>paper</th><th>measured</th><th>control</th>'
            "<th>required (source)</th><th>verdict</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )

    def _repr_html_(self) -> str:
        style = (
            "<style>table.claims td.pass{color:#176f2c;font-weight:bold}"
            "table.claims td.fail{color:#b00020;font-weight:bold}table.claims td.report{color:#555}"
            "table.claims small.pass{color:#176f2c}table.claims small.fail{color:#b00020}"
            "table.claims td,table.claims th{text-align:left !important;vertical-align:top;padding:4px 8px}</style>"
        )
        return style + self.to_html()

    def __repr__(self) -> str:
        return self.to_text()
