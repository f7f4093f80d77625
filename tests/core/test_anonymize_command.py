"""`bioanon anonymize`: chains of -m, the output format from the extension, and any.table reading it back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bioanon
from bioanon.errors import BioanonError
from bioanon.export import read_table, write_table
from bioanon.table import SampleTable


def _cli(*args, cwd=None):
    env = {**os.environ, "BIOANON_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "bioanon.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=cwd,
    )


SOURCE = ["anonymize", "any.synthetic", "-d", "n_subjects=12", "-d", "samples_per_subject=4"]


def test_several_methods_chain_in_the_order_given(tmp_path):
    out = _cli(
        *SOURCE,
        "-m",
        "any.gaussian_noise",
        "-o",
        "sigma=0.5",
        "-o",
        "seed=3",
        "-m",
        "any.block_permutation",
        "-o",
        "key=1",
        "--out",
        tmp_path / "anon.arrow",
    )
    assert out.returncode == 0, out.stderr
    assert "any.gaussian_noise → any.block_permutation" in out.stdout
    got = read_table(tmp_path / "anon.arrow")
    clear = bioanon.load_dataset("any.synthetic", n_subjects=12, samples_per_subject=4)
    want = bioanon.anonymize(
        clear,
        bioanon.get_method("any.gaussian_noise", sigma=0.5, seed=3),
        bioanon.get_method("any.block_permutation", key=1),
    )
    np.testing.assert_allclose(got.payload("features"), want.payload("features"), rtol=1e-6)
    assert got.lineage[-1]["step"] == "any.chain"  # several -m build one any.chain
    steps = got.lineage[-1]["params"]["steps"]
    assert [s["id"] for s in steps] == ["any.gaussian_noise", "any.block_permutation"]
    assert json.dumps(steps[0]["params"]["sigma"]) == "0.5"  # each -o went to the -m before it
    assert steps[1]["params"]["key"] == 1


def test_an_option_before_any_method_is_a_usage_error(tmp_path):
    out = _cli(*SOURCE, "-o", "sigma=0.5", "-m", "any.gaussian_noise", "--out", tmp_path / "x.arrow")
    assert out.returncode == 2 and "after the -m METHOD" in out.stderr


def test_output_format_follows_the_extension(tmp_path):
    for name in ("anon.parquet", "anon.csv"):
        out = _cli(*SOURCE, "-m", "any.gaussian_noise", "--out", tmp_path / name)
        assert out.returncode == 0, out.stderr
    parquet = read_table(tmp_path / "anon.parquet")
    csv = pd.read_csv(tmp_path / "anon.csv", dtype={"sample_id": str, "subject": str})
    feats = csv[[c for c in csv.columns if c.startswith("feature_")]].to_numpy(np.float32)
    np.testing.assert_allclose(feats, parquet.payload("features"), rtol=1e-6)
    assert list(csv.sample_id) == list(parquet.sample_ids) and "attr.group" in csv.columns
    bad = _cli(*SOURCE, "-m", "any.gaussian_noise", "--out", tmp_path / "anon.txt")
    assert bad.returncode == 2 and "unknown output format '.txt'" in bad.stderr
    assert not (tmp_path / "anon.txt").exists()


def test_anonymize_then_evaluate_round_trips_through_any_table(tmp_path):
    out = _cli(
        "anonymize",
        "any.synthetic",
        "-d",
        "n_subjects=30",
        "-m",
        "any.gaussian_noise",
        "-o",
        "sigma=0.3",
        "--out",
        tmp_path / "anon.arrow",
    )
    assert out.returncode == 0, out.stderr
    cfg = {
        "dataset": {"source": "any.table", "path": str(tmp_path / "anon.arrow")},
        "anonymizers": [{"id": "any.identity"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "selection": {"selectors": ["any.select_random"], "subject_counts": [8], "random_draws": 1},
        "report": {"bootstrap": 20},
    }
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "cache", progress=False)
    top1 = r.metrics[(r.metrics.metric == "top1") & (r.metrics.scenario == "clear")].value.mean()
    assert top1 > 0.5  # the noisy table still identifies (chance 1/8): it was read, not replaced
    with pytest.raises(BioanonError, match="any.table reads sample tables saved as .arrow or .parquet"):
        bioanon.load_dataset("any.table", tmp_path / "anon.csv")


def test_images_and_audio_are_written_as_a_folder_of_files(tmp_path):
    from PIL import Image
    from scipy.io import wavfile

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(4, 8, 6, 3), dtype=np.uint8)
    t = SampleTable.from_arrays(
        subject=["a", "a", "b", "b"], payloads={"image": images}, attributes={"sex": ["F", "F", "M", "M"]}
    )
    write_table(t, tmp_path / "faces")
    meta = pd.read_csv(tmp_path / "faces" / "metadata.csv", dtype=str)
    assert list(meta.columns) == ["file", "sample_id", "subject", "attr.sex"]
    for row, img in zip(meta.itertuples(), images, strict=True):
        np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "faces" / row.file)), img)
    with pytest.raises(BioanonError, match="not an empty folder"):
        write_table(t, tmp_path / "faces")  # never overwritten
    audio = [rng.uniform(-1, 1, n).astype(np.float32) for n in (100, 80)]
    v = SampleTable.from_arrays(subject=["s1", "s2"], payloads={"audio": audio}, metadata={"sample_rate": 8000})
    write_table(v, tmp_path / "voices")
    meta = pd.read_csv(tmp_path / "voices" / "metadata.csv", dtype=str)
    for row, a in zip(meta.itertuples(), audio, strict=True):
        rate, got = wavfile.read(tmp_path / "voices" / row.file)
        assert rate == 8000
        np.testing.assert_array_equal(got, a)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left
