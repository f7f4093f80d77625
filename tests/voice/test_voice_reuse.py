"""Utterance statistics computed once per process and reused across scenarios and settings give the results of
computing them anew (``BIOANON_FIT_MEMO=0``)."""

from __future__ import annotations

import bioanon
from bioanon.context import RunContext


def _cfg():
    return {
        "name": "voice-reuse",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "lazy", "parrot"],
        "dataset": {
            "source": "voice.synthetic",
            "params": {"n_speakers": 6, "utterances_per_speaker": 6, "duration": 0.2, "with_features": False},
        },
        "rates": {"background": 0.0, "attacker": 0.5, "evaluation": 0.5, "enrolment": 0.5},
        "anonymizers": [{"id": "voice.noise", "name": "noise", "grid": {"snr_db": [20.0, 5.0]}}],
        "recognizers": [{"id": "voice.svm"}, {"id": "voice.lda"}],
        "selection": {"selectors": ["random"], "subject_counts": [3], "random_draws": 1},
        "utility": [],
        "report": {"bootstrap": 20},
    }


def test_reused_utterance_statistics_give_the_results_of_recomputing(tmp_path, monkeypatch):
    ctx = RunContext(bioanon.get_registry())
    reused = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "a", progress=False, report=False, context=ctx)
    assert ctx.computed.hits > ctx.computed.misses > 0, (ctx.computed.hits, ctx.computed.misses)
    monkeypatch.setenv("BIOANON_FIT_MEMO", "0")
    fresh_ctx = RunContext(bioanon.get_registry())
    fresh = bioanon.evaluate(
        _cfg(), out_dir=None, cache=tmp_path / "b", progress=False, report=False, context=fresh_ctx
    )
    assert fresh_ctx.computed.hits == fresh_ctx.computed.misses == 0
    assert len(fresh.metrics) and fresh.metrics.equals(reused.metrics)
