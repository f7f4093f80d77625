"""Face data sources on the real ORL and .mat data and on tiny fixtures (folder, CelebA layouts, corrupt file)."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.errors import TableError


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


@pytest.mark.parametrize("name, shape, n, subjects", [("GT", (40, 30), 750, 50), ("IMM", (48, 64), 240, 40),
                                                      ("UMIST", (112, 92), 380, 20)])
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
    with pytest.raises(TableError, match="different sizes"):
        _src("face.folder").load(tmp_path)
    t = _src("face.folder", size=(10, 8)).load(tmp_path)
    t.validate()
    assert len(t) == 7 and t.payload("image").shape == (7, 10, 8, 3)
    assert list(t.subjects).count("bob") == 4
    age = dict(zip(t.sample_ids, t.attribute("age")))
    assert age["alice/0.png"] == 31 and age["bob/1.png"] == 40 and (age["alice/1.png"] is None or np.isnan(age["alice/1.png"]))
    # colour PNGs are read as RGB (OpenCV's BGR converted)
    import cv2

    img = np.zeros((4, 4, 3), np.uint8)
    img[..., 2] = 200  # red in BGR order
    _write_png(tmp_path / "carol" / "red.png", img)
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
