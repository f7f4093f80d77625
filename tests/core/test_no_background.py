"""``[rates] background = 0``: no background set. The split leaves the background part empty and every
anonymizer is fitted on the set it anonymizes (issue 18 item 7)."""

from __future__ import annotations

import numpy as np
import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.evaluation.config import Rates, load_config
from bioanon.evaluation.tasks import output_key

RATES0 = {"background": 0, "attacker": 0.5, "evaluation": 0.5, "enrolment": 0.5}


def test_config_accepts_background_zero_and_still_rejects_negative():
    assert load_config(config(rates=RATES0)).rates == Rates(0.0, 0.5, 0.5, 0.5)
    with pytest.raises(
        ConfigError,
        match=r"rates.background: expected a number in \(0, 1\), got -0.1 .*0 = no "
        r"background",
    ):
        load_config(config(rates={**RATES0, "background": -0.1, "attacker": 0.6}))


def test_evaluation_with_background_zero(tmp_path):
    rsm = {
        "id": "any.random_set_mean",
        "name": "rsm",
        "params": {
            "attribute": "group",
            "set_size": 4,
            "purity": 0.5,
            "sensitive_attribute": "subject",
            "relevance_trees": 10,
        },
    }
    cfg = config(
        **{
            **SMALL,
            "rates": RATES0,
            "anonymizers": [rsm, {"id": "any.gaussian_noise", "name": "noise", "params": {"sigma": 1.0}}],
        }
    )
    cache = Cache(tmp_path / "cache")
    result = bioanon.evaluate(cfg, out_dir=None, cache=cache, progress=False, report=False)
    assert result.failures == []
    assert any("rates.background = 0" in w for w in result.warnings)
    top1 = result.metrics[result.metrics.metric == "top1"]
    assert {"clear", "naive", "parrot"} <= set(top1.scenario) and set(top1.anonymizer) == {"rsm", "noise"}

    # the split: an empty background, attacker and evaluation halves of all 60 subjects
    data = bioanon.load_dataset(cfg["dataset"]["source"], **cfg["dataset"]["params"])
    from bioanon.evaluation.run import build_plan

    plan = build_plan(load_config(cfg), cache, data)
    split = next(t for t in plan.tasks if t.op == "split")
    parts = {n: cache.get_table(output_key(split.key, n)) for n in ("background", "attacker", "evaluation")}
    assert len(parts["background"]) == 0
    assert parts["attacker"].num_subjects == parts["evaluation"].num_subjects == 30
    assert not set(parts["attacker"].subject_names) & set(parts["evaluation"].subject_names)
    # each set anonymized by an anonymizer fitted on that set itself
    anon = next(t for t in plan.tasks if t.op == "anonymize" and t.args["method"]["id"] == "any.random_set_mean")
    m = bioanon.get_method("any.random_set_mean", **anon.args["method"]["params"])
    for name in ("attacker", "evaluation"):
        expected = m.fit(parts[name]).transform(parts[name]).payload("features")
        np.testing.assert_array_equal(cache.get_table(output_key(anon.key, name)).payload("features"), expected)
