"""`lab report --profile ci`: every registered notebook executes through Papermill, one process each, and the
index shows each method's claims table and links its notebook's HTML."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import registry
from lab.cli import cli

pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    result = CliRunner().invoke(cli, ["report", "--profile", "ci", "--jobs", "2", "--out", str(out)])
    return out / "ci", result


@pytest.mark.parametrize("slug", registry.slugs())
def test_notebook_executes_in_ci_profile(report_dir, slug):
    folder, result = report_dir
    method = registry.get(slug)
    assert (folder / method.notebook).exists(), result.output
    assert (folder / f"{slug}.nc").exists(), result.output
    html = (folder / method.notebook.replace(".ipynb", ".html")).read_text()
    assert 'class="claims"' in html  # the notebook renders its claims table


def test_report_exit_code_and_index(report_dir):
    folder, result = report_dir
    assert result.exit_code == 0, result.output
    index = (folder / "index.html").read_text()
    for m in registry.methods():
        assert f'id="{m.slug}"' in index and m.notebook.replace(".ipynb", ".html") in index
    assert 'class="claims"' in index and "measured" in index


def _dying_execute(slug, notebook, out_dir, profile):
    raise RuntimeError("kernel died")


def test_failed_notebook_is_reported_and_others_still_run(tmp_path, monkeypatch):
    from lab import report

    monkeypatch.setattr(report, "_execute", _dying_execute)
    summary = report.build_report(["dam"], profile="ci", jobs=1, out=tmp_path)
    assert not summary.all_executed and "kernel died" in (tmp_path / "ci" / "index.html").read_text()


def test_relative_out_folder_is_resolved(tmp_path, monkeypatch):
    """Notebooks run with notebooks/ as their working directory: a relative --out must still collect results."""
    from lab import report

    monkeypatch.chdir(tmp_path)
    summary = report.build_report(["dam"], profile="ci", jobs=1, out=Path("reports"))
    assert summary.all_executed, summary.to_text()
    assert (tmp_path / "reports" / "ci" / "dam.nc").exists()
