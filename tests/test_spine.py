"""The light, layered spine: the commands that only read (``lab list``, ``--help``, ``--fields``) import no torch,
``lab.datasets`` never imports ``lab.core``, and ``lab.run`` takes a Config the CLI built once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_LIGHT = """
import sys
from click.testing import CliRunner
from lab import registry
from lab.cli import cli
runner = CliRunner()
calls = [["list"], ["--help"], ["run", "--help"], ["serve", "--help"], ["serve", "--list"]]
calls += [["run", slug, "--fields"] for slug in registry.slugs()]
for args in calls:
    out = runner.invoke(cli, args)
    assert out.exit_code == 0, (args, out.output)
heavy = sorted(m for m in ("torch", "numba", "panel", "holoviews") if m in sys.modules)
print("HEAVY", ",".join(heavy))
"""


def test_listing_help_and_fields_import_no_torch_in_a_fresh_interpreter():
    out = subprocess.run([sys.executable, "-c", _LIGHT], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    heavy = out.stdout.strip().splitlines()[-1]
    assert heavy == "HEAVY", f"lab list / --help / run SLUG --fields imported {heavy.split()[-1]}"


def test_serve_lists_every_dashboard_on_one_line():
    from click.testing import CliRunner

    from dashboards import APPS
    from lab.cli import cli

    out = CliRunner().invoke(cli, ["serve", "--list"])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(APPS)
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines), "every dashboard says what it shows"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize(("package", "forbidden"), [("lab/datasets", "lab.core"), ("kernels", "lab")])
def test_layering_rules_hold(package, forbidden):
    """The lower layer never imports the upper one (module level or inside a function)."""
    bad = [f"{p.relative_to(ROOT)} imports {name}" for p in sorted((ROOT / package).rglob("*.py"))
           for name in _imports(p) if name == forbidden or name.startswith(forbidden + ".")]
    assert not bad, "; ".join(bad)


def test_lab_run_takes_the_config_it_was_given():
    import lab
    from lab import registry

    cfg = registry.get("dam").make_config("ci")
    result = lab.run("dam", "ci", config=cfg, progress=False)
    assert lab.config_of(result.data) == cfg
    with pytest.raises(TypeError, match="not both"):
        lab.run("dam", "ci", config=cfg, n=3)
    with pytest.raises(TypeError, match="not the method's"):
        lab.run("dam", "ci", config=registry.get("tbptt").make_config("ci"))
