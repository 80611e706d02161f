"""The `lab` command: list, run, check (its bad input is in tests/test_bad_inputs.py)."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from lab.cli import cli


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_list(runner):
    out = runner.invoke(cli, ["list"])
    assert out.exit_code == 0 and "dam" in out.output and "hopfield" in out.output


def test_run_ci_saves_prints_claims_and_exits_by_claims(runner, tmp_path):
    out = runner.invoke(cli, ["run", "dam", "--profile", "ci", "-q", "-p", "trials=2", "--out", "res"])
    assert out.exit_code in (0, 1), out.output
    assert "claims hold" in out.output
    saved = tmp_path / "res" / "dam-ci.nc"
    assert saved.exists()
    n_pass, n_all = map(int, out.output.strip().splitlines()[-1].split()[0].split("/"))
    assert out.exit_code == (0 if n_pass == n_all else 1)
    again = runner.invoke(cli, ["check", str(saved)])
    assert again.exit_code == out.exit_code and "claims hold" in again.output
    for columns in (80, 160):  # the table fits the terminal's width, whatever COLUMNS says
        narrow = runner.invoke(cli, ["check", str(saved)], env={"COLUMNS": str(columns)})
        assert max(map(len, narrow.output.splitlines())) <= columns, narrow.output


def test_run_fields_lists_parameters(runner):
    out = runner.invoke(cli, ["run", "dam", "--fields"])
    assert out.exit_code == 0 and "alphas" in out.output and "Loads alpha" in out.output
    assert "allowed: an integer in" in out.output


def test_sync_check_reports_what_is_out_of_step(runner, monkeypatch):
    from lab import notebooks

    out = runner.invoke(cli, ["sync", "--check"])
    assert out.exit_code == 0 and "everything in step" in out.output, out.output
    monkeypatch.setattr(notebooks, "parameters_source", lambda slug: "profile = 'quick'")
    out = runner.invoke(cli, ["sync", "--check"])
    assert out.exit_code == 1 and "out of step: 01_dam.ipynb" in out.output
    out = runner.invoke(cli, ["sync", "--check", "--method", "wsc", "--method", "rem"])
    assert out.exit_code == 1 and out.output.strip() == "out of step: 16_wsc.ipynb, 17_rem.ipynb", out.output


def test_console_script_exit_code_for_bad_input(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lab", "run", "nosuch"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2 and "known methods" in proc.stderr


def _long_claim():
    from lab.claims.claim import ClaimResult

    words = [f"word{i:02d}" for i in range(60)]
    return words, ClaimResult(name="long_claim", statement=" ".join(words), source="paper", measured=1.5, op=">=",
                              threshold=1.0, threshold_source="the paper", unit="", verdict="holds",
                              control_why="a reason " * 20, detail="what was measured " * 12)


@pytest.mark.parametrize("columns", [80, 160])
def test_claims_table_wraps_at_word_boundaries_to_the_terminal_width(monkeypatch, columns):
    from lab.claims.table import ClaimsTable

    monkeypatch.setenv("COLUMNS", str(columns))
    words, result = _long_claim()
    text = ClaimsTable([result]).to_text()
    lines = text.splitlines()
    assert max(map(len, lines)) <= columns, text
    assert max(map(len, lines)) > columns - 12, text  # uses the width it has
    statement = [w for line in lines[3:] for w in line.split() if w.startswith("word")]
    assert statement == words  # every word whole, in order: never cut mid-word
    assert " ".join(text.split()).count("what was measured") == 12  # the detail whole, over several lines


def test_claims_table_default_width_when_not_a_terminal(monkeypatch):
    from lab.claims.table import TEXT_WIDTH, ClaimsTable

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("shutil.os.get_terminal_size", lambda *a: (_ for _ in ()).throw(OSError("not a tty")))
    lines = ClaimsTable([_long_claim()[1]]).to_text().splitlines()
    assert TEXT_WIDTH - 12 < max(map(len, lines)) <= TEXT_WIDTH
