"""Gait recognizers: translation invariance, PCA sign fixing, composition with the core recognizers, the
temporal CNN (trained, so marked slow), and identification on the shared UCalgary data."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import bioanon
from bioanon_gait import features as F
from bioanon_gait.features import GaitFeatures


@pytest.fixture(scope="module")
def walkers():
    return bioanon.load_dataset("gait.synthetic", n_subjects=16, sequences_per_subject=6, frames=40, seed=3)


def _shifted(table, per_frame: bool, seed: int = 0):
    """The table with every sequence translated (per frame, or by one offset per sequence)."""
    rng = np.random.default_rng(seed)
    x = table.payload("pose")
    shape = (len(x), x.shape[1], 1, 3) if per_frame else (len(x), 1, 1, 3)
    return table.with_payload("pose", (x + rng.normal(scale=5.0, size=shape)).astype(np.float32))


@pytest.mark.parametrize("method_id", ["gait.svm", "gait.knn", "gait.random_forest"])
@pytest.mark.parametrize("features", ["flatten", "simple"])
def test_recognizers_are_translation_invariant(walkers, method_id, features):
    train, evaluation = walkers.split_subjects([0.5, 0.5], seed=0)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=0)
    params = {"features": features} | ({"n_estimators": 50} if method_id == "gait.random_forest" else {})
    clear = bioanon.get_method(method_id, **params).fit(train).enroll(gallery)
    moved = bioanon.get_method(method_id, **params).fit(_shifted(train, True, 1)).enroll(_shifted(gallery, True, 2))
    # the continuous part is invariant: the feature vectors the classifier sees
    np.testing.assert_allclose(
        moved.feature_table(_shifted(probes, True, 3)).payload("features"),
        clear.feature_table(probes).payload("features"),
        rtol=1e-3,
        atol=1e-3,
    )
    # scores and decisions pass through votes and thresholds (SVC's one-vs-one votes, tree splits): float
    # rounding of the shift may flip one on some CPUs/BLAS, so compare them by agreement, never exactly
    ref, got = clear.score(probes), moved.score(_shifted(probes, True, 3))
    close = np.isclose(got.scores, ref.scores, rtol=1e-3, atol=1e-3)
    assert close.mean() > 0.95, close.mean()
    assert np.mean(got.predict() == ref.predict()) > 0.9
    top1 = np.mean(ref.predict() == probes.subjects)
    assert top1 > 0.5  # chance: 1/8


def test_sequence_centering_keeps_the_path_but_not_the_place(walkers):
    x = walkers.payload("pose")
    moved = _shifted(walkers, False).payload("pose")
    f = GaitFeatures(kind="flatten", centering="sequence")
    np.testing.assert_allclose(f.transform(moved), f.transform(x), atol=1e-3)
    per_frame = _shifted(walkers, True).payload("pose")
    assert not np.allclose(f.transform(per_frame), f.transform(x), atol=1e-2)
    assert not np.allclose(GaitFeatures(centering="none").transform(moved), GaitFeatures(centering="none").transform(x))


def test_simple_features_fix_the_pca_sign(walkers, monkeypatch):
    x = walkers.payload("pose")
    f = GaitFeatures(kind="simple", n_pcs=2).fit(x)
    ref = f.transform(x)
    assert ref.shape == (len(x), 3 * 18 * 3)  # 2 principal pose directions + the mean pose
    v = ref[:, : 2 * 54].reshape(len(x), 2, 54)
    assert np.all(np.einsum("nkd,kd->nk", v, f.references_) >= 0)
    original = F.principal_directions

    def flipped(xx, k):  # what another SVD/eigensolver may return: some directions negated
        vv, mean = original(xx, k)
        signs = np.where(np.arange(len(vv)) % 2 == 0, -1.0, 1.0)[:, None, None]
        return vv * signs, mean

    monkeypatch.setattr(F, "principal_directions", flipped)
    np.testing.assert_allclose(f.transform(x), ref, atol=1e-6)
    monkeypatch.undo()
    # the references are learned on the training set: a transform of other data uses them
    g = GaitFeatures(kind="simple").fit(x[:30])
    np.testing.assert_array_equal(g.references_, GaitFeatures(kind="simple").fit(x[:30]).references_)


def test_svm_is_the_core_recognizer_on_gait_features(walkers):
    train, evaluation = walkers.split_subjects([0.5, 0.5], seed=1)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=1)
    gait = bioanon.get_method("gait.svm", features="simple").fit(train)
    ours = gait.enroll(gallery).score(probes)
    extractor = GaitFeatures(kind="simple").fit(train.payload("pose"))

    def feats(t):
        return t.with_payload("features", extractor.transform(t.payload("pose")), drop="pose")

    core = (
        bioanon.get_method("any.pca_svm", n_components=1.0)
        .fit(feats(train))
        .enroll(feats(gallery))
        .score(feats(probes))
    )
    np.testing.assert_allclose(ours.scores, core.scores)
    assert list(ours.classes) == list(core.classes)
    # the feature space comes from the attacker's training set, not from the gallery
    np.testing.assert_allclose(
        gait.inner_.space_.mean, feats(train).payload("features").mean(axis=0), rtol=1e-5, atol=1e-6
    )
    assert gait.embed(probes).shape[0] == len(probes)


def test_attribute_inference_with_the_same_contract():
    data = bioanon.load_dataset("gait.synthetic", n_subjects=40, sequences_per_subject=3, frames=30, seed=4)
    train, evaluation = data.split_subjects([0.5, 0.5], seed=2)
    rec = bioanon.get_method("gait.svm").fit(train, "sex").enroll(train, "sex")
    s = rec.score(evaluation)
    assert set(s.classes) == {"F", "M"} and s.scores.shape == (len(evaluation), 2)
    truth, pred = evaluation.attribute("sex"), s.predict()
    balanced = np.mean([np.mean(pred[truth == c] == c) for c in ("F", "M")])
    assert balanced > 0.7, balanced


# --------------------------------------------------------------------------------------------------- CNN


@pytest.mark.slow
def test_cnn_is_deterministic_and_enrols_unseen_subjects():
    pytest.importorskip("torch")
    data = bioanon.load_dataset("gait.synthetic", n_subjects=24, sequences_per_subject=6, frames=40, seed=5)
    train, evaluation = data.split_subjects([0.5, 0.5], seed=0)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=0)
    params = {"epochs": 25, "channels": 24, "seed": 1}
    a = bioanon.get_method("gait.cnn", **params).fit(train)
    s1 = a.enroll(gallery).score(probes)
    s2 = bioanon.get_method("gait.cnn", **params).fit(train).enroll(gallery).score(probes)
    np.testing.assert_array_equal(s1.scores, s2.scores)
    assert not set(gallery.subjects) & set(train.subjects)
    top1 = np.mean(s1.predict() == probes.subjects)
    assert top1 > 0.4, top1  # 12 unseen subjects: chance 1/12
    e = a.embed(probes)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-5)
    s3 = bioanon.get_method("gait.cnn", **(params | {"seed": 2})).fit(train).enroll(gallery).score(probes)
    assert not np.array_equal(s1.scores, s3.scores)


def test_cnn_without_torch_fails_clearly(monkeypatch, walkers):
    rec = bioanon.get_method("gait.cnn")  # listing and constructing never import torch
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"gait.cnn needs torch.*pip install 'bioanon-gait\[torch\]'"):
        rec.fit(walkers)


def test_importing_the_plugin_does_not_import_torch():
    import subprocess

    code = (
        "import sys, bioanon; bioanon.list_methods('gait.*'); bioanon.get_method('gait.cnn'); "
        "import bioanon_gait.plugin, bioanon_gait.cnn; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------- UCalgary


@pytest.mark.realdata
@pytest.mark.slow
def test_ucalgary_clear_identification_is_far_above_chance(shared_data):
    data = bioanon.load_dataset("gait.ucalgary", shared_data / "ucalgary_gait")
    accs = {}
    for features in ("flatten", "simple"):
        hits = []
        for seed in range(3):  # all 28 subjects, half of each subject's walks enrolled
            gallery, probes = data.split_within_subjects([0.5, 0.5], seed=seed)
            s = bioanon.get_method("gait.svm", features=features).enroll(gallery).score(probes)
            hits.append(np.mean(s.predict() == probes.subjects))
        accs[features] = float(np.mean(hits))
    assert max(accs.values()) > 0.6, accs  # chance 1/28 = 0.036
    assert min(accs.values()) > 0.45, accs
