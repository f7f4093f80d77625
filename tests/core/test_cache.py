"""Tests of bioanon.cache: canonical fingerprints, table content hashes and the content-addressed cache."""

from __future__ import annotations

import decimal
import json
import multiprocessing
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pyarrow as pa
import pytest

from bioanon.cache import (
    Cache,
    CacheInfo,
    CacheWarning,
    canonical_json,
    derive_fingerprint,
    fingerprint,
    format_bytes,
    table_fingerprint,
)
from bioanon.errors import CacheError

try:
    from bioanon.table import SampleTable
except ModuleNotFoundError:  # the sibling module may not exist yet
    SampleTable = None

KEY = "0123456789abcdef0123456789abcdef"


def arrow_of(t):
    """The pyarrow.Table inside a SampleTable (or the table itself)."""
    return t.arrow if hasattr(t, "arrow") else t


def make_table(i: int = 0, n: int = 12) -> pa.Table:
    """A small sample table whose content depends on ``i``."""
    rng = np.random.default_rng(i)
    feats = rng.standard_normal((n, 3, 2)).astype(np.float32)
    meta = {"trait": "motion", "joints": ["a", "b", "c"], "lineage": [{"step": "gen", "fingerprint": f"{i:032x}"}]}
    return pa.table(
        {
            "sample_id": [f"s{i}-{k}" for k in range(n)],
            "subject": [f"p{k % 3}" for k in range(n)],
            "attr.age": pa.array([None if k % 4 == 0 else 20 + k for k in range(n)], pa.int16()),
            "pose": pa.FixedShapeTensorArray.from_numpy_ndarray(feats),
        }
    ).replace_schema_metadata({b"bioanon": json.dumps(meta).encode()})


# ------------------------------------------------------------------------------------------ canonical JSON


def test_canonical_json_key_order_and_no_whitespace():
    a = canonical_json({"b": 1, "a": {"y": [1, 2], "x": "é"}})
    b = canonical_json({"a": {"x": "é", "y": [1, 2]}, "b": 1})
    assert a == b == '{"a":{"x":"\\u00e9","y":[1,2]},"b":1}'


def test_canonical_json_tuple_equals_list():
    assert canonical_json((1, (2, "x"))) == canonical_json([1, [2, "x"]])


def test_canonical_json_int_float_documented():
    # ints and floats differ (methods coerce parameters to their declared types first) ...
    assert canonical_json(1) == "1"
    assert canonical_json(1.0) == "1.0"
    assert fingerprint(1) != fingerprint(1.0)
    # ... floats are repr-exact, and bool is not int
    assert fingerprint(0.1) != fingerprint(0.1000000001)
    assert canonical_json(0.1) == "0.1"
    assert fingerprint(True) != fingerprint(1)


def test_canonical_json_numpy_scalars_equal_python():
    assert canonical_json(
        {"a": np.int64(3), "b": np.float64(0.25), "c": np.bool_(True), "d": np.str_("s")}
    ) == canonical_json({"a": 3, "b": 0.25, "c": True, "d": "s"})
    assert canonical_json(np.float32(0.5)) == "0.5"


def test_canonical_json_arrays_hashed_by_content():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert fingerprint(a) == fingerprint(a.copy())
    assert fingerprint(a) == fingerprint(np.asfortranarray(a))  # memory layout does not matter
    assert fingerprint(a) == fingerprint(a.astype(">f4"))  # nor byte order
    b = a.copy()
    b[1, 2] = 99
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) != fingerprint(a.reshape(3, 2))  # shape counts
    assert fingerprint(a) != fingerprint(a.astype(np.float64))  # dtype counts
    assert json.loads(canonical_json(a))["__ndarray__"]["shape"] == [2, 3]


@pytest.mark.parametrize("bad", [pathlib.Path("/tmp/x"), pathlib.PurePosixPath("a")])
def test_paths_refused(bad):
    with pytest.raises(CacheError, match="paths must not enter fingerprints"):
        canonical_json({"data": bad})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), np.float64("nan")])
def test_non_finite_refused(bad):
    with pytest.raises(CacheError, match="non-finite"):
        fingerprint({"x": [bad]})


