"""The registry of methods: slug -> :class:`Method`.

Each method lives in ``lab/methods/<slug>/`` and declares ``METHOD = Method.here(__name__, title=..., paper=...)``
in its ``__init__.py``; everything else is derived from the folder: the Config (``config.py``), ``run``
(``experiment.py``), the claims (``claims.py``), the notebook (``notebooks/NN_<slug>.ipynb``: ``NN`` is the
method's place in the report, the README and ``lab list``) and the dashboards (every ``dashboards/<name>.py``
that declares ``METHOD = "<slug>"``, or a tuple of slugs for an app that shows several). The registry imports only
the ``__init__`` modules and the light ``config.py`` files, so ``lab list`` stays fast; ``run`` and the claims are
imported on first use.
"""

from __future__ import annotations

import ast
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
DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboards"

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

    Build it with :meth:`here` in the method's ``__init__.py``; the fields above are derived from the folder.
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

    @classmethod
    def here(cls, module: str, *, title: str, paper: str, summary: str) -> Method:
        """The method of the folder whose ``__init__`` is ``module`` (pass ``__name__``).

        Arguments:
            module: ``lab.methods.<slug>``; the slug is the folder's name.
            title: the paper's title. paper: where it is (``arXiv:...`` or ``OpenReview:...``).
            summary: one sentence: what the method does.
        """
        slug = module.rsplit(".", 1)[-1]
        config = importlib.import_module(f"{module}.config").Config
        return cls(
            slug=slug,
            title=title,
            paper=paper,
            summary=summary,
            config=config,
            run=f"{module}.experiment:run",
            claims=f"{module}.claims:CLAIMS",
            notebook=f"{position(slug):02d}_{slug}.ipynb",
            dashboards=dashboards_of(slug),
        )

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
def _numbers() -> dict[str, int]:
    """Slug -> the number ``NN`` of its notebook ``notebooks/NN_<slug>.ipynb`` (read from the file names)."""
    out: dict[str, int] = {}
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")):
        out[path.stem[3:]] = int(path.stem[:2])
    return out


def position(slug: str) -> int:
    """The method's number (1-based): the ``NN`` of its notebook ``notebooks/NN_<slug>.ipynb``; a method without a
    notebook comes after every numbered one."""
    numbers = _numbers()
    if slug in numbers:
        return numbers[slug]
    last = max(numbers.values(), default=0)
    extra = sorted(p.parent.name for p in METHODS_DIR.glob("*/__init__.py") if p.parent.name not in numbers)
    return last + 1 + extra.index(slug) if slug in extra else last + 1 + len(extra)


def refresh() -> None:
    """Forget what the registry read, so that a method folder or notebook written since is found
    (``lab new``)."""
    importlib.invalidate_caches()
    _numbers.cache_clear()
    _methods.cache_clear()
    dashboard_methods.cache_clear()


def next_number() -> int:
    """The number the next method's notebook takes (``lab new``)."""
    return max(_numbers().values(), default=0) + 1


@cache
def dashboard_methods() -> dict[str, tuple[str, ...]]:
    """Dashboard name -> the slugs it shows, read without importing the app: ``METHOD = "slug"`` in
    ``dashboards/<name>.py``, or a tuple of slugs for an app that shows several methods (the first one is the app's
    own, the method whose Config its widgets come from)."""
    out = {}
    for path in sorted(DASHBOARD_DIR.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "METHOD"):
                value = ast.literal_eval(node.value)
                out[path.stem] = (value,) if isinstance(value, str) else tuple(value)
    return out


def dashboards_of(slug: str) -> tuple[str, ...]:
    return tuple(name for name, of in dashboard_methods().items() if slug in of)


@cache
def _methods() -> dict[str, Method]:
    found: list[Method] = []
    for init in sorted(METHODS_DIR.glob("*/__init__.py")):
        module = importlib.import_module(f"lab.methods.{init.parent.name}")
        method = getattr(module, "METHOD", None)
        if isinstance(method, Method):
            found.append(method)
    out: dict[str, Method] = {}
    for method in sorted(found, key=lambda m: position(m.slug)):
        if method.slug in out:
            raise RuntimeError(f"duplicate method slug {method.slug!r}")
        out[method.slug] = method
    return out


def methods() -> list[Method]:
    """All registered methods, in the order of their notebooks' numbers."""
    return list(_methods().values())


def slugs() -> list[str]:
    return list(_methods())


def get(slug: str) -> Method:
    """The method registered as ``slug``; ``UnknownMethodError`` lists the known slugs otherwise."""
    try:
        return _methods()[slug]
    except KeyError:
        raise UnknownMethodError(f"unknown method {slug!r}; allowed: one of the known methods: "
                                 f"{', '.join(slugs())}") from None


def methods_markdown_table() -> str:
    """The README's method table, generated from the registry (a test keeps the README in step)."""
    lines = ["| slug | paper | notebook | dashboards | title |", "| --- | --- | --- | --- | --- |"]
    for m in methods():
        dash = ", ".join(f"`{d}`" for d in m.dashboards) or "-"
        lines.append(f"| `{m.slug}` | {m.paper} | `notebooks/{m.notebook}` | {dash} | {m.title} |")
    return "\n".join(lines)


def dashboards_markdown_list() -> str:
    """The README's dashboard list: each dashboard with the methods it shows and its one-line description, as
    ``lab serve --list`` prints them (read from the dashboard modules without importing them)."""
    from dashboards import describe_dashboards

    return "\n".join(f"- `{d.name}` ({', '.join(f'`{s}`' for s in d.slugs)}): {d.description}."
                     for d in describe_dashboards())


#: the README's generated blocks: marker name -> the function that writes the block
README_BLOCKS = {"methods": methods_markdown_table, "dashboards": dashboards_markdown_list}


def sync_readme(path: Path, *, write: bool = True) -> bool:
    """Put each of :data:`README_BLOCKS` between the README's ``<!-- name:start -->`` / ``<!-- name:end -->``
    markers (the method table, the dashboard list).

    Returns whether a block was out of step (and, with ``write``, rewritten).
    """
    import re

    from lab.io import atomic_write_text

    text = original = path.read_text(encoding="utf-8")
    for name, make in README_BLOCKS.items():
        match = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
        if match is None:
            raise ValueError(f"{path} has no <!-- {name}:start --> / <!-- {name}:end --> markers")
        block = make().strip()
        if match.group(1).strip() != block:
            text = text[: match.start(1)] + block + "\n" + text[match.end(1):]
    if text == original:
        return False
    if write:
        atomic_write_text(path, text)
    return True
