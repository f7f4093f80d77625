"""Each table is stored once (issue 29, item 3): the parts of a split are row selections of the stored data set,
not copies, and read back as the same rows; a rates-only change adds no copy of the data either."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import bioanon
from bioanon.cache import Cache


def _config(rates=(0.2, 0.4, 0.4), anonymizer="any.gaussian_noise"):
    return {
        "name": "stored-once",
        "seed": 2,
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 30, "samples_per_subject": 6, "dim": 16}},
        "rates": dict(zip(("background", "attacker", "evaluation"), rates, strict=True)),
        "anonymizers": [
            {"id": anonymizer, "grid": {"sigma": [0.5, 1.0]} if anonymizer == "any.gaussian_noise" else {"key": [1, 2]}}
        ],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive"],
        "report": {"bootstrap": 20},
    }


def _stored_rows(cache_root: Path) -> dict[str, list[str]]:
    """Hash of every stored feature row → the table files that hold it (as written, selections unresolved)."""
    where: dict[str, list[str]] = {}
    for path in sorted(cache_root.glob("tables/*/*.arrow")):
        tbl = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        if "features" not in tbl.column_names:
            continue
        ids = tbl.column("sample_id").to_pylist()
        values = np.asarray(bioanon.api.SampleTable(tbl, validate=False).payload("features"))
        for sid, row in zip(ids, values, strict=True):
            where.setdefault(sid + hashlib.sha1(row.tobytes()).hexdigest(), []).append(path.name)
    return where


@pytest.mark.parametrize("anonymizer", ["any.gaussian_noise", "any.block_permutation"])  # per table, per sample
def test_no_table_is_stored_twice(tmp_path, anonymizer, monkeypatch):
    from bioanon.evaluation import tasks

    monkeypatch.setattr(tasks, "SHARD_MIN_ROWS", 50)  # the per-sample anonymization in several shards
    monkeypatch.setattr(tasks, "SHARD_BYTES", 1)
    cache = Cache(tmp_path / "cache")
    r = bioanon.evaluate(_config(anonymizer=anonymizer), out_dir=None, cache=cache, progress=False, report=False)
    twice = {k: v for k, v in _stored_rows(tmp_path / "cache").items() if len(v) > 1}
    assert not twice, f"{len(twice)} rows stored more than once, e.g. {next(iter(twice.values()))}"
    # a rates-only change: a new split, and still no row stored twice
    r2 = bioanon.evaluate(
        _config((0.1, 0.45, 0.45), anonymizer), out_dir=None, cache=cache, progress=False, report=False
    )
    twice = {k: v for k, v in _stored_rows(tmp_path / "cache").items() if len(v) > 1}
    assert not twice, f"{len(twice)} rows stored more than once after a rates change"
    assert len(r.metrics) and len(r2.metrics)


def test_a_row_selection_reads_back_as_its_rows_and_a_missing_base_as_a_miss(tmp_path):
    from bioanon.api import SampleTable

    cache = Cache(tmp_path)
    table = SampleTable.from_arrays(
        subject=np.repeat(["a", "b", "c"], 2),
        sample_id=[f"x{i}" for i in range(6)],
        payloads={"features": np.arange(12, dtype=np.float32).reshape(6, 2)},
    )
    base_key, key = "ab" * 16, "cd" * 16
    cache.put_table(base_key, table)
    part = table.take([4, 1, 2]).with_lineage_step({"step": "split:test", "fingerprint": key})
    cache.put_rows(key, base_key, [4, 1, 2], part.arrow.schema.metadata)
    got = cache.get_table(key)
    assert got.sample_ids.tolist() == ["x4", "x1", "x2"] and got.lineage == part.lineage
    np.testing.assert_array_equal(got.payload("features"), part.payload("features"))
    assert Path(cache.table_path(key)).stat().st_size < Path(cache.table_path(base_key)).stat().st_size
    Path(cache.table_path(base_key)).unlink()
    assert cache.get_table(key) is None  # its base is gone: a miss, recomputed by the task that made it


def test_take_reads_only_the_rows_asked_for_of_any_entry(tmp_path, monkeypatch):
    """``get_table(key, take=positions)``: those rows in that order, of a plain table, a row selection (only
    they are taken from the base, in one take) and a concatenation; bad positions are refused by name."""
    from bioanon.api import SampleTable
    from bioanon.cache import store
    from bioanon.errors import CacheError

    cache = Cache(tmp_path)
    table = SampleTable.from_arrays(
        subject=np.repeat(["a", "b", "c"], 2),
        sample_id=[f"x{i}" for i in range(6)],
        payloads={"features": np.arange(12, dtype=np.float32).reshape(6, 2)},
    )
    base, sel, cat = "ab" * 16, "cd" * 16, "ef" * 16
    cache.put_table(base, table)
    cache.put_rows(sel, base, [4, 1, 2, 5])
    cache.put_concat(cat, [sel, base])
    for key, rows in ((base, [0, 1, 2, 3, 4, 5]), (sel, [4, 1, 2, 5]), (cat, [4, 1, 2, 5, 0, 1, 2, 3, 4, 5])):
        for want in ([2, 0], [], [1, 1]):
            got = cache.get_table(key, take=want)
            assert got.sample_ids.tolist() == [f"x{rows[i]}" for i in want], (key, want)
            np.testing.assert_array_equal(got.payload("features"), table.payload("features")[[rows[i] for i in want]])
    # of a row selection, only the rows taken are copied out of the base (not the selection, then a part of it)
    big = SampleTable.from_arrays(
        subject=np.repeat(np.arange(100).astype(str), 10),
        sample_id=[f"y{i}" for i in range(1000)],
        payloads={"features": np.ones((1000, 2000), np.float32)},
    )
    cache.put_table("12" * 16, big)
    cache.put_rows("34" * 16, "12" * 16, np.arange(900)[::-1])
    previous = pa.default_memory_pool()
    counted = pa.proxy_memory_pool(previous)
    pa.set_memory_pool(counted)
    try:
        got = cache.get_table("34" * 16, take=[0, 1, 2])
    finally:
        pa.set_memory_pool(previous)
    assert got.sample_ids.tolist() == ["y899", "y898", "y897"]
    assert counted.max_memory() < 100 * 2000 * 4  # 3 rows of 8 kB copied, not 900
    with pytest.raises(CacheError, match="outside the table"):
        cache.get_table(sel, take=[4])
    with pytest.raises(CacheError, match="rows or take"):
        cache.get_table(base, take=[0], rows=(0, 1))
    with pytest.raises(CacheError, match="row positions"):
        cache.get_table(base, take=[0.5])
    assert store.Cache is Cache


def test_the_score_task_copies_only_the_rows_of_the_selected_subjects(tmp_path, monkeypatch):
    """The score task reads each evaluation table's subjects and ids without payloads, then only the rows of
    the selected subjects with payloads (not the whole table, then a part of it)."""
    from bioanon.cache import store

    cfg = _config()
    cfg["selection"] = {"selectors": ["random"], "subject_counts": [3], "random_draws": 1}
    cfg["scenarios"] = ["parrot"]
    taken: list[int] = []
    real = store.Cache.get_table

    def spy(self, key, **kw):
        t = real(self, key, **kw)
        if kw.get("take") is not None:
            taken.append(len(kw["take"]))
        return t

    monkeypatch.setattr(store.Cache, "get_table", spy)
    r = bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "c"), progress=False, report=False)
    assert len(r.metrics)
    # 3 subjects × 6 samples per scoring of the selection (clear and parrot: one payload kind each)
    assert taken and set(taken) == {18}, taken


def test_per_sample_rows_are_found_again_in_any_order_and_a_damaged_entry_is_recomputed(tmp_path):
    import warnings

    from bioanon.fit_memo import reuse_per_sample

    cache = Cache(tmp_path)
    samples = [np.full(3 + i % 2, i, dtype=np.float32) for i in range(10)]  # ragged, like audio
    calls: list[list[int]] = []

    def rows(idx):
        calls.append([int(i) for i in idx])
        return np.stack([np.array([samples[i].sum(), len(samples[i])], np.float32) for i in idx])

    def run(subset):
        return reuse_per_sample(
            cache, "test.sums", {"p": 1}, [samples[i] for i in subset], lambda idx: rows([subset[i] for i in idx])
        )

    first = run([0, 1, 2, 3, 4, 5])
    again = run([5, 3, 7, 1, 9])  # 3 met before, 2 new
    assert calls == [[0, 1, 2, 3, 4, 5], [7, 9]]
    np.testing.assert_array_equal(again, np.stack([first[5], first[3], rows([7])[0], first[1], rows([9])[0]]))
    calls.clear()
    for entry in (tmp_path / "samples").rglob("*.arrow"):
        entry.write_bytes(b"damaged")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        redo = run([0, 1])
    assert calls == [[0, 1]] and redo.tolist() == first[:2].tolist()
    assert list((tmp_path / "samples").rglob("*.corrupt"))  # moved aside
    assert cache.info().n_tables >= 1  # per-sample entries are listed with the tables


def test_the_split_copies_no_payload_and_falls_back_to_copies_where_rows_repeat(tmp_path, monkeypatch):
    """The split reads subjects and attributes only: it cuts the data set without its payload columns (so no
    payload value is copied) and stores each part as row positions. A data set whose sample ids repeat has no
    row positions to point to: the split then cuts the whole tables and stores copies, payload included."""
    from bioanon.evaluation import tasks

    seen: list[list[str]] = []  # the payload columns of each table the split cuts
    cut = tasks._split_parts
    monkeypatch.setattr(tasks, "_split_parts", lambda t, *a: seen.append(t.payload_names) or cut(t, *a))
    r = bioanon.evaluate(_config(), out_dir=None, cache=tmp_path / "a", progress=False, report=False)
    assert seen and all(names == [] for names in seen), seen
    assert len(r.metrics)

    monkeypatch.setattr(tasks, "_rows_in", lambda whole, part: None)  # as where sample ids repeat
    seen.clear()
    copied = bioanon.evaluate(_config(), out_dir=None, cache=tmp_path / "b", progress=False, report=False)
    assert [] in seen and ["features"] in seen  # the payload-free cut, then the whole one
    assert copied.metrics.equals(r.metrics)
    stored = [
        pa.ipc.open_file(pa.memory_map(str(p))).read_all().column_names
        for p in sorted((tmp_path / "b").glob("tables/*/*.arrow"))
    ]
    assert sum("features" in names for names in stored) >= 1 + 3  # the data set and its 3 parts as copies


def _big_table(n: int = 600, width: int = 2000):
    from bioanon.api import SampleTable

    return SampleTable.from_arrays(
        subject=np.repeat(np.arange(n // 10).astype(str), 10),
        sample_id=[f"y{i}" for i in range(n)],
        payloads={"features": np.arange(n * width, dtype=np.float32).reshape(n, width)},
    )


_POOLS: list[object] = []  # a pool outlives the buffers it allocated (freeing them later needs it)


def _arrow_bytes_at_most(fn):
    """(fn(), the most bytes Arrow held at once while it ran)."""
    previous = pa.default_memory_pool()
    counted = pa.proxy_memory_pool(previous)
    _POOLS.append(counted)
    pa.set_memory_pool(counted)
    try:
        out = fn()
    finally:
        pa.set_memory_pool(previous)
    return out, counted.max_memory()


@pytest.mark.parametrize("want", [[5, 305, 6], [599, 0], [], [300, 300, 2, 301]])
def test_rows_of_stored_shards_are_taken_without_copying_the_whole(tmp_path, want):
    """A table read as the concatenation of its shards (a per-sample anonymization) comes in chunks; Arrow's own
    take of a chunked payload copies every chunk first. Taking rows of it, or of a row selection of it, copies
    only those rows, in the order asked for."""
    cache = Cache(tmp_path)
    table = _big_table()
    cache.put_table("a1" * 16, table.arrow.slice(0, 300))
    cache.put_table("a2" * 16, table.arrow.slice(300, 300))
    cache.put_concat("cc" * 16, ["a1" * 16, "a2" * 16])
    cache.put_rows("dd" * 16, "cc" * 16, np.arange(600)[::-1])
    row_bytes = 2000 * 4
    got, held = _arrow_bytes_at_most(lambda: cache.get_table("cc" * 16, take=want))
    assert got.sample_ids.tolist() == [f"y{i}" for i in want]
    np.testing.assert_array_equal(got.payload("features"), table.payload("features")[want])
    assert held <= 3 * row_bytes * max(len(want), 1) + 2**16, held  # not 600 rows
    got, held = _arrow_bytes_at_most(lambda: cache.get_table("dd" * 16, take=want))
    assert got.sample_ids.tolist() == [f"y{599 - i}" for i in want]
    assert held <= 3 * row_bytes * max(len(want), 1) + 2**16, held
    whole = cache.get_table("cc" * 16)
    assert whole.arrow.column("features").num_chunks == 2
    taken, held = _arrow_bytes_at_most(lambda: whole.take(want))
    assert taken.sample_ids.tolist() == [f"y{i}" for i in want] and held <= 3 * row_bytes * max(len(want), 1) + 2**16


def test_take_rows_is_arrows_take_on_any_chunking():
    """``take_rows`` gives what Arrow's take gives, whatever the chunks and the order of the rows (repeats
    included); positions outside the table are refused."""
    from bioanon.errors import TableError
    from bioanon.table_schema import take_rows

    rng = np.random.default_rng(0)
    tbl = pa.table({"x": np.arange(50), "s": [f"s{i}" for i in range(50)]})
    chunked = pa.concat_tables([tbl.slice(0, 7), tbl.slice(7, 0), tbl.slice(7, 30), tbl.slice(37)])
    for rows in (rng.integers(0, 50, 40), np.arange(50), np.arange(50)[::-1], np.array([], np.int64), [3, 3, 3]):
        assert take_rows(chunked, rows).equals(tbl.take(pa.array(np.asarray(rows, np.int64))))
    with pytest.raises(TableError, match="out of range"):
        take_rows(chunked, [50])


def test_take_rows_gathers_tensor_payloads_with_numpy_as_arrow_would():
    """A table with a tensor payload of numbers: ``take_rows`` and ``filter_rows`` give what Arrow's take and
    filter give (payloads, ids, schema and metadata), on any chunking (an empty chunk, sliced chunks), any row
    order, repeats, no rows, and a mask with nulls; the payload comes back as a numpy-gathered array (not a
    view of the input), and a payload with nulls or booleans is left to Arrow."""
    from bioanon.api import SampleTable
    from bioanon.table_schema import _rows_view, filter_rows, take_rows

    rng = np.random.default_rng(1)
    whole = SampleTable.from_arrays(
        subject=[f"s{i % 7}" for i in range(60)],
        sample_id=[f"x{i}" for i in range(60)],
        payloads={"grid": rng.normal(size=(60, 2, 3)).astype(np.float32), "ints": np.arange(240).reshape(60, 4)},
        attributes={"age": np.arange(60.0)},
        metadata={"note": "kept"},
    ).arrow
    chunked = pa.concat_tables([whole.slice(0, 9), whole.slice(9, 0), whole.slice(9, 40), whole.slice(49)])
    for tbl in (whole, chunked, whole.slice(5, 50)):
        ref = tbl.combine_chunks()
        some = rng.integers(0, tbl.num_rows, 70)
        for rows in (some, np.sort(some), np.arange(tbl.num_rows)[::-1], np.array([], np.int64), [3, 3]):
            got = take_rows(tbl, rows)
            assert got.equals(ref.take(pa.array(np.asarray(rows, np.int64)))) and got.schema.equals(tbl.schema)
        mask = pa.array([None if i % 5 == 0 else bool(i % 3) for i in range(tbl.num_rows)], pa.bool_())
        assert filter_rows(tbl, mask).equals(ref.filter(mask))
    taken = take_rows(whole, [1, 2])
    flat = taken.column("grid").chunk(0).storage.values
    source = whole.column("grid").chunk(0).storage.values.to_numpy()
    assert not np.shares_memory(np.frombuffer(flat.buffers()[1], np.float32), source)
    nulls = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), (2,)),
        pa.FixedSizeListArray.from_arrays(pa.array([1.0, None, 3.0, 4.0], pa.float32()), 2),
    )
    bools = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.bool_(), (2,)), pa.FixedSizeListArray.from_arrays(pa.array([True, False] * 2), 2)
    )
    assert _rows_view(nulls) is None and _rows_view(bools) is None
    mixed = pa.table({"n": nulls, "b": bools, "x": pa.array([1.0, 2.0], pa.float32())})
    assert take_rows(mixed, [1, 0, 1]).equals(mixed.take(pa.array([1, 0, 1])))


def test_a_selector_of_subjects_alone_reads_no_payload(tmp_path, monkeypatch):
    """A selector that declares ``reads_payloads = False`` (a random draw) gets its tables without payload
    columns: nothing of the anonymized payloads is read for it. Others get the payloads."""
    from bioanon.builtin.selectors import DistinctiveSelection, RandomSelection

    seen: dict[str, list[list[str]]] = {}

    def spy(cls):
        real = cls.select

        def select(self, table, n, *, attacker=None):
            seen.setdefault(cls.id, []).append(table.payload_names + (attacker.payload_names if attacker else []))
            return real(self, table, n, attacker=attacker)

        monkeypatch.setattr(cls, "select", select)

    spy(RandomSelection)
    spy(DistinctiveSelection)
    cfg = _config()
    cfg["selection"] = {"selectors": ["random", "distinctive"], "subject_counts": [3], "random_draws": 1}
    r = bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "c"), progress=False, report=False)
    assert len(r.metrics)
    assert seen["any.select_random"] and all(names == [] for names in seen["any.select_random"])
    assert seen["any.select_distinctive"] and all("features" in n for n in seen["any.select_distinctive"])


def test_a_column_pattern_reads_every_column_it_names(tmp_path):
    """``get_table(columns=...)``: a name ending in ``*`` stands for every column starting with the rest, of a
    plain table and of a row selection; an exact name that is missing is still an error."""
    from bioanon.api import SampleTable

    cache = Cache(tmp_path)
    table = SampleTable.from_arrays(
        subject=["a", "b", "c"],
        sample_id=["x", "y", "z"],
        payloads={"features": np.zeros((3, 4), np.float32)},
        attributes={"age": [1, 2, 3], "group": ["u", "v", "u"]},
    )
    cache.put_table("ee" * 16, table)
    cache.put_rows("ff" * 16, "ee" * 16, [2, 0])
    for key, ids in (("ee" * 16, ["x", "y", "z"]), ("ff" * 16, ["z", "x"])):
        got = cache.get_table(key, columns=("subject", "sample_id", "attr.*"))
        assert got.arrow.column_names == ["subject", "sample_id", "attr.age", "attr.group"]
        assert got.sample_ids.tolist() == ids and got.payload_names == []
        assert cache.get_table(key, columns=("sample_id", "nothing.*")).arrow.column_names == ["sample_id"]
    with pytest.raises(KeyError):
        cache.get_table("ee" * 16, columns=("subject", "missing"))
