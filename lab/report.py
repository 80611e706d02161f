"""Reports: execute every method's notebook with Papermill, export HTML, and write an index of claims tables.

Each notebook runs in its own process (Papermill's working-directory handling is not thread-safe) with the
parameters ``profile`` and ``result_path``; the notebook saves its results Dataset there, and the index re-checks
the claims from that NetCDF alone (no scrapbook).

Where the notebooks run:

- locally (the default): a process pool of ``jobs`` processes, the cores split between them
  (:func:`kernel_environment`);
- on a Dask cluster (``scheduler="tcp://host:8786"``): one task per notebook, Papermill in the worker, which sends
  back the executed notebook and the results NetCDF as bytes (no shared file system); the client writes them, exports
  the HTML and writes the same index.

What is skipped: after a good run (the notebook executed without error and its claims were evaluated) the report
stores ``<slug>.run.json`` beside the notebook's outputs, with a content hash (:func:`run_key`) of the notebook
file, the method's folder (``lab/methods/<slug>/**/*.py``), the shared code every notebook runs on
(:data:`SHARED_CODE`: ``lab/*.py``, ``lab/core``, ``lab/datasets``, ``lab/viz``, ``kernels``), the profile and the
lab's version. A later report whose hash for that method is the same reuses its HTML, NetCDF and index row
("unchanged, reused") instead of executing it; ``force=True`` reruns everything. The shared part is coarse on
purpose: an edit anywhere in the shared code reruns every notebook (safe; a method's own edits rerun only that
method). Installed packages are not part of the hash: after an upgrade, rerun with ``force=True``.

The HTML opens offline: the nbconvert template drops require.js, the jupyter-widgets embedder (progress bars show as
their text) and mermaid; MathJax 2 (from the ``jupyter-server-mathjax`` package) is copied once into
``<out>/<profile>/static/mathjax/`` and the pages point at it by a relative path; Panel's and Bokeh's CSS and
JavaScript are inlined in the notebook's outputs (``PANEL_INLINE`` in the kernel's environment,
``hv.extension("bokeh", inline=True)`` in the notebooks). Each method's headline figure (:func:`lab.viz.headline`)
is embedded in its index row as a PNG.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import os
import re
import shutil
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from lab import registry
from lab.claims import ClaimsTable
from lab.io import atomic_write_bytes, atomic_write_text

KERNEL_NAME = "python3"

#: the repository root: the notebooks, the lab and the kernels live under it
ROOT = registry.NOTEBOOK_DIR.parent

#: the shared code every notebook runs on, as globs under :data:`ROOT`; part of every method's :func:`run_key`
SHARED_CODE = ("lab/*.py", "lab/core/**/*.py", "lab/datasets/**/*.py", "lab/viz/**/*.py", "kernels/**/*.py")

#: seconds to wait for a Dask scheduler to answer before giving up (``scheduler=`` / ``--scheduler``)
SCHEDULER_TIMEOUT_S = 10.0

#: environment of every notebook's kernel besides its threads: Panel inlines its CSS (no cdn.holoviz.org)
KERNEL_SETTINGS = {"PANEL_INLINE": "true"}


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
    reused: bool = False
    headline: bytes | None = None

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

    @property
    def reused(self) -> list[str]:
        return [r.slug for r in self.runs if r.reused]

    def to_text(self) -> str:
        lines = [f"report ({self.profile} profile)"]
        for r in self.runs:
            if r.executed and r.claims is not None:
                status = f"{'unchanged, reused' if r.reused else 'executed'}, {r.claims.summary()}"
            else:
                status = f"FAILED: {(r.error or '').strip().splitlines()[-1] if r.error else ''}"
            lines.append(f"  {r.slug:<14} {r.seconds:7.1f} s  {status}")
        if self.reused:
            lines.append(f"  ({len(self.reused)} unchanged since their last good run, reused; --force reruns them)")
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


# ---------------------------------------------------------------------------------------------------------------
# what a run depends on


#: where the method folders are (the tests point it at a copy)
METHODS_DIR = registry.METHODS_DIR


def source_files(method) -> dict[str, Path]:
    """The files a method's report depends on, by a stable label: its notebook (``notebook/<file>``), its folder's
    Python files (``method/<path in the folder>``) and the shared code (its path under :data:`ROOT`)."""
    files = {f"notebook/{method.notebook}": registry.NOTEBOOK_DIR / method.notebook}
    folder = METHODS_DIR / method.slug
    files.update({f"method/{p.relative_to(folder).as_posix()}": p for p in folder.glob("**/*.py")})
    for pattern in SHARED_CODE:
        files.update({p.relative_to(ROOT).as_posix(): p for p in ROOT.glob(pattern)})
    return {label: files[label] for label in sorted(files) if files[label].is_file()}


def run_key(method, profile: str) -> str:
    """Content hash of everything a method's notebook run depends on (:func:`source_files`, the profile and the
    lab's version): equal keys mean an equal run, so the last good one can be reused."""
    from lab import __version__

    digest = hashlib.sha256(json.dumps({"method": method.slug, "profile": profile, "lab": __version__}).encode())
    for label, path in source_files(method).items():
        digest.update(f"\0{label}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


def _stamp_path(out_dir: Path, slug: str) -> Path:
    return out_dir / f"{slug}.run.json"


def _headline_path(out_dir: Path, slug: str) -> Path:
    return out_dir / f"{slug}.headline.png"


# ---------------------------------------------------------------------------------------------------------------
# execution


def _execute(slug: str, notebook: str, out_dir: str, profile: str, env: dict[str, str] | None = None
             ) -> tuple[float, str | None]:
    """Run one notebook (in a worker process, its kernel inheriting ``env``); returns (seconds, error or None)."""
    return _run_papermill(slug, registry.NOTEBOOK_DIR / notebook, Path(out_dir), profile, env or {})


def _execute_remote(slug: str, notebook: str, source: bytes, profile: str) -> dict:
    """One notebook in a Dask worker: ``source`` (the client's notebook file) runs in a temporary folder of the
    worker; returns ``{"seconds", "error", "ipynb", "nc"}`` with the executed notebook and the results NetCDF as
    bytes (None where missing), so the client needs no file system shared with the worker."""
    try:  # split the worker's cores between the notebooks it runs at once
        from distributed import get_worker

        jobs = get_worker().state.nthreads
    except Exception:
        jobs = 1
    with tempfile.TemporaryDirectory(prefix=f"lab-report-{slug}-") as tmp:
        folder = Path(tmp)
        src = folder / "in" / notebook
        src.parent.mkdir()
        src.write_bytes(source)
        out = folder / "out"
        out.mkdir()
        seconds, error = _run_papermill(slug, src, out, profile, kernel_environment(jobs))
        ipynb, nc = out / notebook, out / f"{slug}.nc"
        return {
            "seconds": seconds,
            "error": error,
            "ipynb": ipynb.read_bytes() if ipynb.exists() else None,
            "nc": nc.read_bytes() if nc.exists() else None,
        }


def _run_papermill(slug: str, src: Path, out: Path, profile: str, env: dict[str, str]) -> tuple[float, str | None]:
    """Papermill on ``src`` into ``out`` (the executed notebook and ``<slug>.nc``), the kernel inheriting ``env``;
    returns (seconds, error or None). The notebook runs in ``notebooks/`` where this machine has one."""
    import papermill as pm

    os.environ.update({**KERNEL_SETTINGS, **env})
    cwd = registry.NOTEBOOK_DIR if registry.NOTEBOOK_DIR.is_dir() else src.parent
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(out / src.name),
                            parameters={"profile": profile, "result_path": str(out / f"{slug}.nc")},
                            kernel_name=KERNEL_NAME, cwd=str(cwd), progress_bar=False, log_output=False)
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, pm.PapermillExecutionError):
            error += "\n" + traceback.format_exc(limit=3)
    return time.perf_counter() - start, error


