"""Tests of bioanon.table.SampleTable (construction, access, validation, I/O, selection)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest

import bioanon.table as table_mod
import bioanon.table_io as table_io
from bioanon.errors import TableError
from bioanon.table import SampleTable

RNG = np.random.default_rng(1234)
N = 6
SUBJECTS = ["a", "a", "b", "b", "c", "c"]


def make_table(**extra_meta) -> SampleTable:
    rng = np.random.default_rng(7)
    return SampleTable.from_arrays(
        subject=SUBJECTS,
        payloads={
            "image": rng.integers(0, 256, (N, 4, 5, 3), dtype=np.uint8),
            "pose": rng.standard_normal((N, 7, 4, 3), dtype=np.float32),
            "imu": rng.standard_normal((N, 10, 6), dtype=np.float32),
            "features": rng.standard_normal((N, 8), dtype=np.float32),
            "audio": [rng.standard_normal(n).astype(np.float32) for n in (3, 1, 4, 1, 5, 9)],
        },
        attributes={
            "age": [30, 31, None, 40, 41, 42],
            "gender": ["f", "f", "m", "m", None, "f"],
            "score": np.linspace(0, 1, N),
            "left": np.array([True, False] * 3),
        },
        metadata={
            "trait": "multi",
            "sample_rate": 16000,
            "joints": ["a", "b", "c", "d"],
            "lineage": [{"step": "load", "fingerprint": "abc"}],
            **extra_meta,
        },
    )


def arrow_of(t: SampleTable, **replace) -> pa.Table:
    """The table's Arrow table with some columns replaced (by name) — for building malformed tables."""
    a = t.arrow
    for name, col in replace.items():
        i = a.schema.get_field_index(name)
        a = a.set_column(i, name, col) if i >= 0 else a.append_column(name, col)
    return a


# ------------------------------------------------------------------------------------------------- construction
def test_from_arrays_each_payload_kind():
    t = make_table()
    assert len(t) == t.num_rows == N
    assert t.payload_names == ["image", "pose", "imu", "features", "audio"]
    assert t.attribute_names == ["age", "gender", "score", "left"]
    assert t.sample_ids.tolist() == ["0", "1", "2", "3", "4", "5"]
    assert t.subjects.tolist() == SUBJECTS
    assert t.subject_names == ["a", "b", "c"] and t.num_subjects == 3
    img = t.payload("image")
    assert img.dtype == np.uint8 and img.shape == (N, 4, 5, 3)
    assert t.payload("pose").shape == (N, 7, 4, 3) and t.payload("pose").dtype == np.float32
    assert t.payload("imu").shape == (N, 10, 6)
    assert t.payload("features").shape == (N, 8)
    audio = t.payload("audio")
    assert [a.size for a in audio] == [3, 1, 4, 1, 5, 9] and all(a.dtype == np.float32 for a in audio)
    assert t.payload_shape("image") == (4, 5, 3) and t.payload_shape("audio") == (None,)
    assert isinstance(t.schema.field("image").type, pa.FixedShapeTensorType)
    assert t.schema.field("audio").type == pa.list_(pa.float32())
    assert np.isnan(t.attribute("age")[2]) and t.attribute("gender")[4] is None
    assert t.metadata["trait"] == "multi"
    r = repr(t)
    assert "6 rows" in r and "3 subjects" in r and "image uint8[4, 5, 3]" in r and "age" in r


def test_from_arrays_values_roundtrip_exactly():
    rng = np.random.default_rng(3)
    pose = rng.standard_normal((5, 2, 3, 3)).astype(np.float32)
    audio = [rng.standard_normal(k).astype(np.float32) for k in (2, 0, 7, 1, 3)]
    t = SampleTable.from_arrays(
        subject=np.array([1, 1, 2, 2, 3]),
        payloads={"pose": pose, "audio": audio},
        sample_id=[f"s{i}" for i in range(5)],
        metadata={"sample_rate": 8000},
    )
    np.testing.assert_array_equal(t.payload("pose"), pose)
    for got, want in zip(t.payload("audio"), audio, strict=True):
        np.testing.assert_array_equal(got, want)
    assert t.subjects.tolist() == ["1", "1", "2", "2", "3"]
    assert t.sample_ids.tolist() == ["s0", "s1", "s2", "s3", "s4"]


