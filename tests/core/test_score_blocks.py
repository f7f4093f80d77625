"""Score matrices read in blocks of probes (issue 29, item 1): the metrics of any block size equal the
whole-matrix formulas exactly (tie-heavy data, posteriors, float32, infinite scores, one class), a large matrix
spills to a temporary file, and the metric passes never hold a sorted or float64 copy of the whole matrix. The
non-mated scores are counted among breakpoints (a grid, then a search only where needed) exactly as
``np.searchsorted`` places them."""

from __future__ import annotations

import math
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon import metrics as M
from bioanon.api import SampleTable, ScoreMatrix
from bioanon.evaluation.scoring import ScoreBlocks, breakdown_metrics, score_metrics


def _reference_rows(S, true, groups, **kw):
    """The rows as the whole-matrix formulas give them (what score_metrics computed before blocks)."""
    S = np.asarray(S, dtype=np.float64)
    classes = np.array([f"c{i}" for i in range(S.shape[1])])
    ti = M.label_indices(true, classes)
    out = {
        "top1": M.top_k_accuracy(S, ti, 1),
        "balanced_accuracy": M.balanced_top_k_accuracy(S, ti, 1),
    }
    if S.shape[1] > 5:
        out["top5"] = M.top_k_accuracy(S, ti, 5)
    if S.shape[1] > 1:
        mated, nonmated = M.mated_nonmated(S, ti)
        v = M.verification_metrics(mated, nonmated)
        out.update(eer=v["eer"], min_cllr=v["min_cllr"], linkability=v["linkability"])
    if np.all(S >= 0) and np.allclose(S.sum(axis=1), 1.0, atol=1e-6):
        out["kl_uniform"] = M.kl_from_uniform(S)
    return out


def _values(rows):
    return {r["metric"]: (r["value"], r["ci_low"], r["ci_high"], r["note"]) for r in rows}


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _tie_heavy(n_classes=12, per=5, seed=0, dtype=np.float64):
    """Scores rounded to a few levels: many ties between classes and between mated and non-mated scores."""
    rng = np.random.default_rng(seed)
    true = np.repeat([f"c{i}" for i in range(n_classes)], per)
    S = rng.integers(0, 4, size=(true.size, n_classes)).astype(dtype)
    S[np.arange(true.size), np.repeat(np.arange(n_classes), per)] += rng.integers(0, 3, size=true.size)
    return S, true


def _matrices():
    S, true = _tie_heavy()
    yield "ties", S, true
    S32, true32 = _tie_heavy(dtype=np.float32, seed=1)
    yield "float32 ties", S32 + np.float32(0.25) * np.random.default_rng(2).random(S32.shape, np.float32), true32
    rng = np.random.default_rng(3)
    P = rng.random((60, 12)) + 3.0 * (np.repeat(np.arange(12), 5)[:, None] == np.arange(12))
    yield "posteriors", P / P.sum(axis=1, keepdims=True), true
    Sinf = S.copy()
    Sinf[3, 4] = np.inf
    yield "infinite", Sinf, true
    yield "one class", rng.normal(size=(8, 1)), np.array(["c0"] * 8)


@pytest.mark.parametrize("case", [c[0] for c in _matrices()])
def test_every_block_size_gives_the_whole_matrix_metrics_exactly(case):
    _, S, true = next(c for c in _matrices() if c[0] == case)
    groups = np.char.add("s", (np.arange(true.size) % 7).astype(str))
    classes = np.array([f"c{i}" for i in range(S.shape[1])])
    sm = SimpleNamespace(scores=S, classes=classes)
    whole = _values(score_metrics(sm, true, groups, bootstrap=50, seed=3))
    ref = _reference_rows(S, true, groups)
    for metric, value in ref.items():
        assert _same(whole[metric][0], value), (case, metric, whole[metric][0], value)
    row_bytes = S.shape[1] * 48
    for rows_per_block in (1, 2, 7, S.shape[0] - 1):
        blocks = ScoreBlocks.of(sm, memory=rows_per_block * row_bytes)
        assert blocks.n_blocks == math.ceil(S.shape[0] / rows_per_block)
        got = _values(score_metrics(blocks, true, groups, bootstrap=50, seed=3))
        assert got.keys() == whole.keys()
        for metric in whole:
            assert all(_same(a, b) for a, b in zip(got[metric], whole[metric], strict=True)), (case, metric)


