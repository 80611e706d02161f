"""``lab serve``'s own index page: every dashboard with its title, description, methods and a thumbnail that loads,
offline (no request leaves 127.0.0.1) and with no console error."""

from __future__ import annotations

import html
import io
import time
import urllib.request

import pytest

import dashboards
from dashboards import index
from tests.conftest import free_port, wait_for_bokeh
from tests.dashboards.waiting import stop_servers


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """A quick report folder holding one headline figure (dam's, 900 x 600): hopfield gets it, the rest a
    placeholder."""
    from PIL import Image

    folder = tmp_path / "reports" / "quick"
    folder.mkdir(parents=True)
    Image.new("RGB", (900, 600), (200, 30, 30)).save(folder / "dam.headline.png")
    monkeypatch.setattr(index, "report_dirs", lambda: [folder])
    return folder


def test_thumbnail_is_the_shrunk_headline_figure_else_a_placeholder(reports):
    from PIL import Image

    data, kind = index.thumbnail("Hopfield: x", ("dam",))
    assert kind == "image/png"
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (450, 300)  # fits THUMB_SIZE, aspect kept
    data, kind = index.thumbnail("Agents: y", ("rate", "lwail"))
    assert kind == "image/svg+xml" and data.startswith(b"<svg") and b"Agents" in data
    (reports / "lwail.headline.png").write_bytes(b"not a png")
    assert index.thumbnail("Agents: y", ("rate", "lwail"))[1] == "image/svg+xml"  # broken file: placeholder


def test_the_page_lists_every_dashboard_with_its_title_description_and_methods():
    page = index.index_html(index._cards(list(dashboards.APPS)))
    assert "http://" not in page and "https://" not in page and "<script" not in page
    for info in dashboards.describe_dashboards():
        title = str(dashboards._apps()[info.name]["TITLE"])
        for text in (title, info.description, *info.slugs):
            assert html.escape(text) in page, (info.name, text)
        assert f'href="./{info.name}"' in page


@pytest.fixture
def served_all():
    """Every dashboard served on a free port (none is built until its page opens); yields the base URL."""

    port = free_port()
    server = dashboards.serve_apps(list(dashboards.APPS), port=port, threaded=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=2)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    yield base
    stop_servers(server)


@pytest.mark.browser
def test_index_is_offline_clean_and_links_every_dashboard(page, served_all, reports, monkeypatch):
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    requests, failed = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(served_all + "/", wait_until="networkidle", timeout=60_000)
    assert page.title() == "recurrent-lab dashboards"
    outside = [u for u in requests if not u.startswith("http://127.0.0.1:")]
    assert outside == [], outside
    assert failed == [] and page.console_errors == [], (failed, page.console_errors)
    cards = page.locator("a.card")
    assert cards.count() == len(dashboards.APPS)
    hrefs = cards.evaluate_all("cs => cs.map(c => c.href)")
    assert hrefs == [f"{served_all}/{name}" for name in dashboards.APPS]
    sizes = page.locator("a.card img").evaluate_all("im => im.map(i => [i.complete, i.naturalWidth])")
    assert all(done and width > 0 for done, width in sizes), sizes  # every thumbnail loaded
    kinds = page.evaluate("() => Promise.all([...document.querySelectorAll('a.card img')].map("
                          "i => fetch(i.src).then(r => r.headers.get('content-type'))))")
    assert kinds[list(dashboards.APPS).index("hopfield")] == "image/png"
    assert kinds.count("image/svg+xml") == len(dashboards.APPS) - 1
    widest = page.evaluate("() => document.documentElement.scrollWidth")
    assert widest <= 1400
    page.locator('a.card[data-app="hopfield"]').click()  # a card opens its app
    page.wait_for_url(f"{served_all}/hopfield", timeout=60_000)
    wait_for_bokeh(page)
    assert [e for e in page.console_errors if "favicon" not in e] == []
