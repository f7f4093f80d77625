"""Fitted recognizers are reused across score tasks and selector subject counts with identical results."""

from __future__ import annotations

from evalconfigs import SMALL, config

import bioanon
from bioanon.context import RunContext
from bioanon.fit_memo import FittedRecognizers


def _cfg():
    cfg = config(**SMALL)
    cfg["scenarios"] = ["naive", "lazy", "parrot"]
    cfg["selection"] = {"selectors": ["random", "center"], "subject_counts": [12, 6], "random_draws": 2}
    return cfg


def test_reuse_gives_the_results_of_refitting(tmp_path, monkeypatch):
    ctx = RunContext(bioanon.get_registry())
    reused = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "a", progress=False, report=False, context=ctx)
    hits, misses = ctx.fitted.hits, ctx.fitted.misses
    # 2 settings x 2 recognizers: clear, naive and lazy share one clear fit per recognizer; the centre selector
    # fits once per setting for both subject counts
    assert hits > 0 and misses < hits + misses, (hits, misses)
    assert misses == 2 + 2 * 2 + 2, (hits, misses)  # clear fits, parrot fits per setting, selector per setting
    monkeypatch.setenv("BIOANON_FIT_MEMO", "0")
    fresh = RunContext(bioanon.get_registry())
    refit = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "b", progress=False, report=False, context=fresh)
    assert fresh.fitted.hits == fresh.fitted.misses == 0
    assert refit.metrics.equals(reused.metrics)


def test_each_run_has_its_own_store(tmp_path):
    """Fits live in the run's context: a second run refits (no process-wide store), and nothing is left
    active after a run."""
    from bioanon.context import active_context

    first = RunContext(bioanon.get_registry())
    bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "a", progress=False, report=False, context=first)
    second = RunContext(bioanon.get_registry())
    bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "b", progress=False, report=False, context=second)
    assert second.fitted.misses == first.fitted.misses > 0
    assert active_context() is None


def test_a_fit_that_one_task_uses_is_not_kept(tmp_path, monkeypatch):
    """The run counts the score tasks of each fit (``RunContext.fit_uses``): the clear fit that the clear,
    naive and lazy tasks of every setting share is kept for them, a parrot fit used by one task is given back
    after it (no stored copy holds its memory), and the results are those of refitting every time."""
    cfg = _cfg()
    cfg["selection"] = {"selectors": ["random"], "subject_counts": [12], "random_draws": 1}
    ctx = RunContext(bioanon.get_registry())
    result = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "a", progress=False, report=False, context=ctx)
    uses = sorted(ctx.fit_uses.values())
    # per recognizer: a parrot fit per setting (1 task each), one clear fit for the clear level (one task for both
    # settings: the random draw is the same), naive and lazy of both settings (5 tasks)
    assert uses.count(1) == 4 and uses.count(5) == 2, uses
    assert ctx.fitted.misses == 2 + 4 and ctx.fitted.hits == 2 * 4
    assert len(ctx.fitted._fits) == 2  # only the shared clear fits are held
    monkeypatch.setenv("BIOANON_FIT_MEMO", "0")  # every fit refitted, none kept
    refit = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "b", progress=False, report=False)
    assert refit.metrics.equals(result.metrics)


def test_callers_get_independent_copies():
    memo = FittedRecognizers(size=2)
    table = bioanon.load_dataset("any.synthetic", n_subjects=6, samples_per_subject=6, dim=8)
    spec = {"id": "any.cosine_centroid"}
    create = bioanon.get_registry().create
    a = memo.get(spec, ["t", 1], "subject", lambda: table, create=create)
    b = memo.get(spec, ["t", 1], "subject", lambda: (_ for _ in ()).throw(AssertionError("refitted")), create=create)
    assert (memo.hits, memo.misses) == (1, 1) and a is not b
    a.enroll(table, "subject")
    c = memo.get(spec, ["t", 1], "subject", lambda: table, create=create)
    assert a.templates_ is not None and c.templates_ is None  # enrolment never reaches the stored fit
    for i in range(3):  # least recently used out
        memo.get(spec, ["other", i], "subject", lambda: table, create=create)
    assert len(memo._fits) == 2 and memo.misses == 4


