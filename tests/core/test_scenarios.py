"""Tests of bioanon.evaluation.scenarios: scenario names and parsing, their data sets, display order and names,
the headline metric and the worst case with its tie rule."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bioanon.errors import BioanonError, ConfigError
from bioanon.evaluation import scenarios as sc

# ---------------------------------------------------------------------------------------------- names, parsing


@pytest.mark.parametrize("text, expected", [
    ("naive", "naive"), (" lazy ", "lazy"), ("parrot", "parrot"), ("deanon", "deanon"),
    ("parrot:.5", "parrot:0.5"), ("parrot:0.25", "parrot:0.25"), ("parrot:1e-1", "parrot:0.1"),
])  # fmt: skip
def test_parse_scenario_normalizes(text, expected):
    assert sc.parse_scenario(text) == expected


@pytest.mark.parametrize("text, message", [
    ("clear", "'clear' is always evaluated; do not list it"),
    ("chance", "'chance' is always evaluated"),
    ("parrot:x", "expected 'parrot:<share>' with a number share in (0, 1), got 'parrot:x'"),
    ("parrot:", "expected 'parrot:<share>'"),
    ("parrot:1", "the parrot share must be in (0, 1), got 'parrot:1'"),
    ("parrot:0", "the parrot share must be in (0, 1)"),
    ("parrot:-0.5", "the parrot share must be in (0, 1)"),
    ("parot", "unknown scenario 'parot'; did you mean 'parrot'?"),
    ("naiv:0.3", "did you mean 'naive:0.3'?"),
    ("strongest", "unknown scenario 'strongest'; allowed: naive, lazy, parrot, parrot:<share>, deanon"),
])  # fmt: skip
def test_parse_scenario_rejects(text, message):
    with pytest.raises(ConfigError) as exc:
        sc.parse_scenario(text)
    assert message in str(exc.value)
    assert isinstance(exc.value, BioanonError)


def test_config_reads_the_same_names():
    from bioanon import report
    from bioanon.evaluation import config, run, tasks

    assert config.SCENARIOS is sc.SCENARIOS and config.ALWAYS_SCENARIOS is sc.ALWAYS_SCENARIOS
    assert run.ATTACK_SCENARIOS is sc.ATTACK_SCENARIOS and tasks.SCENARIOS_BASE is sc.SCENARIOS_BASE
    assert tasks.scenario_sets is sc.scenario_sets and run._sets_for is sc.scenario_tables
    assert run.headline_metric is sc.headline_metric_of and report.VOICEPRIVACY_SCENARIOS is sc.VOICEPRIVACY_SCENARIOS
    assert sc.SCENARIOS_BASE == ("clear",) + sc.SCENARIOS


def test_parrot_share_defaults_and_plan_order():
    assert sc.parrot_share("parrot:0.3") == 0.3
    assert sc.parrot_share("parrot") is None and sc.parrot_share("naive") is None
    with pytest.raises(ValueError):
        sc.parrot_share("parrot:x")
    assert sc.default_scenarios(False) == ("naive", "parrot")
    assert sc.default_scenarios(True) == ("naive", "parrot", "deanon")
    assert sc.planned_scenarios(("parrot", "naive")) == ["clear", "parrot", "naive"]
    assert sc.planned_scenarios(("clear", "lazy")) == ["clear", "lazy"]
    assert [sc.is_attack(s) for s in ("clear", "chance", "naive", "parrot:0.5")] == [False, False, True, True]


# ------------------------------------------------------------------------------------------------- data sets


def test_scenario_sets():
    assert sc.scenario_sets("clear") == ("clear", "clear", "clear")
    assert sc.scenario_sets("naive") == ("clear", "clear", "anon")
    assert sc.scenario_sets("lazy") == ("clear", "anon", "anon")
    assert sc.scenario_sets("parrot") == ("anon", "anon", "anon")
    assert sc.scenario_sets("parrot:0.25") == ("mix:0.25", "anon", "anon")
    assert sc.scenario_sets("deanon") == ("clear", "clear", "deanon")
    with pytest.raises(KeyError):
        sc.scenario_sets("strongest")


def test_scenario_tables_only_what_a_scenario_reads():
    sets = {
        "clear_attacker": "ca",
        "anon_attacker": "aa",
        "clear_evaluation": "ce",
        "anon_evaluation": "ae",
        "deanon_evaluation": "de",
    }
    assert sc.scenario_tables("clear", sets) == {"clear_attacker": "ca", "clear_evaluation": "ce"}
    assert sc.scenario_tables("naive", sets) == {
        "clear_attacker": "ca",
        "anon_evaluation": "ae",
        "clear_evaluation": "ce",
    }
    assert sc.scenario_tables("parrot:0.5", sets) == {
        "anon_attacker": "aa",
        "clear_attacker": "ca",
        "anon_evaluation": "ae",
        "clear_evaluation": "ce",
    }
    assert sc.scenario_tables("deanon", sets) == {
        "clear_attacker": "ca",
        "clear_evaluation": "ce",
        "deanon_evaluation": "de",
    }
    # fitted on the evaluation subjects' enrolment data: no attacker set
    assert sc.scenario_tables("parrot:0.5", sets, "enrolment") == {"anon_evaluation": "ae", "clear_evaluation": "ce"}
    assert list(sc.scenario_tables("lazy", sets)) == sorted(sc.scenario_tables("lazy", sets))


# ------------------------------------------------------------------------------------------- display order, names


def test_display_order():
    values = ["deanon", "parrot:0.5", "parrot", "other", "clear", "lazy", "naive", "parrot:0.25", "naive"]
    assert sc.display_order(values) == [
        "clear",
        "naive",
        "lazy",
        "parrot",
        "parrot:0.25",
        "parrot:0.5",
        "other",
        "deanon",
    ]
    assert sc.display_key("parrot:bad") < sc.display_key("parrot:0.1")  # an unreadable share sorts as 0


def test_display_names():
    vpc = sc.display_names("voiceprivacy")
    assert vpc == {"naive": "ignorant", "lazy": "lazy-informed", "parrot": "semi-informed"}
    vpc["naive"] = "changed"  # a copy: the module's mapping stays as it is
    assert sc.VOICEPRIVACY_SCENARIOS["naive"] == "ignorant"
    assert sc.display_names("") == {} and sc.display_names(None) == {}
    names = sc.display_names("voiceprivacy")
    assert [sc.display_name(s, names) for s in ("clear", "naive", "parrot:0.5", "deanon")] == [
        "clear",
        "ignorant (naive)",
        "semi-informed (parrot:0.5)",
        "deanon",
    ]
    assert sc.display_name("naive", {}) == "naive"


# ----------------------------------------------------------------------------------------- headline, worst case


def test_headline_metric():
    assert sc.headline_metric("subject") == "top1"
    assert sc.headline_metric("sex") == "balanced_accuracy"
    assert sc.headline_metric_of(pd.DataFrame({"label": ["subject", "subject"]})) == "top1"
    assert sc.headline_metric_of(pd.DataFrame({"label": ["subject", "sex"]})) == "balanced_accuracy"
    assert sc.headline_metric_of(pd.DataFrame({"label": []})) == "top1"
    assert sc.headline_metric_of(pd.DataFrame({"value": [0.5]})) == "top1"


def _rows(*rows):
    return pd.DataFrame([dict(zip(("setting", "recognizer", "scenario", "value"), r, strict=True)) for r in rows])


def test_worst_case_is_the_highest_attack_not_clear():
    df = _rows(
        (0, "knn", "clear", 0.99),
        (0, "knn", "naive", 0.2),
        (0, "cnn", "parrot", 0.6),
        (0, "cnn", "lazy", math.nan),
        (1, "knn", "naive", 0.1),
        (1, "knn", "deanon", 0.7),
    )
    w = sc.worst_case(df, ["setting"])
    assert list(zip(w.setting, w.recognizer, w.scenario, w.value, strict=True)) == [
        (0, "cnn", "parrot", 0.6),
        (1, "knn", "deanon", 0.7),
    ]
    w = sc.worst_case(df, ["setting"], deanon=False)  # the trade-off curve without de-anonymization
    assert list(zip(w.setting, w.scenario, strict=True)) == [(0, "parrot"), (1, "naive")]
    one = sc.worst_case(df[df.setting == 0])  # no keys: the whole table is one group
    assert len(one) == 1 and one.iloc[0].scenario == "parrot"


def test_worst_case_leaves_out_groups_without_attacks():
    df = _rows((0, "knn", "clear", 0.9), (0, "knn", "naive", math.nan), (1, "knn", "naive", 0.3))
    w = sc.worst_case(df, ["setting"])
    assert list(w.setting) == [1]
    assert sc.worst_case(df[df.setting == 0]).empty
    empty = sc.worst_case(df.iloc[:0], ["setting"])
    assert empty.empty and {"recognizer", "scenario", "value"} <= set(empty.columns)


def test_worst_case_ties():
    # the same value from two recognizers and two scenarios, listed in plan order (parrot before naive in config)
    df = _rows(
        (0, "knn", "clear", 1.0),
        (0, "knn", "parrot", 0.5),
        (0, "knn", "naive", 0.5),
        (0, "cnn", "clear", 1.0),
        (0, "cnn", "parrot", 0.5),
        (0, "cnn", "naive", 0.5),
    )
    # one rule: the first recognizer (by default in the order of the rows: the config's), then the first scenario
    # in display order, whatever the order of the rows
    first = sc.worst_case(df, ["setting"]).iloc[0]
    assert (first.recognizer, first.scenario) == ("knn", "naive")
    shuffled = sc.worst_case(df.iloc[[0, 2, 1, 3, 5, 4]], ["setting"]).iloc[0]
    assert (shuffled.recognizer, shuffled.scenario) == ("knn", "naive")
    shown = sc.worst_case(df, ["setting"], recognizers=["cnn", "knn"]).iloc[0]
    assert (shown.recognizer, shown.scenario) == ("cnn", "naive")
    # recognizers not listed come last
    shown = sc.worst_case(df, ["setting"], recognizers=["other"]).iloc[0]
    assert (shown.recognizer, shown.scenario) == ("knn", "naive")
    # no helper column is left behind
    assert list(sc.worst_case(df, ["setting"], recognizers=["knn"]).columns) == list(df.columns)


def test_run_and_report_name_the_same_tied_worst_case(tmp_path):
    """An exact tie (the identity anonymizer: every attack scenario sees the clear data; two recognizers that
    differ only by name): the run's headline and trade-off tables and the report's rule (recognizers in config
    order, scenarios in display order) name the same recognizer and scenario, although the plan lists parrot
    first."""
    from evalconfigs import SMALL, config

    import bioanon

    cfg = config(**SMALL)
    cfg.update(
        anonymizers=[{"id": "any.identity", "name": "none"}],
        scenarios=["parrot", "lazy", "naive"],
        recognizers=[{"id": "any.cosine_centroid", "name": "zeta"}, {"id": "any.cosine_centroid", "name": "alpha"}],
        utility=[],
    )
    result = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path, progress=False, report=False)
    top = result.metrics[(result.metrics.metric == "top1") & (result.metrics.scenario != "clear")]
    means = top.groupby(["recognizer", "scenario"]).value.mean()
    assert means.nunique() == 1 and len(means) == 6, means  # the tie is exact
    head = result.headline()
    assert list(zip(head.worst_recognizer, head.worst_scenario, strict=True)) == [("zeta", "naive")]
    keys = ["anonymizer", "setting_index", "setting", "selector", "n_subjects"]
    agg = top.groupby(keys + ["recognizer", "scenario"], sort=False).value.mean().reset_index()
    shown = sc.worst_case(agg, keys, recognizers=["zeta", "alpha"])  # as the report calls it
    assert set(zip(shown.recognizer, shown.scenario, strict=True)) == {("zeta", "naive")}
    named = zip(result.tradeoff.worst_recognizer, result.tradeoff.worst_scenario, strict=True)
    assert len(result.tradeoff) and set(named) == {("zeta", "naive")}
