"""Voice data sources on tiny generated fixtures of every layout (incl. a corrupt file) and on FSDD."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from bioanon_voice.sources import AudioMnist, DatasetError, Fsdd, LibriSpeech, SpeakerFolder
from bioanon_voice.synthetic import SyntheticVoice


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
    (tmp_path / "speakers.csv").write_text(
        "speaker,gender,accent,language\nalice,female,UK,english\nbob,male,USA,english\n"
    )
    return tmp_path


def test_fsdd_fixture_loads(fsdd_dir):
    t = Fsdd().load(fsdd_dir)
    t.validate()
    assert len(t) == 12 and t.metadata["sample_rate"] == 8000 and t.metadata["skipped_files"] == []
    assert set(t.subjects) == {"alice", "bob"}
    assert sorted(set(t.attribute("digit").tolist())) == [0, 1, 2]
    assert set(t.attribute("accent")) == {"UK", "USA"}
    assert set(t.attribute_names) == set(Fsdd.attribute_names)  # as declared (speakers.csv's language is not read)
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
    (data / "audioMNIST_meta.txt").write_text(
        json.dumps(
            {
                "01": {"age": "30", "gender": "male", "accent": "german"},
                "02": {"age": 25, "gender": "female", "accent": "x"},
            }
        )
    )
    _corrupt(data / "02" / "1_02_1.wav")
    with pytest.raises(DatasetError, match="1_02_1.wav"):
        AudioMnist().load(tmp_path)
    t = AudioMnist(sample_rate=8000, skip_bad_files=True).load(tmp_path)
    assert len(t) == 4 and t.metadata["sample_rate"] == 8000 and len(t.metadata["skipped_files"]) == 1
    assert set(t.attribute("age").tolist()) == {25, 30} and set(t.attribute("gender")) == {"male", "female"}
    assert set(t.attribute_names) <= set(AudioMnist.attribute_names)


def test_librispeech_fixture(tmp_path):
    root = tmp_path / "LibriSpeech"
    sub = root / "dev-clean"
    for spk in ("19", "26"):
        d = sub / spk / "100"
        d.mkdir(parents=True)
        for i in range(2):
            sf.write(d / f"{spk}-100-{i:04d}.flac", _tone(16000, 100 + int(spk)), 16000, format="FLAC")
    (root / "SPEAKERS.TXT").write_text(
        "; ID | SEX | SUBSET | MINUTES | NAME\n19 | F | dev-clean | 25 | A\n26 | M | dev-clean | 25 | B\n"
    )
    (sub / "19" / "100" / "19-100.trans.txt").write_text("19-100-0000 HELLO WORLD\n19-100-0001 GOOD BYE\n")
    _corrupt(sub / "26" / "100" / "26-100-0009.flac")
    with pytest.raises(DatasetError, match="26-100-0009.flac"):
        LibriSpeech().load(sub)
    t = LibriSpeech(skip_bad_files=True).load(sub)
    assert len(t) == 4 and t.metadata["sample_rate"] == 16000
    assert set(t.attribute_names) == set(LibriSpeech.attribute_names)
    assert dict(zip(t.subjects, t.attribute("gender"), strict=True)) == {"19": "F", "26": "M"}
    text = dict(zip(t.sample_ids, t.attribute("text"), strict=True))  # transcripts; none for speaker 26's chapter
    assert [v for k, v in sorted(text.items()) if "19-100" in k] == ["HELLO WORLD", "GOOD BYE"]
    assert all(v is None for k, v in text.items() if "26-100" in k)
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
    assert all(np.array_equal(x, y) for x, y in zip(a.payload("audio"), b.payload("audio"), strict=True))
    c = SyntheticVoice(n_speakers=3, utterances_per_speaker=4, seed=1).load()
    assert not np.array_equal(a.payload("audio")[0], c.payload("audio")[0])


def test_fsdd_real_data(shared_data):
    t = Fsdd(max_per_speaker=10).load(shared_data / "fsdd")
    t.validate()
    assert t.num_subjects == 6 and len(t) == 60 and t.metadata["sample_rate"] == 8000
    assert set(t.attribute("digit").tolist()) == set(range(10))
    assert "accent" in t.attribute_names


def _speaker_folders(root, speakers=("ann", "ben"), n=2):
    for spk in speakers:
        (root / spk).mkdir()
        for i in range(n):
            sf.write(root / spk / f"u{i}.wav", _tone(8000), 8000)


def test_folder_per_file_metadata_with_path_and_speaker_columns(tmp_path):
    # issue 18: a per-file CSV keyed by 'path' that also has 'speaker' was joined per speaker: every file of a
    # speaker got the emotion of the speaker's last row, and 'path' became an attribute
    _speaker_folders(tmp_path)
    (tmp_path / "metadata.csv").write_text(
        "path,speaker,emotion\nann/u0.wav,ann,happy\nann/u1.wav,ann,sad\nben/u0.wav,ben,angry\nben/u1.wav,ben,calm\n"
    )
    t = SpeakerFolder().load(tmp_path)
    assert dict(zip(t.sample_ids, t.attribute("emotion"), strict=True)) == {
        "ann/u0.wav": "happy",
        "ann/u1.wav": "sad",
        "ben/u0.wav": "angry",
        "ben/u1.wav": "calm",
    }
    assert "path" not in t.attribute_names and "speaker" not in t.attribute_names


def test_folder_per_file_metadata_errors_name_the_rows(tmp_path):
    from bioanon.errors import DataError

    _speaker_folders(tmp_path)
    mf = tmp_path / "metadata.csv"
    # the speaker column disagrees with the folder layout
    mf.write_text("file,speaker,emotion\nann/u0.wav,ann,happy\nann/u1.wav,ben,sad\n")
    with pytest.raises(DataError, match=r"metadata\.csv: column 'speaker' disagrees .*'ann/u1.wav': 'ben' on line 3"):
        SpeakerFolder().load(tmp_path)
    # a file listed twice
    mf.write_text("filename,emotion\nann/u0.wav,happy\nben/u1.wav,calm\n./ann/u0.wav,sad\n")
    with pytest.raises(DataError, match=r"column 'filename': duplicate file keys .*'ann/u0.wav' \(lines 2, 4\)"):
        SpeakerFolder().load(tmp_path)
    # rows naming no file (paths relative to another folder)
    mf.write_text("path,emotion\nann/u0.wav,happy\nvoice/ben/u1.wav,calm\n")
    with pytest.raises(DataError, match=r"1 row\(s\) name no file .*'voice/ben/u1.wav' \(line 3\)"):
        SpeakerFolder().load(tmp_path)
    # two file columns are ambiguous
    mf.write_text("file,path,emotion\nann/u0.wav,ann/u0.wav,happy\n")
    with pytest.raises(DataError, match=r"columns \['file', 'path'\] all name the file"):
        SpeakerFolder().load(tmp_path)
    mf.write_text("name,emotion\nann/u0.wav,happy\n")
    with pytest.raises(DataError, match="no key column"):
        SpeakerFolder().load(tmp_path)


def test_folder_files_without_a_row_warn_and_are_null(tmp_path):
    from bioanon.metadata import MetadataWarning

    _speaker_folders(tmp_path)
    (tmp_path / "metadata.csv").write_text("path,emotion\nann/u0.wav,happy\nben/u1.wav,calm\n")
    with pytest.warns(MetadataWarning, match=r"2 of 4 files have no row .*'ann/u1.wav', 'ben/u0.wav'"):
        t = SpeakerFolder().load(tmp_path)
    assert dict(zip(t.sample_ids, t.attribute("emotion"), strict=True)) == {
        "ann/u0.wav": "happy",
        "ann/u1.wav": None,
        "ben/u0.wav": None,
        "ben/u1.wav": "calm",
    }


def test_folder_per_speaker_metadata_conflicts_are_errors(tmp_path):
    from bioanon.errors import DataError
    from bioanon.metadata import MetadataWarning

    _speaker_folders(tmp_path, ("ann", "ben", "cy"))
    mf = tmp_path / "metadata.csv"
    # a speaker's rows agree: fine; a speaker with no folder is ignored; a folder without a row warns
    mf.write_text("Speaker,gender,age\nann,f,30\nann,f,30\nben,m,41\nzed,m,50\n")
    with pytest.warns(MetadataWarning, match=r"1 subject\(s\) have no row.*'cy'"):
        t = SpeakerFolder().load(tmp_path)
    assert list(t.attribute("gender")) == ["f", "f", "m", "m", None, None]
    assert list(t.attribute("age"))[:4] == [30, 30, 41, 41] and "Speaker" not in t.attribute_names
    # per-file values in a per-speaker file: conflicting rows name the speaker, the column and the lines
    mf.write_text("speaker,emotion,gender\nann,happy,f\nben,calm,m\nann,sad,f\ncy,x,m\n")
    with pytest.raises(DataError, match=r"column 'speaker': conflicting rows .*'ann' \(lines 2, 4: 'emotion' differ\)"):
        SpeakerFolder().load(tmp_path)
    mf.write_text("speaker,gender\nAnn,f\nBen,m\n")
    with pytest.raises(DataError, match="no row names a subject"):
        SpeakerFolder().load(tmp_path)


def test_fsdd_and_librispeech_speaker_tables_checked(fsdd_dir, tmp_path):
    from bioanon.errors import DataError
    from bioanon.metadata import MetadataWarning

    (fsdd_dir / "speakers.csv").write_text("speaker,gender,accent\nalice,female,UK\nbob,male,USA\nalice,male,UK\n")
    with pytest.raises(
        DataError, match=r"speakers\.csv: column 'speaker': conflicting .*'alice' \(lines 2, 4: 'gender'"
    ):
        Fsdd().load(fsdd_dir)
    (fsdd_dir / "speakers.csv").write_text("speaker,gender,accent\nalice,female,UK\n")
    with pytest.warns(MetadataWarning, match="'bob'"):
        t = Fsdd().load(fsdd_dir)
    assert set(zip(t.subjects, t.attribute("gender"), strict=True)) == {("alice", "female"), ("bob", None)}
    (fsdd_dir / "speakers.csv").write_text("name,gender\nalice,female\n")
    with pytest.raises(DataError, match=r"speakers\.csv:1: .*no key column"):
        Fsdd().load(fsdd_dir)
    sub = tmp_path / "LS" / "dev-clean"
    for spk in ("19", "26"):
        (sub / spk / "100").mkdir(parents=True)
        sf.write(sub / spk / "100" / f"{spk}-100-0000.flac", _tone(16000), 16000, format="FLAC")
    (tmp_path / "LS" / "SPEAKERS.TXT").write_text(
        "; ID | SEX | SUBSET\n19 | F | dev-clean\n26 | M | dev-clean\n19 | M | dev-clean\n"
    )
    with pytest.raises(DataError, match=r"SPEAKERS\.TXT: column 'ID': conflicting .*'19' \(lines 2, 4"):
        LibriSpeech().load(sub)


def test_audiomnist_meta_duplicates_and_misplaced_files(tmp_path):
    data = tmp_path / "data"
    for spk in ("01", "02"):
        (data / spk).mkdir(parents=True)
        sf.write(data / spk / f"0_{spk}_0.wav", _tone(48000), 48000)
    (data / "audioMNIST_meta.txt").write_text(
        '{"01": {"gender": "male"}, "02": {"gender": "female"}, "01": {"gender": "female"}}'
    )
    with pytest.raises(DatasetError, match=r"speaker key\(s\) \['01'\] appear more than once"):
        AudioMnist().load(tmp_path)
    (data / "audioMNIST_meta.txt").write_text('{"01": {"gender": "male"}, "02": {"gender": "female"}}')
    sf.write(data / "02" / "1_01_0.wav", _tone(48000), 48000)  # speaker 01's file in speaker 02's folder
    with pytest.raises(
        DatasetError, match=r"1_01_0\.wav: the file name says speaker '01', but it is in the folder '02'"
    ):
        AudioMnist().load(tmp_path)


def _libri_config(tmp_path, label):
    return {
        "label": label,
        "dataset": {"source": "voice.librispeech", "path": str(tmp_path)},
        "anonymizers": [{"id": "any.identity"}],
        "recognizers": [{"id": "any.attribute_svm"}],
    }


def test_validate_without_data_checks_the_declared_columns(tmp_path):
    # LibriSpeech's speaker column is ``gender`` (from SPEAKERS.TXT's SEX field): ``sex`` is refused before any
    # data are read (tmp_path holds none: loading would fail), naming the key, the source and the columns
    from bioanon.errors import ConfigError
    from bioanon.evaluation.checks import validate

    with pytest.raises(ConfigError) as e:
        validate(_libri_config(tmp_path, "sex"))
    assert e.value.problems == [
        "label: the data set voice.librispeech has no attribute column 'sex'; its attribute columns: chapter, text, "
        "gender, subset; did you mean 'gender'?"
    ]
    assert validate(_libri_config(tmp_path, "gender")).label == "gender"
    cfg = _libri_config(tmp_path, "subject")  # a method's default attribute is checked too: FSDD's digit
    cfg["utility"] = [{"id": "voice.content_accuracy"}]
    with pytest.raises(ConfigError, match=r"utility\[0\].params.attribute: .* no attribute column 'digit'"):
        validate(cfg)


def test_describe_names_the_columns_exactly(capsys):
    from bioanon.cli import main

    assert main(["describe", "voice.librispeech"]) == 0
    out = capsys.readouterr().out
    assert "attribute columns: chapter, text, gender, subset" in out
    assert "(``sex`` column)" not in out and "the column is named ``gender``" in " ".join(out.split())
    assert main(["describe", "voice.folder"]) == 0
    assert "attribute columns: those of the data (known once loaded)" in capsys.readouterr().out
