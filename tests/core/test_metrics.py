"""Tests of bioanon.metrics against hand-computed values, known cases and slow reference implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bioanon import metrics as m
from bioanon.errors import BioanonError

LN2 = math.log(2.0)


# ----------------------------------------------------------------------------------------------------------------
# slow references


def ref_hits(scores, true_idx, k):
    out = []
    for q, y in enumerate(true_idx):
        s = scores[q]
        r = 1 + sum(1 for g in range(len(s)) if g != y and s[g] > s[y])
        t = sum(1 for g in range(len(s)) if g != y and s[g] == s[y])
        out.append(min(max((k - r + 1) / (t + 1), 0.0), 1.0))
    return np.array(out)


def ref_pav_blocks(M, N):
    """BOSARIS/pyllr: pessimistic sort (targets first among ties), element-wise stack PAV."""
    scores = np.concatenate([M, N])
    labels = np.concatenate([np.ones(len(M)), np.zeros(len(N))])
    order = np.lexsort((-labels, scores))
    y = labels[order]
    blocks = []  # [sum, count]
    for v in y:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    tar = np.array([b[0] for b in blocks])
    cnt = np.array([b[1] for b in blocks])
    return tar, cnt - tar


def ref_eer_bosaris(M, N):
    """BOSARIS rocch + rocch2eer: max over hull segments of their line's crossing with Pmiss = Pfa."""
    tar, non = ref_pav_blocks(M, N)
    pmiss = np.concatenate([[0], np.cumsum(tar)]) / len(M)
    pfa = 1 - np.concatenate([[0], np.cumsum(non)]) / len(N)
    eer = 0.0
    for i in range(len(pmiss) - 1):
        xx, yy = pfa[i : i + 2], pmiss[i : i + 2]
        if xx[0] == xx[1] or yy[0] == yy[1]:
            seg = 0.0
        else:
            sol = np.linalg.solve(np.column_stack([xx, yy]), np.ones(2))
            seg = 1.0 / sol.sum()
        eer = max(eer, seg)
    return eer


def ref_min_cllr(M, N):
    """pyllr.min_cllr on the reference PAV."""
    tar, non = ref_pav_blocks(M, N)
    total = 0.0
    for t, n in zip(tar, non, strict=True):
        p = t / (t + n)
        llr = (math.log(p / (1 - p)) if 0 < p < 1 else (math.inf if p == 1 else -math.inf)) - math.log(len(M) / len(N))
        if t:
            total += t / len(M) * (math.log1p(math.exp(-llr)) if llr != math.inf else 0.0)
        if n:
            total += n / len(N) * (math.log1p(math.exp(llr)) if llr != -math.inf else 0.0)
    return total / (2 * LN2)


# ----------------------------------------------------------------------------------------------------------------
# labels


def test_label_indices_maps_and_reports_unknown_labels():
    classes = np.array(["bob", "alice", "carol"])
    idx = m.label_indices(["alice", "carol", "alice", "bob"], classes)
    assert idx.tolist() == [1, 2, 1, 0]
    with pytest.raises(m.MetricError, match="not among the 3 classes.*dave"):
        m.label_indices(["alice", "dave"], classes)
    with pytest.raises(ValueError, match="not unique"):
        m.label_indices(["a"], ["a", "a"])
    assert issubclass(m.MetricError, BioanonError)


# ----------------------------------------------------------------------------------------------------------------
# identification


S_TIES = np.array(
    [
        [0.9, 0.5, 0.1, 0.0],  # true 0: rank 1, no ties
        [0.5, 0.5, 0.9, 0.5],  # true 1: one higher, two tied -> r=2, t=2
        [0.2, 0.2, 0.2, 0.2],  # true 3: all tied -> r=1, t=3
        [0.1, 0.3, 0.2, 0.4],  # true 0: rank 4
    ]
)
Y_TIES = np.array([0, 1, 3, 0])


def test_ranks_hand_built_with_ties():
    r, t = m.ranks(S_TIES, Y_TIES)
    assert r.tolist() == [1, 2, 1, 4]
    assert t.tolist() == [0, 2, 3, 0]


