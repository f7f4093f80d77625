"""Sample tables to and from pandas, Hugging Face datasets and torch, and the ``any.hf`` source (issue 20 item 1).

Everything is created locally: nothing is downloaded."""

from __future__ import annotations

import io
import pickle
import sys

import numpy as np
import pyarrow as pa
import pytest
from freshimports import modules_after

import bioanon
from bioanon.errors import TableError
from bioanon.table import SampleTable


def _table(n_per=3, subjects=("ann", "bob", "cy", "dee")) -> SampleTable:
    """Every payload kind, attributes of several types with nulls, a sample_rate and a lineage."""
    rng = np.random.default_rng(0)
    n = n_per * len(subjects)
    subject = np.repeat(np.array(subjects), n_per)
    age = pa.array([None if i == 1 else 20 + i for i in range(n)], type=pa.int32())
    return SampleTable.from_arrays(
        subject=subject,
        sample_id=[f"x{i:02d}" for i in range(n)],
        payloads={
            "features": rng.standard_normal((n, 5)).astype(np.float32),
            "image": rng.integers(0, 256, (n, 6, 4, 3), dtype=np.uint8),
            "imu": rng.standard_normal((n, 7, 2)).astype(np.float32),
            "pose": rng.standard_normal((n, 2, 3, 3)).astype(np.float32),
            "audio": [rng.standard_normal(int(k)).astype(np.float32) for k in rng.integers(3, 20, n)],
        },
        attributes={
            "age": age,
            "sex": [None if i == 2 else "FM"[i % 2] for i in range(n)],
            "height": np.linspace(1.5, 2.0, n).astype(np.float32),
            "left": np.arange(n) % 3 == 0,
        },
        metadata={
            "trait": "any",
            "sample_rate": 16000,
            "lineage": [{"step": "any.gaussian_noise", "fingerprint": "abc", "params": {"sigma": 0.5}}],
        },
    )


def _same(a: SampleTable, b: SampleTable) -> None:
    assert b.schema.equals(a.schema, check_metadata=True), f"{b.schema}\n!=\n{a.schema}"
    assert b.arrow.equals(a.arrow)
    assert b.metadata == a.metadata and b.lineage == a.lineage


def test_importing_bioanon_does_not_import_datasets_torch_or_the_interop_module():
    loaded = modules_after("import bioanon, bioanon.table\nbioanon.get_registry().get('any.hf')")
    assert not {"datasets", "torch", "bioanon.interop"} & loaded


# ---------------------------------------------------------------------------------------------------- pandas
def test_pandas_round_trip_keeps_everything_and_payload_cells_are_views():
    t = _table()
    df = t.to_pandas()
    assert list(df.columns) == t.schema.names
    assert df["subject"].tolist() == t.subjects.tolist() and df["attr.sex"].isna().sum() == 1
    feats = t.payload("features")
    cell = df["features"].iloc[2]
    assert cell.dtype == np.float32 and np.shares_memory(cell, feats) and not cell.flags.writeable
    assert np.shares_memory(df["image"].iloc[0], t.payload("image")) and df["image"].iloc[0].shape == (6, 4, 3)
    assert np.shares_memory(df["audio"].iloc[1], t.payload("audio")[1])
    assert df.attrs["bioanon"] == t.metadata
    back = SampleTable.from_pandas(df)
    _same(t, back)
    assert back.arrow.column("attr.age").null_count == 1  # int with a null: float64 in pandas, int32 again
    # a filtered frame comes back as the same rows
    sub = SampleTable.from_pandas(df[df["subject"] == "bob"])
    _same(t.select_subjects(["bob"]), sub)
    _same(t, SampleTable.from_pandas(df.set_index("sample_id")))  # the ids as the index


def test_from_pandas_reads_a_plain_frame():
    import pandas as pd

    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "speaker": ["a", "a", "b", "b"],
            "age": [30, 30, 41, 41],
            "features": [rng.standard_normal(3) for _ in range(4)],  # float64 lists: cast to float32
            "audio": [rng.standard_normal(k).astype(np.float32) for k in (5, 6, 7, 8)],
        }
    )
    t = SampleTable.from_pandas(df, metadata={"sample_rate": 8000})
    assert t.subjects.tolist() == ["a", "a", "b", "b"] and t.attribute_names == ["age"]
    assert t.sample_ids.tolist() == ["0", "1", "2", "3"]
    assert t.payload("features").dtype == np.float32 and t.payload_shape("features") == (3,)
    assert [len(a) for a in t.payload("audio")] == [5, 6, 7, 8] and t.metadata == {"sample_rate": 8000}
    with pytest.raises(TableError, match="pass subject=<column>"):
        SampleTable.from_pandas(df.drop(columns=["speaker"]))
    df.loc[1, "audio"] = None
    with pytest.raises(TableError, match="payload column 'audio' has 1 cells that are not arrays"):
        SampleTable.from_pandas(df, metadata={"sample_rate": 8000})


