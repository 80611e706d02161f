"""What the index says of each method's claims: the opening table's row (the paper's central claim in a few words,
its verdict, measured against required, the control) and the method's full claims table, laid out to fit the page
(fixed columns; every verdict in its own column, never cut)."""

from __future__ import annotations

import html
import re

from lab.claims import ClaimResult, ClaimsTable

from .summary import NotebookRun

__all__ = ["claims_table", "headline_row", "lead", "measured_text", "tally"]

#: the longest lead of a claim's statement the opening table shows (the full statement is in the method's section)
LEAD_CHARS = 150


def _e(text) -> str:
    return html.escape(str(text))


def lead(statement: str, limit: int = LEAD_CHARS) -> str:
    """The statement less its parentheses, up to its first colon or semicolon, at most ``limit`` characters (cut at
    a word, with an ellipsis, when longer)."""
    plain = re.sub(r"\s*\([^()]*\)", "", statement)
    head = re.split(r":\s|;\s", plain, maxsplit=1)[0].strip().rstrip(",.")
    if len(head) <= limit:
        return head
    cut = head[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " …"


def measured_text(r: ClaimResult) -> str:
    """The measured value with its unit, and over seeds its spread and how many seeds hold."""
    from lab.claims import fmt

    text = fmt(r.measured) + (f" {r.unit}" if r.unit else "")
    if r.per_seed:
        lo, hi = r.spread  # type: ignore[misc]
        text += f", seeds [{fmt(lo)}, {fmt(hi)}]"
        if r.seeds_holding is not None:
            text += f", {r.seeds_holding}/{len(r.per_seed)} hold"
    return text


def _required(r: ClaimResult) -> str:
    from lab.claims import fmt

    return "shown, no verdict" if r.verdict == "reported" else f"{r.op} {fmt(r.threshold)}"


def _control_short(r: ClaimResult) -> str:
    """The control in a few words: its value and whether it passes (a control that passes is a claim that does not
    discriminate), or why there is none."""
    from lab.claims import fmt

    if r.control_measured is not None:
        text = f"{fmt(r.control_measured)} ({'passes' if r.control_passed else 'fails'})"
        return text + (f" <small>{_e(r.control_label)}</small>" if r.control_label else "")
    if r.control_analytic:
        return f"analytic <small>{_e(r.control_analytic)}</small>"
    return f"none <small>{_e(r.control_why)}</small>" if r.control_why else "-"


def tally(claims: ClaimsTable | None) -> str:
    """The verdicts of a method's claims in words: "6 claims: 3 hold, 1 fails, 2 reported"."""
    if claims is None or not len(claims):
        return "no claims evaluated"
    counts: dict[str, int] = {}
    for r in claims:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    order = ("holds", "fails", "control not competent", "does not discriminate", "reported")
    words = {"holds": ("holds", "hold"), "fails": ("fails", "fail")}
    parts = []
    for v in order:
        n = counts.get(v, 0)
        if n:
            singular, plural = words.get(v, (v, v))
            parts.append(f"{n} {singular if n == 1 else plural}")
    return f"{len(claims)} claim{'s' if len(claims) > 1 else ''}: " + ", ".join(parts)


def _glance(r: ClaimResult) -> tuple[str, str, str]:
    """Measured, required and control of a claim in a few characters each (the details are in the section)."""
    from lab.claims import fmt

    measured = fmt(r.measured) + (f" {r.unit}" if r.unit else "")
    if r.per_seed and r.seeds_holding is not None:
        measured += f" ({r.seeds_holding}/{len(r.per_seed)} {r.repeats})"
    if r.control_measured is not None:
        control = f"{fmt(r.control_measured)} ({'passes' if r.control_passed else 'fails'})"
    else:
        control = "analytic" if r.control_analytic else "none"
    return measured, _required(r), control


_EMPTY = "<td></td>" * 3


def headline_row(r: NotebookRun) -> str:
    """One row of the opening table: the method, its paper's central claim in a few words, the verdict, measured
    against required, and the control (its label as the cell's tooltip)."""
    from lab.claims import VERDICT_CLASS

    method = (f'<td class="method"><a href="#{_e(r.slug)}">{_e(r.slug)}</a><br>'
              f"<small>{_e(r.title)}</small></td>")
    head = r.claims.headline if r.claims is not None else None
    if not r.executed:
        last = (r.error or "").strip().splitlines()[-1:] or [""]
        return (f"<tr>{method}<td>the notebook failed: <small>{_e(last[0][:300])}</small></td>"
                f"<td class='verdict fail'>notebook failed</td>{_EMPTY}</tr>")
    if head is None:
        return f"<tr>{method}<td>no headline claim marked</td><td class='verdict'>-</td>{_EMPTY}</tr>"
    measured, required, control = _glance(head)
    why = head.control_label or head.control_analytic or head.control_why
    return (
        f"<tr>{method}<td title=\"{_e(head.statement)}\">{_e(lead(head.statement))}</td>"
        f"<td class='verdict {VERDICT_CLASS[head.verdict]}'>{_e(head.verdict)}</td>"
        f"<td>{_e(measured)}</td><td>{_e(required)}</td><td title=\"{_e(why)}\">{_e(control)}</td></tr>"
    )


def _control_cell(r: ClaimResult) -> str:
    from lab.claims import fmt

    cell = _control_short(r)
    if r.control_detail:
        cell += f"<br><small>{_e(r.control_detail)}</small>"
    for c in r.competence:
        mark = "competent" if c.passed else "NOT competent"
        cell += (f'<br><small class="{"pass" if c.passed else "fail"}">competence, {_e(c.label)}: '
                 f"{_e(fmt(c.measured))} {_e(c.unit)} (needs {_e(c.op)} {_e(fmt(c.threshold))}): {mark}</small>")
    return cell


def claims_table(claims: ClaimsTable) -> str:
    """A method's claims as the index shows them: fixed columns that fit the page, the verdict last and whole."""
    from lab.claims import VERDICT_CLASS

    rows = []
    for r in claims:
        mark = " <small>(headline)</small>" if r.headline else ""
        detail = f"<br><small>{_e(r.detail)}</small>" if r.detail else ""
        rows.append(
            f"<tr><td><b>{_e(r.name)}</b>{mark}<br>{_e(r.statement)}<br><small>source: {_e(r.source)}</small></td>"
            f"<td>{_e(measured_text(r))}{detail}</td>"
            f"<td>{_e(_required(r))}<br><small>{_e(r.threshold_source)}</small></td>"
            f"<td>{_control_cell(r)}</td>"
            f"<td class='verdict {VERDICT_CLASS[r.verdict]}'>{_e(r.verdict)}</td></tr>"
        )
    return ('<table class="claims"><colgroup><col class="c-claim"><col class="c-measured"><col class="c-required">'
            '<col class="c-control"><col class="c-verdict"></colgroup><thead><tr><th>claim</th><th>measured</th>'
            "<th>required</th><th>control</th><th>verdict</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")
