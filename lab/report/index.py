"""The report's index page: the headlines table, then one section per method with its claims table, its headline
figure (a PNG embedded in the page) and a link to its notebook's HTML."""

from __future__ import annotations

import base64
import datetime as _dt
import html

from .headlines import headline_row
from .summary import ReportSummary

__all__ = ["render_index"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2rem}
section{border:1px solid #ddd;border-radius:8px;padding:1rem 1.2rem;margin:1.2rem 0}
section h2{margin:.1rem 0 .4rem 0;font-size:1.2rem}
.badge{display:inline-block;border-radius:4px;padding:1px 8px;font-size:.85rem;color:white}
.ok{background:#176f2c}.bad{background:#b00020}.warn{background:#b26a00}
table.claims{border-collapse:collapse;width:100%;margin-top:.6rem;font-size:.92rem}
table.claims td,table.claims th{border-top:1px solid #eee;text-align:left;vertical-align:top;padding:5px 8px;
overflow-wrap:break-word}
table.claims small,table.overview small{overflow-wrap:anywhere}table.claims td:last-child{min-width:6.5rem}
table.claims td.pass{color:#176f2c;font-weight:bold}table.claims td.fail{color:#b00020;font-weight:bold}
table.claims td.report{color:#555}
pre{background:#fbeaea;padding:.6rem;overflow-x:auto;font-size:.85rem}
table.overview{border-collapse:collapse;width:100%;font-size:.92rem}
table.overview td,table.overview th{padding:4px 8px;text-align:left;vertical-align:top;border-top:1px solid #eee}
table.overview td:nth-child(1),table.overview td:nth-child(4),table.overview td:nth-child(8){white-space:nowrap}
table.overview td:nth-child(3){min-width:6rem}table.overview td:nth-child(5){min-width:14rem}
table.overview td:nth-child(2) b{overflow-wrap:anywhere}
table.overview td:nth-child(6){min-width:6.5rem}table.overview td:nth-child(7) .badge{white-space:nowrap}
table.overview td.pass{color:#176f2c;font-weight:bold}table.overview td.fail{color:#b00020;font-weight:bold}
table.overview small{color:#555}table.overview small.fail{color:#b00020}table.overview small.pass{color:#176f2c}
table.claims small.pass{color:#176f2c}table.claims small.fail{color:#b00020}
.row{display:flex;gap:1.2rem;align-items:flex-start;flex-wrap:wrap}.row>.claims-box{flex:1 1 520px;min-width:0}
figure.headline{flex:0 0 auto;margin:.6rem 0 0 0;max-width:360px}
figure.headline img{width:100%;height:auto;border:1px solid #eee;border-radius:4px}
figure.headline figcaption{font-size:.8rem;color:#666}
.reused{color:#666;font-size:.85rem}
"""


def render_index(summary: ReportSummary) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    overview = []
    sections = []
    for r in summary.runs:
        if not r.executed:
            badge = '<span class="badge bad">notebook failed</span>'
        elif r.claims is not None and r.claims.all_passed:
            badge = '<span class="badge ok">all claims hold</span>'
        else:
            text = r.claims.summary() if r.claims is not None else "no claims"
            badge = f'<span class="badge warn">{html.escape(text)}</span>'
        link = f'<a href="{html.escape(r.html)}">notebook</a>' if r.html else "no notebook output"
        overview.append(headline_row(r, badge))
        body = r.claims.to_html() if r.claims is not None else ""
        err = f"<pre>{html.escape(r.error)}</pre>" if r.error else ""
        figure = ""
        if r.headline:
            data = base64.b64encode(r.headline).decode("ascii")
            figure = (f'<figure class="headline"><img alt="{html.escape(r.slug)}: headline figure" '
                      f'src="data:image/png;base64,{data}"><figcaption>headline figure of the notebook'
                      "</figcaption></figure>")
        reused = ' <span class="reused">(unchanged since then, reused)</span>' if r.reused else ""
        sections.append(
            f'<section id="{r.slug}"><h2>{html.escape(r.title)}</h2>'
            f"<div>{html.escape(r.slug)} · {html.escape(r.paper)} · {link} · run time {r.seconds:.1f} s{reused}"
            f" · {badge}</div>{err}<div class=\"row\">{figure}<div class=\"claims-box\">{body}</div></div></section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>recurrent-lab report</title>"
        f"<style>{_CSS}</style></head><body><h1>recurrent-lab report</h1>"
        f"<p class='sub'>profile <b>{html.escape(summary.profile)}</b> · generated {now}</p>"
        "<h2>The headlines: each paper's central claim at this profile</h2>"
        "<table class='overview'><tr><th>method</th><th>headline claim</th><th>measured</th><th>required</th>"
        "<th>control (competence)</th><th>verdict</th><th>all claims</th><th>run time</th></tr>"
        + "".join(overview)
        + "</table>"
        + "".join(sections)
        + "</body></html>"
    )