def connect(scheduler: str):
    """A ``dask.distributed.Client`` of the scheduler at ``scheduler``; ConfigError (naming ``scheduler``) when
    none answers within :data:`SCHEDULER_TIMEOUT_S` seconds."""
    from dask.distributed import Client

    from lab.checks import bad_value

    if not isinstance(scheduler, str) or not scheduler.strip():
        raise bad_value("scheduler", scheduler, "the address of a running Dask scheduler, e.g. tcp://host:8786")
    try:
        return Client(scheduler, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise bad_value(
            "scheduler", scheduler,
            f"the address of a running Dask scheduler, e.g. tcp://host:8786 (none answered within "
            f"{SCHEDULER_TIMEOUT_S:g} s: {type(exc).__name__}: {exc})",
        ) from None


def _local_runs(todo, out_dir: Path, profile: str, jobs: int):
    """Yield (method, seconds, error) as the local process pool finishes the notebooks of ``todo``."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(_execute, m.slug, m.notebook, str(out_dir), profile, kernel_environment(jobs)): m
            for m in todo
        }
        for fut in as_completed(futures):
            try:
                seconds, error = fut.result()
            except Exception as exc:  # a crashed worker
                seconds, error = 0.0, f"{type(exc).__name__}: {exc}"
            yield futures[fut], seconds, error


def _dask_runs(todo, out_dir: Path, profile: str, client, retries: int = 1):
    """Yield (method, seconds, error) as the cluster's workers finish the notebooks of ``todo``; the executed
    notebook and its NetCDF come back as bytes and are written here."""
    from dask.distributed import as_completed as dask_completed

    for m in [m for m in todo if not m.notebook_path.is_file()]:
        yield m, 0.0, f"FileNotFoundError: no notebook {m.notebook_path}"
    futures = {
        client.submit(_execute_remote, m.slug, m.notebook, m.notebook_path.read_bytes(), profile,
                      pure=False, retries=retries, key=f"lab-report-{m.slug}-{os.urandom(4).hex()}"): m
        for m in todo if m.notebook_path.is_file()
    }
    for fut in dask_completed(futures, loop=client.loop):
        m = futures[fut]
        if fut.status == "error":
            exc = fut.exception()
            yield m, 0.0, f"{type(exc).__name__} in a Dask worker: {exc}"
            continue
        got = fut.result()
        for name, data in ((m.notebook, got["ipynb"]), (f"{m.slug}.nc", got["nc"])):
            path = out_dir / name
            if data is None:
                path.unlink(missing_ok=True)  # never leave an older run's file where this run wrote none
            else:
                atomic_write_bytes(path, data)
        yield m, got["seconds"], got["error"]


# ---------------------------------------------------------------------------------------------------------------
# collecting: HTML, headline, claims, the stamp of a good run


def _collect(m, key: str, seconds: float, error: str | None, out_dir: Path) -> NotebookRun:
    from lab.viz.headline import find_headline

    run = NotebookRun(m.slug, m.title, m.paper, m.notebook, None, seconds, error)
    ipynb = out_dir / m.notebook
    html_path = _to_html(ipynb)
    run.html = html_path.name if html_path else None
    headline = _headline_path(out_dir, m.slug)
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
        stamp = {"key": key, "seconds": seconds, "html": run.html,
                 "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        atomic_write_text(_stamp_path(out_dir, m.slug), json.dumps(stamp, indent=2))
    return run


def _reuse(m, key: str, out_dir: Path) -> NotebookRun | None:
    """The last good run of ``m`` when its key equals ``key`` and its files are all there; else None."""
    try:
        stamp = json.loads(_stamp_path(out_dir, m.slug).read_text())
    except (OSError, ValueError):
        return None
    html_name = stamp.get("html")
    files = [out_dir / m.notebook, out_dir / f"{m.slug}.nc"] + ([out_dir / html_name] if html_name else [])
    if stamp.get("key") != key or not html_name or not all(f.is_file() for f in files):
        return None
    from lab.api import check

    try:
        claims = check(out_dir / f"{m.slug}.nc", m.slug)
    except Exception:  # an unreadable NetCDF: run again
        return None
    headline = _headline_path(out_dir, m.slug)
    return NotebookRun(m.slug, m.title, m.paper, m.notebook, html_name, float(stamp.get("seconds", 0.0)),
                       claims=claims, reused=True, headline=headline.read_bytes() if headline.is_file() else None)


# ---------------------------------------------------------------------------------------------------------------
# HTML that opens offline

#: the nbconvert template: JupyterLab's, less what asks the network (require.js, the widgets embedder, mermaid),
#: with MathJax from ``resources.mathjax_url`` (a relative path to the copy beside the report). MathJax uses the
#: STIX-Web fonts jupyter-server-mathjax ships (not its default TeX fonts), and its blank fallback font is looked up
#: locally instead of at ``about:blank`` (a request the browser refuses from a file:// page)
_TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               styles: {"@font-face": {"font-family": "MathJax_Blank", src: "local('MathJax_Blank')"}}},
  displayAlign: "center",
  messageStyle: "none",
  menuSettings: {zoom: "None"}
});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
"""

#: where MathJax goes beside the report, and the parts of jupyter-server-mathjax's copy it needs
MATHJAX_DIR = "static/mathjax"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
_MATHJAX_PARTS = ("MathJax.js", "LICENSE", "config", "jax/element", "jax/input/TeX", "jax/output/HTML-CSS",
                  "fonts/HTML-CSS/STIX-Web", "localization/en")
_MATHJAX_EXTENSIONS_SKIPPED = ("a11y",)  # the accessibility explorer: 3 MB, loaded only from its menu


def install_mathjax(out_dir: Path) -> Path:
    """Copy MathJax 2 (the needed part of the ``jupyter-server-mathjax`` package) to ``out_dir/static/mathjax``
    once; returns that folder."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("jupyter_server_mathjax")  # not imported: it imports all of jupyter_server
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax for the report comes from the package jupyter-server-mathjax: "
                           "pip install jupyter-server-mathjax (it is a dependency of recurrent-lab)")
    dest = out_dir / MATHJAX_DIR
    src = Path(list(spec.submodule_search_locations)[0]) / "static"
    marker = dest / ".source"
    version = f"jupyter-server-mathjax {importlib.metadata.version('jupyter-server-mathjax')}"
    if marker.is_file() and marker.read_text() == version:
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=".mathjax-", dir=out_dir))
    try:
        for part in _MATHJAX_PARTS:
            if (src / part).is_dir():
                shutil.copytree(src / part, tmp / part)
            elif (src / part).is_file():
                (tmp / part).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / part, tmp / part)
        shutil.copytree(src / "extensions", tmp / "extensions",
                        ignore=shutil.ignore_patterns(*_MATHJAX_EXTENSIONS_SKIPPED))
        (tmp / ".source").write_text(version)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"lab_offline.html.j2": _TEMPLATE})],
        template_file="lab_offline.html.j2",
        mathjax_url=f"{MATHJAX_DIR}/MathJax.js?config={MATHJAX_CONFIG}",
    )


#: an output of this type needs the widgets embedder (from a CDN); the text beside it is shown instead
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


#: a Bokeh stylesheet that Panel points at its CDN, in a document's JSON (HoloViews' plots carry several)
_IMPORTED_CSS = re.compile(
    r'\{"type":"object","name":"ImportedStyleSheet","id":"(?P<id>[^"]+)",'
    r'"attributes":\{"url":"https://cdn\.holoviz\.org/panel/[^/"]+/dist/(?P<path>[^"?]+)(?:\?[^"]*)?"\}\}'
)


def _inline_stylesheets(text: str) -> str:
    """``text`` (an output's HTML) with every Panel stylesheet it imports from cdn.holoviz.org replaced by the same
    CSS inline, read from the installed Panel's ``dist`` folder (one it lacks is left as it is: the browser test
    counts it)."""
    if "ImportedStyleSheet" not in text:
        return text
    import panel

    dist = Path(panel.__file__).parent / "dist"

    def inline(match: re.Match) -> str:
        path = dist / match["path"]
        if not path.is_file():
            return match[0]
        css = json.dumps(path.read_text(encoding="utf-8")).replace("</", "<\\/")  # no </script> inside a script
        return f'{{"type":"object","name":"InlineStyleSheet","id":"{match["id"]}","attributes":{{"css":{css}}}}}'

    return _IMPORTED_CSS.sub(inline, text)


def _offline_copy(nb):
    """``nb`` as the offline HTML shows it: without widget views (tqdm's bars show as their text) and the widget
    state, Panel's stylesheets inline."""
    nb.metadata = {k: v for k, v in nb.metadata.items() if k != "widgets"}
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for output in cell.outputs:
            data = output.get("data")
            if not data:
                continue
            data.pop(WIDGET_VIEW, None)
            if "text/html" in data:
                value = data["text/html"]
                data["text/html"] = _inline_stylesheets("".join(value) if isinstance(value, list) else value)
        # HoloViews leaves empty display outputs (nothing to show, and nbconvert warns about each)
        cell.outputs = [o for o in cell.outputs if o.get("output_type") != "display_data" or o.get("data")]
    return nb


def _to_html(ipynb: Path) -> Path | None:
    if not ipynb.exists():
        return None
    import copy

    import nbformat

    nb = _offline_copy(copy.deepcopy(nbformat.read(ipynb, as_version=4)))
    body, _ = _exporter().from_notebook_node(nb)
    out = ipynb.with_suffix(".html")
    atomic_write_text(out, body)
    return out


# ---------------------------------------------------------------------------------------------------------------


def build_report(
    slugs: list[str] | None = None,
    *,
    profile: str = "quick",
    jobs: int = 1,
    out: Path = Path("reports"),
    scheduler: str | None = None,
    force: bool = False,
) -> ReportSummary:
    """Execute the notebooks of ``slugs`` (all by default) and write ``out/<profile>/index.html``.

    Arguments:
        slugs: the methods (default: every registered one).
        profile: ``ci``, ``quick`` or ``full``.
        jobs: notebooks executed at once in local processes (ignored with ``scheduler``).
        out: the reports folder; this profile's report goes to ``out/<profile>/``.
        scheduler: a Dask scheduler address (``tcp://host:8786``): the notebooks run on its workers.
        force: rerun every notebook, even one unchanged since its last good run (:func:`run_key`).

    Raises:
        ConfigError: no scheduler answers at ``scheduler`` (nothing is written then).
    """
    methods = [registry.get(s) for s in slugs] if slugs else registry.methods()
    client = connect(scheduler) if scheduler is not None else None  # fail before writing anything
    try:
        out_dir = (Path(out) / profile).resolve()  # notebooks run in notebooks/: hand them absolute paths
        out_dir.mkdir(parents=True, exist_ok=True)
        install_mathjax(out_dir)
        runs: dict[str, NotebookRun] = {}
        keys = {m.slug: run_key(m, profile) for m in methods}
        todo = []
        for m in methods:
            reused = None if force else _reuse(m, keys[m.slug], out_dir)
            if reused is not None:
                runs[m.slug] = reused
            else:
                for stale in (_stamp_path(out_dir, m.slug), _headline_path(out_dir, m.slug), out_dir / m.notebook,
                              (out_dir / m.notebook).with_suffix(".html"), out_dir / f"{m.slug}.nc"):
                    stale.unlink(missing_ok=True)  # the index shows this run, or its failure, never an older run
                todo.append(m)
        if todo:
            finished = (_dask_runs(todo, out_dir, profile, client) if client is not None
                        else _local_runs(todo, out_dir, profile, jobs))
            where = "on Dask" if client is not None else f"{jobs} local process{'es' if jobs > 1 else ''}"
            for m, seconds, error in tqdm(finished, total=len(todo), desc=f"notebooks ({profile}, {where})"):
                runs[m.slug] = _collect(m, keys[m.slug], seconds, error, out_dir)
    finally:
        if client is not None:
            client.close()
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
                "reused": r.reused,
                "error": r.error,
                "headline": f"{r.slug}.headline.png" if r.headline else None,
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


def _headline_row(r: NotebookRun, badge: str) -> str:
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
        overview.append(_headline_row(r, badge))
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
