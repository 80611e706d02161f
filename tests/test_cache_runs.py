"""Dashboards reuse what a run made: keys by what decides the results (not threads or device), and the report's
saved run (:mod:`lab.cache.runs`) in place of running again. No training here: each reuse is checked with a trainer
that raises."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from lab import registry
from lab.cache import RUN_ONLY, cached_run, result_config, saved_run
from lab.methods.rem import live as rem_live
from lab.methods.rem.config import Config as RemConfig
from lab.methods.wsc import live as wsc_live
from lab.methods.wsc.config import Config as WscConfig
from lab.report.reuse import run_key, stamp_path


def never(*args, **kwargs):
    raise AssertionError("trained although the result was there")


@pytest.fixture
def data(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("lab.cache.runs.REPORTS", tmp_path / "reports")
    for fn in (rem_live.grid, wsc_live.accuracy_matrix):
        fn.cache_clear()
    yield tmp_path
    for fn in (rem_live.grid, wsc_live.accuracy_matrix):
        fn.cache_clear()


def on_other_threads(monkeypatch, config_type, profile: str = "ci") -> None:
    """The profile's Config now runs with 2 threads on another device setting (what a dashboard's may differ in)."""
    monkeypatch.setitem(config_type.PROFILES, profile, {**config_type.PROFILES[profile], "threads": 2,
                                                        "device": "auto"})


def save_report_run(folder, slug: str, profile: str, cfg, ds: xr.Dataset, key: str | None = None) -> None:
    """What the report leaves for ``slug``: ``<folder>/reports/<profile>/<slug>.nc`` and its stamp."""
    out = folder / "reports" / profile
    out.mkdir(parents=True, exist_ok=True)
    ds.assign_attrs(config=cfg.to_json(), method=slug, profile=profile).to_netcdf(out / f"{slug}.nc")
    key = key or run_key(registry.get(slug), profile)
    stamp_path(out, slug).write_text(json.dumps({"key": key, "seconds": 1.0, "html": f"{slug}.html"}))


def toy(value: float = 1.0) -> xr.Dataset:
    return xr.Dataset({"score": ("cell", np.full(3, value))})


def test_result_config_leaves_out_the_fields_that_only_say_how_a_run_is_made():
    cfg = RemConfig.from_profile("ci")
    assert set(RUN_ONLY) & set(result_config(cfg)) == set()
    assert result_config(cfg) == result_config(cfg.replace(threads=2, device="auto"))
    assert result_config(cfg) != result_config(cfg.replace(seed=1))


def test_a_cached_run_serves_configs_that_differ_in_threads_or_device(data):
    cfg = RemConfig.from_profile("ci")
    first = cached_run("toy-run", "rem", cfg, toy, version=1)
    again = cached_run("toy-run", "rem", cfg.replace(threads=2, device="auto"), never, version=1)
    assert float(again.score.sum()) == float(first.score.sum()) == 3.0
    assert float(cached_run("toy-run", "rem", cfg.replace(seed=1), lambda: toy(2.0), version=1).score[0]) == 2.0


def test_the_report_s_saved_run_is_used_when_its_code_and_results_config_are_current(data):
    cfg = RemConfig.from_profile("ci")
    save_report_run(data, "rem", "ci", cfg.replace(threads=2), toy(5.0))
    got = saved_run("rem", cfg)
    assert got is not None and float(got.score[0]) == 5.0
    assert saved_run("rem", cfg.replace(seed=3)) is None  # another result
    save_report_run(data, "rem", "ci", cfg, toy(5.0), key="from-older-code")
    assert saved_run("rem", cfg) is None  # the code changed since that run


def test_rem_grid_takes_the_report_s_run_and_then_its_own_cache_without_running(data, monkeypatch):
    """The forgetting defect: REM's grid ran the whole experiment (93 s at quick) after the report had run it."""
    monkeypatch.setattr("lab.methods.rem.experiment.run", never)
    save_report_run(data, "rem", "ci", RemConfig.from_profile("ci"), toy(7.0))
    on_other_threads(monkeypatch, RemConfig)
    assert float(rem_live.grid("ci").score[0]) == 7.0
    (data / "reports").rename(data / "gone")  # the report's folder removed: the data cache still has it
    rem_live.grid.cache_clear()
    assert float(rem_live.grid("ci").score[0]) == 7.0


