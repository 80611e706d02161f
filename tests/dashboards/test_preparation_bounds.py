"""What one page can make the server do is bounded: a flood of seed changes never puts more than the server's limit
of preparations in its queue, never runs a superseded request, and a Cancel stops a running one; a full queue, a
profile the server does not offer and a cancel each say so in the status line; seed widgets are bounded; and a real
preparation writes only under the lab's data folder."""

from __future__ import annotations

import os
import sys
import threading
import time

import param
import pytest

from dashboards import preparation
from dashboards.panels import MethodPanel
from dashboards.panels import preparation as prepare
from dashboards.preparation import QUEUE, configure
from lab.checks import ConfigError


@pytest.fixture(autouse=True)
def _no_server_callbacks(monkeypatch):
    """No server here: the tests poll the preparations by hand."""
    monkeypatch.setattr("panel.state.add_periodic_callback", lambda *a, **k: type("P", (), {"stop": lambda s: 0})())


@pytest.fixture
def limits():
    """The server's limits, put back as they were afterwards."""
    before = (preparation.LIMITS.max_jobs, preparation.LIMITS.allow_full)
    yield preparation.LIMITS
    configure(max_jobs=before[0], allow_full=before[1])


class Slow:
    """A fake slow training: records each run's settings, reports progress in small steps while ``go`` is clear and
    ends once it is set (or after ``steps`` reports)."""

    def __init__(self, steps: int = 2000):
        self.runs: list[tuple] = []
        self.reports = 0
        self.go = threading.Event()
        self.steps = steps

    def __call__(self, s, report) -> None:
        self.runs.append(tuple(s))
        for i in range(self.steps):
            if self.go.is_set():
                return
            report(i, total=self.steps)
            self.reports += 1
            time.sleep(0.005)


class Flood(MethodPanel):
    method = "dam"
    controls = ("seed", "profile")
    seed = param.Integer(default=0, bounds=(0, 1000), doc="The seed of the fake model.")
    trainer: Slow = Slow()

    @prepare(on=("profile", "seed"), label="the fake model")
    def model(self, s, report):
        self.trainer(s, report)


@pytest.fixture
def slow():
    Flood.trainer = Slow()
    yield Flood.trainer
    Flood.trainer.go.set()
    deadline = time.time() + 10
    while len(QUEUE) and time.time() < deadline:  # leave nothing running into the next test
        time.sleep(0.01)


def wait(condition, seconds: float = 10.0) -> None:
    deadline = time.time() + seconds
    while not condition() and time.time() < deadline:
        time.sleep(0.005)
    assert condition()


def settle(*preps, seconds: float = 20.0) -> None:
    deadline = time.time() + seconds
    while any(p.running or p._deferred for p in preps) and time.time() < deadline:
        for p in preps:
            p.poll()
        time.sleep(0.01)
    assert not any(p.running for p in preps)


def test_a_flood_of_seed_changes_stays_within_the_caps_and_runs_only_the_last(limits, slow):
    configure(max_jobs=2)
    first = Flood(profile="ci")  # runs at once, holding the worker
    wait(lambda: slow.runs == [("ci", 0)])
    board = Flood(profile="ci", seed=1)  # waits behind it
    prep = board.preparations["model"]
    assert prep.working_for == ("ci", 1) and "Waiting for another preparation" in prep._line(prep._job, prep.info)
    most = 0
    for seed in range(2, 300):  # the slider dragged across, each value a request
        board.seed = seed
        most = max(most, len(QUEUE))
        assert prep.working_for == ("ci", seed)  # the newer request took the waiting one's place
    assert most <= 2 and len(QUEUE) == 2
    flooded = Flood(profile="ci", seed=7)  # a third page while two jobs hold the queue: told to wait
    other = flooded.preparations["model"]
    assert not other.running
    assert other.status.object == ("**The server is busy: 2 preparations are waiting or running, the most it takes "
                                   "at once; the fake model starts when one ends.**")
    assert "waiting for the fake model" in other.placeholder().object
    slow.go.set()
    settle(first.preparations["model"], prep, other)
    assert slow.runs == [("ci", 0), ("ci", 299), ("ci", 7)]  # never a superseded seed; the busy page's in turn
    assert prep.ready and other.ready


def test_changes_while_one_runs_are_prepared_once_it_ends(slow):
    board = Flood(profile="ci")
    prep = board.preparations["model"]
    wait(lambda: slow.runs == [("ci", 0)])
    for seed in range(1, 100):
        board.seed = seed
        assert len(QUEUE) == 1  # one job for the page, whatever the changes
    slow.go.set()
    settle(prep)
    assert slow.runs == [("ci", 0), ("ci", 99)] and prep.ready


def test_cancel_stops_a_running_preparation_at_its_next_report(slow):
    board = Flood(profile="ci")
    prep = board.preparations["model"]
    wait(lambda: slow.reports > 3)
    prep.poll()
    assert prep.cancel_button.visible and prep.progress.visible
    prep.cancel_button.clicks += 1  # the Cancel button next to the progress bar
    assert "Cancelling the fake model" in prep.status.object
    wait(lambda: len(QUEUE) == 0, 2)  # stopped at its next report, not after its 2000 steps
    reports = slow.reports
    settle(prep)
    assert prep.status.object == "*the fake model cancelled.*" and not prep.cancel_button.visible
    assert not prep.ready and "cancelled" in prep.placeholder().object and not prep.error
    time.sleep(0.05)
    assert slow.reports == reports < 100
    board.seed = 5  # a new setting prepares again
    wait(lambda: slow.runs[-1:] == [("ci", 5)])
    slow.go.set()
    settle(prep)
    assert prep.ready


