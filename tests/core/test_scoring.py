"""Metric rows of one score matrix (issue 18, items 2 and 4): undefined metrics are rows with a note, balanced
accuracy has a CI and uniform chance beside the majority-rate chance of plain accuracy."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from bioanon.evaluation.scoring import score_metrics


def _scores(n_subjects=8, per=3, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"s{i}" for i in range(n_subjects)], per)
    return rng, groups, np.array([f"s{i}" for i in range(n_subjects)])


def _rows(rows):
    return {r["metric"]: r for r in rows}


def test_undefined_linkability_and_verification_are_rows_with_a_note():
    rng, groups, classes = _scores(n_subjects=6, per=2)  # 12 mated scores < 20: linkability undefined
    S = rng.normal(size=(groups.size, classes.size)) + 2.0 * (groups[:, None] == classes[None, :])
    rows = _rows(score_metrics(SimpleNamespace(scores=S, classes=classes), groups, groups, bootstrap=100))
    link = rows["linkability"]
    assert math.isnan(link["value"]) and "12 mated scores" in link["note"] and "20" in link["note"]
    assert not math.isnan(rows["eer"]["value"]) and rows["eer"]["note"] == ""
    # a single class: no non-mated scores, EER / min Cllr / linkability undefined, still rows
    S1 = rng.normal(size=(10, 1))
    one = _rows(
        score_metrics(
            SimpleNamespace(scores=S1, classes=np.array(["a"])),
            np.array(["a"] * 10),
            np.repeat(["s0", "s1"], 5),
            bootstrap=50,
            attribute=True,
        )
    )
    for metric in ("eer", "min_cllr", "linkability", "cna1"):
        assert math.isnan(one[metric]["value"]) and one[metric]["note"].startswith("undefined"), one[metric]
    # few subjects: the CI is flagged as approximate
    assert "approximate" in rows["top1"]["note"]


def test_attribute_rows_balanced_accuracy_with_ci_and_both_chance_levels():
    rng = np.random.default_rng(1)
    n_subj, per = 30, 4
    groups = np.repeat(np.arange(n_subj).astype(str), per)
    sex = np.where(np.arange(n_subj) < 24, "f", "m")[np.repeat(np.arange(n_subj), per)]  # 80 % f
    classes = np.array(["f", "m"])
    # a majority guesser: always scores "f" higher
    S = np.tile([1.0, 0.0], (groups.size, 1)) + 0.01 * rng.normal(size=(groups.size, 2))
    S[:, 1] = np.minimum(S[:, 1], 0.5)
    rows = _rows(score_metrics(SimpleNamespace(scores=S, classes=classes), sex, groups, bootstrap=200, attribute=True))
    assert rows["top1"]["value"] == 0.8 and rows["top1"]["chance"] == 0.8  # plain accuracy = majority rate
    bal = rows["balanced_accuracy"]
    assert bal["value"] == 0.5 and bal["chance"] == 0.5  # uniform chance, where the guesser sits
    # a real attacker: balanced accuracy gets a bootstrap CI over subjects around its value
    S2 = (sex[:, None] == classes[None, :]).astype(float) + rng.normal(scale=0.8, size=(groups.size, 2))
    bal2 = _rows(
        score_metrics(SimpleNamespace(scores=S2, classes=classes), sex, groups, bootstrap=200, attribute=True)
    )["balanced_accuracy"]
    assert bal2["ci_low"] < bal2["value"] < bal2["ci_high"]
