"""The README's method table is generated from the registry and must stay in step with it."""

import re
from pathlib import Path

from lab.registry import methods_markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    first_block = text.split("```")[1]
    assert "make report" in first_block and "make test" in first_block


def test_method_table_matches_registry():
    text = README.read_text()
    table = re.search(r"<!-- methods:start -->\n(.*?)\n<!-- methods:end -->", text, re.S)
    assert table, "README lacks the methods table markers"
    assert table.group(1).strip() == methods_markdown_table().strip(), (
        "README method table is out of date: run `lab sync`"
    )


def test_readme_mentions_every_dashboard():
    from dashboards import APPS

    text = README.read_text()
    for name in APPS:
        assert f"`{name}`" in text
