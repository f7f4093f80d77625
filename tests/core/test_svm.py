"""bioanon's own SVC (``bioanon.builtin.svm.OvoSvc``): the model scikit-learn's ``SVC`` trains, without it.

The solver stops at libsvm's tolerance, so the pairwise decisions are compared to within it; the one-vs-rest
scores (votes: discontinuous) are compared as the same function of the same pairwise decisions."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bioanon.builtin.svm import MAX_PAIR_SAMPLES, OvoSvc, kernel_matrix, ovr_scores


def _blobs(k: int, per: int, d: int, seed: int, spread: float = 1.5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 1, (k, d))
    y = np.repeat(np.arange(k), per)
    rng.shuffle(y)  # classes interleaved: the solver groups them itself
    x = centers[y] + rng.normal(0, spread, (len(y), d))
    z = centers[rng.integers(0, k, 150)] + rng.normal(0, spread, (150, d))
    return x, y, z


CASES = [(2, 30, 5), (5, 12, 20), (20, 8, 40)]


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
@pytest.mark.parametrize(("k", "per", "d"), CASES)
def test_pairwise_decisions_are_scikit_learns(kernel: str, k: int, per: int, d: int) -> None:
    from sklearn.svm import SVC

    x, y, z = _blobs(k, per, d, seed=k * 7 + per)
    ours = OvoSvc(kernel, 1.0).fit(x, y)
    ref = SVC(kernel=kernel, C=1.0, gamma="scale", decision_function_shape="ovo").fit(x, y)
    dec = ours.pair_decision(z)
    ref_dec = ref.decision_function(z)
    if k == 2:  # scikit-learn's binary decision is positive for the second class; libsvm's for the first
        ref_dec = -ref_dec[:, None]
    scale = np.abs(ref_dec).max()
    # both stop where the largest KKT violation is below 1e-3: the decisions agree to about that
    np.testing.assert_allclose(dec, ref_dec, atol=5e-3 * max(scale, 1.0), err_msg=kernel)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    # the same support vectors, apart from ones whose multiplier is at the tolerance's edge
    assert len(np.setxor1d(ours.support_, ref.support_)) <= max(2, len(ref.support_) // 50)

    ref_ovr = SVC(kernel=kernel, C=1.0, decision_function_shape="ovr").fit(x, y).decision_function(z)
    if k > 2:  # the one-vs-rest scores are scikit-learn's function of the pairwise decisions
        np.testing.assert_allclose(ovr_scores(ref_dec, k), ref_ovr, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ours.decision_function(z), ovr_scores(dec, k), rtol=1e-12, atol=1e-12)
        agree = np.mean(np.argmax(ours.decision_function(z), axis=1) == np.argmax(ref_ovr, axis=1))
        assert agree > 0.95  # (a vote may flip where a pairwise decision is within the tolerance of 0)


def test_two_classes_give_one_column_positive_for_the_second() -> None:
    x, y, z = _blobs(2, 20, 4, seed=3, spread=0.5)
    y = np.where(y == 0, "alice", "bob")
    svc = OvoSvc("linear").fit(x, y)
    d = svc.decision_function(z)
    assert d.shape == (len(z),)
    np.testing.assert_allclose(d, -svc.pair_decision(z)[:, 0])
    near = {c: x[y == c].mean(axis=0) for c in ("alice", "bob")}
    assert svc.decision_function(np.stack([near["bob"]]))[0] > 0
    assert svc.decision_function(np.stack([near["alice"]]))[0] < 0
    assert set(svc.predict(z)) <= {"alice", "bob"}


def test_the_solution_satisfies_the_dual_constraints() -> None:
    """0 ≤ α ≤ C and yᵀα = 0 per pair (the dual coefficients of each pair sum to zero), with C honoured."""
    x, y, _ = _blobs(6, 10, 8, seed=5, spread=3.0)  # overlapping: many multipliers at the bound
    c = 0.3
    svc = OvoSvc("rbf", c).fit(x, y)
    coef = svc._sv_coef
    assert np.abs(coef).max() <= c + 1e-12
    assert (np.isclose(np.abs(coef), c)).any()  # some at the bound
    k = len(svc.classes_)
    for a in range(k):
        for b in range(a + 1, k):  # column b-1 for class a's samples, column a for class b's
            total = coef[svc._sv_class == a, b - 1].sum() + coef[svc._sv_class == b, a].sum()
            assert abs(total) < 1e-9


def test_kernel_matrix_is_libsvms() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    g = 0.7
    np.testing.assert_allclose(kernel_matrix("linear", a, b, gamma=g), a @ b.T)
    d2 = ((a[:, None] - b[None]) ** 2).sum(-1)
    np.testing.assert_allclose(kernel_matrix("rbf", a, b, gamma=g), np.exp(-g * d2))
    np.testing.assert_allclose(kernel_matrix("poly", a, b, gamma=g, degree=2, coef0=1.0), (g * a @ b.T + 1) ** 2)
    np.testing.assert_allclose(kernel_matrix("sigmoid", a, b, gamma=g, coef0=0.5), np.tanh(g * a @ b.T + 0.5))
    with pytest.raises(ValueError, match="kernel"):
        kernel_matrix("cubic", a, b, gamma=g)


def test_bad_input_is_refused_by_name() -> None:
    x, y, _ = _blobs(3, 5, 2, seed=1)
    with pytest.raises(ValueError, match="kernel"):
        OvoSvc("cubic")
    with pytest.raises(ValueError, match="'C' = 0.0 is invalid"):
        OvoSvc("linear", 0.0)
    with pytest.raises(ValueError, match="at least 2 classes"):
        OvoSvc().fit(x, np.zeros(len(x)))
    with pytest.raises(ValueError, match="one label each"):
        OvoSvc().fit(x, y[:-1])
    with pytest.raises(ValueError, match="at most"):
        OvoSvc().fit(np.zeros((2 * MAX_PAIR_SAMPLES, 2)), np.repeat([0, 1], MAX_PAIR_SAMPLES))


def test_a_solve_cut_short_says_so() -> None:
    x, y, _ = _blobs(3, 15, 4, seed=2, spread=3.0)
    with pytest.warns(RuntimeWarning, match="stopped after 3 steps"):
        OvoSvc("linear", max_iter=3).fit(x, y)


def test_a_gallery_of_small_classes_is_scored_without_scikit_learn() -> None:
    """``any.pca_svm`` on a gallery of small classes trains bioanon's solver and never imports scikit-learn; on
    larger classes (libsvm's compiled loop is faster there) and for probabilities it uses scikit-learn."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from bioanon.builtin.recognizers import PcaSvm
        from bioanon.builtin.svm import OvoSvc
        from bioanon.testing import make_table

        t = make_table(n_subjects=12, samples_per_subject=6, seed=0)
        rec = PcaSvm().enroll(t)
        s = rec.score(t).scores
        assert isinstance(rec.model_, OvoSvc), type(rec.model_)
        assert "sklearn" not in sys.modules, "scikit-learn was imported"
        # the enrolled samples score highest for their own class (the model works)
        truth = np.searchsorted(rec.classes_, np.asarray(t.subjects))
        assert np.mean(np.argmax(s, axis=1) == truth) > 0.9
        big = make_table(n_subjects=2, samples_per_subject=150, seed=0)
        assert type(PcaSvm().enroll(big).model_).__name__ == "SVC"
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_the_kernel_of_the_whole_gallery_and_of_each_batch_train_the_same_model(kernel: str, monkeypatch) -> None:
    """A small gallery's pair problems read their kernels from the kernel of the whole set (no stack of every
    pair's samples is made); a large one computes them batch by batch. Both solve the same problems."""
    from bioanon.builtin import svm

    x, y, z = _blobs(6, 10, 30, seed=3)
    whole = OvoSvc(kernel).fit(x, y)
    monkeypatch.setattr(svm, "BATCH_BYTES", 8 * len(x) ** 2 - 1)  # the whole set's kernel is now "too large"
    batched = OvoSvc(kernel).fit(x, y)
    # the kernels differ in the last digits (one product or many), so the solver may take another path to the
    # same optimum: the decisions agree to its tolerance (largest KKT violation below 1e-3)
    dec, ref = whole.pair_decision(z), batched.pair_decision(z)
    np.testing.assert_allclose(dec, ref, atol=5e-3 * max(np.abs(ref).max(), 1.0))
    # (a multiplier at the tolerance's edge may be zero on one path and not on the other)
    assert len(np.setxor1d(whole.support_, batched.support_)) <= max(2, len(batched.support_) // 20)
