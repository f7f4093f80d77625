"""Stratified subject splits (``[rates] stratify``) and per-setting failures (``keep_going``), issue 32 item 5."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bioanon
from bioanon.cache import Cache
from bioanon.cli import build_parser
from bioanon.errors import ConfigError, TableError, TooFewValuesError
from bioanon.evaluation.config import load_config, stratify_columns
from bioanon.evaluation.run import build_plan
from bioanon.evaluation.tasks import derived_seed
from bioanon.executors import TaskFailed, stops_run

RATES = [0.2, 0.4, 0.4]
# config seed 1: the plain split of repeat 0 leaves only group "a" in the background (2 of 10 subjects)
SEED = 1


def _table(n_subjects=10):
    return bioanon.get_method("any.synthetic", n_subjects=n_subjects, samples_per_subject=6).load()


def _values(table, part):
    group = dict(zip(table.subjects, table.attribute("group"), strict=True))
    return {group[s] for s in part.subject_names}


def _config(**overrides):
    cfg = {
        "name": "strat",
        "seed": SEED,
        "repeats": 1,
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 10, "samples_per_subject": 6}},
        "anonymizers": [
            {"id": "any.gaussian_noise", "name": "noise", "params": {"sigma": 1.0}},
            {
                "id": "any.ive",
                "name": "ive",
                "params": {"attribute": "group", "steps": 1, "per_step": 1, "n_estimators": 5},
            },
        ],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["parrot"],
        "selection": {"selectors": ["random"], "random_draws": 1},
        "report": {"bootstrap": 20},
    }
    cfg.update(overrides)
    return cfg


def _evaluate(cfg, tmp_path, **kw):
    return bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "cache", progress=False, report=False, jobs=1, **kw)


# ------------------------------------------------------------------------------------------------- the split


def test_stratified_split_gives_every_part_every_value_and_is_deterministic():
    table = _table()
    seed = derived_seed(SEED, "repeat", 0)
    plain = table.split_subjects(RATES, seed)
    assert _values(table, plain[0]) == {"a"}  # the plain split leaves one value in the background
    parts = table.split_subjects(RATES, seed, stratify=["group"])
    assert [_values(table, p) for p in parts] == [{"a", "b"}] * 3
    assert sorted(s for p in parts for s in p.subject_names) == sorted(table.subject_names)  # disjoint, complete
    again = table.split_subjects(RATES, seed, stratify=["group"])
    assert [p.subject_names for p in again] == [p.subject_names for p in parts]
    shuffled = table.take(np.random.default_rng(0).permutation(len(table)))  # row order does not matter
    assert [p.subject_names for p in shuffled.split_subjects(RATES, seed, stratify=["group"])] == [
        p.subject_names for p in parts
    ]
    with pytest.raises(TableError, match="no column 'attr.gender'"):
        table.split_subjects(RATES, seed, stratify=["gender"])


def test_split_without_stratify_is_the_split_of_before():
    table = _table()
    seed = derived_seed(SEED, "repeat", 0)
    before = [["s6", "s8"], ["s2", "s3", "s5", "s7"], ["s0", "s1", "s4", "s9"]]  # bioanon before stratify existed
    assert [p.subject_names for p in table.split_subjects(RATES, seed)] == before
    assert [p.subject_names for p in table.split_subjects(RATES, seed, stratify=())] == before
    assert [p.subject_names for p in table.split_subjects([0.5, 0.5], 7)] == [
        ["s0", "s1", "s3", "s7", "s8"],
        ["s2", "s4", "s5", "s6", "s9"],
    ]
    one_value = table.with_attribute("same", np.full(len(table), "x"))  # a single stratum is the plain split
    assert [p.subject_names for p in one_value.split_subjects(RATES, seed, stratify=["same"])] == before


def test_a_subject_with_several_values_counts_by_its_most_frequent_one():
    from bioanon.table_transforms import subject_strata

    table = _table(6)
    activity = table.attribute("activity")
    stratum, labels, varying = subject_strata(table, ["group", "activity"])
    assert varying["group"] == 0 and varying["activity"] > 0
    subjects = sorted(table.subject_names)
    for i, s in enumerate(subjects):
        values, counts = np.unique(activity[table.subjects == s].astype(str), return_counts=True)
        assert labels[stratum[i]][1] == values[np.argmax(counts)]  # the most frequent, ties to the first sorted


# ------------------------------------------------------------------------------------------------- the config


def test_stratify_names_are_checked_at_validate():
    with pytest.raises(
        ConfigError,
        match=r"rates.stratify\[0\]: the data set any.synthetic has no attribute column "
        r"'gruop'.*did you mean 'group'",
    ):
        load_config(_config(rates={"stratify": ["gruop"]}))
    with pytest.raises(ConfigError, match=r"rates.stratify\[0\]: 'label' names the subject"):
        load_config(_config(rates={"stratify": ["label"]}))
    with pytest.raises(ConfigError, match=r"rates.stratify: expected a list of attribute names"):
        load_config(_config(rates={"stratify": "group"}))
    cfg = load_config(_config(rates={"stratify": ["group", "label"]}, label="group"))
    assert stratify_columns(cfg) == ("group",)
    assert load_config(cfg.to_dict()) == cfg and load_config(cfg.to_dict()).rates.stratify == ("group", "label")
    auto = load_config(_config(rates={"stratify": "auto"}))
    assert stratify_columns(auto) == ("group",)  # any.ive's attribute; the label is the subject
    plain = load_config(_config())
    assert stratify_columns(plain) == () and "stratify" not in plain.to_dict()["rates"]
    assert "keep_going" not in plain.to_dict()["run"]
    assert load_config(_config(run={"keep_going": False})).run.keep_going is False
    with pytest.raises(ConfigError, match="run.keep_going: expected true"):
        load_config(_config(run={"keep_going": "no"}))


def test_the_plan_warns_of_strata_too_small_for_every_part(tmp_path):
    cfg = load_config(_config(rates={"stratify": ["age"]}))
    table = _table()
    plan = build_plan(cfg, Cache(tmp_path), table)
    assert any("[rates] stratify:" in w and "too few subjects" in w for w in plan.warnings), plan.warnings
    split = next(t for t in plan.tasks if t.op == "split")
    assert split.args["stratify"] == ["age"]
    plain = build_plan(load_config(_config()), Cache(tmp_path), table)
    assert "stratify" not in next(t for t in plain.tasks if t.op == "split").args  # the same key as before


# ------------------------------------------------------------------------------------------------- the run


def test_a_stratified_run_fits_every_setting(tmp_path):
    result = _evaluate(_config(rates={"stratify": "auto"}), tmp_path)
    assert not result.failures
    assert set(result.metrics.anonymizer) == {"noise", "ive"}


def test_a_setting_that_fails_on_its_data_does_not_stop_the_others(tmp_path):
    result = _evaluate(_config(), tmp_path)  # the background holds one group: any.ive cannot be fitted
    assert result.failures and all("ive" in f["task"] for f in result.failures)
    assert any(
        "TooFewValuesError" in f["error"] and "at least two values of 'group'" in f["error"] for f in result.failures
    )
    assert set(result.metrics.anonymizer) == {"noise"}
    with pytest.raises(TaskFailed, match="anonymize ive.*at least two values"):
        _evaluate(_config(), tmp_path, keep_going=False)
    with pytest.raises(TaskFailed, match="anonymize ive.*at least two values"):
        _evaluate(_config(run={"keep_going": False}), tmp_path)


def test_only_too_few_values_fail_a_setting_alone_by_default():
    assert not stops_run(None, TooFewValuesError("one value of 'group'"))
    assert stops_run(None, TableError("no attribute column"))  # a config problem: every setting has it
    assert stops_run(None, RuntimeError("a bug"))
    assert stops_run(False, TooFewValuesError("one value"))
    assert not stops_run(True, RuntimeError("a bug"))


def test_the_cli_keep_going_is_unset_unless_given(tmp_path):
    parser = build_parser()
    assert parser.parse_args(["evaluate", "c.toml"]).keep_going is None
    assert parser.parse_args(["evaluate", "c.toml", "--keep-going"]).keep_going is True
    assert parser.parse_args(["evaluate", "c.toml", "--no-keep-going"]).keep_going is False


def test_failures_are_written_with_the_results(tmp_path):
    bioanon.evaluate(
        _config(), out_dir=tmp_path / "o", run_id="r", cache=tmp_path / "c", progress=False, report=False, jobs=1
    )
    failures = json.loads((tmp_path / "o" / "r" / "failures.json").read_text())
    status = json.loads((tmp_path / "o" / "r" / "status.json").read_text())
    assert failures and all("ive" in f["task"] for f in failures)
    assert status["state"] == "complete with failures"
