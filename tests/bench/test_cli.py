"""`lab bench NAME`: the CLI runs the benchmarks of lab.bench, and every one of them imports."""

import importlib

import pytest

from lab.bench import BENCHES


def test_cli_runs_the_benchmarks_of_lab_bench():
    from lab import cli

    assert cli.BENCHES == BENCHES


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_every_benchmark_has_its_run_and_format(name):
    module, run, fmt = BENCHES[name]
    mod = importlib.import_module(module)
    assert callable(getattr(mod, run)) and callable(getattr(mod, fmt))


def test_gpu_bench_says_there_is_no_device_and_exits_0(tmp_path):
    import torch
    from click.testing import CliRunner

    from lab.cli import cli

    out = CliRunner().invoke(cli, ["bench", "gpu", "--out", str(tmp_path)])
    if torch.cuda.is_available():  # a lent GPU machine runs the real checks
        assert "checks" in out.output
    else:
        assert out.exit_code == 0 and "no CUDA device" in out.output
