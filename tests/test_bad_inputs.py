"""Bad input, as a careful user or an attacker types it, through the CLI, papermill and the dashboards' widgets:
each is refused before any work with exit 2 and one line that names the field (as typed), the value and what is
allowed, and nothing is written. The dashboards' widget rows are in tests/dashboards/test_bad_widgets.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from lab import notebooks
from lab.checks import ConfigError
from lab.cli import cli

GPU = torch.cuda.is_available()

#: (arguments, fragments the one line must hold: the field as typed, the value, what is allowed)
CLI_ROWS = [
    # lab run
    (["run", "nosuch"], ["unknown method 'nosuch'", "allowed: one of the known methods: ", "dam"]),
    (["run", "dam", "-p", "bogus=1"], ["bogus='1' is not allowed", "no parameter 'bogus'", "allowed: ", "N"]),
    (["run", "dam", "-p", "N=abc"], ["N='abc' is not allowed; allowed: an integer in [16, 100000]"]),
    (["run", "dam", "-p", "N=-4"], ["N=-4 is not allowed; allowed: an integer in [16, 100000]"]),
    (["run", "dam", "-p", "N=1.5"], ["N='1.5' is not allowed; allowed: an integer in [16, 100000]"]),
    (["run", "dam", "-p", "N="], ["N='' is not allowed; allowed: an integer in [16, 100000]"]),
    (["run", "dam", "-p", "seed=-1"], ["seed=-1 is not allowed; allowed: an integer in [0, 2147483647]"]),
    (["run", "dam", "-p", "update=never"], ["update='never' is not allowed; allowed: one of 'sync', 'async'"]),
    (["run", "dam", "-p", "alphas=x,1"], ["alphas='x,1' is not allowed; allowed: comma-separated list of float"]),
    (["run", "dam", "-p", "alphas=0.2,0.1"], ["alphas=(0.2, 0.1) is not allowed", "strictly increasing"]),
    (["run", "dam", "-p", "N"], ["-p 'N' is not allowed; allowed: FIELD=VALUE"]),
    (["run", "dam", "-p", "=5"], ["-p '=5' is not allowed; allowed: FIELD=VALUE"]),
    (["run", "dam", "-p", "N=512", "-p", "N=1024"], ["-p N=1024 is not allowed", "-p N=512 was given before",
                                                    "allowed: each field once"]),
    (["run", "dam", "--profile", "huge"], ["profile='huge' is not allowed; allowed: ci, quick, full"]),
    (["run", "dam", "--out", "/proc/nope"], ["--out='/proc/nope' is not allowed; allowed: a path this user can "
                                             "write"]),
    (["run", "dam", "--out", "/etc/hostname"], ["--out", "/etc/hostname", "is a file"]),
    (["run", "dam", "-P"], ["-P", "requires an argument"]),
    (["run"], ["Missing argument 'SLUG'", "allowed: lab run [OPTIONS] SLUG"]),
    (["run", "dam", "--bogus"], ["--bogus is not allowed: no such option; allowed: ", "--profile"]),
    (["run", "dam", "extra"], ["unexpected extra argument", "extra"]),
    (["run", "compressm", "-p", "device=gpu"], ["device='gpu' is not allowed; allowed: one of 'auto', 'cpu'"]),
    pytest.param(["run", "compressm", "-P", "ci", "-p", "device=cuda"], ["device='cuda'", "torch sees no CUDA"],
                 marks=pytest.mark.skipif(GPU, reason="this machine has a GPU")),
    # the run's budget: memory and work checked before any (LAB_MAX_MEMORY_GIB / LAB_MAX_WORK raise the limits)
    (["run", "dam", "-p", "trials=10000", "-p", "steps=10000"],
     ["trials=10000, steps=10000 is not allowed: the run needs", "GiB (dam's recorded trajectories",
      "allowed: a run within"]),
    (["run", "ssm_ltl", "-p", "check_length=100000", "-p", "check_words=1000"],
     ["check_length=100000, check_words=1000 is not allowed: the run needs 37.3 GiB", "allowed: a run within"]),
    (["run", "qgpm", "-p", "hidden=4096,4096,4096,4096", "-p", "thresholds=0.97,0.97,0.97,0.97,0.97", "-p",
      "n_tasks=10"],
     ["hidden=4096,4096,4096,4096, n_tasks=10 is not allowed: the run needs 2.5e+16 operations",
      "allowed: a run within"]),
    (["sweep", "dam", "-g", "trials=2,10000", "-p", "steps=10000"], ["-g trials=10000, steps=10000 is not allowed: "
                                                                     "the run needs", "GiB (dam's"]),
    (["sweep", "dam", "--seeds", "0-9999", "-P", "full"], ["lab sweep dam with 10000 points is not allowed: together "
                                                           "they need", "allowed: fewer points or seeds"]),
    # lab check
    (["check", "missing.nc"], ["missing.nc"]),
    (["check"], ["Missing argument 'PATH'", "allowed: lab check [OPTIONS] PATH"]),
    # lab report
    (["report", "nosuch"], ["unknown method 'nosuch'", "allowed: one of the known methods"]),
    (["report", "--profile", "huge"], ["--profile='huge' is not allowed; allowed: ci, quick, full"]),
    (["report", "-j", "0"], ["--jobs", "0 is not in the range 1<=x<=64"]),
    (["report", "-j", "x"], ["--jobs", "'x' is not a valid integer"]),
    (["report", "dam", "--out", "/proc/nope"], ["--out='/proc/nope' is not allowed; allowed: a path this user "
                                                "can write"]),
    # lab serve
    (["serve", "nosuch"], ["unknown dashboard 'nosuch'", "allowed: one of the known dashboards: ", "hopfield"]),
    (["serve", "--port", "70000"], ["--port", "70000 is not in the range 0<=x<=65535"]),
    # lab bench
    (["bench", "nosuch"], ["unknown benchmark 'nosuch'", "allowed: one of the known benchmarks: ", "scan"]),
    (["bench", "scan", "--out", "/proc/nope"], ["--out='/proc/nope' is not allowed"]),
    # lab sweep
    (["sweep", "dam"], ["-g and --seeds are both missing; allowed: at least one -g FIELD=V1,V2 or --seeds"]),
    (["sweep", "nosuch", "-g", "N=64"], ["unknown method 'nosuch'", "allowed: one of the known methods"]),
    (["sweep", "dam", "-g", "bogus=1,2"], ["-g bogus=1,2 is not allowed: dam has no parameter 'bogus'; allowed: "]),
    (["sweep", "dam", "-g", "N=64,-3"], ["-g N=-3 is not allowed; allowed: an integer in [16, 100000]"]),
    (["sweep", "dam", "-g", "N=64,abc"], ["-g N='abc' is not allowed; allowed: an integer in [16, 100000]"]),
    (["sweep", "dam", "-g", "update=never"], ["-g update='never' is not allowed; allowed: one of 'sync'"]),
    (["sweep", "dam", "-g", "N="], ["-g N='' is not allowed; allowed: one or more comma-separated values"]),
    (["sweep", "dam", "-g", "N=64,,128"], ["-g N='64,,128' is not allowed; allowed: one or more"]),
    (["sweep", "dam", "-g", "N=64,64"], ["-g N=64,64 is not allowed: 64 given twice; allowed: each value once"]),
    (["sweep", "dam", "-g", "N=64", "-g", "N=128"], ["-g N=128 is not allowed: -g N=64 was given before"]),
    (["sweep", "dam", "-g", "N"], ["-g 'N' is not allowed; allowed: FIELD=VALUE (e.g. -g N=64,128)"]),
    (["sweep", "dam", "-g", "N=64", "-p", "N=128"], ["-p N=128 is not allowed: N is also swept by -g"]),
    (["sweep", "dam", "-g", "N=64", "-p", "bogus=1"], ["-p bogus='1' is not allowed", "no parameter 'bogus'"]),
    (["sweep", "dam", "-g", "N=64", "-p", "N=abc", "-p", "N=1"], ["-p N=1 is not allowed: -p N=abc was given"]),
    (["sweep", "dam", "--seeds", "3-1"], ["--seeds='3-1' is not allowed; allowed: seeds as 0-9"]),
    (["sweep", "dam", "--seeds", "a-b"], ["--seeds='a-b' is not allowed; allowed: seeds as 0-9"]),
    (["sweep", "dam", "--seeds", "-1"], ["--seeds='-1' is not allowed; allowed: seeds as 0-9"]),
    (["sweep", "dam", "--seeds", "0-100000000"], ["--seeds='0-100000000' is not allowed; allowed: at most 10000 "
                                                  "seeds (this is 100000001)"]),
    (["sweep", "dam", "--seeds", "0-3,2"], ["--seeds='0-3,2' is not allowed; allowed: each seed once"]),
    (["sweep", "dam", "-g", "N=64,128", "--seeds", "0-9999"], ["-g N=64,128 is not allowed: 20000 points; "
                                                               "allowed: at most 10000 points"]),
    (["sweep", "dam", "-g", "seed=1,2", "--seeds", "0-1"], ["--seeds 0-1 is not allowed: -g seed=... sweeps the "
                                                            "seed too"]),
    (["sweep", "dam", "-g", "N=64", "--workers", "0"], ["--workers", "0 is not in the range 1<=x<=256"]),
    (["sweep", "dam", "-g", "N=64", "--out", "/proc/nope"], ["--out='/proc/nope' is not allowed"]),
    (["sweep", "dam", "-g", "N=64", "--profile", "huge"], ["profile='huge' is not allowed; allowed: ci, quick"]),
    # the other commands
    (["list", "extra"], ["unexpected extra argument", "extra"]),
    (["sync", "--method", "nope"], ["--method='nope' is not allowed; allowed: one of dam, "]),
    (["sync", "--bogus"], ["--bogus is not allowed: no such option; allowed: ", "--check"]),
    (["nosuch"], ["No such command 'nosuch'"]),
]


def _listing(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders for p in folder.rglob("*"))


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()


def _refused(result, fragments: list[str]) -> str:
    """The one line of a refused command, checked: exit 2, one line on stderr, every fragment in it."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize(("args", "fragments"), CLI_ROWS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_bad_cli_input_is_one_line_exit_2_and_writes_nothing(runner, tmp_path, args, fragments):
    before = _listing(tmp_path)
    _refused(runner.invoke(cli, args), fragments)
    assert _listing(tmp_path) == before


