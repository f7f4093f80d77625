"""Trait-agnostic methods on speech: bioanon-voice's default feature view of ``audio`` (utterance MFCC
statistics, hook ``register_payload_features``) serves the ``any.*`` recognizers, the paper protocol and an
evaluation's clear level."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon.builtin.protocol import paper_protocol
from bioanon.metrics import label_indices, top_k_accuracy


@pytest.fixture(scope="module")
def speech():
    return bioanon.load_dataset(
        "voice.synthetic", n_speakers=12, utterances_per_speaker=12, with_features=False, seed=1
    )


def test_voice_registers_a_feature_view_of_audio(speech):
    from bioanon.methods import feature_view

    view = bioanon.get_registry().featurizers["audio"]
    assert view.distribution == "bioanon-voice"
    column, x = feature_view(speech)
    assert column == "audio" and x.shape == (len(speech), 80) and x.dtype == np.float32
    # the same statistics as voice.svm (voice.lda, ...) and voice.random_set_mean with their default settings
    stats = bioanon.get_method("voice.svm").feature_table(speech).payload("features")
    np.testing.assert_allclose(x, stats, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "method_id", ["any.cosine_centroid", "any.pca_svm", "any.lda_cosine", "any.knn", "any.attribute_knn"]
)
def test_any_recognizer_on_audio_scores_above_chance(speech, method_id):
    train, rest = speech.split_subjects([0.5, 0.5], seed=0)
    gallery, probes = rest.split_within_subjects([0.5, 0.5], seed=0)
    rec = bioanon.get_method(method_id)
    if method_id == "any.attribute_knn":  # an attribute attack: trained on other speakers
        rec.fit(train, "digit").enroll(gallery, "digit")
        true, chance = probes.attribute("digit"), 1 / 5
    else:
        rec.fit(train).enroll(gallery)
        true, chance = probes.subjects, 1 / 6
    s = rec.score(probes)
    assert top_k_accuracy(s.scores, label_indices(true, s.classes)) > chance + 0.3


def test_paper_protocol_on_speech_and_on_random_set_mean_features(speech):
    noisy = bioanon.get_method("voice.noise", snr_db=30.0).transform(speech)
    out = paper_protocol(speech, noisy, "digit", seed=0)
    assert out["attribute_accuracy"] > out["attribute_chance"] + 0.2
    assert out["mixture"] < 1 - 1 / 12 - 0.2  # identities survive light noise
    # clear audio against the random-set mean's features (same statistics): one space, no error
    rsm = bioanon.get_method(
        "voice.random_set_mean", attribute="digit", set_size=8, purity=1.0, small_class="with_replacement"
    ).transform(speech)
    assert rsm.payload_names == ["features"]
    out = paper_protocol(speech, rsm, "digit", seed=0)
    assert out["mixture"] > out["mixture_clear"]  # the mean hides identity


def test_evaluation_with_any_recognizer_and_paper_protocol_on_speech():
    cfg = {
        "name": "voice-any",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "parrot"],
        "dataset": {
            "source": "voice.synthetic",
            "params": {"n_speakers": 10, "utterances_per_speaker": 8, "with_features": False},
        },
        "rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4, "enrolment": 0.5},
        "anonymizers": [{"id": "voice.noise", "name": "noise", "params": {"snr_db": 20.0}}],
        "recognizers": [{"id": "any.lda_cosine"}, {"id": "any.cosine_centroid"}],
        "selection": {"selectors": ["random"], "random_draws": 1},
        "utility": [{"id": "any.attribute_accuracy", "params": {"attribute": "digit"}}],
        "report": {"bootstrap": 0, "paper_protocol": "digit"},
    }
    result = bioanon.evaluate(cfg, out_dir=None, progress=False, report=False)
    assert result.failures == []
    top1 = result.metrics[result.metrics.metric == "top1"]
    assert {"clear", "naive", "parrot"} <= set(top1.scenario)
    clear = top1[top1.scenario == "clear"]
    assert (clear.value > clear.chance + 0.2).all()
    protocol = result.protocol.set_index("metric")["value"]
    assert {"mixture", "attribute_accuracy", "kl_from_uniform"} <= set(protocol.index)
