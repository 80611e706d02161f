"""The expressiveness dashboard: hand-built constructions answer at once, a trained class is prepared in the
background; in headless Chromium the page loads cleanly, plots render and moving the length slider changes them."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_models(monkeypatch, tmp_path):
    """Second-long trainings (the ci profile) stored in a temporary data folder."""
    from lab.methods.ssm_ltl import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.trained, live.trajectory) as path:
        yield path


def test_constructions_answer_at_once_and_trained_classes_are_prepared(ci_models):
    from dashboards.expressiveness import Dashboard

    board = Dashboard()
    ltl, psm = board.panels["ssm_ltl"], board.panels["psm"]
    assert board.ready and ltl.model == "lti_rotation"
    assert "never fails" in ltl.summary().object  # the rotation recognises (aa)* at every length
    ltl.length = 500
    assert "500 letters" in ltl.summary().object
    assert "gate01" in ltl.param.model.objects
    ltl.model = "gate01"  # a trained class: a placeholder until its training has finished
    assert "waiting" in ltl.summary().object
    settle(board, time.time() + 300)
    assert board.ready and not errors(board)
    assert "trained" in ltl.summary().object
    ltl.language = "anbncn"
    assert ltl.model in ltl.param.model.objects
    assert psm.counter().object is not None and psm.stack().object is not None


@pytest.mark.browser
def test_expressiveness_loads_and_the_length_slider_changes_the_plots(page, serve_app, ci_models):
    url = serve_app("expressiveness")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('decisions:'))", timeout=120_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('binary counter'))", timeout=60_000)
    before = plot_titles(page)
    handles = page.locator(".noUi-handle")
    maxima = [float(handles.nth(i).get_attribute("aria-valuemax")) for i in range(handles.count())]
    handle = handles.nth(maxima.index(10_000.0))  # the length slider
    handle.focus()
    handle.press("PageUp")
    deadline = time.time() + 60
    after = plot_titles(page)
    while after == before and time.time() < deadline:  # the server answers with new plots
        page.wait_for_timeout(250)
        after = plot_titles(page)
    assert after != before, before
    timed_update(page, lambda: handle.press("PageDown"), "expressiveness")  # one step of the main widget
    timed_first_plot(page, url, "expressiveness")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
