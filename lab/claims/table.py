"""The claims table: evaluated claims as text, HTML (notebooks, the report) or a pandas DataFrame."""

from __future__ import annotations

import html
import shutil
import textwrap
from dataclasses import dataclass, field

from lab.claims.claim import ClaimResult, fmt


def _measured_text(r: ClaimResult) -> str:
    text = fmt(r.measured)
    if r.per_seed:
        lo, hi = r.spread  # type: ignore[misc]
        text += f" [{fmt(lo)}, {fmt(hi)}]"
        n = len(r.per_seed)
        text += f" {r.seeds_holding}/{n} {r.repeats}" if r.seeds_holding is not None else f" ({n})"
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


#: the text table's width when the output is not a terminal (and ``$COLUMNS`` unset)
TEXT_WIDTH = 118
#: the fewest characters of a description per line, however narrow the terminal
MIN_TEXT = 30

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

    def to_text(self, width: int | None = None) -> str:
        """The table as text ``width`` characters wide (default: the terminal's, which honours ``$COLUMNS``; 118
        when not a terminal); descriptions wrap at word boundaries, never mid-word."""
        if width is None:
            width = shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
        rows = [(f"{r.name}*" if r.headline else r.name, fmt(r.measured), _control_text(r),
                 "-" if r.verdict == "reported" else f"{r.op} {fmt(r.threshold)}", r.verdict) for r in self.results]
        head = ("claim", "measured", "control", "required", "verdict")
        widths = [max(len(row[i]) for row in [head, *rows]) + (i == 0) for i in range(5)]
        numbers_w = sum(widths[1:4]) + 6 + widths[4]
        # a name column when the rows fit the width; else each name on its own line, its numbers under it
        stacked = widths[0] + 2 + numbers_w > width
        indent = " " * (4 if stacked else widths[0] + 2)
        wrap_w = max(width, len(indent) + MIN_TEXT)
        lines: list[str] = []

        def block(text: str, lead: str = "") -> None:
            lines.extend(textwrap.wrap(lead + text, wrap_w, initial_indent=indent,
                                       subsequent_indent=indent + " " * len(lead), break_long_words=False,
                                       break_on_hyphens=False) or [indent + lead])

        def numbers(row: tuple[str, ...]) -> str:
            return "  ".join(f"{v:>{w}}" for v, w in zip(row[1:4], widths[1:4])) + f"  {row[4]}"

        if stacked:
            lines += [head[0], "  " + numbers(head), "-" * min(2 + numbers_w, wrap_w)]
        else:
            lines += [f"{head[0]:<{widths[0]}}  {numbers(head)}", "-" * (widths[0] + 2 + numbers_w)]
        for r, row in zip(self.results, rows):
            lines += [row[0], "  " + numbers(row)] if stacked else [f"{row[0]:<{widths[0]}}  {numbers(row)}"]
            block(r.statement)
            if r.per_seed:
                block(_measured_text(r), f"{r.repeats}: ")
            if r.control_label:
                block(r.control_label, "control: ")
            elif r.control_why:
                block(r.control_why, "no control: ")
            for c in r.competence:
                block(c.text(), "competence: ")
            if r.control_analytic and not r.competence:
                block(r.control_analytic, "analytic control: ")
            if r.detail:
                block(f"({r.detail})")
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
