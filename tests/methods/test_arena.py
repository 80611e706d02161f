"""The arena: its model list is the zoo's, theory's table covers every cell, the ci run fills every variable and
evaluates the claims, trainings in workers equal trainings here, bad configs name the field."""

from __future__ import annotations

import dataclasses

import holoviews as hv
import numpy as np
import pytest
import torch

from lab.checks import ConfigError
from lab.core import zoo
from lab.methods.arena import model as M
from lab.methods.arena import plots
from lab.methods.arena import train as T
from lab.methods.arena.config import MODELS, TASKS, Config
from lab.methods.arena.experiment import splits


def test_the_arena_runs_every_architecture_of_the_zoo():
    assert set(MODELS) == set(zoo.KINDS)


def test_theory_has_a_prediction_with_a_source_for_every_cell():
    for model in MODELS:
        for task in TASKS:
            p = M.prediction(model, task)
            assert p.verdict in ("yes", "no", "open") and p.source in M.SOURCES
    assert M.prediction("gla_neg", "parity").verdict == "yes"
    assert M.prediction("gla", "parity").verdict == "no"
    assert M.prediction("deltanet", "parity").verdict == "no"
    assert M.prediction("transformer", "mqar").verdict == "yes"
    assert M.prediction("gla", "compression").verdict == "no"
    assert M.prediction("lru", "selective_copying").verdict == "no"


def test_every_task_builds_at_every_test_length():
    cfg = Config.from_profile("full", n_train=16, n_test=4, train_length=16)
    for task in TASKS:
        s = splits(cfg, task)
        assert s["train"].length == 17 and [s[f].length for f in cfg.test_factors] == [17, 33, 65, 129]
        assert all((s[f].targets[:, 1 + 16:] != -100).any() for f in cfg.test_factors if f > 1), task


def test_ci_run_fills_every_cell_and_evaluates_its_claims(ci_result):
    data, claims = ci_result("arena")
    cfg = Config.from_profile("ci")
    assert data.accuracy.shape == (len(cfg.tasks), len(cfg.models), cfg.n_seeds, len(cfg.test_factors))
    for task in cfg.tasks:  # every trained cell measured, the others (A5 outside a5_models) empty
        trained = list(cfg.models_of(task))
        assert np.isfinite(data.accuracy.sel(task=task, model=trained).values).all(), task
        assert np.isnan(data.accuracy.sel(task=task).drop_sel(model=trained).values).all(), task
        assert np.isfinite(data.accuracy_beyond.sel(task=task, model=trained, factor=cfg.claim_factor)).all()
    assert np.isnan(data.accuracy_beyond.sel(factor=1)).all()
    assert (data.params.values > 0).all()
    assert abs(data.params.values / cfg.budget - 1).max() < 0.35
    tf = data.state_bytes.sel(model="transformer", task="parity").values
    assert tf[-1] > tf[0]  # the key-value cache grows with the length
    gla = data.state_bytes.sel(model="gla", task="parity").values
    assert (gla == gla[0]).all()  # a recurrent state does not
    assert claims.headline is not None and claims.headline.name == "negative_gates_track_parity"
    assert np.isfinite(claims.headline.measured)


def test_plots_build(ci_result):
    data, claims = ci_result("arena")
    plots.heatmap(data)
    plots.heatmap(data, factor=1)
    plots.length_curve(data, "parity")
    plots.state_vs_accuracy(data, "mqar")
    assert "Parity" in plots.discussion(data, claims)
    assert plots.cell_table(data).shape == (data.sizes["task"], data.sizes["model"])


def test_every_split_opens_with_an_unlabelled_start_token():
    cfg = Config.from_profile("ci")
    s = splits(cfg, "parity")
    for task in s.values():
        assert (task.inputs[:, 0] == task.vocab_size - 1).all() and (task.targets[:, 0] == -100).all()
    assert s[4].length == 4 * cfg.state_length + 1  # parity trains at state_length, MQAR at train_length
    assert splits(cfg, "mqar")[4].length == 4 * cfg.train_length + 1
    assert (cfg.length_of("parity"), cfg.length_of("mqar")) == (cfg.state_length, cfg.train_length)
    assert (cfg.steps_of("cyclic"), cfg.steps_of("selective_copying")) == (cfg.state_steps, cfg.steps)
    assert (cfg.length_of("a5"), cfg.steps_of("a5")) == (cfg.a5_length, cfg.a5_steps)
    a5 = splits(cfg, "a5")
    assert a5["train"].vocab_size == 4 and a5["train"].n_classes == 60  # identity, two generators, start token
    assert a5["train"].length == cfg.a5_length + 1


