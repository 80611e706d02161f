"""Serving the dashboards beyond this machine safely: who may log in, which hosts a request may name, the server.

The rules :func:`dashboards.serve_apps` (and ``lab serve``) apply before anything is served:

- A loopback address (``127.0.0.1``, ``::1``, ``localhost``) needs no login; credentials, when given, are used.
- Any other address needs credentials, else :func:`check_exposure` refuses it (a one-line ``ConfigError`` naming
  ``--address``). Credentials (:func:`credentials`) are one of

  * a password (at least :data:`MIN_PASSWORD` characters, any user name) or a JSON file ``{"user": "password"}``
    (each password as long), from ``--basic-auth`` or ``$LAB_SERVE_PASSWORD`` (Panel's basic auth);
  * Panel's OAuth, configured by Panel's own environment variables: ``PANEL_OAUTH_PROVIDER`` (one of Panel's
    providers), ``PANEL_OAUTH_KEY`` and ``PANEL_OAUTH_SECRET`` (required here), and optionally
    ``PANEL_OAUTH_REDIRECT_URI``, ``PANEL_OAUTH_ENCRYPTION``, ``PANEL_OAUTH_EXTRA_PARAMS``.

  The login cookie is signed with ``$LAB_SERVE_COOKIE_SECRET`` (at least 32 characters) or with a secret drawn afresh
  for each server process (a restart logs everyone out).
- Every request's ``Host`` header and every websocket's ``Origin`` must be one of :func:`allowed_hosts`: the bound
  address and the localhost forms with the port, the machine's name when bound to every interface, and each
  ``--allow-origin HOST:PORT``. A request naming another host is answered 403 before any of Panel's or Bokeh's
  handlers runs (:func:`guard_hosts`; DNS rebinding gets nothing).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tornado.routing import Matcher, Rule
from tornado.web import RequestHandler

from lab.checks import ConfigError, bad_value

__all__ = ["COOKIE_ENV", "LOOPBACK", "MIN_PASSWORD", "PASSWORD_ENV", "Credentials", "allowed_hosts",
           "check_exposure", "credentials", "guard_hosts", "is_loopback", "serve_guarded"]

#: addresses that only this machine reaches
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: the environment variable holding the password (or a JSON file of users and passwords)
PASSWORD_ENV = "LAB_SERVE_PASSWORD"
#: the environment variable holding the secret that signs the login cookie (drawn per process when unset)
COOKIE_ENV = "LAB_SERVE_COOKIE_SECRET"
#: the shortest password accepted; the shortest cookie secret accepted
MIN_PASSWORD, MIN_COOKIE_SECRET = 8, 32
#: Panel's OAuth settings this module requires (the provider, and the app's key and secret at the provider)
OAUTH_ENV = ("PANEL_OAUTH_PROVIDER", "PANEL_OAUTH_KEY", "PANEL_OAUTH_SECRET")
_WILDCARD = ("0.0.0.0", "::", "")
EXPOSURE_ALLOWED = (f"a loopback address ({', '.join(LOOPBACK)}); any other only with credentials: a password "
                    f"(--basic-auth or ${PASSWORD_ENV}) or Panel's OAuth (${', $'.join(OAUTH_ENV)})")
log = logging.getLogger(__name__)


def is_loopback(address: str) -> bool:
    """Whether ``address`` is reached from this machine only."""
    return address.strip().lower().strip("[]") in LOOPBACK


@dataclass(frozen=True)
class Credentials:
    """How a browser logs in: a password (or users and passwords), or Panel's OAuth; the cookie's secret."""

    basic_auth: str | dict[str, str] | None = None
    oauth_provider: str | None = None
    cookie_secret: str = field(default="", repr=False)

    def serve_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``panel.serve`` that turn the login on."""
        out: dict[str, Any] = {"cookie_secret": self.cookie_secret}
        if self.basic_auth is not None:
            out["basic_auth"] = self.basic_auth
        else:
            out["oauth_provider"] = self.oauth_provider
        return out

    def __repr__(self) -> str:  # never print a password
        kind = "basic auth" if self.basic_auth is not None else f"OAuth ({self.oauth_provider})"
        return f"Credentials({kind})"


