"""face.dlib_knn — the papers' FR-KNN (dlib ResNet embeddings + k-nearest-neighbour voting) on real ORL faces."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import bioanon
from bioanon_face.recognizers import _has_dlib

pytestmark = pytest.mark.skipif(
    not _has_dlib(), reason="dlib / face_recognition_models not installed (pip install 'bioanon-face[dlib]')"
)


@functools.lru_cache(maxsize=1)
def _split(root: str):
    t = bioanon.get_registry().create("face.orl").load(root)
    t = t.select_subjects(np.unique(t.subjects)[:10])  # 10 subjects × 10 images (dlib: ~0.05-0.15 s per image)
    index = np.array([int(s.split("/")[1]) for s in t.sample_ids])
    return t.take(np.flatnonzero(index <= 5)), t.take(np.flatnonzero(index > 5))


def test_registered_and_identifies_orl(shared_data):
    assert "face.dlib_knn" in bioanon.list_methods("face.*")
    gallery, probes = _split(str(shared_data / "att_faces"))
    m = bioanon.get_registry().create("face.dlib_knn").fit(gallery).enroll(gallery)
    s = m.score(probes)
    assert s.scores.shape == (50, 10) and np.all(np.isfinite(s.scores))
    acc = float(np.mean(s.predict() == probes.subjects))
    print(f"face.dlib_knn on ORL (10 subjects, 5 enrolled + 5 probe images each): accuracy {acc:.3f}, chance 0.100")
    assert acc >= 0.9  # measured 0.99 on 20 subjects
    e = m.embed(probes)
    assert e.shape == (50, 128) and e.dtype == np.float32
    # same-subject descriptors are closer than different-subject ones (dlib's 0.6 threshold separates them)
    d = np.linalg.norm(e[:, None] - e[None], axis=-1)
    same = probes.subjects[:, None] == probes.subjects[None]
    off = ~np.eye(50, dtype=bool)
    assert np.median(d[same & off]) < 0.5 < np.median(d[~same])


def test_knn_votes_match_sklearn(shared_data):
    from sklearn.neighbors import KNeighborsClassifier

    gallery, probes = _split(str(shared_data / "att_faces"))
    m = bioanon.get_registry().create("face.dlib_knn", k=3).enroll(gallery)
    s = m.score(probes)
    clf = KNeighborsClassifier(n_neighbors=3, weights="distance").fit(m.embed(gallery), gallery.subjects)
    # votes are discontinuous: a near-tie may fall either way in another float order, so compare by agreement
    assert np.mean(s.predict() == clf.predict(m.embed(probes))) > 0.97
    # classes without a vote rank below every voted class, by their nearest enrolled descriptor
    voted = s.scores > 0
    assert np.all(voted.sum(axis=1) <= 3) and np.all(s.scores[~voted] < 0)
    assert np.allclose(np.where(voted, s.scores, 0.0).sum(axis=1), 1.0)


def test_blur_lowers_identification(shared_data):
    gallery, probes = _split(str(shared_data / "att_faces"))
    m = bioanon.get_registry().create("face.dlib_knn").enroll(gallery)
    blurred = bioanon.get_registry().create("face.gaussian_blur", kernel=29).transform(probes)
    clear = float(np.mean(m.score(probes).predict() == probes.subjects))
    blur = float(np.mean(m.score(blurred).predict() == probes.subjects))
    print(f"face.dlib_knn: clear probes {clear:.3f}, blurred (kernel 29) probes {blur:.3f}")
    assert blur < clear - 0.3
