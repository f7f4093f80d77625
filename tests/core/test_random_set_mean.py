"""The random-set selective weighted mean (Algorithm 1 of utility-preserving-anonymization.txt)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pyarrow as pa
import pytest
from sklearn.ensemble import RandomForestClassifier

import bioanon
from bioanon import random_set_mean as E
from bioanon.builtin.random_set_mean import RandomSetMean
from bioanon.errors import ParameterError, TableError
from bioanon.table import SampleTable
from bioanon.testing import check_method, make_table

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------- reference


def line9_reference(x: np.ndarray, sets: np.ndarray, selected: np.ndarray, w: float) -> np.ndarray:
    """Algorithm 1 line 9, record by record, literally (float64); record i is d = x[i], its set sets[i]."""
    x = x.astype(np.float64)
    xi = selected.astype(np.float64)
    out = np.empty_like(x[: len(sets)])
    for i, members in enumerate(sets):
        d = x[i]
        g = len(members)
        total = sum(x[j] for j in members)  # the sum over G, d included
        out[i] = ((w - 1) * d + total) / ((w - 1) + g) * xi + total / g * (1 - xi)
    return out


def _data(n=300, d=12, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, n_classes, size=n)


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_line9_matches_reference_for_the_same_sets(backend):
    x, codes = _data()
    sel = np.zeros(12, bool)
    sel[[1, 4, 5, 9]] = True
    sets = E.sample_sets(codes, 7, E.purity_count(0.6, 7), seed=3)
    got = E.weighted_set_mean(x, sets, sel, 25.0, backend=backend)
    np.testing.assert_allclose(got, line9_reference(x, sets, sel, 25.0), rtol=2e-6, atol=2e-6)
    # the full transform draws exactly these sets
    full = E.random_set_mean(
        x, codes, sel, set_size=7, n_same=E.purity_count(0.6, 7), weight=25.0, seed=3, backend=backend
    )
    np.testing.assert_array_equal(full, got)


def test_line9_sum_includes_the_record_itself():
    x = np.array([[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]], np.float32)
    sets = np.array([[0, 1, 2]])
    sel = np.array([True, False])
    out = E.weighted_set_mean(x, sets, sel, 10.0)
    # selected: (9·1 + (1+3+5)) / (9 + 3) = 18/12; unselected: (1+3+5)/3 = 3
    np.testing.assert_allclose(out[0], [1.5, 3.0], rtol=1e-6)


def test_weight_one_retention_zero_and_single_member_sets():
    x, codes = _data()
    sets = E.sample_sets(codes, 5, 3, seed=0)
    plain_mean = x[sets].mean(axis=1)
    for sel, w in ((np.ones(12, bool), 1.0), (np.zeros(12, bool), 100.0)):
        np.testing.assert_allclose(E.weighted_set_mean(x, sets, sel, w), plain_mean, rtol=1e-5, atol=1e-6)
    ones = E.sample_sets(codes, 1, 1, seed=0)
    np.testing.assert_array_equal(E.weighted_set_mean(x, ones, np.ones(12, bool), 7.0), x)
    # retention 0 in the method: every record is the plain mean of its set
    tab = make_table()
    out = RandomSetMean(attribute="activity", set_size=4, purity=0.5, retention=0.0).fit_transform(tab)
    f = tab.payload("features")
    codes, _ = E.factorize(tab.attribute("activity"))
    sets = E.sample_sets(codes, 4, 2, seed=0)
    np.testing.assert_allclose(out.payload("features"), f[sets].mean(axis=1), rtol=1e-5, atol=1e-5)


def test_method_equals_reference_on_the_same_sets():
    tab = bioanon.load_dataset("any.synthetic", n_subjects=8, samples_per_subject=10, seed=2)
    m = RandomSetMean(attribute="activity", set_size=6, purity=0.5, weight=30.0, retention=0.25).fit(tab)
    assert m.selected_.sum() == math.ceil(0.25 * 32)
    out = m.transform(tab).payload("features")
    codes, _ = E.factorize(tab.attribute("activity"))
    sets = E.sample_sets(codes, 6, 3, seed=0)
    ref = line9_reference(tab.payload("features"), sets, m.selected_, 30.0)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)


# --------------------------------------------------------------------------------------------------- sets


def test_purity_rounding():
    assert E.purity_count(0.6, 32) == 19  # 19.2
    assert E.purity_count(0.9, 32) == 29  # 28.8
    assert E.purity_count(0.5, 3) == 2  # 1.5 rounds half up
    assert E.purity_count(0.25, 2) == 1  # 0.5 -> 1
    assert E.purity_count(0.0, 8) == 1  # below 1/g: the record itself only
    assert E.purity_count(1.0, 8) == 8
    assert E.feature_count(0.01, 32) == 1 and E.feature_count(0.1, 30) == 3 and E.feature_count(0.0, 30) == 0


@pytest.mark.parametrize("t,g", [(1.0, 6), (0.5, 6), (0.0, 6), (0.7, 9)])
def test_sets_have_exact_purity_and_distinct_members(t, g):
    x, codes = _data(n=500)
    m = E.purity_count(t, g)
    sets = E.sample_sets(codes, g, m, seed=1)
    assert sets.shape == (500, g)
    np.testing.assert_array_equal(sets[:, 0], np.arange(500))
    same = codes[sets] == codes[:, None]
    assert (same.sum(axis=1) == m).all()
    assert same[:, :m].all() and not same[:, m:].any()
    s = np.sort(sets, axis=1)
    assert not (s[:, 1:] == s[:, :-1]).any(), "a set repeats a record"
    if t == 1.0:
        assert same.all()


def test_population_purity_draws_from_everyone():
    x, codes = _data(n=400)
    sets = E.sample_sets(codes, 10, None, seed=0)
    s = np.sort(sets, axis=1)
    assert not (s[:, 1:] == s[:, :-1]).any()
    np.testing.assert_array_equal(sets[:, 0], np.arange(400))
    share = (codes[sets[:, 1:]] == codes[:, None]).mean()
    assert 0.25 < share < 0.42  # about the class share (1/3), not forced either way
    assert np.bincount(sets[:, 1:].ravel(), minlength=400).min() > 0


@pytest.mark.parametrize("pool", [6, 400])  # dense (random keys) and sparse (redraw repeats) paths
def test_draws_are_uniform(pool):
    rng = np.random.default_rng(0)
    k = 4
    draws = E._distinct_draws(rng, np.full(20000, pool), k, np.zeros(20000, bool))
    s = np.sort(draws, axis=1)
    assert not (s[:, 1:] == s[:, :-1]).any() and draws.min() >= 0 and draws.max() < pool
    freq = np.bincount(draws.ravel(), minlength=pool) / draws.size
    assert np.abs(freq * pool - 1).max() < (0.05 if pool == 6 else 0.35)
    # every position is uniform too (no ordering bias)
    assert abs(draws[:, -1].mean() - (pool - 1) / 2) < 0.02 * pool


def test_sets_do_not_depend_on_chunking(monkeypatch):
    n = E.SAMPLING_BLOCK + 1500
    x, codes = _data(n=n, d=6, n_classes=4)
    full = E.sample_sets(codes, 5, 3, seed=9)
    np.testing.assert_array_equal(E.sample_sets(codes, 5, 3, seed=9, start=E.SAMPLING_BLOCK), full[E.SAMPLING_BLOCK :])
    sel = np.array([True, False] * 3)
    a = E.random_set_mean(x, codes, sel, set_size=5, n_same=3, weight=4.0, seed=9)
    monkeypatch.setattr(E, "_ALL_SETS_BYTES", 1)  # super-chunks instead of one call
    monkeypatch.setattr(E, "_SET_BYTES", 1)  # of one sampling block each
    for backend in ("torch", "numpy"):
        b = E.random_set_mean(x, codes, sel, set_size=5, n_same=3, weight=4.0, seed=9, backend=backend, threads=2)
        np.testing.assert_array_equal(E.weighted_set_mean(x, full, sel, 4.0, backend=backend), b)
        if backend == "torch":
            np.testing.assert_array_equal(a, b)
        b1 = E.random_set_mean(x, codes, sel, set_size=5, n_same=3, weight=4.0, seed=9, backend=backend, threads=1)
        np.testing.assert_array_equal(b1, b)
    np.testing.assert_allclose(a, line9_reference(x, full, sel, 4.0), rtol=2e-6, atol=2e-6)
    with pytest.raises(ValueError, match="multiple of SAMPLING_BLOCK"):
        E.sample_sets(codes, 5, 3, start=5)


def test_small_classes_error_or_draw_with_replacement():
    codes = np.array([0] * 3 + [1] * 20)
    with pytest.raises(TableError, match=r"code 0 has 3 records; a set of g=6 needs 5"):
        E.sample_sets(codes, 6, 5)
    sets = E.sample_sets(codes, 6, 5, small_class="with_replacement")
    same = codes[sets] == codes[:, None]
    assert (same.sum(axis=1) == 5).all()
    assert (sets[:3, 1:5] != np.arange(3)[:, None]).all()  # never the record itself
    s = np.sort(sets[3:], axis=1)  # the large class still draws without replacement
    assert not (s[:, 1:] == s[:, :-1]).any()
    with pytest.raises(TableError, match="only 3 records have a value other than"):
        E.sample_sets(codes, 6, 2)  # the 20-record class needs 4 of the other 3
    with pytest.raises(TableError, match="exceeds the 23 records"):
        E.sample_sets(codes, 24, None)
    with pytest.raises(TableError, match="no record of another value"):
        E.sample_sets(np.zeros(10, int), 4, 2, small_class="with_replacement")
    with pytest.raises(TableError, match="no other record of this value"):
        E.sample_sets(np.array([0, 1, 1, 1, 1]), 3, 2, small_class="with_replacement")


# --------------------------------------------------------------------------------------------------- features


def test_select_features_union_minus_sensitive():
    rel_p = np.array([9, 8, 7, 1, 0, 0, 0, 0, 0, 0.0])
    rel_q = np.array([0, 0, 0, 0, 0, 5, 6, 0, 0, 0.0])
    rel_s = np.array([0, 9, 0, 0, 0, 0, 8, 0, 0, 0.0])
    mask = E.select_features(10, rel_p, 0.3, [(rel_q, 0.2)])
    assert np.flatnonzero(mask).tolist() == [0, 1, 2, 5, 6]
    mask = E.select_features(10, rel_p, 0.3, [(rel_q, 0.2)], (rel_s, 0.2))
    assert np.flatnonzero(mask).tolist() == [0, 2, 5]
    assert E.select_features(10, None, 1.0).all() and not E.select_features(10, None, 0.0).any()


def test_relevance_estimators_find_the_informative_features():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 400)
    x = rng.standard_normal((400, 10)).astype(np.float32)
    x[:, 7] += 3 * y
    for method in ("random_forest", "mutual_information"):
        rel = E.estimate_relevance(x, y, method, seed=0, n_trees=20)
        assert rel.shape == (10,) and int(np.argmax(rel)) == 7
    with pytest.raises(TableError, match="two distinct"):
        E.estimate_relevance(x, np.zeros(400), "random_forest")


# --------------------------------------------------------------------------------------------------- method


def test_conforms():
    report = check_method(RandomSetMean).raise_for_failures()
    assert report.checks_run >= 20
    assert "any.random_set_mean" in bioanon.list_methods("any.*", kind="anonymizer")


@attrs.define(kw_only=True)
class ImuRandomSetMean(RandomSetMean):
    """Random-set mean of IMU windows (a trait plugin's subclass)."""

    id: ClassVar[str] = "motion.random_set_mean_test"
    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    attribute: str = RandomSetMean.default_for("attribute", "activity")
    set_size: int = RandomSetMean.default_for("set_size", 4)
    purity: float = RandomSetMean.default_for("purity", 0.5)


def test_trait_subclass_on_another_payload():
    check_method(ImuRandomSetMean).raise_for_failures()
    spec = {p["name"]: p for p in ImuRandomSetMean.param_specs()}
    assert spec["attribute"]["default"] == "activity" and spec["set_size"]["help"].startswith("g,")
    with pytest.raises(ParameterError):
        ImuRandomSetMean(set_size=0)
    tab = make_table(payload="imu")
    out = ImuRandomSetMean().fit_transform(tab)
    assert out.payload("imu").shape == tab.payload("imu").shape == (36, 32, 6)
    assert not np.array_equal(out.payload("imu"), tab.payload("imu"))


def test_uint8_images_stay_uint8_in_range():
    tab = make_table(payload="image")
    m = RandomSetMean(attribute="group", set_size=5, purity=0.6, payload="image", relevance_trees=10)
    out = m.fit_transform(tab).payload("image")
    assert out.dtype == np.uint8 and out.shape == (36, 16, 16, 3)
    flat = tab.payload("image").reshape(36, -1).astype(np.float32)
    codes, _ = E.factorize(tab.attribute("group"))
    expect = E.weighted_set_mean(flat, E.sample_sets(codes, 5, 3), m.selected_, m.weight)
    np.testing.assert_array_equal(out.reshape(36, -1), np.clip(np.rint(expect), 0, 255).astype(np.uint8))


def test_seeded_determinism_and_backends(monkeypatch):
    tab = bioanon.load_dataset("any.synthetic", n_subjects=6, samples_per_subject=10, seed=0)
    kw = dict(attribute="activity", set_size=5, purity=0.6, relevance_trees=10)
    a = RandomSetMean(**kw).fit_transform(tab).payload("features")
    b = RandomSetMean(**kw).fit_transform(tab).payload("features")
    c = RandomSetMean(**kw, seed=1).fit_transform(tab).payload("features")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    n = RandomSetMean(**kw, backend="numpy").fit_transform(tab).payload("features")
    np.testing.assert_allclose(n, a, rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(E, "_torch", lambda: None)  # as if torch were not installed
    np.testing.assert_allclose(RandomSetMean(**kw).fit_transform(tab).payload("features"), a, rtol=1e-6, atol=1e-6)
    with pytest.raises(ImportError, match="needs torch"):
        RandomSetMean(**kw, backend="torch").fit_transform(tab)


def test_fit_on_background_or_on_the_table_itself():
    tab = bioanon.load_dataset("any.synthetic", n_subjects=10, samples_per_subject=12, seed=0)
    back, table = tab.split_subjects([0.5, 0.5], seed=0)
    m = RandomSetMean(attribute="activity", set_size=4, purity=0.5, relevance_trees=20).fit(back)
    assert m.selected_ is not None and set(m.relevance_scores_) == {"activity"}
    out = m.transform(table)
    assert np.array_equal(out.sample_ids, table.sample_ids)
    # a background without the attribute leaves it unfitted; transform then estimates on the table itself
    bare = SampleTable.from_arrays(subject=back.subjects, payloads={"features": back.payload("features")})
    unfitted = RandomSetMean(attribute="activity", set_size=4, purity=0.5, relevance_trees=20)
    assert unfitted.fit(bare).selected_ is None
    on_itself = RandomSetMean(attribute="activity", set_size=4, purity=0.5, relevance_trees=20).fit(table)
    np.testing.assert_array_equal(
        unfitted.transform(table).payload("features"), on_itself.transform(table).payload("features")
    )
    # relevance_samples subsamples the estimate (and so changes it)
    small = RandomSetMean(
        attribute="activity",
        set_size=4,
        purity=0.5,
        relevance_trees=20,
        relevance_samples=12,
        sensitive_attribute="subject",
    ).fit(back)
    assert set(small.relevance_scores_) == {"activity", "subject"}
    assert not np.array_equal(small.relevance_scores_["activity"], m.relevance_scores_["activity"])
    mi = RandomSetMean(attribute="activity", set_size=4, purity=0.5, relevance="mutual_information").fit(back)
    assert mi.selected_.sum() == math.ceil(0.1 * 32)


def _with_nan(tab: SampleTable) -> SampleTable:
    arr = tab.payload("features").copy()
    arr[[3, 7], 2] = np.nan
    i = tab.arrow.schema.get_field_index("features")
    col = pa.FixedShapeTensorArray.from_numpy_ndarray(arr)
    return SampleTable(tab.arrow.set_column(i, pa.field("features", col.type), col), validate=False)


def test_clear_errors():
    tab = make_table()
    with pytest.raises(
        TableError,
        match=r"no attribute 'mood' \(attribute\).*available: \['subject', 'group', "
        r"'activity'\]",
    ):
        RandomSetMean(attribute="mood", set_size=4).fit_transform(tab)
    with pytest.raises(TableError, match=r"no attribute 'age' \(additional_attributes\)"):
        RandomSetMean(
            attribute="activity", set_size=4, purity=0.5, additional_attributes=("age",), additional_retention=(0.2,)
        ).transform(tab)
    with pytest.raises(ParameterError, match="one retention ratio per additional attribute"):
        RandomSetMean(attribute="activity", additional_attributes=("group",))
    with pytest.raises(ParameterError, match="'attribute'"):
        RandomSetMean().transform(tab)
    with pytest.raises(ParameterError):
        RandomSetMean(purity="everyone")
    with pytest.raises(ParameterError):
        RandomSetMean(purity=1.5)
    with pytest.raises(TableError, match="set_size g=40 exceeds the 36 records"):
        RandomSetMean(attribute="activity", set_size=40, retention=0.0).transform(tab)
    # activity has 12 records per value; g=32, t=0.9 needs 29
    with pytest.raises(
        TableError,
        match=r"any.random_set_mean: attribute 'activity' = 0 has 12 records; a set of "
        r"g=32 needs 29.*small_class='with_replacement'",
    ):
        RandomSetMean(attribute="activity", retention=0.0).transform(tab)
    out = RandomSetMean(attribute="activity", retention=0.0, small_class="with_replacement").transform(tab)
    assert out.payload("features").shape == (36, 16)
    with pytest.raises(TableError, match=r"NaN/inf values in 2 records \(rows \[3, 7\]\)"):
        RandomSetMean(attribute="activity", set_size=4, purity=0.5).fit_transform(_with_nan(tab))
    clean_fit = RandomSetMean(attribute="activity", set_size=4, purity=0.5).fit(tab)
    with pytest.raises(TableError, match=r"any.random_set_mean: .*NaN/inf values in 2 records \(rows \[3, 7\]\)"):
        clean_fit.transform(_with_nan(tab))
    with pytest.raises(TableError, match="NaN/inf"):
        E.random_set_mean(
            np.full((20, 3), np.nan, np.float32), np.zeros(20, int), np.ones(3, bool), set_size=2, n_same=2, weight=2.0
        )
    with pytest.raises(TableError, match="fixed-shape payload"):
        RandomSetMean(attribute="activity", set_size=4, purity=0.5, payload="audio").transform(
            make_table(payload="audio")
        )
    missing = tab.with_attribute("activity", [None] + [1] * 35)
    with pytest.raises(TableError, match="attribute 'activity' has 1 missing values"):
        RandomSetMean(attribute="activity", set_size=4, purity=0.5, retention=0.0).transform(missing)
    fitted = RandomSetMean(attribute="activity", set_size=4, purity=0.5).fit(tab)
    with pytest.raises(TableError, match="fitted on records of 16 values"):
        fitted.transform(make_table(payload="imu").with_payload("features", np.zeros((36, 8), np.float32)))


# --------------------------------------------------------------------------------------------------- the paper's trends


def _protocol(table_seed=1, **make):
    """Subject-wise within split: classifiers trained on clear train; anonymize test (relevance fitted on train)."""
    tab = (
        make_synthetic(**make)
        if make
        else bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=24, seed=table_seed)
    )
    train, test = tab.split_within_subjects([0.5, 0.5], seed=0)
    xtr = train.payload("features")
    rf_attr = RandomForestClassifier(60, random_state=0, n_jobs=2).fit(xtr, train.attribute("activity"))
    rf_id = RandomForestClassifier(60, random_state=0, n_jobs=2).fit(xtr, train.subjects)

    def evaluate(**params):
        m = RandomSetMean(attribute="activity", relevance_trees=40, **params).fit(train)
        anon = m.transform(test).payload("features")
        attr = (rf_attr.predict(anon) == test.attribute("activity")).mean()
        mixture = 1 - (rf_id.predict(anon) == test.subjects).mean()
        return attr, mixture

    clear = (rf_attr.predict(test.payload("features")) == test.attribute("activity")).mean()
    clear_mixture = 1 - (rf_id.predict(test.payload("features")) == test.subjects).mean()
    return evaluate, clear, clear_mixture


def make_synthetic(n_subjects=30, per_subject=24, seed=0):
    """Identity-only dims, activity-only dims, and dims carrying both (activity and identity)."""
    rng = np.random.default_rng(seed)
    subj = np.repeat(np.arange(n_subjects), per_subject)
    act = rng.integers(0, 3, subj.size)
    ident = rng.standard_normal((n_subjects, 12))[subj]
    act_fx = rng.standard_normal((3, 6))[act] * 1.5
    both = rng.standard_normal((n_subjects, 6))[subj] * 1.5 + rng.standard_normal((3, 6))[act] * 1.5
    x = np.concatenate([ident, act_fx, both], axis=1) + 0.4 * rng.standard_normal((subj.size, 24))
    return SampleTable.from_arrays(
        subject=np.char.add("s", subj.astype(str)),
        payloads={"features": x.astype(np.float32)},
        attributes={"activity": act},
    )


def test_paper_settings_keep_the_attribute_and_mix_identity():
    evaluate, clear, clear_mixture = _protocol()
    assert clear > 0.9 and clear_mixture < 0.1
    for params in ({}, {"purity": 0.6, "retention": 0.01}):  # MotionSense (defaults), FER-2013 settings
        attr, mixture = evaluate(**params)
        assert attr >= clear - 0.05, (params, attr, clear)
        assert mixture > 0.9, (params, mixture)
    # larger sets mix more (Fig. 4)
    mixtures = [evaluate(set_size=g)[1] for g in (2, 8)]
    assert mixtures[0] < mixtures[1] < 0.97
    assert mixtures[0] < 0.8
    # purer sets keep the attribute better (Fig. 2); with no weighted feature, purity alone carries it
    acc = {t: evaluate(purity=t, retention=0.0)[0] for t in (1.0, "population", 0.0)}
    assert acc[1.0] >= clear - 0.05 and acc[1.0] > acc["population"] + 0.2 > acc[0.0] + 0.2, acc
    attr, mixture = evaluate(purity="population")
    assert attr >= clear - 0.05 and mixture > 0.9


def test_excluding_sensitive_features_raises_mixture():
    evaluate, clear, _ = _protocol(n_subjects=30, per_subject=24)
    attr_keep, mix_keep = evaluate(retention=0.5)
    attr_excl, mix_excl = evaluate(retention=0.5, sensitive_attribute="subject", sensitive_exclusion=0.5)
    assert mix_excl > mix_keep + 0.1 and mix_excl > 0.9, (mix_keep, mix_excl)  # Fig. 10
    assert attr_excl >= clear - 0.05


# --------------------------------------------------------------------------------------------------- benchmark


def test_benchmark_smoke():
    spec = importlib.util.spec_from_file_location("rsm_bench", ROOT / "benchmarks" / "random_set_mean.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.run(quick=True, n=3000, d=16, g=6, naive_records=20)
    for key in (
        "speedup_vs_naive",
        "ratio_to_bandwidth_bound",
        "engine_seconds",
        "bound_seconds",
        "naive_seconds_extrapolated",
        "figures",
        "targets_met",
    ):
        assert key in res
    assert res["speedup_vs_naive"] > 1 and res["ratio_to_bandwidth_bound"] > 0
    # the naive reference implements the same algorithm: its outputs have the same line-9 structure
    x, codes = bench.make_data(200, 8)
    sel = bench.selection(8, 0.25)
    out = bench.naive_algorithm1(x, codes, sel, set_size=5, n_same=3, weight=10.0, rows=np.arange(200))
    assert out.shape == (200, 8) and np.isfinite(out).all()


def _one_group_background():
    """A background whose subjects all have group 'a' (a small background need not hold every value)."""
    tab = bioanon.load_dataset("any.synthetic", n_subjects=12, samples_per_subject=10, seed=0)
    tab = tab.with_attribute("group", np.where(np.isin(tab.subjects, tab.subject_names[::2]), "a", "b"))
    back = tab.select_subjects(tab.subject_names[:6:2])  # three subjects, all 'a'
    table = tab.select_subjects(tab.subject_names[6:])
    assert set(back.attribute("group")) == {"a"} and set(table.attribute("group")) == {"a", "b"}
    return back, table


def test_background_missing_values_of_the_sensitive_attribute_scores_it_on_the_table():
    back, table = _one_group_background()
    kw = dict(
        attribute="activity",
        set_size=4,
        purity=0.5,
        relevance_trees=20,
        sensitive_attribute="group",
        sensitive_exclusion=0.25,
        retention=0.5,
    )
    with pytest.warns(
        UserWarning,
        match=r"background \(30 records\) holds fewer than two values of 'group' "
        r"\(\['a'\]\)",
    ):
        m = RandomSetMean(**kw).fit(back)
    assert m.selected_ is None and m.background_unscored_ == {"group": ["a"]}
    assert set(m.relevance_scores_) == {"activity"}  # the attribute of interest stays the background's
    out = m.transform(table)
    # the same as a mask of the background's activity relevance and the table's group relevance
    on_table = RandomSetMean(**kw).fit(table).relevance_scores_
    expected = RandomSetMean(**kw)
    expected.selected_ = expected._mask(32, {"activity": m.relevance_scores_["activity"], "group": on_table["group"]})
    np.testing.assert_array_equal(out.payload("features"), expected.transform(table).payload("features"))


def test_table_with_one_value_of_a_needed_attribute_names_the_cause():
    back, _ = _one_group_background()
    m = RandomSetMean(attribute="activity", set_size=4, purity=0.5, relevance_trees=20, sensitive_attribute="group")
    with pytest.raises(
        TableError,
        match=r"random_set_mean: the relevance of the features to 'group' \(parameter "
        r"sensitive_attribute\) needs records of at least two values.*only \['a'\]"
        r".*set sensitive_exclusion to 0 or 1",
    ):
        m.transform(back)
    # no relevance to group needed: fine
    RandomSetMean(
        attribute="activity",
        set_size=4,
        purity=0.5,
        relevance_trees=20,
        sensitive_attribute="group",
        sensitive_exclusion=0.0,
    ).transform(back)


def test_empty_background_leaves_it_unfitted():
    tab = bioanon.load_dataset("any.synthetic", n_subjects=6, samples_per_subject=10, seed=0)
    kw = dict(attribute="activity", set_size=4, purity=0.5, relevance_trees=20, sensitive_attribute="subject")
    m = RandomSetMean(**kw).fit(tab.filter(np.zeros(len(tab), bool)))
    assert m.selected_ is None
    np.testing.assert_array_equal(
        m.transform(tab).payload("features"), RandomSetMean(**kw).fit(tab).transform(tab).payload("features")
    )


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_cuda_sums_match_the_cpu():
    x, codes = _data(n=2000, d=64)
    selected = np.arange(64) % 2 == 0
    kw = dict(set_size=6, n_same=3, weight=2.0, seed=3, backend="torch")
    cpu = E.random_set_mean(x, codes, selected, **kw, device="cpu")
    gpu = E.random_set_mean(x, codes, selected, **kw, device="cuda:0")
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)


def test_device_param_is_resolved_and_validated():
    assert RandomSetMean(device="cpu")._sum_device() == "cpu"
    assert RandomSetMean(backend="numpy", device="cuda:3")._sum_device() == "cpu"  # numpy: no device
    with pytest.raises(ParameterError, match="device"):
        RandomSetMean(device="gpu")
