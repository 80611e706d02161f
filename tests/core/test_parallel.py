"""Jobs in worker processes (lab.core.parallel): the same results as in this process, cached jobs skipped, errors
named, no nested pools, the worker count from the environment."""

import os

import numpy as np
import pytest
import torch

from lab.checks import ConfigError
from lab.core import parallel
from lab.core.parallel import WORKER_ENV, WORKERS_ENV, Job, JobError, default_workers, in_worker, run_jobs


def _train(seed: int, steps: int) -> dict:
    """A tiny seeded training (module level: a spawned worker imports it); its weights and the worker's state."""
    from lab.core.train import fit, seed_everything

    seed_everything(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    x = torch.randn(64, 6)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    fit(model, x, y, steps=steps, batch_size=16, seed=seed, progress=False)
    weights = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    return {"weights": weights, "worker": in_worker(), "threads": torch.get_num_threads()}


def _fail(message: str) -> None:
    raise ValueError(message)


def _nested() -> list:
    """A job that runs jobs itself: inside a worker they run serially, here."""
    return [r.value["worker"] for r in run_jobs([Job("inner", _train, (5, 2))], workers=4, progress=False)]


def _jobs():
    return [Job(f"train seed {s}", _train, (s, 5 + s), cost=s) for s in range(3)] + [
        Job("cached", _fail, ("must not run",), cached=True)]


def test_parallel_equals_serial_in_job_order_skips_cached_jobs_and_nests_no_pool():
    serial = run_jobs(_jobs(), workers=1, progress=False)
    pooled = run_jobs([*_jobs(), Job("outer", _nested)], workers=2, progress=False)
    for a, b, name in zip(serial, pooled, [j.name for j in _jobs()]):
        assert a.name == b.name == name
    for a, b in zip(serial[:3], pooled[:3]):
        assert a.ran and b.ran and a.wall_s > 0 and b.cpu_s > 0
        np.testing.assert_array_equal(a.value["weights"], b.value["weights"])  # bit for bit
        assert not a.value["worker"] and b.value["worker"] and b.value["threads"] == 1
    assert serial[3].value is None and pooled[3].value is None and not serial[3].ran and not pooled[3].ran
    assert pooled[4].value == [True]  # the inner job ran in the outer job's worker, not in a pool of its own


def test_no_pool_for_one_job_or_none():
    assert run_jobs([], workers=2, progress=False) == []
    (one,) = run_jobs([Job("alone", _train, (1, 2))], workers=2, progress=False)
    assert one.ran and not one.value["worker"]  # one job: no pool to start


@pytest.mark.parametrize("workers", [1, 2])
def test_an_exception_names_the_job(workers):
    jobs = [Job("fine", _train, (0, 2)), Job("broken job", _fail, ("boom",), cost=10)]
    with pytest.raises(JobError, match=r"job 'broken job' failed: ValueError: boom") as info:
        run_jobs(jobs, workers=workers, progress=False)
    assert info.value.job == "broken job" and isinstance(info.value.__cause__, ValueError)


def test_a_dead_worker_names_the_job():
    jobs = [Job("exits", os._exit, (3,), cost=2), Job("fine", _train, (0, 2))]  # two jobs: a pool, not this process
    with pytest.raises(JobError, match=r"failed: a worker process died.*exits"):
        run_jobs(jobs, workers=2, progress=False)


def test_default_workers_follow_the_environment(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(WORKER_ENV, raising=False)
    monkeypatch.setattr(parallel, "_cores", lambda: 8)
    assert default_workers() == 8 and default_workers(threads_per_worker=3) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # a report's share of the cores
    assert default_workers() == 4
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert default_workers() == 3
    monkeypatch.setenv(WORKERS_ENV, "zero")
    with pytest.raises(ConfigError, match=WORKERS_ENV):
        default_workers()
    monkeypatch.setenv(WORKER_ENV, "1")
    assert in_worker() and default_workers() == 1


def test_a_daemonic_process_runs_its_jobs_serially(monkeypatch):
    import multiprocessing

    monkeypatch.delenv(WORKER_ENV, raising=False)
    assert not in_worker()
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert in_worker() and default_workers() == 1
    out = run_jobs([Job("a", _train, (0, 2)), Job("b", _train, (1, 2))], workers=2, progress=False)
    assert [r.value["worker"] for r in out] == [True, True] and out[0].ran  # here: no pool, no children


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "script.py"
    script.write_text("from lab.core.parallel import Job, run_jobs\n"
                      "from tests.core.test_parallel import _train\n"
                      "print('body')\n"
                      "out = run_jobs([Job(f's{s}', _train, (s, 2)) for s in range(2)], workers=2, progress=False)\n"
                      "print('workers', [r.value['worker'] for r in out])\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["body", "workers", "[True,", "True]"]