@pytest.mark.parametrize(
    "bad, match",
    [
        ({1, 2}, "set"),
        (b"raw", "bytes"),
        (object(), "object"),
        ({1: "a"}, "keys must be str"),
        (np.array([object()]), "object dtype"),
        (1 + 2j, "complex"),
        ({"__ndarray__": 1}, "reserved"),
    ],
)
def test_other_types_refused_naming_type(bad, match):
    with pytest.raises(CacheError, match=match):
        canonical_json(bad)


def test_cycle_refused():
    x: list = [1]
    x.append(x)
    with pytest.raises(CacheError, match="self-referencing"):
        canonical_json(x)


def test_fingerprint_shape():
    fp = fingerprint({"a": 1})
    assert len(fp) == 32 and int(fp, 16) >= 0


# ------------------------------------------------------------------------------------ derive_fingerprint

BASE = dict(
    method_id="any.random_set_mean",
    version="1.0",
    params={"set_size": 32, "purity": 0.9},
    inputs=["a" * 32, "b" * 32],
    seed=7,
    extra={"split": "eval"},
)


def test_derive_fingerprint_changes_with_every_part():
    base = derive_fingerprint(**BASE)
    variants = [
        dict(method_id="any.other"),
        dict(version="1.1"),
        dict(params={"set_size": 33, "purity": 0.9}),
        dict(params={"set_size": 32, "purity": 0.91}),
        dict(params={"set_size": 32, "purity": 0.9, "extra_param": None}),
        dict(inputs=["a" * 32, "c" * 32]),
        dict(inputs=["b" * 32, "a" * 32]),  # order of inputs matters
        dict(inputs=["a" * 32]),
        dict(seed=8),
        dict(seed=None),
        dict(extra={"split": "attack"}),
        dict(extra=None),
    ]
    fps = {derive_fingerprint(**{**BASE, **v}) for v in variants}
    assert base not in fps
    assert len(fps) == len(variants)


def test_derive_fingerprint_param_order_and_types():
    same = derive_fingerprint(**{**BASE, "params": {"purity": 0.9, "set_size": np.int64(32)}, "seed": np.int32(7)})
    assert same == derive_fingerprint(**BASE)
    assert derive_fingerprint(**{**BASE, "extra": None}) == derive_fingerprint(**{**BASE, "extra": {}})
    with pytest.raises(CacheError):
        derive_fingerprint(**{**BASE, "inputs": "a" * 32})  # a bare string is not a sequence of inputs
    with pytest.raises(CacheError):
        derive_fingerprint(**{**BASE, "seed": True})
    with pytest.raises(CacheError):
        derive_fingerprint(**{**BASE, "params": {"out": pathlib.Path("x")}})


CROSS_PROCESS_SCRIPT = textwrap.dedent(
    """
    import json, numpy as np, pyarrow as pa
    from bioanon.cache import fingerprint, derive_fingerprint, table_fingerprint
    params = {"z": [1, 2.5, None, True], "a": {"k": "v", "arr": np.arange(5, dtype=np.int16)}, "f": 0.1}
    t = pa.table({"x": [1, 2, None], "s": ["a", None, "ccc"]},
                 metadata={b"bioanon": json.dumps({"trait": "t"}).encode()})
    print(json.dumps([fingerprint(params),
                      derive_fingerprint(method_id="m.x", version="2", params=params, inputs=["ab" * 16], seed=3),
                      table_fingerprint(t)]))
    """
)


