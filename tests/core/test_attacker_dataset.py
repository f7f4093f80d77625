"""``[attacker_dataset]``: attacker data from another data set (cross-database protocols, issue 22 item 4).

The attacker's training data (and the similarity attack's database) come from a second data set; the evaluated
data set gives the background and the evaluation subjects. Checked here end to end with two data sources, with a
recognizer that records what it was fitted on, plus the configuration and data errors."""

from __future__ import annotations

import json
import tomllib
from typing import ClassVar

import attrs
import numpy as np
import pytest

import bioanon
from bioanon.builtin.attacks import SimilarityAttributeAttack
from bioanon.builtin.recognizers import LdaCosine
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.evaluation.config import Rates, load_config
from bioanon.evaluation.run import build_plan, import_key
from bioanon.evaluation.tasks import output_key, run_task
from bioanon.table import SampleTable

NOISE = [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 3.0]}}]
SELECTION = {"selectors": ["random"], "subject_counts": [], "random_draws": 1}


def _spy_plugin(base: type, method_id: str, fits: list):
    """A plugin registering ``method_id``: ``base`` that records the subjects and labels it is fitted on."""

    @attrs.define(kw_only=True)
    class Spy(base):
        """Records its training data (test only)."""

        id: ClassVar[str] = method_id

        def fit(self, train, label="subject"):
            labels = train.subjects if label == "subject" else train.attribute(label)
            fits.append({"subjects": set(train.subject_names), "labels": {str(v) for v in labels}})
            return super().fit(train, label)

    class Plugin:
        @staticmethod
        @bioanon.hookimpl
        def register_recognizers(register):
            register(Spy)

    return Plugin()


@pytest.fixture
def two_tables(tmp_path):
    """One synthetic population split subject-disjointly into two data sets written to disk in two formats: the
    evaluated ``a.arrow`` (attribute ``group`` = a/b) and the attacker's ``b.parquet``, whose attribute is
    called ``gender`` with values female/male (to be mapped back onto group = a/b)."""
    full = bioanon.load_dataset("any.synthetic", n_subjects=56, samples_per_subject=8, dim=16, seed=3)
    subjects = full.subject_names
    a, b = full.select_subjects(subjects[:28]), full.select_subjects(subjects[28:])
    gender = np.where(b.attribute("group") == "a", "female", "male")
    b = SampleTable(b.arrow.drop_columns(["attr.group"]), validate=False).with_attribute("gender", gender)
    a.save(tmp_path / "a.arrow")
    b.to_parquet(tmp_path / "b.parquet")
    return tmp_path / "a.arrow", tmp_path / "b.parquet", set(a.subject_names), set(b.subject_names)


def _config(evaluated, attacker, **overrides):
    c = {
        "name": "xdb",
        "seed": 0,
        "repeats": 1,
        "dataset": evaluated,
        "attacker_dataset": attacker,
        "anonymizers": NOISE,
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive", "parrot"],
        "selection": SELECTION,
        "report": {"bootstrap": 50},
    }
    c.update(overrides)
    return c


def _synthetic(seed, n=24, **params):
    return {
        "source": "any.synthetic",
        "params": {"n_subjects": n, "samples_per_subject": 8, "dim": 16, "seed": seed, **params},
    }


def _every_scenario(result, recognizers, scenarios=("clear", "naive", "parrot")):
    m = result.metrics
    assert result.failures == []
    for rec in recognizers:
        for scen in scenarios:
            for idx in (0, 1):
                rows = m[(m.recognizer == rec) & (m.scenario == scen) & (m.setting_index == idx)]
                assert len(rows) and rows.value.notna().any(), (rec, scen, idx)


# ------------------------------------------------------------------------------------------------ end to end


