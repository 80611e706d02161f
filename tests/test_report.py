"""`lab report --profile ci`: every registered notebook executes through Papermill, one process each, and the
index shows each method's claims table and links its notebook's HTML."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from lab import registry
from lab.cli import cli
from tests.conftest import shared_once

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    """The ci report of every notebook, executed once per test run (shared by the xdist workers)."""

    def build(out):
        result = CliRunner().invoke(cli, ["report", "--profile", "ci", "--jobs", "2", "--out", str(out)])
        return {"output": result.output, "exit_code": result.exit_code}

    out, result = shared_once(tmp_path_factory, "reports", build)
    return out / "ci", SimpleNamespace(**result)


@pytest.mark.parametrize("slug", registry.slugs())
def test_notebook_executes_in_ci_profile(report_dir, slug):
    folder, result = report_dir
    method = registry.get(slug)
    assert (folder / method.notebook).exists(), result.output
    assert (folder / f"{slug}.nc").exists(), result.output
    html = (folder / method.notebook.replace(".ipynb", ".html")).read_text()
    assert 'class="claims"' in html  # the notebook renders its claims table


def test_report_exit_code_and_index(report_dir):
    folder, result = report_dir
    assert result.exit_code == 0, result.output
    index = (folder / "index.html").read_text()
    for m in registry.methods():
        assert f'id="{m.slug}"' in index and m.notebook.replace(".ipynb", ".html") in index
    assert 'class="claims"' in index and "measured" in index and "<th>control</th>" in index
    assert "verdict" in index


def test_index_opens_with_every_methods_headline(report_dir):
    """The index opens with one row per method: its paper's central claim in a few words, its verdict, measured,
    required, control; the sections follow."""
    import html
    import json

    from lab.report.headlines import lead

    folder, _ = report_dir
    index = (folder / "index.html").read_text()
    opening = index[: index.index("<section")]
    assert "The headlines" in opening
    summary = json.loads((folder / "summary.json").read_text())
    for m in summary["methods"]:
        (head,) = [c for c in m["claims"] if c["headline"]]
        assert f'href="#{m["slug"]}"' in opening and html.escape(lead(head["statement"])) in opening
        assert f">{head['verdict']}</td>" in opening


@pytest.mark.parametrize("slug", registry.slugs())
def test_papermill_lists_every_config_field_with_its_doc(slug):
    """`papermill --help-notebook` reads the parameters cell: every Config field, defaulting to None."""
    import papermill as pm

    from lab import notebooks
    from lab.config import field_specs

    params = pm.inspect_notebook(str(registry.get(slug).notebook_path))
    specs = field_specs(registry.get(slug).config)
    assert {"profile", "result_path", *specs} <= set(params)
    for name, spec in specs.items():
        assert params[name]["default"] == "None"
        assert notebooks.help_text(spec.doc.split()[0]) in params[name]["help"]


def test_notebook_override_reaches_the_run(tmp_path):
    """`papermill ... -p N 64` sets the Config field of the run the notebook saves."""
    import papermill as pm

    import lab

    nb = registry.get("dam").notebook_path
    out = tmp_path / "dam.nc"
    pm.execute_notebook(str(nb), str(tmp_path / "dam.ipynb"), cwd=str(nb.parent), progress_bar=False,
                        parameters={"profile": "ci", "result_path": str(out), "N": 64, "trials": 2},
                        kernel_name="python3")
    cfg = lab.config_of(lab.load(out))
    assert cfg.N == 64 and cfg.trials == 2


def _dying_execute(slug, notebook, out_dir, profile, env=None):
    raise RuntimeError("kernel died")


def test_failed_notebook_is_reported_and_others_still_run(tmp_path, monkeypatch):
    from lab import report

    monkeypatch.setattr(report.execute, "_execute", _dying_execute)
    summary = report.build_report(["dam"], profile="ci", jobs=1, out=tmp_path)
    assert not summary.all_executed and "kernel died" in (tmp_path / "ci" / "index.html").read_text()


def test_relative_out_folder_is_resolved(tmp_path, monkeypatch):
    """Notebooks run with notebooks/ as their working directory: a relative --out must still collect results."""
    from lab import report

    monkeypatch.chdir(tmp_path)
    summary = report.build_report(["dam"], profile="ci", jobs=1, out=Path("reports"))
    assert summary.all_executed, summary.to_text()
    assert (tmp_path / "reports" / "ci" / "dam.nc").exists()


def test_parallel_notebooks_split_the_cores(monkeypatch):
    from lab import report

    monkeypatch.setattr(report.execute.os, "cpu_count", lambda: 8)
    env = report.kernel_environment(jobs=2)
    assert env["OPENBLAS_NUM_THREADS"] == "4" and env["NUMBA_NUM_THREADS"] == "4"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert report.kernel_environment(jobs=16)["OMP_NUM_THREADS"] == "1"


# --- the index as a picture --------------------------------------------------------------------------------------

def _has_headline_cell(slug: str) -> bool:
    import json

    nb = json.loads(registry.get(slug).notebook_path.read_text())
    return any("lab.viz.headline(" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("slug", registry.slugs())
def test_index_row_shows_the_notebooks_headline_figure(report_dir, slug):
    """A notebook with a headline cell gets its PNG in the index row; one without gets no image and no error."""
    import re

    folder, result = report_dir
    index = (folder / "index.html").read_text()
    section = re.search(rf'<section id="{slug}">.*?</section>', index, re.S)[0]
    png = folder / f"{slug}.headline.png"
    if _has_headline_cell(slug):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", result.output
        assert 'class="headline"' in section and "data:image/png;base64," in section
    else:
        assert not png.exists() and "<img" not in section


# --- skipping what did not change ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dam_report(tmp_path_factory):
    """One good local run of DAM's ci notebook (the reports folder), shared by the tests that copy it."""
    from lab import report

    def build(out):
        summary = report.build_report(["dam"], profile="ci", jobs=1, out=out)
        return {"all_executed": summary.all_executed, "text": summary.to_text()}

    out, summary = shared_once(tmp_path_factory, "dam-report", build)
    assert summary["all_executed"], summary["text"]
    return out


