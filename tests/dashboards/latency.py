"""How long a researcher waits on a dashboard, measured in Chromium: the first plot of a warm page, and the plots'
update after one move of the main widget (issue 43). Every dashboard's browser test ends its widget move with
:func:`timed_update` and opens the warm page again with :func:`timed_first_plot`; both assert a generous bound (the
machine is shared: the bound catches a dashboard that recomputes what it holds, not jitter) and record the seconds,
which ``LAB_LATENCY_OUT`` (a JSON file) collects, to compare with the targets a researcher expects (3 s to the first
plot, 1 s to an update)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

#: the bounds the tests assert (seconds), generous so that they do not flake on a loaded 2-core machine; the measured
#: values are written out (LAB_LATENCY_OUT), not hidden behind the bound
FIRST_PLOT_BOUND, UPDATE_BOUND = 30.0, 10.0

#: JavaScript: record the time (performance.now(), ms) of every change the server makes to a document's models,
#: leaving out the widgets themselves and style-only attributes (Panel's loading spinner), in ``window.__changes``
WATCH_JS = """() => {
    window.__changes = [];
    window.__log = [];
    const skip = new Set(['css_classes', 'stylesheets', 'loading', 'disabled', 'styles']);
    for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
        if (doc.__watched) continue;
        doc.__watched = true;
        doc.on_change((event) => {
            const model = event.model, attr = event.attr;
            if (model && model.constructor && /Slider|Select|Button|Input|Toggle|Checkbox/.test(
                    model.constructor.__name__)) return;
            if (attr && skip.has(attr)) return;
            window.__changes.push(performance.now());
            window.__log.push(
                [performance.now(), model ? model.constructor.__name__ : event.constructor.name, attr || '']);
        }, true);
    }
    return performance.now();
}"""

#: JavaScript: whether a rendered Bokeh plot (a canvas with a non-zero size) is on the page, shadow roots included
PLOT_JS = """() => {
    const walk = (root) => {
        for (const el of root.querySelectorAll('*')) {
            if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) return true;
            if (el.shadowRoot && walk(el.shadowRoot)) return true;
        }
        return false;
    };
    return walk(document);
}"""


def _record(name: str, what: str, seconds: float) -> None:
    out = os.environ.get("LAB_LATENCY_OUT")
    if not out:
        return
    path = Path(out)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.setdefault(name, {})[what] = round(seconds, 3)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def timed_first_plot(page, url: str, name: str, bound: float = FIRST_PLOT_BOUND) -> float:
    """Open ``url`` again (its data now warm) and return the seconds until its first plot is drawn; assert the
    bound."""
    start = time.perf_counter()
    page.goto(url, wait_until="commit", timeout=120_000)
    page.wait_for_function(PLOT_JS, timeout=bound * 3000, polling=50)
    seconds = time.perf_counter() - start
    _record(name, "first_plot_s", seconds)
    assert seconds <= bound, f"{name}: the first plot took {seconds:.2f} s (bound {bound} s)"
    return seconds


def timed_update(page, move: Callable[[], None], name: str, *, quiet: float = 0.6,
                 bound: float = UPDATE_BOUND) -> float:
    """Do ``move`` (one change of the dashboard's main widget) and return the seconds until the server's last change
    to the page's plots, once nothing has changed for ``quiet`` seconds; assert that something changed and the
    bound."""
    t0 = page.evaluate(WATCH_JS)
    move()
    deadline = time.perf_counter() + bound * 3
    last_count, last_seen = -1, time.perf_counter()
    while time.perf_counter() < deadline:
        count = page.evaluate("() => window.__changes.length")
        if count != last_count:
            last_count, last_seen = count, time.perf_counter()
        elif count and time.perf_counter() - last_seen >= quiet:
            break
        page.wait_for_timeout(50)
    changes = page.evaluate("() => window.__changes")
    if os.environ.get("LAB_LATENCY_DEBUG"):  # what changed when (ms after the move): for a slow dashboard
        print(name, [(round(t - t0), what, attr) for t, what, attr in page.evaluate("() => window.__log")])
    assert changes, f"{name}: moving the main widget changed no plot"
    seconds = (max(changes) - t0) / 1000
    _record(name, "update_s", seconds)
    assert seconds <= bound, f"{name}: the plots took {seconds:.2f} s to follow the widget (bound {bound} s)"
    return seconds
