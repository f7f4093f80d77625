"""``voice.resemblyzer``: the pretrained Resemblyzer encoder as an attacker (optional; skipped when resemblyzer
is not installed). Its batched embedding equals ``VoiceEncoder.embed_utterance(preprocess_wav(...))``, and on
the real FSDD data it identifies the speakers of clear speech far above chance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bioanon
from bioanon.table import SampleTable
from bioanon_voice.resemblyzer_encoder import resemblyzer_available
from bioanon_voice.sources import Fsdd

pytestmark = pytest.mark.skipif(
    not resemblyzer_available(), reason="resemblyzer (with webrtcvad and torch) is not installed"
)

_MEMO: dict = {}


@pytest.fixture
def fsdd(shared_data):
    if "table" not in _MEMO:
        _MEMO["table"] = Fsdd(max_per_speaker=20).load(shared_data / "fsdd")
    return _MEMO["table"]


def test_registered_when_installed():
    assert "voice.resemblyzer" in {m if isinstance(m, str) else m.id for m in bioanon.list_methods("voice.*")}


def test_batched_embedding_equals_embed_utterance(fsdd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from resemblyzer import preprocess_wav
    from bioanon_voice.resemblyzer_encoder import Resemblyzer, encoder

    part = fsdd.take(np.arange(0, len(fsdd), 17))
    e = Resemblyzer(batch_size=3, device="cpu").embed(part)
    sr = part.metadata["sample_rate"]
    ref = np.stack(
        [
            encoder().embed_utterance(preprocess_wav(np.asarray(a, np.float32), source_sr=sr))
            for a in part.payload("audio")
        ]
    )
    assert e.shape == (len(part), 256)
    np.testing.assert_allclose(e, ref, atol=1e-5)


def test_silent_and_tone_utterances_get_unit_embeddings():
    from bioanon_voice.resemblyzer_encoder import Resemblyzer

    t = np.arange(4000) / 8000.0
    audio = [np.zeros(800, np.float32), np.sin(2 * np.pi * 200 * t).astype(np.float32), np.zeros(1, np.float32)]
    table = SampleTable.from_arrays(
        subject=np.array(["a", "b", "c"]), payloads={"audio": audio}, metadata={"sample_rate": 8000}
    )
    e = Resemblyzer().embed(table)
    assert np.isfinite(e).all()
    assert np.allclose(np.linalg.norm(e[1]), 1.0, atol=1e-5)


def test_fsdd_clear_speaker_identification(fsdd):
    from bioanon_voice.resemblyzer_encoder import Resemblyzer

    even = fsdd.attribute("index") % 2 == 0
    enrol, probes = fsdd.filter(even), fsdd.filter(~even)
    r = Resemblyzer().fit(enrol)
    r.enroll(enrol)
    acc = float(np.mean(r.score(probes).predict() == probes.subjects))
    print(f"\nvoice.resemblyzer clear FSDD top-1 {acc:.3f} on {len(probes)} probes (chance {1 / 6:.3f})")
    assert acc > 0.8, acc


def test_embeddings_reused_in_a_process_equal_a_fresh_computation(fsdd, monkeypatch):
    from bioanon.context import RunContext
    from bioanon_voice.resemblyzer_encoder import Resemblyzer

    part = fsdd.take(np.arange(0, len(fsdd), 23))
    ctx = RunContext(bioanon.get_registry())
    with ctx.activate():  # reuse is within a run
        first = Resemblyzer(device="cpu").embed(part)
        reused = Resemblyzer(device="cpu").embed(part.take(np.arange(len(part))))  # another table, the same audio
        assert (ctx.computed.hits, ctx.computed.misses) == (1, 1)
        monkeypatch.setenv("BIOANON_FIT_MEMO", "0")
        fresh = Resemblyzer(device="cpu").embed(part)
        assert ctx.computed.hits == 1
    np.testing.assert_array_equal(first, reused)
    np.testing.assert_array_equal(first, fresh)