def _password(value: str, name: str) -> str:
    if len(value) < MIN_PASSWORD or not value.strip():
        shown = "''" if not value else f"({len(value)} characters)"  # never echo a password
        raise ConfigError(f"{name}={shown} is not allowed; allowed: a password of at least {MIN_PASSWORD} "
                          "characters, or a JSON file of {\"user\": \"password\"}")
    return value


def _users(path: Path, name: str) -> dict[str, str]:
    allowed = f"a JSON file of {{\"user\": \"password\"}}, each password at least {MIN_PASSWORD} characters"
    try:
        users = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise bad_value(name, str(path), f"{allowed} ({type(exc).__name__} reading it)") from None
    if not isinstance(users, dict) or not users:
        raise bad_value(name, str(path), allowed)
    for user, password in users.items():
        if not user.strip() or not isinstance(password, str) or len(password) < MIN_PASSWORD:
            raise bad_value(name, str(path), f"{allowed} (user {user!r} has none that long)")
    return users


def credentials(basic_auth: str | None = None, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The server's credentials: ``basic_auth`` (``--basic-auth``) or ``$LAB_SERVE_PASSWORD``, a password or a JSON
    file of users and passwords; else Panel's OAuth when ``$PANEL_OAUTH_PROVIDER`` is set; ``None`` when none is
    given. Weak or broken ones raise ``ConfigError`` (an empty or short password, an unreadable file, a half-set
    OAuth, a short ``$LAB_SERVE_COOKIE_SECRET``)."""
    env = os.environ if environ is None else environ
    name, value = ("--basic-auth", basic_auth) if basic_auth is not None else (f"${PASSWORD_ENV}",
                                                                                env.get(PASSWORD_ENV))
    provider = env.get("PANEL_OAUTH_PROVIDER", "").strip().lower()
    if value is not None and provider:
        raise bad_value(name, "(set)", f"one way to log in: a password or PANEL_OAUTH_PROVIDER={provider!r}, "
                        "not both")
    secret = env.get(COOKIE_ENV) or secrets.token_urlsafe(48)
    if len(secret) < MIN_COOKIE_SECRET:
        raise bad_value(f"${COOKIE_ENV}", f"({len(secret)} characters)",
                        f"a secret of at least {MIN_COOKIE_SECRET} characters, or unset (one drawn per process)")
    if value is not None:
        path = Path(value).expanduser()
        auth = _users(path, name) if value and path.is_file() else _password(value, name)
        return Credentials(basic_auth=auth, cookie_secret=secret)
    if not provider:
        return None
    from panel.auth import AUTH_PROVIDERS

    if provider not in AUTH_PROVIDERS:
        raise bad_value("$PANEL_OAUTH_PROVIDER", provider, ", ".join(sorted(AUTH_PROVIDERS)))
    missing = [k for k in OAUTH_ENV[1:] if not env.get(k)]
    if missing:
        raise bad_value(f"${missing[0]}", "", f"the OAuth app's {missing[0][12:].lower()} at {provider} "
                        f"(PANEL_OAUTH_PROVIDER={provider} needs {', '.join(OAUTH_ENV[1:])})")
    return Credentials(oauth_provider=provider, cookie_secret=secret)


def check_exposure(address: str, creds: Credentials | None) -> None:
    """Refuse to bind ``address`` beyond this machine without credentials (``ConfigError`` naming --address)."""
    if creds is None and not is_loopback(address):
        raise bad_value("--address", address, EXPOSURE_ALLOWED)


def _host_port(host: str, port: int) -> str:
    host = host.strip().lower()
    return f"[{host.strip('[]')}]:{port}" if ":" in host.strip("[]") else f"{host}:{port}"


def _origin(value: str) -> str:
    allowed = "HOST:PORT, a host name or address and a port in [1, 65535] (no wildcard)"
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host.strip("[]") or "*" in value or "/" in value or not port.isdigit():
        raise bad_value("--allow-origin", value, allowed)
    if not 1 <= int(port) <= 65535:
        raise bad_value("--allow-origin", value, allowed)
    return _host_port(host, int(port))


def allowed_hosts(address: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """The ``HOST:PORT`` forms a request may name: the bound address and the localhost forms with ``port``, the
    machine's name when bound to every interface, and each of ``extra`` (``--allow-origin``, checked)."""
    names = [address, "localhost", "127.0.0.1", "::1"]
    if address.strip("[]") in _WILDCARD:
        names = [socket.gethostname(), *names[1:]]
    hosts = [_host_port(n, port) for n in names] + [_origin(e) for e in extra]
    return list(dict.fromkeys(hosts))


def _normal_host(host: str) -> str:
    host = host.strip().lower()
    bare = host.rsplit("]", 1)[-1] if host.startswith("[") else host
    return host if ":" in bare else f"{host}:80"


class _ForeignHost(Matcher):
    """Matches a request whose ``Host`` header is none of the allowed ones."""

    def __init__(self, hosts: Sequence[str]):
        self.hosts = frozenset(hosts)

    def match(self, request) -> dict | None:
        return None if _normal_host(request.host or "") in self.hosts else {}


class _RefuseHost(RequestHandler):
    """Answers 403 with one line, whatever the method and the path."""

    def prepare(self) -> None:
        host = self.request.host
        log.warning("refused a request for host %r (%s %s)", host, self.request.method, self.request.path)
        self.set_status(403)
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        self.finish(f"Host {host!r} is not allowed; allowed: the hosts this server was started for "
                    "(lab serve --allow-origin HOST:PORT adds one)\n")


def guard_hosts(app, hosts: Sequence[str]) -> None:
    """Answer 403 to any request of the Tornado application ``app`` whose Host header is not in ``hosts``: a rule
    ahead of every route (Bokeh checks only the websocket's Origin). Also sets the websocket origins to ``hosts``."""
    app.default_router.rules.insert(0, Rule(_ForeignHost(hosts), _RefuseHost))
    if hasattr(app, "_websocket_origins"):  # Bokeh's list, built from the port asked for (0: any free one)
        app._websocket_origins = set(hosts)


def serve_guarded(apps: dict, *, address: str, port: int, extra_hosts: Sequence[str] = (), threaded: bool = False,
                  start: bool = True, **kwargs):
    """``panel.serve`` of ``apps`` with :func:`guard_hosts` in place before the first request is read: the server
    is built unstarted, guarded, then started (in a thread of its own when ``threaded``, as ``panel.serve`` does).
    Returns the Bokeh server, or the thread (``stop()`` ends it)."""
    from panel.io.server import get_server
    from panel.io.state import state
    from panel.io.threads import StoppableThread
    from tornado.ioloop import IOLoop

    def build(**opts):
        server = get_server(apps, port=port, address=address, start=False, verbose=True, **opts)
        hosts = allowed_hosts(address, server.port, extra_hosts)
        guard_hosts(server._tornado, hosts)
        return server

    def run(**opts):
        server = build(**opts)
        server.start()
        try:
            server.io_loop.start()
        except RuntimeError:  # already running (a notebook's loop)
            pass
        return server

    # Bokeh parses no bracketed IPv6 form; guard_hosts sets the full list once the server is built
    kwargs["websocket_origin"] = [h for h in allowed_hosts(address, port, extra_hosts) if "[" not in h]
    if not threaded:
        return run(**kwargs) if start else build(**kwargs)
    loop = IOLoop(make_current=False)
    server_id = uuid.uuid4().hex
    thread = StoppableThread(target=run, io_loop=loop, owns_loop=True,
                             kwargs={**kwargs, "loop": loop, "server_id": server_id})
    state._threads[server_id] = thread
    thread.start()
    return thread
