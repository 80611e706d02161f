"""The registry of methods: slug -> :class:`Method`.

Each method lives in ``lab/methods/<slug>/`` and declares ``METHOD = Method(...)`` in its ``__init__.py``; the
registry discovers them (no central list to edit) and orders them by notebook name (``NN_<slug>.ipynb``). It imports
only those ``__init__`` modules and the light ``config.py`` files, so ``lab list`` stays fast; the heavy
``experiment.run`` and its claims are imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import xarray as xr

from lab.claims import Claim

METHODS_DIR = Path(__file__).resolve().parent / "methods"
NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


class UnknownMethodError(ValueError):
    pass


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Method:
    """One paper's method.

    Arguments:
        slug: short name used everywhere (``lab run SLUG``).
        title: the paper's title.
        paper: where the paper is (arXiv id or OpenReview id).
        summary: one sentence: what the method does.
        config: the method's Config class (a :class:`lab.config.BaseConfig` subclass).
        run: ``"module:function"`` of ``run(cfg, progress=True) -> xarray.Dataset``.
        claims: ``"module:NAME"`` of the method's list of :class:`lab.claims.Claim`.
        notebook: file name under ``notebooks/``.
        dashboards: names of the Panel apps under ``dashboards/`` that show this method.
    """

    slug: str
    title: str
    paper: str
    summary: str
    config: type
    run: str
    claims: str
    notebook: str
    dashboards: Sequence[str] = field(default_factory=tuple)

    @property
    def run_fn(self) -> Callable[..., xr.Dataset]:
        return _resolve(self.run)

    @property
    def claim_list(self) -> list[Claim]:
        return list(_resolve(self.claims))

    @property
    def notebook_path(self) -> Path:
        return NOTEBOOK_DIR / self.notebook

    @property
    def profiles(self) -> tuple[str, ...]:
        from lab.config import PROFILE_NAMES

        return PROFILE_NAMES

    def make_config(self, profile: str = "quick", **overrides: Any):
        return self.config.from_profile(profile, **overrides)


@cache
def _methods() -> dict[str, Method]:
    found: list[Method] = []
    for init in sorted(METHODS_DIR.glob("*/__init__.py")):
        module = importlib.import_module(f"lab.methods.{init.parent.name}")
        method = getattr(module, "METHOD", None)
        if isinstance(method, Method):
            found.append(method)
    out: dict[str, Method] = {}
    for method in sorted(found, key=lambda m: m.notebook):
        if method.slug in out:
            raise RuntimeError(f"duplicate method slug {method.slug!r}")
        out[method.slug] = method
    return out


def methods() -> list[Method]:
    """All registered methods, in notebook order."""
    return list(_methods().values())


def slugs() -> list[str]:
    return list(_methods())


def get(slug: str) -> Method:
    """The method registered as ``slug``; ``UnknownMethodError`` lists the known slugs otherwise."""
    try:
        return _methods()[slug]
    except KeyError:
        raise UnknownMethodError(f"unknown method {slug!r}; known methods: {', '.join(slugs())}") from None


def methods_markdown_table() -> str:
    """The README's method table, generated from the registry (a test keeps the README in step)."""
    lines = ["| slug | paper | notebook | dashboards | title |", "| --- | --- | --- | --- | --- |"]
    for m in methods():
        dash = ", ".join(f"`{d}`" for d in m.dashboards) or "-"
        lines.append(f"| `{m.slug}` | {m.paper} | `notebooks/{m.notebook}` | {dash} | {m.title} |")
    return "\n".join(lines)
