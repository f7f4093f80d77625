"""SEBA-style options (issue 21 item 1), each against a hand-computed case: cross-validated classifiers
(``cv_folds``, ``keep``), probability scores (``scores``), fitting the attacker on the enrolment part
(``attacker_fit``), the two-share split form of ``[rates]`` and ranking subjects by a stored attribute (``by``,
``order``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import bioanon
from bioanon.builtin.attacks import AttributeKnn, AttributeSvm
from bioanon.builtin.recognizers import (
    LdaCosine,
    LogisticRegression,
    NearestNeighbors,
    PcaSvm,
    RandomForest,
    cv_summary,
)
from bioanon.builtin.selectors import ClassificationSelection
from bioanon.cache import Cache
from bioanon.context import RunContext
from bioanon.errors import ConfigError, DataError, ParameterError
from bioanon.evaluation import tasks
from bioanon.evaluation.config import load_config
from bioanon.table import SampleTable


def _table(values, subjects, *, ids=None, **attributes) -> SampleTable:
    x = np.asarray(values, dtype=np.float32)
    x = x[:, None] if x.ndim == 1 else x
    ids = ids or [f"{s}-{i}" for i, s in enumerate(subjects)]
    return SampleTable.from_arrays(
        subject=list(subjects), sample_id=ids, payloads={"features": x}, attributes=attributes or None
    )


# ------------------------------------------------------------------------------------------ cv_folds and keep

# Class A = 0, 1, 2, 3 and class B = 10, 11, 1.4, 13 (1-D, in table order). StratifiedKFold(2), unshuffled, puts
# the first two samples of each class in fold 1 and the last two in fold 2.
#   fold 1: train {2, 3 | 1.4, 13}, test {0, 1 | 10, 11}: 0 and 1 are nearest to 1.4 (B) -> recall A 0, B 1 -> 0.5
#   fold 2: train {0, 1 | 10, 11}, test {2, 3 | 1.4, 13}: 1.4 is nearest to 1 (A) -> recall A 1, B 1/2 -> 0.75
CV_X = [0, 1, 2, 3, 10, 11, 1.4, 13]
CV_SUBJECTS = ["A"] * 4 + ["B"] * 4


def test_cv_folds_per_fold_balanced_accuracy_and_kept_estimators_by_hand():
    gallery = _table(CV_X, CV_SUBJECTS)
    probe = _table([1.6], ["A"])
    best = NearestNeighbors(cv_folds=2, standardize=False).enroll(gallery)
    np.testing.assert_allclose(best.cv_scores_, [0.5, 0.75])
    # keep = best: fold 2's estimator (gallery 0, 1 | 10, 11): minus the distance to the nearest of each class
    np.testing.assert_allclose(best.score(probe).scores, [[-0.6, -8.4]], atol=1e-5)
    every = NearestNeighbors(cv_folds=2, keep="all", standardize=False).enroll(gallery)
    np.testing.assert_allclose(every.cv_scores_, [0.5, 0.75])
    # keep = all: the mean of fold 1's (-0.4, -0.2) and fold 2's (-0.6, -8.4)
    np.testing.assert_allclose(every.score(probe).scores, [[-0.5, -4.3]], atol=1e-5)
    assert cv_summary(best) == pytest.approx(
        {"mean": 0.625, "std": 0.125, "min": 0.5, "max": 0.75, "folds": 2, "classes": 2, "samples": 8, "keep": "best"}
    )
    # without cross-validation: one estimator on all the data, no CV record
    plain = NearestNeighbors(standardize=False).enroll(gallery)
    assert plain.cv_scores_ is None and cv_summary(plain) is None
    np.testing.assert_allclose(plain.score(probe).scores, [[-0.4, -0.2]], atol=1e-5)  # nearest: 2 and 1.4


def test_cv_spread_rows_for_the_results():
    rec = NearestNeighbors(cv_folds=2, standardize=False).enroll(_table(CV_X, CV_SUBJECTS))
    rows = {r["metric"]: r for r in tasks.cv_rows(rec)}
    assert set(rows) == {
        "cv_balanced_accuracy",
        "cv_balanced_accuracy_std",
        "cv_balanced_accuracy_min",
        "cv_balanced_accuracy_max",
    }
    assert rows["cv_balanced_accuracy"]["value"] == pytest.approx(0.625)
    assert rows["cv_balanced_accuracy_std"]["value"] == pytest.approx(0.125)
    assert rows["cv_balanced_accuracy_min"]["value"] == 0.5 and rows["cv_balanced_accuracy_max"]["value"] == 0.75
    assert rows["cv_balanced_accuracy"]["chance"] == 0.5 and rows["cv_balanced_accuracy"]["n_probes"] == 8
    assert "2-fold" in rows["cv_balanced_accuracy"]["note"]
    assert tasks.cv_rows(NearestNeighbors().enroll(_table(CV_X, CV_SUBJECTS))) == []


def test_cv_folds_needs_k_samples_in_some_class():
    gallery = _table([0, 1, 2, 10, 11, 12], ["A"] * 3 + ["B"] * 3)
    with pytest.raises(ParameterError, match=r"cv_folds.*largest class has 3 samples, the smallest 3"):
        PcaSvm(cv_folds=4).enroll(gallery)
    PcaSvm(cv_folds=3).enroll(gallery)  # 3 per class: every fold holds out one sample of each
    with pytest.raises(ParameterError, match="cv_folds"):
        PcaSvm(cv_folds=1)
    with pytest.raises(ParameterError, match="keep"):
        PcaSvm(keep="worst")


def test_a_single_sample_class_is_missing_from_one_fold_and_scores_lowest_there():
    # like scikit-learn: allowed as long as one class has >= k samples; fold 1 trains without C
    gallery = _table([0, 1, 10, 11, 20], ["A", "A", "B", "B", "C"])
    rec = NearestNeighbors(cv_folds=2, keep="all", standardize=False).enroll(gallery)
    assert len(rec.cv_scores_) == 2
    s = rec.score(_table([20.5], ["C"])).scores
    assert s.shape == (1, 3) and np.argmax(s[0]) == 2


def test_cv_on_every_classifier_and_the_attribute_classifiers():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, (12, 3)), rng.normal(6, 1, (12, 3))]
    subjects = ["A"] * 12 + ["B"] * 12
    gallery = _table(x, subjects, sex=np.array(["f"] * 12 + ["m"] * 12))
    for rec in (
        PcaSvm(cv_folds=3),
        RandomForest(cv_folds=3, n_estimators=10),
        LogisticRegression(cv_folds=3),
        NearestNeighbors(cv_folds=3),
        LdaCosine(cv_folds=3, keep="all"),
    ):
        rec.enroll(gallery)
        assert rec.cv_scores_.shape == (3,) and rec.cv_scores_.min() > 0.9, rec.id
        assert rec.score(gallery).scores.shape == (24, 2)
    for rec in (AttributeSvm(cv_folds=4), AttributeKnn(cv_folds=4, k=3)):
        rec.fit(gallery, "sex")  # attribute classifiers train (and cross-validate) in fit
        assert rec.cv_scores_.shape == (4,) and rec.cv_scores_.min() > 0.9, rec.id


# ------------------------------------------------------------------------------------------ scores


def test_probability_scores_where_the_classifier_has_them():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(0, 1, (10, 4)), rng.normal(3, 1, (10, 4)), rng.normal(-3, 1, (10, 4))]
    gallery = _table(x, ["A"] * 10 + ["B"] * 10 + ["C"] * 10)
    # logistic regression: the probabilities are the softmax of the decision values (multinomial)
    d = LogisticRegression().enroll(gallery).score(gallery).scores
    p = LogisticRegression(scores="proba").enroll(gallery).score(gallery).scores
    e = np.exp(d - d.max(axis=1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), atol=1e-8)
    # SVM: Platt-scaled probabilities, seeded (the same twice), rows summing to 1
    p1 = PcaSvm(scores="proba").enroll(gallery).score(gallery).scores
    p2 = PcaSvm(scores="proba").enroll(gallery).score(gallery).scores
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_allclose(p1.sum(axis=1), 1.0, atol=1e-8)
    assert (p1 >= 0).all()
    assert not np.allclose(PcaSvm().enroll(gallery).score(gallery).scores.sum(axis=1), 1.0)  # decision values
    ps = AttributeSvm(scores="proba").fit(gallery, "subject").enroll(gallery).score(gallery).scores
    np.testing.assert_allclose(ps.sum(axis=1), 1.0, atol=1e-8)


def test_defaults_keep_todays_scores():
    assert PcaSvm().scores == LogisticRegression().scores == AttributeSvm().scores == "decision"
    assert RandomForest().scores == AttributeKnn().scores == "proba"  # they have probabilities only
    with pytest.raises(ParameterError, match="scores"):
        RandomForest(scores="decision")
    assert "scores" not in {p["name"] for p in NearestNeighbors.param_specs()}  # distances, no probability
    assert "scores" not in {p["name"] for p in LdaCosine.param_specs()}


def test_plugin_wrappers_pass_the_options_through():
    reg = bioanon.get_registry()
    for rid, inner, scores in (
        ("gait.svm", PcaSvm, "proba"),
        ("gait.random_forest", RandomForest, "proba"),
        ("gait.knn", NearestNeighbors, None),
        ("motion.svm", PcaSvm, "proba"),
        ("motion.random_forest", RandomForest, "proba"),
        ("motion.lda", LdaCosine, None),
        ("motion.knn", NearestNeighbors, None),
        ("voice.svm", PcaSvm, "proba"),
        ("voice.logistic_regression", LogisticRegression, "proba"),
        ("voice.lda", LdaCosine, None),
    ):
        params = {"cv_folds": 3, "keep": "all"} | ({"scores": scores} if scores else {})
        m = reg.create(rid, **params)
        got = m.inner_recognizer()
        assert isinstance(got, inner), rid
        assert (got.cv_folds, got.keep) == (3, "all"), rid
        if scores:
            assert got.scores == scores, rid


def test_a_wrapped_recognizer_reports_its_inner_cv():
    from bioanon_motion.recognizers import FeaturesKnn

    class Identity(FeaturesKnn):  # features = the table itself
        def feature_table(self, table):
            return table

    rec = Identity(cv_folds=2).enroll(_table(CV_X, CV_SUBJECTS))
    # the inner any.knn standardizes: a 1-D affine map, so the 1-NN decisions and the fold accuracies are as above
    assert cv_summary(rec) == pytest.approx(
        {"mean": 0.625, "std": 0.125, "min": 0.5, "max": 0.75, "folds": 2, "classes": 2, "samples": 8, "keep": "best"}
    )
    assert len(tasks.cv_rows(rec)) == 4


# ------------------------------------------------------------------------------------------ attacker_fit


def _score_cache(tmp_path):
    """Evaluation subjects E0..E5 separated along x (y: noise); attacker subjects separated along y only."""
    rng = np.random.default_rng(0)
    ev_x, ev_s = [], []
    for i in range(6):
        for _ in range(6):
            ev_x.append([10.0 * i + rng.normal(0, 0.3), rng.normal(0, 1)])
            ev_s.append(f"E{i}")
    at_x, at_s = [], []
    for i in range(6):
        for _ in range(6):
            at_x.append([rng.normal(25, 15), 10.0 * i + rng.normal(0, 0.3)])
            at_s.append(f"T{i}")
    cache = Cache(tmp_path / "cache")
    evaluation, attacker = _table(ev_x, ev_s), _table(at_x, at_s)
    sets = {
        name: f"{i:016x}"
        for i, name in enumerate(("clear_evaluation", "anon_evaluation", "clear_attacker", "anon_attacker"), start=1)
    }
    for name, t in (
        ("clear_evaluation", evaluation),
        ("anon_evaluation", evaluation),
        ("clear_attacker", attacker),
        ("anon_attacker", attacker),
    ):
        cache.put_table(sets[name], t)
    return cache, sets, evaluation


def _run_score(cache, sets, fit, subjects, scenario="parrot", ctx=None):
    rec = {"id": "any.lda_cosine", "params": {"lda_dims": 1}}
    return _score_rows(cache, sets, fit, subjects, scenario, rec, ctx or RunContext(bioanon.get_registry()))


def _score_rows(cache, sets, fit, subjects, scenario, rec, ctx):
    out = tasks.score(
        cache,
        context=ctx,  # the run's store of fits
        recognizer=rec,
        scenario=scenario,
        label="subject",
        sets=sets,
        selections=[{"id": "random|6|0", "subjects": subjects}],
        enrolment=0.5,
        seed=7,
        bootstrap=0,
        confidence=0.95,
        per_probe_scores=False,
        key=("a" if fit == "attacker" else "b") * 16,
        attacker_fit=fit,
    )
    return {r["metric"]: r["value"] for r in out["rows"]}


def test_attacker_fit_enrolment_differs_and_matches_a_hand_run(tmp_path):
    from bioanon import metrics as M

    cache, sets, evaluation = _score_cache(tmp_path)
    subjects = [f"E{i}" for i in range(6)]
    ctx = RunContext(bioanon.get_registry())
    on_attacker = _run_score(cache, sets, "attacker", subjects, ctx=ctx)
    on_enrolment = _run_score(cache, sets, "enrolment", subjects, ctx=ctx)
    # one LDA direction: learned on the attacker it is y, which carries no identity of E0..E5 (chance 1/6);
    # learned on the enrolment part it is x, which separates them by 10 noise widths
    assert on_enrolment["top1"] == 1.0
    assert on_attacker["top1"] < 0.5
    # by hand: split the selected subjects, fit on the enrolment part, enrol it, score the rest
    enrol, test = evaluation.select_subjects(subjects).split_within_subjects([0.5, 0.5], 7)
    rec = LdaCosine(lda_dims=1).fit(enrol).enroll(enrol)
    s = rec.score(test)
    assert M.top_k_accuracy(s.scores, M.label_indices(test.subjects, s.classes), 1) == on_enrolment["top1"]
    # the memo keeps both fits apart: rerun in the other order, same numbers
    assert _run_score(cache, sets, "attacker", subjects, ctx=ctx) == on_attacker
    assert ctx.fitted.hits == 1  # the attacker fit, reused
    ctx = RunContext(bioanon.get_registry())
    assert _run_score(cache, sets, "enrolment", subjects, ctx=ctx) == on_enrolment
    assert _run_score(cache, sets, "attacker", subjects, ctx=ctx) == on_attacker


def test_attacker_fit_enrolment_needs_no_attacker_set(tmp_path):
    cache, sets, _ = _score_cache(tmp_path)
    no_attacker = {k: v for k, v in sets.items() if "attacker" not in k}
    subjects = [f"E{i}" for i in range(6)]
    assert _run_score(cache, no_attacker, "enrolment", subjects, "lazy")["top1"] == 1.0
    assert _run_score(cache, no_attacker, "enrolment", subjects, "parrot:0.5")["top1"] == 1.0


def _cfg(**over):
    c = {
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 24, "samples_per_subject": 8, "dim": 8}},
        "anonymizers": [{"id": "any.gaussian_noise", "params": {"sigma": 0.5}}],
        "recognizers": [{"id": "any.pca_svm", "params": {"cv_folds": 2}}],
        "selection": {"selectors": ["random"], "subject_counts": [6], "random_draws": 1},
        "report": {"bootstrap": 0},
    }
    c.update(over)
    return c


def test_attacker_fit_config():
    assert load_config(_cfg()).attacker_fit == "attacker"
    cfg = load_config(_cfg(attacker_fit="enrolment"))
    assert cfg.attacker_fit == "enrolment"
    assert load_config(cfg.to_dict()) == cfg
    import tomllib

    assert tomllib.loads(cfg.to_toml())["attacker_fit"] == "enrolment"
    with pytest.raises(ConfigError, match=r"attacker_fit: expected 'attacker'.*'enrolment'.*'gallery'"):
        load_config(_cfg(attacker_fit="gallery"))
    with pytest.raises(ConfigError, match=r"attacker_fit: 'enrolment'.*\[attacker_dataset\] would train no attacker"):
        load_config(
            _cfg(
                attacker_fit="enrolment",
                rates={"background": 0.2, "evaluation": 0.8},
                attacker_dataset={"source": "any.synthetic", "params": {"n_subjects": 10}},
            )
        )


def test_attacker_fit_plan_reads_no_attacker_set():
    from bioanon.evaluation.run import _sets_for

    sets = {"clear_attacker": "ca", "anon_attacker": "aa", "clear_evaluation": "ce", "anon_evaluation": "ae"}
    assert _sets_for("parrot", sets) == {"anon_attacker": "aa", "anon_evaluation": "ae", "clear_evaluation": "ce"}
    assert _sets_for("parrot", sets, "enrolment") == {"anon_evaluation": "ae", "clear_evaluation": "ce"}
    assert _sets_for("naive", sets, "enrolment") == {"anon_evaluation": "ae", "clear_evaluation": "ce"}


def test_enrolment_fit_and_cv_end_to_end(tmp_path):
    r = bioanon.evaluate(
        _cfg(attacker_fit="enrolment", rates={"background": 0.25, "attacker": 0.25}),
        out_dir=tmp_path / "out",
        run_id="seba",
        cache=tmp_path / "cache",
        progress=False,
    )
    m = r.metrics
    cv = m[m.metric.str.startswith("cv_balanced_accuracy")]
    assert set(cv.metric) == {
        "cv_balanced_accuracy",
        "cv_balanced_accuracy_std",
        "cv_balanced_accuracy_min",
        "cv_balanced_accuracy_max",
    }
    assert set(cv.scenario) == {"clear", "naive", "parrot"}
    mean = cv[cv.metric == "cv_balanced_accuracy"].value.to_numpy()
    lo = cv[cv.metric == "cv_balanced_accuracy_min"].value.to_numpy()
    hi = cv[cv.metric == "cv_balanced_accuracy_max"].value.to_numpy()
    assert ((lo <= mean + 1e-12) & (mean <= hi + 1e-12)).all()
    html = (r.run_dir / "report.html").read_text(encoding="utf-8")
    assert "CV mean" in html and "cv_folds" in html


# ------------------------------------------------------------------------------------------ two-share rates


def test_two_share_rates_give_the_evaluation_the_rest():
    few = {"selectors": ["random"], "subject_counts": [2], "random_draws": 1}  # 10 % of 24 subjects: 3 evaluated
    rates = load_config(_cfg(rates={"background": 0.02, "attacker": 0.88, "enrolment": 0.75}, selection=few)).rates
    assert (rates.background, rates.attacker, rates.enrolment) == (0.02, 0.88, 0.75)
    assert math.isclose(rates.evaluation, 0.1)
    assert load_config(_cfg(rates={"background": 0, "attacker": 0.6})).rates.evaluation == pytest.approx(0.4)
    with pytest.raises(ConfigError, match=r"rates: background \+ attacker = 0.5 \+ 0.6 = 1.1 leaves no evaluation"):
        load_config(_cfg(rates={"background": 0.5, "attacker": 0.6}))
    with pytest.raises(ConfigError, match="leaves no evaluation"):
        load_config(_cfg(rates={"background": 0.4, "attacker": 0.6}))
    with pytest.raises(ConfigError, match="rates.background: missing"):
        load_config(_cfg(rates={"attacker": 0.5, "evaluation": 0.3}))


# ------------------------------------------------------------------------------------------ by / order


def _ranked_table(**attributes):
    # subjects s1..s5, two samples each, with a stored per-subject hit rate
    subjects = [s for s in ("s1", "s2", "s3", "s4", "s5") for _ in range(2)]
    return _table(np.zeros(10), subjects, **attributes)


HITRATE = np.repeat([0.3, 0.9, 0.1, 0.9, 0.5], 2)


def test_select_by_a_stored_attribute_by_hand():
    t = _ranked_table(hitrate=HITRATE)
    # descending (SEBA: sort ascending, keep the last): 0.9 (s2), 0.9 (s4; ties by name), 0.5 (s5)
    assert ClassificationSelection(by="hitrate").select(t, 3) == ["s2", "s4", "s5"]
    assert ClassificationSelection(by="hitrate", order="ascending").select(t, 2) == ["s3", "s1"]
    # integers count too; no attacker set is needed
    assert ClassificationSelection(by="rank").select(_ranked_table(rank=np.repeat([5, 1, 4, 2, 3], 2)), 1) == ["s1"]


def test_select_by_errors_name_the_column():
    with pytest.raises(DataError, match="'hitrate'.*no attribute column"):
        ClassificationSelection(by="hitrate").select(_ranked_table(other=HITRATE), 2)
    with pytest.raises(DataError, match="'group'.*not numeric"):
        ClassificationSelection(by="group").select(_ranked_table(group=np.repeat(list("abcde"), 2)), 2)
    varying = HITRATE.copy()
    varying[1] = 0.4
    with pytest.raises(DataError, match="'hitrate'.*differ within subjects.*'s1'"):
        ClassificationSelection(by="hitrate").select(_ranked_table(hitrate=varying), 2)
    missing = HITRATE.copy()
    missing[4:6] = np.nan
    with pytest.raises(DataError, match="'hitrate'.*no value for subjects \\['s3'\\]"):
        ClassificationSelection(by="hitrate").select(_ranked_table(hitrate=missing), 2)
    with pytest.raises(ParameterError, match="order"):
        ClassificationSelection(by="hitrate", order="up")


def test_attribute_files_of_equal_text_are_read_once_and_never_share_what_they_give(tmp_path):
    """SEBA writes thousands of equal attribute files: a text met before is not parsed again, yet each read gives
    its own objects (changing one never changes the next read), and an invalid one still names its file."""
    from bioanon import seba_data
    from bioanon.errors import TableError

    seba_data._parsed_yaml.cache_clear()
    a, b, c = (tmp_path / f"{n}.yaml" for n in "abc")
    a.write_text("---\n{condition: fast, frames: 150, bbox: [1, 2]}\n")
    b.write_text(a.read_text())
    c.write_text("{condition: slow}\n")
    first = seba_data.read_seba_yaml(a)
    first["condition"] = "changed"
    first["bbox"].append(3)
    assert seba_data.read_seba_yaml(b) == {"condition": "fast", "frames": 150, "bbox": [1, 2]}
    assert seba_data.read_seba_yaml(c) == {"condition": "slow"}
    assert seba_data._parsed_yaml.cache_info().hits == 1  # b's text was a's
    (tmp_path / "bad.yaml").write_text("{condition: [unclosed\n")
    with pytest.raises(TableError, match=r"bad\.yaml:\d+: invalid YAML"):
        seba_data.read_seba_yaml(tmp_path / "bad.yaml")