def test_computed_features_are_reused_by_content_and_copied(monkeypatch):
    import numpy as np

    from bioanon.fit_memo import ComputedFeatures, content_digest

    memo = ComputedFeatures(max_bytes=3 * 8 * 4)
    calls = []

    def compute(x):
        calls.append(1)
        return np.asarray([float(sum(a.sum() for a in x))] * 4)

    a = [np.arange(3, dtype=np.float32), np.ones(5, np.float32)]
    same = [np.arange(3, dtype=np.float32), np.ones(5, np.float32)]  # equal content, other objects
    first = memo.get("sum", {"k": 1}, a, lambda: compute(a))
    again = memo.get("sum", {"k": 1}, same, lambda: compute(same))
    assert len(calls) == 1 and (memo.hits, memo.misses) == (1, 1)
    np.testing.assert_array_equal(first, again)
    again[:] = -1  # the caller's copy: the stored result is untouched
    np.testing.assert_array_equal(memo.get("sum", {"k": 1}, a, lambda: compute(a)), first)
    memo.get("sum", {"k": 2}, a, lambda: compute(a))  # other params, other dtype, other content: computed
    memo.get("sum", {"k": 1}, [x.astype(np.float64) for x in a], lambda: compute(a))
    memo.get("sum", {"k": 1}, [np.arange(3, dtype=np.float32), np.zeros(5, np.float32)], lambda: compute(a))
    assert len(calls) == 4 and memo._bytes <= memo.max_bytes and len(memo._items) == 3  # oldest evicted
    # the digest tells the split of a ragged list apart
    assert content_digest([np.ones(2), np.ones(3)]) != content_digest([np.ones(3), np.ones(2)])
    monkeypatch.setenv("BIOANON_FIT_MEMO", "0")
    memo.get("sum", {"k": 1}, a, lambda: compute(a))
    assert len(calls) == 5


def test_a_feature_space_is_shared_by_copies_and_read_only():
    import numpy as np
    import pytest

    from bioanon.builtin.recognizers import FeatureSpace

    x = np.random.default_rng(0).normal(size=(30, 12)).astype(np.float32)
    space = FeatureSpace.pca(x, 1.0)
    assert copy_of(space) is space
    with pytest.raises(ValueError):
        space.projection[0, 0] = 1.0
    # the scaled projection is computed at each use, not kept beside the projection
    np.testing.assert_array_equal(space.scaled_projection, space.projection / space.scale[:, None])
    assert space.scaled_projection is not space.scaled_projection


def copy_of(obj):
    import copy

    return copy.deepcopy(obj)


def test_gram_svd_of_a_wide_matrix_keeps_the_rows_of_the_masked_form():
    """The rows it returns are exactly those the former (n, d) array with zero rows held."""
    import numpy as np

    from bioanon.builtin.recognizers import _gram_svd

    rng = np.random.default_rng(2)
    for x in (
        rng.normal(size=(20, 50)).astype(np.float32),
        np.repeat(rng.normal(size=(3, 50)), 7, axis=0),
    ):  # rank 3 of 21 rows
        s, vt = _gram_svd(x)
        x64 = x.astype(np.float64)
        w, u = np.linalg.eigh(x64 @ x64.T)
        u = u[:, ::-1]
        ok = s > s[0] * 1e-7
        ref = np.zeros((len(x), 50))
        ref[ok] = (u[:, ok].T @ x64) / s[ok, None]
        np.testing.assert_array_equal(vt, ref[: ok.sum()])
        assert len(vt) == ok.sum() and np.abs(ref[ok.sum() :]).max(initial=0.0) == 0.0
    assert _gram_svd(np.zeros((4, 9)))[1].shape == (4, 9)