def test_the_table_holds_at_least_sixty_bad_inputs():
    from tests.dashboards.test_bad_widgets import WIDGET_ROWS

    assert len(CLI_ROWS) + len(NOTEBOOK_ROWS) + len(WIDGET_ROWS) >= 60


def test_a_results_file_that_is_not_one_is_refused_in_one_line(runner, tmp_path):
    bogus = tmp_path / "bogus.nc"
    bogus.write_text("not a netcdf file")
    before = _listing(tmp_path)
    _refused(runner.invoke(cli, ["check", str(bogus)]), ["bogus.nc", "is not a lab results file"])
    assert _listing(tmp_path) == before


# --------------------------------------------------------------------------------------------------------------------
# papermill: the parameters a notebook was given, checked by the first cell that runs the method, before any work
# --------------------------------------------------------------------------------------------------------------------
def _namespace(**params):
    """A kernel's namespace after papermill injected ``params`` (its input history holds the injected cell)."""
    injected = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())
    return {"In": ["", 'profile = "quick"\n', injected], "profile": "quick", "result_path": "", **params}


NOTEBOOK_ROWS = [
    ({"NN": 512}, ["-p NN 512 is not allowed: dam has no parameter 'NN'; allowed: profile, result_path, seed"]),
    ({"N": "abc"}, ["N='abc' is not allowed; allowed: an integer in [16, 100000]"]),
    ({"N": 8}, ["N=8 is not allowed; allowed: an integer in [16, 100000]"]),
    ({"N": 2.5}, ["N=2.5 is not allowed; allowed: an integer in [16, 100000]"]),
    ({"update": "never"}, ["update='never' is not allowed; allowed: one of 'sync', 'async'"]),
    ({"alphas": "3,1"}, ["alphas=(3.0, 1.0) is not allowed", "strictly increasing"]),
    ({"alphas": [0.1, "x"]}, ["alphas=[0.1, 'x'] is not allowed; allowed: comma-separated list of float"]),
    ({"profile": "huge"}, ["profile='huge' is not allowed; allowed: ci, quick, full"]),
    ({"result_path": "/proc/x.nc"}, ["result_path='/proc/x.nc' is not allowed; allowed: a path this user can"]),
    ({"result_path": "/tmp"}, ["result_path='/tmp' is not allowed; allowed: a file path (this path is a folder)"]),
    ({"seed": -1}, ["seed=-1 is not allowed; allowed: an integer in [0, 2147483647]"]),
]


