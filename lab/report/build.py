"""``lab report``: run the notebooks that changed, collect what each one left (HTML, headline figure, claims), and
write the index."""

from __future__ import annotations

import json
from pathlib import Path

from tqdm.auto import tqdm

from lab import registry
from lab.io import atomic_write_bytes, atomic_write_text

from .execute import connect, dask_runs, local_runs
from .export import install_mathjax, to_html
from .index import render_index
from .reuse import expected_seconds, headline_path, last_good_run, run_key, stamp_path, write_stamp
from .summary import NotebookRun, ReportSummary, summary_json

__all__ = ["build_report", "collect"]


def collect(m, key: str, seconds: float, error: str | None, out_dir: Path) -> NotebookRun:
    from lab.viz.headline import find_headline

    run = NotebookRun(m.slug, m.title, m.paper, m.notebook, None, seconds, error)
    ipynb = out_dir / m.notebook
    html_path = to_html(ipynb, m.title)
    run.html = html_path.name if html_path else None
    headline = headline_path(out_dir, m.slug)
    png = None
    if ipynb.exists():
        import nbformat

        png = find_headline(nbformat.read(ipynb, as_version=4))
    if png is None:
        headline.unlink(missing_ok=True)
    else:
        atomic_write_bytes(headline, png)
    run.headline = png
    nc = out_dir / f"{m.slug}.nc"
    if error is None:
        from lab.api import check

        try:
            run.claims = check(nc, m.slug)
        except Exception as exc:
            run.error = f"no results at {nc.name}: {type(exc).__name__}: {exc}"
    if run.executed and run.claims is not None:
        write_stamp(out_dir, m.slug, key, seconds, run.html)
    return run


def build_report(
    slugs: list[str] | None = None,
    *,
    profile: str = "quick",
    jobs: int = 1,
    out: Path = Path("reports"),
    scheduler: str | None = None,
    force: bool = False,
    security=None,
) -> ReportSummary:
    """Execute the notebooks of ``slugs`` (all by default) and write ``out/<profile>/index.html``.

    Arguments:
        slugs: the methods (default: every registered one).
        profile: ``ci``, ``quick`` or ``full``.
        jobs: notebooks executed at once in local processes (ignored with ``scheduler``).
        out: the reports folder; this profile's report goes to ``out/<profile>/``.
        scheduler: a Dask scheduler address (``tcp://host:8786``): the notebooks run on its workers.
        force: rerun every notebook, even one unchanged since its last good run (:func:`run_key`).
        security: Dask's TLS settings for a ``tls://`` scheduler (:func:`lab.report.execute.tls_security`).

    Raises:
        ConfigError: no scheduler answers at ``scheduler`` (nothing is written then).
    """
    methods = [registry.get(s) for s in slugs] if slugs else registry.methods()
    client = connect(scheduler, security) if scheduler is not None else None  # fail before writing anything
    try:
        out_dir = (Path(out) / profile).resolve()  # notebooks run in notebooks/: hand them absolute paths
        out_dir.mkdir(parents=True, exist_ok=True)
        install_mathjax(out_dir)
        runs: dict[str, NotebookRun] = {}
        keys = {m.slug: run_key(m, profile) for m in methods}
        expected = {m.slug: expected_seconds(m, out_dir, profile) for m in methods}  # before stale stamps go
        todo = []
        for m in methods:
            reused = None if force else last_good_run(m, keys[m.slug], out_dir)
            if reused is not None:
                runs[m.slug] = reused
            else:
                for stale in (stamp_path(out_dir, m.slug), headline_path(out_dir, m.slug), out_dir / m.notebook,
                              (out_dir / m.notebook).with_suffix(".html"), out_dir / f"{m.slug}.nc"):
                    stale.unlink(missing_ok=True)  # the index shows this run, or its failure, never an older run
                todo.append(m)
        if todo:
            todo.sort(key=lambda m: -expected[m.slug])  # longest first: no long notebook left alone at the end
            finished = (dask_runs(todo, out_dir, profile, client) if client is not None
                        else local_runs(todo, out_dir, profile, jobs))
            where = "on Dask" if client is not None else f"{jobs} local process{'es' if jobs > 1 else ''}"
            for m, seconds, error in tqdm(finished, total=len(todo), desc=f"notebooks ({profile}, {where})"):
                runs[m.slug] = collect(m, keys[m.slug], seconds, error, out_dir)
    finally:
        if client is not None:
            client.close()
    ordered = [runs[m.slug] for m in methods]
    summary = ReportSummary(profile=profile, index=out_dir / "index.html", runs=ordered)
    atomic_write_text(summary.index, render_index(summary))
    atomic_write_text(out_dir / "summary.json", json.dumps(summary_json(summary), indent=2))
    return summary
