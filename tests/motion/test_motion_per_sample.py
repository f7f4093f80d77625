"""Which motion anonymizers are per-sample (``Anonymizer.per_sample``: an evaluation anonymizes each data set
once, in shards, and takes every part's rows from it), each claim checked on synthetic IMU windows by the
conformance check ``rows_independent`` (a shuffled half anonymized on its own equals the same rows of the whole
set anonymized)."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method

#: Changing this list is a decision: a false claim gives wrong results. Not per-sample with their defaults:
#: motion.gaussian_noise and motion.laplace_noise (one generator per table; the channels' spread over the table),
#: motion.quantize (a grid relative to the channels' spread over the table), motion.random_set_mean (sets).
PER_SAMPLE = ["motion.channel_removal", "motion.lowpass", "motion.normalize", "motion.resample"]

#: settings whose answer differs from their method's default one: the statistics over the table unused, or used
PER_SAMPLE_WITH = [("motion.quantize", {"relative": False})]
NOT_PER_SAMPLE_WITH = [("motion.channel_removal", {"mode": "mean"})]


def test_the_per_sample_motion_anonymizers_are_these():
    registry = bioanon.get_registry()
    flagged = [m for m in bioanon.list_methods("motion.*", kind="anonymizer") if registry.get(m).rows_independent({})]
    assert sorted(flagged) == PER_SAMPLE
    assert all(registry.get(m).rows_independent(p) for m, p in PER_SAMPLE_WITH)
    assert not any(registry.get(m).rows_independent(p) for m, p in NOT_PER_SAMPLE_WITH)


@pytest.fixture(scope="module")
def windows():
    return bioanon.load_dataset("motion.synthetic", n_subjects=6, windows_per_subject=5)


@pytest.mark.parametrize(
    ("method_id", "params"),
    [(m, {}) for m in PER_SAMPLE]
    + PER_SAMPLE_WITH
    + [
        ("motion.channel_removal", {"mode": "drop", "channels": ("acc_*",)}),
        ("motion.normalize", {"mode": "minmax"}),
        ("motion.resample", {"antialias": False, "interpolation": "hold"}),
    ],
)
def test_a_per_sample_motion_anonymizer_anonymizes_any_subset_as_the_whole_set(method_id, params, windows):
    report = check_method(bioanon.get_registry().get(method_id), table=windows, params=params)
    report.raise_for_failures()
    assert "rows_independent" in report.passed, str(report)
