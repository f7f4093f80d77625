"""`bioanon validate` and the checks every evaluation runs before any computation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from evalconfigs import SMALL, config, failing_recognizer_plugin

import bioanon
from bioanon.errors import ConfigError
from bioanon.evaluation.checks import validate

GOOD = textwrap.dedent("""
    name = "v"
    [dataset]
    source = "any.synthetic"
    params = { n_subjects = 30 }
    [[anonymizers]]
    id = "any.gaussian_noise"
    grid = { sigma = [1.0, 2.0] }
    [[recognizers]]
    id = "any.cosine_centroid"
""")


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "bioanon.cli", *map(str, args)], capture_output=True, text=True, env=env, timeout=300
    )


def test_cli_validate_accepts_a_good_config_and_runs_nothing(tmp_path):
    toml = tmp_path / "good.toml"
    toml.write_text(GOOD)
    env = {**os.environ, "BIOANON_CACHE": str(tmp_path / "cache")}
    out = _cli("validate", toml, "--out", tmp_path / "results", "--data", env=env)
    assert out.returncode == 0, out.stderr
    assert "valid" in out.stdout and "2 anonymizer setting(s)" in out.stdout
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_cli_validate_lists_every_problem_at_once(tmp_path):
    toml = tmp_path / "bad.toml"
    toml.write_text(
        GOOD.replace("grid = { sigma = [1.0, 2.0] }", 'params = { sigma = -1 }\ngrid = { seed = [1, "x"] }')
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = _cli("validate", toml, "--out", blocker / "results")
    assert out.returncode == 2
    assert "anonymizers[0].params.sigma" in out.stderr and "anonymizers[0].grid.seed[1]" in out.stderr
    assert "out: cannot create a run folder" in out.stderr and "is not a folder" in out.stderr


def test_data_checks_name_the_label_and_the_payload(monkeypatch):
    # a source that does not declare its attribute columns: the label is checked once the data are loaded
    from bioanon.builtin.datasets import SyntheticFeatures

    monkeypatch.setattr(SyntheticFeatures, "attribute_names", None)
    cfg = config(**SMALL)
    cfg["label"] = "no_such_attribute"
    validate(cfg)  # not checked without the data
    with pytest.raises(ConfigError, match=r"label: the data set has no attribute column 'attr.no_such_attribute'"):
        validate(cfg, load_data=True)


def test_evaluate_checks_payloads_before_any_work(tmp_path, register_bioanon_plugin):
    # scoring would fail: the payload check must stop the run before
    register_bioanon_plugin(failing_recognizer_plugin("test.image_only", ("image",), "never reached"), "image_only")
    cfg = config(**SMALL)
    cfg["recognizers"] = [{"id": "any.cosine_centroid"}, {"id": "test.image_only"}]
    with pytest.raises(
        ConfigError,
        match=r"recognizers\[1\].id: test.image_only reads image data, but the data "
        r"set has only features",
    ):
        bioanon.evaluate(cfg, out_dir=tmp_path / "out", run_id="r", cache=tmp_path / "cache", progress=False)
    from bioanon.cache import Cache

    cache = Cache(tmp_path / "cache")
    stored = [cache.get_json(p.stem) for p in (tmp_path / "cache").rglob("*.json")]
    assert all(set(v) == {"dataset", "source", "path", "rows"} for v in stored)  # the import only: no task ran
    from bioanon.evaluation.rundir import read_status

    assert read_status(tmp_path / "out" / "r")["state"] == "failed"


def test_validate_without_data_checks_every_attribute_name_against_the_declared_columns():
    # any.synthetic declares group, activity and age: every name a config uses is checked without the data
    cfg = config(**SMALL)
    cfg["label"] = "gruop"
    cfg["utility"] = [{"id": "any.attribute_accuracy", "params": {"attribute": "Activity"}}]
    cfg["anonymizers"] = [{"id": "any.random_set_mean", "grid": {"attribute": ["activity", "mood"]}}]
    cfg["selection"] = {"selectors": [{"id": "any.select_metadata", "params": {"attributes": ["age", "sex"]}}]}
    cfg["report"] = {"breakdown": ["group", "gender"], "paper_protocol": "actvity"}
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    cols = "its attribute columns: group, activity, age"
    assert e.value.problems == [
        f"label: the data set any.synthetic has no attribute column 'gruop'; {cols}; did you mean 'group'?",
        f"report.paper_protocol: the data set any.synthetic has no attribute column 'actvity'; {cols}; "
        "did you mean 'activity'?",
        f"report.breakdown: the data set any.synthetic has no attribute column 'gender'; {cols}",
        f"anonymizers[0].grid.attribute[1]: the data set any.synthetic has no attribute column 'mood'; {cols}",
        f"selection.selectors[0].params.attributes: the data set any.synthetic has no attribute column 'sex'; {cols}",
        f"utility[0].params.attribute: the data set any.synthetic has no attribute column 'Activity'; {cols}; "
        "did you mean 'activity'?",
    ]
    good = config(**SMALL)
    good["label"] = "group"
    good["utility"] = [{"id": "any.attribute_accuracy", "params": {"attribute": "activity"}}]
    good["report"] = {"breakdown": ["group"], "paper_protocol": "activity"}
    assert validate(good).label == "group"


def test_validate_without_data_checks_the_attacker_data_sets_mapping():
    cfg = config(**SMALL)
    cfg["label"] = "group"
    cfg["rates"] = {"background": 0.2, "evaluation": 0.8}
    cfg["attacker_dataset"] = {"source": "any.synthetic", "attributes": {"groups": "group"}, "subject_prefix": "a:"}
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert e.value.problems == [
        "attacker_dataset.attributes.groups: the attacker data set any.synthetic has no attribute column 'groups'; "
        "its attribute columns: group, activity, age; did you mean 'group'?"
    ]
    cfg["attacker_dataset"]["attributes"] = {"group": "kind"}  # the label is renamed away
    with pytest.raises(
        ConfigError, match=r"attacker_dataset: .* no attribute column 'group' \(the evaluation's label\)"
    ):
        validate(cfg)
    cfg["attacker_dataset"]["attributes"] = {"group": "group"}
    assert validate(cfg).attacker_dataset is not None


def test_column_suggestion_knows_spellings_cases_and_synonyms():
    from bioanon.evaluation.config import column_suggestion

    assert column_suggestion("sex", ["chapter", "text", "gender", "subset"]) == "gender"
    assert column_suggestion("gender", ["subset", "role", "sex", "text"]) == "sex"
    assert column_suggestion("male", ["Male", "Smiling"]) == "Male"
    assert column_suggestion("actvity", ["group", "activity", "age"]) == "activity"
    assert column_suggestion("speaker", ["gender", "subject"]) == "subject"
    assert column_suggestion("sex", ["chapter", "text"]) is None  # no synonym present, nothing close
