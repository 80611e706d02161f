"""Every dashboard has a browser test at 1400 x 900 that loads it, moves its main widget until a plot changes and
ends with :func:`tests.dashboards.waiting.assert_page_reads` (no console error, nothing wider than the window);
one of them times the main widget's update and the warm page's first plot (:mod:`tests.dashboards.latency`). The
tests themselves live beside each dashboard (``test_<name>.py``, each with its own ci-sized data); this module
holds them to that, and checks the width check on pages made to overflow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dashboards
from tests.dashboards.waiting import assert_page_reads

HERE = Path(__file__).resolve().parent
NAMES = sorted(dashboards.APPS)


def _browser_tests(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module's test functions that drive the ``page`` fixture."""
    return [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            and any(a.arg == "page" for a in node.args.args)]


def _calls(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == name for n in ast.walk(fn))


def _marked_browser(tree: ast.Module, fn: ast.FunctionDef) -> bool:
    module_mark = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                      and "browser" in ast.unparse(n.value) for n in tree.body)
    return module_mark or any("browser" in ast.unparse(d) for d in fn.decorator_list)


@pytest.mark.parametrize("name", NAMES)
def test_the_dashboard_has_a_browser_test_that_ends_with_the_page_check(name):
    path = HERE / f"test_{name}.py"
    assert path.exists(), f"dashboard {name} has no tests/dashboards/test_{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tests = _browser_tests(tree)
    assert tests, f"{path.name}: no test drives the browser page"
    for fn in tests:
        assert _marked_browser(tree, fn), f"{path.name}::{fn.name} is not marked browser"
        assert _calls(fn, "serve_app"), f"{path.name}::{fn.name} does not serve the dashboard"
        assert _calls(fn, "assert_page_reads"), f"{path.name}::{fn.name} does not end with assert_page_reads(page)"
    # issue 43: the waits a researcher meets, measured in Chromium (tests/dashboards/latency.py)
    for timed in ("timed_update", "timed_first_plot"):
        assert any(_calls(fn, timed) for fn in tests), f"{path.name}: no browser test measures {timed}"


@pytest.mark.browser
def test_the_page_check_catches_a_page_wider_than_the_window(page):
    assert page.viewport_size == {"width": 1400, "height": 900}
    page.set_content("<div style='width:1300px'>fits</div>")
    assert_page_reads(page)
    page.set_content("<div style='width:1700px'>too wide</div>")
    with pytest.raises(AssertionError, match="scrollWidth"):
        assert_page_reads(page)
    # inside a shadow root (where Bokeh draws), clipped so the page itself does not scroll
    page.set_content("<div id='host' style='width:1000px; overflow:hidden'></div><script>"
                     "document.getElementById('host').attachShadow({mode: 'open'}).innerHTML = "
                     "\"<canvas style='width:1600px; height:10px; display:block'></canvas>\";</script>")
    with pytest.raises(AssertionError, match="canvas ends at 1608 px"):
        assert_page_reads(page)
    page.set_content("<script>console.error('boom')</script>")
    with pytest.raises(AssertionError, match="boom"):
        assert_page_reads(page)