def test_fingerprints_stable_across_processes():
    exec_globals: dict = {}
    results = []
    for hashseed in ("1", "987"):  # different str hashing / set ordering in each child
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run(
            [sys.executable, "-c", CROSS_PROCESS_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        results.append(json.loads(out.stdout))
    # and in this process
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        exec(CROSS_PROCESS_SCRIPT, exec_globals)
    results.append(json.loads(buf.getvalue()))
    assert results[0] == results[1] == results[2]
    assert all(len(fp) == 32 for fp in results[0])


# ----------------------------------------------------------------------------------------- table hashing


def rich_table() -> pa.Table:
    n = 40
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "i": pa.array([None if k % 7 == 3 else k for k in range(n)], pa.int64()),
            "f": pa.array(rng.standard_normal(n).astype(np.float32)),
            "b": pa.array([None if k % 5 == 0 else k % 2 == 0 for k in range(n)]),
            "s": pa.array([None if k % 6 == 1 else "x" * (k % 4) for k in range(n)]),
            "ls": pa.array([None if k % 9 == 2 else list(range(k % 3)) for k in range(n)], pa.list_(pa.int32())),
            "st": pa.array([None if k % 8 == 5 else {"a": k, "b": None if k % 3 else str(k)} for k in range(n)]),
            "d": pa.array([["u", "v", None][k % 3] for k in range(n)]).dictionary_encode(),
            "m": pa.array([[("k", k)] if k % 4 else None for k in range(n)], pa.map_(pa.string(), pa.int64())),
            "t": pa.FixedShapeTensorArray.from_numpy_ndarray(rng.standard_normal((n, 2, 3)).astype(np.float32)),
            "fb": pa.array([bytes([k % 256]) * 4 for k in range(n)], pa.binary(4)),
            "dec": pa.array([decimal.Decimal(k) / 4 for k in range(n)], pa.decimal128(12, 2)),
            "nul": pa.nulls(n),
            "lt": pa.array([[float(k)] * (k % 3) for k in range(n)], pa.large_list(pa.float32())),
        }
    ).replace_schema_metadata({b"bioanon": b'{"trait":"x","lineage":[]}'})


def rechunk(t: pa.Table, sizes: list[int]) -> pa.Table:
    """The same table with chunks of the given sizes (the last one repeated), with slicing offsets."""
    batches, start, k = [], 0, 0
    while start < t.num_rows:
        size = sizes[min(k, len(sizes) - 1)]
        batches.append(t.slice(start, size))
        start, k = start + size, k + 1
    return pa.concat_tables(batches)


def test_table_fingerprint_independent_of_chunking():
    t = rich_table()
    fp = table_fingerprint(t)
    for sizes in ([1], [3, 7], [13], [39, 1], [40]):
        other = rechunk(t, sizes)
        assert other.column(0).num_chunks > 1 or sizes == [40]
        assert table_fingerprint(other) == fp, sizes
    assert table_fingerprint(t.combine_chunks()) == fp
    assert table_fingerprint(pa.Table.from_batches(t.to_batches(max_chunksize=5))) == fp
    # a sliced, re-concatenated table with the same logical rows
    both = pa.concat_tables([t, t])
    assert table_fingerprint(both.slice(40, 40)) == fp
    assert table_fingerprint(both.slice(39, 40)) != fp


def test_table_fingerprint_ignores_hidden_values_and_encodings():
    a = pa.table({"x": pa.array([1, None, 3], pa.int64())})
    # same logical data, different bytes under the null slot
    b = pa.table(
        {
            "x": pa.Array.from_buffers(
                pa.int64(), 3, [a.column(0).chunk(0).buffers()[0], pa.py_buffer(np.array([1, 42, 3]).tobytes())]
            )
        }
    )
    assert a.equals(b)
    assert table_fingerprint(a) == table_fingerprint(b)
    # dictionary layout does not matter (the type does)
    d1 = pa.chunked_array([pa.array(["a", "b"]).dictionary_encode(), pa.array(["b", "a"]).dictionary_encode()])
    d2 = pa.chunked_array([pa.array(["a", "b", "b", "a"]).dictionary_encode()])
    assert table_fingerprint(pa.table({"d": d1})) == table_fingerprint(pa.table({"d": d2}))


def test_table_fingerprint_changes_with_content():
    t = rich_table()
    fp = table_fingerprint(t)
    f = t.column("f").to_numpy().copy()
    f[17] = np.nextafter(f[17], np.float32(10))  # one value, by one ulp
    assert table_fingerprint(t.set_column(1, "f", pa.array(f))) != fp
    ints = t.column("i").to_pylist()
    ints[3], ints[4] = 0, None  # move a null
    assert table_fingerprint(t.set_column(0, "i", pa.array(ints, pa.int64()))) != fp
    strs = t.column("s").to_pylist()
    strs[2], strs[3] = strs[2] + "x", strs[3][:-1]  # same total bytes, different boundary
    assert table_fingerprint(t.set_column(3, "s", pa.array(strs))) != fp
    # schema: a renamed column, a different type, different trait metadata
    assert table_fingerprint(t.rename_columns(["j", *t.column_names[1:]])) != fp
    assert table_fingerprint(t.set_column(0, "i", t.column("i").cast(pa.int32()))) != fp
    assert table_fingerprint(t.replace_schema_metadata({b"bioanon": b'{"trait":"y","lineage":[]}'})) != fp
    assert table_fingerprint(t.slice(0, 39)) != fp
    # where the nulls are counts, not only the sequence of valid values
    pairs = [
        ([1, None, 2], [1, 2, None]),
        ([[1], None], [None, [1]]),
        (["a", None, ""], ["a", "", None]),
        ([{"a": 1}, None], [None, {"a": 1}]),
        ([True, None], [None, True]),
    ]
    for left, right in pairs:
        assert table_fingerprint(pa.table({"x": left})) != table_fingerprint(pa.table({"x": right})), left


