"""face.perceptual_similarity: LPIPS-like similarity from a self-supervised (identity-free) backbone."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.table import SampleTable
from bioanon.testing import check_method

torch = pytest.importorskip("torch")

from bioanon_face.perceptual import PerceptualSimilarity  # noqa: E402

FAST = {"size": 32, "epochs": 8, "threads": 1}


def test_registered_and_conforms():
    assert bioanon.get_registry().get("face.perceptual_similarity") is PerceptualSimilarity
    report = check_method(PerceptualSimilarity)
    assert report.raise_for_failures().checks_run >= 15 and "per_sample_values" in report.passed


@pytest.fixture(scope="module")
def faces():
    t = bioanon.load_dataset("face.synthetic", n_subjects=16, samples_per_subject=5, size=(40, 40), seed=2)
    return t.split_subjects([0.5, 0.5], seed=0)  # (clear attacker set to fit on, evaluation set)


@pytest.fixture(scope="module")
def fitted(faces):
    return PerceptualSimilarity(**FAST).fit(faces[0])


def test_identical_images_score_one(fitted, faces):
    _, ev = faces
    v = fitted.measure(ev, ev)
    assert v.shape == (len(ev),)
    np.testing.assert_allclose(v, 1.0, atol=1e-6)
    h = fitted.history_
    assert h[-1]["train_loss"] < 0.7 * h[0]["train_loss"], (h[0], h[-1])  # the autoencoder learned


def test_decreases_monotonically_with_blur(fitted, faces):
    _, ev = faces
    kernels = (3, 7, 15, 31)
    per_sample = np.stack(
        [fitted.measure(ev, bioanon.get_method("face.gaussian_blur", kernel=k).transform(ev)) for k in kernels]
    )
    means = per_sample.mean(axis=1)
    print(
        "face.perceptual_similarity vs blur kernel",
        dict(zip(kernels, np.round(means, 4), strict=True)),
        "floor",
        round(fitted.floor(ev), 4),
    )
    assert np.all(np.diff(means) < 0), means
    assert np.mean(np.diff(per_sample, axis=0) < 0) > 0.95  # nearly every image, at every step
    assert means[0] < 1.0 and fitted.floor(ev) < means[-1]  # unrelated faces are less similar than blurred ones


def test_rows_matched_by_sample_id_and_unfitted_error(fitted, faces):
    _, ev = faces
    blurred = bioanon.get_method("face.gaussian_blur", kernel=15).transform(ev)
    v = fitted.measure(ev, blurred)
    reversed_rows = blurred.take(np.arange(len(blurred))[::-1])
    np.testing.assert_allclose(fitted.measure(ev, reversed_rows), v, atol=1e-6)
    assert np.std(v) > 0  # per-sample values, not one number
    with pytest.raises(RuntimeError, match="fit"):
        PerceptualSimilarity().measure(ev, ev)


def test_identity_free_and_deterministic(faces):
    """fit() never looks at the identities: relabelled subjects give the same model, to the bit."""
    train, ev = faces
    relabelled = SampleTable.from_arrays(
        subject=np.array([f"x{i}" for i in range(len(train))]),
        sample_id=train.sample_ids,
        payloads={"image": train.payload("image")},
    )
    small = dict(FAST, epochs=2)
    blurred = bioanon.get_method("face.gaussian_blur", kernel=9).transform(ev)
    a = PerceptualSimilarity(**small).fit(train).measure(ev, blurred)
    b = PerceptualSimilarity(**small).fit(relabelled).measure(ev, blurred)
    c = PerceptualSimilarity(**dict(small, seed=1)).fit(train).measure(ev, blurred)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_grey_images(faces):
    train, ev = faces
    grey = train.with_payload("image", train.payload("image")[..., :1].copy())
    m = PerceptualSimilarity(**dict(FAST, epochs=1)).fit(grey)
    assert m.channels_ == 1
    np.testing.assert_allclose(m.measure(ev, ev), 1.0, atol=1e-6)  # colour images converted to grey