def test_the_cis_equal_bootstrap_cis_over_the_subject_labels():
    """score_metrics groups the probes by integer codes of their subjects (sorting labels once, not per CI): its
    intervals are those of bootstrap_ci over the labels themselves, in every statistic."""
    S, true = _tie_heavy(n_classes=12, per=6, seed=4)
    rng = np.random.default_rng(8)
    groups = np.array([f"subject-{v}" for v in rng.permutation(40)[np.arange(true.size) % 11]])
    classes = np.array([f"c{i}" for i in range(S.shape[1])])
    rows = _values(score_metrics(SimpleNamespace(scores=S, classes=classes), true, groups, bootstrap=60, seed=5))
    ti = M.label_indices(true, classes)
    hits = M.top_k_hits(S, ti, 1)
    for metric, statistic, kw in (
        ("top1", "pooled", {}),
        ("balanced_accuracy", "balanced", {"classes": ti}),
        ("per_subject_accuracy", "subject", {}),
    ):
        lo, hi = M.bootstrap_ci(hits, groups, n_resamples=60, seed=5, alpha=0.05, statistic=statistic, **kw)
        assert rows[metric][1:3] == (lo, hi), metric


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_nonmated_counts_equal_verification_metrics_on_any_split(chunk, monkeypatch):
    monkeypatch.setattr(M, "_COUNT_CHUNK", chunk)
    rng = np.random.default_rng(5)
    for trial in range(20):
        mated = np.round(rng.normal(1.0, 1.0, size=rng.integers(1, 60)), 1)
        nonmated = np.round(rng.normal(0.0, 1.0, size=rng.integers(60, 400)), 1)
        ref = M.verification_metrics(mated, nonmated)
        counts = M.NonmatedCounts(mated, n_min=nonmated.min(), n_max=nonmated.max())
        for part in np.array_split(rng.permutation(nonmated), rng.integers(1, 9)):
            counts.add(part)
        got = counts.result()
        for k, v in ref.items():
            assert _same(float(got[k]), float(v)), (trial, k, got[k], v)


class _CentroidLike:
    """A recognizer whose scores of a probe depend on that probe only (a dot product with class references)."""

    id = "test.centroid"

    def __init__(self, refs, classes):
        self.refs, self.classes, self.calls = refs, classes, []

    def score(self, probes):
        x = probes.payload("features")
        self.calls.append(len(x))
        return ScoreMatrix(
            np.round(x.astype(np.float64) @ self.refs.T.astype(np.float64), 1), self.classes, probes.sample_ids
        )


