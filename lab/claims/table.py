"""The claims table: evaluated claims as text, HTML (notebooks, the report) or a pandas DataFrame."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from lab.claims.claim import ClaimResult, fmt


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