def test_cmc_hand_built_with_ties():
    # hits per k: probe0 1,1,1,1; probe1 0,1/3,2/3,1; probe2 1/4,1/2,3/4,1; probe3 0,0,0,1
    expected = np.array([1 + 0 + 0.25 + 0, 1 + 1 / 3 + 0.5, 1 + 2 / 3 + 0.75, 4]) / 4
    np.testing.assert_allclose(m.cmc(S_TIES, Y_TIES), expected, atol=1e-12)
    np.testing.assert_allclose(m.cmc(S_TIES, Y_TIES, max_rank=2), expected[:2], atol=1e-12)
    assert m.top_k_accuracy(S_TIES, Y_TIES, 1) == pytest.approx(expected[0])
    assert m.top_k_accuracy(S_TIES, Y_TIES, 3) == pytest.approx(expected[2])


def test_constant_scores_give_exactly_chance_at_every_k():
    C = 7
    scores = np.full((20, C), 3.0)
    y = np.arange(20) % C
    cmc = m.cmc(scores, y)
    expected = np.array([m.chance_level(C, k) for k in range(1, C + 1)])
    np.testing.assert_allclose(cmc, expected, atol=1e-12)
    assert m.chance_normalized_accuracy(cmc[0], m.chance_level(C, 1)) == pytest.approx(0.0, abs=1e-12)


def test_cmc_matches_slow_reference_on_random_tied_scores():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(60, 9)).astype(float)  # many ties
    y = rng.integers(0, 9, 60)
    cmc = m.cmc(scores, y, max_rank=12)
    ref = [ref_hits(scores, y, k).mean() for k in range(1, 13)]
    np.testing.assert_allclose(cmc, ref, atol=1e-12)
    np.testing.assert_allclose(m.top_k_hits(scores, y, 2), ref_hits(scores, y, 2), atol=1e-12)


def test_identification_input_errors():
    with pytest.raises(ValueError, match="NaN"):
        m.ranks(np.array([[np.nan, 1.0]]), [0])
    with pytest.raises(ValueError, match="out of range"):
        m.ranks(np.ones((2, 2)), [0, 2])
    with pytest.raises(ValueError, match="label_indices"):
        m.ranks(np.ones((2, 2)), ["a", "b"])
    with pytest.raises(ValueError, match="k must be"):
        m.top_k_accuracy(np.ones((2, 2)), [0, 1], 0)


def test_chance_and_normalization():
    assert m.chance_level(10, 1) == 0.1
    assert m.chance_level(10, 20) == 1.0
    assert m.chance_normalized_accuracy(0.55, 0.1) == pytest.approx(0.5)
    assert math.isnan(m.chance_normalized_accuracy(1.0, 1.0))
    np.testing.assert_allclose(m.chance_normalized_accuracy(np.array([0.1, 1.0]), 0.1), [0.0, 1.0])


def test_balanced_and_per_subject_accuracy():
    true = np.array([0, 0, 0, 0, 1, 1])
    pred = np.array([0, 0, 0, 1, 0, 1])
    # recall class 0 = 3/4, class 1 = 1/2
    assert m.balanced_accuracy(pred, true) == pytest.approx(0.625)
    assert m.attribute_accuracy(pred, true) == pytest.approx(4 / 6)
    psa = m.per_subject_accuracy(S_TIES, Y_TIES)
    # class 0: probes 0 (hit 1) and 3 (hit 0) -> 0.5; class 1: 0; class 2: no probes; class 3: 1/4
    np.testing.assert_allclose(psa, [0.5, 0.0, np.nan, 0.25])
    assert m.balanced_top_k_accuracy(S_TIES, Y_TIES) == pytest.approx(0.75 / 3)


def test_mated_nonmated_split():
    M, N = m.mated_nonmated(S_TIES, Y_TIES)
    assert M.tolist() == [0.9, 0.5, 0.2, 0.1]
    assert N.shape == (12,)
    assert N[:3].tolist() == [0.5, 0.1, 0.0] and N[-3:].tolist() == [0.3, 0.2, 0.4]


# ----------------------------------------------------------------------------------------------------------------
# verification

# sorted labels N M N N M M N M -> PAV blocks {N} {M N N} {M M N} {M}
M44 = np.array([0.2, 0.5, 0.6, 0.9])
N44 = np.array([0.1, 0.3, 0.4, 0.8])


