"""face.arcface: a timm backbone trained from scratch with the ArcFace loss ("ArcFace Retrained")."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import bioanon
from bioanon.errors import ParameterError
from bioanon.testing import check_method

torch = pytest.importorskip("torch")
pytest.importorskip("timm")

from bioanon_face.arcface import ArcFace  # noqa: E402

FAST = {"size": 32, "width": 8, "embedding_dim": 32, "threads": 1}


def _top1(rec, gallery, probes) -> float:
    return float(np.mean(rec.enroll(gallery).score(probes).predict() == probes.subjects))


def test_registered_and_conforms():
    assert bioanon.get_registry().get("face.arcface") is ArcFace
    report = check_method(ArcFace)
    assert report.raise_for_failures().checks_run >= 20


@pytest.fixture(scope="module")
def synthetic():
    t = bioanon.load_dataset("face.synthetic", n_subjects=10, samples_per_subject=8, size=(32, 32), seed=3)
    return t.split_within_subjects([0.5, 0.5], seed=0)  # (train and gallery, probes)


def test_identifies_synthetic_faces_deterministically(synthetic):
    train, probes = synthetic
    rng_state = torch.random.get_rng_state()
    a = ArcFace(epochs=25, **FAST).fit(train)
    assert torch.equal(torch.random.get_rng_state(), rng_state)
    h = a.history_
    assert h[-1]["train_loss"] < 0.5 * h[0]["train_loss"], (h[0], h[-1])
    acc = _top1(a, train, probes)
    assert acc > 5 * 0.1, acc  # 10 subjects: chance 0.1
    s1 = a.score(probes).scores
    s2 = ArcFace(epochs=25, **FAST).fit(train).enroll(train).score(probes).scores
    np.testing.assert_array_equal(s1, s2)
    s3 = ArcFace(epochs=25, seed=1, **FAST).fit(train).enroll(train).score(probes).scores
    assert not np.array_equal(s1, s3)
    e = a.embed(probes)
    assert e.shape == (len(probes), 32)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-5)


def test_grey_images_and_channel_conversion(synthetic):
    train, probes = synthetic
    grey = train.with_payload(
        "image",
        np.rint(train.payload("image").astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))
        .clip(0, 255)
        .astype(np.uint8)[..., None],
    )
    m = ArcFace(epochs=2, **FAST).fit(grey)
    assert m.channels_ == 1 and m.model_.backbone.conv1.in_channels == 1
    e_grey = m.embed(grey)
    e_rgb = m.embed(train)  # colour probes are converted to grey: the same images give the same embeddings
    np.testing.assert_allclose(e_rgb, e_grey, atol=1e-5)
    assert m.enroll(grey).score(probes).scores.shape == (len(probes), 10)


def test_other_backbones_and_parameter_errors(synthetic):
    train, _ = synthetic
    m = ArcFace(backbone="mobilenetv3_small_050", width=0, epochs=1, size=32, embedding_dim=8, threads=1)
    assert m.fit(train).embed(train).shape == (len(train), 8)
    with pytest.raises(ParameterError, match="face.arcface.*'backbone'.*no_such_net"):
        ArcFace(backbone="no_such_net", epochs=1, **FAST).fit(train)
    with pytest.raises(ParameterError, match="face.arcface.*'width'"):
        ArcFace(backbone="mobilenetv3_small_050", epochs=1, threads=1).fit(train)
    with pytest.raises(RuntimeError, match="fit"):
        ArcFace().embed(train)


def test_without_torch_fails_clearly(monkeypatch, synthetic):
    rec = bioanon.get_method("face.arcface")  # listing and constructing never import torch
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="face.arcface needs torch.*bioanon-face\\[torch\\]"):
        rec.fit(synthetic[0])


@pytest.mark.slow
def test_orl_identification_far_above_chance(shared_data):
    """ORL, 64×64 grey. Closed set: trained and enrolled on images 1–5 of all 40 subjects, probes images 6–10
    (chance 1/40). Open set (reported): trained on 20 subjects, enrolment/probes of the other 20 (chance 1/20)."""
    orl = bioanon.load_dataset("face.orl", shared_data / "att_faces")
    idx = orl.attribute("image_index")
    train, probes = orl.filter(idx <= 5), orl.filter(idx > 5)
    closed = _top1(ArcFace(epochs=30, threads=1).fit(train), train, probes)
    chance = 1 / 40
    print(f"face.arcface ORL closed-set top-1 {closed:.3f} (chance {chance:.3f})")
    assert closed > 20 * chance, closed  # measured 0.94 (seed 0)

    attacker, evaluation = orl.split_subjects([0.5, 0.5], seed=0)
    assert not set(attacker.subjects) & set(evaluation.subjects)
    e_idx = evaluation.attribute("image_index")
    open_set = _top1(
        ArcFace(epochs=30, threads=1).fit(attacker), evaluation.filter(e_idx <= 5), evaluation.filter(e_idx > 5)
    )
    print(f"face.arcface ORL open-set top-1 {open_set:.3f} (chance {1 / evaluation.num_subjects:.3f})")
    assert open_set > 3 / evaluation.num_subjects, open_set  # measured 0.77 (seed 0)
