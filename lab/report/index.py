"""The report's index page: one line per method first (the paper's central claim in a few words, its verdict,
measured against required, the control), then one section per method: its headline claim beside its headline
figure (a PNG embedded in the page), a link to its notebook's HTML, and its full claims table folded under the
headline (``<details>``), laid out to fit a 1300 px window."""

from __future__ import annotations

import base64
import datetime as _dt
import html

from .headlines import claims_table, headline_row, measured_text, tally
from .summary import NotebookRun, ReportSummary

__all__ = ["render_index"]

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1240px;
padding:0 1rem;color:#222;line-height:1.35}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2rem}h2.lead{font-size:1.15rem;margin:1.2rem 0 .4rem}
small{color:#555}small.pass{color:#176f2c}small.fail{color:#b00020}
td.pass{color:#176f2c;font-weight:bold}td.fail{color:#b00020;font-weight:bold}td.report{color:#555}
table{border-collapse:collapse;width:100%;table-layout:fixed;font-size:.9rem}
td,th{border-top:1px solid #e4e4e4;text-align:left;vertical-align:top;padding:5px 7px;overflow-wrap:anywhere}
th{background:#f6f6f6}
table.overview col.c-method{width:21%}table.overview col.c-claim{width:39%}table.overview col.c-verdict{width:11%}
table.overview col.c-measured{width:12%}table.overview col.c-required{width:7%}table.overview col.c-control{width:10%}
table.overview td.method a{font-weight:600}
td.verdict{overflow-wrap:normal;word-break:normal}
table.claims col.c-claim{width:36%}table.claims col.c-measured{width:15%}table.claims col.c-required{width:17%}
table.claims col.c-control{width:20%}table.claims col.c-verdict{width:12%}
section{border:1px solid #ddd;border-radius:8px;padding:.8rem 1rem;margin:1rem 0}
section h2{margin:.1rem 0 .3rem 0;font-size:1.1rem}.meta{color:#555;font-size:.88rem}
.row{display:flex;gap:1.2rem;align-items:flex-start;margin-top:.6rem}.row>.headline-claim{flex:1 1 420px;min-width:0}
figure.headline{flex:0 1 auto;margin:0;max-width:460px}
figure.headline img{max-width:100%;max-height:320px;width:auto;height:auto;display:block;border:1px solid #eee;
border-radius:4px}
figure.headline figcaption{font-size:.78rem;color:#666}
.verdict-line{font-size:1rem;margin:.2rem 0}.verdict-line .pass,.verdict-line .fail{font-weight:bold}
.pass{color:#176f2c}.fail{color:#b00020}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:.4rem 0;font-size:.9rem}
dl.facts dt{color:#555}dl.facts dd{margin:0;overflow-wrap:anywhere}
details{margin-top:.6rem}details>summary{cursor:pointer;color:#124e8c;font-size:.92rem}
pre{background:#fbeaea;padding:.6rem;overflow-x:auto;font-size:.85rem;white-space:pre-wrap}
"""


def _figure(r: NotebookRun) -> str:
    if not r.headline:
        return ""
    data = base64.b64encode(r.headline).decode("ascii")
    return (f'<figure class="headline"><img alt="{html.escape(r.slug)}: headline figure" '
            f'src="data:image/png;base64,{data}"><figcaption>the notebook\'s headline figure</figcaption></figure>')


def _headline_block(r: NotebookRun) -> str:
    """The headline claim in full: statement, verdict, measured against required, control, sources."""
    from lab.claims import VERDICT_CLASS, fmt

    head = r.claims.headline if r.claims is not None else None
    if head is None:
        return "<p>No headline claim marked.</p>" if r.executed else ""
    facts = [("measured", measured_text(head) + (f" ({head.detail})" if head.detail else "")),
             ("required", "shown, no verdict" if head.verdict == "reported"
              else f"{head.op} {fmt(head.threshold)} ({head.threshold_source})"),
             ("source", head.source)]
    if head.control_measured is not None:
        facts.append(("control", f"{fmt(head.control_measured)} ({'passes' if head.control_passed else 'fails'})"
                      + (f": {head.control_label}" if head.control_label else "")))
    elif head.control_why:
        facts.append(("control", f"none: {head.control_why}"))
    dl = "".join(f"<dt>{k}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    return (f'<p class="verdict-line">Headline claim: <b>{html.escape(head.name)}</b> '
            f'<span class="{VERDICT_CLASS[head.verdict]}">{html.escape(head.verdict)}</span></p>'
            f"<p>{html.escape(head.statement)}</p><dl class='facts'>{dl}</dl>")


def _section(r: NotebookRun) -> str:
    link = f'<a href="{html.escape(r.html)}">the notebook</a>' if r.html else "no notebook output"
    reused = " (unchanged since its last good run, reused)" if r.reused else ""
    err = f"<pre>{html.escape(r.error)}</pre>" if r.error else ""
    table = ""
    if r.claims is not None and len(r.claims):
        table = (f"<details><summary>The claims table ({html.escape(tally(r.claims))})</summary>"
                 f"{claims_table(r.claims)}</details>")
    return (
        f'<section id="{html.escape(r.slug)}"><h2>{html.escape(r.title)}</h2>'
        f'<div class="meta">{html.escape(r.slug)} · {html.escape(r.paper)} · {link} · run time {r.seconds:.1f} s'
        f"{reused} · {html.escape(tally(r.claims) if r.executed else 'notebook failed')}</div>{err}"
        f'<div class="row"><div class="headline-claim">{_headline_block(r)}</div>{_figure(r)}</div>{table}</section>'
    )


def render_index(summary: ReportSummary) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    heads = [r.claims.headline for r in summary.runs if r.claims is not None and r.claims.headline is not None]
    held = sum(h.verdict == "holds" for h in heads)
    failed = sum(not r.executed for r in summary.runs)
    count = (f"{len(summary.runs)} methods; {held} of {len(heads)} headline claims hold at this profile"
             + (f"; {failed} notebook{'s' if failed > 1 else ''} failed" if failed else ""))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'><title>recurrent-lab report</title>"
        f"<style>{_CSS}</style></head><body><h1>recurrent-lab report</h1>"
        f"<p class='sub'>profile <b>{html.escape(summary.profile)}</b> · generated {now} · {html.escape(count)}</p>"
        "<h2 class='lead'>The headlines: what each paper claims, and whether it held at this profile</h2>"
        "<table class='overview'><colgroup><col class='c-method'><col class='c-claim'><col class='c-verdict'>"
        "<col class='c-measured'><col class='c-required'><col class='c-control'></colgroup>"
        "<thead><tr><th>method</th><th>the paper's central claim</th><th>verdict</th><th>measured</th>"
        "<th>required</th><th>control</th></tr></thead><tbody>"
        + "".join(headline_row(r) for r in summary.runs)
        + "</tbody></table>"
        + "".join(_section(r) for r in summary.runs)
        + "</body></html>"
    )
