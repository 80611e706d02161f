"""The STEER dashboard: the fit is prepared in the background (then cached), and in headless Chromium the page
loads cleanly, plots render and the session slider changes the plots."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.in_place import figure_ids
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_fits(monkeypatch, tmp_path):
    """Second-long fits (the ci profile) stored in a temporary data folder."""
    from lab.methods.steer import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.fitted_model, live.explore) as path:
        yield path


def _title(pane):
    """The title of what ``pane`` shows now (a figure that follows the widgets: its frame for the current ones)."""
    import holoviews as hv

    obj = pane.object
    if isinstance(obj, hv.DynamicMap):
        obj = obj[()]
    return obj.opts.get().kwargs.get("title", "")


def test_the_fit_is_prepared_in_the_background_then_the_views_show(ci_fits):
    from dashboards.steer import Dashboard

    board = Dashboard()
    assert board.profile == "ci"
    assert not board.ready and "waiting" in board.equations().object  # a placeholder while the fit runs
    deadline = time.time() + 300
    settle(board, deadline)
    assert board.ready and not errors(board)
    assert "Inferred update equation" in board.equations().object
    activity, last = board.activity(), board.session
    assert _title(activity).startswith(f"session {last}:")
    board.session = last - 1
    assert board.activity() is activity  # the same figure: its data follow the session (issue 43)
    assert _title(activity).startswith(f"session {last - 1}:")
    assert list((ci_fits / "steer").glob("lowrank_linear-*.pt"))
    board.benchmark = "lorenz"  # a new benchmark needs a new fit: placeholders again until it is ready
    assert not board.ready
    settle(board, deadline)  # leave no fit running into the next test
    assert board.ready and "Δrho" in board.equations().object


@pytest.mark.browser
def test_steer_loads_and_the_session_slider_changes_the_plots(page, serve_app, ci_fits):
    from lab.methods.steer.config import Config

    cfg = Config.from_profile("ci")
    last = cfg.K_train + cfg.K_test - 1
    url = serve_app("steer")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(
        f"() => ({TITLES_JS})().some(t => t.startsWith('session {last}:'))", timeout=120_000
    )
    before = plot_titles(page)
    assert any("plasticity coefficients" in t for t in before), before
    assert any(t == f"true W, session {last}" for t in before), before
    assert page.get_by_text("Inferred update equation").count() >= 1
    # the session slider is the one whose range ends at the last session: step it back twice
    handles = page.locator(".noUi-handle")
    index = [float(handles.nth(i).get_attribute("aria-valuemax")) for i in range(handles.count())].index(last)
    handle = handles.nth(index)
    handle.focus()
    handle.press("ArrowLeft")
    handle.press("ArrowLeft")
    page.wait_for_function(
        f"() => ({TITLES_JS})().some(t => t.startsWith('session {last - 2}:'))", timeout=60_000
    )
    after = plot_titles(page)
    assert after != before
    assert any(t == f"true W, session {last - 2}" for t in after), after
    assert list((ci_fits / "steer").glob("lowrank_linear-*.pt")), "the fit was not cached on disk"
    figures = figure_ids(page)
    timed_update(page, lambda: handle.press("ArrowLeft"), "steer")  # one step of the main widget
    page.wait_for_function(
        f"() => ({TITLES_JS})().some(t => t.startsWith('session {last - 3}:'))", timeout=60_000
    )
    assert figure_ids(page) == figures  # the plots followed the slider in place: no figure was replaced
    timed_first_plot(page, url, "steer")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
