"""The scan benchmark's cache flush: sized from the last-level cache that Linux reports."""

from lab.bench.scan.timing import Flusher, last_level_cache_bytes


def _cache_dir(tmp_path, sizes):
    for i, size in enumerate(sizes):
        d = tmp_path / f"index{i}"
        d.mkdir(parents=True)
        (d / "size").write_text(size + "\n")
    (tmp_path / "uevent").write_text("")  # not an index entry: ignored
    return str(tmp_path)


def test_last_level_cache_is_the_largest_reported(tmp_path):
    base = _cache_dir(tmp_path, ["48K", "32K", "2048K", "307200K"])
    assert last_level_cache_bytes(base=base) == 307200 * 2**10


def test_last_level_cache_units_and_fallbacks(tmp_path):
    assert last_level_cache_bytes(base=_cache_dir(tmp_path / "a", ["1M", "4096"])) == 2**20
    assert last_level_cache_bytes(default=123, base=str(tmp_path / "missing")) == 123
    assert last_level_cache_bytes(default=7, base=_cache_dir(tmp_path / "b", ["lots"])) == 7


def test_flusher_buffer_covers_the_cache_within_bounds():
    llc = last_level_cache_bytes()
    nbytes = Flusher().buf.numel() * 4
    assert nbytes == min(max(64 * 2**20, 2 * llc), 2**30)
    assert Flusher(4096).buf.numel() == 1024
