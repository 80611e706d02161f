"""The Hopfield dashboard in headless Chromium: loads cleanly, plots render, the alpha slider changes the plot."""

import pytest

from tests.conftest import plot_titles, wait_for_bokeh

pytestmark = pytest.mark.browser


def test_hopfield_loads_and_alpha_slider_changes_the_plot(page, serve_app):
    url = serve_app("hopfield")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(
        "() => window.Bokeh && Bokeh.documents.some(d => [...d._all_models.values()]"
        ".some(m => m.constructor.__name__ === 'Title' && m.text.includes('alpha =')))",
        timeout=60_000,
    )
    before = plot_titles(page)
    assert any("alpha = 0.04" in t for t in before), before
    # move the alpha slider with the keyboard: focus its handle and press the right arrow
    handle = page.locator(".noUi-handle").nth(1)
    handle.focus()
    for _ in range(10):
        handle.press("ArrowRight")
    page.wait_for_function(
        "(old) => { const t = []; for (const d of Bokeh.documents) for (const m of d._all_models.values())"
        " if (m.constructor.__name__ === 'Title') t.push(m.text);"
        " return t.some(x => x.includes('alpha =') && !old.includes(x)); }",
        arg=before,
        timeout=60_000,
    )
    after = plot_titles(page)
    assert after != before
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
