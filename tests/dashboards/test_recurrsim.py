"""The RecurrSim dashboard in headless Chromium: it opens on the fluid (2-D Navier-Stokes, ci-sized, trained on first
use), every equation the profile offers animates (the frame's data change while the player runs), moving K changes
the prediction, and the server logs no error or traceback while it happens."""

import logging
import time

import pytest
from playwright.sync_api import expect

from tests.conftest import TITLES_JS, plot_titles, wait_for_bokeh, wait_for_title
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, drain_preparations

pytestmark = pytest.mark.browser

#: JavaScript: a fingerprint of the data every frame glyph draws (the 2-D fields' images, the 1-D frame's lines),
#: by plot id, so a test can see the pictures change rather than their titles only
FRAME_DATA_JS = """() => {
    const out = {};
    const sum = (a) => { let s = 0; for (let i = 0; i < a.length; i++) s += (i % 97 + 1) * a[i]; return s; };
    for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
        for (const m of doc._all_models.values()) {
            if (!m.renderers || !m.title || !m.title.text || !/frame \\d/.test(m.title.text)) continue;
            let s = 0;
            for (const r of m.renderers) {
                const data = r.data_source ? r.data_source.data : null;
                if (!data) continue;
                for (const col of ['image', 'u', 'y']) {
                    if (data[col]) for (const a of (col === 'image' ? data[col] : [data[col]])) s += sum(a);
                }
            }
            out[m.id] = s;
        }
    }
    return out;
}"""


@pytest.fixture
def ci_dashboard(monkeypatch, tmp_path):
    """The dashboard on the ci profile with an empty data directory: the first load trains in seconds."""
    drain_preparations()
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.recurrsim import live

    live.clear_memory()
    yield
    drain_preparations()
    live.clear_memory()


def _frame(page, pattern: str) -> int:
    """The frame number in the title matching ``pattern`` (a JavaScript regular expression with one group)."""
    return max(int(m) for m in page.evaluate(
        f"() => ({TITLES_JS})().map(t => (t.match(/{pattern}/) || [null, -1])[1])"))


def _plays(page, pattern: str, timeout: float = 120.0) -> None:
    """Press play until the animation has shown three frames, pause: the frame glyphs' data changed meanwhile."""
    before = page.evaluate(FRAME_DATA_JS)
    assert before, plot_titles(page)
    seen = {_frame(page, pattern)}
    player = page.locator(".recurrsim-player")
    player.locator("button.play").click()
    deadline = time.time() + timeout
    while len(seen) < 3 and time.time() < deadline:
        page.wait_for_timeout(100)
        seen.add(_frame(page, pattern))
    player.locator("button.pause").click()
    assert len(seen) >= 3 and -1 not in seen, (seen, plot_titles(page))
    after = page.evaluate(FRAME_DATA_JS)
    changed = [k for k in before if k in after and after[k] != before[k]]
    assert changed, (before, after)


def _server_errors(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.ERROR or r.exc_info or "Traceback" in r.getMessage()]


def test_recurrsim_dashboard_animates_every_equation(ci_dashboard, page, serve_app, caplog):
    from dashboards.recurrsim import EQUATION_LABELS
    from lab.methods.recurrsim import Config

    caplog.set_level(logging.WARNING)
    equations = Config.from_profile("ci").equations
    assert "navier_stokes" in equations
    url = serve_app("recurrsim")
    page.goto(url, wait_until="networkidle", timeout=120_000)

    # it opens on the fluid: truth and prediction fields side by side at the chosen K, frame 0
    wait_for_title(page, "prediction, K = 8, frame 0")
    wait_for_title(page, "ground truth, frame 0")
    wait_for_bokeh(page)
    expect(page.get_by_text("waiting for")).to_have_count(0, timeout=60_000)  # no view left waiting beside them
    _plays(page, r"ground truth, frame (\d+), t =")

    select = page.locator(".recurrsim-equation select")
    for eq in equations:
        if eq == "navier_stokes":
            continue
        select.select_option(label=EQUATION_LABELS[eq])
        wait_for_title(page, "prediction, K = 8")  # 1-D space-time view, after the first-use training
        page.wait_for_function(f"() => ({TITLES_JS})().some(t => /^frame \\d/.test(t))", timeout=90_000)
        _plays(page, r"^frame (\d+), t =")

    # moving K changes the prediction: the plots are redrawn for the new K and the rollout's error changes
    summary = page.get_by_text("rollout nRMSE")
    before_summary = summary.inner_text()
    handle = page.locator(".recurrsim-k .noUi-handle")
    handle.focus()
    for _ in range(6):  # 8 -> 2
        handle.press("ArrowLeft")
    wait_for_title(page, "prediction, K = 2")
    page.wait_for_function("(old) => !document.body.innerText.includes(old)", arg=before_summary, timeout=120_000)
    after_summary = page.get_by_text("rollout nRMSE").inner_text()
    assert "K = 2" in after_summary and after_summary != before_summary
    timed_update(page, lambda: handle.press("ArrowRight"), "recurrsim")  # one step of the main widget
    timed_first_plot(page, url, "recurrsim")  # the page opened again, its data warm

    assert _server_errors(caplog) == []
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
