"""The dashboards' shared base: widgets from Config bounds and docs, the one profile variable, background work."""

from __future__ import annotations

import time

import param
import pytest

from dashboards.viewer import PROFILE_ENV, MethodViewer, field_param, profile_from_env
from tests.test_config import Toy


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


class _Slow(MethodViewer):
    method = "dam"
    N = field_param(Toy, "N", bounds=(64, 1000))
    calls: list = []

    def prep_params(self):
        return ("profile", "N")

    def prepare(self, report):
        report(1, total=2)
        time.sleep(0.05)
        if self.N == 999:
            raise RuntimeError("no model for N=999")
        _Slow.calls.append(self.N)

    @MethodViewer.when_ready
    def view(self):
        return f"N={self.N}"


def _wait(viewer, seconds=5.0):
    deadline = time.time() + seconds
    while viewer.job.running and time.time() < deadline:
        viewer.job._poll()
        time.sleep(0.01)


def test_views_show_a_placeholder_until_prepared_then_the_view(monkeypatch):
    monkeypatch.setattr("panel.state.add_periodic_callback", lambda *a, **k: type("P", (), {"stop": lambda s: 0})())
    _Slow.calls = []
    viewer = _Slow(profile="ci")
    assert not viewer.ready and "waiting" in viewer.view().object
    _wait(viewer)
    assert viewer.ready and viewer.view() == "N=512" and _Slow.calls == [512]
    viewer.N = 999  # new settings: prepared again, and the error shown in the page
    _wait(viewer)
    assert "no model for N=999" in viewer.job.status.object and not viewer.ready


def test_a_viewer_with_nothing_to_prepare_is_ready_at_once():
    class Plain(MethodViewer):
        method = "dam"

    viewer = Plain(profile="ci")
    assert viewer.ready and not viewer.job.running


def test_background_jobs_work_one_at_a_time():
    """Two jobs of one server process never work at once (trainings seed the process-wide generators)."""
    import threading

    from dashboards.viewer import BackgroundJob

    inside, overlaps = [0], []
    guard = threading.Lock()

    def work(report):
        with guard:
            inside[0] += 1
            overlaps.append(inside[0])
        time.sleep(0.2)
        with guard:
            inside[0] -= 1
        report(1)

    jobs = [BackgroundJob(), BackgroundJob()]
    for i, job in enumerate(jobs):
        job._poller = object()  # no server here: poll by hand below
        job.start(work, total=1, message="", describe=None, on_done=None, name=f"job{i}")
    for job in jobs:
        job._thread.join(timeout=30)
    assert overlaps == [1, 1]