# -------------------------------------------------------------------------------------------------- datasets
def _hf_flat(ds, name: str) -> np.ndarray:
    """The values buffer of a datasets column, as numpy (no copy)."""
    arr = ds.data.table.column(name).chunk(0)
    while not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        arr = arr.storage if isinstance(arr.type, pa.ExtensionType) else arr.flatten()
    return arr.to_numpy(zero_copy_only=True)


def test_datasets_round_trip_in_memory_and_on_disk_shares_the_payloads(tmp_path):
    datasets = pytest.importorskip("datasets")
    t = _table()
    ds = t.to_hf()
    f = ds.features
    assert isinstance(f["image"], datasets.Array3D) and f["image"].shape == (6, 4, 3) and f["image"].dtype == "uint8"
    assert isinstance(f["imu"], datasets.Array2D) and isinstance(f["pose"], datasets.Array3D)
    assert ds.data.table.schema.field("features").type == pa.list_(pa.float32(), 5)  # fixed-length sequence
    assert ds.data.table.schema.field("audio").type == pa.list_(pa.float32())
    assert f["attr.age"].dtype == "int32" and f["subject"].dtype == "string"
    for name in ("features", "image", "imu", "pose", "audio"):
        flat = _hf_flat(ds, name)
        mine = t.payload(name)
        assert np.shares_memory(flat, mine if isinstance(mine, np.ndarray) else mine[0]), name
    np.testing.assert_array_equal(np.asarray(ds[3]["image"], dtype=np.uint8), t.payload("image")[3])
    _same(t, SampleTable.from_hf(ds))

    ds.save_to_disk(str(tmp_path / "hf"))
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    back = SampleTable.from_hf(loaded)
    _same(t, back)
    for name in ("features", "image", "pose"):  # views of the memory-mapped files
        assert np.shares_memory(back.payload(name), _hf_flat(loaded, name)), name
    assert not back.payload("image").flags.writeable
    _same(t, SampleTable.from_hf(tmp_path / "hf"))  # a path works too
    # a selection with an indices mapping is gathered
    picked = loaded.select([5, 0, 7])
    _same(t.take([5, 0, 7]), SampleTable.from_hf(picked))


def test_from_hf_reads_image_audio_and_classlabel_columns_and_renames():
    datasets = pytest.importorskip("datasets")
    from PIL import Image
    from scipy.io import wavfile

    rng = np.random.default_rng(2)
    imgs = [rng.integers(0, 256, (5, 4, 3), dtype=np.uint8) for _ in range(4)]
    greys = [rng.integers(0, 256, (3, 2), dtype=np.uint8) for _ in range(4)]
    sounds = [rng.uniform(-1, 1, k).astype(np.float32) for k in (50, 60, 70, 80)]

    def png(x):
        buf = io.BytesIO()
        Image.fromarray(x).save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": None}

    def wav(x):
        buf = io.BytesIO()
        wavfile.write(buf, 8000, x)
        return {"bytes": buf.getvalue(), "path": None}

    features = datasets.Features(
        {
            "speaker_id": datasets.ClassLabel(names=["p", "q"]),
            "img": datasets.Image(),
            "grey": datasets.Image(),
            "speech": datasets.Audio(),
            "emb": datasets.Sequence(datasets.Value("float64"), length=3),
            "lang": datasets.Value("string"),
            "tags": datasets.Sequence(datasets.Value("string")),
        }
    )
    columns = {
        "speaker_id": [0, 1, 0, 1],
        "img": [png(x) for x in imgs],
        "grey": [png(x) for x in greys],
        "speech": [wav(x) for x in sounds],
        "emb": rng.standard_normal((4, 3)).tolist(),
        "lang": ["en", "de", "en", "fr"],
        "tags": [["a"], [], ["b"], ["c"]],
    }
    # the Arrow storage as datasets writes it (its Audio encoder would need torchcodec, not needed to read)
    arrow = pa.table({k: pa.array(v, type=features.arrow_schema.field(k).type) for k, v in columns.items()})
    ds = datasets.Dataset(arrow, info=datasets.DatasetInfo(features=features))
    t = SampleTable.from_hf(ds, payloads=["img:image", "speech:audio", "grey", "emb:features"])
    assert t.subjects.tolist() == ["p", "q", "p", "q"]  # ClassLabel names, the column found by name
    np.testing.assert_array_equal(t.payload("image"), np.stack(imgs))
    assert t.payload_shape("grey") == (3, 2, 1) and t.payload("grey")[2, :, :, 0].tolist() == greys[2].tolist()
    for got, want in zip(t.payload("audio"), sounds, strict=True):
        np.testing.assert_array_equal(got, want)
    assert t.metadata["sample_rate"] == 8000
    np.testing.assert_allclose(t.payload("features"), np.array(columns["emb"]), rtol=1e-6)
    assert t.payload("features").dtype == np.float32  # a well-known payload in its dtype (PAYLOAD_SPECS)
    own = SampleTable.from_hf(ds, payloads=["emb"], attributes=["lang:language"])
    assert own.payload("emb").dtype == np.float64 and own.payload_shape("emb") == (3,)  # other names keep it
    assert np.shares_memory(own.payload("emb"), _hf_flat(ds, "emb")) and own.attribute_names == ["language"]
    assert t.attribute_names == ["lang"]  # the list-of-strings column is no attribute and left out
    with pytest.raises(TableError, match="'tags'.*cannot be a payload"):
        SampleTable.from_hf(ds, payloads=["tags"])
    with pytest.raises(TableError, match="no payload column"):
        SampleTable.from_hf(ds, payloads=["nope"])