def test_eer_hand_computed_4_plus_4():
    assert m.eer_rocch(M44, N44) == pytest.approx(0.25)
    # interleaved N M N M N M N M: hull runs (0, .75) -> (.75, 0) in (Pmiss, Pfa), so EER = 3/8, while the raw
    # staircase crosses the diagonal at 0.5: the convex hull matters
    assert m.eer_rocch([2, 4, 6, 8], [1, 3, 5, 7]) == pytest.approx(0.375)


def test_min_cllr_hand_computed_4_plus_4():
    # llr -ln2 on {M N N}, +ln2 on {M M N}, ±inf on the pure blocks (cost 0)
    assert m.min_cllr(M44, N44) == pytest.approx(math.log2(6.75) / 4)
    lm, ln = m.pav_llrs(M44, N44)
    np.testing.assert_allclose(lm, [-LN2, LN2, LN2, np.inf])
    np.testing.assert_allclose(ln, [-np.inf, -LN2, -LN2, LN2])


def test_perfect_separation():
    rng = np.random.default_rng(0)
    M = rng.uniform(2, 3, 2000)
    N = rng.uniform(0, 1, 20000)
    assert m.eer_rocch(M, N) == 0.0
    assert m.min_cllr(M, N) == pytest.approx(0.0, abs=1e-12)
    dsys, nb = m.linkability(M, N)
    assert nb == 100
    assert dsys == pytest.approx(1.0, abs=0.02)


def test_identical_distributions():
    rng = np.random.default_rng(1)
    M = rng.normal(size=50_000)
    N = rng.normal(size=200_000)
    assert m.eer_rocch(M, N) == pytest.approx(0.5, abs=0.01)
    assert m.min_cllr(M, N) == pytest.approx(1.0, abs=0.01)
    assert m.linkability(M, N)[0] == pytest.approx(0.0, abs=0.02)


def test_shifted_gaussians_known_eer():
    rng = np.random.default_rng(2)
    M = rng.normal(2.0, 1.0, 100_000)
    N = rng.normal(0.0, 1.0, 100_000)
    # EER of two unit normals one apart by d = 2: Phi(-d/2) = 0.1587
    assert m.eer_rocch(M, N) == pytest.approx(0.158655, abs=0.005)


@pytest.mark.parametrize("seed", range(6))
def test_pav_eer_min_cllr_match_bosaris_reference(seed):
    rng = np.random.default_rng(seed)
    nm, nn = rng.integers(5, 60), rng.integers(5, 300)
    M = np.round(rng.normal(1.0, 1.0, nm), 1)  # coarse rounding: many ties, also across M and N
    N = np.round(rng.normal(0.0, 1.0, nn), 1)
    assert m.eer_rocch(M, N) == pytest.approx(ref_eer_bosaris(M, N), abs=1e-12)
    assert m.min_cllr(M, N) == pytest.approx(ref_min_cllr(M, N), abs=1e-12)
    # swapping roles of the anchor set (M larger than N) must not matter
    assert m.eer_rocch(np.tile(M, 10), N) == pytest.approx(ref_eer_bosaris(np.tile(M, 10), N), abs=1e-12)


def test_vectorized_pav_rounds_match_reference_on_medium_data():
    # > 256 elementary blocks: exercises the vectorized pooling rounds before the sequential finish
    rng = np.random.default_rng(8)
    M = np.round(rng.normal(0.8, 1.0, 1500), 2)
    N = np.round(rng.normal(0.0, 1.2, 2500), 2)
    assert m.eer_rocch(M, N) == pytest.approx(ref_eer_bosaris(M, N), abs=1e-12)
    assert m.min_cllr(M, N) == pytest.approx(ref_min_cllr(M, N), abs=1e-12)


def test_pav_llrs_are_monotone_and_shared_by_ties():
    rng = np.random.default_rng(5)
    M = np.round(rng.normal(1, 1, 300), 1)
    N = np.round(rng.normal(0, 1, 900), 1)
    lm, ln = m.pav_llrs(M, N)
    s = np.concatenate([M, N])
    llr = np.concatenate([lm, ln])
    o = np.argsort(s, kind="stable")
    assert np.all(llr[o][1:] >= llr[o][:-1])
    assert np.isneginf(llr).any() and np.isposinf(llr).any()
    for v in np.unique(s):
        assert np.unique(llr[s == v]).size == 1
    # infinite LLRs only occur on the harmless side, so plain Cllr of the optimal LLRs is min Cllr
    assert m.cllr(lm, ln) == pytest.approx(m.min_cllr(M, N))