def test_table_fingerprint_ignores_lineage_only():
    t = make_table(1)
    meta = json.loads(t.schema.metadata[b"bioanon"])
    meta["lineage"].append({"step": "other", "fingerprint": "f" * 32})
    t2 = t.replace_schema_metadata({b"bioanon": json.dumps(meta, indent=2).encode()})
    assert table_fingerprint(t2) == table_fingerprint(t)
    meta["joints"] = ["a", "b", "d"]
    t3 = t.replace_schema_metadata({b"bioanon": json.dumps(meta).encode()})
    assert table_fingerprint(t3) != table_fingerprint(t)


@pytest.mark.skipif(SampleTable is None, reason="bioanon.table not available")
def test_table_fingerprint_of_sample_table():
    t = make_table(2)
    assert table_fingerprint(SampleTable(t, validate=False)) == table_fingerprint(t)


def test_table_fingerprint_rejects_non_tables():
    with pytest.raises(CacheError, match="expected a pyarrow.Table"):
        table_fingerprint({"x": [1]})


# ------------------------------------------------------------------------------------------------ cache


@pytest.fixture
def cache(tmp_path) -> Cache:
    return Cache(tmp_path / "cache", fsync=False)


def test_put_get_round_trip(cache):
    t = make_table(3)
    assert not cache.has_table(KEY)
    assert cache.get_table(KEY) is None
    path = cache.put_table(KEY, t)
    assert path.endswith(f"/tables/01/{KEY}.arrow") and os.path.isfile(path)
    assert cache.has_table(KEY)
    got = cache.get_table(KEY)
    if SampleTable is not None:
        assert isinstance(got, SampleTable)
    got = arrow_of(got)
    assert got.equals(t, check_metadata=True)
    assert got.schema.metadata == t.schema.metadata
    assert got.column_names == t.column_names
    assert table_fingerprint(got) == table_fingerprint(t)
    assert cache.stats == {"hits": 1, "misses": 1, "writes": 1}
    # content addressed: a second put of the key writes nothing
    cache.put_table(KEY, make_table(4))
    assert cache.stats["writes"] == 1
    assert arrow_of(cache.get_table(KEY)).equals(t)


@pytest.mark.skipif(SampleTable is None, reason="bioanon.table not available")
def test_put_sample_table(cache):
    t = make_table(5)
    cache.put_table(KEY, SampleTable(t, validate=False))
    assert arrow_of(cache.get_table(KEY)).equals(t, check_metadata=True)


def test_put_record_batch_reader(cache):
    t = make_table(6, n=50)
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=7))
    cache.put_table(KEY, reader)
    assert arrow_of(cache.get_table(KEY)).equals(t)


def test_json_round_trip(cache):
    key = "ab" * 16
    assert not cache.has_json(key)
    assert cache.get_json(key) is None
    assert cache.get_json(key, default="miss") == "miss"
    value = {"eer": 0.25, "curve": (1, 2), "n": np.int64(3), "arr": np.array([1.5, 2.0]), "name": "é"}
    path = cache.put_json(key, value)
    assert path.endswith(f"/json/ab/{key}.json")
    assert cache.has_json(key)
    assert cache.get_json(key) == {"eer": 0.25, "curve": [1, 2], "n": 3, "arr": [1.5, 2.0], "name": "é"}
    with open(path, "rb") as f:
        head, body = f.read().split(b"\n", 1)  # a checksum line, then plain JSON with sorted keys, nothing pickled
    assert head.startswith(b"bioanon-cache sha256=") and body.startswith(b'{"arr":')
    with pytest.raises(CacheError, match="cannot store JSON"):
        cache.put_json("cd" * 16, {"p": pathlib.Path("x")})


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "0123456789ABCDEF",
        "../../etc/passwd0000",
        "g" * 32,
        "a" * 65,
        "a" * 15,
        None,
        12345,
        KEY + "/x",
        "." * 20,
    ],
)
def test_bad_keys_refused(cache, bad):
    for call in (cache.has_table, cache.get_table, cache.has_json, cache.get_json):
        with pytest.raises(CacheError, match="invalid cache key"):
            call(bad)
    with pytest.raises(CacheError, match="invalid cache key"):
        cache.put_table(bad, make_table())
    with pytest.raises(CacheError, match="invalid cache key"):
        cache.put_json(bad, 1)


