"""The evaluation protocol of utility-preserving-anonymization.txt §5.1.3/§5.2: attribute accuracy, mixture,
top-k mixture, KL from random guess, nearest-original re-identification."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.builtin.protocol import nearest_original_reid, paper_protocol
from bioanon.errors import TableError


@pytest.fixture(scope="module")
def data():
    return bioanon.load_dataset("any.synthetic", n_subjects=12, samples_per_subject=12, seed=3)


def _noisy(table, sigma, seed=1):
    x = table.payload("features")
    rng = np.random.default_rng(seed)
    return table.with_payload("features", (x + sigma * x.std() * rng.standard_normal(x.shape)).astype(np.float32))


def test_identity_transform(data):
    r = paper_protocol(data, data, "activity", k=(1, 5))
    assert r["mixture"] <= 0.05 and r["mixture"] == r["mixture_clear"]
    assert r["top_k_mixture"][1] == pytest.approx(r["mixture"]) and r["top_k_mixture"][5] <= r["mixture"]
    assert r["attribute_accuracy"] >= 0.9 and r["attribute_accuracy"] == r["attribute_accuracy_clear"]
    assert r["attribute_chance"] < 0.5
    assert r["n_classes"] == 12 and r["n_train"] + r["n_test"] == len(data) and r["n_test_sensitive"] == r["n_test"]
    assert r["random_top_k_mixture"] == {1: pytest.approx(11 / 12), 5: pytest.approx(7 / 12)}
    assert r["kl_from_uniform"] > 0.5  # the attacker is confident
    assert nearest_original_reid(data, data) == (1.0, 1.0)


def test_heavy_noise_reaches_random_guess(data):
    r = paper_protocol(data, _noisy(data, 50.0), "activity")
    assert abs(r["mixture"] - (1 - 1 / 12)) <= 0.1, r["mixture"]
    assert r["mixture_clear"] <= 0.05  # the classifier itself is good
    assert r["attribute_accuracy"] <= r["attribute_chance"] + 0.15
    assert abs(r["top_k_mixture"][5] - r["random_top_k_mixture"][5]) <= 0.15
    top1, top5 = nearest_original_reid(data, _noisy(data, 50.0))
    assert top1 <= 0.05 and top5 <= 0.12


def test_kl_from_random_guess_falls_with_noise(data):
    kl = [paper_protocol(data, _noisy(data, s), None)["kl_from_uniform"] for s in (0.0, 1.0, 4.0)]
    assert kl[0] > kl[1] > kl[2] >= 0.0, kl
    mix = [paper_protocol(data, _noisy(data, s), None)["mixture"] for s in (0.0, 1.0, 4.0)]
    assert mix[0] < mix[1] < mix[2], mix


def test_training_choices(data):
    train, test = data.split_within_subjects([0.5, 0.5], seed=7)
    anon = _noisy(test, 1.0)
    given = paper_protocol(test, anon, "activity", train=train)
    assert given["n_train"] == len(train) and given["n_test"] == len(test) and given["holdout"] is None
    # holdout 0: train and test on the same records (with an identity transform: the training accuracy)
    same = paper_protocol(data, data, "activity", holdout=0.0)
    assert same["n_train"] == same["n_test"] == len(data) and same["mixture"] == 0.0
    assert same["attribute_accuracy"] == 1.0
    # rows in any order: matched by sample id
    shuffled = _noisy(data, 1.0).take(np.random.default_rng(0).permutation(len(data)))
    assert paper_protocol(data, shuffled, "activity") == paper_protocol(data, _noisy(data, 1.0), "activity")
    with pytest.raises(ValueError, match="holdout"):
        paper_protocol(data, data, None, holdout=1.0)
    with pytest.raises(ValueError, match="unknown classifier"):
        paper_protocol(data, data, None, identity_classifier="bayes")
    with pytest.raises(TableError, match="sample ids"):
        paper_protocol(data, data.take(np.arange(10)), None)


@pytest.mark.parametrize("classifier", ["mlp", "logistic_regression", "knn"])
def test_identity_classifiers(data, classifier):
    clear = paper_protocol(data, data, None, identity_classifier=classifier)
    noisy = paper_protocol(data, _noisy(data, 50.0), None, identity_classifier=classifier)
    assert clear["mixture"] <= 0.1 and noisy["mixture"] >= 0.75, (clear["mixture"], noisy["mixture"])


def test_sensitive_attribute(data):
    """Mixture of a sensitive attribute other than identity (§5.2.8: age, gender)."""
    r = paper_protocol(data, data, "activity", sensitive="group")
    assert r["n_classes"] == 2 and r["mixture"] <= 0.05
    noisy = paper_protocol(data, _noisy(data, 50.0), "activity", sensitive="group")
    assert noisy["mixture"] >= 0.3


def test_nearest_original_reid_ties_and_alignment(data):
    n = len(data)
    constant = data.with_payload("features", np.ones_like(data.payload("features")))
    top1, top5 = nearest_original_reid(data, constant, k=5)
    assert top1 == pytest.approx(1 / n) and top5 == pytest.approx(5 / n)  # ties count in expectation: chance
    anon = _noisy(data, 0.5)
    shuffled = anon.take(np.random.default_rng(1).permutation(n))
    assert nearest_original_reid(data, shuffled) == nearest_original_reid(data, anon)
    # a uniform rescaling does not change cosines
    scaled = data.with_payload("features", data.payload("features") * 3.0)
    assert nearest_original_reid(data, scaled) == (1.0, 1.0)
    with pytest.raises(ValueError, match="k must be"):
        nearest_original_reid(data, data, k=0)


def test_bad_arguments_are_bioanon_errors_naming_the_parameter(data):
    from bioanon.errors import BioanonError

    for kw, name in (
        ({"holdout": 1.0}, "holdout"),
        ({"k": (0,)}, "k"),
        ({"identity_classifier": "bayes"}, "identity_classifier"),
    ):
        with pytest.raises(BioanonError, match=f"paper_protocol: parameter '{name}'"):
            paper_protocol(data, data, None, **kw)
    with pytest.raises(BioanonError, match="nearest_original_reid: parameter 'k'"):
        nearest_original_reid(data, data, k=0)