def test_rocch_vertices():
    fnmr, fmr = m.rocch(M44, N44)
    np.testing.assert_allclose(fnmr, [0, 0, 0.25, 0.75, 1])
    np.testing.assert_allclose(fmr, [1, 0.75, 0.25, 0, 0])


def test_cllr_hand_computed():
    assert m.cllr([0.0], [0.0]) == pytest.approx(1.0)
    assert m.cllr([math.log(3)], [-math.log(3)]) == pytest.approx(math.log2(4 / 3))
    # mixed: M = {ln 3, 0}, N = {ln 3}: ½[(log2(4/3) + 1)/2 + log2 4]
    assert m.cllr([math.log(3), 0.0], [math.log(3)]) == pytest.approx(0.5 * ((math.log2(4 / 3) + 1) / 2 + 2))
    assert m.cllr([-np.inf], [0.0]) == math.inf
    assert m.cllr([1000.0], [-1000.0]) == pytest.approx(0.0)  # stable, no overflow


def test_linkability_hand_checkable_histogram():
    # 20 mated -> 2 bins over [0, 1]: M 5 low / 15 high, N 15 low / 5 high
    M = np.array([0.0] + [0.2] * 4 + [0.8] * 14 + [1.0])
    N = np.array([0.1] * 15 + [0.9] * 5)
    # densities y1 = [0.5, 1.5], y2 = [1.5, 0.5]; LR = [1/3, 3]; D = [0, 0.5]; trapz over centres .25, .75:
    # 0.5 · (0 + 0.5·1.5)/2 = 0.1875
    dsys, nb = m.linkability(M, N)
    assert nb == 2
    assert dsys == pytest.approx(0.1875)
    # a bin with non-mated density 0 but mated density > 0 has D = 1: y1 = [.5, 1.5], y2 = [2, 0]
    dsys, _ = m.linkability(M, np.full(20, 0.1))
    assert dsys == pytest.approx(0.5 * 1.5 / 2)


def test_linkability_guards():
    with pytest.raises(ValueError, match="at least 2 histogram bins"):
        m.linkability(np.arange(15.0), np.arange(30.0))
    assert m.linkability(np.ones(30), np.ones(50)) == (0.0, 3)
    with pytest.raises(ValueError, match="infinite"):
        m.linkability(np.r_[np.arange(30.0), np.inf], np.arange(30.0))


def test_verification_metrics_bundle():
    rng = np.random.default_rng(4)
    M, N = rng.normal(1.5, 1, 500), rng.normal(0, 1, 5000)
    v = m.verification_metrics(M, N)
    assert v["eer"] == pytest.approx(m.eer_rocch(M, N))
    assert v["min_cllr"] == pytest.approx(m.min_cllr(M, N))
    assert (v["linkability"], v["linkability_bins"]) == m.linkability(M, N)
    small = m.verification_metrics(M[:5], N)
    assert math.isnan(small["linkability"]) and small["linkability_bins"] == 0


# ----------------------------------------------------------------------------------------------------------------
# attribute inference


