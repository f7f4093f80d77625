"""The strong evaluation: the papers' qualitative findings on synthetic data built to have them, the cache
(no recomputation, partial recomputation, resume after a kill), no leakage, guards and failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from evalconfigs import SMALL, config, failing_recognizer_plugin

import bioanon
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.executors import TaskFailed


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    return bioanon.evaluate(
        config(), out_dir=root / "results", run_id="run", cache=root / "cache", progress=False, report=False
    )


def top1(metrics, **where):
    m = metrics[metrics.metric == "top1"]
    for k, v in where.items():
        m = m[m[k] == v]
    assert not m.empty, where
    return float(m.value.mean())


def test_h1_deterministic_permutation_defeats_naive_not_parrot(result):
    m = result.metrics
    for rec in ("any.cosine_centroid", "any.lda_cosine"):
        naive = top1(m, anonymizer="perm", recognizer=rec, scenario="naive", selector="random", n_subjects=24)
        parrot = top1(m, anonymizer="perm", recognizer=rec, scenario="parrot", selector="random", n_subjects=24)
        clear = top1(m, anonymizer="perm", recognizer=rec, scenario="clear", selector="random", n_subjects=24)
        assert naive < 1 / 24 + 0.1, f"{rec}: naive attacker should be near chance, got {naive}"
        assert parrot > naive + 0.4 and abs(parrot - clear) < 0.05, f"{rec}: parrot {parrot} vs clear {clear}"
    head = result.headline()
    row = head[head.anonymizer == "perm"].iloc[0]
    assert row.worst_scenario == "parrot" and row.worst_accuracy > 0.6


def test_h4_fewer_subjects_raise_accuracy_beyond_chance(result):
    m = result.metrics
    cna = m[
        (m.metric == "cna1")
        & (m.anonymizer == "noise")
        & (m.setting == "sigma=2.0")
        & (m.selector == "random")
        & (m.scenario != "clear")
    ]
    by_n = cna.groupby("n_subjects").value.mean()
    assert by_n[6] > by_n[24] + 0.05, by_n.to_dict()
    acc = m[(m.metric == "top1") & (m.anonymizer == "noise") & (m.selector == "random") & (m.scenario == "naive")]
    per_n = acc.groupby("n_subjects").agg(value=("value", "mean"), chance=("chance", "mean"))
    assert per_n.loc[6, "value"] - per_n.loc[24, "value"] > per_n.loc[6, "chance"] - per_n.loc[24, "chance"]


def test_h5_classification_selection_at_least_as_hard_as_random(result):
    """The worst case over recognizers and scenarios (the headline figure) on subjects chosen by the
    classification selector is at least the mean over random draws."""
    tr = result.tradeoff
    tr = tr[(tr.anonymizer == "noise") & (tr.n_subjects == 6)]
    for setting, g in tr.groupby("setting"):
        cls = g[g.selector == "classification"].accuracy.iloc[0]
        rnd = g[g.selector == "random"].accuracy.iloc[0]
        assert cls >= rnd, (setting, cls, rnd)
    m = result.metrics
    cls = top1(m, anonymizer="noise", selector="classification", n_subjects=6, scenario="parrot")
    rnd = top1(m, anonymizer="noise", selector="random", n_subjects=6, scenario="parrot")
    assert cls >= rnd, (cls, rnd)


def test_tidy_outputs_and_tradeoff(result):
    run = result.run_dir
    for name in (
        "config.json",
        "environment.json",
        "metrics.parquet",
        "utility.parquet",
        "tradeoff.parquet",
        "auc.parquet",
        "warnings.json",
        "failures.json",
        "lineage.json",
    ):
        assert (run / name).is_file(), name
    m = result.metrics
    assert set(m.scenario) == {"clear", "naive", "parrot"}
    assert {"top1", "top5", "cna1", "eer", "min_cllr", "balanced_accuracy", "per_subject_accuracy"} <= set(m.metric)
    t1 = m[m.metric == "top1"]
    assert (t1.ci_low <= t1.value + 1e-12).all() and (t1.value <= t1.ci_high + 1e-12).all()
    assert np.allclose(t1[t1.n_subjects == 6].chance, 1 / 6)
    draws = m[(m.selector == "random") & (m.n_subjects == 6)].draw.unique()
    assert sorted(draws) == [0, 1, 2, 3, 4]
    env = json.loads((run / "environment.json").read_text())
    assert env["bioanon"] == bioanon.__version__ and "bioanon-face" in env["plugins"]
    resolved = json.loads((run / "config.json").read_text())
    assert resolved["anonymizers"][0]["params"]["relative"] is True  # defaults filled in
    # the perm point: parrot recovers everything → privacy 0, so its AUC is 0
    auc = result.auc[result.auc.counted]
    assert (auc[auc.anonymizer == "perm"].auc == 0).all()
    noise_auc = auc[(auc.anonymizer == "noise") & (auc.selector == "random") & (auc.n_subjects == 24)].auc.iloc[0]
    assert 0 < noise_auc < 1
    tr = result.tradeoff
    assert tr.privacy.between(0, 1).all() and tr.utility.between(0, 1).all()


def test_no_leakage_between_background_attacker_and_evaluation(result):
    lineage = json.loads((result.run_dir / "lineage.json").read_text())
    assert len(lineage) == 2  # one split per repeat
    for rep in lineage:
        parts = {k: set(v) for k, v in rep["subjects"].items()}
        assert set(parts) == {"background", "attacker", "evaluation"}
        assert not parts["background"] & parts["attacker"]
        assert not parts["background"] & parts["evaluation"]
        assert not parts["attacker"] & parts["evaluation"]
        assert len(parts["evaluation"]) == 24
    assert lineage[0]["subjects"]["evaluation"] != lineage[1]["subjects"]["evaluation"]


def test_rerun_recomputes_nothing_and_one_change_only_its_dependents(tmp_path):
    cache = Cache(tmp_path / "cache")
    first = bioanon.evaluate(config(**SMALL), out_dir=None, cache=cache, progress=False)
    assert first.executed > 0 and first.cached == 0
    again = bioanon.evaluate(config(**SMALL), out_dir=None, cache=cache, progress=False)
    assert again.executed == 0 and again.cached == first.executed
    assert again.metrics.equals(first.metrics)

    changed = config(**SMALL)
    changed["recognizers"] = [{"id": "any.cosine_centroid", "params": {"center": False}}, {"id": "any.lda_cosine"}]
    third = bioanon.evaluate(changed, out_dir=None, cache=cache, progress=False)
    # only the score tasks of the changed recognizer: 2 settings × 2 scenarios (naive, parrot), and its clear level
    # once (the random draws of subjects are the same for every setting)
    assert third.executed == 5, third.executed
    lda = lambda r: r.metrics[r.metrics.recognizer == "any.lda_cosine"].reset_index(drop=True)  # noqa: E731
    assert lda(third).equals(lda(first))

    grid = config(**SMALL)
    grid["anonymizers"] = [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 3.0, 5.0]}}]
    fourth = bioanon.evaluate(grid, out_dir=None, cache=cache, progress=False)
    # one new setting: anonymize + 2 recognizers × 2 scenarios + 1 utility measure (its random draws of subjects
    # and the clear level on them are those of the other settings)
    assert fourth.executed == 1 + 4 + 1, fourth.executed


KILL_SCRIPT = textwrap.dedent("""
    import sys, json, bioanon
    cfg = json.loads(sys.argv[1])
    r = bioanon.evaluate(cfg, out_dir=None, cache=sys.argv[2], progress=False)
    r.metrics.to_json(sys.argv[3])