def test_default_sample_ids_are_zero_padded():
    t = SampleTable.from_arrays(subject="x", payloads={"features": np.zeros((12, 2), np.float32)})
    assert t.sample_ids.tolist()[:3] == ["00", "01", "02"] and t.sample_ids[-1] == "11"
    assert t.subjects.tolist() == ["x"] * 12


def test_from_arrays_length_mismatch():
    with pytest.raises(TableError, match="payload 'features' has 3 samples, expected 2"):
        SampleTable.from_arrays(subject=["a", "b"], payloads={"features": np.zeros((3, 2), np.float32)})
    with pytest.raises(TableError, match="attribute 'attr.age' has 1 values, expected 2"):
        SampleTable.from_arrays(
            subject=["a", "b"], payloads={"features": np.zeros((2, 2), np.float32)}, attributes={"age": [1]}
        )


def test_from_arrow_and_record_batch():
    t = make_table()
    u = SampleTable.from_arrow(t.arrow)
    assert u.arrow.equals(t.arrow)
    rb = t.arrow.to_batches()[0]
    v = SampleTable.from_arrow(rb)
    assert v.arrow.equals(t.arrow) and v.metadata == t.metadata


def test_payload_is_zero_copy_for_single_chunk():
    t = make_table()
    for name in ("image", "pose", "features"):
        a, b = t.payload(name), t.payload(name)
        assert np.shares_memory(a, b)
        buf = t.arrow.column(name).chunk(0).storage.values.buffers()[1]
        assert np.shares_memory(a, np.frombuffer(buf, dtype=a.dtype))
        assert not a.flags.writeable
    aud1, aud2 = t.payload("audio"), t.payload("audio")
    assert all(np.shares_memory(x, y) for x, y in zip(aud1, aud2, strict=True) if x.size)


def test_payload_of_slice_is_zero_copy_and_correct():
    t = make_table()
    full = t.payload("pose")
    part = next(t.iter_batches(4)).payload("pose")
    sl = SampleTable(t.arrow.slice(2, 3), validate=False)
    np.testing.assert_array_equal(sl.payload("pose"), full[2:5])
    assert np.shares_memory(sl.payload("pose"), full) and np.shares_memory(part, full)
    audio = t.payload("audio")
    for got, want in zip(sl.payload("audio"), audio[2:5], strict=True):
        np.testing.assert_array_equal(got, want)


def test_payload_multi_chunk_is_combined():
    t = make_table()
    c = SampleTable.concat([t.take([0, 1]), t.take([2, 3, 4, 5])])
    assert c.arrow.column("pose").num_chunks == 2
    np.testing.assert_array_equal(c.payload("pose"), t.payload("pose"))
    assert [a.size for a in c.payload("audio")] == [3, 1, 4, 1, 5, 9]


def test_missing_payload_and_attribute_messages():
    t = make_table()
    with pytest.raises(TableError, match=r"no attribute column 'attr.height'; available: \['age'"):
        t.attribute("height")
    with pytest.raises(TableError, match=r"no payload column 'video'; available: \['image'"):
        t.payload("video")
    with pytest.raises(TableError, match="no payload column 'attr.age'"):
        t.payload_shape("attr.age")


# --------------------------------------------------------------------------------------------------- validation
def test_missing_required_columns():
    t = make_table()
    with pytest.raises(TableError, match="missing required column 'sample_id'"):
        SampleTable(t.arrow.drop_columns(["sample_id"]))
    with pytest.raises(TableError, match="missing required column 'subject'"):
        SampleTable(t.arrow.drop_columns(["subject"]))


def test_duplicate_sample_id():
    t = make_table()
    bad = arrow_of(t, sample_id=pa.array(["x", "y", "x", "z", "y", "w"]))
    with pytest.raises(TableError, match=r"'sample_id' has 2 duplicate ids: \['x', 'y'\]"):
        SampleTable(bad)


