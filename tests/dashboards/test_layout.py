"""The dashboards package as a whole, read without a browser: its layering (public names of ``lab`` only), one
background-job mechanism, and every app's declarations (``lab serve --list`` prints one line each)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dashboards
from lab.registry import dashboard_methods, methods

DASHBOARDS = Path(dashboards.__file__).resolve().parent
MODULES = sorted(DASHBOARDS.glob("*.py"))
FORBIDDEN = ("lab.core", "lab.datasets")


def _lab_imports(tree: ast.Module) -> list[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` of every import of ``lab`` (or below) in the module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "lab"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lab":
            out += [(node.module, a.name, node.lineno) for a in node.names]
    return out


def layering_violations(source: str) -> list[str]:
    """What breaks the dashboards' layering rule in ``source``: an import of ``lab.core`` or ``lab.datasets``, a
    private module or name of ``lab``, or a private attribute of an imported ``lab`` module (``live._run``)."""
    tree = ast.parse(source)
    bad, modules = [], set()
    for module, name, line in _lab_imports(tree):
        if module.startswith(FORBIDDEN) or (name and f"{module}.{name}".startswith(FORBIDDEN)):
            bad.append(f"line {line}: imports {module}{'.' + name if name else ''}")
        elif any(part.startswith("_") for part in module.split(".")) or (name or "").startswith("_"):
            bad.append(f"line {line}: imports a private name: {module}{'.' + name if name else ''}")
        modules.add((name or module).split(".")[-1])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            bad.append(f"line {node.lineno}: uses {node.value.id}.{node.attr}")
    return bad


def test_the_check_catches_what_it_must():
    assert layering_violations("from lab.core.models import state_sizes")
    assert layering_violations("import lab.datasets.sequences")
    assert layering_violations("from lab import core")
    assert layering_violations("from lab.methods.rate.live import _run")
    assert layering_violations("from lab.methods.rate import live\nlive._run('ci')")
    assert not layering_violations("import lab\nfrom lab.methods.rate import live, plots\nlab.setup_process()")


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_dashboards_import_only_public_names_of_lab(path):
    assert layering_violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_no_background_job_machinery_outside_the_preparations(path):
    """Threads and periodic callbacks live in dashboards/preparation.py only; apps declare preparations."""
    if path.name == "preparation.py":
        return
    source = path.read_text(encoding="utf-8")
    for needle in ("threading", "add_periodic_callback", "onload(", "_version", "BackgroundJob"):
        assert needle not in source or path.name == "panels.py" and needle == "onload(", (path.name, needle)


def test_every_dashboard_describes_itself_in_one_line():
    listed = dashboards.describe_dashboards()
    assert [d.name for d in listed] == list(dashboards.APPS) and len(listed) >= 9
    slugs = {m.slug for m in methods()}
    for name, description, shown in listed:
        assert description and "\n" not in description and len(description) <= 100, name
        assert shown and set(shown) <= slugs, name
    assert {d.name: d.slugs for d in listed} == dashboard_methods()  # what the registry reads
    assert not {"panels", "preparation"} & set(dashboards.APPS)


def test_dashboards_are_named_for_what_they_show():
    apps = {d.name: d.slugs for d in dashboards.describe_dashboards()}
    assert apps["compact_models"] == ("ssm_inr", "ssdi8")
    assert apps["forgetting"] == ("rem", "qgpm", "wsc")
    assert apps["reasoning"] == ("tool_ssm", "chaingpt")
    assert not {"inr", "unlearning", "tools"} & set(apps)
