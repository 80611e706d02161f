"""Panel dashboards, thin over ``lab``: one :class:`dashboards.viewer.MethodViewer` per app.

``lab serve`` serves them all (or some) on localhost with an index page. Every module ``dashboards/<name>.py``
(but ``viewer.py`` and names starting with ``_``) is an app: it declares ``METHOD`` (the slug it shows, or a tuple of
slugs, its own first), ``TITLE`` and ``Dashboard`` (its viewer class). ``APPS`` maps each name to
``"module:Dashboard"``; the module is imported only when the app is served.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path

APPS: dict[str, str] = {
    p.stem: f"dashboards.{p.stem}:Dashboard"
    for p in sorted(Path(__file__).resolve().parent.glob("*.py"))
    if not p.stem.startswith("_") and p.stem != "viewer"
}


def app_factory(name: str) -> Callable[[], object]:
    """A function that builds a fresh app (one per browser session)."""
    module, _, cls = APPS[name].partition(":")

    def build():
        viewer = getattr(importlib.import_module(module), cls)()
        return viewer.__panel__()

    build.__name__ = name
    return build


def serve_apps(names: Sequence[str], *, port: int = 5006, address: str = "127.0.0.1", show: bool = False,
               threaded: bool = False, start: bool = True):
    """Serve the named apps with Panel's index page listing them; blocks until stopped unless ``threaded``."""
    import panel as pn

    from lab.core.runtime import setup_process

    setup_process()
    unknown = [n for n in names if n not in APPS]
    if unknown:
        raise ValueError(f"unknown dashboard(s) {', '.join(unknown)}; known dashboards: {', '.join(APPS)}")
    apps = {name: app_factory(name) for name in names}
    return pn.serve(
        apps,
        port=port,
        address=address,
        websocket_origin=[f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"],
        show=show,
        title={n: getattr(importlib.import_module(f"dashboards.{n}"), "TITLE", n) for n in names},
        threaded=threaded,
        start=start,
    )
