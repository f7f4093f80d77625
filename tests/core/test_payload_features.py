"""The default feature view of payloads that cannot be flattened (hook ``register_payload_features``): a
third-party plugin provides one, the trait-agnostic methods use it, and its absence is a clear error."""

from __future__ import annotations

import types

import numpy as np
import pytest

import bioanon
from bioanon.builtin.protocol import paper_protocol
from bioanon.errors import TableError
from bioanon.methods import feature_matrix
from bioanon.metrics import label_indices, top_k_accuracy
from bioanon.testing import make_table

AGNOSTIC = ["any.cosine_centroid", "any.pca_svm", "any.lda_cosine", "any.knn", "any.logistic_regression"]


def spectrum(table):
    """A toy feature view of ``audio``: log magnitudes of the 150–450 Hz FFT bins of the first 800 samples."""
    return np.stack([np.log1p(np.abs(np.fft.rfft(a[:800]))[15:45]) for a in table.payload("audio")]).astype(np.float32)


def _plugin(name: str, payload: str = "audio", fn=spectrum):
    mod = types.ModuleType(name)

    @bioanon.hookimpl
    def register_payload_features(register):
        register(payload, fn, description="toy spectrum")

    mod.register_payload_features = register_payload_features
    return mod


def _accuracy(rec, probes) -> float:
    s = rec.score(probes)
    return top_k_accuracy(s.scores, label_indices(probes.subjects, s.classes))


@pytest.fixture
def audio_sets():
    table = make_table(n_subjects=6, samples_per_subject=8, payload="audio", seed=1)
    gallery, probes = table.split_within_subjects([0.5, 0.5], seed=0)
    return table, gallery, probes


def test_no_feature_view_is_a_clear_error(bioanon_plugin_manager, audio_sets):
    table, gallery, _ = audio_sets
    with pytest.raises(TableError, match=r"any\.pca_svm: .*no installed plugin provides a feature view.*'audio'"):
        bioanon.get_method("any.pca_svm").enroll(gallery)
    with pytest.raises(TableError, match="register_payload_features"):
        paper_protocol(table, table, None)


@pytest.mark.parametrize("method_id", AGNOSTIC)
def test_third_party_feature_view_serves_any_recognizer(register_bioanon_plugin, audio_sets, method_id):
    registry = register_bioanon_plugin(_plugin("toy_audio_plugin"), "toy_audio")
    assert registry.featurizers["audio"].distribution == "toy_audio"
    statuses = {s.name: s for s in bioanon.plugins.get_plugin_manager().statuses}
    assert statuses["toy_audio"].featurizers == ["audio"]
    table, gallery, probes = audio_sets
    rec = bioanon.get_method(method_id).fit(table)
    assert _accuracy(rec.enroll(gallery), probes) > 1 / 6 + 0.3  # 6 subjects: chance 1/6


def test_fixed_shape_payloads_are_still_flattened(register_bioanon_plugin):
    register_bioanon_plugin(_plugin("toy_audio_plugin2"), "toy_audio")
    t = make_table(payload="image")
    np.testing.assert_array_equal(feature_matrix(t), t.payload("image").reshape(len(t), -1).astype(np.float32))


def test_duplicate_feature_view_fails_the_second_plugin(register_bioanon_plugin):
    register_bioanon_plugin(_plugin("dup_a"), "dup_a")
    with pytest.warns(bioanon.plugins.PluginLoadWarning, match="duplicate feature view of payload 'audio'.*dup_a"):
        registry = register_bioanon_plugin(_plugin("dup_b"), "dup_b")
    assert registry.featurizers["audio"].distribution == "dup_a"


def test_feature_view_with_a_wrong_shape_is_named(register_bioanon_plugin, audio_sets):
    register_bioanon_plugin(_plugin("bad_view", fn=lambda t: np.zeros(len(t))), "bad_view")
    with pytest.raises(TableError, match=r"feature view of payload 'audio' \(registered by bad_view\).*shape"):
        feature_matrix(audio_sets[0], who="any.knn")


def test_invalid_registration_is_rejected(register_bioanon_plugin):
    with pytest.warns(bioanon.plugins.PluginLoadWarning, match="must be callable"):
        registry = register_bioanon_plugin(_plugin("bad_fn", fn="not callable"), "bad_fn")
    assert "audio" not in registry.featurizers


def test_paper_protocol_through_a_feature_view(register_bioanon_plugin):
    register_bioanon_plugin(_plugin("toy_audio_plugin3"), "toy_audio")
    table = make_table(n_subjects=6, samples_per_subject=10, payload="audio", seed=2)
    out = paper_protocol(table, table, "group", seed=0)
    assert out["mixture_clear"] < 1 - 1 / 6 - 0.3  # the identity classifier re-identifies clear audio
    assert out["attribute_accuracy_clear"] > out["attribute_chance"] + 0.2


def test_dimension_mismatch_after_fit_is_named():
    rec = bioanon.get_method("any.pca_svm").fit(make_table(payload="features"))
    with pytest.raises(TableError, match=r"any\.pca_svm: samples have 300 values each.*fitted on samples of 16"):
        rec.enroll(make_table(payload="pose"))


def test_evaluation_without_a_feature_view_fails_before_any_work_naming_the_hook(bioanon_plugin_manager):
    data = make_table(n_subjects=10, samples_per_subject=6, payload="audio", seed=3)
    cfg = {
        "name": "no-view",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive"],
        "dataset": {"source": "any.synthetic"},
        "anonymizers": [{"id": "any.identity"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "selection": {"selectors": ["random"], "random_draws": 1},
        "report": {"bootstrap": 0, "paper_protocol": "group"},
    }
    with pytest.raises(bioanon.ConfigError) as info:
        bioanon.evaluate(cfg, data=data, out_dir=None, progress=False, report=False, keep_going=True)
    problems = info.value.problems
    assert problems[0].startswith("recognizers[0].id: any.cosine_centroid reads features") and "audio" in problems[0]
    assert problems[1].startswith("report.paper_protocol:") and "register_payload_features" in problems[1]
