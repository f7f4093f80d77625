"""Every ``voice.*`` method passes bioanon's conformance checks."""

from __future__ import annotations

import pytest

import bioanon
from bioanon.testing import check_method, make_table

_IDS = [m if isinstance(m, str) else m.id for m in bioanon.list_methods("voice.*")]

# tiny, fast parameters where the defaults are slow on the 36-utterance audio table
_PARAMS = {
    "voice.synthetic": {"n_speakers": 3, "utterances_per_speaker": 3, "duration": 0.15},
    "voice.pitch_correlation": {"hop_ms": 40.0},
    "voice.lda": {},
}


def test_every_issue_method_is_registered():
    expected = {
        "voice.fsdd",
        "voice.audiomnist",
        "voice.librispeech",
        "voice.folder",
        "voice.synthetic",
        "voice.mcadams",
        "voice.pitch_shift",
        "voice.frequency_warp",
        "voice.speed",
        "voice.noise",
        "voice.svm",
        "voice.logistic_regression",
        "voice.lda",
        "voice.xvector",
        "voice.content_accuracy",
        "voice.pitch_correlation",
        "voice.sdr",
        "voice.random_set_mean",
        "voice.voice_distinctiveness",
    }
    assert expected <= set(_IDS)


@pytest.mark.parametrize("method_id", _IDS)
def test_conformance(method_id):
    cls = bioanon.get_registry().get(method_id)
    table = None
    if method_id == "voice.pitch_correlation":
        table = make_table(n_subjects=2, samples_per_subject=2, payload="audio")
    report = check_method(cls, table=table, params=_PARAMS.get(method_id))
    report.raise_for_failures()
