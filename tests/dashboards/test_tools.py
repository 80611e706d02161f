"""The tools dashboard: the two models are prepared in the background (then cached), and in headless Chromium the
page loads cleanly, the tape and digit plots render and moving the step slider changes the tape shown."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh, wait_for_job


@pytest.fixture
def ci_models(monkeypatch, tmp_path):
    """Second-long trainings (the ci profile) stored in a temporary data folder."""
    from lab.methods.chaingpt import live as chain_live
    from lab.methods.tool_ssm import live

    fns = (live.trained_model, live.episode, chain_live.stopping_trace)
    with ci_dashboard_data(monkeypatch, tmp_path, *fns) as path:
        yield path


def test_models_are_prepared_in_the_background_then_the_views_show(ci_models):
    from dashboards.tools import Dashboard

    board = Dashboard()
    assert board.profile == "ci"
    assert "waiting" in board.summary().object  # a placeholder while the models train
    deadline = time.time() + 300
    wait_for_job(board.job, deadline)
    assert board.ready and not board.job.error
    assert "20-digit add" in board.summary().object
    last = board.param.step.bounds[1]
    assert board.step == last and last > 42  # the 42-token question and at least one model token
    board.step = 3
    assert "step 3:" in board.tape().object.opts.get().kwargs["title"]
    assert len(list((ci_models / "tool_ssm").glob("add-mamba-*.pt"))) == 2  # with and without the tool, on disk
    board.model = "gru"  # a new model needs new training: placeholders again until it is ready
    assert not board.ready
    wait_for_job(board.job, deadline)
    assert board.ready and "gru" in board.summary().object


def test_chaingpt_iterations_per_token(ci_models):
    from dashboards.tools import Dashboard

    board = Dashboard()
    deadline = time.time() + 300
    while board.chain_job.running and time.time() < deadline:
        time.sleep(0.2)
        board.chain_job._poll()
    assert not board.chain_job.error, board.chain_job.error
    pane = board.chain()
    title = pane.object.opts.get().kwargs["title"]
    assert title.startswith("iterations per token") and f"length {board.chain_length}" in title
    board.chain_tau = 0.0  # never stop early: every token takes the maximum depth
    assert "mean 3.00 of 3" in board.chain().object.opts.get().kwargs["title"] or "τ = 0" in \
        board.chain().object.opts.get().kwargs["title"]
    wait_for_job(board.job, deadline)


@pytest.mark.browser
def test_tools_loads_and_the_step_slider_changes_the_tape(page, serve_app, ci_models):
    url = serve_app("tools")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('step '))", timeout=120_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.includes('digits right'))", timeout=60_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('iterations per token'))",
                           timeout=120_000)
    before = plot_titles(page)
    assert any("digits right" in t for t in before), before
    assert page.get_by_text("with the tool").count() >= 1
    # the step slider starts at the end of the episode; it is the one whose range is neither length's (300),
    # problem's (50) nor seed's (1000): step it back twice
    handles = page.locator(".noUi-handle")
    maxima = [float(handles.nth(i).get_attribute("aria-valuemax")) for i in range(handles.count())]
    index = next(i for i, m in enumerate(maxima) if m not in (300.0, 50.0, 1000.0))
    last = int(maxima[index])
    assert any(t.startswith(f"step {last}:") for t in before), before
    handle = handles.nth(index)
    handle.focus()
    handle.press("ArrowLeft")
    handle.press("ArrowLeft")
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('step {last - 2}:'))", timeout=60_000)
    after = plot_titles(page)
    assert after != before
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
