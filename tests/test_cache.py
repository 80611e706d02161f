"""Tests of lab.cache: keys, atomic writes, rejection of corrupt files; trained models and states (torch files read
with weights_only); the thread-safe in-memory memo."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from lab import cache
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


def _files(root: Path) -> list[str]:
    """The files in ``root`` less the entries' lock files (``<file>.lock``, empty, left in place by design)."""
    names = sorted(p.name for p in root.iterdir())
    for lock in (n for n in names if n.endswith(".lock")):
        assert (root / lock).stat().st_size == 0
    return [n for n in names if not n.endswith(".lock")]


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
    assert _files(tmp_path) == [cache_path("toy", CONFIG, root=tmp_path).name]
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
    assert _files(tmp_path) == []


def test_failure_mid_write_leaves_no_file(tmp_path: Path) -> None:
    def unwritable() -> xr.Dataset:
        ds = _toy()
        ds.attrs["bad"] = {"a dict": "cannot be a NetCDF attribute"}  # fails after the file is created
        return ds

    with pytest.raises((TypeError, ValueError)):
        cached_dataset("toy", CONFIG, unwritable, root=tmp_path)
    assert _files(tmp_path) == []
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
    assert _files(tmp_path) == []


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


# --------------------------------------------------------------------------------------------------------------------
# cached_model / cached_state
# --------------------------------------------------------------------------------------------------------------------
class Trainer:
    """Counts calls; trains a tiny linear model to a fixed target in place and returns curves and meta."""

    def __init__(self) -> None:
        self.calls = 0

    def build(self, width: int = 3):
        import torch

        torch.manual_seed(self.calls)  # a different initialisation each time: loaded weights must be the trained ones
        return torch.nn.Linear(width, 1)

    def __call__(self, model):
        import torch

        self.calls += 1
        with torch.no_grad():
            model.weight.fill_(0.25 * self.calls)
            model.bias.fill_(-1.0)
        return {"curves": {"loss": np.array([3.0, 2.0, 1.0])}, "meta": {"seconds": 1.5, "steps": 3}}


def _model(tmp_path: Path, trainer: Trainer, config=None, width: int = 3, **kw):
    return cache.cached_model("models", "toy", config or {"w": 1}, lambda: trainer.build(width), trainer,
                              root=tmp_path, **kw)  # fmt: skip


