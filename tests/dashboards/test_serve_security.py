"""``lab serve`` beyond localhost: refused without credentials (exit 2, one line, nothing bound), weak credentials and
malformed hosts refused the same way, a request naming a foreign host answered 403 before any handler runs, and in
Chromium the login lets the password in (the index page, then a dashboard) and keeps a wrong one out."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from click.testing import CliRunner

import dashboards
from dashboards import security
from lab.checks import ConfigError
from tests.conftest import free_port, wait_for_bokeh
from tests.dashboards.waiting import stop_servers

PASSWORD = "correct horse battery"
AUTH_ENV = ("LAB_SERVE_PASSWORD", "LAB_SERVE_COOKIE_SECRET", "PANEL_OAUTH_PROVIDER", "PANEL_OAUTH_KEY",
            "PANEL_OAUTH_SECRET")


@pytest.fixture(autouse=True)
def _no_auth_env(monkeypatch):
    for name in AUTH_ENV:
        monkeypatch.delenv(name, raising=False)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _lab(args: list[str], monkeypatch, env: dict | None = None):
    """``lab serve ARGS`` in-process, with serving itself replaced by a failure: a refusal must come first."""
    from lab.cli import cli

    def served(*a, **k):
        raise AssertionError("lab serve started serving")

    monkeypatch.setattr(dashboards, "serve_apps", served)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    return CliRunner().invoke(cli, ["serve", *args])


def test_a_wide_address_without_credentials_is_refused_and_nothing_is_served(monkeypatch):
    port = free_port()
    result = _lab(["--address", "0.0.0.0", "--port", str(port)], monkeypatch)
    assert result.exit_code == 2, result.output
    assert result.output == ("error: --address='0.0.0.0' is not allowed; allowed: a loopback address (127.0.0.1, "
                             "::1, localhost); any other only with credentials: a password (--basic-auth or "
                             "$LAB_SERVE_PASSWORD) or Panel's OAuth ($PANEL_OAUTH_PROVIDER, $PANEL_OAUTH_KEY, "
                             "$PANEL_OAUTH_SECRET)\n")
    assert not _listening(port)


def _users_file(tmp_path, users) -> str:
    path = tmp_path / "users.json"
    path.write_text(users if isinstance(users, str) else json.dumps(users))
    return str(path)


WEAK = [
    (["--basic-auth", ""], {}, "--basic-auth='' is not allowed; allowed: a password of at least 8 characters"),
    (["--basic-auth", "hunter2"], {}, "--basic-auth=(7 characters) is not allowed"),
    ([], {"LAB_SERVE_PASSWORD": ""}, "$LAB_SERVE_PASSWORD='' is not allowed"),
    (["--basic-auth", "{file:not json}"], {}, "is not allowed; allowed: a JSON file of {\"user\": \"password\"}"),
    (["--basic-auth", "{file:{\"ann\": \"short\"}}"], {}, "(user 'ann' has none that long)"),
    ([], {"PANEL_OAUTH_PROVIDER": "myspace"}, "$PANEL_OAUTH_PROVIDER='myspace' is not allowed; allowed: auth0"),
    ([], {"PANEL_OAUTH_PROVIDER": "github"}, "$PANEL_OAUTH_KEY='' is not allowed; allowed: the OAuth app's key"),
    ([], {"LAB_SERVE_PASSWORD": PASSWORD, "PANEL_OAUTH_PROVIDER": "github"},
     "$LAB_SERVE_PASSWORD='(set)' is not allowed; allowed: one way to log in"),
    (["--basic-auth", PASSWORD], {"LAB_SERVE_COOKIE_SECRET": "abc"}, "$LAB_SERVE_COOKIE_SECRET='(3 characters)'"),
    (["--basic-auth", PASSWORD, "--allow-origin", "*:5006"], {}, "--allow-origin='*:5006' is not allowed"),
    (["--basic-auth", PASSWORD, "--allow-origin", "lab.example"], {}, "--allow-origin='lab.example' is not allowed"),
    (["--basic-auth", PASSWORD, "--allow-origin", "lab.example:99999"], {}, "allowed: HOST:PORT"),
]


@pytest.mark.parametrize(("args", "env", "message"), WEAK)
def test_weak_credentials_and_bad_hosts_are_refused_in_one_line(args, env, message, monkeypatch, tmp_path):
    args = [_users_file(tmp_path, a[6:-1]) if a.startswith("{file:") else a for a in args]
    port = free_port()
    result = _lab(["--address", "0.0.0.0", "--port", str(port), *args], monkeypatch, env)
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and " is not allowed; allowed: " in lines[0], lines
    assert message in lines[0]
    assert PASSWORD not in lines[0] and "hunter2" not in lines[0]  # never echoed
    assert not _listening(port)


def test_loopback_needs_no_credentials_and_credentials_open_any_address(tmp_path):
    for address in ("127.0.0.1", "::1", "localhost", "[::1]"):
        security.check_exposure(address, None)
    for address in ("0.0.0.0", "::", "192.168.1.20", "lab.example"):
        with pytest.raises(ConfigError, match=f"--address='{address}' is not allowed"):
            security.check_exposure(address, None)
    creds = security.credentials(PASSWORD, environ={})
    security.check_exposure("0.0.0.0", creds)
    assert creds.serve_kwargs()["basic_auth"] == PASSWORD and len(creds.serve_kwargs()["cookie_secret"]) >= 32
    assert PASSWORD not in repr(creds)
    users = security.credentials(_users_file(tmp_path, {"ann": PASSWORD}), environ={})
    assert users.basic_auth == {"ann": PASSWORD}
    oauth = security.credentials(environ={"PANEL_OAUTH_PROVIDER": "GitHub", "PANEL_OAUTH_KEY": "k",
                                          "PANEL_OAUTH_SECRET": "s"})
    assert oauth.serve_kwargs()["oauth_provider"] == "github"
    assert security.credentials(environ={}) is None


def test_allowed_hosts_are_the_bound_address_localhost_and_the_ones_named():
    assert security.allowed_hosts("127.0.0.1", 5006) == ["127.0.0.1:5006", "localhost:5006", "[::1]:5006"]
    wide = security.allowed_hosts("0.0.0.0", 8000, ["Lab.Example:443"])
    assert wide == [f"{socket.gethostname().lower()}:8000", "localhost:8000", "127.0.0.1:8000", "[::1]:8000",
                    "lab.example:443"]


@pytest.fixture
def served_with_login():
    """Hopfield and the index served on every interface with a password; yields the local base URL."""

    port = free_port()
    server = dashboards.serve_apps(["hopfield"], port=port, address="0.0.0.0", threaded=True, basic_auth=PASSWORD)
    deadline = time.time() + 60
    while not _listening(port):
        assert time.time() < deadline, "the server did not come up"
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}", port
    stop_servers(server)


def _get(port: int, path: str, host: str | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=host is not None)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    return conn.getresponse()


def test_a_foreign_host_is_refused_and_every_page_asks_for_the_login(served_with_login):
    _, port = served_with_login
    for host in ("evil.example", f"evil.example:{port}", f"rebind.attacker:{port}"):
        for path in ("/", "/hopfield", "/hopfield/ws", "/login", "/index-thumbnail/hopfield", "/static/x.js"):
            response = _get(port, path, host)
            body = response.read().decode()
            assert response.status == 403, (host, path, response.status)
            assert body == (f"Host {host!r} is not allowed; allowed: the hosts this server was started for "
                            "(lab serve --allow-origin HOST:PORT adds one)\n")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        for path in ("/", "/hopfield", "/index-thumbnail/hopfield"):
            response = _get(port, path, host)
            assert response.status == 302 and "/login?next=" in response.getheader("Location"), (host, path)
    assert _get(port, "/login").status == 200


@pytest.mark.browser
def test_the_password_logs_in_and_a_wrong_one_does_not(page, served_with_login, monkeypatch):
    base, _ = served_with_login
    page.goto(base + "/hopfield", wait_until="domcontentloaded", timeout=60_000)
    assert "/login" in page.url
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    page.wait_for_url("**/login?error=*", timeout=30_000)
    assert "Invalid username or password" in page.content()
    page.goto(base + "/", wait_until="domcontentloaded", timeout=60_000)
    assert "/login" in page.url and page.locator("a.card").count() == 0  # still out
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/", timeout=30_000)
    assert page.title() == "recurrent-lab dashboards"
    page.locator('a.card[data-app="hopfield"]').click()
    page.wait_for_url(base + "/hopfield", timeout=60_000)
    wait_for_bokeh(page)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.some(d => [...d._all_models.values()]"
                           ".some(m => m.constructor.__name__ === 'Title' && m.text.includes('alpha =')))",
                           timeout=60_000)
