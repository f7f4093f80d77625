"""Which face anonymizers are per-sample (``Anonymizer.per_sample``: an evaluation anonymizes each data set once,
in shards, and takes every part's rows from it), each claim checked on face images by the conformance check
``rows_independent`` (a shuffled half anonymized on its own equals the same rows of the whole set anonymized)."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method

#: Changing this list is a decision: a false claim gives wrong results. Not per-sample: face.gaussian_noise,
#: face.dp_pix, face.dp_snow and face.dp_samp (one generator per table, drawn in row order), face.k_rtio,
#: face.k_same_pixel and face.k_same_eigen (fitted on a background), face.random_set_mean(_eigen) (sets of samples).
PER_SAMPLE = [
    "face.block_permutation",
    "face.eye_mask",
    "face.gaussian_blur",
    "face.pixel_relocation",
    "face.pixelation",
]


def test_the_per_sample_face_anonymizers_are_these():
    registry = bioanon.get_registry()
    flagged = [m for m in bioanon.list_methods("face.*", kind="anonymizer") if registry.get(m).rows_independent({})]
    assert sorted(flagged) == PER_SAMPLE


@pytest.fixture(scope="module")
def faces():
    return bioanon.load_dataset("face.synthetic", n_subjects=6, samples_per_subject=5, size=(24, 20))


@pytest.mark.parametrize("method_id", PER_SAMPLE)
def test_a_per_sample_face_anonymizer_anonymizes_any_subset_as_the_whole_set(method_id, faces):
    report = check_method(bioanon.get_registry().get(method_id), table=faces)
    report.raise_for_failures()
    assert "rows_independent" in report.passed, str(report)