def test_a5_trains_only_its_models_and_its_claim_reads_them(tmp_path, monkeypatch):
    """Cells outside ``a5_models`` keep their sizes and no measurement; the A5 claim reads the trained ones, each
    class by its family, and says so when A5 was not run."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    from lab.methods.arena import claims as C
    from lab.methods.arena.experiment import run

    cfg = Config.from_profile("ci", models=("gla", "gla_neg", "deltanet", "deltanet_neg", "transformer", "lstm"),
                              tasks=("parity", "a5"), a5_models=("gla", "lstm"), a5_length=8, a5_steps=4)
    assert cfg.models_of("a5") == ("gla", "lstm") and cfg.models_of("parity") == cfg.models
    ds = run(cfg, progress=False)
    acc = ds.accuracy.sel(task="a5")
    assert np.isfinite(acc.sel(model=["gla", "lstm"])).all() and np.isnan(acc.sel(model="transformer")).all()
    assert (ds.params.sel(task="a5") > 0).all() and np.isfinite(ds.state_bytes.sel(task="a5")).all()
    assert C._trained_on("a5", C.DIAGONAL)(ds) == ["gla"] and C._trained_on("a5", C.NON_DIAGONAL)(ds) == ["lstm"]
    fits = ds.copy(deep=True)  # the verdict follows the numbers: diagonal below the bar, LSTM above -> holds
    fits["accuracy"].loc[dict(task="a5", model="gla", factor=1)] = 0.7
    fits["accuracy"].loc[dict(task="a5", model="lstm", factor=1)] = 1.0
    fits["accuracy"].loc[dict(task="parity", model="gla", factor=1)] = 1.0
    claim = next(c for c in C.CLAIMS if c.name == "diagonal_recurrences_cannot_fit_a5")
    assert claim.evaluate(fits).verdict == "holds"
    fits["accuracy"].loc[dict(task="a5", model="gla", factor=1)] = 0.95  # a diagonal model fits it: fails
    assert claim.evaluate(fits).verdict == "fails"
    row = claim.evaluate(ds.sel(task=["parity"]))
    assert row.verdict == "fails" and "not run" in row.detail
    for build in (lambda: plots.heatmap(ds, factor=1), lambda: plots.length_curve(ds, "a5"),
                  lambda: plots.length_curve(ds, "a5", ["transformer"]), lambda: plots.state_vs_accuracy(ds, "a5")):
        hv.render(build())  # the blank cells draw: a grey square, no curve, no point
    assert "4 not trained on a5" in plots.length_curve(ds, "a5").opts["title"]  # says how many were not trained
    assert "not run" in str(plots.heatmap(ds, factor=1).get(1).data.text.tolist())


def test_trainings_in_worker_processes_give_the_weights_of_a_training_here(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(T, "SERIAL_BELOW_S", 0.0)  # a pool even for ci's few steps
    cfg = Config.from_profile("ci", models=("gla", "gla_neg", "deltanet", "deltanet_neg", "transformer"),
                              tasks=("parity",), steps=3, state_steps=3)
    tasks = [splits(cfg, "parity")["train"]]
    done = T.train_all(cfg, tasks, progress=False)
    assert len(done) == len(cfg.models) and all(r.ran for r in done)
    fresh = dataclasses.replace(cfg, use_cache=False)
    for name in cfg.models:
        cached = T.trained_model(cfg, tasks[0], name, cfg.seed)
        here = T.trained_model(fresh, tasks[0], name, cfg.seed)
        assert cached.loaded and not here.loaded
        for a, b in zip(cached.model.state_dict().values(), here.model.state_dict().values()):
            assert torch.equal(a, b), name
    assert not any(r.ran for r in T.train_all(cfg, tasks, progress=False))


@pytest.mark.parametrize("overrides, field", [
    (dict(models=("gla", "gla_neg", "deltanet", "deltanet_neg")), "models"),
    (dict(tasks=("mqar",)), "tasks"),
    (dict(test_factors=(2, 4)), "test_factors"),
    (dict(claim_factor=8, test_factors=(1, 2, 4)), "test_factors"),
    (dict(mqar_pairs=5), "mqar_pairs"),
    (dict(a5_models=("mamba2",)), "a5_models"),
    (dict(budget=10), "budget"),
])
def test_bad_configs_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        Config.from_profile("quick", **overrides)
