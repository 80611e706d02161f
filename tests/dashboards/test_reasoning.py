"""The reasoning dashboard: the tool-use panel's two models and ChainGPT's model are prepared in the background (then
cached), and in headless Chromium the page loads cleanly, the tape and digit plots render and moving the step slider
changes the tape shown."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_models(monkeypatch, tmp_path):
    """Second-long trainings (the ci profile) stored in a temporary data folder."""
    from lab.methods.chaingpt import live as chain_live
    from lab.methods.tool_ssm import live

    fns = (live.trained_model, live.episode, chain_live.stopping_trace)
    with ci_dashboard_data(monkeypatch, tmp_path, *fns) as path:
        yield path


def test_models_are_prepared_in_the_background_then_the_views_show(ci_models):
    from dashboards.reasoning import Dashboard

    board = Dashboard()
    tools = board.panels["tool_ssm"]
    assert board.profile == "ci"
    assert "waiting" in tools.summary().object  # a placeholder while the models train
    deadline = time.time() + 300
    settle(board, deadline)
    assert board.ready and not errors(board), errors(board)
    assert "20-digit add" in tools.summary().object
    last = tools.param.step.bounds[1]
    assert tools.step == last and last > 42  # the 42-token question and at least one model token
    tools.step = 3
    assert "step 3:" in tools.tape().object.opts.get().kwargs["title"]
    assert len(list((ci_models / "tool_ssm").glob("add-mamba-*.pt"))) == 2  # with and without the tool, on disk
    tools.model = "gru"  # a new model needs new training: placeholders again until it is ready
    assert not tools.ready
    settle(board, deadline)
    assert tools.ready and "gru" in tools.summary().object


def test_chaingpt_iterations_per_token(ci_models):
    from dashboards.reasoning import ChainPanel

    chain = ChainPanel()
    settle(chain, time.time() + 300)
    assert not errors(chain), errors(chain)
    title = chain.iterations().object.opts.get().kwargs["title"]
    assert title.startswith("iterations per token") and f"length {chain.length}" in title
    chain.tau = 0.0  # never stop early: every token takes the maximum depth
    title = chain.iterations().object.opts.get().kwargs["title"]
    assert "mean 3.00 of 3" in title or "τ = 0" in title


@pytest.mark.browser
def test_reasoning_loads_and_the_step_slider_changes_the_tape(page, serve_app, ci_models):
    url = serve_app("reasoning")
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
    timed_update(page, lambda: handle.press("ArrowLeft"), "reasoning")  # one step of the main widget
    timed_first_plot(page, url, "reasoning")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
