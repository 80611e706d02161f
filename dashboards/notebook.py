"""A method's dashboard panel inside its notebook: the last cell of each notebook whose method has a dashboard runs
``explore(slug, result)``.

In JupyterLab it returns the method's :class:`~dashboards.panels.MethodPanel` (the one of its dashboard that shows
this method), live over Panel's notebook comms: the widgets made from Config fields (``field_param``) start at the
notebook's own run's values, and the panel follows the run's profile, so it reuses the caches that run made. Where
nobody can move a widget (Papermill, ``lab report``, nbconvert) it returns a short note instead, never an error.

Whether the notebook is interactive: ``$LAB_EXPLORE`` when set (``1``: live, ``0``: the note), otherwise whether a
Jupyter server started the kernel (it sets ``JPY_SESSION_NAME``; Papermill and nbclient do not).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["EXPLORE_ENV", "explore", "interactive", "panel_type", "start_panel"]

#: set to 1 (always live) or 0 (always the note) to override the detection
EXPLORE_ENV = "LAB_EXPLORE"


def interactive() -> bool:
    """Whether someone can move the widgets: ``$LAB_EXPLORE`` when set, otherwise whether a Jupyter server
    (JupyterLab, Notebook) started this kernel."""
    value = os.environ.get(EXPLORE_ENV)
    if value is not None:
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return "JPY_SESSION_NAME" in os.environ


def panel_type(slug: str) -> tuple[str, type]:
    """``(dashboard name, panel class)`` of the first dashboard showing method ``slug``; ``LookupError`` if none."""
    from dashboards.panels import MethodDashboard, MethodPanel
    from lab import registry

    for name in registry.dashboards_of(slug):
        board = importlib.import_module(f"dashboards.{name}").Dashboard
        if issubclass(board, MethodPanel) and board.method == slug:
            return name, board
        if issubclass(board, MethodDashboard):
            for cls in board.panel_types:
                if cls.method == slug:
                    return name, cls
    raise LookupError(f"method {slug!r} has no dashboard panel")


def _run_settings(panel: Any, config: Any) -> list[str]:
    """Set each widget made from a Config field (same name, same doc) to the run's value where the widget allows it;
    returns the names set."""
    from lab.config import field_specs

    done = []
    for name, spec in field_specs(type(config)).items():
        if name not in panel.param or name not in panel.controls or panel.param[name].doc != spec.doc:
            continue
        value = getattr(config, name)
        if value == getattr(panel, name):
            continue
        try:
            setattr(panel, name, value)
        except ValueError:  # outside the widget's bounds or choices: the widget keeps its start
            continue
        done.append(name)
    return done


def _note(slug: str, board: str) -> Any:
    from IPython.display import Markdown

    return Markdown(
        f"*Explore.* Run this notebook in JupyterLab to get the `{board}` dashboard's panel for `{slug}` here, live "
        f"over this run's profile; or `lab serve {board}`. (Not shown in a non-interactive run such as Papermill "
        f"or the report; `{EXPLORE_ENV}=1` forces it.)")


def start_panel(slug: str, result: Any = None) -> tuple[Any, str]:
    """Method ``slug``'s panel over ``result``'s profile with its Config-field widgets at the run's values, and a
    line saying so (Markdown)."""
    from dashboards.panels import PROFILES, profile_from_env

    board, cls = panel_type(slug)
    profile = str(result.data.attrs.get("profile", "quick")) if result is not None else profile_from_env()
    shown = profile if profile in PROFILES else "quick"
    panel = cls(profile=shown)
    started = _run_settings(panel, result.config) if result is not None else []
    where = f"profile `{shown}`" + (f" (this run is `{profile}`)" if shown != profile else "")
    at = f"; {', '.join(f'`{n}`' for n in started)} start at this run's values" if started else ""
    return panel, f"Dashboard `{board}`, {where}{at}."


def explore(slug: str, result: Any = None, *, live: bool | None = None) -> Any:
    """Method ``slug``'s dashboard panel for the notebook, or a note where nobody can interact.

    Arguments:
        result: the notebook's run (``lab.run``'s result): the panel takes its profile (``ci`` or ``quick``; a
            ``full`` run is explored at ``quick``) and starts the widgets built from Config fields at its values.
        live: force the panel (True) or the note (False); default :func:`interactive`.
    """
    if not (interactive() if live is None else live):
        return _note(slug, panel_type(slug)[0])
    import panel as pn

    pn.extension(inline=True)
    panel, line = start_panel(slug, result)
    return pn.Column(pn.pane.Markdown(line), panel, sizing_mode="stretch_width")
