"""The index's opening table: one row per method with its headline claim, measured, required, control (with its
competence checks), verdict, the badge of all its claims and its run time."""

from __future__ import annotations

import html

from .summary import NotebookRun

__all__ = ["headline_row"]


def headline_row(r: NotebookRun, badge: str) -> str:
    """One row of the index's opening table: the method's headline claim, measured, control, competence, verdict."""
    from lab.claims import VERDICT_CLASS, fmt

    head = r.claims.headline if r.claims is not None else None
    method = f'<td><a href="#{r.slug}">{html.escape(r.slug)}</a></td>'
    timing = f"<td>{r.seconds:.1f} s{' (reused)' if r.reused else ''}</td>"
    if head is None:
        return f"<tr>{method}<td colspan='5'>no headline claim measured</td><td>{badge}</td>{timing}</tr>"
    measured = fmt(head.measured) + (f" {head.unit}" if head.unit else "")
    if head.per_seed and head.seeds_holding is not None:
        measured += f" ({head.seeds_holding}/{len(head.per_seed)} seeds)"
    if head.control_measured is not None:
        control = f"{fmt(head.control_measured)} ({'passes' if head.control_passed else 'fails'})"
        control += f"<br><small>{html.escape(head.control_label)}</small>" if head.control_label else ""
    else:
        control = f"none<br><small>{html.escape(head.control_why)}</small>"
    for c in head.competence:
        control += (f'<br><small class="{"pass" if c.passed else "fail"}">{html.escape(c.label)}: '
                    f"{html.escape(fmt(c.measured))} (needs {html.escape(c.op)} {html.escape(fmt(c.threshold))})"
                    f"</small>")
    if head.control_analytic and not head.competence:
        control += f"<br><small>analytic: {html.escape(head.control_analytic)}</small>"
    return (
        f"<tr>{method}<td><b>{html.escape(head.name)}</b><br><small>{html.escape(head.statement)}</small></td>"
        f"<td>{html.escape(measured)}</td><td>{html.escape(head.op)} {html.escape(fmt(head.threshold))}</td>"
        f"<td>{control}</td><td class='{VERDICT_CLASS[head.verdict]}'>{html.escape(head.verdict)}</td>"
        f"<td>{badge}</td>{timing}</tr>"
    )