def _probe_table(n=300, d=8, n_classes=30, seed=0):
    # small integers: every product and sum is exact, so any BLAS and any block of rows gives the same scores
    rng = np.random.default_rng(seed)
    subjects = np.repeat([f"c{i}" for i in range(n_classes)], n // n_classes)
    refs = rng.integers(-2, 3, size=(n_classes, d)).astype(np.float32)
    x = refs[np.repeat(np.arange(n_classes), n // n_classes)] + rng.integers(-2, 3, size=(n, d))
    table = SampleTable.from_arrays(
        subject=subjects, sample_id=[f"p{i}" for i in range(n)], payloads={"features": x.astype(np.float32)}
    )
    return table, refs, np.array([f"c{i}" for i in range(n_classes)])


def test_a_recognizer_scores_in_blocks_spilled_to_a_file_with_the_same_metrics():
    table, refs, classes = _probe_table()
    whole_rec = _CentroidLike(refs, classes)
    whole = ScoreBlocks.from_recognizer(whole_rec, table, memory=10**9, n_classes=30)
    assert whole_rec.calls == [300] and not whole.spilled  # fits: one call, as a whole
    rec = _CentroidLike(refs, classes)
    small = ScoreBlocks.from_recognizer(rec, table, memory=40 * 30 * 48, n_classes=30)
    assert rec.calls == [40] * 7 + [20] and small.spilled  # 8 blocks, held in a temporary file
    np.testing.assert_array_equal(small.dense(), whole.dense())
    true, groups = table.subjects, table.subjects
    a = _values(score_metrics(whole, true, groups, bootstrap=50))
    b = _values(score_metrics(small, true, groups, bootstrap=50))
    assert a.keys() == b.keys() and all(all(_same(x, y) for x, y in zip(a[k], b[k], strict=True)) for k in a)
    by = {"half": np.where(np.arange(300) < 150, "first", "second")}
    assert breakdown_metrics(whole, true, by) == breakdown_metrics(small, true, by)
    small.close()


def test_the_first_pass_made_while_scoring_saves_a_read_and_changes_nothing(monkeypatch):
    """Given the probes' true classes, from_recognizer makes the metrics' first pass on each block as it scores
    it: the same ranks, mated scores and non-mated range as a pass over the blocks read back, the same metrics
    and breakdown, with each spilled block read once fewer (once per metric instead of twice)."""
    from bioanon.evaluation import scoring

    table, refs, classes = _probe_table()
    true, groups = table.subjects, table.subjects
    by = {"half": np.where(np.arange(300) < 150, "first", "second")}
    reads: list[int] = []
    real = ScoreBlocks._read_block
    monkeypatch.setattr(
        ScoreBlocks, "_read_block", lambda self, rows, dtype: reads.append(rows) or real(self, rows, dtype)
    )
    runs = {}
    for labelled in (False, True):
        blocks = ScoreBlocks.from_recognizer(
            _CentroidLike(refs, classes),
            table,
            memory=40 * 30 * 48,
            n_classes=30,
            true_labels=true if labelled else None,
        )
        assert blocks.spilled
        reads.clear()
        rows = _values(score_metrics(blocks, true, groups, bootstrap=50))
        reads_metrics = len(reads)
        breakdown = breakdown_metrics(blocks, true, by)
        runs[labelled] = (rows, reads_metrics, len(reads) - reads_metrics, blocks, breakdown)
    plain, plain_reads, plain_bd, plain_blocks, plain_breakdown = runs[False]
    made, made_reads, made_bd, made_blocks, made_breakdown = runs[True]
    assert plain_breakdown == made_breakdown
    assert plain.keys() == made.keys()
    assert all(all(_same(x, y) for x, y in zip(plain[k], made[k], strict=True)) for k in plain)
    assert (plain_reads, made_reads) == (2 * 8, 8)  # 8 blocks: the first pass no longer reads them
    assert (plain_bd, made_bd) == (2 * 8, 8)  # the breakdown takes its mated scores from that pass too
    ti = M.label_indices(true, classes)
    assert plain_blocks.first_pass(ti) is None
    made_first, read_first = made_blocks.first_pass(ti), scoring._FirstPass.of(made_blocks, ti)
    for name in ("rank", "ties", "mated"):
        np.testing.assert_array_equal(getattr(made_first, name), getattr(read_first, name))
    assert (made_first.n_min, made_first.n_max, made_first.posterior) == (
        read_first.n_min,
        read_first.n_max,
        read_first.posterior,
    )
    assert made_blocks.first_pass(np.roll(ti, 1)) is None  # made for other classes: not used
    plain_blocks.close()
    made_blocks.close()


def test_breakdown_in_blocks_equals_the_whole_matrix_formulas():
    S, true = _tie_heavy(n_classes=10, per=6, seed=7)
    classes = np.array([f"c{i}" for i in range(10)])
    sex = np.where(np.isin(true, classes[:4]), "f", "m").astype(object)
    sex[5] = None  # a probe outside every group stays out (a missing value)
    values = {"sex": sex}
    blocks = ScoreBlocks.of(SimpleNamespace(scores=S, classes=classes), memory=3 * 10 * 48)
    rows = breakdown_metrics(blocks, true, values)
    for r in rows:
        mask = values["sex"] == r["group"]
        keep = np.isin(classes, true[mask])
        mated, nonmated = M.mated_nonmated(S[mask][:, keep], M.label_indices(true[mask], classes[keep]))
        assert r["n_nonmated"] == nonmated.size
        ref = M.verification_metrics(mated, nonmated)[r["metric"]] if nonmated.size else math.nan
        assert _same(r["value"], ref), r
    assert {r["group"] for r in rows} == {"f", "m"} and all(r["n_probes"] > 1 for r in rows)


def test_the_metric_passes_never_copy_or_sort_the_whole_matrix():
    """With a small block budget the metrics' extra memory stays a fraction of the matrix: a float64 copy or a
    sort of all the scores (8 bytes each) would need 2× its float32 size."""
    rng = np.random.default_rng(0)
    n_classes, per = 200, 40
    true = np.repeat([f"c{i}" for i in range(n_classes)], per)
    S = rng.normal(size=(true.size, n_classes)).astype(np.float32)  # 8,000 × 200 float32: 6.4 MB
    S[np.arange(true.size), np.repeat(np.arange(n_classes), per)] += 2.0
    sm = SimpleNamespace(scores=S, classes=np.array([f"c{i}" for i in range(n_classes)]))
    blocks = ScoreBlocks.of(sm, memory=100 * n_classes * 48)  # 100 probes a block
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        rows = score_metrics(blocks, true, true, bootstrap=20)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert {r["metric"] for r in rows} >= {"top1", "eer", "min_cllr", "linkability"}
    assert peak < 0.5 * S.nbytes, f"peak {peak / 1e6:.1f} MB for a {S.nbytes / 1e6:.1f} MB matrix"


def test_an_evaluation_with_a_small_memory_budget_gives_the_same_metrics(tmp_path, monkeypatch):
    from bioanon.evaluation import scoring

    calls = []
    real = ScoreBlocks.from_recognizer.__func__

    def spy(cls, recognizer, probes, *, memory, n_classes=0, true_labels=None):
        out = real(cls, recognizer, probes, memory=memory, n_classes=n_classes, true_labels=true_labels)
        calls.append((memory, out.n_blocks, out.spilled))
        return out

    cfg = {
        "name": "blocks",
        "seed": 1,
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 40, "samples_per_subject": 6, "dim": 16}},
        "anonymizers": [{"id": "any.gaussian_noise", "grid": {"sigma": [0.5]}}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive"],
        "report": {"bootstrap": 50},
    }
    whole = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "a", progress=False, report=False)
    # the smallest budget (64 MiB) with each score counted as 1 MB of working memory: blocks of a few probes
    monkeypatch.setattr(scoring, "BYTES_PER_SCORE", 2**20)
    monkeypatch.setattr(ScoreBlocks, "from_recognizer", classmethod(spy))
    small = bioanon.evaluate(
        {**cfg, "run": {"memory": "64 MiB", "jobs": 1}},
        out_dir=None,
        cache=tmp_path / "b",
        progress=False,
        report=False,
    )
    assert calls and all(memory == 64 * 2**20 and n > 10 for memory, n, _ in calls), calls
    cols = ["anonymizer", "setting", "scenario", "recognizer", "metric", "value"]
    a = whole.metrics[cols].sort_values(cols[:5]).reset_index(drop=True)
    b = small.metrics[cols].sort_values(cols[:5]).reset_index(drop=True)
    assert a[cols[:5]].equals(b[cols[:5]])
    # a BLAS may round a product of a few rows differently from one of many: values equal up to that
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-9, atol=1e-12)