def test_similarity_attack_strategies_hand_built():
    # database: A A A B B B; probe 0 similarities A = [1.0, 0.81, 0.0], B = [0.8, 0.8, 0.8]; n = 3
    db = np.array(["A", "A", "A", "B", "B", "B"])
    sim = np.array([[1.0, 0.81, 0.0, 0.8, 0.8, 0.8], [0.1, 0.2, 0.3, 0.9, 0.0, 0.0]])
    conf, cls = m.similarity_attack_scores(sim, db, 3, "vote")
    assert cls.tolist() == ["A", "B"]
    np.testing.assert_array_equal(conf, [[2, 1], [2, 1]])  # top 3: 1.0 A, .81 A, .8 B | .9 B, .3 A, .2 A
    conf, _ = m.similarity_attack_scores(sim, db, 3, "average")
    np.testing.assert_allclose(conf, [[1.81 / 3, 0.8], [0.2, 0.3]])  # -> B, B
    conf, _ = m.similarity_attack_scores(sim, db, 3, "linear")
    w = np.array([0.75, 0.5, 0.25])
    np.testing.assert_allclose(conf, [[0.75 + 0.405, 1.2], [w @ [0.3, 0.2, 0.1], w @ [0.9, 0, 0]]])  # -> B, B
    conf_log, _ = m.similarity_attack_scores(sim, db, 3, "log")
    wl = -np.log(np.array([1, 2, 3]) / 4)
    np.testing.assert_allclose(conf_log, [[wl @ [1.0, 0.81, 0.0], 0.8 * wl.sum()], [wl @ [0.3, 0.2, 0.1], wl[0] * 0.9]])
    # the four strategies disagree on probe 0: vote A, average B, linear B, log A
    preds = {
        s: cls[m.similarity_attack_scores(sim[:1], db, 3, s)[0].argmax(1)][0]
        for s in ("vote", "average", "linear", "log")
    }
    assert preds == {"vote": "A", "average": "B", "linear": "B", "log": "A"}


def test_similarity_attack_matches_loop_reference():
    rng = np.random.default_rng(7)
    sim = rng.normal(size=(25, 40))
    db = rng.integers(0, 3, 40)
    n = 5
    for strategy in ("average", "linear", "log"):
        conf, cls = m.similarity_attack_scores(sim, db, n, strategy)
        i = np.arange(1, n + 1)
        w = {"average": np.full(n, 1 / n), "linear": 1 - i / (n + 1), "log": -np.log(i / (n + 1))}[strategy]
        for q in range(25):
            for a, c in enumerate(cls):
                best = np.sort(sim[q, db == c])[::-1][:n]
                assert conf[q, a] == pytest.approx(best @ w)
    conf, cls = m.similarity_attack_scores(sim, db, n, "vote")
    for q in range(25):
        top = db[np.argsort(-sim[q])[:n]]
        assert conf[q].tolist() == [np.sum(top == c) for c in cls]


def test_similarity_attack_unsigned_scores():
    sim = np.array([[3, 1, 2, 0]], dtype=np.uint8)  # negation must not wrap around
    conf, _ = m.similarity_attack_scores(sim, [0, 0, 1, 1], 1, "vote")
    assert conf.tolist() == [[1.0, 0.0]]


def test_similarity_attack_errors():
    sim = np.zeros((1, 3))
    with pytest.raises(ValueError, match="unknown strategy"):
        m.similarity_attack_scores(sim, [0, 0, 1], 1, "median")
    with pytest.raises(ValueError, match="lower n"):
        m.similarity_attack_scores(sim, [0, 0, 1], 2, "average")
    with pytest.raises(ValueError, match="database size"):
        m.similarity_attack_scores(sim, [0, 0, 1], 4, "vote")


def test_chance_mixture_kl():
    assert m.majority_chance(["m", "f", "m", "m"]) == 0.75
    assert m.mixture(0.8) == pytest.approx(0.2)
    assert m.top_k_mixture(S_TIES, Y_TIES, 1) == pytest.approx(1 - m.top_k_accuracy(S_TIES, Y_TIES, 1))
    assert m.kl_from_uniform(np.full((3, 4), 0.25)) == pytest.approx(0.0)
    onehot = np.eye(4)[[0, 2]]
    assert m.kl_from_uniform(onehot) == pytest.approx(math.log(4))
    assert m.kl_from_uniform(onehot, base=2) == pytest.approx(2.0)
    assert m.kl_from_uniform([[0.5, 0.5, 0, 0]], base=2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="sum to 1"):
        m.kl_from_uniform([[0.5, 0.6]])


# ----------------------------------------------------------------------------------------------------------------
# voice distinctiveness


