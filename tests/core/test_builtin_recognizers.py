"""The built-in trait-agnostic recognizers: conformance, identification, fit-once/enroll-many, the parrot effect."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.builtin.recognizers import (
    CosineNearestCentroid,
    FeatureSpace,
    LdaCosine,
    LogisticRegression,
    NearestNeighbors,
    PcaSvm,
    RandomForest,
)
from bioanon.metrics import label_indices, top_k_accuracy
from bioanon.table import SampleTable
from bioanon.testing import check_method, make_table

ALL = [CosineNearestCentroid, PcaSvm, RandomForest, NearestNeighbors, LogisticRegression, LdaCosine]
LEARNED = [PcaSvm, RandomForest, NearestNeighbors, LogisticRegression, LdaCosine]


@pytest.fixture(scope="module")
def sets():
    """Attacker set (15 subjects) and an evaluation set (15 other subjects) split into gallery and probes."""
    table = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=10, seed=1)
    attacker, evaluation = table.split_subjects([0.5, 0.5], seed=0)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=0)
    return attacker, gallery, probes


def accuracy(rec, probes, label="subject") -> float:
    s = rec.score(probes)
    true = probes.subjects if label == "subject" else probes.attribute(label)
    return top_k_accuracy(s.scores, label_indices(true, s.classes))


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.id)
def test_conforms(cls):
    report = check_method(cls).raise_for_failures()
    assert report.checks_run >= 12


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.id)
def test_identifies_well_above_chance(cls, sets):
    attacker, gallery, probes = sets
    acc = accuracy(cls().fit(attacker).enroll(gallery), probes)
    assert acc >= 0.6, f"{cls.id}: top-1 accuracy {acc:.2f} (chance {1 / gallery.num_subjects:.2f})"


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.id)
def test_enroll_without_fit_fits_on_the_gallery(cls, sets):
    _, gallery, probes = sets
    assert accuracy(cls().enroll(gallery), probes) >= 0.5


@pytest.mark.parametrize("cls", LEARNED, ids=lambda c: c.id)
def test_fit_once_enroll_many(cls, sets):
    attacker, gallery, probes = sets
    names = gallery.subject_names
    first, second = names[:8], names[8:]
    rec = cls().fit(attacker)
    space = rec.space_
    rec.enroll(gallery.select_subjects(first))
    assert rec.space_ is space
    rec.enroll(gallery.select_subjects(second))
    assert rec.space_ is space, "enroll() refitted the feature space"
    assert list(rec.classes_) == second
    probes2 = probes.select_subjects(second)
    s = rec.score(probes2)
    assert s.scores.shape == (len(probes2), len(second))
    assert np.array_equal(s.probe_ids, probes2.sample_ids)
    fresh = cls().fit(attacker).enroll(gallery.select_subjects(second)).score(probes2)
    np.testing.assert_allclose(s.scores, fresh.scores, rtol=1e-5, atol=1e-6)


def test_fit_learns_from_the_training_set_not_the_gallery(sets):
    attacker, gallery, _ = sets
    a, b = LdaCosine().fit(attacker), LdaCosine().fit(gallery)
    assert not np.allclose(a.embed(gallery), b.embed(gallery))
    np.testing.assert_array_equal(a.embed(gallery), LdaCosine().fit(attacker).enroll(gallery).embed(gallery))


@pytest.mark.parametrize("cls", [PcaSvm, LdaCosine, LogisticRegression], ids=lambda c: c.id)
def test_attribute_labels(cls, sets):
    attacker, gallery, probes = sets
    rec = cls().fit(attacker, "group").enroll(gallery, "group")
    assert list(rec.score(probes).classes) == ["a", "b"]
    assert accuracy(rec, probes, "group") >= 0.85


def test_score_before_enroll_is_a_clear_error():
    with pytest.raises(RuntimeError, match="enroll"):
        PcaSvm().score(make_table())


def test_knn_scores_rarely_tie(sets):
    attacker, gallery, probes = sets
    for k in (1, 3):
        s = NearestNeighbors(k=k).fit(attacker).enroll(gallery).score(probes).scores
        distinct = np.array([len(np.unique(row)) for row in s])
        assert (distinct == s.shape[1]).mean() > 0.99
    s3 = NearestNeighbors(k=3, metric="cosine").fit(attacker).enroll(gallery).score(probes)
    assert accuracy(NearestNeighbors(k=3).fit(attacker).enroll(gallery), probes) >= 0.6
    assert s3.scores.max() <= 1e-6  # minus a cosine distance


def test_feature_space_components():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((200, 3)) @ rng.standard_normal((3, 10))).astype(np.float32)
    x += 1e-3 * rng.standard_normal(x.shape).astype(np.float32)
    assert FeatureSpace.pca(x, 0.99, standardize=False).projection.shape == (10, 3)
    assert FeatureSpace.pca(x, 2).projection.shape == (10, 2)
    assert FeatureSpace.pca(x, 1.0).projection.shape[1] == 10
    assert FeatureSpace.pca(x[:5], 50).projection.shape[1] == 4  # capped by the rank


def _rotate_and_scale(table: SampleTable, seed: int = 5) -> SampleTable:
    """A deterministic 'anonymization': per-feature scaling then a fixed random rotation."""
    rng = np.random.default_rng(seed)
    x = table.payload("features")
    rot, _ = np.linalg.qr(rng.standard_normal((x.shape[1], x.shape[1])))
    scale = np.exp(rng.uniform(-1.5, 1.5, x.shape[1]))
    return table.with_payload("features", ((x * scale) @ rot).astype(np.float32))


def test_lda_parrot_beats_naive(sets):
    attacker, gallery, probes = sets
    anon_gallery, anon_probes = _rotate_and_scale(gallery), _rotate_and_scale(probes)
    naive = accuracy(LdaCosine().fit(attacker).enroll(anon_gallery), anon_probes)
    parrot = accuracy(LdaCosine().fit(_rotate_and_scale(attacker)).enroll(anon_gallery), anon_probes)
    assert parrot >= 0.85 and parrot >= naive + 0.15, f"parrot {parrot:.2f}, naive {naive:.2f}"


def test_image_payload_is_flattened():
    table = make_table(payload="image", n_subjects=4, samples_per_subject=6)
    gallery, probes = table.split_within_subjects([0.5, 0.5], seed=0)
    assert accuracy(LdaCosine().fit(table).enroll(gallery), probes) >= 0.9
    assert PcaSvm().fit(table).embed(probes).shape[0] == len(probes)


@pytest.mark.parametrize("shape", [(300, 40), (25, 60)])
def test_gram_svd_matches_numpy_svd(shape):
    from bioanon.builtin.recognizers import _gram_svd

    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) @ np.diag(np.linspace(1, 5, shape[1]))
    s, vt = _gram_svd(x)
    _, s_ref, vt_ref = np.linalg.svd(x, full_matrices=False)
    k = min(shape)
    np.testing.assert_allclose(s[:k], s_ref, rtol=1e-6)
    np.testing.assert_allclose(np.abs((vt[:k] * vt_ref).sum(1)), 1.0, atol=1e-6)  # same directions up to sign


def test_lda_training_set_with_one_value_names_it():
    from bioanon.errors import TableError

    table = bioanon.load_dataset("any.synthetic", n_subjects=6, samples_per_subject=6, seed=0)
    only_a = table.filter(table.attribute("group") == table.attribute("group")[0])
    with pytest.raises(TableError, match=r"any\.lda_cosine: fit\(\) .*'group'.*only \["):
        bioanon.get_method("any.lda_cosine").fit(only_a, "group")
