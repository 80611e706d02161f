"""The Hopfield dashboard: widgets from the dam Config; in headless Chromium it loads cleanly, plots render and the
alpha slider changes the plot."""

import pytest

from tests.conftest import plot_titles, wait_for_bokeh
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads


def test_widgets_come_from_the_config_bounds_and_docs():
    from dashboards import hopfield
    from lab.config import field_specs
    from lab.methods.dam.config import Config

    specs = field_specs(Config)
    assert hopfield.METHOD == "dam"
    for name in ("N", "trials", "seed"):
        p = hopfield.Dashboard.param[name]
        assert p.doc == specs[name].doc
        assert all(specs[name].range.contains(b) for b in p.bounds), (name, p.bounds)
    assert hopfield.Dashboard.param["update"].objects == list(specs["update"].choices)
    assert all(specs["n"].range.contains(k) for k in hopfield.Dashboard.param["n"].objects)


def test_alpha_bounds_follow_n_and_N():
    from dashboards.hopfield import Dashboard, alpha_max

    d = Dashboard(n=3, N=1000)
    assert d.param.alpha.bounds[1] == pytest.approx(alpha_max(3, 1000)) and d.alpha <= alpha_max(3, 1000)
    d.n = 2
    assert d.param.alpha.bounds[1] == pytest.approx(0.3)


@pytest.mark.browser
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
    timed_update(page, lambda: handle.press("ArrowLeft"), "hopfield")  # one step of the main widget
    timed_first_plot(page, url, "hopfield")  # the page opened again
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window


def test_every_widget_is_labelled_in_one_style():
    """Panel draws button groups bare: n and the update rule get a label line; labels are sentence case, symbols
    (n, N, α, m0) as symbols."""
    import panel as pn

    from dashboards.hopfield import Dashboard

    d = Dashboard()
    layout = d.widgets(d.controls, **d.widget_options).layout
    objects = list(layout)
    groups = [i for i, w in enumerate(objects) if isinstance(w, pn.widgets.RadioButtonGroup)]
    assert len(groups) == 2
    for i in groups:
        assert isinstance(objects[i - 1], pn.pane.HTML) and objects[i].name in objects[i - 1].object
    names = [w.name for w in objects if isinstance(w, pn.widgets.Widget)]
    assert names == ["n (interaction order)", "N (spins)", "α (load P / N^(n-1))", "m0 (initial overlap)", "Trials",
                     "Update rule", "Seed"]
