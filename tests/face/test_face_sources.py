"""Face data sources on the real ORL and .mat data and on tiny fixtures (folder, CelebA layouts, corrupt file)."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.errors import DataError, TableError
from bioanon.metadata import MetadataWarning


def _src(method_id, **params):
    return bioanon.get_registry().create(method_id, **params) if params else bioanon.get_registry().create(method_id)


def _write_png(path, img):
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), img)


def test_orl_native_and_resized(shared_data):
    t = _src("face.orl").load(shared_data / "att_faces")
    t.validate()
    assert len(t) == 400 and t.num_subjects == 40
    assert t.attribute_names == list(type(_src("face.orl")).attribute_names)
    x = t.payload("image")
    assert x.shape == (400, 112, 92, 1) and x.dtype == np.uint8
    assert t.sample_ids[0] == "s1/1" and t.metadata["trait"] == "face"
    small = _src("face.orl", size=(56, 46), channels=3).load(shared_data / "att_faces")
    xs = small.payload("image")
    assert xs.shape == (400, 56, 46, 3)
    assert np.array_equal(xs[..., 0], xs[..., 2])  # grey expanded
    # INTER_AREA halving = 2x2 block means
    ref = x[:, :, :, 0].reshape(400, 56, 2, 46, 2).astype(float).mean(axis=(2, 4))
    assert np.abs(xs[..., 0].astype(float) - ref).max() <= 1.0


@pytest.mark.parametrize(
    "name, shape, n, subjects", [("GT", (40, 30), 750, 50), ("IMM", (48, 64), 240, 40), ("UMIST", (112, 92), 380, 20)]
)
def test_mat_files(shared_data, name, shape, n, subjects):
    t = _src("face.mat").load(shared_data / "face_benchmark_mats" / f"{name}.mat")
    t.validate()
    assert t.payload("image").shape == (n, *shape, 1)
    assert t.num_subjects == subjects
    import scipy.io

    raw = scipy.io.loadmat(str(shared_data / "face_benchmark_mats" / f"{name}.mat"))["x"]
    assert np.array_equal(t.payload("image")[3, :, :, 0], raw[:, :, 3])


def test_mat_missing_variable(tmp_path):
    import scipy.io

    p = tmp_path / "bad.mat"
    scipy.io.savemat(str(p), {"y": np.zeros((2, 2, 2), np.uint8)})
    with pytest.raises(TableError, match="no variable 'x'"):
        _src("face.mat").load(p)


def test_folder_layout_with_attributes(tmp_path):
    rng = np.random.default_rng(0)
    for s in ("alice", "bob"):
        for i in range(3):
            _write_png(tmp_path / s / f"{i}.png", rng.integers(0, 255, (20, 16, 3), dtype=np.uint8))
    _write_png(tmp_path / "bob" / "big.png", rng.integers(0, 255, (40, 32), dtype=np.uint8))
    (tmp_path / "attributes.csv").write_text("path,age,smile\nalice/0.png,31,yes\nbob/1.png,40,\n")
    with pytest.raises(TableError, match="different sizes"), pytest.warns(MetadataWarning):
        _src("face.folder").load(tmp_path)
    with pytest.warns(MetadataWarning, match="5 of 7 files have no row"):
        t = _src("face.folder", size=(10, 8)).load(tmp_path)
    t.validate()
    assert len(t) == 7 and t.payload("image").shape == (7, 10, 8, 3)
    assert list(t.subjects).count("bob") == 4
    age = dict(zip(t.sample_ids, t.attribute("age"), strict=True))
    assert age["alice/0.png"] == 31 and age["bob/1.png"] == 40
    assert age["alice/1.png"] is None or np.isnan(age["alice/1.png"])
    # colour PNGs are read as RGB (OpenCV's BGR converted)
    img = np.zeros((4, 4, 3), np.uint8)
    img[..., 2] = 200  # red in BGR order
    _write_png(tmp_path / "carol" / "red.png", img)
    with pytest.warns(MetadataWarning):
        t2 = _src("face.folder", size=(4, 4)).load(tmp_path)
    red = t2.payload("image")[list(t2.sample_ids).index("carol/red.png")]
    assert red[..., 0].min() == 200 and red[..., 2].max() == 0


def test_corrupt_image_named_or_skipped(tmp_path):
    rng = np.random.default_rng(1)
    for i in range(2):
        _write_png(tmp_path / "s1" / f"{i}.png", rng.integers(0, 255, (8, 8), dtype=np.uint8))
    (tmp_path / "s1" / "broken.png").write_bytes(b"not an image at all")
    with pytest.raises(TableError, match="broken.png"):
        _src("face.folder").load(tmp_path)
    t = _src("face.folder", skip_bad_files=True).load(tmp_path)
    assert len(t) == 2
    assert any(f.endswith("broken.png") for f in t.metadata["skipped_files"])


def test_orl_layout_corrupt_pgm(tmp_path):
    for s in (1, 2):
        for i in (1, 2):
            _write_png(tmp_path / f"s{s}" / f"{i}.pgm", np.full((12, 10), 40 * s + i, np.uint8))
    (tmp_path / "s2" / "3.pgm").write_bytes(b"P5\n10 12\n255\n\x00\x01")  # truncated
    with pytest.raises(TableError, match=r"s2[/\\]3.pgm"):
        _src("face.orl").load(tmp_path)
    t = _src("face.orl", skip_bad_files=True).load(tmp_path)
    assert list(t.sample_ids) == ["s1/1", "s1/2", "s2/1", "s2/2"]
    assert t.payload("image")[2, 0, 0, 0] == 81


def _celeba(root, counts):
    rng = np.random.default_rng(2)
    names, ident = [], []
    k = 0
    for subject, c in counts.items():
        for _ in range(c):
            k += 1
            name = f"{k:06d}.jpg"
            _write_png(root / "img_align_celeba" / name, rng.integers(0, 255, (27, 22, 3), dtype=np.uint8))
            names.append(name)
            ident.append(f"{name} {subject}")
    (root / "identity_CelebA.txt").write_text("\n".join(ident) + "\n")
    attrs = ["5_o_Clock_Shadow", "Eyeglasses", "Male"] + [f"A{i}" for i in range(37)]
    lines = [str(len(names)), " ".join(attrs)]
    for i, n in enumerate(names):
        vals = ["1" if (i + j) % 3 == 0 else "-1" for j in range(40)]
        lines.append(n + "  " + " ".join(vals))
    (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    return names


def test_celeba_layout_filters_and_attributes(tmp_path):
    _celeba(tmp_path, {"10": 9, "20": 3, "30": 25})
    t = _src("face.celeba", size=(16, 16)).load(tmp_path)
    t.validate()
    assert sorted(set(t.subjects)) == ["10", "30"]  # subject 20 has < 8 images
    assert list(t.subjects).count("30") == 20  # at most 20 images per subject
    assert t.payload("image").shape == (29, 16, 16, 3)
    assert len(t.attribute_names) == 40
    male = t.attribute("Male")
    assert male.dtype == bool or set(np.unique(male)) <= {True, False}
    assert t.attribute("5_o_Clock_Shadow")[0] == True  # noqa: E712 - first image, (0 + 0) % 3 == 0
    top = _src("face.celeba", size=(16, 16), max_subjects=1).load(tmp_path)
    assert set(top.subjects) == {"30"}


def _two_subject_folders(root):
    rng = np.random.default_rng(3)
    for s in ("alice", "bob"):
        for i in range(2):
            _write_png(root / s / f"{i}.png", rng.integers(0, 255, (8, 8), dtype=np.uint8))


def test_folder_attribute_csv_is_joined_per_file_with_checks(tmp_path):
    # a per-image CSV whose labels vary within a subject, with a subject column: joined per image, and the key
    # columns are no attributes (the subject column used to become an attribute)
    _two_subject_folders(tmp_path)
    csv_path = tmp_path / "attributes.csv"
    csv_path.write_text(
        "file,subject,smile\nalice/0.png,alice,yes\nalice/1.png,alice,no\nbob/0.png,bob,no\nbob/1.png,bob,yes\n"
    )
    t = _src("face.folder").load(tmp_path)
    assert dict(zip(t.sample_ids, t.attribute("smile"), strict=True)) == {
        "alice/0.png": "yes",
        "alice/1.png": "no",
        "bob/0.png": "no",
        "bob/1.png": "yes",
    }
    assert t.attribute_names == ["smile"]
    csv_path.write_text("path,subject,smile\nalice/0.png,bob,yes\n")
    with pytest.raises(
        DataError, match=r"attributes\.csv: column 'subject' disagrees .*'alice/0.png': 'bob' on line 2"
    ):
        _src("face.folder").load(tmp_path)
    csv_path.write_text("path,smile\nalice/0.png,yes\nbob/1.png,no\nalice/0.png,no\n")
    with pytest.raises(DataError, match=r"column 'path': duplicate file keys .*'alice/0.png' \(lines 2, 4\)"):
        _src("face.folder").load(tmp_path)
    csv_path.write_text("path,smile\nalice/0.png,yes\ncarol/0.png,no\n")
    with pytest.raises(DataError, match=r"name no file of the data set: 'carol/0.png' \(line 3\)"):
        _src("face.folder").load(tmp_path)


def test_folder_attribute_csv_per_subject(tmp_path):
    _two_subject_folders(tmp_path)
    csv_path = tmp_path / "attributes.csv"
    csv_path.write_text("identity,age\nalice,31\nbob,40\n")
    t = _src("face.folder").load(tmp_path)
    assert list(t.attribute("age")) == [31, 31, 40, 40] and t.attribute_names == ["age"]
    csv_path.write_text("identity,age\nalice,31\nbob,40\nalice,32\n")
    with pytest.raises(DataError, match=r"column 'identity': conflicting rows .*'alice' \(lines 2, 4: 'age' differ\)"):
        _src("face.folder").load(tmp_path)


def test_celeba_duplicate_lines_are_errors(tmp_path):
    names = _celeba(tmp_path, {"10": 9})
    ident = tmp_path / "identity_CelebA.txt"
    good = ident.read_text()
    ident.write_text(good + f"{names[0]} 30\n")
    with pytest.raises(DataError, match=rf"identity_CelebA\.txt: image '{names[0]}' is listed twice \(lines 1, 10\)"):
        _src("face.celeba", size=(16, 16)).load(tmp_path)
    ident.write_text(good)
    attr = tmp_path / "list_attr_celeba.txt"
    lines = attr.read_text().splitlines()
    attr.write_text("\n".join(lines + [lines[2]]) + "\n")
    with pytest.raises(
        DataError, match=rf"list_attr_celeba\.txt: .*duplicate file keys .*'{names[0]}' \(lines 3, 12\)"
    ):
        _src("face.celeba", size=(16, 16)).load(tmp_path)
    attr.write_text("\n".join(lines[:3] + lines[4:]) + "\n")  # the second image has no attribute line
    with pytest.warns(MetadataWarning, match=rf"1 of 9 files have no row .*'{names[1]}'"):
        t = _src("face.celeba", size=(16, 16)).load(tmp_path)
    assert t.attribute("Male")[1] is None and t.attribute("Male")[0] in (True, False)


def test_synthetic_faces():
    t = _src("face.synthetic").load()
    t.validate()
    assert t.payload("image").shape == (600, 32, 32, 3)
    assert {"expression", "glasses", "skin"} <= set(t.attribute_names)
    a = _src("face.synthetic", seed=3, n_subjects=4, samples_per_subject=2).load()
    b = _src("face.synthetic", seed=3, n_subjects=4, samples_per_subject=2).load()
    assert np.array_equal(a.payload("image"), b.payload("image"))
    g = _src("face.synthetic", channels=1, size=(24, 20), n_subjects=3).load()
    assert g.payload("image").shape == (30, 24, 20, 1)


def _faces_and_blank(shared_data, root):
    """Three ORL images of each of two subjects in which the detector finds a face, as PNGs in
    <root>/<subject>/, plus a blank image (no face)."""
    from bioanon_face.detect import detect_faces
    from bioanon_face.imageio import read_image

    images = {}
    for s in ("s1", "s2"):
        found = [read_image(shared_data / "att_faces" / s / f"{i}.pgm") for i in range(1, 11)]
        found = [im for im, ok in zip(found, detect_faces(np.stack(found)).found, strict=True) if ok]
        for i, img in enumerate(found[:3], start=1):
            _write_png(root / s / f"{i}.png", img)
            images[f"{s}/{i}.png"] = img
    _write_png(root / "s2" / "blank.png", np.full((112, 92), 120, np.uint8))
    (root / "attributes.csv").write_text(
        "path,n\n" + "".join(f"{k},{j}\n" for j, k in enumerate(images)) + "s2/blank.png,99\n"
    )
    return images


def test_align_keeps_or_skips_images_without_a_face(shared_data, tmp_path):
    from bioanon.errors import ParameterError
    from bioanon_face.detect import NoFaceWarning

    _faces_and_blank(shared_data, tmp_path)
    plain = _src("face.folder", size=(48, 48)).load(tmp_path)
    with pytest.warns(NoFaceWarning, match=r"no face found in 1 of 7 images \(kept uncropped.*blank.png"):
        kept = _src("face.folder", size=(48, 48), align=True).load(tmp_path)
    kept.validate()
    assert len(kept) == 7 and kept.payload("image").shape == (7, 48, 48, 1)
    meta = kept.metadata
    assert [p.replace("\\", "/").split("/")[-2:] for p in meta["no_face_files"]] == [["s2", "blank.png"]]
    assert meta["alignment"]["faces_found"] == 6 and meta["alignment"]["images"] == 7
    i_blank = list(kept.sample_ids).index("s2/blank.png")
    assert np.array_equal(kept.payload("image")[i_blank], plain.payload("image")[i_blank])  # kept uncropped
    faces = [i for i in range(7) if i != i_blank]
    assert not np.array_equal(kept.payload("image")[faces], plain.payload("image")[faces])  # the faces are crops
    with pytest.warns(NoFaceWarning, match="skipped"):
        skipped = _src("face.folder", size=(48, 48), align=True, no_face="skip", margin=0.1).load(tmp_path)
    assert list(skipped.sample_ids) == [s for s in kept.sample_ids if s != "s2/blank.png"]
    assert 99 not in list(skipped.attribute("n"))  # attributes follow the kept rows
    assert skipped.metadata["no_face_files"] == meta["no_face_files"]
    with pytest.raises(ParameterError, match="no_face"):
        _src("face.folder", no_face="drop")


def test_mat_source_align(shared_data, tmp_path):
    import scipy.io

    images = _faces_and_blank(shared_data, tmp_path / "png")
    x = np.stack(list(images.values()) + [np.full((112, 92), 120, np.uint8)], axis=-1)  # H × W × N
    scipy.io.savemat(str(tmp_path / "faces.mat"), {"x": x, "label": np.array([[1], [1], [1], [2], [2], [2], [2]])})
    with pytest.warns(match=r"faces.mat\[6\]"):
        t = _src("face.mat", align=True, no_face="skip", size=(40, 40)).load(tmp_path / "faces.mat")
    assert len(t) == 6 and t.payload("image").shape == (6, 40, 40, 1)
    assert list(t.sample_ids) == [f"faces_{i}" for i in range(6)] and t.metadata["no_face_files"] == ["faces.mat[6]"]
