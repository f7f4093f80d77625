"""``voice.random_set_mean`` (utility-preserving-anonymization.txt, Algorithm 1, its AudioMNIST experiment) on
utterance features: its output, the feature recognizers and digit accuracy on features tables, and on the real
FSDD data the paper's finding — digit preserved, speaker suppressed."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.errors import TableError
from bioanon.testing import make_table
from bioanon_voice.random_set_mean import VoiceRandomSetMean
from bioanon_voice.recognizers import FEATURES_KEY, MfccLda, MfccSvm, stats_table
from bioanon_voice.sources import Fsdd
from bioanon_voice.utility import ContentAccuracy

RSM = VoiceRandomSetMean


@pytest.fixture(scope="module")
def tiny():
    return make_table(n_subjects=6, samples_per_subject=8, payload="audio")


def test_output_is_features_without_audio(tiny):
    out = RSM(attribute="activity", set_size=4, purity=0.5).fit(tiny).transform(tiny)
    assert out.payload_names == ["features"]
    assert np.array_equal(out.sample_ids, tiny.sample_ids) and np.array_equal(out.subjects, tiny.subjects)
    x = out.payload("features")
    assert x.dtype == np.float32 and x.shape == (len(tiny), 80) and np.isfinite(x).all()
    assert out.metadata[FEATURES_KEY] == {
        "kind": "mfcc",
        "n_coeffs": 20,
        "n_mels": 40,
        "deltas": True,
        "energy_quantile": 0.3,
    }


def test_set_of_one_is_the_record_itself(tiny):
    feats = stats_table(tiny).payload("features")
    out = RSM(attribute="activity", set_size=1, purity=1.0).transform(tiny).payload("features")
    np.testing.assert_allclose(out, feats, rtol=1e-6, atol=1e-6)
    mixed = RSM(attribute="activity", set_size=8, purity=0.5, weight=1.0).transform(tiny).payload("features")
    assert not np.allclose(mixed, feats, atol=1e-3)


def test_engine_parameters_pass_through(tiny):
    kw = dict(attribute="activity", set_size=4, purity=0.5)
    a = RSM(**kw, seed=1).transform(tiny).payload("features")
    b = RSM(**kw, seed=2).transform(tiny).payload("features")
    assert not np.allclose(a, b)  # the seed draws the sets
    fb = RSM(**kw, features="fbank", n_mels=24, deltas=False).transform(tiny)
    assert fb.payload("features").shape == (len(tiny), 2 * 25)
    RSM(**kw, sensitive_attribute="subject", sensitive_exclusion=0.5, retention=0.2).transform(tiny)
    with pytest.raises(TableError, match="set_size"):
        RSM(attribute="activity", set_size=len(tiny) + 1).transform(tiny)
    again = RSM(**kw).transform(RSM(**kw).transform(tiny))  # a features table is anonymized as it is
    assert again.payload("features").shape == (len(tiny), 80)


def test_recognizers_and_digit_accuracy_read_features_tables(tiny):
    anon = RSM(attribute="activity", set_size=4, purity=0.5).transform(tiny)
    r = MfccSvm().fit(tiny)
    r.enroll(tiny)
    assert r.score(anon).scores.shape == (len(tiny), 6)  # clear-trained attacker, features probes
    with pytest.raises(TableError, match="n_coeffs"):
        MfccSvm(n_coeffs=13).fit(anon)
    u = ContentAccuracy(attribute="activity", segments=0).fit(tiny)
    assert u.measure(tiny, anon).shape == (len(tiny),)
    with pytest.raises(TableError, match="segments = 0"):
        ContentAccuracy(attribute="activity").fit(tiny).measure(tiny, anon)


def test_fsdd_digit_preserved_speaker_suppressed(shared_data):
    table = Fsdd(max_per_speaker=100).load(shared_data / "fsdd")
    anon = RSM(set_size=32, purity=0.8).fit(table).transform(table)  # digit, r_p = 1 %, w = 10
    even = table.attribute("index") % 2 == 0
    ce, co, ae, ao = table.filter(even), table.filter(~even), anon.filter(even), anon.filter(~even)
    chance = 1 / table.num_subjects
    for cls in (MfccSvm, MfccLda):
        acc = {}
        for name, (train, gallery, probes) in {
            "clear": (ce, ce, co),
            "naive": (ce, ce, ao),
            "lazy": (ce, ae, ao),
            "parrot": (ae, ae, ao),
        }.items():
            r = cls().fit(train)
            r.enroll(gallery)
            acc[name] = float(np.mean(r.score(probes).predict() == probes.subjects))
        print(f"\n{cls.id} speaker top-1 {acc} (chance {chance:.3f})")
        assert acc["clear"] > 0.9, acc
        assert max(acc["naive"], acc["lazy"], acc["parrot"]) < chance + 0.2, acc
    u = ContentAccuracy(segments=0).fit(ce)
    clear, anonymized, floor = u.measure(co, co).mean(), u.measure(co, ao).mean(), u.floor(co)
    print(f"digit accuracy clear {clear:.3f}, random-set mean {anonymized:.3f}, floor {floor:.3f}")
    assert anonymized > floor + 0.6 and anonymized > clear - 0.1


@pytest.mark.realdata
def test_fsdd_background_of_one_accent_with_accent_as_sensitive_attribute(shared_data):
    """FSDD's speakers have four accents; a one-speaker background holds one of them. The accent's relevance is
    then estimated on the table being transformed (with a warning naming it), not failed on."""
    t = Fsdd(max_per_speaker=30).load(shared_data / "fsdd")
    back = t.select_subjects(["jackson"])
    rest = t.select_subjects(["nicolas", "george", "lucas"])
    m = RSM(attribute="digit", set_size=8, purity=0.8, sensitive_attribute="accent", small_class="with_replacement")
    with pytest.warns(UserWarning, match=r"holds fewer than two values of 'accent' \(\['USA/neutral'\]\)"):
        m.fit(back)
    out = m.transform(rest)
    assert out.payload_names == ["features"] and np.array_equal(out.sample_ids, rest.sample_ids)
    with pytest.raises(TableError, match=r"'accent' \(parameter sensitive_attribute\).*only \['USA/neutral'\]"):
        m.transform(t.select_subjects(["jackson", "theo"]))  # both USA/neutral: nothing to estimate it on
