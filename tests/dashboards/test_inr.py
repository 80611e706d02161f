"""The INR dashboard: the fits of a datum are prepared in the background (then cached), and in headless Chromium the
page loads cleanly, the plots render, choosing another encoder changes what is shown, and the SSDi8 tab shows its
quantisation table."""

import time

import pytest

from tests.conftest import TITLES_JS, ci_dashboard_data, plot_titles, wait_for_bokeh, wait_for_job, wait_for_title


@pytest.fixture
def ci_fits(monkeypatch, tmp_path):
    """Second-long fits (the ci profile) stored in a temporary data folder."""
    from lab.methods.ssm_inr import live

    with ci_dashboard_data(monkeypatch, tmp_path, live.fitted, live.explore) as path:
        yield path


def test_the_fits_are_prepared_in_the_background_then_the_views_show(ci_fits):
    from dashboards.inr import Dashboard
    from lab.methods.ssm_inr import live

    board = Dashboard()
    assert board.profile == "ci"
    assert not board.ready and "waiting" in board.summary().object
    deadline = time.time() + 300
    wait_for_job(board.job, deadline)
    assert board.ready and not board.job.error
    first = board.summary().object
    assert "LPNet-S3K" in first and "dB" in first
    assert list((ci_fits / "ssm_inr").glob("astronaut-lpnet_s3k-*.pt"))
    cfg = live.config("ci")
    assert board.param.budget.objects == list(cfg.rd_budgets)
    board.encoder = "siren"
    assert "SIREN" in board.summary().object and board.summary().object != first
    board.budget = cfg.rd_budgets[0]
    assert f"budget {cfg.rd_budgets[0]}" in board.summary().object
    rows = live.rd_rows("astronaut", "ci")
    assert set(rows) == set(live.SHOWN) and all(len(p) == len(cfg.rd_budgets) for p, _ in rows.values())
    board.datum = "shapes_video"  # a new datum needs new fits; the frame slider now spans the video
    assert not board.ready and board.param.frame.bounds == (0, cfg.frames - 1)
    wait_for_job(board.job, deadline)
    board.frame = 1
    assert board.ready and "shapes_video" in board.summary().object
    wait_for_job(board.qjob, deadline)  # leave no SSDi8 preparation running into the next test
    assert board.quant_ready, board.qjob.error


@pytest.mark.browser
def test_inr_loads_and_the_encoder_choice_changes_the_plots(page, serve_app, ci_fits):
    url = serve_app("inr")
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
    page.get_by_text("SSDi8", exact=True).first.click()
    page.wait_for_function(f"() => ({TITLES_JS})().some(t => t.startsWith('evaluation perplexity'))",
                           timeout=180_000)
    assert any("values (" in t for t in plot_titles(page))  # the activation histogram
    errors = [e for e in page.console_errors if "favicon" not in e]
    assert errors == [], errors