def test_put_table_rejects_non_tables(cache):
    with pytest.raises(CacheError, match="expected a pyarrow.Table"):
        cache.put_table(KEY, [1, 2, 3])


def test_get_or_compute_second_run_recomputes_nothing(tmp_path):
    calls = []

    def compute(i):
        def fn():
            calls.append(i)
            return make_table(i)

        return fn

    keys = [fingerprint({"k": i}) for i in range(3)]
    first = Cache(tmp_path, fsync=False)
    results = [first.get_or_compute_table(k, compute(i)) for i, k in enumerate(keys)]
    json_calls = []
    first.get_or_compute_json(keys[0], lambda: json_calls.append(1) or None)  # a None result is cached too
    assert calls == [0, 1, 2] and json_calls == [1]
    assert first.stats == {"hits": 0, "misses": 4, "writes": 4}

    second = Cache(tmp_path, fsync=False)  # a rerun
    again = [second.get_or_compute_table(k, compute(99)) for k in keys]
    assert second.get_or_compute_json(keys[0], lambda: json_calls.append(2)) is None
    assert calls == [0, 1, 2] and json_calls == [1]
    assert second.stats == {"hits": 4, "misses": 0, "writes": 0}
    for r, a in zip(results, again, strict=True):
        assert arrow_of(r).equals(arrow_of(a), check_metadata=True)


# ---------------------------------------------------------------------------------- concurrency / crashes

# The worker must be importable by name in a spawned child, and pytest imports this file with
# --import-mode=importlib (not importable by name), so the worker lives in a module written at test time.
WORKER_MODULE = textwrap.dedent(
    """
    import json
    import numpy as np
    import pyarrow as pa
    from bioanon.cache import Cache, fingerprint

    N_SHARED, N_OWN = 6, 3

    def make_table(i, n=30):
        rng = np.random.default_rng(i)
        return pa.table(
            {"sample_id": [f"s{i}-{k}" for k in range(n)],
             "pose": pa.FixedShapeTensorArray.from_numpy_ndarray(rng.standard_normal((n, 4, 3)).astype("float32"))},
            metadata={b"bioanon": json.dumps({"i": i}).encode()},
        )

    def expected():
        out = {fingerprint({"shared": i}): make_table(i) for i in range(N_SHARED)}
        out.update({fingerprint({"own": w, "i": i}): make_table(100 * w + i) for w in range(4) for i in range(N_OWN)})
        return out

    def worker(root, w, barrier):
        cache = Cache(root)  # with fsync, as in real use
        shared = [(fingerprint({"shared": i}), make_table(i)) for i in range(N_SHARED)]
        own = [(fingerprint({"own": w, "i": i}), make_table(100 * w + i)) for i in range(N_OWN)]
        if w % 2:
            shared.reverse()
        barrier.wait(timeout=60)
        for key, tbl in shared + own:
            cache.put_table(key, tbl)
            cache.put_json(key, {"value": key})
        for key, tbl in shared + own:
            got = cache.get_table(key)
            assert got is not None and getattr(got, "arrow", got).equals(tbl)
    """
)


