"""The report's pages as a reader meets them: a notebook's HTML with no machine paths, progress bars, warnings or
second copy of the headline plot, small (the shared scripts beside it), titled with the method; the index at 1300 px
with every verdict whole and nothing wider than the window."""

import base64
import html
import re

import pytest
from click.testing import CliRunner

from lab import registry
from lab.cli import cli
from tests.conftest import shared_once

#: two notebooks are enough: aire_prune's run shows progress bars (12 were left in its page)
SLUGS = ("dam", "aire_prune")

#: the text of a progress bar (tqdm): "  0%|          | 0/15"
PROGRESS = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/")


def _text(page: str) -> str:
    """What the page shows as text (tags, scripts and styles removed, entities decoded)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


# --- the export on a made-up notebook (no kernel) ----------------------------------------------------------------

def _made_up_notebook(folder):
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2, "version_minor": 0},
              "text/plain": "prune sweep:   0%|          | 0/55 [00:00<?, ?it/s]"}
    bokeh_js = "/* BokehJS */" + "x" * 60_000
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    return new_notebook(cells=[
        new_code_cell(f'# Parameters\nprofile = "ci"\nresult_path = "{folder}/dam.nc"\n',
                      metadata={"tags": ["injected-parameters"]}),
        new_code_cell("import holoviews", outputs=[new_output("display_data", data={
            "application/javascript": bokeh_js, "application/vnd.holoviews_load.v0+json": bokeh_js})]),
        new_code_cell("run()", outputs=[
            new_output("display_data", data=widget),
            new_output("stream", name="stderr", text="steps:  40%|####      | 6/15 [00:01<00:02]\r"
                                                     "steps: 100%|##########| 15/15 [00:02<00:00]\n"),
            new_output("stream", name="stdout", text="done\n")]),
        new_code_cell("lab.viz.headline(plot)", outputs=[new_output(
            "display_data", data={"text/plain": ""}, metadata={"lab": {"headline": True, "png": png}})]),
    ])


def test_offline_page_leaves_out_what_a_reader_does_not_need(tmp_path):
    import nbformat

    from lab.report.export import to_html

    ipynb = tmp_path / "01_dam.ipynb"
    nbformat.write(_made_up_notebook(tmp_path), ipynb)
    page = to_html(ipynb, "Dynamical properties of dense associative memory").read_text()
    text = _text(page)
    assert "<title>Dynamical properties of dense associative memory</title>" in page
    assert str(tmp_path) not in page and 'result_path = "dam.nc"' in text
    assert not PROGRESS.search(text) and "done" in text
    assert "lab.viz.headline" not in text  # the headline cell is the index's
    assert "BokehJS" not in page and len(page) < 200_000
    (script,) = re.findall(r'<script src="(static/js/[0-9a-f]+\.js)">', page)
    assert (tmp_path / script).read_text().startswith("/* BokehJS */")
    (css,) = re.findall(r'<link rel="stylesheet" href="(static/css/[0-9a-f]+\.css)">', page)
    assert (tmp_path / css).stat().st_size > 50_000  # JupyterLab's theme, once beside the pages


def test_headline_shows_nothing_and_carries_its_png(monkeypatch):
    import holoviews as hv
    import IPython.display

    import lab.viz.style  # noqa: F401  the bokeh backend, as in the methods' plots.py
    from lab.viz import find_headline, headline

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
    headline(hv.Curve([1, 2, 3]), max_pixels=200)
    ((args, kwargs),) = shown
    assert args[0] == {"text/plain": ""} and kwargs["raw"]
    output = {"output_type": "display_data", "data": args[0], "metadata": kwargs["metadata"]}
    png = find_headline({"cells": [{"cell_type": "code", "outputs": [output]}]})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


# --- a ci report of two notebooks ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    def build(out):
        result = CliRunner().invoke(cli, ["report", *SLUGS, "--profile", "ci", "--out", str(out)])
        return {"output": result.output, "exit_code": result.exit_code}

    out, result = shared_once(tmp_path_factory, "report-pages", build)
    return out / "ci", result


@pytest.mark.notebook
@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_page_reads_clean(pages, slug):
    from lab.report.reuse import ROOT

    folder, result = pages
    m = registry.get(slug)
    page = (folder / m.notebook.replace(".ipynb", ".html")).read_text()
    text = _text(page)
    for path in (str(ROOT), str(folder), ".venv", "site-packages", "/home/", "/tmp/"):
        assert path not in page, path
    assert f"<title>{html.escape(m.title)}</title>" in page
    assert not PROGRESS.search(text), PROGRESS.search(text)
    assert not re.search(r"\w+Warning\b|Traceback|WARNING", text), re.search(r".{80}(Warning|WARNING).{80}", text)
    assert "application/vnd.jupyter.stderr" not in page  # nothing at all on stderr
    assert "\uff1d" not in text and f'result_path = "{slug}.nc"' in text
    assert "lab.viz.headline(" not in text and (folder / f"{slug}.headline.png").is_file()
    assert len(page) < 1_000_000, f"{len(page)} bytes"
    assert (folder / "index.html").is_file(), result["output"]


@pytest.mark.notebook
def test_report_run_prints_no_kernel_warning(pages):
    _, result = pages
    assert result["exit_code"] == 0, result["output"]
    assert "without encryption" not in result["output"] and "Warning" not in result["output"]


#: JavaScript: what does not fit a window, and verdicts cut short (each as a short description)
_OVERFLOWS_JS = """() => {
    const width = document.documentElement.clientWidth, out = [];
    for (const el of document.querySelectorAll('body *')) {
        const r = el.getBoundingClientRect();
        if (r.width > 0 && r.right > width + 0.5) out.push(`${el.tagName}.${el.className} ends at ${r.right}`);
    }
    for (const td of document.querySelectorAll('td.verdict')) {
        const r = td.getBoundingClientRect();
        if (td.scrollWidth > td.clientWidth || r.right > width) out.push(`verdict "${td.textContent}" cut`);
    }
    return out;
}"""


@pytest.mark.notebook
@pytest.mark.browser
def test_index_fits_1300px_with_every_verdict_whole(pages, browser):
    folder, result = pages
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    try:
        page.goto((folder / "index.html").as_uri(), wait_until="load")
        overview = page.locator("table.overview td.verdict")
        assert overview.count() == len(SLUGS), result["output"]
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert page.locator("table.claims td.verdict").count() > len(SLUGS)
        assert page.evaluate(_OVERFLOWS_JS) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 1300
        for img in page.locator("figure.headline img").all():  # the thumbnail leaves the table its width
            assert img.bounding_box()["width"] <= 460
        assert page.locator("table.claims").first.bounding_box()["width"] > 1000
    finally:
        page.close()


# --- the headline figure -----------------------------------------------------------------------------------------

def test_headline_png_keeps_the_bokeh_look():
    """The matplotlib drawing carries the colour the bokeh options set: red pixels for a red curve."""
    import io

    import holoviews as hv
    import numpy as np
    from PIL import Image

    import lab.viz.style  # noqa: F401  the bokeh backend, as in the methods' plots.py
    from lab.viz import headline_png

    x = np.linspace(0, 1, 50)
    png = headline_png(hv.Curve((x, x**2)).opts(color="#d1495b", line_width=4, title="a title"), max_pixels=300)
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    assert max(img.shape[:2]) <= 300 + 2
    red = (abs(img[..., 0] - 0xD1) < 30) & (abs(img[..., 1] - 0x49) < 30) & (abs(img[..., 2] - 0x5B) < 30)
    assert red.sum() > 50
    assert hv.Store.current_backend == "bokeh"  # drawing the headline leaves the notebook on bokeh


def test_headline_refuses_what_is_not_a_plot():
    from lab.checks import ConfigError
    from lab.viz import headline_png

    with pytest.raises(ConfigError, match="obj='list' is not allowed; allowed: a HoloViews object"):
        headline_png([1, 2, 3])
    with pytest.raises(ConfigError, match="max_pixels"):
        import holoviews as hv

        headline_png(hv.Curve([1, 2]), max_pixels=10)


def test_find_headline_reads_only_the_marked_image():
    import base64

    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from lab.viz import find_headline

    png = b"\x89PNG\r\n\x1a\nfake"
    data = {"image/png": base64.b64encode(png).decode()}
    plain = new_code_cell("x", outputs=[new_output("display_data", data=data)])
    marked = new_code_cell("y", outputs=[new_output("display_data", data=data, metadata={"lab": {"headline": True}})])
    assert find_headline(new_notebook(cells=[plain])) is None
    assert find_headline(new_notebook(cells=[plain, marked])) == png
    assert find_headline(nbformat.reads(nbformat.writes(new_notebook(cells=[marked])), as_version=4)) == png


def test_headline_png_draws_a_labelled_categorical_heat_map():
    """A heat map with text placed by category names (a common overlay) still gives a headline image."""
    import holoviews as hv

    from lab.viz import headline_png

    rows = [(c, r, float(i + j)) for i, c in enumerate("abc") for j, r in enumerate(("x", "y"))]
    plot = hv.HeatMap(rows, ["col", "row"], "v") * hv.Labels([(c, r, f"{v:.0f}") for c, r, v in rows],
                                                             ["col", "row"], "text")
    assert headline_png(plot, max_pixels=200)[:8] == b"\x89PNG\r\n\x1a\n"