def test_from_hf_chooses_a_split_and_says_which_exist():
    datasets = pytest.importorskip("datasets")
    t = _table()
    dd = datasets.DatasetDict({"train": t.take(range(6)).to_hf(), "test": t.take(range(6, 12)).to_hf()})
    _same(t.take(range(6, 12)), SampleTable.from_hf(dd, split="test"))
    with pytest.raises(TableError, match=r"splits \['train', 'test'\]; choose one with split="):
        SampleTable.from_hf(dd)
    with pytest.raises(TableError, match="no split 'valid'"):
        SampleTable.from_hf(dd, split="valid")


def test_hf_source_evaluates_a_saved_datasetdict_without_conversion(tmp_path):
    pytest.importorskip("datasets")
    import datasets

    table = bioanon.load_dataset("any.synthetic", n_subjects=24, samples_per_subject=8, dim=16, seed=5)
    ds = table.to_hf().rename_column("subject", "speaker")
    ds = ds.remove_columns(["sample_id"])  # row numbers become the ids
    dd = datasets.DatasetDict({"train": ds.select(range(10)), "test": ds})
    dd.save_to_disk(str(tmp_path / "voices"))
    loaded = bioanon.load_dataset("any.hf", tmp_path / "voices", split="test")
    np.testing.assert_array_equal(loaded.payload("features"), table.payload("features"))
    assert loaded.subjects.tolist() == table.subjects.tolist() and loaded.attribute_names == table.attribute_names
    cfg = {
        "dataset": {"source": "any.hf", "path": str(tmp_path / "voices"), "params": {"split": "test"}},
        "anonymizers": [{"id": "any.identity"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "selection": {"selectors": ["any.select_random"], "subject_counts": [8], "random_draws": 1},
        "report": {"bootstrap": 20},
    }
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "cache", progress=False)
    top1 = r.metrics[(r.metrics.metric == "top1") & (r.metrics.scenario == "clear")].value.mean()
    assert top1 > 0.5  # identifiable (chance 1/8): the data set was read as it is
    with pytest.raises(TableError, match="choose one with split="):
        bioanon.load_dataset("any.hf", tmp_path / "voices")
    with pytest.raises(TableError, match="not a folder written by datasets' save_to_disk"):
        bioanon.load_dataset("any.hf", tmp_path / "missing")


def test_missing_datasets_or_torch_says_what_to_install(monkeypatch):
    import bioanon.interop as interop

    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'bioanon\[hf\]'"):
        _table().to_hf()
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(interop, "_DATASET_CLASS", [])
    with pytest.raises(ImportError, match=r"pip install 'bioanon\[torch\]'"):
        _table().to_torch("features")


# ----------------------------------------------------------------------------------------------------- torch
def test_torch_dataset_items_share_the_table_memory_and_labels_are_classes():
    torch = pytest.importorskip("torch")
    t = _table()
    ds = t.to_torch("features")
    assert isinstance(ds, torch.utils.data.Dataset) and len(ds) == t.num_rows
    x, y = ds[4]
    assert x.dtype == torch.float32 and x.shape == (5,) and y.dtype == torch.int64
    assert ds.classes == ["ann", "bob", "cy", "dee"] and ds.classes[int(y)] == t.subjects[4]
    assert np.shares_memory(x.numpy(), t.payload("features"))
    assert not np.shares_memory(t.to_torch("features", copy=True)[4][0].numpy(), t.payload("features"))
    np.testing.assert_array_equal(ds[-1][0].numpy(), t.payload("features")[-1])
    with pytest.raises(IndexError):
        ds[t.num_rows]
    xb, yb = next(iter(torch.utils.data.DataLoader(ds, batch_size=5)))
    assert xb.shape == (5, 5) and yb.tolist() == [0, 0, 0, 1, 1]
    # several payloads, a numeric attribute label, audio of varying length, no label, a transform
    both = t.to_torch(["image", "audio"], label="height")
    (img, aud), h = both[7]
    assert img.shape == (6, 4, 3) and img.dtype == torch.uint8 and both.classes is None
    np.testing.assert_array_equal(aud.numpy(), t.payload("audio")[7])
    assert np.shares_memory(aud.numpy(), t.payload("audio")[7]) and float(h) == pytest.approx(t.attribute("height")[7])
    assert t.to_torch("imu", label=None, transform=lambda v: v * 2)[1].shape == (7, 2)
    assert t.to_torch("imu", label="attr.left").classes == [False, True]
    assert pickle.loads(pickle.dumps(ds))[4][1] == y  # picklable for DataLoader workers
    with pytest.raises(TableError, match="choose with payload="):
        t.to_torch()
    with pytest.raises(TableError, match="label 'sex' has 1 missing values"):
        t.to_torch("features", label="sex")
    with pytest.raises(TableError, match="no label column 'colour'"):
        t.to_torch("features", label="colour")