def test_balanced_ci_over_many_subjects_uses_sparse_cells_with_the_same_result(monkeypatch):
    """Identity as the class gives G × G (subject, class) cells: beyond a size they are sparse, with the same
    jackknife and replicates (up to the summation order) as the dense arrays."""
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(60), 4)
    hits = rng.random(groups.size)
    inv, G, size = M._groups(groups, 100)
    dense = M._estimate_and_jackknife(hits, inv, G, size, "balanced", groups)
    reps_dense = M.bootstrap_distribution(hits, groups, n_resamples=100, seed=1, statistic="balanced", classes=groups)
    monkeypatch.setattr(M, "_DENSE_CELLS", 0)
    A, _ = M._ratio_parts(hits, inv, G, size, "balanced", groups)
    assert not isinstance(A, np.ndarray) and A.nnz == 60  # one cell per subject, not 3,600
    sparse = M._estimate_and_jackknife(hits, inv, G, size, "balanced", groups)
    reps_sparse = M.bootstrap_distribution(hits, groups, n_resamples=100, seed=1, statistic="balanced", classes=groups)
    assert sparse[0] == pytest.approx(dense[0], abs=1e-12)
    np.testing.assert_allclose(sparse[1], dense[1], atol=1e-12)
    np.testing.assert_allclose(reps_sparse, reps_dense, atol=1e-12)


