"""Shared fixtures: a headless Chromium page (Debian's chromium driven by Playwright) and served dashboards."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
import urllib.request

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (Debian's package; `make test` installs it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: run `make test` (as root it installs Debian's chromium) or "
                    "`apt-get install chromium`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page that records console errors in ``page.console_errors``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.console_errors = []
    pg.on("console", lambda msg: pg.console_errors.append(msg.text) if msg.type == "error" else None)
    pg.on("pageerror", lambda exc: pg.console_errors.append(str(exc)))
    yield pg
    context.close()


@pytest.fixture
def serve_app():
    """Factory: serve_app(name) serves dashboards/<name>.py on a free localhost port and returns its URL."""
    from dashboards import serve_apps
    from tests.dashboards.waiting import stop_servers

    servers = []

    def start(name: str) -> str:
        port = free_port()
        server = serve_apps([name], port=port, address="127.0.0.1", threaded=True)
        servers.append(server)
        url = f"http://127.0.0.1:{port}/{name}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
                return url
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"dashboard {name} did not come up on port {port}")

    yield start
    stop_servers(*servers)


#: JavaScript returning the text of every Bokeh plot title on the page: what the plots currently show.
TITLES_JS = """() => {
    const out = [];
    for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
        for (const m of doc._all_models.values()) {
            if (m.constructor.__name__ === 'Title') out.push(m.text);
        }
    }
    return out;
}"""


def plot_titles(page) -> list[str]:
    return page.evaluate(TITLES_JS)


def wait_for_title(page, fragment: str, timeout: float = 90_000) -> None:
    """Wait until some plot title contains ``fragment``."""
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.includes({fragment!r}))", timeout=timeout)


def wait_for_bokeh(page, timeout: float = 60_000) -> None:
    """Wait until at least one Bokeh plot canvas is rendered."""
    page.wait_for_selector(".bk-Canvas, canvas", state="attached", timeout=timeout)


os.environ.setdefault("LAB_TEST", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):  # share the cores between the workers rather than oversubscribe them
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


def shared_once(tmp_path_factory, name: str, build):
    """``build(folder) -> dict`` (JSON) run once per test run, shared by every pytest-xdist worker and every re-setup
    of a fixture: the first to ask builds it under a file lock, the others wait and read it. Returns
    ``(folder, dict)``."""
    import json

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder, done = root / name, root / f"{name}.done.json"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(build(folder)))
    return folder, json.loads(done.read_text())


@pytest.fixture(scope="session")
def ci_result():
    """``ci_result(slug)``: the method's ``ci`` run (``lab.RunResult``), computed once per test session and shared by
    the contract test and the method's own tests."""
    import lab

    runs: dict = {}

    def get(slug: str):
        if slug not in runs:
            runs[slug] = lab.run(slug, "ci", progress=False)
        return runs[slug]

    return get


@contextlib.contextmanager
def ci_dashboard_data(monkeypatch, tmp_path, *fns):
    """A dashboard test's setting: the ci profile, an empty data folder ``tmp_path``, and the given memoised live
    functions emptied before and after (a fixture does ``with ci_dashboard_data(...) as path: yield path``)."""
    from tests.dashboards.waiting import drain_preparations

    drain_preparations()  # nothing left running from an earlier test
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    for fn in fns:
        fn.cache_clear()
    try:
        yield tmp_path
    finally:
        drain_preparations()  # its pages' jobs end here, in its data folder
        for fn in fns:
            fn.cache_clear()


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``), keep together on one worker what shares a
    session fixture: a method's tests (its ``ci_result`` run is computed once), and the tests of one module-scoped
    fixture (the ci report's notebooks execute once)."""
    from lab import registry

    slugs = set(registry.slugs())
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        callspec = getattr(item, "callspec", None)
        slug = callspec.params.get("slug") if callspec else None
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if module.startswith("test_") and module[5:] in slugs:
            slug = module[5:]
        fixtures = set(getattr(item, "fixturenames", ()))
        if module == "test_report":
            group = "report"  # report_dir and dam_report: one execution of the notebooks each
        elif "ci_result" in fixtures and slug in slugs:
            group = f"method-{slug}"
        elif slug in slugs and module.startswith("test_") and module[5:] == slug:
            group = f"method-{slug}"
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))


def assert_trained_here_as_pooled(monkeypatch, tmp_path, n_threads: int, pooled: list, train_here) -> None:
    """The trainings of a worker pool (``pooled``: cached runs with ``.model`` and ``.loaded``) against
    ``train_here()``, the same trainings in this process under ``n_threads`` threads (as each worker trains) into an
    empty cache ``tmp_path / "here"``: each trains anew and gives the pooled weights bit for bit."""
    import torch

    from lab.core.runtime import threads

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "here"))
    with threads(n_threads):
        here = train_here()
    assert len(here) == len(pooled)
    for a, b in zip(pooled, here):
        assert not b.loaded
        for (key, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
            assert torch.equal(x, y), key
