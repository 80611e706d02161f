"""Skipping what did not change: the content hash of everything a method's notebook run depends on, and the stamp
of its last good run.

After a good run (the notebook executed without error and its claims were evaluated) the report stores
``<slug>.run.json`` beside the notebook's outputs, with a content hash (:func:`run_key`) of the notebook file, the
method's folder (``lab/methods/<slug>/**/*.py``), the shared code every notebook runs on (:data:`SHARED_CODE`: every
Python file of ``lab/`` outside ``lab/methods/``, and ``kernels/``), the profile and the lab's version. A later
report whose hash for that method is the same reuses its HTML, NetCDF and index row ("unchanged, reused") instead of
executing it. The shared part is coarse on purpose: an edit anywhere in the shared code reruns every notebook (safe;
a method's own edits rerun only that method). Installed packages are not part of the hash: after an upgrade, rerun
with ``force=True``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path

from lab import registry
from lab.io import atomic_write_text

from .summary import NotebookRun

__all__ = ["METHODS_DIR", "OPS_PER_SECOND", "ROOT", "SHARED_CODE", "expected_seconds", "headline_path",
           "last_good_run", "run_key", "source_files", "stamp_path", "write_stamp"]

#: the repository root: the notebooks, the lab and the kernels live under it
ROOT = registry.NOTEBOOK_DIR.parent

#: the shared code every notebook runs on, as globs under :data:`ROOT` (less :data:`NOT_SHARED`); part of every
#: method's :func:`run_key`
SHARED_CODE = ("lab/**/*.py", "kernels/**/*.py")

#: folders under :data:`ROOT` that the shared code leaves out: each method's folder is hashed for its own method only
NOT_SHARED = ("lab/methods/",)

#: where the method folders are (the tests point it at a copy)
METHODS_DIR = registry.METHODS_DIR


def source_files(method) -> dict[str, Path]:
    """The files a method's report depends on, by a stable label: its notebook (``notebook/<file>``), its folder's
    Python files (``method/<path in the folder>``) and the shared code (its path under :data:`ROOT`)."""
    files = {f"notebook/{method.notebook}": registry.NOTEBOOK_DIR / method.notebook}
    folder = METHODS_DIR / method.slug
    files.update({f"method/{p.relative_to(folder).as_posix()}": p for p in folder.glob("**/*.py")})
    for pattern in SHARED_CODE:
        shared = {p.relative_to(ROOT).as_posix(): p for p in ROOT.glob(pattern)}
        files.update({label: p for label, p in shared.items() if not label.startswith(NOT_SHARED)})
    return {label: files[label] for label in sorted(files) if files[label].is_file()}


def run_key(method, profile: str) -> str:
    """Content hash of everything a method's notebook run depends on (:func:`source_files`, the profile and the
    lab's version): equal keys mean an equal run, so the last good one can be reused."""
    from lab import __version__

    digest = hashlib.sha256(json.dumps({"method": method.slug, "profile": profile, "lab": __version__}).encode())
    for label, path in source_files(method).items():
        digest.update(f"\0{label}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


def stamp_path(out_dir: Path, slug: str) -> Path:
    return out_dir / f"{slug}.run.json"


def headline_path(out_dir: Path, slug: str) -> Path:
    return out_dir / f"{slug}.headline.png"


def write_stamp(out_dir: Path, slug: str, key: str, seconds: float, html: str | None) -> None:
    """Record a good run of ``slug`` (its :func:`run_key`, seconds and HTML file) for :func:`last_good_run`."""
    stamp = {"key": key, "seconds": seconds, "html": html,
             "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    atomic_write_text(stamp_path(out_dir, slug), json.dumps(stamp, indent=2))


#: operations per second a notebook's run reaches on one core of a laptop, for the order of a cold report (the quick
#: profiles' ``run_budget().work`` against their notebook times on 2 cores: 0.01 to 0.25 s per 10^9, median 0.1)
OPS_PER_SECOND = 1e10


def expected_seconds(m, out_dir: Path, profile: str) -> float:
    """How long ``m``'s notebook is expected to run: its last run's seconds where a stamp is left (whatever its key),
    else its Config's estimated work (``run_budget()``) at :data:`OPS_PER_SECOND`; 0 where neither is known. The
    report starts the longest first, so that no long notebook is left to run alone at the end."""
    try:
        return float(json.loads(stamp_path(out_dir, m.slug).read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        return float(m.config.from_profile(profile).run_budget().work) / OPS_PER_SECOND
    except Exception:  # a method whose Config cannot be built here is run, just not ordered
        return 0.0


def last_good_run(m, key: str, out_dir: Path) -> NotebookRun | None:
    """The last good run of ``m`` when its key equals ``key`` and its files are all there; else None."""
    try:
        stamp = json.loads(stamp_path(out_dir, m.slug).read_text())
    except (OSError, ValueError):
        return None
    html_name = stamp.get("html")
    files = [out_dir / m.notebook, out_dir / f"{m.slug}.nc"] + ([out_dir / html_name] if html_name else [])
    if stamp.get("key") != key or not html_name or not all(f.is_file() for f in files):
        return None
    from lab.api import check

    try:
        claims = check(out_dir / f"{m.slug}.nc", m.slug)
    except Exception:  # an unreadable NetCDF: run again
        return None
    headline = headline_path(out_dir, m.slug)
    return NotebookRun(m.slug, m.title, m.paper, m.notebook, html_name, float(stamp.get("seconds", 0.0)),
                       claims=claims, reused=True, headline=headline.read_bytes() if headline.is_file() else None)