def test_the_run_memory_setting(monkeypatch):
    from evalconfigs import config

    from bioanon.errors import ConfigError
    from bioanon.evaluation.config import load_config, parse_memory
    from bioanon.evaluation.run import task_memory

    total = 16 * 2**30
    assert parse_memory("", total) == 8 * 2**30  # default: half the machine's
    assert parse_memory("8 GB", total) == 8 * 10**9 and parse_memory("512MiB", total) == 512 * 2**20
    assert parse_memory("25%", total) == 4 * 2**30 and parse_memory(2**30, total) == 2**30
    for bad in ("lots", "0%", "150%", "8 XB", 1.5):
        with pytest.raises(ValueError):
            parse_memory(bad, total)
    cfg = load_config(config(run={"memory": "2 GiB", "jobs": 2}))
    assert cfg.run.memory == "2 GiB" and load_config(cfg.to_dict()) == cfg
    assert task_memory(cfg) == 2**30  # shared by the 2 workers
    for bad, why in (("lots", "expected a size"), ("1 MB", "at least 64 MiB"), (True, "expected a size")):
        with pytest.raises(ConfigError, match=rf"run\.memory: .*{why}"):
            load_config(config(run={"memory": bad}))


def test_pca_and_lda_fits_over_blocks_match_the_whole_set(monkeypatch):
    """A large training set is summed over blocks of rows (no float64 copy of it all); the fitted space is the
    one the whole-set computation gives, up to rounding."""
    from bioanon.builtin import recognizers as R

    table = bioanon.load_dataset("any.synthetic", n_subjects=40, samples_per_subject=12, dim=24, seed=3)
    whole = R.LdaCosine().fit(table)
    monkeypatch.setattr(R, "fit_block_rows", lambda dim: 50)  # 480 rows: 10 blocks
    blocks = R.LdaCosine().fit(table)
    np.testing.assert_allclose(
        np.abs(blocks.embed(table)), np.abs(whole.embed(table)), rtol=1e-4, atol=1e-5
    )  # directions up to sign
    x = table.payload("features")
    a, b = R.FeatureSpace.pca(x, 0.9), R.FeatureSpace.pca(x, 0.9)
    monkeypatch.undo()
    c = R.FeatureSpace.pca(x, 0.9)
    assert a.projection.shape == c.projection.shape
    np.testing.assert_allclose(np.abs(a.projection), np.abs(c.projection), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(a.projection, b.projection)


@pytest.mark.parametrize("shape", [(912, 1200), (70_000, 16), (5, 300_000), (9_000, 1), (3, 2)])
def test_column_std_is_numpys_std_bit_for_bit(shape):
    """The per-feature scale of every standardizing fit, summed over 8 MiB blocks of rows: exactly numpy's
    ``std(axis=0, dtype=float64)`` (same order of additions), without its float64 copy of the whole set."""
    from bioanon.builtin.recognizers import column_std

    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * rng.uniform(0.1, 100, shape[1]) + rng.uniform(-1e3, 1e3, shape[1])).astype(
        np.float32
    )
    np.testing.assert_array_equal(column_std(x), x.std(axis=0, dtype=np.float64))


