"""The arena dashboard: the grid is prepared in the background (then cached), theory's text follows the chosen
cell, and in headless Chromium the page loads cleanly and the test-length buttons change the heat map."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_grid(monkeypatch, tmp_path):
    """The ci profile's grid (seconds) in a temporary data folder."""
    from lab.methods.arena import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.grid) as path:
        yield path


def test_the_grid_is_prepared_then_the_views_follow_the_cell(ci_grid):
    from dashboards.arena import Dashboard
    from lab.methods.arena.config import Config

    board = Dashboard()
    assert board.profile == "ci"
    assert not board.ready and "waiting" in board.theory().object  # a placeholder while the grid runs
    settle(board, time.time() + 300)
    assert board.ready and not errors(board)
    assert list(board.param.factor.objects) == list(Config.from_profile("ci").test_factors)
    board.task, board.model = "parity", "gla_neg"
    assert "can solve it at every length" in board.theory().object
    board.model = "gla"
    assert "cannot solve it at every length" in board.theory().object
    assert list(ci_grid.glob("arena-grid-*.nc")), "the grid was not cached on disk"


@pytest.mark.browser
def test_arena_loads_and_the_length_buttons_change_the_heat_map(page, serve_app, ci_grid):
    url = serve_app("arena")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('Accuracy at 4x'))", timeout=300_000)
    before = plot_titles(page)
    assert any(t.startswith("parity: accuracy against length") for t in before), before
    page.get_by_role("button", name="2", exact=True).click()
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('Accuracy at 2x'))", timeout=60_000)
    assert plot_titles(page) != before
    assert page.get_by_text("Theory").count() >= 1
    timed_update(page, lambda: page.get_by_role("button", name="4", exact=True).click(), "arena")  # main widget
    timed_first_plot(page, url, "arena")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
