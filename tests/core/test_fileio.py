"""Path safety and atomic writes shared by every loader and writer."""

from __future__ import annotations

import os

import pytest

from bioanon.errors import BioanonError, DataError
from bioanon.fileio import atomic_write_text, check_data_dir, resolve_within


def test_resolve_within_refuses_escapes(tmp_path):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.csv").write_text("x")
    (tmp_path / "secret.csv").write_text("s")
    os.symlink(tmp_path / "secret.csv", root / "link.csv")
    assert resolve_within(root, "sub/a.csv") == (root / "sub" / "a.csv").resolve()
    assert resolve_within(root, "sub/../sub/a.csv").name == "a.csv"
    for bad in ("../secret.csv", "sub/../../secret.csv", str(tmp_path / "secret.csv"), "link.csv"):
        with pytest.raises(DataError, match="outside the data root") as e:
            resolve_within(root, bad, where="manifest.csv, line 3")
        assert "manifest.csv, line 3" in str(e.value)
    # a NUL byte (a corrupt listing) is a DataError naming the place too, not the OS's ValueError
    with pytest.raises(DataError, match="NUL byte") as e:
        resolve_within(root, "sub/a\x00.csv", where="metadata.csv, line 2")
    assert "metadata.csv, line 2" in str(e.value)


def test_check_data_dir(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        check_data_dir(tmp_path / "nope", what="face.orl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="is empty"):
        check_data_dir(tmp_path / "empty")
    assert issubclass(DataError, BioanonError)


def test_atomic_write_text_has_normal_permissions(tmp_path):
    p = tmp_path / "x.json"
    atomic_write_text(p, "{}")
    mode = p.stat().st_mode & 0o777
    assert mode & 0o044, oct(mode)  # readable by group/others as with a plain open() (umask permitting)
    assert p.read_text() == "{}" and not list(tmp_path.glob(".x.json.*"))


@pytest.mark.parametrize("source", ["motion.csv", "gait.csv"])
def test_manifest_loaders_refuse_paths_outside_the_data_root(tmp_path, source):
    import bioanon

    if source not in bioanon.get_registry():
        pytest.skip(f"{source} is not installed")
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "outside.csv").write_text("a,b\n1,2\n")
    col = "file" if source == "motion.csv" else "path"
    (root / "manifest.csv").write_text(f"{col},subject\n../outside.csv,s1\n")
    with pytest.raises(BioanonError, match="outside the data root"):
        bioanon.load_dataset(source, root)


def test_folder_loader_refuses_a_symlink_out_of_the_root(tmp_path):
    import bioanon

    if "face.folder" not in bioanon.get_registry():
        pytest.skip("face.folder is not installed")
    import cv2
    import numpy as np

    root = tmp_path / "faces"
    (root / "p1").mkdir(parents=True)
    img = np.zeros((8, 8), np.uint8)
    cv2.imwrite(str(root / "p1" / "0.png"), img)
    cv2.imwrite(str(tmp_path / "private.png"), img)
    os.symlink(tmp_path / "private.png", root / "p1" / "1.png")
    with pytest.raises(BioanonError, match="outside the data root"):
        bioanon.load_dataset("face.folder", root)
