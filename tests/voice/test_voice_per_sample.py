"""Which voice anonymizers are per-sample (``Anonymizer.per_sample``: an evaluation anonymizes each data set
once, in shards, and takes every part's rows from it), each claim checked on synthetic speech by the conformance
check ``rows_independent`` (a shuffled half anonymized on its own equals the same rows of the whole set
anonymized), with the per-speaker draws too."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method

#: Changing this list is a decision: a false claim gives wrong results. Not per-sample: voice.random_set_mean
#: (means over sets of samples).
PER_SAMPLE = ["voice.frequency_warp", "voice.mcadams", "voice.noise", "voice.pitch_shift", "voice.speed"]

#: parameters of the trait-data check: the defaults, and the draws per speaker (seeded by the subject) or per
#: utterance (seeded by the sample id)
_SETTINGS = [(m, {}) for m in PER_SAMPLE] + [
    ("voice.mcadams", {"alpha_range": (0.6, 0.9)}),
    ("voice.pitch_shift", {"semitones_range": (-3.0, 3.0)}),
    ("voice.frequency_warp", {"alpha_range": (0.8, 1.2)}),
    ("voice.noise", {"color": "pink"}),
]


def test_the_per_sample_voice_anonymizers_are_these():
    registry = bioanon.get_registry()
    flagged = [m for m in bioanon.list_methods("voice.*", kind="anonymizer") if registry.get(m).rows_independent({})]
    assert sorted(flagged) == PER_SAMPLE


@pytest.fixture(scope="module")
def speech():
    return bioanon.load_dataset("voice.synthetic", n_speakers=3, utterances_per_speaker=3, duration=0.15)


@pytest.mark.parametrize(("method_id", "params"), _SETTINGS)
def test_a_per_sample_voice_anonymizer_anonymizes_any_subset_as_the_whole_set(method_id, params, speech):
    cls = bioanon.get_registry().get(method_id)
    if cls.missing_requirements():
        pytest.skip(f"{method_id} needs {cls.missing_requirements()}")
    report = check_method(cls, table=speech, params=params)
    report.raise_for_failures()
    assert "rows_independent" in report.passed, str(report)