def test_a_wide_pca_is_the_svd_of_the_standardized_set_without_float64_copies_of_it():
    """Fewer samples than features (pixels, flattened sequences): the kept directions are those of an SVD of the
    standardized set, and the fit's working memory stays under the size of one float64 copy of the set."""
    import tracemalloc

    from bioanon.builtin.recognizers import FeatureSpace

    rng = np.random.default_rng(0)
    n, d = 300, 40_000
    x = (rng.standard_normal((n, 40)) @ rng.standard_normal((40, d)) + rng.standard_normal((n, d))).astype(np.float32)
    tracemalloc.start()
    space = FeatureSpace.pca(x, 0.9)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    k = space.projection.shape[1]
    xs = (x.astype(np.float64) - x.mean(axis=0, dtype=np.float64)) / x.std(axis=0, dtype=np.float64)
    _, s, vt = np.linalg.svd(xs, full_matrices=False)
    share = np.cumsum(s**2) / np.sum(s**2)
    assert k == int(np.searchsorted(share, 0.9 - 1e-9)) + 1
    np.testing.assert_allclose(np.abs(space.projection), np.abs(vt[:k].T), atol=2e-4)
    # a float64 copy of the set alone is 8·n·d bytes (the whole-set computation held three such arrays)
    assert peak < 0.5 * 8 * n * d


def _placement_cases():
    rng = np.random.default_rng(11)
    spread = np.unique(rng.normal(0.6, 0.1, 3000))
    yield "spread", spread, rng.normal(0.3, 0.3, 5000)
    yield "the points themselves", spread, np.concatenate([spread, rng.choice(spread, 500)])
    levels = np.unique(np.round(rng.normal(0, 1, 400), 1))
    yield "ties on a few levels", levels, np.round(rng.normal(0, 1.2, 5000), 1)
    yield "infinite values", spread, np.concatenate([rng.normal(0.5, 0.2, 300), [np.inf, -np.inf, np.inf]])
    yield "float32 values", spread.astype(np.float32).astype(float), rng.normal(0.6, 0.1, 4000).astype(np.float32)
    # one cell crowded with points (a binary search there), the rest far away
    crowded = np.unique(np.concatenate([1.0 + np.arange(200) * 1e-9, [-1e6, 1e6]]))
    yield "a crowded cell", crowded, np.concatenate([1.0 + rng.uniform(-1e-8, 3e-7, 2000), [0.0, 5e5]])
    yield "one point", np.array([0.25]), np.array([0.0, 0.25, 0.25, 1.0])
    yield "a range beyond floats", np.array([-1e308, 0.0, 1e308]), rng.normal(0, 1e307, 500)
    yield "infinite points", np.array([-np.inf, 0.0, 2.0, np.inf]), np.array([-np.inf, -1.0, 0.0, 1.0, 2.0, np.inf])
    # the grid is computed in float32: float64 points and values closer than float32 can tell apart, values and
    # ranges beyond float32's range, a scale that overflows it
    close = np.unique(np.concatenate([0.5 + np.arange(60) * 1e-12, [0.0, 1.0]]))
    nudged = np.concatenate([close, np.nextafter(close, np.inf), np.nextafter(close, -np.inf), [0.5 + 3e-11]])
    yield "closer than float32 resolves", close, nudged
    yield "values beyond float32", spread, np.array([-1e300, -3.5e38, 3.4e38, 3.5e38, 1e300, 0.6, np.inf])
    yield "a range beyond float32", np.array([-1e39, 0.0, 1e39]), np.array([-2e39, -1e39, 0.0, 1e39, 5.0, 2e39])
    yield "a scale beyond float32", np.array([0.0, 1e-300, 2e-300]), np.array([-1.0, 0.0, 5e-301, 1e-300, 1.0])