def test_identity_cross_database(tmp_path, register_bioanon_plugin):
    """Two generators (subject ids s00… in both, told apart with subject_prefix): the attacker's recognizer is
    fitted on the other data set only; the gallery is the evaluation subjects' enrolment part."""
    fits: list = []
    register_bioanon_plugin(_spy_plugin(LdaCosine, "test.spy_lda", fits), "spy")
    cfg = _config(
        _synthetic(3),
        {**_synthetic(11, n=16), "subject_prefix": "xdb:"},
        recognizers=[{"id": "test.spy_lda"}, {"id": "any.cosine_centroid"}],
    )
    result = bioanon.evaluate(cfg, out_dir=tmp_path / "runs", cache=Cache(tmp_path / "cache"), progress=False)
    _every_scenario(result, ["test.spy_lda", "any.cosine_centroid"])

    # every fit saw only the attacker data set's subjects (clear and anonymized, under naive and parrot)
    evaluated = set(bioanon.load_dataset("any.synthetic", **cfg["dataset"]["params"]).subject_names)
    assert fits and all(f["subjects"] and all(s.startswith("xdb:") for s in f["subjects"]) for f in fits)
    assert all(not f["subjects"] & evaluated for f in fits)
    # the split: attacker part = the 16 attacker subjects; background and evaluation from the evaluated set
    lineage = json.loads((result.run_dir / "lineage.json").read_text())[0]["subjects"]
    assert len(lineage["attacker"]) == 16 and all(s.startswith("xdb:") for s in lineage["attacker"])
    assert set(lineage["background"]) | set(lineage["evaluation"]) == evaluated
    assert not set(lineage["background"]) & set(lineage["evaluation"])
    # identity recognition still works: the gallery is the evaluation enrolment part
    top1 = result.metrics[(result.metrics.metric == "top1") & (result.metrics.scenario == "clear")]
    assert (top1.value > 2 * top1.chance).all()
    # both data sets are recorded and named
    env = json.loads((result.run_dir / "environment.json").read_text())
    assert env["attacker_dataset_fingerprint"] and env["dataset_fingerprint"]
    recorded = json.loads((result.run_dir / "config.json").read_text())
    assert recorded["attacker_dataset"]["subject_prefix"] == "xdb:" and recorded["rates"]["attacker"] == 0
    html = result.report_path.read_text()
    assert "attacker data (training, database)" in html and "data (background, evaluation)" in html


def test_attribute_cross_database_similarity_attack(tmp_path, two_tables, register_bioanon_plugin):
    """Two tables on disk (Arrow and Parquet) through the table source; the attacker's ``gender`` mapped onto
    the evaluated ``group``; the similarity attack's database is the attacker data set, labelled a/b."""
    a, b, subjects_a, subjects_b = two_tables
    fits: list = []
    register_bioanon_plugin(_spy_plugin(SimilarityAttributeAttack, "test.spy_similarity", fits), "spy")
    attacker = {
        "source": "any.table",
        "path": str(b),
        "attributes": {"gender": {"to": "group", "values": {"female": "a", "male": "b"}}},
    }
    cfg = _config(
        {"source": "any.table", "path": str(a)},
        attacker,
        label="group",
        rates={"background": 0.25, "evaluation": 0.75},
        recognizers=[{"id": "test.spy_similarity", "params": {"n": 5}}, {"id": "any.attribute_knn"}],
    )
    result = bioanon.evaluate(cfg, out_dir=tmp_path / "runs", cache=Cache(tmp_path / "cache"), progress=False)
    _every_scenario(result, ["test.spy_similarity", "any.attribute_knn"])
    assert fits and all(f["subjects"] <= subjects_b and f["labels"] == {"a", "b"} for f in fits)
    m = result.metrics
    clear = m[(m.metric == "balanced_accuracy") & (m.scenario == "clear") & (m.recognizer == "test.spy_similarity")]
    assert clear.value.mean() > 0.7  # the attribute transfers across the two data sets
    lineage = json.loads((result.run_dir / "lineage.json").read_text())[0]["subjects"]
    assert set(lineage["attacker"]) == subjects_b
    assert set(lineage["evaluation"]) | set(lineage["background"]) == subjects_a
    assert len(lineage["background"]) == 7
    html = result.report_path.read_text()
    assert "b.parquet" in html and "a.arrow" in html and "gender → group" in html


