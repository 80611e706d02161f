"""The notebooks' papermill-native parameters cell, generated from each method's Config.

A method's notebook has one cell tagged ``parameters``::

    profile = "quick"  # type: str  ci, quick, full: the values of every field left at None
    result_path = ""  # type: str  where to save the results NetCDF ("": not saved)
    N = None  # type: int  an integer in [16, 100000]. Number of spins of the order-n network.
    update = None  # type: str  one of 'sync', 'async'. Synchronous (all spins at once, ...) or asynchronous ...
    alphas = None  # type: list[float]  comma-separated; each value a finite number in (0, 10], ... Loads ...
    ...

so that ``papermill --help-notebook notebooks/01_dam.ipynb`` lists every field with its type, what it allows and its
doc (papermill reads ``# type: T`` with ``T`` one word, then the help), and ``papermill notebooks/01_dam.ipynb
out.ipynb -p N 512`` overrides one (a list as ``-p alphas 0.01,0.02``). The notebook then runs::

    result = lab.run("dam", profile, save_to=result_path, **lab.notebook_overrides("dam", globals()))

:func:`parameters_source` writes the cell from the Config; ``lab sync`` rewrites every notebook's cell (and the
README's method table) and a test keeps them in step.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab import registry
from lab.config import PROFILE_NAMES, ConfigError, FieldSpec, field_specs
from lab.io import atomic_write_text, check_writable

__all__ = ["help_text", "injected_parameters", "notebook_overrides", "parameters_source", "setup", "sync_parameters",
           "type_word"]


def help_text(text: str) -> str:
    """``text`` without ``=`` signs, as a parameters-cell comment: papermill's ``--help-notebook`` skips every line
    with more than one ``=``, so comparisons become ``≥ ≤ ≠`` and equalities the full-width ``＝``."""
    for old, new in ((">=", "≥"), ("<=", "≤"), ("!=", "≠"), ("==", "＝"), ("=", "＝")):
        text = text.replace(old, new)
    return text


def type_word(spec: FieldSpec) -> str:
    """A field's type as one word, the way papermill reads a ``# type:`` comment (``int``, ``list[float]``; a
    Literal's choices are its element type, its values go to the help)."""
    word = getattr(spec.element_type, "__name__", str(spec.element_type))
    return f"list[{word}]" if spec.is_tuple else word


def parameters_source(slug: str) -> str:
    """The text of method ``slug``'s parameters cell: ``name = None  # type: T  allowed. doc`` per Config field."""
    cfg = registry.get(slug).config
    lines = [
        f'profile = "quick"  # type: str  {", ".join(PROFILE_NAMES)}: the values of every field left at None',
        'result_path = ""  # type: str  where to save the results NetCDF ("": not saved)',
    ]
    for spec in field_specs(cfg).values():
        allowed = spec.allowed()
        if spec.is_tuple:
            allowed = f"comma-separated; {allowed}"
        doc = " ".join(spec.doc.split())
        comment = help_text(f"{allowed}. {doc}" if allowed else doc)
        lines.append(f"{spec.name} = None  # type: {type_word(spec)}  {comment}")
    return "\n".join(lines)


def setup() -> None:
    """A notebook's plotting, offline: BokehJS and Panel's JavaScript inline, and every HoloViews plot shown through
    Panel with its stylesheets inline (HoloViews' own notebook display points them at Panel's CDN, which an offline
    JupyterLab cannot reach: one failed request per stylesheet and plot)."""
    import holoviews as hv
    import panel as pn
    from IPython import get_ipython

    hv.extension("bokeh", inline=True)
    pn.config.inline = True  # Panel's stylesheets in each output, not linked to its CDN
    pn.config.console_output = "disable"  # no empty output per plot for print()s from callbacks
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ConfigError,), _one_line_error)
        formatter = shell.display_formatter.mimebundle_formatter
        formatter.for_type(hv.core.Dimensioned, lambda obj, include=None, exclude=None:
                           pn.panel(obj)._repr_mimebundle_(include, exclude))


def injected_parameters(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill's injected cell set in this kernel (``-p NAME VALUE``), read from the kernel's input
    history (``In``): papermill writes that cell as ``# Parameters`` and one assignment a line. Empty outside a
    papermill run (a notebook run by hand has no such cell)."""
    history = namespace.get("In")
    if not isinstance(history, list):
        return []
    for source in reversed(history):
        if isinstance(source, str) and source.lstrip().startswith("# Parameters"):
            try:
                tree = ast.parse(source)
            except SyntaxError:
                return []
            return [t.id for node in tree.body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)]
    return []


def notebook_overrides(slug: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The Config fields a notebook's parameters cell set to something other than None (papermill's ``-p``),
    validated before any work: an unknown parameter, a bad value, a bad profile or a ``result_path`` this process
    cannot write is a :class:`~lab.checks.ConfigError` that names it, the value and what is allowed (one line in the
    notebook, see :func:`setup`)."""
    method = registry.get(slug)
    names = field_specs(method.config)
    known = ["profile", "result_path", *names]
    for name in injected_parameters(namespace):
        if name not in known:
            raise ConfigError(f"-p {name} {namespace.get(name)!r} is not allowed: {slug} has no parameter {name!r}; "
                              f"allowed: {', '.join(known)}")
    overrides = {k: namespace[k] for k in names if namespace.get(k) is not None}
    method.make_config(namespace.get("profile", "quick"), **overrides)
    result_path = namespace.get("result_path") or ""
    if result_path:
        check_writable(result_path, "result_path")
    return overrides


def _one_line_error(shell, etype, value, tb, tb_offset=None):
    """A bad parameter in a notebook shows as one line (``ConfigError: N=-3 is not allowed; ...``), not the
    traceback through the lab that led to it: the message says all there is."""
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)  # the kernel's error output (IPython ignores what a handler returns)
    return stb


def _parameters_cell(nb: dict) -> dict:
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"expected one cell tagged 'parameters', found {len(cells)}")
    return cells[0]


def sync_parameters(slug: str, path: str | Path | None = None) -> bool:
    """Rewrite the parameters cell of ``slug``'s notebook from its Config; returns whether it changed."""
    path = Path(path) if path is not None else registry.get(slug).notebook_path
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = _parameters_cell(nb)
    new = parameters_source(slug)
    if "".join(cell["source"]) == new:
        return False
    cell["source"] = new.splitlines(keepends=True)
    atomic_write_text(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return True


def parameters_in_notebook(slug: str) -> str:
    nb = json.loads(registry.get(slug).notebook_path.read_text(encoding="utf-8"))
    return "".join(_parameters_cell(nb)["source"])
