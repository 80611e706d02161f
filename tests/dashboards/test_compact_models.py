"""The compact-models dashboard: the fits of a datum are prepared in the background (then cached); SSDi8's views
never train, even when the profile changes while its model trains; in headless Chromium the page loads cleanly, the
plots render, choosing another encoder changes what is shown, and the SSDi8 tab shows its quantisation table."""

import threading
import time
import types

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh, wait_for_title
from tests.dashboards.in_place import figure_ids
from tests.dashboards.latency import timed_first_plot, timed_update
from tests.dashboards.waiting import assert_page_reads, errors, settle


@pytest.fixture
def ci_fits(monkeypatch, tmp_path):
    """Second-long fits (the ci profile) stored in a temporary data folder."""
    from lab.methods.ssm_inr import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.fitted, live.explore) as path:
        yield path


def _title(pane):
    """The title of what ``pane`` shows now (a figure that follows the widgets: its frame for the current ones)."""
    import holoviews as hv

    obj = pane.object
    if isinstance(obj, hv.DynamicMap):
        obj = obj[()]
    return obj.opts.get().kwargs.get("title", "")


def test_the_fits_are_prepared_in_the_background_then_the_views_show(ci_fits):
    from dashboards.compact_models import Dashboard
    from lab.methods.ssm_inr import live

    board = Dashboard()
    inr, ssdi8 = board.panels["ssm_inr"], board.panels["ssdi8"]
    assert board.profile == "ci"
    assert not inr.ready and "waiting" in inr.summary().object
    deadline = time.time() + 300
    settle(inr, deadline)
    assert inr.ready and not errors(inr), errors(inr)
    first = inr.summary().object
    assert "LPNet-S3K" in first and "dB" in first
    assert list((ci_fits / "ssm_inr").glob("astronaut-lpnet_s3k-*.pt"))
    cfg = live.config("ci")
    assert inr.param.budget.objects == list(cfg.rd_budgets)
    images = inr.images()
    inr.encoder = "siren"
    assert "SIREN" in inr.summary().object and inr.summary().object != first
    assert inr.images() is images  # the same figures: their data follow the encoder (issue 43)
    assert _title(images[1]).startswith("SIREN: ") and _title(images[2]) == "SIREN error"
    inr.budget = cfg.rd_budgets[0]
    assert f"budget {cfg.rd_budgets[0]}" in inr.summary().object
    rows = live.rd_rows("astronaut", "ci")
    assert set(rows) == set(live.SHOWN) and all(len(p) == len(cfg.rd_budgets) for p, _ in rows.values())
    inr.datum = "shapes_video"  # a new datum needs new fits; the frame slider now spans the video
    assert not inr.ready and inr.param.frame.bounds == (0, cfg.frames - 1)
    settle(inr, deadline)
    inr.frame = 1
    assert inr.ready and "shapes_video" in inr.summary().object
    settle(ssdi8, deadline)  # leave no SSDi8 preparation running into the next test
    assert ssdi8.ready, errors(ssdi8)


class FakeSsdi8:
    """SSDi8's live functions, faked: a training that waits until released, and views' computations that record
    the thread they ran in."""

    def __init__(self):
        self.release = threading.Event()
        self.trainings: list[tuple[str, bool]] = []
        self.tables: list[tuple[str, bool]] = []
        self.done: set[str] = set()

    @staticmethod
    def in_main() -> bool:
        return threading.current_thread() is threading.main_thread()

    def prepare(self, profile, report=None):
        self.trainings.append((profile, self.in_main()))
        assert self.release.wait(10), "never released"
        self.done.add(profile)

    def quant_table(self, profile):
        if profile not in self.done:  # what the real one does: train (in the calling thread)
            self.prepare(profile)
        self.tables.append((profile, self.in_main()))
        return "table"


def test_a_profile_change_while_ssdi8_trains_never_trains_in_a_view(monkeypatch):
    """The inr defect: with the profile changed while SSDi8's model trained, the views called quant_table for the new
    profile, which trained inside the request thread; and the new profile's preparation never started."""
    from dashboards import compact_models
    from lab.methods.ssdi8 import live as qlive

    fake = FakeSsdi8()
    prepared = types.SimpleNamespace(cached=lambda cfg: cfg in fake.done)
    monkeypatch.setattr(qlive, "prepare", fake.prepare)
    monkeypatch.setattr(qlive, "quant_table", fake.quant_table)
    monkeypatch.setattr(qlive, "prepared", prepared)
    monkeypatch.setattr(qlive, "config", lambda profile: profile)
    monkeypatch.setattr(compact_models.qplots, "perplexity_bars", lambda table: None)
    monkeypatch.setattr(compact_models.qplots, "error_bars", lambda table: None)
    monkeypatch.setattr("panel.state.add_periodic_callback", lambda *a, **k: types.SimpleNamespace(stop=lambda: 0))

    panel = compact_models.Ssdi8Panel(profile="ci")
    prep = panel.preparations["quantised"]
    assert prep.running and prep.working_for == ("ci",)
    panel.profile = "quick"  # while the ci model trains
    assert "waiting for the SSDi8 model" in panel.bars().object
    fake.release.set()  # the ci model is done; its end is noticed by the next poll
    deadline = time.time() + 10
    while prep.working_for != ("quick",) and time.time() < deadline:
        time.sleep(0.01)
        prep.poll()
    assert prep.working_for == ("quick",)  # the current profile's preparation started after the re-check
    settle(panel, time.time() + 10)
    panel.bars()
    assert fake.trainings == [("ci", False), ("quick", False)]  # both in background threads
    assert fake.tables == [("quick", True)]  # the view only read the quick table


@pytest.mark.browser
def test_compact_models_loads_and_the_encoder_choice_changes_the_plots(page, serve_app, ci_fits):
    url = serve_app("compact_models")
    page.goto(url, wait_until="networkidle", timeout=120_000)
    wait_for_bokeh(page)
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('LPNet-S3K: '))", timeout=180_000)
    for title in ("original: astronaut", "PSNR against size: astronaut", "level 0: band-pass",
                  "astronaut"):
        wait_for_title(page, title, timeout=60_000)
    before = plot_titles(page)
    page.locator("select:has(option:text-is('lpnet_conv'))").select_option(label="lpnet_conv")
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('LPNet-Conv: '))", timeout=60_000)
    after = plot_titles(page)
    assert after != before and any(t.startswith("LPNet-Conv: ") for t in after), after
    encoder = page.locator("select:has(option:text-is('lpnet_conv'))")
    figures = figure_ids(page)
    timed_update(page, lambda: encoder.select_option(label="lpnet_s3k"), "compact_models")  # back: warm
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('LPNet-S3K: '))", timeout=60_000)
    assert figure_ids(page) == figures  # the plots followed the encoder in place: no figure was replaced
    page.locator(".bk-tab", has_text="SSDi8").first.click()
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('evaluation perplexity'))",
                           timeout=180_000)
    wait_for_title(page, "values (", timeout=60_000)  # the activation histogram
    timed_first_plot(page, url, "compact_models")  # the page opened again, its data warm
    assert_page_reads(page)  # no console error, nothing wider than the 1400 px window