def test_cached_model_trains_once_then_loads(tmp_path: Path) -> None:
    trainer = Trainer()
    first = _model(tmp_path, trainer)
    assert not first.loaded and trainer.calls == 1
    assert first.path == cache.state_path("models", "toy", {"w": 1}, root=tmp_path) and first.path.is_file()
    assert _files(tmp_path / "models") == [first.path.name]  # no temporary left over
    second = _model(tmp_path, trainer)
    assert second.loaded and trainer.calls == 1 and not second.model.training
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())
    assert float(second.model.weight[0, 0].detach()) == 0.25
    np.testing.assert_array_equal(second.curves["loss"], [3.0, 2.0, 1.0])
    assert second.meta == {"seconds": 1.5, "steps": 3}
    third = _model(tmp_path, trainer, config={"w": 2})  # another config: another file, trained again
    assert not third.loaded and trainer.calls == 2 and third.path != first.path


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_cached_model_rebuilds_a_corrupt_or_truncated_file(tmp_path: Path, damage: str) -> None:
    trainer = Trainer()
    path = _model(tmp_path, trainer).path
    data = path.read_bytes()
    path.write_bytes({"garbage": b"not a torch file", "truncated": data[: len(data) // 2], "empty": b""}[damage])
    with pytest.warns(RuntimeWarning, match="rejected"):
        again = _model(tmp_path, trainer)
    assert not again.loaded and trainer.calls == 2 and float(again.model.weight[0, 0].detach()) == 0.5
    assert _model(tmp_path, trainer).loaded and trainer.calls == 2  # the rebuilt file is good


def test_cached_model_rejects_weights_that_do_not_fit_the_model(tmp_path: Path) -> None:
    trainer = Trainer()
    _model(tmp_path, trainer, width=3)
    with pytest.warns(RuntimeWarning, match="rejected"):
        other = _model(tmp_path, trainer, width=5)  # same config, another architecture
    assert not other.loaded and trainer.calls == 2 and other.model.weight.shape == (1, 5)


def test_cached_model_without_cache_writes_nothing(tmp_path: Path) -> None:
    trainer = Trainer()
    res = _model(tmp_path, trainer, use_cache=False)
    assert not res.loaded and res.path is None and trainer.calls == 1
    assert not (tmp_path / "models").exists()
    assert not _model(tmp_path, trainer, refresh=False, use_cache=False).loaded and trainer.calls == 2


EXECUTED: list[str] = []


def _record(tag: str) -> str:
    EXECUTED.append(tag)
    return tag


class _Payload:
    """Unpickling this object would call :func:`_record`: a weights_only load must refuse it."""

    def __reduce__(self):
        return (_record, ("unpickled",))


def test_cached_state_loads_weights_only(tmp_path: Path) -> None:
    import torch

    config = {"v": 1}
    path = cache.state_path("states", "s", config, root=tmp_path)
    path.parent.mkdir(parents=True)
    key = config_hash(config, "s")
    torch.save({"key": key, "config": config, "state": {"x": _Payload()}}, path)
    EXECUTED.clear()
    with pytest.warns(RuntimeWarning, match="rejected"):
        state, loaded = cache.cached_state("states", "s", config, lambda: {"x": np.arange(3)}, root=tmp_path)
    assert EXECUTED == [] and not loaded
    assert isinstance(state["x"], torch.Tensor) and state["x"].tolist() == [0, 1, 2]
    assert torch.load(path, weights_only=True)["key"] == key  # rebuilt as plain tensors


def test_cached_state_round_trip_check_and_foreign_key(tmp_path: Path) -> None:
    import torch

    built = []

    def build():
        built.append(1)
        return {"a": np.ones((2, 2), np.float32), "n": np.int64(4), "nested": {"s": "x", "l": [1.0, np.float64(2)]}}

    state, loaded = cache.cached_state("st", "b", {"k": 1}, build, root=tmp_path)
    again, loaded2 = cache.cached_state("st", "b", {"k": 1}, build, root=tmp_path)
    assert (loaded, loaded2, len(built)) == (False, True, 1)
    assert torch.equal(again["a"], torch.ones(2, 2)) and again["n"] == 4
    assert again["nested"] == {"s": "x", "l": [1.0, 2.0]}

    def refuse(st):
        raise ValueError("does not fit")

    with pytest.warns(RuntimeWarning, match="does not fit"):
        _, loaded = cache.cached_state("st", "b", {"k": 1}, build, root=tmp_path, check=refuse)
    assert not loaded and len(built) == 2
    # a valid file of another config moved under this config's name carries the wrong key
    other = cache.state_path("st", "b", {"k": 2}, root=tmp_path)
    cache.cached_state("st", "b", {"k": 2}, build, root=tmp_path)
    os.replace(other, cache.state_path("st", "b", {"k": 1}, root=tmp_path))
    with pytest.warns(RuntimeWarning, match="not a cache file for this config"):
        _, loaded = cache.cached_state("st", "b", {"k": 1}, build, root=tmp_path)
    assert not loaded and len(built) == 4


# --------------------------------------------------------------------------------------------------------------------
# memo
# --------------------------------------------------------------------------------------------------------------------
def test_memo_two_threads_asking_the_same_key_compute_once() -> None:
    import threading

    calls = []
    inside = threading.Event()
    release = threading.Event()

    @cache.memo(maxsize=4)
    def slow(n):
        calls.append(n)
        inside.set()
        assert release.wait(10)
        return [n]  # a new object per computation: both threads must get the same one

    out = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, slow(7))) for i in range(2)]
    threads[0].start()
    assert inside.wait(10)  # the first thread is computing ...
    threads[1].start()  # ... when the second asks for the same key
    time.sleep(0.2)
    assert not slow.cached(7)
    release.set()
    for t in threads:
        t.join(10)
    assert calls == [7] and out[0] is out[1] and out[0] == [7]
    assert slow.cached(7) and slow(7) is out[0] and calls == [7]


