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
    assert 'class="claims"' in index and "measured" in index and "<th>control</th>" in index
    assert "verdict" in index


@pytest.mark.parametrize("slug", registry.slugs())
def test_papermill_lists_every_config_field_with_its_doc(slug):
    """`papermill --help-notebook` reads the parameters cell: every Config field, defaulting to None."""
    import papermill as pm

    from lab import notebooks
    from lab.config import field_specs

    params = pm.inspect_notebook(str(registry.get(slug).notebook_path))
    specs = field_specs(registry.get(slug).config)
    assert {"profile", "result_path", *specs} <= set(params)
    for name, spec in specs.items():
        assert params[name]["default"] == "None"
        assert notebooks.help_text(spec.doc.split()[0]) in params[name]["help"]


def test_notebook_override_reaches_the_run(tmp_path):
    """`papermill ... -p N 64` sets the Config field of the run the notebook saves."""
    import papermill as pm

    import lab

    nb = registry.get("dam").notebook_path
    out = tmp_path / "dam.nc"
    pm.execute_notebook(str(nb), str(tmp_path / "dam.ipynb"), cwd=str(nb.parent), progress_bar=False,
                        parameters={"profile": "ci", "result_path": str(out), "N": 64, "trials": 2},
                        kernel_name="python3")
    cfg = lab.config_of(lab.load(out))
    assert cfg.N == 64 and cfg.trials == 2


def _dying_execute(slug, notebook, out_dir, profile, env=None):
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


def test_parallel_notebooks_split_the_cores(monkeypatch):
    from lab import report

    monkeypatch.setattr(report.os, "cpu_count", lambda: 8)
    env = report.kernel_environment(jobs=2)
    assert env["OPENBLAS_NUM_THREADS"] == "4" and env["NUMBA_NUM_THREADS"] == "4"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert report.kernel_environment(jobs=16)["OMP_NUM_THREADS"] == "1"
