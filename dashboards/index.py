"""The index page of ``lab serve``: one card per served dashboard with its title, its one-line description, the
methods it shows and a thumbnail; served by the lab itself (two Tornado handlers), nothing fetched from another
host. Both handlers ask for the server's login like Bokeh's own pages do (when the server has one).

A dashboard's thumbnail is its first method's headline figure from the last quick report
(``reports/quick/<slug>.headline.png``, shrunk), the next method's when the first has none, else a plain placeholder
drawn here: an image request never answers 404. This module is a helper, not an app: it declares no ``METHOD``.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from bokeh.server.views.auth_request_handler import AuthRequestHandler
from tornado.web import HTTPError, authenticated

__all__ = ["THUMB_SIZE", "index_html", "index_patterns", "placeholder_svg", "report_dirs", "thumbnail"]

_ROOT = Path(__file__).resolve().parent.parent
#: the largest thumbnail, width x height in pixels (the headline figure is shrunk to fit, keeping its aspect)
THUMB_SIZE = (480, 300)

STYLE = """
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;
     background:#f3f5f8;color:#1d2733}
header{background:#1f5fa8;color:white;padding:18px 32px}
header h1{margin:0;font-size:24px;font-weight:600}
header p{margin:6px 0 0;font-size:14px;opacity:.9}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:24px;padding:24px 32px;
     max-width:1400px;box-sizing:border-box}
a.card{display:flex;flex-direction:column;background:white;border:1px solid #d5dbe3;border-radius:6px;
       color:inherit;text-decoration:none;overflow:hidden}
a.card:hover,a.card:focus{border-color:#1f5fa8;box-shadow:0 3px 10px rgba(31,95,168,.25)}
a.card img{width:100%;height:190px;object-fit:contain;background:white;border-bottom:1px solid #e3e7ed}
.body{padding:12px 16px 16px}
.body h2{font-size:17px;margin:0 0 6px;color:#1f5fa8}
.body p{font-size:14px;margin:0 0 10px;line-height:1.4}
.body ul{list-style:none;margin:0;padding:0;font-size:13px;color:#4a5563}
.body li{margin:2px 0}
.body code{background:#eef1f5;border-radius:3px;padding:0 4px;color:#1d2733}
"""


def report_dirs() -> list[Path]:
    """Where a quick report's headline figures may be: ``reports/quick`` under the working folder, then the
    repository's (``lab report`` writes under the working folder)."""
    dirs = [Path.cwd() / "reports" / "quick", _ROOT / "reports" / "quick"]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def _headline_file(slugs: Sequence[str], dirs: Sequence[Path]) -> Path | None:
    for slug in slugs:
        for folder in dirs:
            path = folder / f"{slug}.headline.png"
            if path.is_file():
                return path
    return None


@lru_cache(maxsize=64)
def _shrunk_png(path: Path, mtime: float) -> bytes:
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGBA")
        image.thumbnail(THUMB_SIZE, Image.Resampling.LANCZOS)
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def placeholder_svg(title: str) -> bytes:
    """A neutral placeholder thumbnail: a light panel with a few grey bars and the dashboard's short title."""
    short = html.escape(title.split(":")[0])
    bars = "".join(f'<rect x="{70 + 60 * i}" y="{200 - h}" width="36" height="{h}" fill="#c9d2de"/>'
                   for i, h in enumerate((60, 95, 45, 120, 80, 105)))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="480" height="300" viewBox="0 0 480 300">'
            f'<rect width="480" height="300" fill="#f7f9fb"/><line x1="50" y1="200" x2="440" y2="200" '
            f'stroke="#9aa6b5" stroke-width="2"/>{bars}<text x="240" y="250" text-anchor="middle" '
            f'font-family="sans-serif" font-size="22" fill="#6b7685">{short}</text>'
            f'<text x="240" y="276" text-anchor="middle" font-family="sans-serif" font-size="13" fill="#8a94a2">'
            f"no report figure yet (lab report)</text></svg>").encode()


def thumbnail(title: str, slugs: Sequence[str], dirs: Sequence[Path] | None = None) -> tuple[bytes, str]:
    """``(image, content type)``: the shrunk headline figure of the first of ``slugs`` that has one in ``dirs``
    (default :func:`report_dirs`), else :func:`placeholder_svg`."""
    path = _headline_file(slugs, report_dirs() if dirs is None else dirs)
    if path is not None:
        try:
            return _shrunk_png(path, path.stat().st_mtime), "image/png"
        except OSError:  # unreadable or not an image: the placeholder rather than a broken card
            pass
    return placeholder_svg(title), "image/svg+xml"


def index_html(cards: Sequence[dict]) -> str:
    """The page: one card per dashboard (``name``, ``title``, ``description``, ``methods`` as (slug, title))."""
    items = []
    for card in cards:
        name = html.escape(card["name"])
        methods = "".join(f"<li><code>{html.escape(slug)}</code> {html.escape(title)}</li>"
                          for slug, title in card["methods"])
        items.append(
            f'<a class="card" href="./{name}" data-app="{name}">'
            f'<img src="./index-thumbnail/{name}" alt="thumbnail of {name}" width="480" height="300">'
            f'<div class="body"><h2>{html.escape(card["title"])}</h2><p>{html.escape(card["description"])}</p>'
            f"<ul>{methods}</ul></div></a>")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>recurrent-lab dashboards</title><style>{STYLE}</style></head><body>"
            "<header><h1>recurrent-lab dashboards</h1><p>Each dashboard explores one or more methods live, on the "
            "cached runs of its profile. Thumbnails: the headline figure of the last quick report.</p></header>"
            f'<main>{"".join(items)}</main></body></html>')


def _cards(names: Sequence[str]) -> list[dict]:
    from dashboards import _apps, describe_dashboards
    from lab.registry import methods

    titles = {m.slug: m.title for m in methods()}
    decl = _apps()
    infos = {d.name: d for d in describe_dashboards()}
    return [{"name": n, "title": str(decl[n].get("TITLE", n)), "description": infos[n].description,
             "slugs": infos[n].slugs, "methods": [(s, titles.get(s, "")) for s in infos[n].slugs]} for n in names]


class _IndexHandler(AuthRequestHandler):
    def initialize(self, page: str) -> None:
        self.page = page

    @authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.write(self.page)


class _ThumbnailHandler(AuthRequestHandler):
    def initialize(self, cards: dict[str, dict], dirs: Sequence[Path] | None) -> None:
        self.cards, self.dirs = cards, dirs

    @authenticated
    def get(self, name: str) -> None:
        card = self.cards.get(name)
        if card is None:
            raise HTTPError(404)
        data, kind = thumbnail(card["title"], card["slugs"], self.dirs)
        self.set_header("Content-Type", kind)
        self.set_header("Cache-Control", "no-cache")
        self.write(data)


def index_patterns(names: Sequence[str], dirs: Sequence[Path] | None = None) -> list[tuple]:
    """Tornado routes of the index page (``/``) and its thumbnails, for ``pn.serve(extra_patterns=...)``: they
    come before Bokeh's own root handler, so they replace Panel's stock index."""
    cards = _cards(names)
    return [(r"/?", _IndexHandler, {"page": index_html(cards)}),
            (r"/index-thumbnail/(\w+)", _ThumbnailHandler, {"cards": {c["name"]: c for c in cards}, "dirs": dirs})]
