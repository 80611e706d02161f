"""The layout rules of lab/ and kernels/: no Python file over the line cap, no import circle between their modules.

The import graph is read from the source (an AST scan, nothing imported): every ``import`` and ``from ... import``
statement counts, at module level or inside a function (a lazy import closes a circle as surely as an eager one, it
only closes it later). An edge goes to the most specific module of lab/ or kernels/ the statement names:
``from kernels._numba import ssd`` depends on ``kernels._numba.ssd``, ``from lab.cache import memo`` on ``lab.cache``
(the package's ``__init__``). A package's ``__init__`` importing its own submodules is the usual re-export, not a
circle, and a submodule is not taken to depend on its parent packages' ``__init__`` implicitly.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lab", "kernels")
MAX_LINES = 420


def _python_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def _generated(text: str) -> bool:
    """Generated code (exempt from the cap) says so in its first lines: "generated ... do not edit"."""
    head = "\n".join(text.splitlines()[:3]).lower()
    return "generated" in head and "do not edit" in head


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package: str) -> list[tuple[str, int]]:
    """Every name the file imports, as a dotted path (relative imports resolved in ``package``), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found += [(base if alias.name == "*" else f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def import_graph(files: list[Path] | None = None) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line of the first such import}}`` over the modules of lab/ and kernels/."""
    files = _python_files() if files is None else files
    modules = {_module_name(p): p for p in files}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for target, line in _imports(path, package):
            while target and target not in modules:  # an attribute of a module (or a module not ours): the module
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan's algorithm), each as
    the list of modules along it, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, set(c)) for c in components]


def _cycle_in(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of ``component`` (breadth-first, inside the component)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    return paths[v] + [start]
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return sorted(component)  # not reached: a strongly connected component has a cycle through each member


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_no_file_over_the_line_cap():
    over = {}
    for path in _python_files():
        text = path.read_text()
        if not _generated(text) and len(text.splitlines()) > MAX_LINES:
            over[str(path.relative_to(ROOT))] = len(text.splitlines())
    assert not over, f"files over {MAX_LINES} lines (split them along their roles): {over}"


def test_no_import_circle():
    graph = import_graph()
    cycles = import_cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(_describe(graph, c) for c in cycles)


def test_kernels_import_nothing_from_lab():
    """kernels/ stands on its own (lab/ builds on it, never the other way round)."""
    graph = import_graph()
    kernels = {m: edges for m, edges in graph.items() if m.split(".")[0] == "kernels"}
    up = {m: sorted(t for t in edges if t.split(".")[0] == "lab") for m, edges in kernels.items()}
    assert not {m: t for m, t in up.items() if t}, up


@pytest.fixture
def toy_tree(tmp_path, monkeypatch):
    """A small package tree whose graph the checks must read right (the scan is what could be wrong)."""
    files = {
        "lab/__init__.py": "from lab.a import f\n",
        "lab/a.py": "def f():\n    from . import b  # a lazy import still counts\n    return b\n",
        "lab/b.py": "from lab.c.d import g\n",
        "lab/c/__init__.py": "from .d import g\n",
        "lab/c/d.py": "import numpy\n\ndef g():\n    from ..a import f\n    return f\n",
        "lab/e.py": "from lab.c import g\nfrom lab import a\n",
        "kernels/__init__.py": "",
        "kernels/k.py": "from .m import x\n",
        "kernels/m.py": "x = 1\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    return tmp_path


def test_the_scan_finds_a_lazy_circle_and_names_its_lines(toy_tree):
    graph = import_graph()
    assert graph["lab.a"] == {"lab.b": 2} and graph["lab.c.d"] == {"lab.a": 4}  # numpy is not ours
    assert graph["lab.c"] == {"lab.c.d": 1} and graph["lab.e"] == {"lab.c": 1, "lab.a": 2}
    assert graph["kernels.k"] == {"kernels.m": 1}
    (cycle,) = import_cycles(graph)
    assert cycle == ["lab.a", "lab.b", "lab.c.d", "lab.a"]
    assert _describe(graph, cycle) == "lab.a (line 2) -> lab.b (line 1) -> lab.c.d (line 4) -> lab.a"


def test_contributing_layout_matches_the_tree():
    """CONTRIBUTING.md's Layout block names every module and package of lab/ and nothing that is not there."""
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```")[1]
    named_in_lab, missing = set(), []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        for token in re.findall(r"(?<![\w/.`<])([a-z_]+(?:\.py|/))(?=\s|$|<)", line):
            if token == "lab/" and indent == 0:
                continue
            path = (ROOT / "lab" / token) if indent == 2 else (ROOT / token) if indent == 0 else None
            if path is None or "<" in token:
                continue
            if not path.exists():
                missing.append(token)
            if indent == 2:
                named_in_lab.add(token.rstrip("/").removesuffix(".py"))
    assert not missing, f"CONTRIBUTING.md's layout names what the tree lacks: {missing}"
    present = {p.stem for p in (ROOT / "lab").glob("*.py") if p.stem not in ("__init__", "__main__")}
    present |= {p.name for p in (ROOT / "lab").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert not present - named_in_lab, f"CONTRIBUTING.md's layout lacks {sorted(present - named_in_lab)}"
