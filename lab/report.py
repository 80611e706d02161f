"""Reports: execute every method's notebook with Papermill, export HTML, and write an index of claims tables.

Each notebook runs in its own process (Papermill's working-directory handling is not thread-safe) with the
parameters ``profile`` and ``result_path``; the notebook saves its results Dataset there, and the index re-checks
the claims from that NetCDF alone (no scrapbook).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from lab import registry
from lab.claims import ClaimsTable
from lab.io import atomic_write_text

KERNEL_NAME = "python3"


@dataclass
class NotebookRun:
    slug: str
    title: str
    paper: str
    notebook: str
    html: str | None
    seconds: float
    error: str | None = None
    claims: ClaimsTable | None = None

    @property
    def executed(self) -> bool:
        return self.error is None


@dataclass
class ReportSummary:
    profile: str
    index: Path
    runs: list[NotebookRun] = field(default_factory=list)

    @property
    def all_executed(self) -> bool:
        return all(r.executed for r in self.runs)

    def to_text(self) -> str:
        lines = [f"report ({self.profile} profile)"]
        for r in self.runs:
            if r.executed and r.claims is not None:
                status = f"executed, {r.claims.summary()}"
            else:
                status = f"FAILED: {(r.error or '').strip().splitlines()[-1] if r.error else ''}"
            lines.append(f"  {r.slug:<14} {r.seconds:7.1f} s  {status}")
        return "\n".join(lines)


#: thread-count variables of the numerical libraries a notebook's kernel uses (BLAS, OpenMP, Numba)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def kernel_environment(jobs: int) -> dict[str, str]:
    """The thread settings for one of ``jobs`` notebooks running at once: the cores split between them, and
    OpenMP threads that sleep rather than spin when idle. Without this, two notebooks each start a thread per core
    and spinning BLAS threads starve each other (DAM's quick notebook took 572 s beside another, 39 s alone)."""
    per_job = max(1, (os.cpu_count() or 1) // max(1, jobs))
    env = {name: str(per_job) for name in THREAD_VARIABLES}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _execute(slug: str, notebook: str, out_dir: str, profile: str, env: dict[str, str] | None = None
             ) -> tuple[float, str | None]:
    """Run one notebook (in a worker process, its kernel inheriting ``env``); returns (seconds, error or None)."""
    import papermill as pm

    os.environ.update(env or {})
    src = registry.NOTEBOOK_DIR / notebook
    dst = Path(out_dir) / notebook
    result_path = str(Path(out_dir) / f"{slug}.nc")
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters={"profile": profile, "result_path": result_path},
            kernel_name=KERNEL_NAME,
            cwd=str(registry.NOTEBOOK_DIR),
            progress_bar=False,
            log_output=False,
        )
        error = None
    except Exception as exc:  # the failure is shown in the index; the other notebooks still run
        error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, pm.PapermillExecutionError):
            error += "\n" + traceback.format_exc(limit=3)
    return time.perf_counter() - start, error


def _to_html(ipynb: Path) -> Path | None:
    if not ipynb.exists():
        return None
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(ipynb, as_version=4)
    body, _ = HTMLExporter().from_notebook_node(nb)
    out = ipynb.with_suffix(".html")
    atomic_write_text(out, body)
    return out


def build_report(
    slugs: list[str] | None = None, *, profile: str = "quick", jobs: int = 1, out: Path = Path("reports")
) -> ReportSummary:
    """Execute the notebooks of ``slugs`` (all by default) and write ``out/<profile>/index.html``."""
    methods = [registry.get(s) for s in slugs] if slugs else registry.methods()
    out_dir = (Path(out) / profile).resolve()  # notebooks run in notebooks/: hand them absolute paths
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, NotebookRun] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(_execute, m.slug, m.notebook, str(out_dir), profile, kernel_environment(jobs)): m
            for m in methods
        }
        for fut in tqdm(as_completed(futures), total=len(futures), desc=f"notebooks ({profile})"):
            m = futures[fut]
            try:
                seconds, error = fut.result()
            except Exception as exc:  # a crashed worker
                seconds, error = 0.0, f"{type(exc).__name__}: {exc}"
            run = NotebookRun(m.slug, m.title, m.paper, m.notebook, None, seconds, error)
            html_path = _to_html(out_dir / m.notebook)
            run.html = html_path.name if html_path else None
            nc = out_dir / f"{m.slug}.nc"
            if error is None:
                from lab.api import check

                try:
                    run.claims = check(nc, m.slug)
                except Exception as exc:
                    run.error = f"no results at {nc.name}: {type(exc).__name__}: {exc}"
            runs[m.slug] = run
    ordered = [runs[m.slug] for m in methods]
    summary = ReportSummary(profile=profile, index=out_dir / "index.html", runs=ordered)
    atomic_write_text(summary.index, render_index(summary))
    atomic_write_text(out_dir / "summary.json", json.dumps(_summary_json(summary), indent=2))
    return summary


def _summary_json(summary: ReportSummary) -> dict:
    return {
        "profile": summary.profile,
        "methods": [
            {
                "slug": r.slug,
                "seconds": r.seconds,
                "error": r.error,
                "claims": [c.to_dict() for c in r.claims] if r.claims else [],
            }
            for r in summary.runs
        ],
    }


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2rem}
section{border:1px solid #ddd;border-radius:8px;padding:1rem 1.2rem;margin:1.2rem 0}
section h2{margin:.1rem 0 .4rem 0;font-size:1.2rem}
.badge{display:inline-block;border-radius:4px;padding:1px 8px;font-size:.85rem;color:white}
.ok{background:#176f2c}.bad{background:#b00020}.warn{background:#b26a00}
table.claims{border-collapse:collapse;width:100%;margin-top:.6rem;font-size:.92rem}
table.claims td,table.claims th{border-top:1px solid #eee;text-align:left;vertical-align:top;padding:5px 8px}
table.claims td.pass{color:#176f2c;font-weight:bold}table.claims td.fail{color:#b00020;font-weight:bold}
table.claims td.report{color:#555}
pre{background:#fbeaea;padding:.6rem;overflow-x:auto;font-size:.85rem}
table.overview{border-collapse:collapse}table.overview td,table.overview th{padding:3px 10px;text-align:left}
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
        overview.append(
            f'<tr><td><a href="#{r.slug}">{html.escape(r.slug)}</a></td>'
            f"<td>{r.seconds:.1f} s</td><td>{badge}</td></tr>"
        )
        body = r.claims.to_html() if r.claims is not None else ""
        err = f"<pre>{html.escape(r.error)}</pre>" if r.error else ""
        sections.append(
            f'<section id="{r.slug}"><h2>{html.escape(r.title)}</h2>'
            f"<div>{html.escape(r.slug)} · {html.escape(r.paper)} · {link} · run time {r.seconds:.1f} s · {badge}"
            f"</div>{err}{body}</section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>recurrent-lab report</title>"
        f"<style>{_CSS}</style></head><body><h1>recurrent-lab report</h1>"
        f"<p class='sub'>profile <b>{html.escape(summary.profile)}</b> · generated {now}</p>"
        "<table class='overview'><tr><th>method</th><th>run time</th><th>status</th></tr>"
        + "".join(overview)
        + "</table>"
        + "".join(sections)
        + "</body></html>"
    )
