"""The STEER dashboard in headless Chromium: loads cleanly, plots render, the session slider changes the plots."""

import pytest

from tests.conftest import TITLES_JS, plot_titles, wait_for_bokeh

pytestmark = pytest.mark.browser

@pytest.fixture
def ci_fits(monkeypatch, tmp_path):
    """Second-long fits (the ci profile) stored in a temporary data folder."""
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.steer import explore

    explore._fitted_cached.cache_clear()
    yield tmp_path
    explore._fitted_cached.cache_clear()


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
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