def wsc_run(cfg: WscConfig) -> xr.Dataset:
    """A Dataset shaped like WSC's run: a distinct accuracy matrix per (seed, share, variant)."""
    shape = (len(cfg.seeds), len(cfg.replay_shares), len(wsc_live.VARIANT_NAMES), cfg.n_tasks, cfg.n_tasks)
    R = np.arange(np.prod(shape), dtype=float).reshape(shape) % 97
    dims = ("seed", "share", "variant")
    return xr.Dataset({"accuracy_matrix": ((*dims, "after", "task"), R),
                       "train_cpu_time": (dims, np.full(shape[:3], 0.5))},
                      coords={"seed": list(cfg.seeds), "share": list(cfg.replay_shares),
                              "variant": list(wsc_live.VARIANT_NAMES)})


def test_wsc_matrix_comes_from_the_report_s_run_and_its_key_ignores_threads(data, monkeypatch):
    cfg = WscConfig.from_profile("ci")
    ds = wsc_run(cfg)
    save_report_run(data, "wsc", "ci", cfg, ds)
    monkeypatch.setattr(wsc_live, "train_stream", never)
    monkeypatch.setattr(wsc_live, "first_task", never)
    R = wsc_live.accuracy_matrix("ci", "swa")
    share = list(cfg.replay_shares).index(cfg.claim_share)
    want = ds.accuracy_matrix.sel(seed=cfg.seed, variant="swa").isel(share=share).values
    assert np.array_equal(R.values, want) and R.attrs["train_cpu_time"] == 0.5
    (data / "reports").rename(data / "gone")
    wsc_live.accuracy_matrix.cache_clear()
    on_other_threads(monkeypatch, WscConfig)
    assert np.array_equal(wsc_live.accuracy_matrix("ci", "swa").values, want)  # the disk cache, other threads


def test_pruning_curves_take_the_run_s_deterministic_sweep_and_are_cached_on_disk(data, monkeypatch):
    """The pruning defect: with its model cached, the dashboard still swept 44 prunings (about 5 s) on every open."""
    from lab.methods.aire_prune import live
    from lab.methods.aire_prune.config import SCORES, Config

    cfg = Config.from_profile("ci")
    layers = cfg.n_layers
    shape = (1, 1, len(SCORES), len(live.SWEEP_RATIOS))
    acc = np.arange(np.prod(shape), dtype=float).reshape(shape)
    run = xr.Dataset({"accuracy": (("kind", "seed", "score", "ratio"), acc),
                      "states_kept": (("kind", "seed", "score", "ratio", "layer"),
                                      np.full((*shape, layers), 3, np.int64)),
                      "accuracy_full": (("kind", "seed"), [[42.0]])},
                     coords={"kind": ["lru"], "seed": [cfg.seed], "score": list(SCORES),
                             "ratio": list(live.SWEEP_RATIOS)})
    save_report_run(data, "aire_prune", "ci", cfg, run)
    evaluated = []
    real = live.accuracy_on_test
    monkeypatch.setattr(live, "accuracy_on_test", lambda m, d: evaluated.append(1) or real(m, d))
    for fn in (live.curves, live.trained, live.task):
        fn.cache_clear()
    got = live.curves(cfg, "lru")
    assert len(evaluated) == len(live.SWEEP_RATIOS)  # the random draws only
    deterministic = [s for s in SCORES if s != "random"]
    assert np.array_equal(got.accuracy.sel(score=deterministic), run.accuracy[0, 0].sel(score=deterministic))
    assert got.attrs["accuracy_full"] == 42.0
    monkeypatch.setattr(live, "_sweep", never)
    live.curves.cache_clear()
    again = live.curves(cfg.replace(threads=2), "lru")  # from the disk, whatever the threads
    assert np.array_equal(again.accuracy, got.accuracy)
    live.curves.cache_clear()


def test_rem_s_look_at_one_cell_loads_the_model_the_run_trained(data, monkeypatch):
    """The forgetting dashboard's "REM's model of the cell" trained REM again for a cell the run had trained."""
    from lab.methods.rem import train as T

    cfg = RemConfig.from_profile("ci")
    kind, rate = cfg.corruptions[-1], cfg.discovery_rates[0]
    d = T.load_data(cfg)
    cell = T.unlearn_cell(cfg, d, T.corrupted(cfg, d, kind, cfg.seed), rate, cfg.seed)  # what the run does
    monkeypatch.setattr(T, "fit", never)
    rem_live.redirected.cache_clear()
    on_other_threads(monkeypatch, RemConfig)
    info = rem_live.redirected("ci", kind, rate, 0)
    rem_live.redirected.cache_clear()
    assert info["n_forget"] == len(cell.forget) and 0 <= info["share_forget"] <= 1
