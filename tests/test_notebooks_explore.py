"""The notebooks as a reader meets them: papermill's help, the Explore cell (a dashboard panel inline in JupyterLab, a
note under Papermill), plots that need no CDN; and, marked slow, JupyterLab itself in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from lab import registry
from lab.config import field_specs
from lab.notebooks import type_word
from tests.conftest import CHROMIUM_ARGS, free_port

SLUGS = registry.slugs()
EXPLORE_NOTE = "*Explore.*"


def _cells(slug: str) -> list[dict]:
    return json.loads(registry.get(slug).notebook_path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("slug", SLUGS)
def test_help_notebook_shows_each_type_and_what_is_allowed_once(slug):
    """`papermill --help-notebook` printed "Unknown type" for every parameter and each choice list twice."""
    import papermill as pm

    params = pm.inspect_notebook(str(registry.get(slug).notebook_path))
    assert params["profile"]["inferred_type_name"] == "str"
    for name, spec in field_specs(registry.get(slug).config).items():
        assert params[name]["inferred_type_name"] == type_word(spec), name
        allowed = spec.allowed()
        if allowed:
            assert params[name]["help"].count(allowed.split(",")[0]) == 1, params[name]["help"]


@pytest.mark.parametrize("slug", SLUGS)
def test_a_notebook_ends_with_explore_when_its_method_has_a_dashboard(slug):
    cells = _cells(slug)
    explore = [c for c in cells if "explore(" in "".join(c["source"])]
    if not registry.get(slug).dashboards:
        assert not explore, f"{slug} has no dashboard to explore"
        return
    md, code = cells[-2:]
    assert md["cell_type"] == "markdown" and "".join(md["source"]).startswith("## Explore")
    assert "".join(code["source"]).endswith(f'explore("{slug}", result)')
    assert registry.get(slug).dashboards[0] in "".join(md["source"])


@pytest.mark.parametrize("slug", [s for s in SLUGS if registry.get(s).dashboards])
def test_every_method_with_a_dashboard_has_a_panel_to_explore(slug):
    from dashboards.notebook import panel_type
    from dashboards.panels import MethodPanel

    board, cls = panel_type(slug)
    assert board in registry.get(slug).dashboards and issubclass(cls, MethodPanel) and cls.method == slug


def test_explore_is_a_note_where_nobody_can_interact(monkeypatch):
    from dashboards.notebook import EXPLORE_ENV, explore, interactive

    monkeypatch.delenv(EXPLORE_ENV, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert not interactive()
    note = explore("rem")
    assert note.data.startswith(EXPLORE_NOTE) and "`forgetting`" in note.data
    monkeypatch.setenv("JPY_SESSION_NAME", "/somewhere/17_rem.ipynb")  # what a Jupyter server sets
    assert interactive()
    monkeypatch.setenv(EXPLORE_ENV, "0")
    assert not interactive()


def test_explore_starts_the_panel_at_the_runs_profile_and_values(monkeypatch):
    """Live: the method's panel over the run's profile, its Config-field widgets at the run's values."""
    import panel as pn

    import lab
    from dashboards.notebook import explore, start_panel

    result = lab.run("dam", "ci", progress=False)
    panel, line = start_panel("dam", result)
    assert panel.profile == "ci" and panel.N == result.config.N and panel.trials == result.config.trials
    assert "`N`" in line and "profile `ci`" in line
    column = explore("dam", result, live=True)
    assert isinstance(column, pn.Column) and column.objects[0].object == line


@pytest.mark.notebook
def test_notebook_with_explore_runs_under_papermill_without_cdn(tmp_path, monkeypatch):
    """The Explore cell is a note in a Papermill run, no output is an error, and no output points at a CDN."""
    import papermill as pm

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)  # as from a shell, even when pytest runs in JupyterLab
    monkeypatch.delenv("LAB_EXPLORE", raising=False)
    nb = registry.get("dam").notebook_path
    out = tmp_path / "dam.ipynb"
    pm.execute_notebook(str(nb), str(out), cwd=str(nb.parent), progress_bar=False, parameters={"profile": "ci"},
                        kernel_name="python3")
    cells = json.loads(out.read_text(encoding="utf-8"))["cells"]
    outputs = [o for c in cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "cdn.holoviz.org" not in json.dumps(outputs)
    (last,) = cells[-1]["outputs"]
    assert "".join(last["data"]["text/markdown"]).startswith(EXPLORE_NOTE)


# -- JupyterLab in Chromium ----------------------------------------------------------------------------------------
_KERNEL_IDLE = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return k && k.status === 'idle'; }"""
_ALL_RUN = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .every(c => c.model.type !== 'code' || c.model.executionCount !== null)"""


@pytest.fixture
def jupyter_lab(tmp_path):
    """A JupyterLab on a free localhost port over ``tmp_path``, with a token; yields ``(url_of, root)``."""
    port, token = free_port(), "explore-test"
    root = tmp_path / "root"
    root.mkdir()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTERLAB_WORKSPACES_DIR":
           str(tmp_path / "workspaces"), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    env.pop("LAB_EXPLORE", None)
    log = (tmp_path / "jupyter.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError((tmp_path / "jupyter.log").read_text()[-2000:]) from None
                time.sleep(0.3)
        yield (lambda name: f"http://127.0.0.1:{port}/lab/tree/{name}?token={token}"), root
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


@pytest.mark.slow
@pytest.mark.browser
def test_explore_panel_lives_in_jupyterlab_offline(jupyter_lab, tmp_path):
    """01_dam at ci in JupyterLab: run all; the hopfield panel appears in the last cell, nothing is fetched from
    outside localhost, no console error, and moving a widget (the update rule) redraws a plot."""
    from playwright.sync_api import sync_playwright

    url_of, root = jupyter_lab
    nb = json.loads(registry.get("dam").notebook_path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if "parameters" in cell["metadata"].get("tags", []):
            cell["source"] = "".join(cell["source"]).replace('profile = "quick"', 'profile = "ci"')
    (root / "dam.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    outside, errors = [], []
    local = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("request", lambda r: None if r.url.startswith(local) else outside.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url_of("dam.ipynb"))
        page.wait_for_function(_KERNEL_IDLE, timeout=90_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_function(_ALL_RUN, timeout=240_000)
        page.wait_for_function(_KERNEL_IDLE, timeout=60_000)
        last = page.locator(".jp-Notebook .jp-Cell").last
        last.scroll_into_view_if_needed()
        button = last.get_by_role("button", name="async")
        button.wait_for(timeout=60_000)
        plot = last.locator(".bk-Figure, .bk-figure").first
        plot.wait_for(timeout=60_000)
        time.sleep(2)
        last.screenshot(path=str(tmp_path / "explore-cell.png"))
        before = plot.screenshot(path=str(tmp_path / "explore-before.png"))
        button.click()
        deadline, after = time.time() + 60, before
        while after == before and time.time() < deadline:
            time.sleep(1)
            after = plot.screenshot(path=str(tmp_path / "explore-after.png"))
        browser.close()
    assert after != before, "moving the update rule did not redraw the plot"
    assert not outside, f"requests to outside hosts: {sorted(set(outside))[:5]}"
    assert not errors, errors[:5]