def test_null_sample_id_and_subject():
    t = make_table()
    with pytest.raises(TableError, match=r"'sample_id' has 1 null values at rows \[3\]"):
        SampleTable(arrow_of(t, sample_id=pa.array(["0", "1", "2", None, "4", "5"])))
    with pytest.raises(TableError, match=r"'subject' has 2 null values at samples \['1', '4'\]"):
        SampleTable(arrow_of(t, subject=pa.array(["a", None, "b", "b", None, "c"])))


def test_wrong_payload_arrow_type():
    t = make_table()
    flat = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(N * 8, np.float32)), 8)
    with pytest.raises(TableError, match="payload column 'features' has wrong Arrow type"):
        SampleTable(arrow_of(t, features=flat))
    with pytest.raises(TableError, match="payload column 'image' has wrong Arrow type list<float32>"):
        SampleTable(arrow_of(t, image=pa.array([[1.0]] * N, type=pa.list_(pa.float32()))))
    with pytest.raises(TableError, match="column 'label' of type int64 is neither"):
        SampleTable(arrow_of(t, label=pa.array(range(N))))
    with pytest.raises(TableError, match="attribute column 'attr.tags' must be a scalar type"):
        SampleTable(arrow_of(t, **{"attr.tags": pa.array([[1]] * N)}))


def test_payload_spec_dtype_and_shape():
    with pytest.raises(TableError, match=r"'pose' has dtype float64, expected float32"):
        SampleTable.from_arrays(subject=["a"], payloads={"pose": np.zeros((1, 5, 4, 3))})
    with pytest.raises(TableError, match=r"'pose' has per-sample shape \(5, 4, 2\), expected \(\*, \*, 3\)"):
        SampleTable.from_arrays(subject=["a"], payloads={"pose": np.zeros((1, 5, 4, 2), np.float32)})
    with pytest.raises(TableError, match=r"'image' has dtype float32, expected uint8"):
        SampleTable.from_arrays(subject=["a"], payloads={"image": np.zeros((1, 2, 2, 3), np.float32)})
    with pytest.raises(TableError, match=r"'imu' has per-sample shape \(5,\), expected \(\*, \*\)"):
        SampleTable.from_arrays(subject=["a"], payloads={"imu": np.zeros((1, 5), np.float32)})
    # an unknown payload name takes any fixed shape / dtype
    t = SampleTable.from_arrays(subject=["a"], payloads={"depth": np.zeros((1, 5, 2), np.float64)})
    assert t.payload_names == ["depth"]


def test_nan_and_inf_in_float_payloads():
    pose = np.zeros((5, 2, 2, 3), np.float32)
    pose[1, 0, 1, 2] = np.nan
    pose[3, 1, 0, 0] = np.inf
    with pytest.raises(TableError, match=r"'pose' has NaN/inf values in 2 samples: \['s1', 's3'\]"):
        SampleTable.from_arrays(subject="a", sample_id=[f"s{i}" for i in range(5)], payloads={"pose": pose})
    audio = [np.ones(3, np.float32), np.array([1, -np.inf], np.float32), np.ones(2, np.float32)]
    with pytest.raises(TableError, match=r"'audio' has NaN/inf values in 1 samples: \['1'\]"):
        SampleTable.from_arrays(subject="a", payloads={"audio": audio}, metadata={"sample_rate": 1})
    # NaN in an attribute is fine
    SampleTable.from_arrays(
        subject="a", payloads={"features": np.zeros((2, 1), np.float32)}, attributes={"x": [np.nan, 1.0]}
    )


def test_nan_check_respects_slices():
    f = np.zeros((4, 2), np.float32)
    f[0, 0] = np.nan
    t = pa.table({"sample_id": list("wxyz"), "subject": ["a"] * 4, "features": table_mod._tensor_array(f, "f")})
    SampleTable(t.slice(1))  # the NaN row is outside the slice
    with pytest.raises(TableError, match=r"in 1 samples: \['w'\]"):
        SampleTable(pa.concat_tables([t.slice(1), t.slice(0, 1)]))


