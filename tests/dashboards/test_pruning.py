"""The pruning dashboard in headless Chromium: trains its (ci-sized) model on first use, loads without console
errors, and moving the ratio slider changes the plots."""

import pytest
from playwright.sync_api import expect

from tests.conftest import plot_titles, wait_for_bokeh, wait_for_title
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, drain_preparations

pytestmark = pytest.mark.browser


def _forget():
    from lab.methods.aire_prune import live

    for fn in (live.task, live.trained, live.curves, live.pruned):
        fn.cache_clear()


@pytest.fixture
def ci_dashboard(monkeypatch, tmp_path):
    """The dashboard on the ci profile with an empty data directory: the first load trains in seconds."""
    drain_preparations()
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    _forget()
    yield tmp_path
    drain_preparations()
    _forget()


def test_pruning_dashboard_ratio_slider_changes_the_plots(ci_dashboard, page, serve_app):
    url = serve_app("pruning")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_title(page, timeout=120_000, fragment="ratio = 0.50")  # after the first-use training and sweep
    wait_for_bokeh(page)
    wait_for_title(page, timeout=120_000, fragment="kernel norm per lag")  # the last plot may render later
    assert list((ci_dashboard / "aire_prune").glob("*.pt")), "the trained weights were not cached"
    summary = page.get_by_text("ratio 0.50:")
    expect(summary).to_contain_text("states kept, test accuracy")
    before_summary = summary.inner_text()
    before = plot_titles(page)
    assert any("kernel norm per lag" in t for t in before), before

    handle = page.locator(".pruning-ratio .noUi-handle")
    handle.focus()
    for _ in range(6):  # 0.50 -> 0.80
        handle.press("ArrowRight")
    wait_for_title(page, timeout=120_000, fragment="ratio = 0.80")
    new_summary = page.get_by_text("ratio 0.80:")  # the summary is redrawn for the new ratio
    expect(new_summary).to_be_visible(timeout=30_000)
    expect(new_summary).to_contain_text("states kept, test accuracy")
    assert new_summary.inner_text() != before_summary
    after = plot_titles(page)
    assert after != before
    assert any("ratio = 0.80" in t and "kept" in t for t in after), after
    timed_update(page, lambda: handle.press("ArrowLeft"), "pruning")  # one step of the main widget
    timed_first_plot(page, url, "pruning")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
