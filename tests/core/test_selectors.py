"""Subject selectors (false-sense-of-privacy §4.3.3): contract, determinism, errors, and each strategy's choice."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.builtin.selectors import (
    CenterSelection,
    ClassificationSelection,
    DistinctiveSelection,
    MetadataSelection,
    RandomSelection,
    spread_greedy,
)
from bioanon.errors import TableError
from bioanon.methods import Recognizer
from bioanon.metrics import label_indices, per_subject_accuracy
from bioanon.table import SampleTable
from bioanon.testing import check_method, make_table

ALL = [RandomSelection, ClassificationSelection, MetadataSelection, DistinctiveSelection, CenterSelection]
ALIASES = {
    "random": RandomSelection,
    "classification": ClassificationSelection,
    "metadata": MetadataSelection,
    "distinctive": DistinctiveSelection,
    "center": CenterSelection,
}


@pytest.fixture(scope="module")
def sets():
    table = bioanon.load_dataset("any.synthetic", n_subjects=24, samples_per_subject=8, seed=3)
    attacker, evaluation = table.split_subjects([0.5, 0.5], seed=0)
    return attacker, evaluation


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.id)
def test_conforms(cls):
    assert check_method(cls).raise_for_failures().checks_run >= 9


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases(alias):
    assert type(bioanon.get_method(alias)) is ALIASES[alias]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.id)
def test_contract(cls, sets):
    attacker, evaluation = sets
    sel = cls().select(evaluation, 5, attacker=attacker)
    assert len(sel) == 5 and len(set(sel)) == 5 and set(sel) <= set(evaluation.subject_names)
    assert all(isinstance(s, str) for s in sel)
    assert cls().select(evaluation, 5, attacker=attacker) == sel, "not deterministic"
    shuffled = evaluation.take(np.random.default_rng(0).permutation(len(evaluation)))
    assert cls().select(shuffled, 5, attacker=attacker) == sel, "depends on the row order"
    assert sorted(cls().select(evaluation, evaluation.num_subjects, attacker=attacker)) == evaluation.subject_names
    with pytest.raises(TableError, match=r"n=13 .* 12 subjects"):
        cls().select(evaluation, 13, attacker=attacker)
    with pytest.raises(TableError, match="positive"):
        cls().select(evaluation, 0, attacker=attacker)


@pytest.mark.parametrize("cls", [ClassificationSelection, DistinctiveSelection], ids=lambda c: c.id)
def test_attacker_required(cls, sets):
    with pytest.raises(TableError, match="attacker"):
        cls().select(sets[1], 3)


def test_random_depends_on_seed(sets):
    evaluation = sets[1]
    picks = {tuple(RandomSelection(seed=s).select(evaluation, 4)) for s in range(5)}
    assert len(picks) > 1


def test_recognizer_errors(sets, monkeypatch):
    attacker, evaluation = sets
    with pytest.raises(bioanon.UnknownMethodError):
        ClassificationSelection(recognizer="any.no_such").select(evaluation, 2, attacker=attacker)
    with pytest.raises(bioanon.UnknownMethodError):
        CenterSelection(recognizer="any.select_random").select(evaluation, 2, attacker=attacker)  # not a recognizer

    class Plain(Recognizer):
        """A recognizer without an embedding."""

    import bioanon.builtin.selectors as mod

    monkeypatch.setattr(mod, "_recognizer", lambda rid: Plain())
    with pytest.raises(TableError, match="no embedding"):
        CenterSelection().select(evaluation, 2, attacker=attacker)


def _mixed_separability(seed: int):
    """4 well separated subjects ('e*': low noise) among 8 confusable ones ('h*'), plus an attacker set."""
    rng = np.random.default_rng(seed)
    d, k = 12, 8

    def make(prefix_noise):
        subjects, xs = [], []
        for name, noise in prefix_noise:
            centre = rng.standard_normal(d) * 1.5
            xs.append(centre + noise * rng.standard_normal((k, d)))
            subjects += [name] * k
        x = np.vstack(xs).astype(np.float32)
        return SampleTable.from_arrays(
            subject=np.array(subjects),
            payloads={"features": x},
            sample_id=np.array([f"{s}-{i}" for i, s in enumerate(subjects)]),
        )

    evaluation = make([(f"e{i}", 0.1) for i in range(4)] + [(f"h{i}", 2.5) for i in range(8)])
    attacker = make([(f"a{i}", 0.6) for i in range(12)])
    return attacker, evaluation


@pytest.mark.parametrize("recognizer", ["any.lda_cosine", "any.pca_svm"])
def test_classification_picks_the_most_identifiable(recognizer):
    attacker, evaluation = _mixed_separability(0)
    sel = ClassificationSelection(recognizer=recognizer).select(evaluation, 4, attacker=attacker)
    assert sorted(sel) == ["e0", "e1", "e2", "e3"]
    # independently measured (another split), their accuracy is above the average
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=99)
    s = bioanon.get_method(recognizer).fit(attacker).enroll(gallery).score(probes)
    acc = per_subject_accuracy(s.scores, label_indices(probes.subjects, s.classes))
    chosen = np.isin(s.classes, sel)
    assert acc[chosen].mean() > acc.mean() + 0.2


def _metadata_table():
    # per subject: age and sex (2 samples each); see test_metadata_hand_built for the expected order
    ages = {"a": 20, "b": 80, "c": 40, "d": 21, "e": 78, "f": 30}
    sex = {"a": "f", "b": "m", "c": "f", "d": "f", "e": "m", "f": "m"}
    subjects = np.repeat(list(ages), 2)
    return SampleTable.from_arrays(
        subject=subjects,
        payloads={"features": np.zeros((len(subjects), 2), np.float32)},
        attributes={"age": np.array([ages[s] for s in subjects]), "sex": np.array([sex[s] for s in subjects])},
    )


def test_metadata_hand_built():
    table = _metadata_table()
    m = MetadataSelection().metadata_matrix(table)
    assert m.shape == (6, 3)  # normalized age + one-hot sex
    np.testing.assert_allclose(m[:, 0], (np.array([20, 80, 40, 21, 78, 30]) - 20) / 60)
    # farthest pair (a, b) with b (farther from the mean age 44.8) first; then d (age 21, f) is farthest from
    # the mean of {a, b}; then e (78, m) is farthest from the mean of {a, b, d}
    assert MetadataSelection().select(table, 4) == ["b", "a", "d", "e"]
    assert MetadataSelection().select(table, 1) == ["b"]
    assert MetadataSelection(attributes=("age",)).select(table, 2) == ["b", "a"]
    # the first pair is the farthest pair in the metadata space
    d = np.linalg.norm(m[:, None] - m[None], axis=-1)
    first = [table.subject_names.index(s) for s in MetadataSelection().select(table, 2)]
    assert d[first[0], first[1]] == d.max()
    with pytest.raises(TableError, match="no attribute column 'attr.height'"):
        MetadataSelection(attributes=("height",)).select(table, 2)


def test_metadata_first_pair_spans_the_range():
    table = bioanon.load_dataset("any.synthetic", n_subjects=40, samples_per_subject=2, seed=0)
    m = MetadataSelection(attributes=("age",)).metadata_matrix(table)[:, 0]
    idx = [table.subject_names.index(s) for s in MetadataSelection(attributes=("age",)).select(table, 2)]
    assert {m[idx].min(), m[idx].max()} == {0.0, 1.0}


def _points_table(means, k=3, spread=0.1):
    """Subjects 'p0', 'p1', ... with k samples symmetric around 1-D means (so the sample means are exact)."""
    offsets = np.linspace(-spread, spread, k)
    x = np.concatenate([m + offsets for m in means])[:, None].astype(np.float32)
    subjects = np.repeat([f"p{i}" for i in range(len(means))], k)
    return SampleTable.from_arrays(subject=subjects, payloads={"features": x})


def test_center_hand_built():
    table = _points_table([0.0, 1.0, 2.0, 10.0, 3.0])
    # farthest pair (0, 10); 10 is farther from the mean 3.2; then 1 is farthest from 5; then 2 from 3.67
    assert CenterSelection(recognizer="").select(table, 4) == ["p3", "p0", "p1", "p2"]
    assert CenterSelection(recognizer="").select(table, 1) == ["p3"]
    assert spread_greedy(np.array([[0.0], [1.0], [2.0], [10.0], [3.0]]), 5) == [3, 0, 1, 2, 4]


def test_distinctive_hand_built():
    # p0 is tight and far from everyone; p1 is tight but next to p2; p2 is wide
    table = _points_table([100.0, 0.0, 3.0], k=3, spread=1.0)
    x = table.payload("features").copy()
    x[6:9, 0] = [2.0, 3.0, 6.0]  # p2: mean 11/3, wide (genuine 7/3), and closer to p1 (imposter 8/3)
    table = table.with_payload("features", x)
    sel = DistinctiveSelection(recognizer="")
    genuine, imposter = sel.scores(table, attacker=None)
    scale = genuine[1] / 1.0  # the payload space is standardized: distances scale uniformly in 1-D
    np.testing.assert_allclose(genuine / scale, [1.0, 1.0, 7 / 3])
    np.testing.assert_allclose(imposter / scale, [94.0, 2.0, 8 / 3])  # margins 93 > 1 > 1/3
    assert sel.select(table, 3) == ["p0", "p1", "p2"]


def test_distinctive_picks_separable_subjects():
    attacker, evaluation = _mixed_separability(1)
    sel = DistinctiveSelection().select(evaluation, 4, attacker=attacker)
    assert sum(s.startswith("e") for s in sel) >= 3


def test_center_in_a_learned_embedding_uses_the_attacker_set():
    attacker, evaluation = _mixed_separability(2)
    a = CenterSelection().select(evaluation, 4, attacker=attacker)
    b = CenterSelection().select(evaluation, 4)  # embedding fitted on the evaluation table itself
    assert len(set(a)) == len(set(b)) == 4


def test_classification_on_the_default_table():
    table = make_table(n_subjects=6, samples_per_subject=6)
    assert len(ClassificationSelection(repeats=1).select(table, 6, attacker=table)) == 6