def test_cancel_of_a_waiting_request_and_on_page_close(limits, slow, monkeypatch):
    from bokeh.util.callback_manager import _check_callback

    import dashboards.panels as panels

    configure(max_jobs=2)
    first = Flood(profile="ci")
    wait(lambda: slow.runs == [("ci", 0)])
    waiting = Flood(profile="ci", seed=3)
    waiting.preparations["model"].cancel()  # withdrawn from the queue: it never runs
    assert not waiting.preparations["model"].running and len(QUEUE) == 1
    closed: list = []
    monkeypatch.setattr(panels, "_served", lambda: True)
    monkeypatch.setattr("panel.state.onload", lambda callback: callback())
    monkeypatch.setattr("panel.state.on_session_destroyed", closed.append)
    served = Flood(profile="ci", seed=4)  # as in a served page: its preparations end when the page closes
    assert served.preparations["model"].running and len(closed) == 1
    _check_callback(closed[0], ("session_context",))  # what Bokeh's Document.on_session_destroyed asks of it
    closed[0](None)  # Bokeh destroys the session
    assert not served.preparations["model"].running and len(QUEUE) == 1
    second, third = Flood(profile="ci", seed=5), Flood(profile="ci", seed=6)  # the third finds the queue full
    busy = third.preparations["model"]
    assert "The server is busy" in busy.status.object
    busy.cancel()  # it gives up its turn
    assert busy.status.object == "*the fake model cancelled.*" and not busy._deferred
    second.preparations["model"].cancel()
    first.preparations["model"].cancel()
    busy.poll()
    settle(first.preparations["model"])
    assert slow.runs == [("ci", 0)]


def test_the_full_profile_only_with_the_servers_opt_in(limits, slow):
    assert Flood(profile="ci").param.profile.objects == ["quick", "ci"]
    with pytest.raises(ValueError):
        Flood(profile="full")  # not offered
    configure(allow_full=True)
    board = Flood(profile="full")
    assert board.param.profile.objects == ["quick", "ci", "full"]
    prep = board.preparations["model"]
    slow.go.set()
    settle(prep)
    configure(allow_full=False)  # a request for full arriving at a server that does not offer it
    board.seed = 9
    settle(prep)
    assert prep.error == ("profile='full' is not allowed; allowed: quick, ci (this server was started without "
                          "--allow-full)")
    assert ("full", 9) not in slow.runs
    with pytest.raises(ConfigError, match=r"--max-jobs=0 is not allowed; allowed: an integer in \[1, 64\]"):
        configure(max_jobs=0)


def test_seed_widgets_are_bounded():
    with pytest.raises(TypeError, match="seed parameter seed spans 1000001 values"):
        class Wide(MethodPanel):
            method = "dam"
            seed = param.Integer(default=0, bounds=(0, 1_000_000))

            @prepare(on=("seed",))
            def model(self, s, report):
                pass

    with pytest.raises(TypeError, match="seed parameter episode_seed needs finite non-negative bounds"):
        class Open(MethodPanel):
            method = "dam"
            episode_seed = param.Integer(default=0)


def test_a_real_preparation_writes_only_under_the_data_folder(tmp_path, monkeypatch):
    """STEER's ci fit, with the data folder and the working folder apart: every file opened for writing, by any
    thread, is under the data folder, and the working folder stays empty. (torch makes its compile-cache folder
    under /tmp when ``torch._dynamo`` is first imported, which a first optimizer step does: imported beforehand, it
    is torch's import, not the preparation's write.)"""
    import torch._dynamo  # noqa: F401

    from lab.methods.steer import live

    data, cwd = tmp_path / "data", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("LAB_DASHBOARD_PROFILE", "ci")
    monkeypatch.setenv("LAB_DATA_DIR", str(data))
    monkeypatch.chdir(cwd)
    from dashboards.steer import Dashboard

    written: list[str] = []
    recording = [True]

    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND

    def hook(event, args):
        if not recording[0] or event not in ("open", "os.rename", "os.replace", "os.mkdir", "os.remove"):
            return
        path = args[1] if event in ("os.rename", "os.replace") else args[0]
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor
        if event == "open":
            mode, flags = args[1], args[2]
            if not (any(c in mode for c in "wax+") if mode else flags & writes):
                return
        written.append(os.path.realpath(os.fsdecode(path)))

    live.fitted_model.cache_clear()
    sys.addaudithook(hook)
    try:
        board = Dashboard()
        settle(*board.preparations.values(), seconds=300)
    finally:
        recording[0] = False
        live.fitted_model.cache_clear()
    assert board.ready
    root = os.path.realpath(data)
    outside = [p for p in written if p != root and not p.startswith(root + os.sep)]
    assert written and outside == [], outside
    assert list(data.rglob("*.pt")) and list(cwd.rglob("*")) == []
