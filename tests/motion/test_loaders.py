"""Motion data sources: MotionSense (fixture in its exact layout), phone gait (shared real data and malformed
copies), the generic CSV loader and the synthetic generator — window counts, shapes, labels, and clear errors."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import bioanon
from bioanon_motion.io import MotionDataError, MotionDataNotFound
from bioanon_motion.signals import sliding_windows

PHONE_GAIT = "phone_gait_imu"


# --------------------------------------------------------------------------------------------------- windows


@pytest.mark.parametrize("length,window,stride", [(10, 4, 4), (10, 4, 3), (10, 10, 1), (9, 10, 2), (50, 7, 1)])
def test_sliding_windows_match_a_plain_loop(length, window, stride):
    x = np.arange(length * 3, dtype=np.float32).reshape(length, 3)
    w = sliding_windows(x, window, stride)
    expected = [x[s : s + window] for s in range(0, length - window + 1, stride)]
    assert w.shape == (len(expected), window, 3)
    for a, b in zip(w, expected, strict=True):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------------- MotionSense


def test_motionsense_windows_shapes_and_labels(motionsense_dir, ms):
    t = bioanon.load_dataset("motion.motionsense", motionsense_dir)
    expected = {k: ms.n_windows(n, 128, 128) for k, n in ms.lengths.items()}
    assert len(t) == sum(expected.values()) == 17
    assert set(t.attribute_names) == set(bioanon.get_registry().get("motion.motionsense").attribute_names)
    assert t.payload_shape("imu") == (128, 6)
    meta = t.metadata
    assert meta["channels"] == ms.columns[6:]  # rotationRate + userAcceleration, as in the paper
    assert meta["sample_rate"] == 50.0 and meta["trait"] == "motion"
    assert meta["short_recordings"] == 1  # wlk_7/sub_3 has 90 rows < 128
    # per-recording counts, activities, trials and subject info
    rec = t.attribute("recording")
    for (trial, code), count in expected.items():
        assert (rec == f"{trial}/sub_{code:02d}").sum() == count
    assert set(t.attribute("activity")) == {"dws", "wlk", "jog", "std"}
    assert sorted(t.subject_names) == ["sub_01", "sub_02", "sub_03"]
    s3 = t.subjects == "sub_03"
    assert set(t.attribute("gender")[s3]) == {"female"} and set(t.attribute("gender")[~s3]) == {"male"}
    assert set(t.attribute("age")[s3]) == {28} and t.attribute("weight")[t.subjects == "sub_01"][0] == 102
    assert t.attribute("trial").dtype == np.int64
    # the second window of jog_9/sub_1 holds rows 128..255 of the rotationRate/userAcceleration columns
    row = np.flatnonzero(t.sample_ids == "jog_9/sub_01/0001")[0]
    expected_x = ms.data(1, "jog_9", 256)[128:256, 6:]
    np.testing.assert_allclose(t.payload("imu")[row], expected_x, rtol=1e-6)


def test_motionsense_parameters(motionsense_dir, ms):
    t = bioanon.load_dataset(
        "motion.motionsense", motionsense_dir, window=64, stride=32, channels="all", activities=("dws", "jog")
    )
    expected = sum(ms.n_windows(n, 64, 32) for (trial, _), n in ms.lengths.items() if trial[:3] in ("dws", "jog"))
    assert len(t) == expected
    assert t.payload_shape("imu") == (64, 12) and t.metadata["channels"] == ms.columns
    assert set(t.attribute("activity")) == {"dws", "jog"}
    # also accepts the A_DeviceMotion_data folder itself
    t2 = bioanon.load_dataset(
        "motion.motionsense",
        motionsense_dir / "A_DeviceMotion_data",
        window=64,
        stride=32,
        channels="all",
        activities=("dws", "jog"),
    )
    assert np.array_equal(t2.payload("imu"), t.payload("imu"))


def test_motionsense_missing_column_names_file_and_line(motionsense_dir, ms):
    f = motionsense_dir / "A_DeviceMotion_data" / "dws_1" / "sub_2.csv"
    cols = [c for c in ms.columns if c != "userAcceleration.y"]
    ms.write(f, ms.data(2, "dws_1", 200)[:, [ms.columns.index(c) for c in cols]], cols)
    with pytest.raises(
        MotionDataError,
        match=re.escape(str(f)) + r", line 1: missing column\(s\) "
        r"'userAcceleration.y'",
    ):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)


def test_motionsense_non_numeric_value_names_file_and_line(motionsense_dir):
    f = motionsense_dir / "A_DeviceMotion_data" / "jog_9" / "sub_3.csv"
    lines = f.read_text().splitlines()
    fields = lines[7].split(",")
    fields[8] = "n/a?"  # rotationRate.y of data row 6 (file line 8)
    lines[7] = ",".join(fields)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError) as e:
        bioanon.load_dataset("motion.motionsense", motionsense_dir)
    assert str(e.value) == f"{f}, line 8: non-numeric value 'n/a?' in column 'rotationRate.y'"


def test_motionsense_missing_value_and_short_line(motionsense_dir):
    f = motionsense_dir / "A_DeviceMotion_data" / "jog_9" / "sub_3.csv"
    lines = f.read_text().splitlines()
    lines[3] = ",".join(lines[3].split(",")[:-1]) + ","  # empty userAcceleration.z on line 4
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}, line 4: missing value in column 'userAcceleration.z'")):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)
    lines[3] = ",".join(lines[3].split(",")[:5])  # a truncated line
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}, line 4: expected 13 fields, found 5")):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)


def test_motionsense_empty_files(motionsense_dir):
    f = motionsense_dir / "A_DeviceMotion_data" / "wlk_7" / "sub_1.csv"
    f.write_text("")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}: the file is empty")):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)
    f.write_text(f.read_text() + "," + ",".join(["attitude.roll"]) + "\n")  # header without rows (and columns)
    f.write_text(
        ",attitude.roll,attitude.pitch,attitude.yaw,gravity.x,gravity.y,gravity.z,rotationRate.x,"
        "rotationRate.y,rotationRate.z,userAcceleration.x,userAcceleration.y,userAcceleration.z\n"
    )
    with pytest.raises(MotionDataError, match=re.escape(f"{f}: no data rows (only a header)")):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)


def test_motionsense_subject_info_problems(motionsense_dir):
    info = motionsense_dir / "data_subjects_info.csv"
    info.write_text("code,weight,height,age,gender\n1,102,188,46,1\n2,72,180,28,1\n")  # subject 3 missing
    with pytest.raises(MotionDataError, match=r"sub_3\.csv: subject 3 is not listed in .*data_subjects_info\.csv"):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)
    info.write_text("code,weight,height,age\n1,102,188,46\n")
    with pytest.raises(MotionDataError, match=r"data_subjects_info\.csv, line 1: missing column\(s\) 'gender'"):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)
    info.unlink()
    with pytest.raises(MotionDataError, match="data_subjects_info.csv' is missing"):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)


def test_motionsense_subject_info_duplicate_codes(motionsense_dir):
    info = motionsense_dir / "data_subjects_info.csv"
    rows = info.read_text().splitlines()
    info.write_text("\n".join(rows + [rows[1]]) + "\n")  # the same values again: harmless
    assert len(bioanon.load_dataset("motion.motionsense", motionsense_dir)) == 17
    info.write_text("\n".join(rows + ["1,90,188,46,0"]) + "\n")  # subject 1 again, other weight and gender
    with pytest.raises(
        MotionDataError,
        match=r"data_subjects_info\.csv: column 'code': conflicting rows .*'1' "
        r"\(lines 2, 5: 'weight', 'gender' differ\)",
    ):
        bioanon.load_dataset("motion.motionsense", motionsense_dir)


def test_motionsense_bad_paths(tmp_path, motionsense_dir):
    with pytest.raises(MotionDataNotFound, match="no such file or directory") as e:
        bioanon.load_dataset("motion.motionsense", tmp_path / "nowhere")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, bioanon.BioanonError)
    with pytest.raises(MotionDataError, match="has no A_DeviceMotion_data/ folder"):
        bioanon.load_dataset("motion.motionsense", tmp_path)
    with pytest.raises(MotionDataError, match="no recording is at least window=1000 samples long"):
        bioanon.load_dataset("motion.motionsense", motionsense_dir, window=1000, stride=1000)
    with pytest.raises(bioanon.ParameterError, match="activities"):
        bioanon.load_dataset("motion.motionsense", motionsense_dir, activities=("run",))


# --------------------------------------------------------------------------------------------------- phone gait


def _expected_phone_gait_windows(root: Path, window: int, stride: int) -> dict[str, int]:
    """Windows per file, counted independently of the loader (non-blank lines per file)."""
    out = {}
    for f in list(root.glob("ten_users/*/*/*.txt")) + list(root.glob("fifteen_users_9styles/*.txt")):
        n = sum(1 for line in f.read_text().splitlines() if line.strip())
        out[f.stem] = 0 if n < window else (n - window) // stride + 1
    return out


@pytest.mark.realdata
def test_phone_gait_real_data(shared_data, phone_gait):
    root = shared_data / PHONE_GAIT
    t = phone_gait
    assert set(t.attribute_names) == set(bioanon.get_registry().get("motion.phone_gait").attribute_names)
    counts = _expected_phone_gait_windows(root, 64, 64)
    assert len(counts) == 995 and len(t) == sum(counts.values())
    assert t.payload_shape("imu") == (64, 6)
    assert t.metadata["channels"] == ["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z"]
    assert t.metadata["sample_rate"] == 50.0 and t.metadata["recordings"] == 995
    assert t.num_subjects == 19  # 10 + 15 users, 6 initials shared by the two sub-sets
    subset = t.attribute("subset")
    assert (subset == "ten_users").sum() == sum(v for k, v in counts.items() if "_m" not in k)
    assert set(t.attribute("speed")) == {"normal", "fast"} and set(t.attribute("pocket")) == {"left", "right"}
    style = t.attribute("style")
    assert set(style[subset == "fifteen_users"]) == {f"m{i}" for i in range(1, 10)}
    assert all(s is None for s in style[subset == "ten_users"])
    assert set(t.attribute("pocket")[subset == "fifteen_users"]) == {"left"}
    # the first window of zm_fb4 is the file's first 64 rows (acc + gyro fields); the second starts at row 64
    raw = np.loadtxt(root / "ten_users/fast/zm/zm_fb4.txt")
    rows = {sid: i for i, sid in enumerate(t.sample_ids) if sid.startswith("ten_users/zm_fb4/")}
    x = t.payload("imu")
    np.testing.assert_allclose(x[rows["ten_users/zm_fb4/0000"]], raw[:64, 1:7], rtol=1e-6)
    np.testing.assert_allclose(x[rows["ten_users/zm_fb4/0001"]], raw[64:128, 1:7], rtol=1e-6)
    zm = t.subjects == "zm"
    assert set(t.attribute("subset")[zm]) == {"ten_users", "fifteen_users"}
    assert set(t.attribute("speed")[t.attribute("recording") == "ten_users/zm_fb4"]) == {"fast"}
    assert set(t.attribute("pocket")[t.attribute("recording") == "ten_users/zm_fb4"]) == {"right"}


@pytest.mark.realdata
def test_phone_gait_real_data_options(shared_data):
    root = shared_data / PHONE_GAIT
    t = bioanon.load_dataset(
        "motion.phone_gait", root, subset="ten_users", window=128, stride=64, channels="all", shared_users=False
    )
    counts = _expected_phone_gait_windows(root, 128, 64)
    assert len(t) == sum(v for k, v in counts.items() if "_m" not in k)
    assert t.payload_shape("imu") == (128, 7) and t.metadata["channels"][-1] == "pressure"
    assert t.num_subjects == 10 and all(s.startswith("ten_users/") for s in t.subject_names)
    capped = bioanon.load_dataset("motion.phone_gait", root, max_windows_per_recording=2)
    assert len(capped) == sum(min(2, v) for v in _expected_phone_gait_windows(root, 64, 64).values())
    assert all(sid.endswith(("/0000", "/0001")) for sid in capped.sample_ids)
    f = bioanon.load_dataset("motion.phone_gait", root, subset="fifteen_users")
    assert f.num_subjects == 15 and set(f.attribute("subset")) == {"fifteen_users"}
    # fifteen-user segments are 79-164 samples: a 100-sample window drops the short ones
    f100 = bioanon.load_dataset("motion.phone_gait", root, subset="fifteen_users", window=100, stride=100)
    assert f100.metadata["short_recordings"] > 0 and len(f100) < len(f)


@pytest.fixture
def phone_gait_copy(tmp_path, shared_data) -> Path:
    """A small copy of the phone gait layout (two users of each sub-set) to break."""
    src = shared_data / PHONE_GAIT
    dst = tmp_path / "pg"
    for f in list(src.glob("ten_users/*/zm/*.txt")) + list(src.glob("ten_users/*/lt/*.txt")):
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out)
    (dst / "fifteen_users_9styles").mkdir()
    for f in list(src.glob("fifteen_users_9styles/zm_*.txt")) + list(src.glob("fifteen_users_9styles/hss_*.txt")):
        shutil.copyfile(f, dst / "fifteen_users_9styles" / f.name)
    return dst


@pytest.mark.realdata
def test_phone_gait_malformed_files(phone_gait_copy):
    root = phone_gait_copy
    t = bioanon.load_dataset("motion.phone_gait", root)
    assert sorted(t.subject_names) == ["hss", "lt", "zm"]
    f = root / "ten_users/normal/lt/lt_na3.txt"
    lines = f.read_text().splitlines()
    original = list(lines)
    lines[9] = " ".join(lines[9].split()[:7])  # 7 fields on line 10
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}, line 10: expected 8 fields, found 7")):
        bioanon.load_dataset("motion.phone_gait", root)
    lines = list(original)
    parts = lines[19].split()
    parts[5] = "0.1x"
    lines[19] = " ".join(parts)  # non-numeric gyro y on line 20
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}, line 20: non-numeric value '0.1x' in column 'field 6'")):
        bioanon.load_dataset("motion.phone_gait", root)
    f.write_text("\n  \n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}: the file is empty")):
        bioanon.load_dataset("motion.phone_gait", root)


def test_phone_gait_bad_paths(tmp_path):
    with pytest.raises(MotionDataNotFound, match="no such file or directory"):
        bioanon.load_dataset("motion.phone_gait", tmp_path / "missing")
    with pytest.raises(MotionDataError, match="has neither ten_users/ nor fifteen_users_9styles/"):
        bioanon.load_dataset("motion.phone_gait", tmp_path)
    with pytest.raises(MotionDataError, match="has no ten_users/ folder"):
        bioanon.load_dataset("motion.phone_gait", tmp_path, subset="ten_users")


# --------------------------------------------------------------------------------------------------- generic CSV


def _write_recordings(root: Path) -> None:
    rng = np.random.default_rng(0)
    (root / "rec").mkdir(parents=True)
    for name, n, sep in (("alice_walk.csv", 100, ","), ("bob_run.tsv", 75, "\t"), ("carol_walk.csv", 20, ",")):
        x = rng.standard_normal((n, 3))
        lines = [sep.join(["time", "ax", "ay", "az"])] + [
            sep.join([str(i)] + [f"{v:.5f}" for v in row]) for i, row in enumerate(x)
        ]
        (root / "rec" / name).write_text("\n".join(lines) + "\n")
    (root / "manifest.csv").write_text(
        "file,subject,activity,age\nrec/alice_walk.csv,alice,walk,31\nrec/bob_run.tsv,bob,run,\n"
        "rec/carol_walk.csv,carol,walk,40\n"
    )


def test_csv_loader(tmp_path):
    _write_recordings(tmp_path)
    t = bioanon.load_dataset("motion.csv", tmp_path, window=25, stride=25, time_column="time", sample_rate=100)
    assert len(t) == 4 + 3  # carol's 20 rows are shorter than a window
    assert t.payload_shape("imu") == (25, 3) and t.metadata["channels"] == ["ax", "ay", "az"]
    assert t.metadata["sample_rate"] == 100.0 and t.metadata["short_recordings"] == 1
    assert list(t.attribute("activity")) == ["walk"] * 4 + ["run"] * 3
    age = t.attribute("age")
    assert list(age[:4]) == [31] * 4 and all(a is None or np.isnan(a) for a in age[4:])
    x = np.loadtxt(tmp_path / "rec/bob_run.tsv", skiprows=1)[:, 1:]
    np.testing.assert_allclose(t.payload("imu")[t.sample_ids == "rec/bob_run.tsv/0002"][0], x[50:75], rtol=1e-5)
    # a manifest file as path, chosen channels and attributes
    t2 = bioanon.load_dataset(
        "motion.csv", tmp_path / "manifest.csv", window=25, stride=25, channels=("az", "ax"), attributes=("activity",)
    )
    assert t2.payload_shape("imu") == (25, 2) and t2.attribute_names == ["activity"]


def test_csv_loader_errors(tmp_path):
    _write_recordings(tmp_path)
    with pytest.raises(MotionDataError, match=r"manifest.csv, line 1: missing column\(s\) 'person'"):
        bioanon.load_dataset("motion.csv", tmp_path, subject_column="person")
    with pytest.raises(MotionDataError, match=r"alice_walk.csv, line 1: missing column\(s\) 'gx'"):
        bioanon.load_dataset("motion.csv", tmp_path, channels=("ax", "gx"))
    f = tmp_path / "rec" / "alice_walk.csv"
    lines = f.read_text().splitlines()
    lines[4] = lines[4].replace(lines[4].split(",")[2], "abc")
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MotionDataError, match=re.escape(f"{f}, line 5: non-numeric value 'abc' in column 'ay'")):
        bioanon.load_dataset("motion.csv", tmp_path, time_column="time")
    (tmp_path / "manifest.csv").write_text("file,subject\nrec/nobody.csv,zed\n")
    with pytest.raises(MotionDataError, match=r"manifest.csv, line 2: recording file .*nobody.csv' does not exist"):
        bioanon.load_dataset("motion.csv", tmp_path)
    (tmp_path / "manifest.csv").write_text("")
    with pytest.raises(MotionDataError, match="manifest.csv: the file is empty"):
        bioanon.load_dataset("motion.csv", tmp_path)
    with pytest.raises(MotionDataNotFound):
        bioanon.load_dataset("motion.csv", tmp_path / "nope.csv")


def test_csv_loader_manifest_keys_and_duplicates(tmp_path):
    _write_recordings(tmp_path)
    man = tmp_path / "manifest.csv"
    lines = man.read_text().splitlines()
    # default key columns also find other key names; they never become attributes
    man.write_text("\n".join(["path,speaker,activity,age"] + lines[1:]) + "\n")
    t = bioanon.load_dataset("motion.csv", tmp_path, window=25, stride=25, time_column="time")
    assert sorted(t.attribute_names) == ["activity", "age"] and set(t.subjects) == {"alice", "bob"}
    # a recording listed twice (under two subjects) is an error naming both lines
    man.write_text("\n".join(lines + ["./rec/alice_walk.csv,bob,run,31"]) + "\n")
    with pytest.raises(
        MotionDataError,
        match=r"manifest\.csv, line 5: column 'file': './rec/alice_walk.csv' is "
        r"listed twice \(lines 2 and 5\)",
    ):
        bioanon.load_dataset("motion.csv", tmp_path, time_column="time")
    # a second subject column would silently become an attribute
    man.write_text(
        "\n".join(["file,subject,identity"] + [",".join(ln.split(",")[:2] + ["x"]) for ln in lines[1:]]) + "\n"
    )
    with pytest.raises(MotionDataError, match=r"columns \['subject', 'identity'\] all name the subject"):
        bioanon.load_dataset("motion.csv", tmp_path, time_column="time")
    man.write_text("\n".join(["file,subject,activity,age,age"] + [ln + ",1" for ln in lines[1:]]) + "\n")
    with pytest.raises(MotionDataError, match=r"line 1: column\(s\) \['age'\] appear more than once"):
        bioanon.load_dataset("motion.csv", tmp_path, time_column="time")


# --------------------------------------------------------------------------------------------------- synthetic


def test_synthetic_motion_default_is_small_and_seeded():
    t = bioanon.load_dataset("motion.synthetic")
    assert len(t) == 60 * 12 and t.num_subjects == 60  # bioanon demo selects 24, 12 and 6 of its 24 evaluation subjects
    assert t.payload_shape("imu") == (64, 6) and t.metadata["sample_rate"] == 50.0
    assert set(t.attribute("activity")) == {"walk", "jog", "upstairs", "downstairs"}
    assert np.array_equal(bioanon.load_dataset("motion.synthetic").payload("imu"), t.payload("imu"))
    assert not np.array_equal(bioanon.load_dataset("motion.synthetic", seed=1).payload("imu"), t.payload("imu"))
