"""The ``device`` field (issue 18, item 6), over the whole registry: every method that trains has it, from the one
runtime mixin; ``cuda`` on a machine without a GPU is refused before any work; and every training call of a run
receives the Config's device (checked with ``device=auto``, which is the CPU here, by watching
:func:`lab.core.runtime.resolve_device`)."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
from click.testing import CliRunner

import lab
from lab import registry
from lab.cli import cli
from lab.config import field_specs
from lab.core import runtime
from lab.core.runtime import DEVICES, RuntimeConfig

SLUGS = registry.slugs()
#: the methods that train: their Config has ``threads`` (the runtime mixin's other field)
TRAINING = [s for s in SLUGS if "threads" in {f.name for f in dataclasses.fields(registry.get(s).config)}]
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


def test_some_methods_train_and_some_do_not():
    assert "rem" in TRAINING and "dam" not in TRAINING and len(TRAINING) >= 10


@pytest.mark.parametrize("slug", TRAINING)
def test_every_training_method_has_the_runtime_fields(slug):
    cfg = registry.get(slug).config
    assert issubclass(cfg, RuntimeConfig), f"{slug}'s Config should mix in lab.core.runtime.RuntimeConfig"
    specs = field_specs(cfg)
    assert specs["device"].choices == DEVICES and specs["device"].default == "cpu"
    assert specs["threads"].range is not None and specs["threads"].doc and specs["device"].doc
    assert cfg.from_profile("ci", device="auto").device == "auto"


@NO_GPU
@pytest.mark.parametrize("slug", TRAINING)
def test_cuda_without_a_gpu_exits_2_and_writes_nothing(slug, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["run", slug, "-P", "ci", "-p", "device=cuda", "--out", "res"])
    assert out.exit_code == 2, out.output
    assert "device='cuda' is not allowed" in out.output and "torch sees no CUDA device" in out.output
    assert list(tmp_path.iterdir()) == []


def _watch_resolve_device(monkeypatch) -> list:
    """Replace ``resolve_device`` in lab.core.runtime and in every loaded lab module that imported it by name;
    returns the list of the devices it is asked for."""
    seen: list = []
    real = runtime.resolve_device

    def spy(device):
        seen.append(device)
        return real(device)

    for name, module in list(sys.modules.items()):
        if (name == "lab" or name.startswith("lab.")) and getattr(module, "resolve_device", None) is real:
            monkeypatch.setattr(module, "resolve_device", spy)
    return seen


@pytest.mark.parametrize("slug", TRAINING)
def test_every_training_call_gets_the_config_device(slug, tmp_path, monkeypatch):
    """A ``ci`` run with nothing cached and ``device=auto``: besides the up-front check, at least one training call
    resolves the device, and every one of them was handed ``auto`` (a call that drops the field would ask for None
    or ``cpu``)."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    _ = registry.get(slug).run_fn  # imports the method's modules, so that their names can be watched
    seen = _watch_resolve_device(monkeypatch)
    lab.run(slug, "ci", progress=False, device="auto")
    assert len(seen) >= 2, f"{slug}: no training call asked for the device ({seen})"
    assert set(seen) == {"auto"}, f"{slug}: training calls asked for {seen}"
