"""A cache that heals itself (issue 33, item 1): every entry carries a checksum checked on read; a damaged entry is
moved aside and computed again with one warning; a record whose output tables are gone or damaged is computed again
instead of stopping every later run; ``verify``, ``quarantined`` and ``clean`` find and remove the debris."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.cache import Cache, CacheWarning
from bioanon.cli import main

KEY = "ab" * 16


def _flip(path: Path, at: float = 0.5) -> None:
    """Flip one bit of the file, ``at`` a fraction of its length."""
    data = bytearray(path.read_bytes())
    i = min(len(data) - 1, int(at * len(data)))
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def _table(n: int = 200) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table({"x": rng.standard_normal(n), "y": np.arange(n)})


def test_a_flipped_bit_in_a_json_entry_is_a_miss_not_a_wrong_value(tmp_path):
    cache = Cache(tmp_path)
    cache.put_json(KEY, {"top1": 0.8125, "rows": [1, 2, 3]})
    path = Path(cache.json_path(KEY))
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"0.8125", b"0.8126"))  # one digit, still valid JSON
    with pytest.warns(CacheWarning, match="do not match its checksum"):
        assert cache.get_json(KEY) is None
    assert not path.exists() and Path(f"{path}.corrupt").exists()
    assert cache.quarantined() == [f"{path}.corrupt"]


def test_entries_without_a_checksum_are_not_trusted(tmp_path):
    """A hand-written ``{}`` (or an entry of an older bioanon) is recomputed, never read as a record."""
    cache = Cache(tmp_path)
    path = Path(cache.json_path(KEY))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{}")
    with pytest.warns(CacheWarning, match="no checksum"):
        assert cache.get_json(KEY, default="miss") == "miss"
    assert cache.get_or_compute_json(KEY, lambda: {"rows": [1]}) == {"rows": [1]}
    assert cache.get_json(KEY) == {"rows": [1]}


@pytest.mark.parametrize("where", [0.3, 0.6, 0.9])
def test_a_flipped_bit_in_a_table_is_a_miss_not_wrong_data(tmp_path, where):
    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    path = Path(cache.table_path(KEY))
    _flip(path, where)
    with pytest.warns(CacheWarning, match=r"do not match its checksum|unreadable"):
        assert cache.get_table(KEY) is None
    assert not path.exists() and not Path(f"{path}.sha256").exists() and not cache.has_table(KEY)
    cache.put_table(KEY, _table())  # written again, whole and verified
    assert cache.get_table(KEY).arrow.equals(_table())


def test_a_table_without_its_checksum_file_is_not_trusted(tmp_path):
    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    Path(cache.table_path(KEY) + ".sha256").unlink()
    assert not cache.has_table(KEY)
    with pytest.warns(CacheWarning, match="checksum file is missing"):
        assert cache.get_table(KEY) is None


def test_blobs_are_checked_too(tmp_path):
    cache = Cache(tmp_path)
    cache.put_blob(KEY, b"weights" * 100)
    assert cache.get_blob(KEY) == b"weights" * 100
    _flip(Path(cache._path("blobs", KEY)), 0.7)
    with pytest.warns(CacheWarning):
        assert cache.get_blob(KEY) is None


def _metric_values(result) -> np.ndarray:
    m = result.metrics.sort_values(list(result.metrics.columns[:8])).reset_index(drop=True)
    return m["value"].to_numpy(dtype=float)


def _entries(root: Path, kind: str) -> list[Path]:
    return sorted(p for p in (root / kind).rglob(f"*.{'arrow' if kind == 'tables' else 'json'}"))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("healing")
    r = bioanon.evaluate(config(**SMALL), out_dir=None, cache=root / "cache", progress=False, report=False)
    return root, r


def _rerun(root: Path, name: str):
    cache = root / name
    if not cache.exists():
        subprocess.run(["cp", "-r", str(root / "cache"), str(cache)], check=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = bioanon.evaluate(config(**SMALL), out_dir=None, cache=cache, progress=False, report=False)
    return r, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def test_a_missing_output_table_makes_its_task_run_again(first_run):
    """Today a record whose table is gone stops every later run ("cache entry … is missing")."""
    root, first = first_run
    cache = root / "missing"
    subprocess.run(["cp", "-r", str(root / "cache"), str(cache)], check=True)
    for table in _entries(cache, "tables")[::3]:  # a third of the stored tables, whatever they are
        table.unlink()
    again, said = _rerun(root, "missing")
    assert again.executed > 0
    np.testing.assert_array_equal(_metric_values(again), _metric_values(first))
    assert said and all("computing the task again" in s for s in said)


def test_damaged_output_tables_give_the_same_results_after_one_warning_each(first_run):
    """Every stored table damaged and the metric records gone: the scoring tasks run again, find their inputs
    damaged, and the tasks that made those run again too (each damaged entry moved aside with a warning)."""
    root, first = first_run
    cache = root / "damaged"
    subprocess.run(["cp", "-r", str(root / "cache"), str(cache)], check=True)
    for table in _entries(cache, "tables"):
        _flip(table, 0.8)
    for record in _entries(cache, "json"):
        if b'"rows"' in record.read_bytes():  # the scoring tasks' records
            record.unlink()
    again, said = _rerun(root, "damaged")
    np.testing.assert_array_equal(_metric_values(again), _metric_values(first))
    assert again.executed > 0 and said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        Cache(cache).verify()  # moves aside the damaged tables no task needed this time
    assert Cache(cache).verify()["damaged"] == []
    third, _ = _rerun(root, "damaged")
    np.testing.assert_array_equal(_metric_values(third), _metric_values(first))


def test_a_damaged_metric_record_is_recomputed_not_read(first_run):
    root, first = first_run
    cache = root / "records"
    subprocess.run(["cp", "-r", str(root / "cache"), str(cache)], check=True)
    for record in _entries(cache, "json"):
        _flip(record, 0.95)  # inside the JSON payload: a digit or a character of a value
    again, said = _rerun(root, "records")
    np.testing.assert_array_equal(_metric_values(again), _metric_values(first))
    assert again.executed > 0 and said


def test_verify_quarantined_and_clean(tmp_path):
    cache = Cache(tmp_path)
    for i, key in enumerate(("a1" * 16, "b2" * 16, "c3" * 16)):
        cache.put_table(key, _table(50 + i))
        cache.put_json(key, {"i": i})
    _flip(Path(cache.table_path("b2" * 16)), 0.5)
    _flip(Path(cache.json_path("c3" * 16)), 0.9)
    with pytest.warns(CacheWarning):
        report = cache.verify()
    assert report["checked"] == 6 and len(report["damaged"]) == 2
    assert len(cache.quarantined()) == 2 and cache.info().n_corrupt == 2
    assert cache.verify()["damaged"] == []  # moved aside: nothing damaged is left in place
    # debris: a temp file of a process that is gone, one of this (live) process, a checksum without its table
    directory = Path(cache.table_path("a1" * 16)).parent
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = directory / f"{'d4' * 16}.arrow.tmp-{int(dead.stdout)}-abcdef"
    live = directory / f"{'e5' * 16}.arrow.tmp-{os.getpid()}-abcdef"
    orphan = directory / f"{'f6' * 16}.arrow.sha256"
    for p in (gone, live, orphan):
        p.write_bytes(b"x")
    old = 0  # an orphan checksum counts as debris only once it is old (a write in progress writes it first)
    assert cache.clean() == 1 and not gone.exists() and live.exists() and orphan.exists()
    os.utime(orphan, (old, old))
    assert cache.clean() == 1 and not orphan.exists()
    assert cache.get_table("a1" * 16) is not None  # entries are kept


def test_cache_commands(tmp_path, capsys):
    cache = Cache(tmp_path)
    cache.put_json(KEY, {"i": 1})
    cache.put_table(KEY, _table())
    _flip(Path(cache.table_path(KEY)), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 1  # found damage
    out = capsys.readouterr().out
    assert "2 entries checked, 1 damaged" in out and KEY in out
    assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 0
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "moved aside as damaged: 1" in out and f"{KEY}.arrow.corrupt" in out
    assert main(["cache", "clean", "--cache-dir", str(tmp_path)]) == 0
    assert "removed 0 left-over files" in capsys.readouterr().out


def test_checking_a_table_does_not_map_its_pages_into_the_process(tmp_path):
    """The checksum is computed from the file read in chunks, not through the table's memory map: a verified
    64 MiB table adds its touched pages only to the process's resident memory, not all of them."""
    import numpy as np

    from bioanon.api import SampleTable

    cache = Cache(tmp_path)
    n = 2**14
    cache.put_table(
        "ab" * 16,
        SampleTable.from_arrays(
            subject=np.array([f"s{i % 50}" for i in range(n)], dtype=object),
            payloads={"features": np.ones((n, 1024), np.float32)},  # 64 MiB
        ),
    )
    code = (
        "import sys\n"
        "from bioanon.cache import Cache\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096\n"
        "cache = Cache(sys.argv[1])\n"
        "cache.get_table('cd' * 16)\n"  # a miss: the code paths imported, nothing mapped
        "before = rss()\n"
        "t = cache.get_table('ab' * 16)\n"
        "print(rss() - before)\n"
    )
    grown = int(
        subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    )
    assert grown < 32 * 2**20, f"verifying the table added {grown / 2**20:.0f} MiB of resident memory"
