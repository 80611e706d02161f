"""The README's generated parts (the method table, the dashboard list) and what it says about the notebooks' kernel
must stay in step with the code."""

import json
import re
from pathlib import Path

from lab import registry
from lab.registry import dashboards_markdown_list, methods_markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"


def _block(text: str, name: str) -> str:
    block = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert block, f"README lacks the {name} markers"
    return block.group(1).strip()


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    first_block = text.split("```")[1]
    assert "make report" in first_block and "make test" in first_block


def test_method_table_matches_registry():
    assert _block(README.read_text(), "methods") == methods_markdown_table().strip(), (
        "README method table is out of date: run `lab sync`")


def test_dashboard_list_matches_the_dashboards():
    """Every dashboard, with its methods and its one-line description (``lab serve --list``), in the README."""
    from dashboards import describe_dashboards

    listed = _block(README.read_text(), "dashboards")
    assert listed == dashboards_markdown_list().strip(), "README dashboard list is out of date: run `lab sync`"
    for d in describe_dashboards():
        (line,) = [row for row in listed.splitlines() if row.startswith(f"- `{d.name}` ")]
        assert d.description in line and all(f"`{slug}`" in line for slug in d.slugs), line


def test_readme_names_the_notebooks_kernel():
    """The kernel the README names is the one every notebook declares, ``lab new`` writes and the report runs."""
    from lab.authoring import _notebook
    from lab.report.execute import KERNEL_NAME

    text = README.read_text()
    named = set(re.findall(r"kernel is `([\w.-]+)`", text)) | set(re.findall(r"`([\w.-]+)` kernel", text))
    assert named == {KERNEL_NAME}, f"the README names the kernel(s) {sorted(named)}; the report runs {KERNEL_NAME}"
    for m in registry.methods():
        spec = json.loads(m.notebook_path.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        assert spec["name"] == KERNEL_NAME, f"{m.notebook}: kernel {spec['name']}"
    assert _notebook("dam", "T", "P")["metadata"]["kernelspec"]["name"] == KERNEL_NAME
