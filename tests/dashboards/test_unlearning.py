"""The unlearning dashboard: REM's grid is computed in the background (then cached), WSC's accuracy matrix in a
second job and QGPM's runs in a third; in headless Chromium the page loads cleanly, the heat maps render and choosing
another corruption changes the cell shown."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh, wait_for_job


@pytest.fixture
def ci_grid(monkeypatch, tmp_path):
    """Second-long runs (the ci profile) stored in a temporary data folder."""
    from lab.methods.qgpm import live as qgpm_live
    from lab.methods.rem import live
    from lab.methods.wsc import live as wsc_live

    fns = (live.grid, live.redirected, wsc_live.accuracy_matrix, qgpm_live.accuracy_matrix,
           qgpm_live.memory_vs_accuracy)
    with ci_dashboard_data(monkeypatch, tmp_path, *fns) as path:
        yield path


def _title(pane):
    obj = pane.object
    return obj.opts.get().kwargs.get("title", "")


def test_grid_is_prepared_in_the_background_then_the_views_follow_the_cell(ci_grid):
    from dashboards.unlearning import Dashboard

    board = Dashboard()
    assert board.profile == "ci" and board.corruption == "backdoor" and board.rate == 0.5
    assert "waiting" in board.cell().object
    deadline = time.time() + 300
    wait_for_job(board.job, deadline)
    assert board.ready and not board.job.error, board.job.error
    assert list(ci_grid.glob("rem-grid-*.nc"))  # the grid is on disk
    row = board.cell()
    assert _title(row[0]).startswith("backdoor, discovery 0.5")
    board.corruption, board.rate = "random", 1.0
    assert _title(board.cell()[0]).startswith("random, discovery 1")
    redirected = board.redirected()
    assert "random at 1" in _title(redirected)
    grids = board.grids().object
    assert len(grids) == 7  # every method but the second REM run
    wait_for_job(board.wsc_job, deadline)
    assert not board.wsc_job.error, board.wsc_job.error
    assert _title(board.wsc()).startswith("WSC wsc: accuracy matrix")
    board.wsc_variant = "replay"
    wait_for_job(board.wsc_job, deadline)
    assert _title(board.wsc()).startswith("WSC replay")
    wait_for_job(board.qgpm_job, deadline)
    assert not board.qgpm_job.error, board.qgpm_job.error
    assert _title(board.qgpm()[0]).startswith("QGPM ")


@pytest.mark.browser
def test_unlearning_loads_and_the_corruption_select_changes_the_cell(page, serve_app, ci_grid):
    url = serve_app("unlearning")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('backdoor, discovery 0.5'))",
                           timeout=180_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('REM: mean'))", timeout=60_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('REM seed'))", timeout=60_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('WSC wsc'))", timeout=180_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('QGPM '))", timeout=240_000)
    before = plot_titles(page)
    assert any(t.startswith("NPO: mean") for t in before), before
    assert any(t.startswith("REM seed") for t in before), before
    select = page.locator("select", has=page.locator("option", has_text="backdoor"))  # the corruption
    assert select.count() == 1
    select.select_option(label="random")
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('random, discovery 0.5'))",
                           timeout=60_000)
    after = plot_titles(page)
    assert after != before
    assert not any(t.startswith("random, discovery") for t in before), before
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