def test_null_payload_entry():
    t = make_table()
    feats = t.arrow.column("features").chunk(0)
    storage = feats.storage
    nulled = pa.FixedSizeListArray.from_arrays(storage.values, 8, mask=pa.array([False, True] + [False] * 4))
    col = pa.ExtensionArray.from_storage(feats.type, nulled)
    with pytest.raises(TableError, match=r"payload column 'features' has null entries at samples \['1'\]"):
        SampleTable(arrow_of(t, features=col))
    with pytest.raises(TableError, match=r"payload 'features' has 1 null entries"):
        SampleTable(arrow_of(t, features=col), validate=False).payload("features")


def test_audio_needs_sample_rate():
    audio = [np.ones(3, np.float32)]
    with pytest.raises(TableError, match="'audio' needs a sample rate"):
        SampleTable.from_arrays(subject="a", payloads={"audio": audio})
    t = SampleTable.from_arrays(subject="a", payloads={"audio": audio}, metadata={"sample_rate": 16000})
    with_col = t.arrow.replace_schema_metadata({}).append_column("sample_rate", pa.array([16000]))
    SampleTable(with_col)


def test_bad_metadata_and_lineage():
    t = make_table()
    with pytest.raises(TableError, match="not valid JSON"):
        SampleTable(t.arrow.replace_schema_metadata({b"bioanon": b"{nope"}))
    with pytest.raises(TableError, match="lineage step 0 must be a dict"):
        t.with_lineage_step({"step": "x"})
    with pytest.raises(TableError, match="JSON-serializable"):
        t.with_metadata(bad=object())


def test_validate_payload():
    t = make_table()
    t.validate_payload("pose", shape=(None, None, 3), dtype=np.float32)
    t.validate_payload("image", shape=(4, 5, 3), dtype="uint8")
    t.validate_payload("audio", shape=(None,), dtype=np.float32)
    with pytest.raises(TableError, match=r"'pose' has per-sample shape \(7, 4, 3\), expected \(\*, 25, 3\)"):
        t.validate_payload("pose", shape=(None, 25, 3))
    with pytest.raises(TableError, match=r"'image' has dtype uint8, expected float32"):
        t.validate_payload("image", dtype=np.float32)
    with pytest.raises(
        TableError,
        match=r"'audio': 4 samples do not have length 1, "
        r"e.g. \['0', '2', '4', '5'\] \(lengths \[3, 4, 5, 9\]\)",
    ):
        t.validate_payload("audio", shape=(1,))
    with pytest.raises(TableError, match="no payload column 'video'"):
        t.validate_payload("video")


def test_validate_is_vectorized_on_large_table():
    n = 200_000
    f = np.zeros((n, 4), np.float32)
    f[n - 1, 3] = np.nan
    with pytest.raises(TableError, match=f"in 1 samples: \\['{n - 1}'\\]"):
        SampleTable.from_arrays(subject=np.arange(n) % 100, payloads={"features": f})


# ------------------------------------------------------------------------------------------ metadata / columns
def test_metadata_is_a_copy_and_lineage():
    t = make_table()
    m = t.metadata
    m["trait"] = "changed"
    assert t.metadata["trait"] == "multi"
    u = t.with_metadata(trait="voice", rate=50)
    assert u.metadata["trait"] == "voice" and u.metadata["rate"] == 50 and t.metadata["trait"] == "multi"
    v = u.with_lineage_step({"step": "anon.mean", "fingerprint": "f00", "params": {"k": 3}})
    assert v.lineage == [
        {"step": "load", "fingerprint": "abc"},
        {"step": "anon.mean", "fingerprint": "f00", "params": {"k": 3}},
    ]
    assert u.lineage == [{"step": "load", "fingerprint": "abc"}]
    assert v.arrow.column("pose") is not None and v.arrow.column(2).chunk(0).equals(t.arrow.column(2).chunk(0))
    assert json.loads(v.schema.metadata[b"bioanon"])["lineage"][1]["step"] == "anon.mean"