def test_voice_distinctiveness():
    S_oo = np.array([[0.9, 0.2, 0.3], [0.1, 0.8, 0.2], [0.3, 0.2, 0.7]])
    res = m.voice_distinctiveness(S_oo, S_oo.copy())
    assert res["G_VD"] == pytest.approx(0.0) and res["DeID"] is None
    # anonymized: diagonal contrast shrinks from |0.8 - 0.2167| to |0.6 - 0.4|
    S_aa = np.array([[0.6, 0.4, 0.4], [0.4, 0.6, 0.4], [0.4, 0.4, 0.6]])
    d_oo = 0.8 - 1.3 / 6
    res = m.voice_distinctiveness(S_oo, S_aa, S_oa=S_aa)
    assert res["D_oo"] == pytest.approx(d_oo)
    assert res["G_VD"] == pytest.approx(10 * math.log10(0.2 / d_oo))
    assert res["G_VD"] < 0
    assert res["DeID"] == pytest.approx(1 - 0.2 / d_oo)
    assert m.voice_distinctiveness(S_oo, np.full((3, 3), 0.5))["G_VD"] == -math.inf
    with pytest.raises(ValueError, match="indistinguishable"):
        m.voice_distinctiveness(np.full((3, 3), 0.5), S_oo)


def test_speaker_similarity_matrix_from_utterances():
    # rows: utterances of a, a, b; columns: a, b, b
    scores = np.array([[2.0, -1.0, -3.0], [0.0, 1.0, -1.0], [-2.0, 4.0, 2.0]])
    S, spk = m.speaker_similarity_matrix(scores, ["a", "a", "b"], ["a", "b", "b"], sigmoid=False)
    assert spk.tolist() == ["a", "b"]
    np.testing.assert_allclose(S, [[1.0, -1.0], [-2.0, 3.0]])
    S2, _ = m.speaker_similarity_matrix(scores, ["a", "a", "b"], ["a", "b", "b"])
    np.testing.assert_allclose(S2, 1 / (1 + np.exp(-S)))
    with pytest.raises(ValueError, match="no utterances"):
        m.speaker_similarity_matrix(scores, ["a", "a", "a"], ["a", "b", "b"])


# ----------------------------------------------------------------------------------------------------------------
# confidence intervals


def _hits_and_groups(seed=0, n_subj=30):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_subj), rng.integers(1, 6, n_subj))
    ability = rng.uniform(0.2, 0.9, n_subj)
    hits = (rng.uniform(size=groups.size) < ability[groups]).astype(float)
    return hits, groups


def test_bootstrap_deterministic_and_contains_estimate():
    hits, groups = _hits_and_groups()
    a = m.bootstrap_ci(hits, groups, seed=11)
    b = m.bootstrap_ci(hits, groups, seed=11)
    c = m.bootstrap_ci(hits, groups, seed=12)
    assert a == b and a != c
    lo, hi = a
    assert lo < hits.mean() < hi
    assert 0.05 < hi - lo < 0.5


