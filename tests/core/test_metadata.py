"""bioanon.metadata: the shared join of per-file / per-subject metadata files onto a data set's files."""

from __future__ import annotations

import math

import pytest

from bioanon.errors import BioanonError, DataError
from bioanon.metadata import Metadata, MetadataWarning, file_key, key_columns, read_metadata_csv

FILES = ["ann/u0.wav", "ann/u1.wav", "ben/u0.wav"]
SUBJECTS = ["ann", "ann", "ben"]


def test_file_keys_are_normalized():
    assert file_key(" ./ann//u0.wav ") == "ann/u0.wav" and file_key("ann\\u0.wav") == "ann/u0.wav"


def test_key_columns_are_found_in_any_case_and_never_twice():
    assert key_columns(["Path", "Speaker", "emotion"], "m.csv") == ("Path", "Speaker")
    assert key_columns(["emotion"], "m.csv") == (None, None)
    with pytest.raises(DataError, match=r"m\.csv:1: columns \['speaker', 'subject'\] all name the subject"):
        key_columns(["file", "speaker", "subject"], "m.csv")


def test_per_file_join_parses_cells_and_keeps_keys_out(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text(
        "\ufeffFile,speaker,emotion,score\n\nann/u0.wav,ann,happy,1\nann/u1.wav,ann,sad,\nben/u0.wav,,calm,2.5\n"
    )
    meta = read_metadata_csv(p)
    assert meta.per == "file" and meta.key_column == "File" and meta.attribute_names == ["emotion", "score"]
    assert meta.lines == [3, 4, 5]  # blank lines are skipped, line numbers kept
    cols = meta.join(FILES, SUBJECTS)
    assert cols == {"emotion": ["happy", "sad", "calm"], "score": [1.0, None, 2.5]}


def test_per_subject_rows_may_repeat_when_equal(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("subject,age,height\nann,30,nan\nben,41,1.8\nann,30,nan\n")
    cols = read_metadata_csv(p).join(FILES, SUBJECTS)
    assert cols["age"] == [30, 30, 41] and math.isnan(cols["height"][0])  # NaN equals NaN here
    assert read_metadata_csv(p, parse=False).join(FILES, SUBJECTS)["age"] == ["30", "30", "41"]


def test_forcing_the_kind_and_malformed_files(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("file,speaker,g\nann/u0.wav,ann,f\n")
    assert read_metadata_csv(p, per="subject").per == "subject"  # the file column is then ignored as a key
    p.write_text("speaker,g\nann,f\n")
    with pytest.raises(DataError, match=r"m\.csv:1: the metadata file has no key column \(one of file, path"):
        read_metadata_csv(p, per="file")
    p.write_text("file,g\nann/u0.wav,f,extra\n")
    with pytest.raises(DataError, match=r"m\.csv:2: 3 cells, but the header has 2 columns"):
        read_metadata_csv(p)
    p.write_text("file,g\nann/u0.wav,f\n,m\n")
    with pytest.raises(DataError, match=r"m\.csv: empty 'file' on line 3"):
        read_metadata_csv(p)
    p.write_text("file,g,g\nann/u0.wav,f,m\n")
    with pytest.raises(DataError, match=r"column\(s\) \['g'\] appear more than once"):
        read_metadata_csv(p)
    p.write_text("")
    with pytest.raises(DataError, match="empty"):
        read_metadata_csv(p)
    p.write_bytes(b"file,g\n\xff\xfe\n")
    with pytest.raises(BioanonError, match="cannot read"):
        read_metadata_csv(p)


def test_other_files_and_missing_rows():
    meta = Metadata("m.csv", "file", "file", ["ann/u0.wav", "cy/u0.wav"], [2, 3], {"g": ["f", "m"]})
    with pytest.raises(DataError, match=r"'cy/u0.wav' \(line 3\)"):
        meta.match_files(FILES)
    with pytest.warns(MetadataWarning, match=r"2 of 3 files have no row"):
        pos = meta.match_files(FILES, other_files=["cy/u0.wav"])  # present on disk, not loaded: no error
    assert pos == [0, None, None]
    assert meta.take(pos) == {"g": ["f", None, None]}


def test_many_offending_keys_are_shortened():
    keys = [f"x{i}.wav" for i in range(9)]
    meta = Metadata("m.csv", "file", "file", keys + keys[:1], list(range(2, 12)), {})
    with pytest.raises(DataError, match=r"'x0.wav' \(lines 2, 11\)"):
        meta.match_files(keys)
    meta = Metadata("m.csv", "file", "file", keys, list(range(2, 11)), {})
    with pytest.raises(DataError, match=r"9 row\(s\) name no file.* … and 4 more"):
        meta.match_files(FILES)