def test_with_payload_and_attribute():
    t = make_table()
    new = np.ones((N, 8), np.float32)
    u = t.with_payload("features", new)
    assert u.payload_names == t.payload_names and u.sample_ids.tolist() == t.sample_ids.tolist()
    np.testing.assert_array_equal(u.payload("features"), new)
    v = t.with_payload("embedding", np.ones((N, 2, 2), np.float32), drop="audio")
    assert v.payload_names == ["image", "pose", "imu", "features", "embedding"]
    assert v.metadata == t.metadata
    with pytest.raises(TableError, match="payload 'features' has 5 samples, table has 6"):
        t.with_payload("features", np.ones((5, 8), np.float32))
    with pytest.raises(TableError, match="NaN/inf"):
        t.with_payload("features", np.full((N, 8), np.nan, np.float32))
    with pytest.raises(TableError, match="no payload column 'nope'"):
        t.with_payload("x", new, drop="nope")
    w = t.with_attribute("age", np.arange(N)).with_attribute("site", ["p"] * N)
    assert w.attribute("age").tolist() == list(range(N)) and w.attribute_names[-1] == "site"
    assert w.attribute_names.index("age") == 0
    with pytest.raises(TableError, match="has 2 values, expected 6"):
        t.with_attribute("age", [1, 2])


# ------------------------------------------------------------------------------------------------------- I/O
def test_save_load_roundtrip_is_memory_mapped(tmp_path):
    t = make_table()
    path = tmp_path / "t.arrow"
    t.save(path)
    before = pa.total_allocated_bytes()
    u = SampleTable.load(path)
    assert pa.total_allocated_bytes() - before < 1024  # buffers live in the mapped file, not the Arrow pool
    assert u.schema.equals(t.schema, check_metadata=True)
    assert u.arrow.equals(t.arrow)
    for name in t.payload_names:
        assert u.schema.field(name).type == t.schema.field(name).type
    assert isinstance(u.schema.field("pose").type, pa.FixedShapeTensorType)
    np.testing.assert_array_equal(u.payload("image"), t.payload("image"))
    assert u.payload("pose").dtype == np.float32 and u.payload_shape("pose") == (7, 4, 3)
    assert u.metadata == t.metadata and u.lineage == [{"step": "load", "fingerprint": "abc"}]
    for col in ("attr.age", "attr.gender", "attr.score", "attr.left"):
        assert u.arrow.column(col).type == t.arrow.column(col).type
    assert not u.payload("pose").flags.writeable
    v = SampleTable.load(path, memory_map=False, validate=True)
    assert v.arrow.equals(t.arrow)
    assert os.listdir(tmp_path) == ["t.arrow"]


def test_load_missing_or_corrupt_names_path(tmp_path):
    with pytest.raises(TableError, match="nope.arrow.*no such file"):
        SampleTable.load(tmp_path / "nope.arrow")
    garbage = tmp_path / "garbage.arrow"
    garbage.write_bytes(b"this is not arrow at all" * 10)
    with pytest.raises(TableError, match="garbage.arrow.*not a valid Arrow IPC file"):
        SampleTable.load(garbage)
    t = make_table()
    good = tmp_path / "good.arrow"
    t.save(good)
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        trunc = tmp_path / f"trunc{cut}.arrow"
        trunc.write_bytes(data[:cut])
        with pytest.raises(TableError, match=f"trunc{cut}.arrow"):
            SampleTable.load(trunc)
    empty = tmp_path / "empty.arrow"
    empty.write_bytes(b"")
    with pytest.raises(TableError, match="empty.arrow"):
        SampleTable.load(empty)


def test_load_rejects_non_sample_table(tmp_path):
    path = tmp_path / "other.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, pa.schema([("x", pa.int64())])) as w:
        w.write_table(pa.table({"x": [1, 2]}))
    with pytest.raises(TableError, match="other.arrow.*missing required column 'sample_id'"):
        SampleTable.load(path)


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "t.arrow"
    old = make_table()
    old.save(path)
    old_bytes = path.read_bytes()

    def broken_write(table, sink):
        sink.write(b"half-written garbage")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(table_io, "_write_ipc", broken_write)  # looked up there by SampleTable.save
    with pytest.raises(RuntimeError, match="disk on fire"):
        make_table().take([0]).save(path)
    assert path.read_bytes() == old_bytes
    assert os.listdir(tmp_path) == ["t.arrow"]  # no temp file left behind
    assert SampleTable.load(path).arrow.equals(old.arrow)
    monkeypatch.undo()
    new = old.take([1, 2])
    new.save(path)  # overwrite works
    assert SampleTable.load(path).sample_ids.tolist() == ["1", "2"]
    assert os.listdir(tmp_path) == ["t.arrow"]


