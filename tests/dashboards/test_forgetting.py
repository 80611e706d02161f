"""The forgetting dashboard: REM's grid and a cell's REM model are computed in the background (then cached), QGPM's
runs and WSC's accuracy matrix in their own panels' preparations; in headless Chromium the page loads cleanly, the
heat maps render and choosing another corruption changes the cell shown."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.in_place import figure_ids
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


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
    """The title of what ``pane`` shows now (a figure that follows the widgets: its frame for the current ones)."""
    import holoviews as hv

    obj = pane.object
    if isinstance(obj, hv.DynamicMap):
        obj = obj[()]
    return obj.opts.get().kwargs.get("title", "")


def test_grid_is_prepared_in_the_background_then_the_views_follow_the_cell(ci_grid):
    from dashboards.forgetting import Dashboard

    board = Dashboard()
    rem, qgpm, wsc = (board.panels[slug] for slug in ("rem", "qgpm", "wsc"))
    assert board.profile == "ci" and rem.corruption == "backdoor" and rem.rate == 0.5
    assert "waiting" in rem.cell().object
    deadline = time.time() + 300
    settle(rem, deadline, "grid")
    assert rem.preparations["grid"].ready and not errors(rem), errors(rem)
    assert list(ci_grid.glob("rem-grid-*.nc"))  # the grid is on disk
    row = rem.cell()
    assert _title(row[0]).startswith("backdoor, discovery 0.5")
    rem.corruption, rem.rate = "random", 1.0
    assert rem.cell() is row  # the same figures: their data follow the cell (issue 43: no figure rebuilt)
    assert _title(row[0]).startswith("random, discovery 1")
    assert "waiting" in rem.redirected().object  # the cell's REM model trains in the background, not in the view
    settle(rem, deadline)
    shown = rem.redirected()
    assert "random at 1" in _title(shown)
    rem.corruption = "backdoor"  # a cell whose model is not trained: the figure stays, emptied, while it trains
    assert rem.redirected() is shown and _title(shown).startswith("waiting for REM's model of the cell")
    settle(rem, deadline)
    assert rem.redirected() is shown and "backdoor at 1" in _title(shown)
    caption, grids = rem.grids()
    assert len(grids) == 7  # every method but the second REM run, one pane each
    settle(wsc, deadline)
    assert not errors(wsc), errors(wsc)
    assert _title(wsc.matrix()).startswith("WSC wsc: accuracy matrix, ACC")
    matrix = wsc.matrix()
    wsc.variant = "replay"
    settle(wsc, deadline)
    assert wsc.matrix() is matrix and _title(matrix).startswith("WSC replay")
    settle(qgpm, deadline)
    assert not errors(qgpm), errors(qgpm)
    assert _title(qgpm.matrix()[0]).startswith("QGPM ")


@pytest.mark.browser
def test_forgetting_loads_and_the_corruption_select_changes_the_cell(page, serve_app, ci_grid):
    url = serve_app("forgetting")
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
    figures = figure_ids(page)
    timed_update(page, lambda: select.select_option(label="backdoor"), "forgetting")  # back: warm
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('backdoor, discovery 0.5'))",
                           timeout=60_000)
    assert figure_ids(page) == figures  # the plots followed the cell in place: no figure was replaced
    timed_first_plot(page, url, "forgetting")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