""")


def test_killed_run_resumes_with_identical_metrics(tmp_path):
    cfg = config(
        **{
            **SMALL,
            "anonymizers": [
                {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]}}
            ],
        }
    )
    cache_dir = tmp_path / "cache"
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(cfg), str(cache_dir), str(tmp_path / "x.json")])
    json_dir = cache_dir / "json"
    deadline = time.time() + 120
    while time.time() < deadline:
        n = sum(1 for _ in json_dir.rglob("*.json")) if json_dir.exists() else 0
        if n >= 8 or proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = sum(1 for _ in json_dir.rglob("*.json"))
    resumed = bioanon.evaluate(cfg, out_dir=None, cache=cache_dir, progress=False)
    assert resumed.cached >= min(done_before, 8) - 1  # what was finished is reused
    fresh = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "fresh", progress=False)
    assert resumed.metrics.equals(fresh.metrics)
    assert resumed.executed + resumed.cached == fresh.executed


def test_invalid_config_fails_before_any_work(tmp_path):
    bad = config(repeats="2", recognizers=[{"id": "any.cosine_centroi"}])
    cache_dir = tmp_path / "cache"
    with pytest.raises(ConfigError) as err:
        bioanon.evaluate(bad, out_dir=tmp_path / "out", cache=cache_dir, progress=False)
    msg = str(err.value)
    assert "repeats:" in msg and "did you mean 'any.cosine_centroid'" in msg
    assert not (cache_dir / "tables").exists() and not (tmp_path / "out").exists()


def test_attacker_too_weak_guard(tmp_path):
    cfg = config(**SMALL)
    cfg["dataset"] = {"source": "any.synthetic", "params": {"n_subjects": 40, "identity_scale": 0.0, "seed": 1}}
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path, progress=False)
    assert any(w.startswith("attacker too weak") for w in r.warnings), r.warnings


def test_unreachable_subject_count_and_too_few_samples_are_reported(tmp_path):
    cfg = config(**SMALL)
    cfg["selection"] = {"selectors": ["random"], "subject_counts": [100, 6], "random_draws": 1}
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path, progress=False)
    assert any("cannot reach 100 subjects" in w for w in r.warnings)
    assert set(r.metrics.n_subjects) == {6}

    table = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=4)
    keep = np.ones(len(table), bool)
    keep[np.flatnonzero(table.subjects == "s03")[1:]] = False  # s03 keeps a single sample
    cfg = config(**SMALL)
    cfg["selection"] = {"selectors": ["random"], "subject_counts": [6], "random_draws": 1}
    r = bioanon.evaluate(cfg, data=table.filter(keep), out_dir=None, cache=tmp_path, progress=False)
    assert any("too few samples per subject" in w and "s03" in w for w in r.warnings)


def test_subjects_with_one_sample_train_the_attacker_but_are_not_evaluated(tmp_path):
    table = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=4)
    single = ["s03", "s07", "s11", "s15", "s19", "s23"]
    keep = np.ones(len(table), bool)
    for s in single:
        keep[np.flatnonzero(table.subjects == s)[1:]] = False
    cfg = config(**SMALL)
    cfg["repeats"] = 2
    cfg["selection"] = {"selectors": ["random"], "subject_counts": [6], "random_draws": 1}
    r = bioanon.evaluate(
        cfg,
        data=table.filter(keep),
        out_dir=tmp_path / "out",
        run_id="r",
        cache=tmp_path / "c",
        progress=False,
        report=False,
    )
    lineage = json.loads((tmp_path / "out" / "r" / "lineage.json").read_text())
    for rep in lineage:
        parts = rep["subjects"]
        assert set(single) <= set(parts["attacker"]), parts["attacker"]  # legitimate extra training material
        assert not set(single) & (set(parts["evaluation"]) | set(parts["background"]))
        # the rates divide the 24 subjects that can be evaluated (0.2 / 0.4 / 0.4 by default)
        assert len(parts["background"]) + len(parts["attacker"]) - len(single) + len(parts["evaluation"]) == 24
        assert len(parts["evaluation"]) in (9, 10)  # 0.4 × 24 by the largest-remainder rule
    assert any("used as attacker training data" in w for w in r.warnings)
    assert not r.failures


def test_failure_stops_or_keeps_going(tmp_path, register_bioanon_plugin):
    register_bioanon_plugin(failing_recognizer_plugin("test.exploding", ("features",), "kaboom"), "exploding")
    cfg = config(**SMALL)
    cfg["recognizers"] = [{"id": "any.cosine_centroid"}, {"id": "test.exploding"}]
    with pytest.raises(TaskFailed, match="score test.exploding .*kaboom"):
        bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "a", progress=False)
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "b", progress=False, keep_going=True)
    # 2 settings × (naive, parrot), and its clear level once: the random draws are the same for every setting
    assert len(r.failures) == 5 and all("kaboom" in f["error"] for f in r.failures)
    assert set(r.metrics.recognizer) == {"any.cosine_centroid"}


def test_cli_evaluate_report_and_demo(tmp_path):
    toml = tmp_path / "eval.toml"
    toml.write_text(
        textwrap.dedent("""
        name = "cli"
        repeats = 1
        scenarios = ["naive", "parrot:0.5", "parrot"]

        [dataset]
        source = "any.synthetic"
        params = { n_subjects = 30 }

        [[anonymizers]]
        id = "any.gaussian_noise"
        grid = { sigma = [1.0, 2.0] }

        [[recognizers]]
        id = "any.cosine_centroid"

        [selection]
        selectors = ["random"]
        subject_counts = [12, 4]
        random_draws = 2

        [[utility]]
        id = "any.snr"

        [report]
        bootstrap = 50
    """)
    )
    env = {**os.environ, "BIOANON_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "bioanon.cli"]
    out = subprocess.run(
        cmd + ["evaluate", str(toml), "--out", str(tmp_path / "res"), "--run-id", "r1", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "worst-case top-1" in out.stdout and "report:" in out.stdout
    run = tmp_path / "res" / "r1"
    assert (run / "report.html").is_file()
    import pandas as pd

    m = pd.read_parquet(run / "metrics.parquet")
    assert set(m.scenario) == {"clear", "naive", "parrot:0.5", "parrot"}
    (run / "report.html").unlink()
    out = subprocess.run(cmd + ["report", str(run)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and (run / "report.html").is_file()

    out = subprocess.run(
        cmd + ["evaluate", str(tmp_path / "missing.toml")], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 2 and "missing.toml" in out.stderr


@pytest.mark.slow
def test_demo_runs_and_tells_where_the_report_is(tmp_path):
    env = {**os.environ, "BIOANON_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "bioanon.cli", "demo", "--out", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    report = Path(out.stdout.strip().splitlines()[-1].split("report: ", 1)[1])
    assert report.is_file() and report.parent.parent == tmp_path
    assert (report.parent / "plots").is_dir()


def test_deanonymization_scenario_auc_and_reversibility(tmp_path):
    cfg = config(**SMALL)
    cfg["anonymizers"] = [
        {"id": "any.block_permutation", "name": "perm", "grid": {"key": [1, 2]}},
        {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 3.0]}},
    ]
    cfg["deanonymizer"] = {"id": "any.ridge_inversion"}
    cfg["scenarios"] = ["naive", "deanon"]
    r = bioanon.evaluate(cfg, out_dir=tmp_path / "out", run_id="d", cache=tmp_path / "cache", progress=False)
    m = r.metrics
    naive = top1(m, anonymizer="perm", scenario="naive")
    deanon = top1(m, anonymizer="perm", scenario="deanon")
    clear = top1(m, anonymizer="perm", scenario="clear")
    assert naive < 0.25 and deanon > clear - 0.05, (naive, deanon, clear)  # the inversion restores it
    auc = r.auc[r.auc.anonymizer == "perm"]
    assert set(auc.deanon) == {False, True}
    for _, g in auc.groupby(["selector", "n_subjects", "measure"]):
        with_d, without = g[g.deanon].auc.iloc[0], g[~g.deanon].auc.iloc[0]
        assert with_d < without  # de-anonymization exposes the permutation
        assert g[g.counted].auc.iloc[0] == min(with_d, without)
    html = (r.run_dir / "report.html").read_text()
    assert "highly reversible" in html


def test_attribute_inference_uses_majority_chance(tmp_path):
    cfg = config(**SMALL)
    cfg["label"] = "group"
    cfg["scenarios"] = ["naive"]
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path, progress=False)
    t1 = r.metrics[r.metrics.metric == "top1"]
    assert (t1.chance >= 0.5).all() and (t1.chance < 1).all()  # binary attribute: majority rate, not 1/12
    assert t1[t1.scenario == "clear"].value.mean() > 0.9  # the group attribute is clearly encoded
    # balanced accuracy (uniform chance, with a CI over subjects) is the attribute headline; plain accuracy and
    # the majority-class rate of the same attack stand beside it
    bal = r.metrics[r.metrics.metric == "balanced_accuracy"]
    assert np.allclose(bal.chance, 0.5) and bal.ci_low.notna().all() and (bal.label == "group").all()
    head = r.headline()
    assert (head.metric == "balanced_accuracy").all() and np.allclose(head.chance, 0.5)
    assert (head.majority_rate >= 0.5).all() and head.top1.notna().all() and head.ci_low.notna().all()
    assert (r.tradeoff.metric == "balanced_accuracy").all() and np.allclose(r.tradeoff.chance, 0.5)


def test_two_runs_sharing_one_cache_at_once(tmp_path):
    cfg = config(**SMALL)
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    cache_dir = tmp_path / "cache"
    procs = [
        subprocess.Popen([sys.executable, str(script), json.dumps(cfg), str(cache_dir), str(tmp_path / f"{i}.json")])
        for i in range(2)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    import pandas as pd

    a, b = (pd.read_json(tmp_path / f"{i}.json") for i in range(2))
    fresh = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "fresh", progress=False)
    assert a.equals(b)
    assert np.allclose(a.value.to_numpy(), fresh.metrics.value.to_numpy())
    assert not list(cache_dir.rglob("*.tmp-*"))


def test_refuses_to_start_without_disk_space(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(bioanon.BioanonError, match=r"not enough disk space .* needs about .* and 1000 B are free"):
        bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "cache", progress=False)
    assert not list((tmp_path / "cache").rglob("*.json")), "no task may run"


def test_resource_estimate_counts_only_new_work(tmp_path):
    from bioanon.evaluation.config import load_config
    from bioanon.evaluation.run import build_plan, estimate_resources, load_data

    cfg = load_config(config(**SMALL))
    cache = Cache(tmp_path)
    table = load_data(cfg)
    plan = build_plan(cfg, cache, table)
    before = estimate_resources(plan, cfg, table.arrow.nbytes, cache)
    assert before.new_tasks == len(plan.tasks) and before.disk_bytes > table.arrow.nbytes
    bioanon.evaluate(cfg, out_dir=None, cache=cache, progress=False)
    after = estimate_resources(plan, cfg, table.arrow.nbytes, cache)
    assert after.new_tasks == 0 and after.disk_bytes == 0


def test_per_probe_scores_are_stored(tmp_path):
    import pandas as pd

    cfg = config(**SMALL)
    cfg["report"] = {"bootstrap": 0, "per_probe_scores": True}
    r = bioanon.evaluate(
        cfg, out_dir=tmp_path / "out", run_id="s", cache=tmp_path / "cache", progress=False, report=False
    )
    files = sorted((r.run_dir / "scores").glob("*.parquet"))
    # 2 settings × 2 recognizers × 3 scenarios × 2 random draws
    assert len(files) == 24, [f.name for f in files]
    t = pd.read_parquet(files[0])
    assert {"sample_id", "subject", "scores", "attr.true_label"} <= set(t.columns)
    assert len(t.scores.iloc[0]) == 12  # one score per enrolled subject
    m = r.metrics[r.metrics.metric == "top1"]
    assert m.ci_low.isna().all()  # bootstrap = 0: no CIs
    # stored in float64, exactly the matrix the metrics came from (float32 storage flipped near-tied top-1
    # decisions): the top-1 accuracies recomputed from the files are the reported ones
    import pyarrow.parquet as pq

    from bioanon import metrics as M
    from bioanon.table import SampleTable

    recomputed = []
    for f in files:
        st = SampleTable.from_arrow(pq.read_table(f))
        scores = st.payload("scores")
        assert scores.dtype == np.float64
        true_idx = M.label_indices(st.attribute("true_label"), np.array(st.metadata["classes"]))
        recomputed.append(M.top_k_accuracy(scores, true_idx, 1))
    np.testing.assert_allclose(sorted(recomputed), sorted(m.value), atol=1e-12)


def test_paper_protocol_beside_the_strong_evaluation(tmp_path):
    cfg = config(**SMALL)
    cfg["anonymizers"] = [
        {
            "id": "any.random_set_mean",
            "name": "rsm",
            "params": {"attribute": "activity", "relevance_trees": 20},
            "grid": {"set_size": [4, 16]},
        }
    ]
    cfg["report"] = {"bootstrap": 0, "paper_protocol": "activity", "reversibility_thresholds": [0.2, 0.6]}
    r = bioanon.evaluate(cfg, out_dir=tmp_path / "out", run_id="p", cache=tmp_path / "cache", progress=False)
    p = r.protocol.groupby(["setting", "metric"]).value.mean()
    for setting in ("set_size=4", "set_size=16"):
        assert p[setting, "attribute_accuracy"] > p[setting, "attribute_chance"] + 0.2  # attribute kept
        assert 0 <= p[setting, "mixture"] <= 1
    assert p["set_size=16", "mixture"] > p["set_size=4", "mixture"]  # larger sets mix more
    assert (r.run_dir / "protocol.parquet").is_file()
    html = (r.run_dir / "report.html").read_text()
    assert "The paper&#x27;s own protocol" in html or "The paper's own protocol" in html
    assert "0.2" in html  # the configured reversibility thresholds reach the report config


def test_load_warnings_of_the_data_source_come_first(tmp_path):
    """A data source's load problems (table metadata ``load_warnings``) head the run's warnings; the core has no
    trait-specific warning of its own (issue 19 item 6)."""
    data = bioanon.load_dataset("any.synthetic", n_subjects=12, samples_per_subject=6, dim=8, seed=1)
    data = data.with_metadata(load_warnings=["no face found in 2 image(s), kept uncropped: a.png, b.png"])
    cfg = {
        "name": "warn",
        "seed": 0,
        "repeats": 1,
        "dataset": {"source": "any.synthetic"},
        "anonymizers": [{"id": "any.gaussian_noise"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive"],
        "selection": {"selectors": ["random"]},
        "report": {"bootstrap": 0},
    }
    res = bioanon.evaluate(cfg, data=data, out_dir=None, cache=tmp_path / "cache", progress=False, report=False)
    assert res.warnings[0] == "no face found in 2 image(s), kept uncropped: a.png, b.png"
