"""Evaluation configs shared by the tests."""

from __future__ import annotations

from typing import ClassVar

import attrs

import bioanon


def config(**overrides):
    """A small evaluation: subjects with heterogeneous separability, noise swept, a block permutation."""
    c = {
        "name": "test",
        "seed": 0,
        "repeats": 2,
        "dataset": {
            "source": "any.synthetic",
            "params": {"n_subjects": 60, "samples_per_subject": 16, "dim": 32, "noise_heterogeneity": 0.6, "seed": 3},
        },
        "anonymizers": [
            {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 2.0]}},
            {"id": "any.block_permutation", "name": "perm"},
        ],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}],
        "scenarios": ["naive", "parrot"],
        "selection": {"selectors": ["random", "classification"], "subject_counts": [24, 6], "random_draws": 5},
        "utility": [{"id": "any.cosine_similarity"}],
        "report": {"bootstrap": 200},
    }
    c.update(overrides)
    return c


# a quicker variant: one repeat, two noise settings, one selector
SMALL = dict(
    repeats=1,
    anonymizers=[{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 3.0]}}],
    selection={"selectors": ["random"], "subject_counts": [12], "random_draws": 2},
    report={"bootstrap": 50},
)


def failing_recognizer_plugin(method_id: str, reads: tuple[str, ...], error: str):
    """A plugin object registering a recognizer ``method_id`` of the payloads ``reads`` that enrols anything and raises
    ``RuntimeError(error)`` when scoring (for tests of failure handling and of checks that must stop a run
    before any scoring)."""

    @attrs.define(kw_only=True)
    class Failing(bioanon.Recognizer):
        """Fails when scoring."""

        id: ClassVar[str] = method_id
        payloads: ClassVar[tuple[str, ...]] = tuple(reads)

        def enroll(self, gallery, label="subject"):
            return self

        def score(self, probes):
            raise RuntimeError(error)

    class Plugin:
        @staticmethod
        @bioanon.hookimpl
        def register_recognizers(register):
            register(Failing)

    return Plugin()
