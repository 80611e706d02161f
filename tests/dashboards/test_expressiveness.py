"""The expressiveness dashboard: hand-built constructions answer at once, a trained class is prepared in the
background; in headless Chromium the page loads cleanly, plots render and moving the length slider changes them."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh


@pytest.fixture
def ci_models(monkeypatch, tmp_path):
    """Second-long trainings (the ci profile) stored in a temporary data folder."""
    from lab.methods.ssm_ltl import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.trained, live.trajectory) as path:
        yield path


def test_constructions_answer_at_once_and_trained_classes_are_prepared(ci_models):
    from dashboards.expressiveness import Dashboard

    board = Dashboard()
    assert board.ready and board.model == "lti_rotation"
    assert "never fails" in board.summary().object  # the rotation recognises (aa)* at every length
    board.length = 500
    assert "500 letters" in board.summary().object
    assert "gate01" in board.param.model.objects
    board.model = "gate01"  # a trained class: a placeholder until its training has finished
    deadline = time.time() + 300
    while board.job.running and time.time() < deadline:
        time.sleep(0.2)
        board.job._poll()
    assert board.ready and not board.job.error
    assert "trained" in board.summary().object
    board.language = "anbncn"
    assert board.model in board.param.model.objects
    assert board.counter().object is not None and board.stack().object is not None


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
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
