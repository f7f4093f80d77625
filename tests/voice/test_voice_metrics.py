"""A voice evaluation reports the verification metrics computed from the attackers' score matrices (EER, min
Cllr, linkability D↔sys; METRICS.md) next to identification accuracy, in range, for every scenario."""

from __future__ import annotations

import numpy as np

import bioanon


def _config() -> dict:
    return {
        "name": "voice-metrics",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "lazy", "parrot"],
        "dataset": {
            "source": "voice.synthetic",
            "params": {"n_speakers": 20, "utterances_per_speaker": 12, "duration": 0.3, "with_features": False},
        },
        "rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4, "enrolment": 0.5},
        "anonymizers": [{"id": "voice.mcadams", "name": "mcadams", "params": {"alpha": 0.7}}],
        "recognizers": [{"id": "voice.svm", "name": "svm"}],
        "selection": {"selectors": ["random"]},
        "utility": [{"id": "voice.voice_distinctiveness", "name": "g_vd"}],
        "report": {"bootstrap": 0},
    }


def test_voice_evaluation_reports_verification_metrics():
    result = bioanon.evaluate(_config(), out_dir=None, progress=False, report=False)
    assert not result.failures, result.failures
    m = result.metrics
    table = m.pivot_table(index="scenario", columns="metric", values="value")
    print("\n" + table[["top1", "eer", "min_cllr", "linkability"]].round(3).to_string())
    for metric in ("top1", "eer", "min_cllr", "linkability"):
        assert metric in table.columns, f"{metric} missing from the voice metrics: {sorted(table.columns)}"
        assert set(table.index) == {"clear", "naive", "lazy", "parrot"}
        assert table[metric].notna().all(), table[metric]
    assert np.all((table.eer >= 0) & (table.eer <= 0.5)), table.eer
    assert np.all((table.min_cllr >= 0) & (table.min_cllr <= 1.0 + 1e-9)), table.min_cllr
    assert np.all((table.linkability >= 0) & (table.linkability <= 1)), table.linkability
    # the clear attacker links utterances far better than chance (EER 0.5, min Cllr 1 bit, D↔sys 0)
    assert table.eer["clear"] < 0.25 and table.min_cllr["clear"] < 0.8 and table.linkability["clear"] > 0.1, table
    chance = m[m.metric == "eer"].chance
    assert np.allclose(chance, 0.5)
    g_vd = result.utility.set_index("measure").loc["g_vd"]
    assert g_vd.clear_value == 0.0 and g_vd.value < 0.0, g_vd