@pytest.fixture
def methods_copy(tmp_path, monkeypatch):
    """The method folders as the report's hash sees them, copied so a test can edit a method's code."""
    import shutil

    from lab import report

    copy = tmp_path / "methods"
    shutil.copytree(registry.METHODS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(report.reuse, "METHODS_DIR", copy)
    return copy


def _copy_report(src: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "reports"
    shutil.copytree(src, dst)
    return dst


def test_second_report_with_nothing_changed_executes_nothing(dam_report, tmp_path, monkeypatch):
    import time

    from lab import report

    out = _copy_report(dam_report, tmp_path)
    folder = out / "ci"
    files = [folder / "01_dam.ipynb", folder / "01_dam.html", folder / "dam.nc", folder / "dam.headline.png"]
    before = {f: f.stat().st_mtime_ns for f in files}
    monkeypatch.setattr(report.execute, "_execute", _dying_execute)  # any execution would fail the run
    start = time.perf_counter()
    summary = report.build_report(["dam"], profile="ci", jobs=1, out=out)
    seconds = time.perf_counter() - start
    assert summary.all_executed and summary.reused == ["dam"], summary.to_text()
    assert "unchanged, reused" in summary.to_text()
    assert {f: f.stat().st_mtime_ns for f in files} == before
    index = (folder / "index.html").read_text()
    assert 'class="claims"' in index and "data:image/png;base64," in index and "reused" in index
    assert seconds < 60, f"a report with nothing to run took {seconds:.1f} s"


def test_editing_a_methods_code_reruns_it_and_force_reruns_all(dam_report, tmp_path, monkeypatch, methods_copy):
    from lab import report

    out = _copy_report(dam_report, tmp_path)
    monkeypatch.setattr(report.execute, "_execute", _dying_execute)
    assert report.build_report(["dam"], profile="ci", out=out).reused == ["dam"]  # the copy hashes the same
    with open(methods_copy / "dam" / "theory.py", "a") as fh:
        fh.write("\n# an edit\n")
    summary = report.build_report(["dam"], profile="ci", out=out)
    assert summary.reused == [] and not summary.all_executed and "kernel died" in summary.runs[0].error
    assert not (out / "ci" / "dam.run.json").exists()  # a failed run leaves no stamp: the next report reruns it
    assert not (out / "ci" / "dam.headline.png").exists()  # and shows no figure of an older run


def test_force_reruns_an_unchanged_method(dam_report, tmp_path, monkeypatch):
    from lab import report

    out = _copy_report(dam_report, tmp_path)
    monkeypatch.setattr(report.execute, "_execute", _dying_execute)
    result = CliRunner().invoke(cli, ["report", "dam", "--profile", "ci", "--force", "--out", str(out)])
    assert result.exit_code == 1 and "kernel died" in result.output, result.output


def test_run_key_follows_the_notebook_the_profile_and_the_shared_code(methods_copy):
    from lab import report

    dam = registry.get("dam")
    key = report.run_key(dam, "ci")
    assert report.run_key(dam, "ci") == key and report.run_key(dam, "quick") != key
    assert report.run_key(registry.get("steer"), "ci") != key
    labels = set(report.source_files(dam))
    assert {"notebook/01_dam.ipynb", "method/model.py", "lab/report/build.py", "lab/cache/keys.py",
            "lab/core/train.py", "kernels/linear_scan.py"} <= labels  # the shared code: lab/ and kernels/
    assert not any(label.startswith("lab/methods/") for label in labels)  # a method's folder is its own
    assert not any(label.startswith("method/") and "steer" in label for label in labels)
    (methods_copy / "dam" / "extra.py").write_text("x = 1\n")
    assert report.run_key(dam, "ci") != key


# --- reports on Dask ---------------------------------------------------------------------------------------------

def test_report_on_a_dask_cluster(tmp_path, monkeypatch):
    """The notebook runs in a worker process in its own temporary folder; the executed notebook and the NetCDF come
    back as bytes and the client writes the same files and index as a local run."""
    from dask.distributed import LocalCluster

    from lab import report

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = CliRunner().invoke(cli, ["report", "dam", "--profile", "ci", "--out", str(tmp_path),
                                          "--scheduler", cluster.scheduler_address])
        assert result.exit_code == 0, result.output
        folder = tmp_path / "ci"
        for name in ("01_dam.ipynb", "01_dam.html", "dam.nc", "dam.headline.png", "dam.run.json", "index.html"):
            assert (folder / name).is_file(), name
        index = (folder / "index.html").read_text()
        assert 'id="dam"' in index and 'class="claims"' in index and "data:image/png;base64," in index
        monkeypatch.setattr(report.execute, "_execute_remote", None)  # a second report submits nothing
        again = report.build_report(["dam"], profile="ci", out=tmp_path, scheduler=cluster.scheduler_address)
        assert again.reused == ["dam"]


def test_unreachable_scheduler_is_bad_input(tmp_path, monkeypatch):
    import socket

    from lab import report

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(report.execute, "SCHEDULER_TIMEOUT_S", 1.0)
    result = CliRunner().invoke(cli, ["report", "dam", "--profile", "ci", "--out", str(tmp_path),
                                      "--scheduler", f"tcp://127.0.0.1:{port}"])
    assert result.exit_code == 2
    assert "--scheduler" in result.output and f"tcp://127.0.0.1:{port}" in result.output
    assert "running Dask scheduler" in result.output
    assert not (tmp_path / "ci").exists()  # nothing written


# --- a report that opens offline -----------------------------------------------------------------------------------

#: JavaScript: the Bokeh plots drawn on the page (a canvas with a size, also inside Bokeh's shadow roots)
_DRAWN_CANVASES_JS = """() => {
    let n = 0;
    const visit = (root) => {
        for (const el of root.querySelectorAll('*')) {
            if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) n++;
            if (el.shadowRoot) visit(el.shadowRoot);
        }
    };
    visit(document);
    return n;
}"""


def open_offline(browser, path: Path, ready: str | None = None) -> dict:
    """Open ``path`` from file:// in a fresh page whose requests to any other scheme are recorded and refused.

    Returns ``{"page", "context", "remote", "failed", "errors"}``: the URLs that tried to leave the machine, the
    requests that failed (a refused remote one, or a file the report did not ship) and the console errors."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    seen: dict = {"remote": [], "failed": [], "errors": []}

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            seen["remote"].append(r.request.url)
            r.abort("internetdisconnected")

    context.route("**/*", route)
    page = context.new_page()
    page.on("requestfailed", lambda req: seen["failed"].append(f"{req.url[:200]} ({req.failure})"))
    page.on("console", lambda msg: seen["errors"].append(msg.text[:300]) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)[:300]))
    page.goto(path.as_uri(), wait_until="load", timeout=180_000)
    if ready:
        page.wait_for_function(ready, timeout=120_000)
    page.wait_for_timeout(1000)  # late requests (fonts, lazily loaded scripts) show up here
    return {"page": page, "context": context, **seen}


def _has_tex(slug: str) -> bool:
    import json
    import re

    nb = json.loads(registry.get(slug).notebook_path.read_text())
    return any(re.search(r"\$[^$\n]+\$", "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.browser
@pytest.mark.parametrize("slug", registry.slugs())
def test_notebook_html_opens_offline(report_dir, browser, slug):
    """No request leaves the machine and none fails; the Bokeh plots draw and the equations typeset (MathJax from
    static/ beside the report)."""
    folder, result = report_dir
    path = folder / registry.get(slug).notebook.replace(".ipynb", ".html")
    assert path.exists(), result.output
    mathjax_done = ("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                    "&& MathJax.Hub.queue.running === 0")
    seen = open_offline(browser, path, ready=mathjax_done)
    try:
        page = seen["page"]
        assert seen["remote"] == [], seen["remote"]
        assert seen["failed"] == [], seen["failed"]
        assert seen["errors"] == [], seen["errors"]
        page.wait_for_function(f"() => ({_DRAWN_CANVASES_JS})() > 0", timeout=60_000)
        assert page.evaluate("window.Bokeh ? Bokeh.documents.length : 0") > 0
        if _has_tex(slug):
            assert page.locator("span.MathJax").count() > 0  # MathJax's HTML-CSS output of the equations
            assert page.locator(".MathJax_Error, .merror").count() == 0
    finally:
        seen["context"].close()


@pytest.mark.browser
def test_index_opens_offline_with_its_pictures(report_dir, browser):
    folder, result = report_dir
    seen = open_offline(browser, folder / "index.html")
    try:
        page = seen["page"]
        assert seen["remote"] == [] and seen["failed"] == [] and seen["errors"] == [], seen
        images = page.locator("figure.headline img")
        assert images.count() == sum(_has_headline_cell(s) for s in registry.slugs())
        for i in range(images.count()):
            assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 100")
    finally:
        seen["context"].close()


def test_a_cold_report_starts_the_longest_notebook_first(tmp_path, monkeypatch):
    """With nothing to reuse, notebooks start in the order of their Configs' estimated work (a stamp's seconds where
    one is left), so that no long notebook runs alone at the end (issue 43)."""
    from lab import report

    started = []

    def record(todo, out_dir, profile, jobs):
        started.extend(m.slug for m in todo)
        return iter([(m, 0.0, "not run") for m in todo])

    monkeypatch.setattr(report.build, "local_runs", record)
    slugs = ["qgpm", "dam", "psm"]
    report.build_report(slugs, profile="quick", jobs=2, out=tmp_path)
    work = {s: registry.get(s).config.from_profile("quick").run_budget().work for s in slugs}
    assert started == sorted(slugs, key=lambda s: -work[s]) and started[0] == "psm", started
    (tmp_path / "quick" / "qgpm.run.json").write_text('{"key": "old", "seconds": 1e6}')  # a stale stamp
    started.clear()
    report.build_report(slugs, profile="quick", jobs=2, out=tmp_path)
    assert started[0] == "qgpm", started