def test_memo_different_keys_do_not_wait_for_each_other() -> None:
    import threading

    b_done = threading.Event()

    @cache.memo()
    def work(key):
        if key == "a":
            return b_done.wait(10)  # True only if "b" could run while "a" was computing
        b_done.set()
        return True

    result = {}
    t = threading.Thread(target=lambda: result.setdefault("a", work("a")))
    t.start()
    assert work("b") is True
    t.join(10)
    assert result["a"] is True


def test_memo_keys_eviction_and_clear() -> None:
    calls = []

    class Cfg:
        def __init__(self, n):
            self.n = n

        def to_json(self):
            return f'{{"n": {self.n}}}'

    @cache.memo(maxsize=2)
    def f(cfg, x=0.0):
        calls.append((cfg.n, x))
        return cfg.n + x

    assert f(Cfg(1), x=0.1) == 1.1 and f(Cfg(1), x=0.1 + 1e-15) == 1.1 and len(calls) == 1  # equal configs, rounding
    f(Cfg(2))
    f(Cfg(3))  # evicts the least recently used, Cfg(1)
    assert not f.cached(Cfg(1), x=0.1) and f.cached(Cfg(3))
    f.cache_clear()
    assert not f.cached(Cfg(3))
    with pytest.raises(TypeError):
        f([{1, 2}])  # an unhashable argument is refused, not silently recomputed


_CONCURRENT = """
import sys, time
import numpy as np, xarray as xr
from lab.cache import cached_dataset

def build():
    time.sleep(0.5)  # a slow generator: the two processes overlap
    return xr.Dataset({"u": (("i",), np.arange(200_000, dtype=np.float64))})

ds = cached_dataset("concurrent", {"n": 200_000}, build, root=sys.argv[1])
assert float(ds["u"].sum()) == float(np.arange(200_000).sum())
print("ok", ds.attrs["lab_cache_key"][:8])
"""

_READER = """
import sys, time
from pathlib import Path
import xarray as xr
root, stop = Path(sys.argv[1]), Path(sys.argv[2])
reads = 0
while not stop.exists():
    for path in root.glob("concurrent-*.nc"):  # the final name only ever holds a complete file
        with xr.open_dataset(path) as ds:
            assert ds["u"].size == 200_000
        reads += 1
    time.sleep(0.01)
print("reads", reads)
"""


