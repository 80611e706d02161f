"""The agents dashboard: RATE's agent and the profile's success curves are prepared in the background (then
cached; two named preparations of RATE's panel), LWAIL's agent in its own panel's; in headless Chromium the page
loads cleanly, the rollout, the valve's attention and the maps render, and choosing another agent changes the
rollout shown."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_agents(monkeypatch, tmp_path):
    """Second-long trainings (the ci profile) stored in a temporary data folder."""
    from lab.methods.lwail import live as lwail_live
    from lab.methods.rate import live

    fns = (live.trained, live.rollout, live._run, lwail_live.agent, lwail_live.rollout, lwail_live.phi_distance_map,
           lwail_live.reward_map)
    with ci_dashboard_data(monkeypatch, tmp_path, *fns) as path:
        yield path


def _title(obj):
    return obj.opts.get().kwargs.get("title", "")


def test_agents_are_prepared_in_the_background_then_the_views_follow_the_choice(ci_agents):
    from dashboards.agents import Dashboard

    board = Dashboard()
    rate, lwail = board.panels["rate"], board.panels["lwail"]
    assert board.profile == "ci" and rate.variant == "rate"
    assert "waiting" in rate.summary().object  # a placeholder while the agent trains
    deadline = time.time() + 600
    settle(rate, deadline, "agent")
    assert rate.preparations["agent"].ready and not errors(rate), errors(rate)
    assert "clue" in rate.summary().object
    assert _title(rate.path().object).startswith("RATE, corridor of 30 steps")
    rate.corridor_length = 90
    assert "corridor of 90 steps" in _title(rate.path().object)
    memory = rate.memory()  # a row: the attention at every boundary, the last boundary's matrix
    assert "segment boundar" in _title(memory[0].object)  # the valve's attention at every boundary
    settle(rate, deadline, "curves")
    success = _title(rate.success().object)
    assert success, "the success curve has a title"
    rate.variant = "dt_short"  # a new agent: placeholders again until it is trained
    assert not rate.ready and "waiting" in rate.summary().object
    settle(rate, deadline)
    assert rate.ready and "no memory valve" in rate.memory().object
    settle(lwail, deadline)
    assert not errors(lwail), errors(lwail)
    row = lwail.path()
    assert len(row) == 2  # the rollout over the maze and the φ-distance map
    assert lwail.reward().object is not None


@pytest.mark.browser
def test_agents_loads_and_a_longer_corridor_changes_the_rollout(page, serve_app, ci_agents):
    url = serve_app("agents")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.includes('corridor of 30 steps'))",
                           timeout=300_000)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('Valve attention'))", timeout=60_000)
    before = plot_titles(page)
    handles = page.locator(".noUi-handle")  # the corridor-length slider: the one whose range ends at 3000
    maxima = [float(handles.nth(i).get_attribute("aria-valuemax")) for i in range(handles.count())]
    handle = handles.nth(maxima.index(3000.0))
    handle.focus()
    handle.press("ArrowRight")
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.includes('corridor of 31 steps'))",
                           timeout=60_000)
    assert plot_titles(page) != before
    timed_update(page, lambda: handle.press("ArrowLeft"), "agents")  # one step of the main widget
    timed_first_plot(page, url, "agents")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