def test_bootstrap_vectorized_equals_slow_loop():
    hits, groups = _hits_and_groups(seed=3, n_subj=12)
    labels = np.array([f"s{g:02d}" for g in groups])  # arbitrary subject labels
    fast = m.bootstrap_distribution(hits, labels, n_resamples=200, seed=5)
    slow = m.bootstrap_distribution(lambda idx: hits[idx].mean(), labels, n_resamples=200, seed=5)
    np.testing.assert_allclose(fast, slow, atol=1e-12)
    # independent loop reference: resample subjects with the same draws, pool their probes
    rng = np.random.default_rng(5)
    draws = rng.integers(0, 12, size=(200, 12))
    ref = [np.concatenate([hits[groups == g] for g in d]).mean() for d in draws]
    np.testing.assert_allclose(fast, ref, atol=1e-12)
    # subject statistic: mean over drawn subjects of their mean
    subj_means = np.array([hits[groups == g].mean() for g in range(12)])
    fast_s = m.bootstrap_distribution(hits, groups, n_resamples=200, seed=5, statistic="subject")
    np.testing.assert_allclose(fast_s, subj_means[draws].mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(
        m.bootstrap_ci(hits, groups, seed=5), m.bootstrap_ci(lambda i: hits[i].mean(), groups, seed=5), atol=1e-12
    )


def test_bootstrap_balanced_statistic_equals_callable_balanced_accuracy():
    hits, groups = _hits_and_groups(seed=4, n_subj=14)
    cls = np.where(groups % 3 == 0, "f", "m")  # an attribute: constant within a subject, unbalanced classes
    cls[groups == 1] = "x"  # a rare class held by one subject only: absent from many resamples

    def bal(idx):
        c = cls[idx]
        return np.mean([hits[idx][c == k].mean() for k in np.unique(c)])

    fast = m.bootstrap_distribution(hits, groups, n_resamples=300, seed=2, statistic="balanced", classes=cls)
    slow = m.bootstrap_distribution(bal, groups, n_resamples=300, seed=2)
    np.testing.assert_allclose(fast, slow, atol=1e-12)
    a = m.bootstrap_ci(hits, groups, seed=2, statistic="balanced", classes=cls)
    b = m.bootstrap_ci(bal, groups, seed=2)
    np.testing.assert_allclose(a, b, atol=1e-12)
    assert a[0] < bal(np.arange(hits.size)) < a[1]
    with pytest.raises(m.MetricError):
        m.bootstrap_ci(hits, groups, statistic="balanced")  # classes missing
    with pytest.raises(m.MetricError):
        m.bootstrap_ci(hits, groups, classes=cls)  # classes without statistic='balanced'


def test_bootstrap_ci_edge_cases():
    hits, groups = _hits_and_groups(seed=1, n_subj=8)
    assert all(math.isnan(v) for v in m.bootstrap_ci(hits, np.zeros_like(groups)))  # one subject: no interval
    assert m.bootstrap_ci(np.ones(20), np.repeat(np.arange(5), 4)) == (1.0, 1.0)  # no variation: degenerate
    with pytest.raises(m.MetricError):
        m.bootstrap_ci(hits, groups, method="studentized")
    # the expanded BCa interval is wider than the percentile one with few subjects, nearly equal with many
    lo_b, hi_b = m.bootstrap_ci(hits, groups, seed=3)
    lo_p, hi_p = m.bootstrap_ci(hits, groups, seed=3, method="percentile")
    assert hi_b - lo_b > 1.15 * (hi_p - lo_p)
    hits, groups = _hits_and_groups(seed=1, n_subj=400)
    lo_b, hi_b = m.bootstrap_ci(hits, groups, seed=3)
    lo_p, hi_p = m.bootstrap_ci(hits, groups, seed=3, method="percentile")
    assert hi_b - lo_b == pytest.approx(hi_p - lo_p, rel=0.1)


def test_bootstrap_chunking_is_seamless():
    # 2500 subjects: the resamples are drawn in two chunks; results equal one-shot draws
    rng = np.random.default_rng(0)
    groups = np.arange(2_500_000 // 1000)  # 2500 subjects, 1 probe each
    vals = rng.uniform(size=groups.size)
    fast = m.bootstrap_distribution(vals, groups, n_resamples=1000, seed=1)
    draws = np.random.default_rng(1).integers(0, groups.size, size=(1000, groups.size))
    np.testing.assert_allclose(fast, vals[draws].mean(axis=1), atol=1e-12)


def test_wilson_interval():
    lo, hi = m.wilson_interval(8, 10)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    lo, hi = m.wilson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-4)
    with pytest.raises(ValueError):
        m.wilson_interval(3, 0)


# ----------------------------------------------------------------------------------------------------------------
# privacy–utility trade-off, reversibility


def test_privacy_and_utility_levels():
    assert m.privacy_level(0.9, 0.9, 0.1) == pytest.approx(0.0)
    assert m.privacy_level(0.1, 0.9, 0.1) == pytest.approx(1.0)
    assert m.privacy_level(0.5, 0.9, 0.1) == pytest.approx(0.5)
    assert m.privacy_level(0.05, 0.9, 0.1) == pytest.approx(1.0)  # below chance -> clipped
    assert m.privacy_level(0.95, 0.9, 0.1) == pytest.approx(0.0)
    np.testing.assert_allclose(m.privacy_level(np.array([0.9, 0.5]), 0.9, 0.1), [0.0, 0.5])
    assert math.isnan(m.privacy_level(0.5, 0.1, 0.1))
    assert m.utility_level(0.7, 0.9, 0.5) == pytest.approx(0.5)
    assert m.utility_level(0.4, 0.9, 0.5) == 0.0
    assert m.utility_level(0.30, 0.10, 0.50) == pytest.approx(0.5)  # lower-is-better measure (e.g. WER)
    assert math.isnan(m.utility_level(0.3, 0.5, 0.5))


def test_tradeoff_auc():
    assert m.tradeoff_auc([0.6], [0.5]) == pytest.approx(0.3)
    # two-point staircase: p in (0.4, 0.8] -> 0.2, p in (0, 0.4] -> 0.9
    assert m.tradeoff_auc([0.8, 0.4], [0.2, 0.9]) == pytest.approx(0.8 * 0.2 - 0.4 * 0.2 + 0.4 * 0.9)
    # a dominated point changes nothing, order does not matter
    assert m.tradeoff_auc([0.3, 0.4, 0.8], [0.5, 0.9, 0.2]) == pytest.approx(0.44)
    # x outside [0, 1] is clipped
    assert m.tradeoff_auc([1.7], [0.5]) == pytest.approx(0.5)
    assert m.tradeoff_auc([-0.2, 0.5], [1.0, 0.4]) == pytest.approx(0.2)
    assert m.tradeoff_auc([1.0], [1.0]) == 1.0
    with pytest.raises(ValueError, match="NaN"):
        m.tradeoff_auc([0.5, np.nan], [0.5, 0.5])


def test_tradeoff_envelope_monotone_and_matches_auc():
    rng = np.random.default_rng(9)
    for _ in range(20):
        x, y = rng.uniform(-0.2, 1.2, 6), rng.uniform(0, 1, 6)
        px, py = m.tradeoff_envelope(x, y)
        assert px[0] == 0 and px[-1] == 1
        assert np.all(np.diff(px) >= 0) and np.all(np.diff(py) <= 0)
        assert np.sum((py[1:] + py[:-1]) / 2 * np.diff(px)) == pytest.approx(m.tradeoff_auc(x, y))
    px, py = m.tradeoff_envelope([0.8, 0.4], [0.2, 0.9])
    assert px.tolist() == [0.0, 0.4, 0.4, 0.8, 0.8, 1.0]
    assert py.tolist() == [0.9, 0.9, 0.2, 0.2, 0.0, 0.0]


def test_reversibility():
    R, cat = m.reversibility(0.15, 0.1, 0.9)
    assert R == pytest.approx(0.0625) and cat == "irreversible"
    R, cat = m.reversibility([0.5, 0.3], [0.1, 0.1], [0.9, 0.5])  # 0.5 and 0.5
    assert R == pytest.approx(0.5) and cat == "highly reversible"
    R, cat = m.reversibility(0.3, 0.1, 0.9)
    assert R == pytest.approx(0.25) and cat == "partially reversible"
    assert m.reversibility(0.3, 0.1, 0.9, thresholds=(0.3, 0.6))[1] == "irreversible"
    assert m.reversibility(0.05, 0.1, 0.9)[0] == 0.0  # de-anonymization worse than naive -> clipped
    R, cat = m.reversibility(0.5, 0.5, 0.5)
    assert math.isnan(R) and cat == "undefined"


def test_student_t_quantile_and_cdf_are_scipys():
    """The t quantile of the expanded BCa interval, computed without SciPy, equals SciPy's ``stdtrit``."""
    from scipy.special import stdtr, stdtrit

    for df in (1, 2, 3, 4, 5, 9, 10, 29, 30, 99, 1000, 5001):
        for p in (0.6, 0.9, 0.95, 0.975, 0.995, 0.999, 0.025):
            assert m.student_t_quantile(p, df) == pytest.approx(float(stdtrit(df, p)), rel=1e-9), (df, p)
        for t in (-40.0, -2.0, -0.1, 0.0, 0.3, 2.5, 300.0):
            assert m.student_t_cdf(t, df) == pytest.approx(float(stdtr(df, t)), rel=1e-12, abs=1e-15), (df, t)
    assert m.student_t_quantile(0.5, 7) == 0.0
    for bad in ((0.0, 3), (1.0, 3), (0.9, 0)):
        with pytest.raises(m.MetricError, match="student_t_quantile"):
            m.student_t_quantile(*bad)


def test_a_confidence_interval_imports_no_scipy():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from bioanon.metrics import expanded_bca_interval\n"
        "rng = np.random.default_rng(0)\n"
        "lo, hi = expanded_bca_interval(0.5, rng.normal(0.5, 0.1, 500), rng.normal(0.5, 0.02, 12), 12)\n"
        "assert lo < 0.5 < hi, (lo, hi)\n"
        "assert not any(k.startswith('scipy') for k in sys.modules), 'SciPy was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