def test_two_processes_building_the_same_data_set(tmp_path: Path) -> None:
    """Fault test: two processes generate the same data set at once. Both finish with the full data, the file is
    valid, and a third process reading the final name meanwhile never sees a half-written file."""
    import subprocess
    import sys

    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(tmp_path), str(stop)], stdout=subprocess.PIPE,
                              text=True)
    writers = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(tmp_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [w.communicate(timeout=120) for w in writers]
    stop.touch()
    reader_out, _ = reader.communicate(timeout=60)
    assert all(w.returncode == 0 for w in writers), [o[1][-2000:] for o in outs]
    assert outs[0][0].split() == outs[1][0].split() and outs[0][0].startswith("ok")
    assert reader.returncode == 0 and reader_out.startswith("reads")
    files = list(tmp_path.glob("concurrent-*.nc"))
    assert len(files) == 1 and not _leftovers(tmp_path)
    ds = cached_dataset("concurrent", {"n": 200_000}, Builder(), root=tmp_path)  # valid: loads, never rebuilds
    assert ds["u"].size == 200_000


# --------------------------------------------------------------------------------------------------------------------
# digests of weight files; one build per entry across threads and processes (the entry's file lock)
# --------------------------------------------------------------------------------------------------------------------
def test_a_tampered_tensor_is_rejected_and_rebuilt(tmp_path: Path) -> None:
    import torch

    trainer = Trainer()
    path = _model(tmp_path, trainer).path
    blob = torch.load(path, weights_only=True)
    assert blob["digest"] == cache.state_digest(blob["state"])
    blob["state"]["state_dict"]["weight"][0, 0] = 99.0  # same key, same config, same shapes: only the digest tells
    torch.save(blob, path)
    with pytest.warns(RuntimeWarning, match="content digest mismatch"):
        again = _model(tmp_path, trainer)
    assert not again.loaded and trainer.calls == 2 and float(again.model.weight[0, 0].detach()) == 0.5
    assert _model(tmp_path, trainer).loaded and trainer.calls == 2  # the rebuilt file is good


def test_a_weight_file_written_before_digests_still_loads(tmp_path: Path) -> None:
    import torch

    trainer = Trainer()
    path = _model(tmp_path, trainer).path
    blob = torch.load(path, weights_only=True)
    del blob["digest"]
    torch.save(blob, path)
    assert _model(tmp_path, trainer).loaded and trainer.calls == 1


def test_the_state_digest_sees_every_tensor_and_value() -> None:
    import torch

    state = {"w": torch.ones(2, 3), "h": torch.zeros(2, dtype=torch.bfloat16), "meta": {"steps": 3, "name": "x"},
             "curves": [torch.arange(3)]}
    base = cache.state_digest(state)
    assert base == cache.state_digest({k: state[k] for k in reversed(list(state))})  # order of keys: no matter
    for changed in ({**state, "w": torch.ones(3, 2)}, {**state, "w": torch.ones(2, 3, dtype=torch.float64)},
                    {**state, "h": torch.tensor([0.0, 1.0], dtype=torch.bfloat16)},
                    {**state, "meta": {"steps": 4, "name": "x"}}, {**state, "curves": [torch.arange(4)]}):
        assert cache.state_digest(changed) != base


def test_two_threads_asking_the_same_data_set_build_it_once(tmp_path: Path) -> None:
    """Each call takes its own lock on the entry's lock file: the second waits for the first and loads its file."""
    import threading

    calls: list[int] = []

    def slow() -> xr.Dataset:
        calls.append(1)
        time.sleep(0.5)
        return _toy()

    got: list[xr.Dataset] = []
    threads = [threading.Thread(target=lambda: got.append(cached_dataset("toy", CONFIG, slow, root=tmp_path)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1 and len(got) == 2 and got[0].identical(got[1])
    assert _files(tmp_path) == [cache_path("toy", CONFIG, root=tmp_path).name]


_TRAIN_ONCE = """
import sys, time
from pathlib import Path
import numpy as np
from lab.cache import cached_state

root, calls = sys.argv[1], Path(sys.argv[2])

def build():
    with open(calls, "a") as f:
        f.write("built\\n")
    time.sleep(1.0)  # a slow training: the other process asks meanwhile
    return {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}

state, loaded = cached_state("models", "slow", {"v": 1}, build, root=root)
print("loaded" if loaded else "built", float(state["w"].sum()))
"""


def test_two_processes_asking_the_same_state_train_once(tmp_path: Path) -> None:
    """An identical run in progress is waited for, not duplicated: the second process waits on the entry's lock,
    then loads what the first wrote."""
    import subprocess
    import sys

    calls = tmp_path / "calls.txt"
    procs = [subprocess.Popen([sys.executable, "-c", _TRAIN_ONCE, str(tmp_path), str(calls)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    assert calls.read_text().splitlines() == ["built"]
    assert sorted(o[0].split()[0] for o in outs) == ["built", "loaded"]
    assert {o[0].split()[1] for o in outs} == {"15.0"}
    assert _files(tmp_path / "models") == [cache.state_path("models", "slow", {"v": 1}, root=tmp_path).name]
