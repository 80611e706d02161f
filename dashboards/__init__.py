"""Panel dashboards, thin over ``lab``: each composes one or more method panels (:mod:`dashboards.panels`).

``lab serve`` serves them all (or some) on localhost with the lab's index page (:mod:`dashboards.index`); beyond
localhost only with a login (:mod:`dashboards.security`). Every module ``dashboards/<name>.py`` that declares
``METHOD`` is an app: ``METHOD`` is the slug it shows (or a tuple of slugs, its own first), ``TITLE`` its page title,
``DESCRIPTION`` one line for ``lab serve --list`` and the index, and ``Dashboard`` its class (a
:class:`~dashboards.panels.MethodPanel` or a :class:`~dashboards.panels.MethodDashboard`). The declarations are read
without importing the apps (:func:`describe_dashboards`); an app's module is imported only when it is served.
"""

from __future__ import annotations

import ast
import importlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = ["APPS", "DashboardInfo", "app_factory", "describe_dashboards", "quiet_closed_pages", "serve_apps"]

_HERE = Path(__file__).resolve().parent


class DashboardInfo(NamedTuple):
    """A dashboard: its name (the module's), its one-line description and the slugs of the methods it shows."""

    name: str
    description: str
    slugs: tuple[str, ...]


def _declarations(path: Path) -> dict[str, object]:
    out = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("METHOD", "TITLE", "DESCRIPTION")):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def _apps() -> dict[str, dict[str, object]]:
    """Every app module's declarations by name (a module without ``METHOD`` is a shared one, not an app)."""
    found = {}
    for path in sorted(_HERE.glob("*.py")):
        if not path.stem.startswith("_"):
            decl = _declarations(path)
            if "METHOD" in decl:
                found[path.stem] = decl
    return found


def describe_dashboards() -> list[DashboardInfo]:
    """Every dashboard as ``(name, description, slugs)``: its one-line description and the methods it shows, read
    from the modules without importing them (listing stays light)."""
    out = []
    for name, decl in _apps().items():
        method = decl["METHOD"]
        slugs = (method,) if isinstance(method, str) else tuple(method)
        out.append(DashboardInfo(name, str(decl.get("DESCRIPTION", "")), slugs))
    return out


#: every app's name -> ``"module:Dashboard"``
APPS: dict[str, str] = {name: f"dashboards.{name}:Dashboard" for name in _apps()}


def app_factory(name: str) -> Callable[[], object]:
    """A function that builds a fresh app (one per browser session)."""
    module, _, cls = APPS[name].partition(":")

    def build():
        board = getattr(importlib.import_module(module), cls)()
        return board.__panel__()

    build.__name__ = name
    return build


#: loggers that report a message to a page closed meanwhile (a tab closed or reloaded while a plot or a progress bar
#: was being sent): Bokeh's and Panel's warning, asyncio's "Task exception was never retrieved", tornado's callback
_CLOSED_PAGE_LOGGERS = ("bokeh.server.views.ws", "panel.io.document", "asyncio", "tornado.application")


class _ClosedPageFilter(logging.Filter):
    """Drops the records of a write to a websocket its page closed: the reader left, nothing is lost (the work goes
    on and caches its result) and nothing is to be done; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        from tornado.iostream import StreamClosedError
        from tornado.websocket import WebSocketClosedError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (WebSocketClosedError, StreamClosedError)):
            return False
        return "connection was closed" not in record.getMessage()


_CLOSED_PAGE_FILTER = _ClosedPageFilter()


def quiet_closed_pages() -> None:
    """Silence the logs of messages sent to a page that has just closed (:class:`_ClosedPageFilter`); idempotent."""
    for name in _CLOSED_PAGE_LOGGERS:
        logger = logging.getLogger(name)
        if _CLOSED_PAGE_FILTER not in logger.filters:
            logger.addFilter(_CLOSED_PAGE_FILTER)


def serve_apps(names: Sequence[str], *, port: int = 5006, address: str = "127.0.0.1", show: bool = False,
               threaded: bool = False, start: bool = True, basic_auth: str | None = None,
               allow_origins: Sequence[str] = (), allow_full: bool = False, max_jobs: int | None = None):
    """Serve the named apps with the lab's index page (:mod:`dashboards.index`) listing them at ``/``; blocks until
    stopped unless ``threaded``.

    Safe to expose (:mod:`dashboards.security`): an address beyond loopback needs credentials (``basic_auth``, a
    password or a JSON file of users and passwords, else ``$LAB_SERVE_PASSWORD``, else Panel's OAuth from
    ``$PANEL_OAUTH_PROVIDER``; ``ConfigError`` without), a request naming a host other than the bound address, the
    localhost forms and ``allow_origins`` (``HOST:PORT``) is answered 403, and the pages' work is bounded
    (:data:`dashboards.preparation.LIMITS`: ``max_jobs`` preparations waiting or running at once, the ``full``
    profile only with ``allow_full``)."""
    from dashboards import security
    from dashboards.index import index_patterns
    from dashboards.preparation import configure
    from lab import setup_process

    unknown = [n for n in names if n not in APPS]
    if unknown:
        raise ValueError(f"unknown dashboard(s) {', '.join(unknown)}; known dashboards: {', '.join(APPS)}")
    creds = security.credentials(basic_auth)
    security.check_exposure(address, creds)
    security.allowed_hosts(address, port, allow_origins)  # refuses a malformed --allow-origin before serving
    configure(max_jobs=max_jobs, allow_full=allow_full)
    setup_process()
    quiet_closed_pages()
    titles = {name: str(decl.get("TITLE", name)) for name, decl in _apps().items()}
    login = {} if creds is None else creds.serve_kwargs()
    return security.serve_guarded(
        {name: app_factory(name) for name in names},
        address=address,
        port=port,
        extra_hosts=allow_origins,
        show=show,
        title={n: titles[n] for n in names},
        extra_patterns=index_patterns(names),
        threaded=threaded,
        start=start,
        **login,
    )
