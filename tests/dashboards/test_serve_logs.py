"""``lab serve`` stays quiet when a page closes while a preparation reports progress: no warning, no traceback of a
message sent to the closed websocket, and the work goes on to its end."""

from __future__ import annotations

import gc
import logging
import threading
import time

import pytest
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError

import dashboards
from dashboards.panels import MethodPanel, preparation, view
from lab.cache import working


def _record(name: str, message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, (), exc_info)


def test_the_filter_drops_only_writes_to_a_closed_page():
    quiet = dashboards._ClosedPageFilter()
    assert not quiet.filter(_record("bokeh.server.views.ws", "Failed sending message as connection was closed"))
    assert not quiet.filter(_record("asyncio", "Task exception was never retrieved", WebSocketClosedError()))
    assert not quiet.filter(_record("tornado.application", "Exception in callback", StreamClosedError()))
    assert quiet.filter(_record("asyncio", "Task exception was never retrieved", ValueError("a real bug")))
    assert quiet.filter(_record("bokeh.core.validation.check", "E-1021 (EQUAL_SLIDER_START_END): ..."))


class SlowWork(MethodPanel):
    """A panel whose one preparation reports progress every 50 ms for a few seconds."""

    method = "dam"
    controls = ("profile",)
    finished: threading.Event = threading.Event()

    @preparation(on=("profile",), label="the slow model", describe="**Training** the slow model: {done} / {total}")
    def model(self, s, report):
        working("training the slow model")  # what lab.core.train.fit says when it starts
        for i in range(80):
            time.sleep(0.05)
            report(i + 1, total=80)
        SlowWork.finished.set()

    @view("profile", needs="model")
    def summary(self):
        return "trained"

    def main(self):
        return [self.summary]


@pytest.mark.browser
def test_closing_a_page_while_it_prepares_logs_nothing(page, serve_app, monkeypatch, caplog):
    SlowWork.finished = threading.Event()
    monkeypatch.setattr(dashboards, "app_factory", lambda name: lambda: SlowWork(profile="ci").__panel__())
    caplog.set_level(logging.WARNING)
    url = serve_app("hopfield")  # served as the hopfield app, built as the slow panel
    page.goto(url, wait_until="networkidle", timeout=60_000)
    page.wait_for_selector("text=/Training the slow model: \\d+ \\/ 80/", timeout=30_000)
    for pause in (0.3, 0.5, 0.7):  # reload while progress streams: each reload closes a page mid-message
        time.sleep(pause)
        page.reload(wait_until="commit")
    time.sleep(0.4)
    page.close()
    assert SlowWork.finished.wait(60), "the preparation did not finish after its page closed"
    time.sleep(1.0)
    gc.collect()  # an unretrieved task's exception is logged when the task is collected
    time.sleep(0.2)
    logged = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert logged == [], logged


@pytest.mark.parametrize("name", list(dashboards.APPS))
def test_no_dashboard_fails_bokehs_validation_when_served(name, monkeypatch):
    """What the server logs as an error, ``E-1021 (EQUAL_SLIDER_START_END)`` and the like: Bokeh validates every
    model of a page's document when it is served; each dashboard's first document (its widgets, the views'
    placeholders) passes. Nothing is prepared here: outside a server a panel would start its preparations at once."""
    from bokeh.core.validation import check_integrity
    from bokeh.document import Document

    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setattr(MethodPanel, "start_preparations", lambda self: None)
    root = dashboards.app_factory(name)().get_root(Document())
    issues = check_integrity(list(root.references()))
    assert [str(e) for e in issues.error] == []
    assert [str(w) for w in issues.warning] == []  # W-1005 (a fixed layout without width and height) and the like
