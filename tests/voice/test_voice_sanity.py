"""Data checks on importing a voice folder (bioanon.sanity, ``[dataset] on_bad``): a WAV cut to 60 bytes (8
samples), a WAV with amplitude 1e30, attribute cells ``nan``/``inf``/``x`` in a numeric column, a non-audio file
in a speaker folder: an error by default naming the file and column, dropped with "skip", kept with a warning
with "warn"."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from bioanon.errors import DataError
from bioanon.evaluation.config import DatasetSpec
from bioanon.evaluation.data import import_dataset
from bioanon.table import LOAD_WARNINGS

SR = 8000


def _tone(n=SR // 5, amp=0.3):
    return (amp * np.sin(2 * np.pi * 200 * np.arange(n) / SR)).astype(np.float32)


def _folder(root):
    for spk in ("ann", "ben"):
        (root / spk).mkdir(parents=True)
        for i in range(3):
            sf.write(root / spk / f"u{i}.wav", _tone(), SR, subtype="PCM_16")
    return root


def _import(root, on_bad=None):
    spec = (
        DatasetSpec("voice.folder", str(root), {})
        if on_bad is None
        else DatasetSpec("voice.folder", str(root), {}, on_bad=on_bad)
    )
    return import_dataset(spec, None)[0]


def _check(root, bad_id, column, pattern):
    with pytest.raises(DataError, match=pattern) as e:
        _import(root)
    assert bad_id in str(e.value) and column in str(e.value) and 'on_bad = "skip"' in str(e.value)
    skipped = _import(root, "skip")
    assert bad_id not in list(skipped.sample_ids) and len(skipped) == 5
    assert bad_id in skipped.metadata[LOAD_WARNINGS][-1]
    kept = _import(root, "warn")
    assert bad_id in list(kept.sample_ids) and len(kept) == 6 and bad_id in kept.metadata[LOAD_WARNINGS][-1]
    return skipped


def test_wav_of_60_bytes_is_too_short(tmp_path):
    root = _folder(tmp_path / "d")
    sf.write(root / "ben" / "u1.wav", _tone(8), SR, subtype="PCM_16")
    assert (root / "ben" / "u1.wav").stat().st_size == 60
    _check(root, "ben/u1.wav", "'audio'", "shorter than 0.1 s")


def test_wav_with_amplitude_1e30(tmp_path):
    root = _folder(tmp_path / "d")
    sf.write(root / "ann" / "u2.wav", _tone(amp=1e30), SR, subtype="FLOAT")
    _check(root, "ann/u2.wav", "'audio'", "beyond")


@pytest.mark.parametrize("cell", ["nan", "inf", "x"])
def test_attribute_cell_in_a_numeric_column(tmp_path, cell):
    root = _folder(tmp_path / "d")
    ages = ["21", "22", cell, "40", "41", "42"]
    files = [f"{s}/u{i}.wav" for s in ("ann", "ben") for i in range(3)]
    (root / "metadata.csv").write_text("file,age\n" + "".join(f"{f},{a}\n" for f, a in zip(files, ages, strict=True)))
    skipped = _check(root, "ann/u2.wav", "'attr.age'", "attr.age")
    assert list(skipped.attribute("age")) == [21, 22, 40, 41, 42]  # numbers again, not strings


def test_non_audio_file_in_a_speaker_folder(tmp_path):
    root = _folder(tmp_path / "d")
    (root / "ben" / "notes.txt").write_text("not audio")
    (root / "ben" / ".DS_Store").write_bytes(b"\0")  # hidden files are not data
    with pytest.raises(DataError, match=r"(?s)1 file\(s\) not read \(not an audio file \(\.txt\)\).*notes\.txt"):
        _import(root)
    for on_bad in ("skip", "warn"):
        t = _import(root, on_bad)
        assert len(t) == 6 and "notes.txt" in t.metadata[LOAD_WARNINGS][-1]
