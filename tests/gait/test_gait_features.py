"""Gait ``simple`` features (issue 29): the batched principal directions equal a per-sequence float64
reference (np.cov + eigh) and run on one BLAS thread."""

from __future__ import annotations

import numpy as np
import scipy.linalg  # noqa: F401 - SciPy's own OpenBLAS is loaded, so the check covers both libraries
from threadpoolctl import threadpool_info, threadpool_limits

from bioanon_gait import features as F


def _poses(n: int = 12, frames: int = 30, joints: int = 5, seed: int = 0) -> np.ndarray:
    """Random float32 poses whose principal directions are well separated (scales 1 … 1/D per coordinate,
    under a random rotation), one sequence standing still (no variance)."""
    rng = np.random.default_rng(seed)
    d = joints * 3
    rot, _ = np.linalg.qr(rng.standard_normal((d, d)))
    x = rng.standard_normal((n, frames, d)) * (1.0 / np.arange(1, d + 1)) @ rot.T + rng.normal(size=(n, 1, d))
    x[-1] = x[-1, :1]  # a sequence without motion
    return x.reshape(n, frames, joints, 3).astype(np.float32)


def _reference(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    out, means = [], []
    for seq in x.astype(np.float64):
        p = seq.reshape(len(seq), -1)
        cov = np.cov(p, rowvar=False, bias=True)
        w, v = np.linalg.eigh(cov)
        top = v[:, ::-1][:, :k].T * (w[::-1][:k] > 1e-12 * max(w[-1], 1e-300))[:, None]
        out.append(top)
        means.append(p.mean(axis=0))
    return np.stack(out), np.stack(means)


def test_principal_directions_equal_a_float64_reference():
    x = _poses()
    for k in (1, 3):
        got, mean = F.principal_directions(F.center(x, "none"), k)
        want, want_mean = _reference(x, k)
        assert got.shape == want.shape == (len(x), k, x.shape[2] * 3) and got.dtype == np.float64
        np.testing.assert_allclose(mean, want_mean, rtol=0, atol=1e-12)
        sign = np.where((got * want).sum(axis=-1, keepdims=True) < 0, -1.0, 1.0)  # eigenvectors: up to sign
        np.testing.assert_allclose(got * sign, want, rtol=0, atol=1e-9)
        assert not got[-1].any()  # no motion: zero directions
        np.testing.assert_allclose(np.linalg.norm(got[:-1], axis=-1), 1.0, atol=1e-12)
    # the sign-fixed features do not depend on the eigenvectors' signs: those of the reference give the same
    f = F.GaitFeatures(kind="simple", centering="none", n_pcs=2).fit(x)
    v, mean = _reference(x, 2)
    dots = (v * f.references_).sum(axis=-1)
    want_features = np.concatenate([(v * np.where(dots < 0, -1.0, 1.0)[..., None]).reshape(len(x), -1), mean], 1)
    np.testing.assert_allclose(f.transform(x), want_features.astype(np.float32), rtol=0, atol=1e-6)


def test_the_batched_linear_algebra_runs_on_one_blas_thread(monkeypatch):
    seen: list[set[int]] = []

    def recording(fn):
        def wrapper(*args, **kwargs):
            seen.append({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(np.linalg, "eigh", recording(np.linalg.eigh))
    monkeypatch.setattr(np, "matmul", recording(np.matmul))
    with threadpool_limits(2, user_api="blas"):  # two threads outside, on any machine
        F.principal_directions(F.center(_poses(), "none"), 2)
    assert len(seen) >= 2 and all(s == {1} for s in seen), seen


def test_svd_signs_follow_sklearn_pca_as_seba_ran_it():
    """``signs = "svd"``: each walk's first principal direction with the sign scikit-learn's PCA gave it in SEBA
    (sklearn 1.3: ``svd_flip`` decided on U, the frames' projections), not aligned across walks."""
    from sklearn.utils.extmath import svd_flip

    x = _poses()[:-1]  # the sequences with motion (a still one has no direction to sign)
    feats = F.GaitFeatures(kind="simple", centering="none", signs="svd").fit(x).transform(x)
    d = x.shape[2] * 3
    for seq, got in zip(x.astype(np.float64), feats, strict=True):
        p = seq.reshape(len(seq), -1)
        u, _, vt = np.linalg.svd(p - p.mean(axis=0), full_matrices=False)
        _, vt = svd_flip(u, vt, u_based_decision=True)
        np.testing.assert_allclose(got[:d], vt[0], atol=1e-4)  # the same direction and sign (float32 output)
    aligned = F.GaitFeatures(kind="simple", centering="none").fit(x).transform(x)
    assert len({np.sign(f[:d] @ aligned[0, :d]) for f in aligned}) == 1  # bioanon: one sign for all
    assert len({np.sign(f[:d] @ aligned[0, :d]) for f in feats}) == 2  # SEBA's: both signs occur here
