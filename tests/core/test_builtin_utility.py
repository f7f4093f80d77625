"""Built-in utility measures: conformance, attribute accuracy vs its floor, cosine, SNR, sample-id alignment."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.builtin.utility import AttributeAccuracy, CosineSimilarity, Snr, align
from bioanon.errors import TableError
from bioanon.metrics import majority_chance
from bioanon.testing import check_method, make_table


@pytest.mark.parametrize(
    "cls, params",
    [(AttributeAccuracy, {"attribute": "group"}), (CosineSimilarity, {}), (Snr, {})],
    ids=lambda v: getattr(v, "id", ""),
)
def test_conforms(cls, params):
    assert check_method(cls, params=params).raise_for_failures().checks_run >= 10


@pytest.fixture(scope="module")
def sets():
    table = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=10, seed=2)
    train, evaluation = table.split_subjects([0.5, 0.5], seed=0)
    return train, evaluation


def _noise_like(table, seed=0):
    x = table.payload("features")
    rng = np.random.default_rng(seed)
    return table.with_payload("features", (rng.standard_normal(x.shape) * x.std()).astype(np.float32))


@pytest.mark.parametrize("classifier", ["random_forest", "logistic_regression", "knn"])
def test_attribute_accuracy_clear_vs_destroyed(classifier, sets):
    train, evaluation = sets
    m = AttributeAccuracy(attribute="activity", classifier=classifier).fit(train)
    clear = m.measure(evaluation, evaluation)
    assert clear.shape == (len(evaluation),) and set(np.unique(clear)) <= {0.0, 1.0}
    assert clear.mean() >= 0.9
    floor = m.floor(evaluation)
    assert floor == majority_chance(evaluation.attribute("activity"))
    destroyed = m.measure(evaluation, _noise_like(evaluation)).mean()
    assert destroyed <= floor + 0.12, f"accuracy {destroyed:.2f} on noise, floor {floor:.2f}"


def test_attribute_accuracy_errors(sets):
    train, evaluation = sets
    with pytest.raises(TableError, match=r"'attribute'.*\['group', 'activity', 'age'\]"):
        AttributeAccuracy().fit(train)
    with pytest.raises(TableError, match="no attribute column 'attr.height'"):
        AttributeAccuracy(attribute="height").fit(train)
    with pytest.raises(RuntimeError, match="fit"):
        AttributeAccuracy(attribute="group").measure(evaluation, evaluation)


def test_attribute_accuracy_ignores_null_labels(sets):
    train, evaluation = sets
    group = train.attribute("group").astype(object)
    group[:7] = None
    m = AttributeAccuracy(attribute="group").fit(train.with_attribute("group", group))
    ev_group = evaluation.attribute("group").astype(object)
    ev_group[0] = None
    values = m.measure(evaluation.with_attribute("group", ev_group), evaluation)
    assert np.isnan(values[0]) and np.isfinite(values[1:]).all()


def test_cosine_similarity():
    table = make_table()
    x = table.payload("features")
    m = CosineSimilarity()
    np.testing.assert_allclose(m.measure(table, table), 1.0, atol=1e-6)
    np.testing.assert_allclose(m.measure(table, table.with_payload("features", 3 * x)), 1.0, atol=1e-6)
    np.testing.assert_allclose(m.measure(table, table.with_payload("features", -x)), -1.0, atol=1e-6)
    zeros = table.with_payload("features", np.zeros_like(x))
    np.testing.assert_array_equal(m.measure(table, zeros), 0.0)
    np.testing.assert_array_equal(m.measure(zeros, zeros), 1.0)
    rng = np.random.default_rng(0)
    noisy = m.measure(table, table.with_payload("features", x + rng.standard_normal(x.shape).astype(np.float32)))
    assert 0.0 < noisy.mean() < 1.0
    assert m.floor(table) == 0.0 and m.higher_is_better and m.paired


def test_snr():
    table = make_table()
    x = table.payload("features")
    m = Snr()
    np.testing.assert_array_equal(m.measure(table, table), 100.0)
    assert Snr(max_db=60).measure(table, table).max() == 60.0
    # y = 1.1 x: the noise is 0.1 x, so the SNR is 10 log10(1 / 0.01) = 20 dB for every sample
    np.testing.assert_allclose(m.measure(table, table.with_payload("features", 1.1 * x)), 20.0, rtol=1e-4)
    rng = np.random.default_rng(0)
    e = rng.standard_normal(x.shape).astype(np.float32)
    means = [m.measure(table, table.with_payload("features", x + s * e)).mean() for s in (0.01, 0.1, 1.0, 10.0)]
    assert np.all(np.isfinite(means)) and np.all(np.diff(means) < 0)
    assert m.floor(table) == 0.0


def test_variable_length_audio():
    table = make_table(payload="audio")
    audio = table.payload("audio")
    longer = table.with_payload("audio", [np.r_[1.1 * a, np.ones(10, np.float32)] for a in audio])
    np.testing.assert_allclose(Snr().measure(table, longer), 20.0, rtol=1e-4)  # compared over the common length
    np.testing.assert_allclose(CosineSimilarity().measure(table, longer), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    "make", [lambda: Snr(), lambda: CosineSimilarity(), lambda: AttributeAccuracy(attribute="activity")]
)
def test_rows_are_aligned_by_sample_id(make, sets):
    train, evaluation = sets
    m = make().fit(train)
    rng = np.random.default_rng(0)
    anon = evaluation.with_payload("features", evaluation.payload("features") * 1.3 + 0.2)
    expected = m.measure(evaluation, anon)
    assert len(np.unique(expected)) > 1 or isinstance(m, AttributeAccuracy)
    shuffled = anon.take(rng.permutation(len(anon)))
    np.testing.assert_array_equal(m.measure(evaluation, shuffled), expected)
    with pytest.raises(TableError, match="same sample ids"):
        m.measure(evaluation, shuffled.take(np.arange(len(shuffled) - 1)))
    other = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=10, seed=2)
    renamed = other.take(np.arange(len(evaluation)))
    with pytest.raises(TableError, match="missing from anonymized"):
        m.measure(evaluation, renamed)


def test_align_returns_the_original_order():
    table = make_table()
    perm = np.random.default_rng(1).permutation(len(table))
    assert np.array_equal(align(table, table.take(perm)).sample_ids, table.sample_ids)
    assert align(table, table) is table


def test_registered():
    for mid in ("any.attribute_accuracy", "any.cosine_similarity", "any.snr"):
        assert bioanon.get_registry().get(mid, kind="utility")
    assert not AttributeAccuracy.paired and AttributeAccuracy.higher_is_better