def test_concurrent_writers(tmp_path, monkeypatch):
    import importlib

    moddir = tmp_path / "mod"
    moddir.mkdir()
    (moddir / "_bioanon_cache_test_worker.py").write_text(WORKER_MODULE)
    monkeypatch.syspath_prepend(str(moddir))  # spawned children get the parent's sys.path
    mod = importlib.import_module("_bioanon_cache_test_worker")

    root = str(tmp_path / "shared-cache")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=mod.worker, args=(root, w, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]

    cache = Cache(root)
    expected = mod.expected()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no entry may be corrupt
        for key, tbl in expected.items():
            got = cache.get_table(key)
            assert got is not None and arrow_of(got).equals(tbl, check_metadata=True)
            assert cache.get_json(key) == {"value": key}
    info = cache.info()
    assert (info.n_tables, info.n_json, info.n_temp, info.n_corrupt) == (len(expected), len(expected), 0, 0)
    leftovers = [p for p in pathlib.Path(root).rglob("*") if ".tmp-" in p.name]
    assert leftovers == []
    sys.modules.pop("_bioanon_cache_test_worker", None)


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from bioanon.cache import Cache
    cache = Cache(sys.argv[1])
    def write(sink):
        sink.write(b"ARROW1" + b"\\0" * 1000)  # half a file ...
        sink.flush()
        os._exit(9)  # ... and the process dies
    cache._atomic_write(cache.table_path(sys.argv[2]), write)
    """
)


def test_killed_writer_leaves_only_temp_file(tmp_path):
    root = str(tmp_path / "c")
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, root, KEY], timeout=60)
    assert proc.returncode == 9
    cache = Cache(root, fsync=False)
    temps = list(pathlib.Path(root).rglob("*.tmp-*"))
    assert len(temps) == 1 and temps[0].stat().st_size > 0
    assert not cache.has_table(KEY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get_table(KEY) is None  # a temp file is never read as an entry
    assert cache.info().n_temp == 1 and cache.info().n_tables == 0
    # a rerun resumes: the entry gets written normally
    cache.put_table(KEY, make_table(1))
    assert arrow_of(cache.get_table(KEY)).equals(make_table(1))
    assert cache.clear(older_than_days=1) == 0  # nothing is old yet
    assert cache.clear() == 2  # the entry and the stale temp file
    assert list(pathlib.Path(root).rglob("*.tmp-*")) == []


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "bad_offsets"])
def test_corrupt_table_is_a_miss_and_moved_aside(cache, damage):
    t = make_table(7, n=200)
    if damage == "bad_offsets":  # footer intact, a string offset out of bounds: only full validation sees it
        t = pa.table({"s": ["x" * 1000, "y" * 1000, "z" * 1000]})
    path = pathlib.Path(cache.put_table(KEY, t))
    data = path.read_bytes()
    if damage == "bad_offsets":
        offsets = np.array([0, 1000, 2000, 3000], "<i4").tobytes()
        assert data.count(offsets) == 1
        path.write_bytes(data.replace(offsets, np.array([0, 1000, 2000, 2**30], "<i4").tobytes()))
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(data[:8] + os.urandom(len(data) - 8))
    with pytest.warns(CacheWarning, match="unreadable"):
        assert cache.get_table(KEY) is None
    assert not path.exists()
    assert path.with_name(path.name + ".corrupt").exists()
    assert not cache.has_table(KEY)
    assert cache.info().n_corrupt == 1
    # recomputed and stored again
    calls = []
    got = cache.get_or_compute_table(KEY, lambda: calls.append(1) or t)
    assert calls == [1] and arrow_of(got).equals(t)
    assert arrow_of(cache.get_table(KEY)).equals(t)


def test_corrupt_json_is_a_miss_and_moved_aside(cache):
    key = "ef" * 16
    path = pathlib.Path(cache.put_json(key, {"a": 1}))
    path.write_bytes(b'{"a": ')
    with pytest.warns(CacheWarning, match="unreadable"):
        assert cache.get_json(key, default="miss") == "miss"
    assert path.with_name(path.name + ".corrupt").exists() and not path.exists()
    assert cache.get_or_compute_json(key, lambda: {"a": 2}) == {"a": 2}
    assert cache.get_json(key) == {"a": 2}


# ----------------------------------------------------------------------------------------- info / clear


def test_info_and_clear(cache):
    assert cache.info() == CacheInfo(cache.uri, 0, 0, 0, 0, 0)
    keys = [fingerprint({"i": i}) for i in range(5)]
    for k in keys[:3]:
        cache.put_table(k, make_table(1))
    for k in keys:
        cache.put_json(k, [k])
    info = cache.info()
    assert (info.n_tables, info.n_json, info.n_temp, info.n_corrupt) == (3, 5, 0, 0)
    on_disk = sum(
        p.stat().st_size for p in pathlib.Path(cache.root).rglob("*") if p.is_file() and p.name != "CACHEDIR.TAG"
    )
    assert info.total_bytes == on_disk > 0
    assert "3 tables" in str(info) and "5 JSON" in str(info)
    # unknown files are neither counted as entries nor removed
    stray = pathlib.Path(cache.root) / "tables" / "notes.txt"
    stray.write_text("keep me")
    # age-based clearing: make two entries old
    old = time.time() - 10 * 86400
    for p in (cache.table_path(keys[0]), cache.json_path(keys[4])):
        os.utime(p, (old, old))
    assert cache.clear(older_than_days=5) == 2
    assert not cache.has_table(keys[0]) and cache.has_table(keys[1]) and not cache.has_json(keys[4])
    assert cache.info().n_tables == 2 and cache.info().n_json == 4
    assert cache.clear() == 6
    assert cache.info().n_tables == cache.info().n_json == 0
    assert stray.exists()
    with pytest.raises(CacheError):
        cache.clear(older_than_days=-1)


def test_reading_an_entry_refreshes_its_age(cache):
    cache.put_table(KEY, make_table())
    old = time.time() - 10 * 86400
    os.utime(cache.table_path(KEY), (old, old))
    assert cache.get_table(KEY) is not None  # used now
    assert cache.clear(older_than_days=5) == 0


def test_cachedir_tag_written(cache):
    cache.put_json(KEY, 1)
    tag = pathlib.Path(cache.root) / "CACHEDIR.TAG"
    assert tag.read_bytes().startswith(b"Signature: 8a477f597d28d172789f06886806bc55")


def test_format_bytes():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"


# ----------------------------------------------------------------------------------------- roots / config


def test_env_var_sets_default_root(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOANON_CACHE", str(tmp_path / "from-env"))
    cache = Cache()
    assert cache.root == str(tmp_path / "from-env")
    assert cache.uri == (tmp_path / "from-env").as_uri()
    cache.put_json(KEY, {"x": 1})
    assert (tmp_path / "from-env" / "json" / "01" / f"{KEY}.json").is_file()


def test_default_root_is_user_cache_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv("BIOANON_CACHE", raising=False)
    assert Cache().root == os.path.abspath(platformdirs.user_cache_dir("bioanon"))


def test_uri_root(tmp_path):
    import pyarrow.fs as pafs

    cache = Cache((tmp_path / "u").as_uri(), fsync=False)
    assert isinstance(cache.fs, pafs.LocalFileSystem)
    assert cache.root == str(tmp_path / "u")
    cache.put_table(KEY, make_table())
    assert Cache(tmp_path / "u").has_table(KEY)


def test_non_local_filesystem_code_path(tmp_path):
    """The generic pyarrow.fs path (used for object stores), exercised through a SubTreeFileSystem."""
    import pyarrow.fs as pafs

    (tmp_path / "sub").mkdir()
    cache = Cache.__new__(Cache)
    cache._init(pafs.SubTreeFileSystem(str(tmp_path / "sub"), pafs.LocalFileSystem()), "root", "sub://root", True)
    t = make_table(8)
    cache.put_table(KEY, t)
    cache.put_json(KEY, {"a": [1]})
    assert cache.has_table(KEY) and cache.has_json(KEY)
    assert arrow_of(cache.get_table(KEY)).equals(t, check_metadata=True)
    assert cache.get_json(KEY) == {"a": [1]}
    assert (tmp_path / "sub" / "root" / "tables" / "01" / f"{KEY}.arrow").is_file()
    assert cache.info().n_tables == 1 and cache.info().n_temp == 0
    (tmp_path / "sub" / "root" / "tables" / "01" / f"{KEY}.arrow").write_bytes(b"junk")
    with pytest.warns(CacheWarning):
        assert cache.get_table(KEY) is None
    assert cache.info().n_corrupt == 1
    assert cache.clear() == 2  # the moved-aside table and the JSON entry


def test_cache_pickles(cache):
    cache.put_json(KEY, 5)
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.root == cache.root and clone.uri == cache.uri
    assert clone.get_json(KEY) == 5
    assert clone.stats == {"hits": 1, "misses": 0, "writes": 0}