def test_attacker_data_anonymized_like_the_attacker_split(tmp_path):
    """The anonymizer, fitted on the evaluated data's background, transforms the attacker data set; a share of
    the attacker's subjects is drawn per repeat; the attacker import goes through the import cache."""
    cache = Cache(tmp_path / "cache")
    anonymizer = [
        {
            "id": "any.random_set_mean",
            "name": "rsm",
            "params": {
                "attribute": "group",
                "set_size": 3,
                "purity": 0.5,
                "sensitive_attribute": "subject",
                "relevance_trees": 5,
            },
        }
    ]
    cfg = load_config(
        _config(
            _synthetic(3),
            {**_synthetic(11, n=20), "subject_prefix": "x", "subjects": 0.5},
            anonymizers=anonymizer,
            repeats=2,
            rates={"background": 0.5, "evaluation": 0.5},
        )
    )
    data = bioanon.load_dataset("any.synthetic", **cfg.dataset.params)
    plan = build_plan(cfg, cache, data)
    assert cache.get_json(import_key(cfg.attacker_dataset))["source"] == "any.synthetic"  # imported, cached
    for task in plan.tasks:
        if task.op in ("split", "anonymize"):
            run_task(task, cache)
    splits = [t for t in plan.tasks if t.op == "split"]
    drawn = []
    for split in splits:
        bg, att = (cache.get_table(output_key(split.key, n)) for n in ("background", "attacker"))
        assert att.num_subjects == 10 and all(s.startswith("x") for s in att.subject_names)
        drawn.append(set(att.subject_names))
        anon = next(t for t in plan.tasks if t.op == "anonymize" and split.key in t.deps)
        m = bioanon.get_method("any.random_set_mean", **anon.args["method"]["params"]).fit(bg)
        done = cache.get_table(output_key(anon.key, "attacker")).payload("features")
        np.testing.assert_array_equal(done, m.transform(att).payload("features"))
        own = bioanon.get_method("any.random_set_mean", **anon.args["method"]["params"]).fit(att)
        assert not np.array_equal(done, own.transform(att).payload("features"))  # not fitted on itself
    assert drawn[0] != drawn[1]  # a fresh draw per repeat


def test_attacker_import_is_cached(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")
    cfg = _config(_synthetic(3), {**_synthetic(11, n=12), "subject_prefix": "x"}, anonymizers=NOISE[:1])
    bioanon.evaluate(cfg, out_dir=None, cache=cache, progress=False, report=False)
    calls = []
    real = bioanon.load_dataset
    monkeypatch.setattr(bioanon, "load_dataset", lambda *a, **k: calls.append(a) or real(*a, **k))
    result = bioanon.evaluate(cfg, out_dir=None, cache=cache, progress=False, report=False)
    assert calls == [] and result.executed == 0  # neither data set imported again, everything reused


# ------------------------------------------------------------------------------------------------ config


def test_config_rates_and_round_trip():
    cfg = load_config(
        _config(
            _synthetic(3),
            {
                **_synthetic(11),
                "subject_prefix": "x",
                "attributes": {"group": {"to": "sex", "values": {"a": "F"}}, "activity": "act"},
            },
        )
    )
    assert cfg.rates == Rates(0.2, 0.0, 0.8, 0.5)  # the attacker's share comes from the other data set
    assert load_config(cfg.to_dict()) == cfg
    assert load_config(tomllib.loads(cfg.to_toml())) == cfg
    assert (
        load_config(
            _config(_synthetic(3), _synthetic(11), rates={"background": 0, "attacker": 0, "evaluation": 1})
        ).rates.evaluation
        == 1.0
    )


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4}}, r"rates.attacker: must be 0 or omitted"),
        (
            {"rates": {"background": 0.3, "evaluation": 0.5}},
            r"rates: with \[attacker_dataset\] background \+ evaluation",
        ),
        ({"rates": {"evaluation": 0.5}}, r"rates.background: missing"),
        ({"attacker_dataset": {"source": "any.synthetc"}}, r"attacker_dataset.source: unknown dataset source"),
        ({"attacker_dataset": {**_synthetic(1), "subjects": 1.5}}, r"attacker_dataset.subjects: expected the share"),
        ({"attacker_dataset": {**_synthetic(1), "atributes": {}}}, r"attacker_dataset.atributes: unknown key; did you"),
        (
            {"attacker_dataset": {**_synthetic(1), "attributes": {"group": "sex", "activity": "sex"}}},
            r"attacker_dataset.attributes.activity: maps onto 'sex'",
        ),
        ({"attacker_dataset": {"source": "any.table"}}, r"attacker_dataset.path: missing required key"),
    ],
)
def test_config_errors(change, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config({**_config(_synthetic(3), _synthetic(11)), **change})


# ------------------------------------------------------------------------------------------------ data checks


def _fails(tmp_path, cfg, *patterns):
    with pytest.raises(ConfigError) as info:
        bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "cache"), progress=False, report=False)
    text = str(info.value)
    for p in patterns:
        assert p in text, text
    return text


