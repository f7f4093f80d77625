"""voice.asr_wer: word errors by hand, the corpus/utterance averages, PocketSphinx on real FSDD speech, and the
two-stage utility measure in an evaluation (each table transcribed once, as its own cached task)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import bioanon
from bioanon.api import ParameterError, SampleTable
from bioanon_voice.asr import normalize_words, word_errors

pytest.importorskip("pocketsphinx", reason="voice.asr_wer needs pocketsphinx (pip install 'bioanon-voice[asr]')")

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@pytest.mark.parametrize(
    "ref, hyp, errors",
    [
        ("the cat sat", "the cat sat", 0),
        ("the cat sat", "the bat sat", 1),  # substitution
        ("the cat sat", "the sat", 1),  # deletion
        ("the cat sat", "the cat sat down", 1),  # insertion
        ("a b c d", "x a b c", 2),  # insertion + deletion beat four substitutions
        ("", "a b", 2),
        ("a b c", "", 3),
        ("a a a", "a", 2),
    ],
)
def test_word_errors_by_hand(ref, hyp, errors):
    assert word_errors(ref.split(), hyp.split()) == errors


def test_word_errors_match_a_plain_dynamic_programme():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ref = rng.integers(0, 4, rng.integers(0, 9)).astype(str).tolist()
        hyp = rng.integers(0, 4, rng.integers(0, 9)).astype(str).tolist()
        d = np.zeros((len(ref) + 1, len(hyp) + 1), int)
        d[:, 0], d[0, :] = np.arange(len(ref) + 1), np.arange(len(hyp) + 1)
        for i in range(1, len(ref) + 1):
            for j in range(1, len(hyp) + 1):
                d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]))
        assert word_errors(ref, hyp) == d[-1, -1]


def test_normalize_words_spells_digits():
    assert normalize_words("Seven, it's 42!") == ["seven", "it's", "four", "two"]
    assert normalize_words("7", spell_digits=False) == []


def _texts(texts):
    n = len(texts)
    return SampleTable.from_arrays(
        subject=[f"s{i % 2}" for i in range(n)],
        payloads={"features": np.zeros((n, 1), np.float32)},
        attributes={"text": pa.array(texts, pa.string())},
    )


def test_corpus_and_utterance_averages_by_hand():
    clear = _texts(["a b c d", "e f", None])
    m = bioanon.get_method("voice.asr_wer")
    hyps = ["a b x d", "", "anything"]  # 1 error of 4 words, 2 of 2, no reference
    v = m.compare(clear, ["?"] * 3, hyps)
    assert np.isnan(v[2])
    assert np.nanmean(v) == pytest.approx(3 / 6)  # corpus: Σ errors / Σ reference words
    u = bioanon.get_method("voice.asr_wer", average="utterance").compare(clear, ["?"] * 3, hyps)
    assert np.nanmean(u) == pytest.approx((1 / 4 + 2 / 2) / 2)


def test_bad_parameters_named():
    with pytest.raises(ParameterError, match="vocabulary"):
        bioanon.get_method("voice.asr_wer", vocabulary=("notawordatallxyz",)).extract(_texts(["a"]))
    with pytest.raises(ParameterError, match="grammar"):
        bioanon.get_method("voice.asr_wer", grammar="/no/such/file.jsgf").extract(_texts(["a"]))


@pytest.fixture
def fsdd40(shared_data):
    from bioanon_voice.sources import Fsdd

    t = Fsdd().load(shared_data / "fsdd")
    return t.take(np.sort(np.random.default_rng(0).choice(len(t), 40, replace=False)))


@pytest.mark.realdata
def test_digit_grammar_recognizes_fsdd_far_above_chance(fsdd40):
    m = bioanon.get_method("voice.asr_wer", transcript="digit", vocabulary=DIGITS)
    hyps = m.extract(fsdd40)
    correct = sum(h == DIGITS[d] for h, d in zip(hyps, fsdd40.attribute("digit"), strict=True))
    assert correct >= 16, f"{correct} of 40 (chance 4)"  # 25-26 of 40 measured
    wer = float(np.mean(m.compare(fsdd40, hyps, hyps)))
    assert wer == pytest.approx(1 - correct / 40)  # one word per utterance, grammar: always one word out


@pytest.mark.realdata
def test_noise_raises_wer(fsdd40):
    m = bioanon.get_method("voice.asr_wer", transcript="digit", vocabulary=DIGITS)
    noisy = bioanon.get_method("voice.noise", snr_db=-5.0).fit_transform(fsdd40)
    clear_wer, noisy_wer = float(np.mean(m.measure(fsdd40, fsdd40))), float(np.mean(m.measure(fsdd40, noisy)))
    assert noisy_wer > clear_wer + 0.2, (clear_wer, noisy_wer)


def test_each_table_transcribed_once_in_an_evaluation(tmp_path):
    cfg = {
        "name": "wer",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive"],
        "dataset": {"source": "voice.synthetic", "params": {"n_speakers": 6, "utterances_per_speaker": 4}},
        "rates": {"background": 0.0, "attacker": 0.5, "evaluation": 0.5, "enrolment": 0.5},
        "anonymizers": [{"id": "voice.noise", "name": "noise", "grid": {"snr_db": [20.0, 0.0]}}],
        "recognizers": [{"id": "voice.svm", "name": "svm"}],
        "utility": [
            {"id": "voice.asr_wer", "name": "wer", "params": {"transcript": "digit", "vocabulary": list(DIGITS)}}
        ],
        "selection": {"selectors": ["random"]},
        "report": {"bootstrap": 0},
    }
    result = bioanon.evaluate(cfg, out_dir=tmp_path / "run", cache=tmp_path / "cache", progress=False)
    assert not result.failures, result.failures
    u = result.utility
    assert len(u) == 2 and u.measure.eq("wer").all()
    assert u.clear_value.nunique() == 1  # the same clear transcription for both settings
    assert result.stages["extract"]["executed"] == 3, result.stages  # the clear set once + two anonymized sets
    assert np.isclose(u.floor, 1.0).all()
