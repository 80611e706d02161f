"""The dashboards' shared parts without a browser: widgets from Config bounds and docs, the one profile variable,
method panels with named background preparations (progress, shown errors, re-checks when the settings change while
one works), and dashboards composed of panels."""

from __future__ import annotations

import threading
import time

import param
import pytest

from dashboards.panels import (
    PROFILE_ENV,
    MethodDashboard,
    MethodPanel,
    field_param,
    preparation,
    profile_from_env,
    view,
)
from dashboards.preparation import Preparation
from lab.cache import cached_state, working
from tests.test_config import Toy


@pytest.fixture(autouse=True)
def _no_server_callbacks(monkeypatch):
    """No server here: the tests poll the preparations by hand."""
    monkeypatch.setattr("panel.state.add_periodic_callback", lambda *a, **k: type("P", (), {"stop": lambda s: 0})())


def test_field_param_takes_type_bounds_and_doc_from_the_config():
    p = field_param(Toy, "N")
    assert isinstance(p, param.Integer) and p.bounds == (16, 100_000) and p.default == 512
    assert p.doc == "Number of spins."
    narrower = field_param(Toy, "N", bounds=(64, 1000))
    assert narrower.bounds == (64, 1000) and narrower.default == 512
    choice = field_param(Toy, "update")
    assert isinstance(choice, param.Selector) and choice.objects == ["sync", "async"]
    assert isinstance(field_param(Toy, "flag"), param.Boolean)
    assert isinstance(field_param(Toy, "eps"), param.Number)


def test_field_param_refuses_bounds_outside_the_field():
    with pytest.raises(ValueError, match=r"bounds=\(8, 1000\) is not allowed for N"):
        field_param(Toy, "N", bounds=(8, 1000))
    with pytest.raises(ValueError, match="objects=\\['never'\\] is not allowed for update"):
        field_param(Toy, "update", objects=["sync", "never"])


