"""Whether a dashboard's figures follow a widget in place (issue 43): the Bokeh figures on the page before a move of
the widget are the ones after it (their data changed, none was replaced by a new figure)."""

from __future__ import annotations

#: JavaScript: the ids of every Bokeh figure in the page's documents
FIGURES_JS = """() => {
    const out = [];
    for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
        for (const m of doc._all_models.values()) {
            if (m.constructor.__name__ === 'Figure') out.push(m.id);
        }
    }
    return out.sort();
}"""


def figure_ids(page) -> list[str]:
    """The ids of the Bokeh figures on ``page``, sorted."""
    return page.evaluate(FIGURES_JS)
