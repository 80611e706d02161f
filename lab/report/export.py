"""HTML that opens offline: each executed notebook exported by nbconvert, with MathJax beside the report.

The nbconvert template drops require.js, the jupyter-widgets embedder (progress bars show as their text) and
mermaid; MathJax 2 (from the ``jupyter-server-mathjax`` package) is copied once into
``<out>/<profile>/static/mathjax/`` and the pages point at it by a relative path. Bokeh's and Panel's JavaScript,
inlined in each notebook's outputs (``hv.extension("bokeh", inline=True)``), is written once to ``static/js/`` and
loaded from there; Panel's CSS is inlined (``PANEL_INLINE`` in the kernel's environment). The page leaves out what a
reader does not need: progress bars, widget views, the headline cell (its PNG is the index's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from lab.io import atomic_write_text

__all__ = ["MATHJAX_CONFIG", "MATHJAX_DIR", "SCRIPT_DIR", "WIDGET_VIEW", "install_mathjax", "to_html"]

#: the nbconvert template: JupyterLab's, less what asks the network (require.js, the widgets embedder, mermaid),
#: with MathJax from ``resources.mathjax_url`` (a relative path to the copy beside the report). MathJax uses the
#: STIX-Web fonts jupyter-server-mathjax ships (not its default TeX fonts), and its blank fallback font is looked up
#: locally instead of at ``about:blank`` (a request the browser refuses from a file:// page)
_TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               styles: {"@font-face": {"font-family": "MathJax_Blank", src: "local('MathJax_Blank')"}}},
  displayAlign: "center",
  messageStyle: "none",
  menuSettings: {zoom: "None"}
});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
"""

#: where MathJax goes beside the report, and the parts of jupyter-server-mathjax's copy it needs
MATHJAX_DIR = "static/mathjax"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
_MATHJAX_PARTS = ("MathJax.js", "LICENSE", "config", "jax/element", "jax/input/TeX", "jax/output/HTML-CSS",
                  "fonts/HTML-CSS/STIX-Web", "localization/en")
_MATHJAX_EXTENSIONS_SKIPPED = ("a11y",)  # the accessibility explorer: 3 MB, loaded only from its menu


