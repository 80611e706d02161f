"""``lab new``: a new method that runs and passes the tests from the first minute, in a copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("lab", "kernels", "dashboards", "notebooks", "tests", "README.md", "pyproject.toml", "CONTRIBUTING.md")


def _lab(tree: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "LAB_DATA_DIR": str(tree / "data")}
    return subprocess.run([sys.executable, "-m", *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the source tree (no caches, no data); removed with the test's temporary folder."""
    dest = tmp_path_factory.mktemp("tree")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in COPIED:
        src = ROOT / name
        (shutil.copytree(src, dest / name, ignore=ignore) if src.is_dir() else shutil.copy2(src, dest / name))
    return dest


def test_lab_new_writes_a_method_that_runs_and_passes_the_contract(tree):
    made = _lab(tree, "lab", "new", "demo", "--title", "A demo method", "--paper", "arXiv:0000.00000")
    assert made.returncode == 0, made.stderr[-3000:]
    for path in ("lab/methods/demo/experiment.py", "lab/methods/demo/claims.py", "tests/methods/test_demo.py"):
        assert (tree / path).exists(), path
    assert (tree / "notebooks" / f"{len(list((ROOT / 'notebooks').glob('*.ipynb'))) + 1:02d}_demo.ipynb").exists()
    assert "`demo`" in (tree / "README.md").read_text()
    ran = _lab(tree, "lab", "run", "demo", "--profile", "ci", "-q", "--out", str(tree / "results"))
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]  # its placeholder claim holds
    tests = _lab(tree, "pytest", "-q", "-p", "no:cacheprovider", "tests/methods/test_demo.py",
                 "tests/test_readme.py::test_method_table_matches_registry", "tests/test_contract.py", "-k",
                 "demo or registered_in_order or imports_another or private_name")
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    report = _lab(tree, "lab", "report", "demo", "--profile", "ci", "--out", str(tree / "reports"))
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]  # its notebook executes
    assert (tree / "reports" / "ci" / "index.html").exists()
    again = _lab(tree, "lab", "new", "demo", "--title", "Again", "--paper", "arXiv:1")
    assert again.returncode == 2 and "slug='demo' is not allowed" in again.stderr


def test_lab_new_refuses_a_bad_slug_and_writes_nothing(tree):
    before = sorted(p.name for p in (tree / "lab" / "methods").iterdir())
    out = _lab(tree, "lab", "new", "Bad-Slug", "--title", "T", "--paper", "P")
    assert out.returncode == 2 and "slug='Bad-Slug' is not allowed" in out.stderr
    assert sorted(p.name for p in (tree / "lab" / "methods").iterdir()) == before