def test_overlapping_subject_ids_are_refused(tmp_path):
    text = _fails(
        tmp_path,
        _config(_synthetic(3), _synthetic(11, n=16)),
        "16 subject id(s) occur in both the data set any.synthetic and the attacker data set any.synthetic",
        "s00",
        "subject_prefix",
    )
    assert "does not suit the evaluated data set" in text


def test_label_missing_or_not_covered(tmp_path, two_tables):
    a, b, _, _ = two_tables
    evaluated = {"source": "any.table", "path": str(a)}
    unmapped = {"source": "any.table", "path": str(b)}
    _fails(
        tmp_path,
        _config(evaluated, unmapped, label="group"),
        "has no attribute column 'attr.group' (the evaluation's label)",
        "'gender'",
        "b.parquet",
    )
    partly = {**unmapped, "attributes": {"gender": {"to": "group", "values": {"female": "a"}}}}
    _fails(
        tmp_path,
        _config(evaluated, partly, label="group"),
        "has no sample with group = 'b', found in the data set any.table",
        "'male'",
    )
    wrong_column = {**unmapped, "attributes": {"sex": "group"}}
    _fails(
        tmp_path,
        _config(evaluated, wrong_column, label="group"),
        "attacker_dataset.attributes.sex: the attacker data set any.table",
        "no attribute column 'attr.sex'",
    )


def test_payload_shape_mismatch_names_both_data_sets(tmp_path):
    _fails(
        tmp_path,
        _config(_synthetic(3), {**_synthetic(11, dim=8), "subject_prefix": "x"}),
        "payload 'features' has per-sample shape (16,) in the data set any.synthetic but (8,) in the attacker "
        "data set any.synthetic",
    )


def test_validate_with_data_checks_the_attacker_data_set():
    from bioanon.evaluation.checks import validate

    cfg = _config(_synthetic(3), _synthetic(11, n=16))
    validate(cfg)  # the config alone is fine
    with pytest.raises(ConfigError, match="occur in both the data set any.synthetic and the attacker data set"):
        validate(cfg, load_data=True)
    validate({**cfg, "attacker_dataset": {**_synthetic(11, n=16), "subject_prefix": "x"}}, load_data=True)


def test_templates_and_a_protection_with_attacker_data_from_another_data_set(tmp_path):
    """[templates] + [attacker_dataset]: the extractor is fitted on the evaluated set's background, the attacker's
    templates come from the other data set, and the similarity attack compares with PE-MIU's comparator."""
    cfg = _config(
        _synthetic(3),
        {**_synthetic(11), "subject_prefix": "x"},
        label="group",
        rates={"background": 0.3, "evaluation": 0.7},
        scenarios=["parrot"],
        templates={"recognizer": "any.lda_cosine"},
        anonymizers=[{"id": "any.pe_miu", "params": {"block_size": 2}}],
        recognizers=[{"id": "any.similarity_attribute_attack"}, {"id": "any.attribute_svm"}],
        report={"bootstrap": 0},
    )
    result = bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "cache"), progress=False, report=False)
    assert not result.failures, result.failures
    m = result.metrics
    used = m[(m.recognizer == "any.similarity_attribute_attack") & (m.scenario == "parrot")].comparator.unique()
    assert len(used) == 1 and used[0].startswith("PE-MIU block alignment"), used
    assert set(m.scenario) == {"clear", "parrot"} and m.value.notna().any()
