"""face.dlib_knn and face.lbph are always registered; without dlib or OpenCV's contrib modules they are listed as
unavailable with the command that installs them, and creating or running them says the same (issue 17)."""

from __future__ import annotations

import json
import sys

import pytest

import bioanon
from bioanon.cli import main
from bioanon.errors import MissingDependencyError, PluginError

DLIB = "pip install 'bioanon-face[dlib]'"
LBPH = "pip install --force-reinstall opencv-contrib-python-headless"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err  # wrapped lines joined


def test_fr_knn_and_lbph_are_always_registered_with_their_requirements():
    registry = bioanon.get_registry()
    assert registry.get("face.dlib_knn").requires == {
        "dlib": DLIB,
        "face_recognition_models": DLIB,
        "pkg_resources": DLIB,
    }
    assert registry.get("face.lbph").requires == {"cv2.face": LBPH}


@pytest.fixture
def no_dlib_no_contrib(monkeypatch):
    """As if dlib and OpenCV's contrib modules were not installed (None in sys.modules blocks an import)."""
    monkeypatch.setitem(sys.modules, "dlib", None)
    monkeypatch.setitem(sys.modules, "cv2.face", None)


def test_unavailable_methods_are_listed_with_the_install_command(capsys, no_dlib_no_contrib):
    code, out, _ = run(capsys, "methods", "face.*", "--kind", "recognizer")
    assert code == 0
    assert "face.dlib_knn recognizer [unavailable] FR-KNN" in out
    assert "face.lbph recognizer [unavailable]" in out and "face.eigenfaces recognizer Eigenfaces" in out
    assert f"face.dlib_knn needs dlib, which is not installed: {DLIB}" in out
    assert f"face.lbph needs cv2.face, which is not installed: {LBPH}" in out
    assert "face.eigenfaces needs" not in out

    code, out, _ = run(capsys, "methods", "--json", "face.dlib_knn", "face.eigenfaces")
    assert {d["id"]: d["missing"] for d in json.loads(out)} == {"face.dlib_knn": {"dlib": DLIB}, "face.eigenfaces": {}}
    code, out, _ = run(capsys, "methods", "--params", "face.dlib_knn")
    assert f"face.dlib_knn needs dlib, which is not installed: {DLIB}" in out

    code, out, _ = run(capsys, "describe", "face.dlib_knn")
    assert code == 0 and f"unavailable: face.dlib_knn needs dlib, which is not installed: {DLIB}" in out
    code, out, _ = run(capsys, "describe", "face.dlib_knn", "--json")
    d = json.loads(out)
    assert d["missing"] == {"dlib": DLIB} and d["requires"]["face_recognition_models"] == DLIB

    code, out, _ = run(capsys, "plugins")
    assert code == 0 and "bioanon-face 0.1.0 loaded 38 >=1.7,<2 2 unavailable:" in out  # the note is cut to the width
    assert f"face.dlib_knn needs dlib, which is not installed: {DLIB}" in out
    code, out, _ = run(capsys, "plugins", "--json")
    rows = {r["distribution"]: r for r in json.loads(out)}
    assert rows["bioanon-face"]["unavailable"] == {"face.dlib_knn": {"dlib": DLIB}, "face.lbph": {"cv2.face": LBPH}}
    assert rows["bioanon-gait"]["unavailable"] == {}


def test_creating_an_unavailable_method_names_the_package_and_the_command(no_dlib_no_contrib):
    with pytest.raises(MissingDependencyError) as info:
        bioanon.get_method("face.dlib_knn", k=3)
    e = info.value
    assert str(e) == f"face.dlib_knn needs dlib, which is not installed: {DLIB}"
    assert e.method_id == "face.dlib_knn" and e.missing == {"dlib": DLIB} and e.name == "dlib"
    assert isinstance(e, PluginError) and isinstance(e, ImportError)  # caught as either
    with pytest.raises(MissingDependencyError, match="face.lbph needs cv2.face"):
        bioanon.get_registry().create("face.lbph")


def test_running_fr_knn_without_dlib_says_the_same(monkeypatch):
    from bioanon.testing import make_table
    from bioanon_face import recognizers

    recognizers._dlib_models.cache_clear()  # loaded by an earlier test: load again, without dlib
    monkeypatch.setitem(sys.modules, "dlib", None)
    try:
        with pytest.raises(
            MissingDependencyError,
            match=r"face.dlib_knn needs dlib, which is not installed: "
            r"pip install 'bioanon-face\[dlib\]' \(ModuleNotFoundError",
        ):
            recognizers.DlibKnn().embed(make_table(payload="image"))
    finally:
        recognizers._dlib_models.cache_clear()


def test_running_lbph_on_an_opencv_without_contrib_says_the_same(monkeypatch):
    import cv2

    from bioanon.testing import make_table
    from bioanon_face.recognizers import Lbph

    monkeypatch.delattr(cv2, "face")  # a plain OpenCV wheel installed over the contrib one
    with pytest.raises(MissingDependencyError, match=f"face.lbph needs cv2.face, .*{LBPH} .*no cv2.face"):
        Lbph().enroll(make_table(payload="image"))