def test_one_environment_variable_picks_the_profile(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    assert profile_from_env() == "quick"
    monkeypatch.setenv(PROFILE_ENV, "ci")
    assert profile_from_env() == "ci"
    monkeypatch.setenv(PROFILE_ENV, "huge")
    with pytest.raises(ValueError, match="LAB_DASHBOARD_PROFILE='huge' is not allowed; allowed: quick, ci"):
        profile_from_env()


def poll_until_idle(prep: Preparation, seconds: float = 10.0) -> None:
    deadline = time.time() + seconds
    while prep.running and time.time() < deadline:
        prep.poll()
        time.sleep(0.01)
    assert not prep.running, f"{prep.name} still running"


class Gate:
    """A fake slow training: each call records its settings and thread, then waits until released."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.release = threading.Event()
        self.started = threading.Event()  # the model's training begins (after it looked for a cache)

    def begin(self) -> None:
        """Wait until the test lets the training begin (``started``, or everything ``release``d)."""
        deadline = time.time() + 10
        while not (self.started.is_set() or self.release.is_set()) and time.time() < deadline:
            time.sleep(0.005)

    def __call__(self, s):
        self.calls.append((tuple(s), threading.current_thread() is threading.main_thread()))
        if not self.release.wait(10):
            raise TimeoutError("never released")
        if getattr(s, "N", None) == 999:
            raise RuntimeError("no model for N=999")


class Toyboard(MethodPanel):
    method = "dam"
    controls = ("N", "update", "profile")
    N = field_param(Toy, "N", bounds=(64, 1000))
    update = field_param(Toy, "update")
    trainer: Gate = Gate()
    drawn: list = []

    @preparation(on=("profile", "N"), label="the toy model", describe="**Training** N={N}: {done} / {total}")
    def model(self, s, report):
        getattr(self.trainer, "begin", lambda: None)()
        working("training the toy model")  # what lab.core.train.fit says when it starts
        report(1, total=2)
        self.trainer(s)

    @preparation(on=("profile",), label="the toy curves", cached=lambda s: s.profile == "quick")
    def curves(self, s, report):
        self.trainer(s)

    @view("N", "update", "profile", needs="model")
    def summary(self):
        Toyboard.drawn.append((self.profile, self.N))
        return f"N={self.N}, {self.update}"

    @view("profile", needs=("model", "curves"))
    def both(self):
        return "both"

    def main(self):
        return [self.summary, self.both]


@pytest.fixture
def board():
    Toyboard.trainer, Toyboard.drawn = Gate(), []
    return Toyboard(profile="ci")


def test_each_preparation_is_a_counter_parameter_and_a_runtime():
    assert set(Toyboard.preparation_specs) == {"model", "curves"}
    assert isinstance(Toyboard.param["model"], param.Integer) and Toyboard.param["model"].precedence < 0
    assert not hasattr(MethodPanel, "model") and MethodPanel.preparation_specs == {}


def test_views_show_a_placeholder_until_their_preparations_are_done(board):
    model, curves = board.preparations["model"], board.preparations["curves"]
    assert model.running and "waiting for the toy model" in board.summary().object
    model.poll()
    assert model.status.object == "*Loading the toy model...*" and not model.progress.visible  # no training yet
    board.trainer.started.set()
    deadline = time.time() + 10
    while not model.info.get("done") and time.time() < deadline:
        time.sleep(0.01)
    model.poll()
    assert model.status.object == "**Training** N=512: 1 / 2" and model.progress.max == 2
    board.trainer.release.set()
    poll_until_idle(model)
    poll_until_idle(curves)
    assert board.summary() == "N=512, sync" and board.both() == "both" and board.ready
    assert board.model == 1 and board.curves == 1  # the counters the views depend on
    assert sorted(board.trainer.calls) == [(("ci",), False), (("ci", 512), False)]  # in background threads
    board.update = "async"  # not a setting of any preparation: answered at once
    assert board.summary() == "N=512, async" and not model.running


def test_an_error_is_shown_in_the_status_and_in_place_of_the_view(board):
    board.trainer.release.set()
    poll_until_idle(board.preparations["model"])
    board.N = 999
    prep = board.preparations["model"]
    poll_until_idle(prep)
    assert "the toy model failed: RuntimeError: no model for N=999" in prep.status.object
    assert "no model for N=999" in board.summary().object and not board.ready
    board.N = 512  # prepared before: at once, and the error line goes
    assert board.summary() == "N=512, sync" and prep.status.object == ""
    board.N = 999  # the failed settings again: tried again
    assert prep.running


def test_settings_changed_while_preparing_restart_it_and_views_never_train(board):
    """The inr defect: a profile change while a preparation worked let a view train in the request thread."""
    model, curves = board.preparations["model"], board.preparations["curves"]
    assert model.working_for == ("ci", 512)
    board.trainer.started.set()
    board.N = 640  # while the ci model trains
    assert "waiting" in board.summary().object and model.working_for == ("ci", 512)
    board.profile = "quick"
    assert "waiting" in board.summary().object and "waiting" in board.both().object
    assert curves.ready  # cached for quick: nothing to do
    board.trainer.release.set()
    deadline = time.time() + 10
    while model.working_for != ("quick", 640) and time.time() < deadline:
        model.poll()  # the ci model ends; the re-check starts the current settings' preparation
        time.sleep(0.01)
    assert model.working_for == ("quick", 640) and "waiting" in board.summary().object
    poll_until_idle(model)
    assert board.summary() == "N=640, sync"
    assert Toyboard.drawn == [("quick", 640)]  # never drawn for settings that were not prepared
    assert all(not in_main for _, in_main in board.trainer.calls)
    assert [c for c, _ in board.trainer.calls if len(c) == 2] == [("ci", 512), ("quick", 640)]


def test_settings_back_to_prepared_ones_show_at_once(board):
    board.trainer.release.set()
    poll_until_idle(board.preparations["model"])
    board.trainer.release.clear()
    board.N = 700
    assert board.preparations["model"].running
    board.N = 512  # prepared already: shown while the other preparation still works
    assert board.summary() == "N=512, sync"
    board.trainer.release.set()
    poll_until_idle(board.preparations["model"])


def test_preparations_work_one_at_a_time(board):
    """Two preparations of one server process never work at once (trainings seed the process-wide generators)."""
    inside, overlaps, guard = [0], [], threading.Lock()

    def trainer(s):
        with guard:
            inside[0] += 1
            overlaps.append(inside[0])
        time.sleep(0.1)
        with guard:
            inside[0] -= 1

    board.trainer.release.set()
    for prep in board.preparations.values():
        poll_until_idle(prep)
    Toyboard.trainer = staticmethod(trainer)
    other = Toyboard(profile="ci", N=100)
    board.N = 200
    for prep in (*board.preparations.values(), *other.preparations.values()):
        poll_until_idle(prep)
    assert overlaps == [1, 1, 1]  # other's model, other's curves, board's model


def test_a_panel_with_nothing_to_prepare_is_ready_at_once():
    class Plain(MethodPanel):
        method = "dam"

    plain = Plain(profile="ci")
    assert plain.ready and plain.preparations == {} and plain.main() == []


def test_a_dashboard_shares_one_profile_among_its_panels(board):
    class Other(MethodPanel):
        method = "steer"
        title = "Other"

    class Both(MethodDashboard):
        title = "Both"
        panel_types = (Toyboard, Other)

    Toyboard.trainer.release.set()
    both = Both(profile="ci")
    assert list(both.panels) == ["dam", "steer"] and both.panels["dam"].profile == "ci"
    both.profile = "quick"
    assert all(p.profile == "quick" for p in both.panels.values())
    page = both.__panel__()
    assert "Both" in page[0].object
    for prep in both.panels["dam"].preparations.values():
        poll_until_idle(prep)


def test_a_parameter_may_not_hide_the_panels_own_attributes():
    with pytest.raises(TypeError, match="parameter\\(s\\) main, ready would hide MethodPanel's own attributes"):
        class Clash(MethodPanel):
            main = param.Integer(1)
            ready = param.Boolean(False)


class Cachedboard(MethodPanel):
    """A panel whose one preparation reads (or builds) a cache entry, as the methods' live functions do."""

    method = "dam"
    controls = ("profile",)
    built: list = []
    go = threading.Event()  # a build ends when the test has seen it announced

    @preparation(on=("profile",), label="the cached state", message="**Training the state** (first use)...")
    def state(self, s, report):
        def build():
            Cachedboard.built.append(s.profile)
            Cachedboard.go.wait(10)
            return {"x": 1}

        cached_state("toy", "state", {"profile": s.profile}, build)
        report(1)

    def main(self):
        return []


def test_a_preparation_that_only_reads_the_cache_never_says_training(monkeypatch, tmp_path):
    """The forgetting defect: QGPM's runs were all cached, yet "Training QGPM's variants" showed while they loaded."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    cached_state("toy", "state", {"profile": "ci"}, lambda: {"x": 1})  # what an earlier run left
    lines = []
    real_poll = Preparation.poll

    def poll(self):
        real_poll(self)
        lines.append((self.status.object, self.progress.visible))

    monkeypatch.setattr(Preparation, "poll", poll)
    Cachedboard.built, Cachedboard.go = [], threading.Event()
    board = Cachedboard(profile="ci")
    prep = board.preparations["state"]
    poll_until_idle(prep)
    assert Cachedboard.built == [] and prep.done == {("ci",)}
    assert lines and all("Training" not in line and not bar for line, bar in lines), lines
    board.profile = "quick"  # not cached: built, and said so
    deadline = time.time() + 10
    while not any(line.startswith("**Training") for line, _ in lines) and time.time() < deadline:
        prep.poll()
        time.sleep(0.01)
    Cachedboard.go.set()
    poll_until_idle(prep)
    assert Cachedboard.built == ["quick"]
    assert any(line == "**Training the state** (first use)..." and bar for line, bar in lines), lines


def test_work_heard_in_another_thread_is_not_this_preparation_s(monkeypatch):
    heard = []
    from lab.cache import watch_work

    with watch_work(heard.append):
        working("here")
        t = threading.Thread(target=working, args=("elsewhere",))
        t.start()
        t.join()
    working("after")
    assert heard == ["here"]