def test_parquet_roundtrip(tmp_path):
    t = make_table()
    path = tmp_path / "t.parquet"
    t.to_parquet(path)
    assert os.listdir(tmp_path) == ["t.parquet"]
    u = SampleTable.from_parquet(path)
    assert u.schema.equals(t.schema, check_metadata=True)
    assert u.arrow.equals(t.arrow)
    assert u.metadata == t.metadata
    np.testing.assert_array_equal(u.payload("pose"), t.payload("pose"))
    for got, want in zip(u.payload("audio"), t.payload("audio"), strict=True):
        np.testing.assert_array_equal(got, want)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(TableError, match="bad.parquet"):
        SampleTable.from_parquet(bad)


# ------------------------------------------------------------------------------------------------- selection
def test_take_filter_select_subjects():
    t = make_table()
    u = t.take([4, 0, 2])
    assert u.sample_ids.tolist() == ["4", "0", "2"] and u.metadata == t.metadata
    np.testing.assert_array_equal(u.payload("pose"), t.payload("pose")[[4, 0, 2]])
    assert [a.size for a in u.payload("audio")] == [5, 3, 4]
    with pytest.raises(TableError, match="out of range"):
        t.take([0, 6])
    with pytest.raises(TableError, match="use filter"):
        t.take(np.ones(N, bool))
    mask = np.array([True, False, False, True, True, False])
    f = t.filter(mask)
    assert f.sample_ids.tolist() == ["0", "3", "4"] and f.metadata == t.metadata
    assert t.filter(pa.array(mask)).arrow.equals(f.arrow)
    with pytest.raises(TableError, match="mask has length 2"):
        t.filter(np.array([True, False]))
    with pytest.raises(TableError, match="boolean mask"):
        t.filter(np.arange(N))
    s = t.select_subjects(["c", "a"])
    assert s.sample_ids.tolist() == ["0", "1", "4", "5"] and s.subject_names == ["a", "c"]
    assert s.metadata == t.metadata
    with pytest.raises(TableError, match=r"unknown subjects \['zz'\]"):
        t.select_subjects(["a", "zz"])


def test_concat():
    t = make_table()
    a, b = t.take([0, 1, 2]), t.take([3, 4, 5])
    c = SampleTable.concat([a, b])
    assert c.arrow.equals(t.arrow) and c.metadata == t.metadata  # equal lineages -> unchanged
    with pytest.raises(TableError, match="sample ids occur in more than one table: \\['1'\\]"):
        SampleTable.concat([a, t.take([1, 5])])
    with pytest.raises(TableError, match="table 1 lacks column 'attr.age'"):
        SampleTable.concat([a, SampleTable(b.arrow.drop_columns(["attr.age"]))])
    with pytest.raises(TableError, match="column 'features' has type .* in table 1"):
        SampleTable.concat(
            [
                a,
                SampleTable(b.arrow.drop_columns(["features"]), validate=False).with_payload(
                    "features", np.zeros((3, 4), np.float32)
                ),
            ]
        )
    with pytest.raises(TableError, match="metadata 'trait' differs"):
        SampleTable.concat([a, b.with_metadata(trait="gait")])
    with pytest.raises(TableError, match="at least one table"):
        SampleTable.concat([])
    b2 = b.with_lineage_step({"step": "anon", "fingerprint": "zz"})
    m = SampleTable.concat([a, b2])
    assert m.lineage[:1] == a.lineage and m.lineage[-1]["step"] == "concat"
    assert m.lineage[-1]["inputs"] == [a.lineage, b2.lineage]
    # columns in a different order are aligned to the first table's order
    reordered = SampleTable(b.arrow.select(list(reversed(b.arrow.column_names))))
    assert SampleTable.concat([a, reordered]).arrow.equals(t.arrow)