def install_mathjax(out_dir: Path) -> Path:
    """Copy MathJax 2 (the needed part of the ``jupyter-server-mathjax`` package) to ``out_dir/static/mathjax``
    once; returns that folder."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("jupyter_server_mathjax")  # not imported: it imports all of jupyter_server
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax for the report comes from the package jupyter-server-mathjax: "
                           "pip install jupyter-server-mathjax (it is a dependency of recurrent-lab)")
    dest = out_dir / MATHJAX_DIR
    src = Path(list(spec.submodule_search_locations)[0]) / "static"
    marker = dest / ".source"
    version = f"jupyter-server-mathjax {importlib.metadata.version('jupyter-server-mathjax')}"
    if marker.is_file() and marker.read_text() == version:
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=".mathjax-", dir=out_dir))
    try:
        for part in _MATHJAX_PARTS:
            if (src / part).is_dir():
                shutil.copytree(src / part, tmp / part)
            elif (src / part).is_file():
                (tmp / part).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / part, tmp / part)
        shutil.copytree(src / "extensions", tmp / "extensions",
                        ignore=shutil.ignore_patterns(*_MATHJAX_EXTENSIONS_SKIPPED))
        (tmp / ".source").write_text(version)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"lab_offline.html.j2": _TEMPLATE})],
        template_file="lab_offline.html.j2",
        mathjax_url=f"{MATHJAX_DIR}/MathJax.js?config={MATHJAX_CONFIG}",
    )


#: an output of this type needs the widgets embedder (from a CDN); the text beside it is shown instead
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


#: a Bokeh stylesheet that Panel points at its CDN, in a document's JSON (HoloViews' plots carry several)
_IMPORTED_CSS = re.compile(
    r'\{"type":"object","name":"ImportedStyleSheet","id":"(?P<id>[^"]+)",'
    r'"attributes":\{"url":"https://cdn\.holoviz\.org/panel/[^/"]+/dist/(?P<path>[^"?]+)(?:\?[^"]*)?"\}\}'
)


def _inline_stylesheets(text: str) -> str:
    """``text`` (an output's HTML) with every Panel stylesheet it imports from cdn.holoviz.org replaced by the same
    CSS inline, read from the installed Panel's ``dist`` folder (one it lacks is left as it is: the browser test
    counts it)."""
    if "ImportedStyleSheet" not in text:
        return text
    import panel

    dist = Path(panel.__file__).parent / "dist"

    def inline(match: re.Match) -> str:
        path = dist / match["path"]
        if not path.is_file():
            return match[0]
        css = json.dumps(path.read_text(encoding="utf-8")).replace("</", "<\\/")  # no </script> inside a script
        return f'{{"type":"object","name":"InlineStyleSheet","id":"{match["id"]}","attributes":{{"css":{css}}}}}'

    return _IMPORTED_CSS.sub(inline, text)


#: a script output this long (HoloViews' inline BokehJS and Panel, about 3 MB, the same in every notebook) is written
#: once to ``static/js/<content hash>.js`` beside the report and the page loads it from there
SHARED_SCRIPT_CHARS = 50_000
SCRIPT_DIR = "static/js"
CSS_DIR = "static/css"
_SCRIPT_TYPES = ("application/javascript", "application/vnd.holoviews_load.v0+json")

#: a progress bar's text (tqdm): "desc:  40%|####      | 6/15 [00:01<00:02, 4.1it/s]"
_PROGRESS = re.compile(r"^.*\d+%\|.*\|\s*\d+/\d*.*$")


def _shared_file(text: str, out_dir: Path, folder: str = SCRIPT_DIR, suffix: str = ".js") -> str:
    """``text`` written once under ``out_dir/folder/`` by its content hash; returns its path relative to
    ``out_dir``."""
    import hashlib

    name = f"{folder}/{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    path = out_dir / name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return name


_BIG_STYLE = re.compile(rf"<style[^>]*>(?P<css>[^<]{{{SHARED_SCRIPT_CHARS},}})</style>")


def _shared_styles(page: str, out_dir: Path) -> str:
    """``page`` with each long stylesheet of the template (JupyterLab's theme, 240 kB) in a file beside it."""
    def link(m: re.Match) -> str:
        return f'<link rel="stylesheet" href="{_shared_file(m["css"], out_dir, CSS_DIR, ".css")}">'

    return _BIG_STYLE.sub(link, page)


def _is_headline(output) -> bool:
    from lab.viz.headline import HEADLINE_KEY

    return bool(((output.get("metadata") or {}).get(HEADLINE_KEY) or {}).get("headline"))


def _without_progress(text: str) -> str:
    """``text`` (a stream's) less its progress-bar lines (each carriage-return step of a bar counts as a line)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return "\n".join(line for line in lines if not _PROGRESS.match(line)).strip("\n")


#: an absolute path in a quoted string: its folder and its file name
_ABSOLUTE = re.compile(r'"(?:[A-Za-z]:)?[\\/](?:[^"\n]*[\\/])?(?P<name>[^"\\/\n]+)"')


def _relative_parameters(cell) -> None:
    """The injected parameters show the report's files by their name (they lie beside this page), not by the path
    of the machine that ran them."""
    lines = []
    for line in cell.source.split("\n"):
        short = _ABSOLUTE.sub(lambda m: f'"{m["name"]}"', line)
        lines.append(short + ("  # beside this page" if short != line else ""))
    cell.source = "\n".join(lines)


def _output_shown(output, out_dir: Path):
    """``output`` as the offline page shows it, or None for one it leaves out: a widget's view (a progress bar's
    text, a widget's repr), progress-bar lines of a stream, an empty display."""
    if output.get("output_type") == "stream":
        if output.get("name") == "stderr":
            output["text"] = _without_progress(output.get("text", ""))
        return output if output.get("text") else None
    data = output.get("data")
    if data is None:
        return output  # an error
    if data.pop(WIDGET_VIEW, None) is not None and set(data) <= {"text/plain"}:
        return None  # a widget (tqdm's bar) whose only other form is its text
    script = data.get("application/javascript")
    if script is not None:
        script = "".join(script) if isinstance(script, list) else script
        if len(script) >= SHARED_SCRIPT_CHARS:
            for key in _SCRIPT_TYPES:
                data.pop(key, None)
            data["text/html"] = f'<script src="{_shared_file(script, out_dir)}"></script>'
    if "text/html" in data:
        value = data["text/html"]
        data["text/html"] = _inline_stylesheets("".join(value) if isinstance(value, list) else value)
    # HoloViews leaves empty display outputs (nothing to show, and nbconvert warns about each)
    return output if data or output.get("output_type") != "display_data" else None


def _offline_copy(nb, out_dir: Path, title: str | None = None):
    """``nb`` as the offline HTML shows it: titled, without the widget state, widget views or progress bars, without
    the headline cell (its PNG is the index's, the plot above it is the notebook's), the injected parameters by
    relative paths, the shared scripts in files beside the page and Panel's stylesheets inline."""
    nb.metadata = {k: v for k, v in nb.metadata.items() if k != "widgets"}
    if title:
        nb.metadata["title"] = title
    cells = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            if any(_is_headline(o) for o in cell.outputs):
                continue
            tags = cell.get("metadata", {}).get("tags", [])
            if "injected-parameters" in tags:
                _relative_parameters(cell)
            if "parameters" in tags:  # the full-width equals keeps papermill's help parser off the comments only
                cell.source = cell.source.replace("\uff1d", "=")
            cell.outputs = [o for o in (_output_shown(o, out_dir) for o in cell.outputs) if o is not None]
        cells.append(cell)
    nb.cells = cells
    return nb


def to_html(ipynb: Path, title: str | None = None) -> Path | None:
    """The executed notebook ``ipynb`` as an HTML page beside it (titled ``title``); None when it is missing."""
    if not ipynb.exists():
        return None
    import copy

    import nbformat

    nb = _offline_copy(copy.deepcopy(nbformat.read(ipynb, as_version=4)), ipynb.parent, title)
    body, _ = _exporter().from_notebook_node(nb)
    out = ipynb.with_suffix(".html")
    atomic_write_text(out, _shared_styles(body, ipynb.parent))
    return out
