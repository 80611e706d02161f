"""Tests of lab.cache: keys, atomic writes, rejection of corrupt files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from lab.datasets import cache
from lab.cache import cache_path, cached_dataset, config_hash, data_root, dataset_checksum, project_root

CONFIG = {"equation": "toy", "n": 3, "nested": {"nu": 0.1, "modes": [1, 2]}}


def _toy(seed: int = 0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {"u": (("traj", "x"), rng.standard_normal((3, 8)).astype(np.float32), {"units": "1"})},
        coords={"x": np.linspace(0, 1, 8, endpoint=False), "label": ("traj", ["a", "bb", "ccc"])},
        attrs={"title": "toy"},
    )


class Builder:
    """Counts calls; returns the toy data set."""

    def __init__(self, seed: int = 0) -> None:
        self.calls = 0
        self.seed = seed

    def __call__(self) -> xr.Dataset:
        self.calls += 1
        return _toy(self.seed)


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp"))


def test_key_depends_on_config_not_on_order() -> None:
    base = config_hash(CONFIG, "x")
    assert base == config_hash({"nested": {"modes": [1, 2], "nu": 0.1}, "n": 3, "equation": "toy"}, "x")
    assert base != config_hash({**CONFIG, "n": 4}, "x")
    assert base != config_hash({**CONFIG, "nested": {"nu": 0.1000001, "modes": [1, 2]}}, "x")
    assert base != config_hash(CONFIG, "y")
    assert config_hash({"n": np.int64(3)}) == config_hash({"n": 3})
    assert cache_path("toy", CONFIG, root="r") != cache_path("toy", {**CONFIG, "n": 4}, root="r")


@pytest.mark.parametrize("bad", [{"x": float("nan")}, {"x": float("inf")}, {"x": object()}])
def test_unhashable_config_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="config must be JSON-serialisable"):
        config_hash(bad)


@pytest.mark.parametrize("name", ["", "../evil", "a/b", ".hidden", "sp ace"])
def test_bad_names_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="name must be"):
        cached_dataset(name, CONFIG, Builder(), root=tmp_path)


def test_build_once_then_load(tmp_path: Path) -> None:
    build = Builder()
    first = cached_dataset("toy", CONFIG, build, root=tmp_path)
    second = cached_dataset("toy", CONFIG, build, root=tmp_path)
    assert build.calls == 1
    assert first.identical(second)
    np.testing.assert_array_equal(second["u"].values, _toy()["u"].values)
    assert second["u"].dtype == np.float32
    assert list(second["label"].values) == ["a", "bb", "ccc"]
    assert second.attrs["title"] == "toy"
    assert second.attrs["lab_cache_key"] == config_hash(CONFIG, "toy")
    assert [p.name for p in tmp_path.iterdir()] == [cache_path("toy", CONFIG, root=tmp_path).name]
    # another config -> another file, another build
    cached_dataset("toy", {**CONFIG, "n": 4}, build, root=tmp_path)
    assert build.calls == 2
    assert len(list(tmp_path.glob("toy-*.nc"))) == 2


def test_refresh_rebuilds(tmp_path: Path) -> None:
    build = Builder()
    cached_dataset("toy", CONFIG, build, root=tmp_path)
    cached_dataset("toy", CONFIG, build, root=tmp_path, refresh=True)
    assert build.calls == 2


def test_build_error_leaves_nothing(tmp_path: Path) -> None:
    def failing() -> xr.Dataset:
        raise RuntimeError("solver blew up")

    with pytest.raises(RuntimeError, match="blew up"):
        cached_dataset("toy", CONFIG, failing, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_failure_mid_write_leaves_no_file(tmp_path: Path) -> None:
    def unwritable() -> xr.Dataset:
        ds = _toy()
        ds.attrs["bad"] = {"a dict": "cannot be a NetCDF attribute"}  # fails after the file is created
        return ds

    with pytest.raises((TypeError, ValueError)):
        cached_dataset("toy", CONFIG, unwritable, root=tmp_path)
    assert list(tmp_path.iterdir()) == []
    # the next call writes a good file
    assert cached_dataset("toy", CONFIG, Builder(), root=tmp_path)["u"].shape == (3, 8)


def test_interrupt_mid_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = xr.Dataset.to_netcdf

    def write_half_then_interrupt(self, path, *args, **kwargs):
        original(self, path, *args, **kwargs)
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size // 2)
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", write_half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        cached_dataset("toy", CONFIG, Builder(), root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _write_valid(tmp_path: Path) -> Path:
    cached_dataset("toy", CONFIG, Builder(), root=tmp_path)
    return cache_path("toy", CONFIG, root=tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_file_is_rebuilt_never_returned(tmp_path: Path, damage: str) -> None:
    path = _write_valid(tmp_path)
    if damage == "truncate":
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    elif damage == "garbage":
        path.write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(2000))
    else:
        path.write_bytes(b"")
    build = Builder(seed=1)
    with pytest.warns(RuntimeWarning, match="rejected"):
        ds = cached_dataset("toy", CONFIG, build, root=tmp_path)
    assert build.calls == 1
    np.testing.assert_array_equal(ds["u"].values, _toy(1)["u"].values)
    assert _leftovers(tmp_path) == []
    # the rebuilt file is valid
    again = cached_dataset("toy", CONFIG, Builder(), root=tmp_path)
    assert again.identical(ds)


def test_altered_values_fail_the_checksum(tmp_path: Path) -> None:
    import h5netcdf

    path = _write_valid(tmp_path)
    with h5netcdf.File(path, "a") as f:
        data = f.variables["u"][...]
        data[0, 0] += 1.0
        f.variables["u"][...] = data
    build = Builder()
    with pytest.warns(RuntimeWarning, match="checksum"):
        cached_dataset("toy", CONFIG, build, root=tmp_path)
    assert build.calls == 1


def test_file_of_another_config_is_rejected(tmp_path: Path) -> None:
    other = {**CONFIG, "n": 99}
    cached_dataset("toy", other, Builder(), root=tmp_path)
    os.replace(cache_path("toy", other, root=tmp_path), cache_path("toy", CONFIG, root=tmp_path))
    build = Builder()
    with pytest.warns(RuntimeWarning, match="lab_cache_key"):
        cached_dataset("toy", CONFIG, build, root=tmp_path)
    assert build.calls == 1


def test_validate_hook_rejects_and_rebuilds(tmp_path: Path) -> None:
    _write_valid(tmp_path)

    def want_ten_columns(ds: xr.Dataset) -> None:
        if ds.sizes["x"] != 10:
            raise ValueError("expected 10 points")

    def build10() -> xr.Dataset:
        return xr.Dataset({"u": (("traj", "x"), np.zeros((3, 10), dtype=np.float32))})

    with pytest.warns(RuntimeWarning, match="expected 10 points"):
        ds = cached_dataset("toy", CONFIG, build10, root=tmp_path, validate=want_ten_columns)
    assert ds.sizes["x"] == 10


def test_stale_temporaries_are_swept(tmp_path: Path) -> None:
    path = cache_path("toy", CONFIG, root=tmp_path)
    old = tmp_path / f".{path.name}.old.tmp"
    fresh = tmp_path / f".{path.name}.fresh.tmp"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"someone else writing")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    cached_dataset("toy", CONFIG, Builder(), root=tmp_path)
    assert not old.exists()
    assert fresh.exists()


def test_checksum_ignores_attrs_and_sees_values() -> None:
    a, b = _toy(), _toy()
    b.attrs["other"] = 1
    assert dataset_checksum(a) == dataset_checksum(b)
    b["u"][0, 0] = 5.0
    assert dataset_checksum(a) != dataset_checksum(b)


def test_data_root_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAB_DATA_DIR", raising=False)
    assert data_root() == project_root() / "data"
    assert (project_root() / "lab").is_dir() or project_root() == Path.cwd()
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "explicit") == tmp_path / "explicit"
    # the environment variable is used by cached_dataset, and the directory is created
    cached_dataset("toy", CONFIG, Builder())
    assert (tmp_path / "env" / cache_path("toy", CONFIG).name).is_file()


def test_build_must_return_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="xarray.Dataset"):
        cached_dataset("toy", CONFIG, lambda: np.zeros(3), root=tmp_path)  # type: ignore[arg-type,return-value]
    assert cache.ENGINE == "h5netcdf"