@pytest.mark.parametrize("case", list(_placement_cases()), ids=lambda c: c[0])
def test_placing_values_among_breakpoints_counts_what_searchsorted_finds(case):
    _, points, values = case
    placed = M._Breakpoints(points)
    placed.add(values)
    placed.add(values[: len(values) // 3], sign=-1)  # taken back out
    kept = values[len(values) // 3 :]
    n = points.size + 1
    right = np.bincount(np.searchsorted(points, kept, side="right"), minlength=n)
    left = np.bincount(np.searchsorted(points, kept, side="left"), minlength=n)
    np.testing.assert_array_equal(placed.right, right)
    np.testing.assert_array_equal(placed.left, left)
    below = np.array([(kept < p).sum() for p in points])
    at_or_below = np.array([(kept <= p).sum() for p in points])
    np.testing.assert_array_equal(placed.below(), below)
    np.testing.assert_array_equal(placed.at_or_below(), at_or_below)


def test_most_values_are_placed_without_a_search(monkeypatch):
    """The grid does the work: values in cells without a point are never binary-searched."""
    rng = np.random.default_rng(3)
    points = np.unique(rng.normal(0.6, 0.1, 5000))
    values = rng.normal(0.1, 0.15, 200_000)
    searched = []
    real = np.searchsorted
    monkeypatch.setattr(M.np, "searchsorted", lambda a, v, **kw: searched.append(np.size(v)) or real(a, v, **kw))
    placed = M._Breakpoints(points)
    searched.clear()
    placed.add(values)
    assert placed.cells and sum(searched) < 0.1 * values.size, sum(searched)


@pytest.mark.parametrize("chunk", [1 << 20, 13])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nonmated_counts_of_whole_rows_equal_the_extracted_nonmated_scores(chunk, dtype, monkeypatch):
    monkeypatch.setattr(M, "_COUNT_CHUNK", chunk)
    for seed in range(6):
        S, true = _tie_heavy(n_classes=9, per=7, seed=seed, dtype=dtype)
        classes = np.array([f"c{i}" for i in range(9)])
        ti = M.label_indices(true, classes)
        mated, nonmated = M.mated_nonmated(S, ti)
        ref = M.verification_metrics(mated, nonmated)
        counts = M.NonmatedCounts(mated, n_min=nonmated.min(), n_max=nonmated.max())
        for rows in np.array_split(np.arange(len(S)), 4):
            counts.add_rows(S[rows], ti[rows])
        got = counts.result()
        assert got.keys() == ref.keys()
        for k, v in ref.items():
            assert _same(float(got[k]), float(v)), (seed, k, got[k], v)


def test_nonmated_rows_with_nan_are_refused():
    counts = M.NonmatedCounts([1.0, 2.0])
    with pytest.raises(M.MetricError, match="NaN"):
        counts.add_rows(np.array([[1.0, np.nan]]), np.array([0]))


def test_score_blocks_are_kept_in_float32_only_where_that_is_exact():
    from bioanon.evaluation.scoring import _compact

    exact = np.array([[0.5, 1.25], [3.0, -2.0]])
    assert _compact(exact).dtype == np.float32 and np.array_equal(_compact(exact), exact)
    fine = np.array([[0.1, 1.0]])  # 0.1 is not a float32
    assert _compact(fine) is fine
    with np.errstate(over="raise"):  # beyond float32's range: stays float64, no overflow warning
        huge = np.array([[1e300, 0.0]])
        assert _compact(huge) is huge
    ints = np.array([[1, 2]])
    assert _compact(ints) is ints


def test_blocks_a_recognizer_scored_are_held_up_to_a_share_of_the_budget_then_spilled():
    from bioanon.evaluation import scoring

    table, refs, classes = _probe_table()
    row_bytes = 30 * 48
    rec = _CentroidLike(refs, classes)
    # 40 probes a block, kept as exact float32 scores (4,800 bytes a block): 3 fit a quarter of the budget
    blocks = ScoreBlocks.from_recognizer(rec, table, memory=40 * row_bytes * 1, n_classes=30)
    assert scoring.KEEP_SHARE > 1 and rec.calls == [40] * 7 + [20]
    assert blocks.spilled and {b.dtype for b in blocks._blocks} == {np.dtype(np.float32)}
    roomy = ScoreBlocks.from_recognizer(_CentroidLike(refs, classes), table, memory=290 * row_bytes, n_classes=30)
    assert not roomy.spilled and roomy.n_blocks == 2  # 290 + 10 probes: 36 KB of float32 within 104 KB
    np.testing.assert_array_equal(blocks.dense(), roomy.dense())
    blocks.close()


def test_the_subject_split_of_a_score_task_reads_no_payload(tmp_path, monkeypatch):
    from bioanon.evaluation import tasks

    seen = []
    real = tasks.enrolment_split

    def spy(table, *args, **kwargs):
        seen.append(list(table.payload_names))
        return real(table, *args, **kwargs)

    monkeypatch.setattr(tasks, "enrolment_split", spy)
    cfg = config(**{**SMALL, "recognizers": [{"id": "any.cosine_centroid"}], "scenarios": ["naive"]})
    bioanon.evaluate({**cfg, "run": {"jobs": 1}}, out_dir=None, cache=tmp_path / "c", progress=False, report=False)
    assert seen and all(names == [] for names in seen), seen


def test_spilled_blocks_are_read_into_one_reused_buffer_with_the_same_scores_every_pass():
    """Blocks read back from the temporary file share one buffer (no fresh memory per block and pass); each
    pass gives the scores that were written."""
    table, refs, classes = _probe_table()
    whole = ScoreBlocks.from_recognizer(_CentroidLike(refs, classes), table, memory=10**9, n_classes=30).dense()
    blocks = ScoreBlocks.from_recognizer(_CentroidLike(refs, classes), table, memory=40 * 30 * 48, n_classes=30)
    assert blocks.spilled
    for _ in range(2):
        seen = []
        for start, block in blocks:
            np.testing.assert_array_equal(block, whole[start : start + block.shape[0]])
            seen.append(block)
        assert all(np.shares_memory(seen[0], b) for b in seen[1:])
    blocks.close()


def test_breakpoints_keep_their_work_arrays_for_large_chunks_with_the_same_counts(monkeypatch):
    """From :data:`bioanon.metrics._KEEP_WORK` values a chunk, the placement reuses its work arrays; the counts
    equal those of fresh arrays, chunk after chunk of different sizes."""
    rng = np.random.default_rng(7)
    points = np.unique(np.round(rng.normal(0.5, 0.2, 300), 3))
    chunks = [np.round(rng.normal(0.3, 0.3, n), 3) for n in (500, 120, 800, 3)]
    fresh = M._Breakpoints(points)
    for c in chunks:
        fresh.add(c)
    assert fresh._work is None  # below the threshold: nothing kept
    monkeypatch.setattr(M, "_KEEP_WORK", 100)
    kept = M._Breakpoints(points)
    for c in chunks:
        kept.add(c)
    assert kept._work is not None and kept._work[0].size == 800
    np.testing.assert_array_equal(kept.right, fresh.right)
    np.testing.assert_array_equal(kept.left, fresh.left)


def test_centroid_recognizers_give_their_float32_scores_without_a_float64_copy():
    """Cosine-centroid and LDA-cosine score in float32 and hand those scores over as they are (a float64 copy
    of every block was cast back to float32 for the metrics)."""
    from bioanon.plugins import get_plugin_manager

    table, _, _ = _probe_table(n=120, d=8, n_classes=12)
    registry = get_plugin_manager().registry
    for rid in ("any.cosine_centroid", "any.lda_cosine"):
        rec = registry.create(rid)
        rec.fit(table, "subject")
        rec.enroll(table, "subject")
        scores = rec.score(table).scores
        assert scores.dtype == np.float32, rid
