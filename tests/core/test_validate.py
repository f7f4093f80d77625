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


def test_data_checks_name_the_label_and_the_payload(tmp_path):
    cfg = config(**SMALL)
    cfg["label"] = "no_such_attribute"
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
    import json

    stored = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("*.json")]
    assert all(set(v) == {"dataset", "source", "path", "rows"} for v in stored)  # the import only: no task ran
    from bioanon.evaluation.rundir import read_status

    assert read_status(tmp_path / "out" / "r")["state"] == "failed"