def test_iter_batches():
    t = make_table()
    batches = list(t.iter_batches(4))
    assert [len(b) for b in batches] == [4, 2]
    assert SampleTable.concat(batches).arrow.equals(t.arrow)
    assert all(b.metadata == t.metadata for b in batches)
    assert np.shares_memory(batches[1].payload("imu"), t.payload("imu"))
    assert [len(b) for b in t.iter_batches()] == [N]
    with pytest.raises(TableError, match="batch_size"):
        list(t.iter_batches(0))


def test_splits_basic_and_errors():
    t = make_table()
    p0, p1 = t.split_subjects([0.5, 0.5], seed=0)
    assert len(p0) + len(p1) == N and not set(p0.subject_names) & set(p1.subject_names)
    assert p0.metadata == t.metadata
    with pytest.raises(TableError, match=r"split rates \[0.9, 0.1\] over 3 subjects leave part 1 empty"):
        t.split_subjects([0.9, 0.1], seed=0)
    with pytest.raises(TableError, match="rates"):
        t.split_subjects([0.5, 0.6], seed=0)
    with pytest.raises(TableError, match="rates"):
        t.split_subjects([], seed=0)
    with pytest.raises(TableError, match="rates"):
        t.split_subjects([1.5, -0.5], seed=0)
    e, q = t.split_within_subjects([0.5, 0.5], seed=0)
    assert e.subject_names == q.subject_names == ["a", "b", "c"] and len(e) == len(q) == 3
    with pytest.raises(TableError, match=r"min_per_part=1: 3 subjects have too few samples: 'a' \(2 samples\)"):
        t.split_within_subjects([0.4, 0.3, 0.3], seed=0)
    parts = t.split_within_subjects([0.4, 0.3, 0.3], seed=0, min_per_part=0)
    assert sum(len(p) for p in parts) == N


# ------------------------------------------------------------------------------------------------- streaming
def _multi_batch_file(path, n_batches=3, rows=50, dim=6):
    rng = np.random.default_rng(0)
    parts = [
        SampleTable.from_arrays(
            subject=np.char.add("s", (np.arange(rows) % 7).astype(str)),
            sample_id=np.char.add(f"b{b}-", np.arange(rows).astype(str)),
            payloads={"features": rng.standard_normal((rows, dim)).astype(np.float32)},
        )
        for b in range(n_batches)
    ]
    schema = parts[0].arrow.schema
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        for p in parts:
            w.write_table(p.arrow)
    return SampleTable.concat(parts)


def test_stream_yields_every_row_in_order_within_batch_size(tmp_path):
    full = _multi_batch_file(tmp_path / "t.arrow")
    batches = list(SampleTable.stream(tmp_path / "t.arrow", batch_size=20))
    assert all(b.num_rows <= 20 for b in batches) and len(batches) == 9  # 3 file batches × (20, 20, 10)
    got = np.concatenate([b.payload("features") for b in batches])
    np.testing.assert_array_equal(got, full.payload("features"))
    assert list(np.concatenate([b.sample_ids for b in batches])) == list(full.sample_ids)


def test_stream_views_stay_valid_after_their_pages_are_released(tmp_path):
    full = _multi_batch_file(tmp_path / "t.arrow", n_batches=4, rows=3000, dim=64)  # batches span many pages
    kept = [b.payload("features") for b in SampleTable.stream(tmp_path / "t.arrow")]
    np.testing.assert_array_equal(np.concatenate(kept), full.payload("features"))


def test_stream_bad_input_names_the_file(tmp_path):
    with pytest.raises(TableError, match="no such file"):
        next(SampleTable.stream(tmp_path / "missing.arrow"))
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"not arrow at all" * 10)
    with pytest.raises(TableError, match="bad.arrow"):
        next(SampleTable.stream(bad))
    with pytest.raises(TableError, match="batch_size"):
        next(SampleTable.stream(bad, batch_size=0))
