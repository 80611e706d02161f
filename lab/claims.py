"""Claims: what a paper says, checked against a results Dataset alone.

A :class:`Claim` measures one number from the Dataset (``measure``) and compares it with a threshold whose origin is
stated (``threshold_source``). Because the check reads only the Dataset, a saved NetCDF can be re-checked later
without re-running: ``lab.check(lab.load(path))``.

A claim must be able to fail: ``measure`` compares the method against something that can disagree (a baseline, a
theory curve, an analytic solution, an ablation). When a claim does not reproduce at our scale, the table says so with
the measured value; thresholds are never tuned to make it pass.
"""

from __future__ import annotations

import html
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import xarray as xr

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper.

    Arguments:
        name: short identifier, unique within a method.
        statement: what the paper says, in words.
        source: where the paper says it (figure, table, section, number).
        measure: Dataset -> the measured value, or (value, detail) where detail explains it in a few words.
        op: how the measured value must compare with ``threshold`` (``<``, ``<=``, ``>``, ``>=``).
        threshold: the bound.
        threshold_source: why this bound: the paper's number, a theory value, or a stated convention.
        unit: unit of the measured value, for the table.
    """

    name: str
    statement: str
    source: str
    measure: Callable[[xr.Dataset], Any]
    op: str
    threshold: float
    threshold_source: str
    unit: str = ""

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"op={self.op!r} is not allowed; allowed: {', '.join(_OPS)}")

    def evaluate(self, ds: xr.Dataset) -> ClaimResult:
        detail = ""
        try:
            out = self.measure(ds)
            if isinstance(out, tuple):
                value, detail = out
            else:
                value = out
            value = float(value)
        except Exception as exc:  # a claim that cannot be measured fails, with the reason
            value, detail = math.nan, f"could not be measured: {type(exc).__name__}: {exc}"
        passed = bool(math.isfinite(value) and _OPS[self.op](value, self.threshold))
        return ClaimResult(
            name=self.name,
            statement=self.statement,
            source=self.source,
            measured=value,
            op=self.op,
            threshold=float(self.threshold),
            threshold_source=self.threshold_source,
            unit=self.unit,
            passed=passed,
            detail=str(detail),
        )


@dataclass(frozen=True)
class ClaimResult:
    name: str
    statement: str
    source: str
    measured: float
    op: str
    threshold: float
    threshold_source: str
    unit: str
    passed: bool
    detail: str = ""

    @property
    def status(self) -> str:
        return "pass" if self.passed else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"status": self.status}


def evaluate(claims: Sequence[Claim], ds: xr.Dataset) -> list[ClaimResult]:
    return [c.evaluate(ds) for c in claims]


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


@dataclass
class ClaimsTable:
    """The evaluated claims of one run, printable as text, HTML or a pandas DataFrame."""

    results: list[ClaimResult] = field(default_factory=list)

    @property
    def all_passed(self) -> bool:
        return all(r.passed for r in self.results)

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def to_frame(self):
        import pandas as pd

        rows = [
            {
                "claim": r.name,
                "statement": r.statement,
                "source": r.source,
                "measured": r.measured,
                "unit": r.unit,
                "required": f"{r.op} {_fmt(r.threshold)}",
                "threshold source": r.threshold_source,
                "status": r.status,
                "detail": r.detail,
            }
            for r in self.results
        ]
        return pd.DataFrame(rows)

    def to_text(self, width: int = 110) -> str:
        lines = []
        name_w = max([len(r.name) for r in self.results] + [5])
        lines.append(f"{'claim':<{name_w}}  {'measured':>12}  {'required':>12}  status")
        lines.append("-" * (name_w + 36))
        for r in self.results:
            req = f"{r.op} {_fmt(r.threshold)}"
            lines.append(f"{r.name:<{name_w}}  {_fmt(r.measured):>12}  {req:>12}  {r.status}")
            lines.append(f"{'':<{name_w}}  {r.statement[: width - name_w - 2]}")
            if r.detail:
                lines.append(f"{'':<{name_w}}  ({r.detail[: width - name_w - 4]})")
        n_pass = sum(r.passed for r in self.results)
        lines.append(f"{n_pass}/{len(self.results)} claims hold")
        return "\n".join(lines)

    def to_html(self) -> str:
        rows = []
        for r in self.results:
            cls = "pass" if r.passed else "fail"
            rows.append(
                "<tr>"
                f"<td><b>{html.escape(r.name)}</b><br><small>{html.escape(r.statement)}</small></td>"
                f"<td>{html.escape(r.source)}</td>"
                f"<td>{html.escape(_fmt(r.measured))} {html.escape(r.unit)}"
                + (f"<br><small>{html.escape(r.detail)}</small>" if r.detail else "")
                + "</td>"
                f"<td>{html.escape(r.op)} {html.escape(_fmt(r.threshold))}"
                f"<br><small>{html.escape(r.threshold_source)}</small></td>"
                f'<td class="{cls}">{r.status}</td>'
                "</tr>"
            )
        return (
            '<table class="claims"><thead><tr><th>claim</th><th>paper</th><th>measured</th>'
            "<th>required (source)</th><th>status</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )

    def _repr_html_(self) -> str:
        style = (
            "<style>table.claims td.pass{color:#176f2c;font-weight:bold}"
            "table.claims td.fail{color:#b00020;font-weight:bold}"
            "table.claims td,table.claims th{text-align:left;vertical-align:top;padding:4px 8px}</style>"
        )
        return style + self.to_html()

    def __repr__(self) -> str:
        return self.to_text()
