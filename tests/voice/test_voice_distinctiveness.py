"""``voice.voice_distinctiveness``: G_VD (METRICS.md, VoicePrivacy). The vectorized similarity matrices equal a
pairwise loop; identity anonymization gives 0 dB; stronger McAdams α gives a more negative G_VD on the real
FSDD data; the random-set mean's features make the speakers indistinct."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.errors import ParameterError, TableError
from bioanon.testing import make_table
from bioanon_voice.anonymizers import McAdams
from bioanon_voice.random_set_mean import VoiceRandomSetMean
from bioanon_voice.sources import Fsdd
from bioanon_voice.utility import VoiceDistinctiveness, diagonal_dominance, similarity_matrix


def test_similarity_matrix_equals_pairwise_loop():
    rng = np.random.default_rng(0)
    codes = np.array([0, 0, 1, 1, 1, 2, 2, 0])
    x, y = rng.standard_normal((8, 5)), rng.standard_normal((8, 5))
    got = similarity_matrix(x, y, codes, 3, 2.0, -0.5)
    want = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            llr = [
                2.0 * x[u] @ y[v] - 0.5
                for u in np.flatnonzero(codes == i)
                for v in np.flatnonzero(codes == j)
                if u != v
            ]
            want[i, j] = 1 / (1 + np.exp(-np.mean(llr)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert diagonal_dominance(np.array([[0.9, 0.2], [0.4, 0.7]])) == pytest.approx(0.5)


def test_errors_name_the_problem():
    table = make_table(n_subjects=3, samples_per_subject=4, payload="audio")
    with pytest.raises(ParameterError, match="verifier"):
        VoiceDistinctiveness(verifier="voice.mcadams").fit(table)
    m = VoiceDistinctiveness().fit(table)
    one_each = table.take(np.array([0, 4, 8]))  # one utterance per speaker: no diagonal pairs
    with pytest.raises(TableError, match="2 speakers with 2 or more utterances"):
        m.measure(one_each, one_each)
    with pytest.raises(RuntimeError, match="fit"):
        VoiceDistinctiveness().measure(table, table)


_MEMO: dict = {}


@pytest.fixture
def fsdd_parts(shared_data):
    if "parts" not in _MEMO:
        t = Fsdd(max_per_speaker=30).load(shared_data / "fsdd")
        speakers = np.unique(t.subjects)
        _MEMO["parts"] = t.select_subjects(speakers[:3]), t.select_subjects(speakers[3:])  # verifier / evaluation
    return _MEMO["parts"]


@pytest.mark.realdata
@pytest.mark.parametrize("condition", ["aa", "oa"])
def test_fsdd_identity_zero_mcadams_negative(fsdd_parts, condition):
    train, evaluation = fsdd_parts
    m = VoiceDistinctiveness(condition=condition).fit(train)
    v = m.measure(evaluation, evaluation)
    assert v.shape == (len(evaluation),) and np.all(v == v[0])  # one set-level value, broadcast
    assert v[0] == pytest.approx(0.0, abs=1e-9)
    gains = {a: m.gain(evaluation, McAdams(alpha=a).transform(evaluation)) for a in (0.9, 0.5)}
    print(f"\nG_VD ({condition}) on 3 FSDD speakers: identity {v[0]:.2f} dB, McAdams {gains}")
    assert gains[0.5] < -3.0 and gains[0.5] < gains[0.9], gains


@pytest.mark.realdata
def test_fsdd_random_set_mean_features_lose_distinctiveness(fsdd_parts):
    train, evaluation = fsdd_parts
    rsm = VoiceRandomSetMean(set_size=8, purity=0.8)
    g = VoiceDistinctiveness().fit(train).gain(evaluation, rsm.transform(evaluation))
    print(f"\nG_VD of the random-set mean (g=8, t=0.8): {g:.2f} dB")
    assert g < -6.0, g
