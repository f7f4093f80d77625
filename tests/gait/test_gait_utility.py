"""Gait utility measures: the vectorized DTW / Fréchet / Euclidean against direct dynamic programs, and the
attribute classification utility."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon
from bioanon_gait.utility import pose_distance, sequence_distance


def _dtw_reference(a, b, window=0):
    """Textbook DTW, symmetric step pattern (diagonal steps weigh 2), normalized by len(a) + len(b)."""
    T, U = len(a), len(b)
    band = max(window, abs(T - U)) if window else max(T, U)
    D = np.full((T + 1, U + 1), np.inf)
    D[0, 0] = 0.0
    for i in range(1, T + 1):
        for j in range(1, U + 1):
            if abs(i - j) > band:
                continue
            c = np.linalg.norm(a[i - 1] - b[j - 1])
            D[i, j] = min(D[i - 1, j - 1] + 2 * c, D[i - 1, j] + c, D[i, j - 1] + c)
    return D[T, U] / (T + U)


def _frechet_reference(a, b):
    """Discrete Fréchet distance (Eiter & Mannila), recursive definition as a table."""
    T, U = len(a), len(b)
    F = np.zeros((T, U))
    for i in range(T):
        for j in range(U):
            c = np.linalg.norm(a[i] - b[j])
            if i == 0 and j == 0:
                F[i, j] = c
            elif i == 0:
                F[i, j] = max(F[i, j - 1], c)
            elif j == 0:
                F[i, j] = max(F[i - 1, j], c)
            else:
                F[i, j] = max(min(F[i - 1, j], F[i - 1, j - 1], F[i, j - 1]), c)
    return F[-1, -1]


@pytest.mark.parametrize("shape", [(6, 6), (5, 8), (9, 4)])
def test_dynamic_programs_match_the_textbook_definitions(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.normal(size=(7, shape[0], 3))
    b = rng.normal(size=(7, shape[1], 3))
    dtw = sequence_distance(a, b, "dtw")
    fr = sequence_distance(a, b, "frechet")
    for i in range(7):
        assert dtw[i] == pytest.approx(_dtw_reference(a[i], b[i]), rel=1e-12)
        assert fr[i] == pytest.approx(_frechet_reference(a[i], b[i]), rel=1e-12)
    banded = sequence_distance(a, b, "dtw", window=1)
    for i in range(7):
        assert banded[i] == pytest.approx(_dtw_reference(a[i], b[i], window=1), rel=1e-12)
        assert banded[i] >= dtw[i] - 1e-12


def test_distance_properties(tiny_gait):
    t = tiny_gait(n=6, frames=12)
    x = t.payload("pose").astype(np.float64)
    shifted = x + np.array([0.3, 0.0, 0.4])  # a constant offset of length 0.5
    np.testing.assert_allclose(pose_distance(x, shifted, "euclidean"), 0.5, rtol=1e-9)
    for kind in ("dtw", "frechet"):  # warping may find closer couplings than lock-step, never farther
        assert np.all(pose_distance(x, shifted, kind) <= 0.5 + 1e-12)
        np.testing.assert_allclose(pose_distance(x, x, kind), 0.0, atol=1e-12)
    still = np.broadcast_to(x[:, :1], x.shape)  # motionless walkers: every coupling costs the offset
    for kind in ("euclidean", "dtw", "frechet"):
        np.testing.assert_allclose(pose_distance(still, still + np.array([0.3, 0.0, 0.4]), kind), 0.5, rtol=1e-9)
    late = np.concatenate([x[:, :1], x[:, :-1]], axis=1)  # one frame late
    euclid, dtw = pose_distance(x, late, "euclidean"), pose_distance(x, late, "dtw")
    assert np.all(dtw <= euclid + 1e-12) and np.all(dtw < euclid)
    # per pose: one point of joints*3 dimensions per frame
    ref = np.array([_dtw_reference(x[n].reshape(12, -1), late[n].reshape(12, -1)) for n in range(6)])
    np.testing.assert_allclose(pose_distance(x, late, "dtw", per="pose"), ref, rtol=1e-12)
    # per joint: the mean over joints of the joints' trajectory distances
    ref = np.array([np.mean([_frechet_reference(x[n, :, j], late[n, :, j]) for j in range(4)]) for n in range(6)])
    np.testing.assert_allclose(pose_distance(x, late, "frechet"), ref, rtol=1e-12)


@pytest.mark.parametrize("method_id", ["gait.dtw", "gait.frechet", "gait.euclidean"])
def test_distance_measures_align_rows_and_have_a_floor(tiny_gait, method_id):
    t = tiny_gait(n=6, frames=10)
    noisy = bioanon.get_method("gait.noise", scale=0.3).transform(t)
    m = bioanon.get_method(method_id).fit(t)
    values = m.measure(t, noisy)
    assert values.shape == (6,) and np.all(values > 0)
    reordered = noisy.take(np.arange(6)[::-1])
    np.testing.assert_allclose(m.measure(t, reordered), values)  # matched by sample id, not row
    assert np.all(m.measure(t, t) == 0.0)
    assert m.floor(t) > 0 and not m.higher_is_better


def test_dtw_is_vectorized_over_large_batches():
    import time

    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 100, 18, 3))
    y = x + 0.1 * rng.normal(size=x.shape)
    start = time.perf_counter()
    d = pose_distance(x, y, "dtw")
    assert d.shape == (100,)
    assert time.perf_counter() - start < 20.0  # 1800 trajectory pairs × 100² cells, no per-pair loop


def test_attribute_accuracy_on_gait_features():
    data = bioanon.load_dataset("gait.synthetic", n_subjects=30, sequences_per_subject=4, frames=30, seed=2)
    clear, evaluation = data.split_subjects([0.5, 0.5], seed=0)
    m = bioanon.get_method("gait.attribute_accuracy", attribute="sex", features="flatten").fit(clear)
    on_clear = m.measure(evaluation, evaluation).mean()
    assert on_clear > m.floor(evaluation)  # above the majority rate
    average = bioanon.get_method("gait.first_pose").transform(evaluation)
    hidden = bioanon.get_method("gait.noise", scale=100.0).transform(evaluation)
    assert m.measure(evaluation, hidden).mean() < on_clear
    assert m.measure(evaluation, average).shape == (len(evaluation),)
