"""The RecurrSim dashboard in headless Chromium: trains its (ci-sized) model on first use with a progress bar, loads
without console errors, moving K changes the prediction, and the rollout animation advances."""

import pytest

from tests.conftest import TITLES_JS, plot_titles, wait_for_bokeh, wait_for_title
from tests.dashboards.waiting import assert_page_reads

pytestmark = pytest.mark.browser


@pytest.fixture
def ci_dashboard(monkeypatch, tmp_path):
    """The dashboard on the ci profile with an empty data directory: the first load trains in seconds."""
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.recurrsim import live

    live.clear_memory()
    yield
    live.clear_memory()


def test_recurrsim_dashboard_k_slider_and_animation(ci_dashboard, page, serve_app):
    url = serve_app("recurrsim")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_title(page, "prediction, K = 8")  # after the first-use training finished
    wait_for_title(page, "frame 0")
    wait_for_bokeh(page)
    summary = page.get_by_text("rollout nRMSE")
    before_summary = summary.inner_text()
    before = plot_titles(page)
    assert any(t.startswith("frame 0") for t in before), before

    # moving K changes the prediction: the plots are redrawn for the new K and the rollout's error changes
    handle = page.locator(".recurrsim-k .noUi-handle")
    handle.focus()
    for _ in range(6):  # 8 -> 2
        handle.press("ArrowLeft")
    wait_for_title(page, "prediction, K = 2")
    page.wait_for_function("(old) => !document.body.innerText.includes(old)", arg=before_summary, timeout=30_000)
    after_summary = page.get_by_text("rollout nRMSE").inner_text()
    assert "K = 2" in after_summary and after_summary != before_summary

    # the animation advances: press play and wait for a later frame in the line plot's title
    page.locator(".recurrsim-player button.play").click()
    page.wait_for_function(
        f"() => ({TITLES_JS})().some(t => /^frame [1-9]/.test(t))", timeout=30_000
    )
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
