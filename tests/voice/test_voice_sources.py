"""Voice data sources on tiny generated fixtures of every layout (incl. a corrupt file) and on FSDD."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from bioanon_voice.sources import AudioMnist, DatasetError, Fsdd, LibriSpeech, SpeakerFolder
from bioanon_voice.synth import SyntheticVoice


def _tone(sr, f=200.0, n=None):
    n = n or sr // 10
    return (0.3 * np.sin(2 * np.pi * f * np.arange(n) / sr)).astype(np.float32)


def _corrupt(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk-not-audio")


@pytest.fixture
def fsdd_dir(tmp_path):
    rec = tmp_path / "recordings"
    rec.mkdir()
    for spk, f in (("alice", 150.0), ("bob", 250.0)):
        for digit in range(3):
            for idx in range(2):
                sf.write(rec / f"{digit}_{spk}_{idx}.wav", _tone(8000, f + 10 * digit), 8000, subtype="PCM_16")
    (tmp_path / "speakers.csv").write_text("speaker,gender,accent,language\nalice,female,UK,english\n"
                                           "bob,male,USA,english\n")
    return tmp_path


def test_fsdd_fixture_loads(fsdd_dir):
    t = Fsdd().load(fsdd_dir)
    t.validate()
    assert len(t) == 12 and t.metadata["sample_rate"] == 8000 and t.metadata["skipped_files"] == []
    assert set(t.subjects) == {"alice", "bob"}
    assert sorted(set(t.attribute("digit").tolist())) == [0, 1, 2]
    assert set(t.attribute("accent")) == {"UK", "USA"}
    assert t.payload("audio")[0].dtype == np.float32


def test_fsdd_resamples_and_subsamples(fsdd_dir):
    t = Fsdd(sample_rate=16000, max_per_speaker=3).load(fsdd_dir)
    assert t.metadata["sample_rate"] == 16000 and len(t) == 6
    assert abs(len(t.payload("audio")[0]) - 1600) <= 2
    assert set(t.attribute("digit").tolist()) == {0, 1, 2}  # spread over digits (index-major order)


def test_corrupt_file_is_named_or_skipped(fsdd_dir):
    bad = fsdd_dir / "recordings" / "9_alice_0.wav"
    _corrupt(bad)
    with pytest.raises(DatasetError, match="9_alice_0.wav"):
        Fsdd().load(fsdd_dir)
    t = Fsdd(skip_bad_files=True).load(fsdd_dir)
    assert len(t) == 12
    assert [s["file"] for s in t.metadata["skipped_files"]] == [str(bad)]


def test_empty_and_wrong_rate_files(fsdd_dir):
    sf.write(fsdd_dir / "recordings" / "8_bob_0.wav", np.zeros(0, np.float32), 8000)
    sf.write(fsdd_dir / "recordings" / "7_bob_0.wav", _tone(16000), 16000)
    with pytest.raises(DatasetError, match=r"7_bob_0.wav.*16000 Hz, expected 8000|8_bob_0.wav.*empty"):
        Fsdd().load(fsdd_dir)
    t = Fsdd(skip_bad_files=True).load(fsdd_dir)
    reasons = {s["file"].rsplit("/", 1)[-1]: s["reason"] for s in t.metadata["skipped_files"]}
    assert set(reasons) == {"7_bob_0.wav", "8_bob_0.wav"} and "empty" in reasons["8_bob_0.wav"]
    assert len(Fsdd(sample_rate=8000, skip_bad_files=True).load(fsdd_dir)) == 13  # resampling accepts it


def test_audiomnist_fixture(tmp_path):
    data = tmp_path / "data"
    for spk in ("01", "02"):
        for digit in range(2):
            (data / spk).mkdir(parents=True, exist_ok=True)
            sf.write(data / spk / f"{digit}_{spk}_0.wav", _tone(48000, 120 + int(spk) * 50), 48000)
    (data / "audioMNIST_meta.txt").write_text(json.dumps({"01": {"age": "30", "gender": "male", "accent": "german"},
                                                          "02": {"age": 25, "gender": "female", "accent": "x"}}))
    _corrupt(data / "02" / "1_02_1.wav")
    with pytest.raises(DatasetError, match="1_02_1.wav"):
        AudioMnist().load(tmp_path)
    t = AudioMnist(sample_rate=8000, skip_bad_files=True).load(tmp_path)
    assert len(t) == 4 and t.metadata["sample_rate"] == 8000 and len(t.metadata["skipped_files"]) == 1
    assert set(t.attribute("age").tolist()) == {25, 30} and set(t.attribute("gender")) == {"male", "female"}


def test_librispeech_fixture(tmp_path):
    root = tmp_path / "LibriSpeech"
    sub = root / "dev-clean"
    for spk in ("19", "26"):
        d = sub / spk / "100"
        d.mkdir(parents=True)
        for i in range(2):
            sf.write(d / f"{spk}-100-{i:04d}.flac", _tone(16000, 100 + int(spk)), 16000, format="FLAC")
    (root / "SPEAKERS.TXT").write_text("; ID | SEX | SUBSET | MINUTES | NAME\n19 | F | dev-clean | 25 | A\n"
                                       "26 | M | dev-clean | 25 | B\n")
    _corrupt(sub / "26" / "100" / "26-100-0009.flac")
    with pytest.raises(DatasetError, match="26-100-0009.flac"):
        LibriSpeech().load(sub)
    t = LibriSpeech(skip_bad_files=True).load(sub)
    assert len(t) == 4 and t.metadata["sample_rate"] == 16000
    assert dict(zip(t.subjects, t.attribute("gender"))) == {"19": "F", "26": "M"}
    assert len(LibriSpeech(skip_bad_files=True).load(root)) == 4


def test_folder_fixture(tmp_path):
    for spk in ("ann", "ben"):
        (tmp_path / spk).mkdir()
        for i in range(2):
            sf.write(tmp_path / spk / f"u{i}.wav", _tone(8000), 8000)
    (tmp_path / "metadata.csv").write_text("speaker,gender\nann,f\nben,m\n")
    (tmp_path / "ben" / "notes.txt").write_text("not audio, ignored by extension")
    _corrupt(tmp_path / "ben" / "bad.wav")
    with pytest.raises(DatasetError, match="bad.wav"):
        SpeakerFolder().load(tmp_path)
    t = SpeakerFolder(skip_bad_files=True).load(tmp_path)
    assert len(t) == 4 and list(t.attribute("gender")) == ["f", "f", "m", "m"]
    assert t.metadata["skipped_files"][0]["file"].endswith("bad.wav")


def test_synthetic_is_seeded_and_has_content_attribute():
    a = SyntheticVoice(n_speakers=3, utterances_per_speaker=4).load()
    b = SyntheticVoice(n_speakers=3, utterances_per_speaker=4).load()
    assert len(a) == 12 and "digit" in a.attribute_names and a.metadata["sample_rate"] == 8000
    assert all(np.array_equal(x, y) for x, y in zip(a.payload("audio"), b.payload("audio")))
    c = SyntheticVoice(n_speakers=3, utterances_per_speaker=4, seed=1).load()
    assert not np.array_equal(a.payload("audio")[0], c.payload("audio")[0])


def test_fsdd_real_data(shared_data):
    t = Fsdd(max_per_speaker=10).load(shared_data / "fsdd")
    t.validate()
    assert t.num_subjects == 6 and len(t) == 60 and t.metadata["sample_rate"] == 8000
    assert set(t.attribute("digit").tolist()) == set(range(10))
    assert "accent" in t.attribute_names