@pytest.mark.parametrize(("params", "fragments"), NOTEBOOK_ROWS, ids=lambda v: repr(v) if isinstance(v, dict) else "")
def test_a_bad_notebook_parameter_is_refused_before_any_work(tmp_path, monkeypatch, params, fragments):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        notebooks.notebook_overrides("dam", _namespace(**params))
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert list(tmp_path.iterdir()) == []


def test_a_notebook_run_by_hand_keeps_its_own_variables(tmp_path):
    """Outside papermill nothing was injected: the notebook's own variables are no unknown parameters."""
    namespace = {"In": ["", "alpha_n = 0.1"], "alpha_n": 0.1, "profile": "quick", "result_path": "", "N": 64}
    assert notebooks.notebook_overrides("dam", namespace) == {"N": 64}


@pytest.mark.parametrize(("params", "fragment"), [
    ({"NN": 512}, "ConfigError: -p NN 512 is not allowed: dam has no parameter 'NN'"),
    ({"N": "abc"}, "ConfigError: N='abc' is not allowed; allowed: an integer in [16, 100000]"),
])
def test_papermill_reports_a_bad_parameter_in_one_line_and_writes_no_result(tmp_path, params, fragment):
    import papermill as pm

    result = tmp_path / "dam.nc"
    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(str(notebooks.registry.get("dam").notebook_path), str(tmp_path / "out.ipynb"),
                            parameters={**params, "result_path": str(result), "profile": "ci"}, kernel_name="python3",
                            progress_bar=False, cwd=str(tmp_path))
    assert len(info.value.traceback) == 1 and fragment in info.value.traceback[0], info.value.traceback
    assert not result.exists()
    assert os.listdir(tmp_path) == ["out.ipynb"]
