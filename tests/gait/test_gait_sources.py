"""Gait dataset sources: the shared UCalgary data, and small C3D / CSV / SEBA fixtures written here."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import bioanon
from bioanon.cache import table_fingerprint
from bioanon.errors import TableError
from bioanon_gait.skeleton import BODY_PARTS, KINECT_V2_18

# --------------------------------------------------------------------------------------------------- UCalgary


@pytest.mark.realdata
def test_ucalgary_loads_with_quirks_handled(shared_data):
    root = shared_data / "ucalgary_gait"
    t = bioanon.load_dataset("gait.ucalgary", root)
    assert len(t) == 167 and t.num_subjects == 28  # 172 files - 5 OA runs
    assert set(t.attribute_names) == set(bioanon.get_registry().get("gait.ucalgary").attribute_names)
    assert t.payload_shape("pose") == (100, 18, 3)
    assert t.payload("pose").dtype == np.float32
    meta = t.metadata
    assert meta["joints"] == list(KINECT_V2_18) and set(meta["body_parts"]) == set(BODY_PARTS)
    assert meta["units"] == "m" and meta["up_axis"] == 1 and meta["source_frame_rate"] == 30.0
    assert meta["frame_rate"] == pytest.approx(30.0 * 99 / 119)
    assert set(t.attribute("gait_type")) == {"N", "AR", "AL"}
    sex = dict(zip(t.sample_ids, t.attribute("sex"), strict=True))
    assert sex["sub8_run1"] == sex["sub8_run3"] == "F"  # subject 8: M in runs 1-2, F in 3-6 -> majority F
    x = t.payload("pose")
    head, foot = KINECT_V2_18.index("head"), KINECT_V2_18.index("foot_left")
    assert np.mean(x[:, :, head, 1] > x[:, :, foot, 1]) > 0.99  # y is up (Kinect has a few tracking glitches)
    assert table_fingerprint(t) == table_fingerprint(bioanon.load_dataset("gait.ucalgary", root))


@pytest.mark.realdata
def test_ucalgary_options(shared_data):
    root = shared_data / "ucalgary_gait"
    t = bioanon.load_dataset("gait.ucalgary", root, include_oa=True, sex_policy="as_labelled", frames=50)
    assert len(t) == 172 and t.payload_shape("pose") == (50, 18, 3)
    sex = dict(zip(t.sample_ids, t.attribute("sex"), strict=True))
    assert (sex["sub8_run1"], sex["sub8_run3"]) == ("M", "F")
    nulled = bioanon.load_dataset("gait.ucalgary", root, sex_policy="null")
    s8 = nulled.attribute("sex")[nulled.subjects == "8"]
    assert all(v is None for v in s8)


def _fake_ucalgary_file(path, rows: list[list[float]]):
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "Foot Left X, Y, Z, " + ", ".join(["a"] * 51 + ["b"] * 8)
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")


def test_ucalgary_layout_without_metadata_and_malformed_file(tmp_path):
    good = [[0.1 * (i + j) for j in range(62)] for i in range(10)]
    _fake_ucalgary_file(tmp_path / "sub1/Run1/subject1_Seq_1_Gen_F_GeometricPositions_N.csv", good)
    _fake_ucalgary_file(tmp_path / "sub2/Run1/subject2_Seq_1_Gen_M_GeometricPositions_AR.csv", good)
    _fake_ucalgary_file(tmp_path / "sub2/Run7/subject2_Seq_7_Gen_M_GeometricPositions_OA.csv", good)
    t = bioanon.load_dataset("gait.ucalgary", tmp_path, frames=10)
    assert list(t.sample_ids) == ["sub1_run1", "sub2_run1"]
    np.testing.assert_allclose(t.payload("pose")[0].reshape(10, -1), np.array(good)[:, :54], rtol=1e-6)
    (tmp_path / "sub2/Run2").mkdir()
    (tmp_path / "sub2/Run2/subject2_Seq_2_Gen_M_GeometricPositions_AR.csv").write_text("Foot Left X, Y, Z\n")
    t = bioanon.load_dataset("gait.ucalgary", tmp_path, frames=10)  # an empty walk is skipped, and listed
    assert len(t) == 2
    assert t.metadata["skipped_empty_files"] == ["sub2/Run2/subject2_Seq_2_Gen_M_GeometricPositions_AR.csv"]
    bad = [r[:] for r in good]
    bad[3][5] = "oops"
    _fake_ucalgary_file(tmp_path / "sub3/Run1/subject3_Seq_1_Gen_F_GeometricPositions_N.csv", bad)
    with pytest.raises(TableError, match=r"subject3_Seq_1_Gen_F_GeometricPositions_N\.csv:5: cell 6 = 'oops'"):
        bioanon.load_dataset("gait.ucalgary", tmp_path)


def test_ucalgary_metadata_must_agree_with_the_file_names(tmp_path):
    good = [[0.1 * (i + j) for j in range(62)] for i in range(10)]
    for sub, run, sex in ((1, 1, "F"), (1, 2, "F"), (2, 1, "M")):
        _fake_ucalgary_file(
            tmp_path / f"sub{sub}/Run{run}/subject{sub}_Seq_{run}_Gen_{sex}_GeometricPositions_N.csv", good
        )
    rows = [
        "path,subject,run,sex,gait_type,n_frames",
        "sub1/Run1/subject1_Seq_1_Gen_F_GeometricPositions_N.csv,1,1,F,N,10",
        "sub1/Run2/subject1_Seq_2_Gen_F_GeometricPositions_N.csv,1,2,F,N,10",
        "sub2/Run1/subject2_Seq_1_Gen_M_GeometricPositions_N.csv,2,1,M,N,10",
    ]
    meta = tmp_path / "metadata.csv"
    meta.write_text("\n".join(rows) + "\n")
    assert len(bioanon.load_dataset("gait.ucalgary", tmp_path, frames=10)) == 3
    # per-file labels that contradict the files: the subject (and sex) of line 3 say subject 2
    meta.write_text("\n".join(rows[:2] + [rows[2].replace(",1,2,F,", ",2,2,M,")] + rows[3:]) + "\n")
    with pytest.raises(
        TableError,
        match=r"metadata\.csv:3: subject1_Seq_2.*subject = '2' but the file name says "
        r"'1'; sex = 'M' but the file name says 'F'",
    ):
        bioanon.load_dataset("gait.ucalgary", tmp_path, frames=10)
    meta.write_text("\n".join(rows + [rows[1]]) + "\n")
    with pytest.raises(TableError, match=r"metadata\.csv:5: column 'path': .* is listed twice \(lines 2 and 5\)"):
        bioanon.load_dataset("gait.ucalgary", tmp_path, frames=10)


# --------------------------------------------------------------------------------------------------- CSV


def _write_csv_set(root, lengths=(30, 45, 30, 45)):
    rows = ["path,subject,sex,age"]
    truth = {}
    for i, n in enumerate(lengths):
        t = np.linspace(0, 1, n)
        x = np.stack([np.stack([np.sin(t + j), np.cos(t) + j, t * (i + 1)], axis=1) for j in range(3)], axis=1)
        truth[i] = x
        cols = ["time"] + [f"{j}_{a}" for j in ("knee_left", "knee_right", "head") for a in "xyz"]
        lines = [",".join(cols)] + [
            ",".join([f"{tt:.4f}"] + [f"{v:.6f}" for v in x[k].ravel()]) for k, tt in enumerate(t)
        ]
        (root / f"walk{i}.csv").write_text("\n".join(lines) + "\n")
        rows.append(f"walk{i}.csv,p{i // 2},{'FM'[i % 2]},{30 + i}")
    (root / "manifest.csv").write_text("\n".join(rows) + "\n")
    return truth


def test_csv_source_reads_manifest_and_resamples(tmp_path):
    truth = _write_csv_set(tmp_path)
    t = bioanon.load_dataset(
        "gait.csv", tmp_path, frames=20, frame_rate=50.0, body_parts='{"left_leg": ["knee_left"], "head": ["head"]}'
    )
    assert t.payload_shape("pose") == (20, 3, 3) and list(t.sample_ids) == ["walk0", "walk1", "walk2", "walk3"]
    assert list(t.subjects) == ["p0", "p0", "p1", "p1"] and list(t.attribute("age")) == [30, 31, 32, 33]
    x = t.payload("pose")
    for i in range(4):  # linear resampling keeps the end points and interpolates in between
        np.testing.assert_allclose(x[i, 0], truth[i][0], atol=1e-5)
        np.testing.assert_allclose(x[i, -1], truth[i][-1], atol=1e-5)
        pos = np.linspace(0, len(truth[i]) - 1, 20)
        ref = np.stack(
            [np.interp(pos, np.arange(len(truth[i])), truth[i][:, j, a]) for j in range(3) for a in range(3)], axis=1
        ).reshape(20, 3, 3)
        np.testing.assert_allclose(x[i], ref, atol=1e-5)
    meta = t.metadata
    assert meta["joints"] == ["knee_left", "knee_right", "head"]
    assert meta["body_parts"] == {"head": ["head"], "left_leg": ["knee_left"]}
    assert meta["frame_rate"] == pytest.approx(50.0 * 19 / 36.5)  # median length 37.5 frames


def test_csv_manifest_key_columns_and_duplicates(tmp_path):
    _write_csv_set(tmp_path)
    man = tmp_path / "manifest.csv"
    lines = man.read_text().splitlines()
    # the file and subject columns may carry other names of bioanon.metadata; they never become attributes
    man.write_text("\n".join(["filename,identity,sex,age"] + lines[1:]) + "\n")
    t = bioanon.load_dataset("gait.csv", tmp_path, frames=10)
    assert list(t.subjects) == ["p0", "p0", "p1", "p1"] and sorted(t.attribute_names) == ["age", "sex"]
    man.write_text("\n".join(["file,path,sex,age"] + [f"{ln.split(',')[0]},{ln}" for ln in lines[1:]]) + "\n")
    with pytest.raises(bioanon.BioanonError, match=r"columns \['file', 'path'\] all name the file"):
        bioanon.load_dataset("gait.csv", tmp_path, frames=10)
    # the same file on two lines (e.g. under two subjects) is an error naming both lines
    man.write_text("\n".join(lines + ["./walk1.csv,p1,M,99"]) + "\n")
    with pytest.raises(
        TableError, match=r"manifest\.csv:6: column 'path': .*walk1\.csv' is listed twice \(lines 3 and 6\)"
    ):
        bioanon.load_dataset("gait.csv", tmp_path, frames=10)
    man.write_text("\n".join(["path,subject,sex,sex"] + [ln + ",x" for ln in lines[1:]]) + "\n")
    with pytest.raises(TableError, match=r"column\(s\) \['sex'\] appear more than once"):
        bioanon.load_dataset("gait.csv", tmp_path, frames=10)


def test_csv_source_errors_name_the_file_and_line(tmp_path):
    _write_csv_set(tmp_path)
    lines = (tmp_path / "walk2.csv").read_text().splitlines()
    cells = lines[4].split(",")
    cells[3] = "n/a"
    lines[4] = ",".join(cells)
    (tmp_path / "walk2.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(TableError, match=r"walk2\.csv:5: cell 4 = 'n/a' is not a number"):
        bioanon.load_dataset("gait.csv", tmp_path)
    (tmp_path / "walk2.csv").write_text("time,knee_x,knee_y,knee_z\n")
    with pytest.raises(TableError, match=r"walk2\.csv: no data rows after the header"):
        bioanon.load_dataset("gait.csv", tmp_path)
    (tmp_path / "walk2.csv").write_text("time,knee_x,knee_y\n0,1,2\n")
    with pytest.raises(TableError, match=r"walk2\.csv:1: joint 'knee' has no z column"):
        bioanon.load_dataset("gait.csv", tmp_path)
    (tmp_path / "manifest.csv").write_text("name,subject\nwalk0.csv,a\n")
    with pytest.raises(TableError, match=r"manifest\.csv:1: the manifest header has no 'path' column"):
        bioanon.load_dataset("gait.csv", tmp_path)
    (tmp_path / "manifest.csv").write_text("path,subject\nmissing.csv,a\n")
    with pytest.raises(TableError, match=r"missing\.csv: no such file"):
        bioanon.load_dataset("gait.csv", tmp_path)
    with pytest.raises(bioanon.ParameterError, match="body_parts"):
        bioanon.get_method("gait.csv", body_parts='{"legs": ["x"]}')


# --------------------------------------------------------------------------------------------------- C3D


def _write_c3d(path, xyz: np.ndarray, labels: list[str], rate: float = 100.0, invalid=()):
    import c3d

    w = c3d.Writer(point_rate=rate, point_units="mm  ")
    w.set_point_labels(labels)
    frames = []
    for t in range(len(xyz)):
        p = np.zeros((len(labels), 5), np.float32)
        p[:, :3] = xyz[t]
        for tt, m in invalid:
            if tt == t:
                p[m, 3] = -1.0
        frames.append((p, np.zeros((0, 0), np.float32)))
    w.add_frames(frames)
    with open(path, "wb") as fh:
        w.write(fh)


@pytest.mark.filterwarnings("ignore:No analog data found:UserWarning")  # the c3d writer, on our fixture
def test_c3d_source_reads_markers_fills_gaps_and_names_bad_files(tmp_path):
    labels = ["Walker:LKNE", "Walker:RKNE", "Walker:C7", "Walker:LFHD"]
    rng = np.random.default_rng(0)
    truth = {}
    rows = ["path,subject,sex"]
    for i in range(4):
        t = np.arange(25)[:, None, None]
        xyz = (100 * rng.normal(size=(1, 4, 3)) + 10.0 * t * np.array([1.0, 0.5, 0.2])).astype(np.float32)
        truth[i] = xyz
        _write_c3d(tmp_path / f"trial{i}.c3d", xyz, labels, invalid=[(7, 1)] if i == 0 else ())
        rows.append(f"trial{i}.c3d,sub{i // 2},{'FM'[i // 2]}")
    (tmp_path / "manifest.csv").write_text("\n".join(rows) + "\n")
    t = bioanon.load_dataset("gait.c3d", tmp_path / "manifest.csv", frames=25, body_parts="plug_in_gait")
    assert t.payload_shape("pose") == (25, 4, 3)
    assert t.metadata["joints"] == ["LKNE", "RKNE", "C7", "LFHD"]  # "Subject:" prefixes dropped
    assert t.metadata["body_parts"] == {"head": ["LFHD"], "torso": ["C7"], "left_leg": ["LKNE"], "right_leg": ["RKNE"]}
    assert t.metadata["units"] == "mm" and t.metadata["up_axis"] == 2 and t.metadata["frame_rate"] == 100.0
    x = t.payload("pose")
    for i in range(4):  # the gap (frame 7 of RKNE in trial 0) is linearly interpolated: the motion is linear
        np.testing.assert_allclose(x[i], truth[i], rtol=1e-5, atol=1e-3)
    assert list(t.attribute("sex")) == ["F", "F", "M", "M"]

    sub = bioanon.load_dataset("gait.c3d", tmp_path, markers=("C7", "LKNE"), frames=10)
    assert sub.metadata["joints"] == ["C7", "LKNE"] and sub.payload_shape("pose") == (10, 2, 3)
    with pytest.raises(TableError, match=r"trial0\.c3d: markers \['XYZ'\] are not in this file"):
        bioanon.load_dataset("gait.c3d", tmp_path, markers=("XYZ",))
    (tmp_path / "trial3.c3d").write_bytes(b"not a c3d file at all" * 30)
    with pytest.raises(TableError, match=r"trial3\.c3d: not a readable C3D file"):
        bioanon.load_dataset("gait.c3d", tmp_path)


# --------------------------------------------------------------------------------------------------- SEBA


def _write_seba(data, n_ids=3, points=2, frames=12):
    (data / "walkers").mkdir(parents=True)
    meta = {
        "trait": "motion",
        "fps": 120,
        "markers": ["a", "b", "c"],
        "body_parts_to_marker": {"left_leg": [0], "right_leg": [1], "head": [2]},
    }
    import yaml

    (data / "walkers.meta.yaml").write_text(yaml.safe_dump(meta))
    truth = {}
    for i in range(n_ids):
        (data / "walkers" / f"id{i}.yaml").write_text(yaml.safe_dump({"height": 1.6 + 0.1 * i, "sex": "FMF"[i]}))
        for p in range(points):
            x = np.arange(frames * 9, dtype=float).reshape(frames, 9) * (i + 1) + p
            truth[f"id{i}.p{p}"] = x.reshape(frames, 3, 3)
            (data / "walkers" / f"id{i}.p{p}.mocap").write_text(json.dumps(x.tolist()))
    (data / "walkers" / "id0.p1.yaml").write_text("session_note: rainy\n")
    (data / "walkers" / "id9.p0.empty.mocap").write_text("[]")  # SEBA's placeholders are skipped
    return truth


def test_seba_layout_imports_with_identity_and_sample_attributes(tmp_path):
    truth = _write_seba(tmp_path)
    for path in (tmp_path, tmp_path / "walkers.meta.yaml", tmp_path / "walkers"):
        t = bioanon.load_dataset("gait.seba", path, frames=12)
        assert len(t) == 6 and t.num_subjects == 3 and t.payload_shape("pose") == (12, 3, 3)
    assert list(t.sample_ids)[:2] == ["id0.p0", "id0.p1"]
    for sid, x in zip(t.sample_ids, t.payload("pose"), strict=True):
        np.testing.assert_allclose(x, truth[sid])
    assert t.metadata["joints"] == ["a", "b", "c"] and t.metadata["frame_rate"] == 120.0
    assert t.metadata["body_parts"] == {"head": ["c"], "left_leg": ["a"], "right_leg": ["b"]}
    assert list(t.attribute("sex")) == ["F", "F", "M", "M", "F", "F"]
    assert list(t.attribute("session_note")) == [None, "rainy", None, None, None, None]
    # the size normalization by height works on the migrated attributes
    out = bioanon.get_method("gait.size_normalization", by="height").transform(t)
    assert out.payload_shape("pose") == (12, 3, 3)


def test_seba_malformed_files_are_named(tmp_path):
    _write_seba(tmp_path)
    (tmp_path / "walkers" / "id1.p0.mocap").write_text("[[1, 2, 3,\n 4, 5, 6, 7, 8, 9],\n [1, 2")
    with pytest.raises(TableError, match=r"id1\.p0\.mocap:3: invalid JSON"):
        bioanon.load_dataset("gait.seba", tmp_path)
    (tmp_path / "walkers" / "id1.p0.mocap").write_text("[[1, 2, 3, 4]]")
    with pytest.raises(TableError, match=r"id1\.p0\.mocap: frames have 4 values, not a multiple of 3"):
        bioanon.load_dataset("gait.seba", tmp_path)
    (tmp_path / "walkers" / "id1.p0.mocap").write_text("[[1, 2, 3, 4, 5, 6]]")
    with pytest.raises(TableError, match=r"id1\.p0\.mocap: 2 markers here but 3 in id0\.p0\.mocap"):
        bioanon.load_dataset("gait.seba", tmp_path)
    (tmp_path / "walkers" / "id1.p0.mocap").write_text("[[1, 2, 3, 4, 5, 6, 7, 8, 9]]")
    (tmp_path / "walkers" / "id1.p0.yaml").write_text("subject: id2\nsex: M\n")  # a label against the layout
    with pytest.raises(
        TableError, match=r"id1\.p0\.yaml: subject = 'id2', but the file name id1\.p0\.mocap says 'id1'"
    ):
        bioanon.load_dataset("gait.seba", tmp_path)
    shutil.rmtree(tmp_path / "walkers")
    (tmp_path / "walkers.meta.yaml").write_text("trait: motion\nfps: [1, 2\n")
    with pytest.raises(TableError, match=r"walkers\.meta\.yaml:\d+: invalid YAML"):
        bioanon.load_dataset("gait.seba", tmp_path / "walkers.meta.yaml")
    (tmp_path / "walkers.meta.yaml").write_text("trait: face\n")
    with pytest.raises(TableError, match="expected 'motion'"):
        bioanon.load_dataset("gait.seba", tmp_path / "walkers.meta.yaml")
    (tmp_path / "walkers.meta.yaml").write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(TableError, match="invalid YAML"):  # safe_load refuses Python tags
        bioanon.load_dataset("gait.seba", tmp_path / "walkers.meta.yaml")


# --------------------------------------------------------------------------------------------------- synthetic


def test_synthetic_walkers_are_seeded_and_have_attributes():
    a = bioanon.load_dataset("gait.synthetic")
    assert len(a) == 240 and a.num_subjects == 30 and a.payload_shape("pose") == (60, 18, 3)
    assert set(a.attribute_names) == {"sex", "height", "activity"}
    assert set(a.attribute("activity")) == {"slow", "normal", "fast"}
    assert table_fingerprint(a) == table_fingerprint(bioanon.load_dataset("gait.synthetic"))
    assert table_fingerprint(a) != table_fingerprint(bioanon.load_dataset("gait.synthetic", seed=1))
    x = a.payload("pose")
    head, foot = KINECT_V2_18.index("head"), KINECT_V2_18.index("foot_left")
    assert np.all(x[:, :, head, 1] > x[:, :, foot, 1] + 1.0)
    same = bioanon.load_dataset("gait.synthetic", individuality=0.0, variability=0.0, noise=0.0)
    y = same.payload("pose")  # without individuality all walkers of a sex share one body: equal segment lengths
    neck = KINECT_V2_18.index("neck")
    length = np.linalg.norm(y[:, :, head] - y[:, :, neck], axis=-1)
    for sex in ("F", "M"):
        assert np.ptp(length[same.attribute("sex") == sex]) < 1e-5
    varied = np.linalg.norm(x[:, :, head] - x[:, :, neck], axis=-1).mean(axis=1)
    assert np.ptp(varied) > 0.02  # with the default individuality they differ
