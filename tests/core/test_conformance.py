"""Conformance checks: every registered method passes, and the checks catch broken methods."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest

import bioanon
from bioanon import Anonymizer, Recognizer, param
from bioanon.testing import check_method


@pytest.mark.parametrize("method_id", bioanon.list_methods())
def test_every_registered_method_conforms(method_id):
    cls = bioanon.get_registry().get(method_id)
    report = check_method(cls)
    report.raise_for_failures()
    assert report.checks_run >= 8, str(report)


@attrs.define(kw_only=True)
class Sloppy(Anonymizer):
    """Shuffles rows (breaks the order contract), unseeded, with an unchecked parameter."""

    id: ClassVar[str] = "any.sloppy"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    amount: float = param(1.0, help="")
    ignored: int = param(1, help="a parameter the fingerprint forgets")

    def fingerprint(self) -> str:  # forgets 'ignored'
        return "constant"

    def transform(self, table):
        idx = np.random.default_rng().permutation(len(table))
        return table.take(idx)


def test_checks_catch_a_broken_method():
    report = check_method(Sloppy)
    failed = dict(report.failed)
    assert "params_have_help" in failed
    assert "fingerprint_changes_with_params" in failed
    assert "transform_keeps_sample_ids_and_order" in failed
    assert "seeded_determinism" in failed
    with pytest.raises(AssertionError, match="any.sloppy: .* conformance checks run"):
        report.raise_for_failures()


@attrs.define(kw_only=True)
class WrongShape(Recognizer):
    """Returns one column too few."""

    id: ClassVar[str] = "any.wrong_shape"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    n_: int = bioanon.fitted(0)

    def enroll(self, gallery, label="subject"):
        self.n_ = len(np.unique(gallery.subjects))
        return self

    def score(self, probes):
        return bioanon.ScoreMatrix(np.zeros((len(probes), self.n_ - 1)), np.arange(self.n_ - 1))


def test_checks_catch_wrong_score_shape():
    report = check_method(WrongShape)
    assert "score_matrix_shape" in dict(report.failed)
