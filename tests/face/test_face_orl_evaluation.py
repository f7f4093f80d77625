"""H1 on ORL: the parrot attacker (trained and enrolled on anonymized faces) beats the naive one on Gaussian blur
and block permutation; clear-level identification is far above chance. Images at 56×46 to stay fast."""

from __future__ import annotations

import pytest

import bioanon

RECOGNIZERS = ("any.lda_cosine", "any.pca_svm", "face.eigenfaces")


def _config(root) -> dict:
    return {
        "name": "orl-h1",
        "seed": 0,
        "repeats": 2,
        "scenarios": ["naive", "parrot"],
        "dataset": {"source": "face.orl", "path": str(root), "params": {"size": [56, 46]}},
        "rates": {"background": 0.1, "attacker": 0.45, "evaluation": 0.45, "enrolment": 0.5},
        "anonymizers": [
            {"id": "face.gaussian_blur", "name": "blur", "params": {"kernel": 31}},
            {"id": "face.block_permutation", "name": "permutation", "params": {"block_size": 8}},
        ],
        "recognizers": [{"id": r} for r in RECOGNIZERS],
        "selection": {"selectors": ["random"]},
        "report": {"bootstrap": 0},
    }


_RESULTS: dict = {}


@pytest.fixture
def top1(shared_data):
    """Mean top-1 per (anonymizer, recognizer, scenario) and chance; evaluated once per module."""
    if "table" not in _RESULTS:
        result = bioanon.evaluate(_config(shared_data / "att_faces"), out_dir=None, progress=False)
        assert not result.failures, result.failures
        m = result.metrics
        m = m[m.metric == "top1"]
        _RESULTS["table"] = (m.groupby(["anonymizer", "recognizer", "scenario"]).value.mean(), float(m.chance.mean()))
    return _RESULTS["table"]


def test_clear_level_far_above_chance(top1):
    table, chance = top1
    clear = table.xs("clear", level="scenario")
    assert chance == pytest.approx(1 / 18)  # 18 evaluation subjects
    assert clear[("blur", "face.eigenfaces")] > 0.9  # measured 0.98
    assert clear.min() > 0.85, clear


@pytest.mark.parametrize("anonymizer, margin", [("blur", 0.05), ("permutation", 0.5)])
def test_parrot_beats_naive(top1, anonymizer, margin):
    table, _ = top1
    for recognizer in RECOGNIZERS:
        naive = table[(anonymizer, recognizer, "naive")]
        parrot = table[(anonymizer, recognizer, "parrot")]
        assert parrot > naive + margin, (anonymizer, recognizer, naive, parrot)


def test_block_permutation_parrot_reaches_clear_level(top1):
    table, chance = top1
    for recognizer in RECOGNIZERS:
        clear = table[("permutation", recognizer, "clear")]
        assert table[("permutation", recognizer, "parrot")] >= clear - 0.02
        assert table[("permutation", recognizer, "naive")] < 0.4
