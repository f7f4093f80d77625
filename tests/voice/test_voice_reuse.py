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


def test_a_rates_only_change_computes_no_utterance_statistics_again(tmp_path, monkeypatch):
    """Utterance statistics are kept per utterance in the cache (issue 29, item 2): after a change of the
    rates alone, every clear utterance's statistics come from the cache, and the results equal a fresh run."""
    import bioanon_voice.recognizers as recognizers
    from bioanon.fit_memo import sample_digests

    computed: list[str] = []
    real = recognizers.feature_stats

    def counting(audio, *args):
        computed.extend(sample_digests(audio))
        return real(audio, *args)

    monkeypatch.setattr(recognizers, "feature_stats", counting)
    cfg = {**_cfg(), "run": {"jobs": 1}}
    bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "c", progress=False, report=False)
    clear = set(sample_digests(bioanon.load_dataset("voice.synthetic", **cfg["dataset"]["params"]).payload("audio")))
    assert clear <= set(computed)  # the first run computed every clear utterance
    n_first = len(computed)
    computed.clear()
    other = {**cfg, "rates": {"background": 0.0, "attacker": 0.34, "evaluation": 0.66, "enrolment": 0.5}}
    second = bioanon.evaluate(other, out_dir=None, cache=tmp_path / "c", progress=False, report=False)
    assert not clear & set(computed), "a clear utterance's statistics were computed again"
    assert len(computed) < n_first
    fresh = bioanon.evaluate(other, out_dir=None, cache=tmp_path / "fresh", progress=False, report=False)
    assert len(second.metrics) and fresh.metrics.equals(second.metrics)
