"""Gait feature vectors for the recognizers and utility measures: the paper's ``flatten`` and ``simple``.

Both are made translation-invariant first (``centering``): ``frame`` subtracts each frame's joint centroid
(root-relative: where the walker is, and where it walks, no longer matters), ``sequence`` subtracts the
sequence's mean position (keeps the path within the walk), ``none`` keeps absolute positions.

* ``flatten`` (Horst et al. 2019): all centred poses of a sequence in one vector, ``frames · joints · 3``;
* ``simple`` (the False Sense of Privacy paper §5.5, SEBA's ``simple_feature_vector``): a PCA over the
  sequence's poses (frames as observations) — its first ``n_pcs`` principal directions, each ``joints · 3`` —
  concatenated with the mean pose. A principal direction's sign is arbitrary (SVD may return ``v`` or ``−v``
  for the same motion), which makes the raw feature unstable; here each is flipped to point along a reference
  direction learned on the training set (the leading eigenvector of Σ v vᵀ over the training sequences, which
  does not depend on the signs), so equal motions give equal features. ``signs = "svd"`` keeps the sign
  scikit-learn's ``PCA`` (≤ 1.4, SEBA's pinned 1.3) gives instead: the frame with the largest projection on the
  direction projects positively — per sequence, so a subject's walks may get opposite signs (SEBA's attacker).
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from bioanon.api import blas_threads

Features = Literal["flatten", "simple"]
Centering = Literal["frame", "sequence", "none"]
Signs = Literal["aligned", "svd"]
SIGNS_HELP = (
    "simple features: principal directions flipped along references learned on the training set (aligned), "
    "or the sign scikit-learn's PCA gives each sequence (svd: SEBA's attacker, weaker)"
)

_BLOCK_BYTES = 4 * 2**20  # float64 bytes of the sequences GaitFeatures.transform (flatten) centres at once
FEATURES_HELP = "flatten: all root-relative poses; simple: first principal pose directions + mean pose"
CENTERING_HELP = (
    "translation invariance: subtract each frame's joint centroid (frame), the sequence mean "
    "(sequence), or nothing (none)"
)


def center(x: np.ndarray, centering: str) -> np.ndarray:
    """Translation-invariant poses ``(N, T, J, 3)`` (float64)."""
    if centering == "none":
        return np.asarray(x, dtype=np.float64)
    x = np.array(x, dtype=np.float64)  # our own copy, centred in place (no second float64 copy)
    x -= x.mean(axis=2 if centering == "frame" else (1, 2), keepdims=True)
    return x


def principal_directions(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence: the first ``k`` principal directions of its poses and its mean pose.

    ``x`` is ``(N, T, J, 3)``; returns ``(N, k, J·3)`` (unit vectors; zero rows for directions without
    variance) and ``(N, J·3)``. One batched eigendecomposition of the ``(J·3) × (J·3)`` pose covariances, on
    one BLAS thread (:func:`~bioanon.api.blas_threads`: the matrices are too small to share between threads)."""
    n, t = x.shape[:2]
    p = x.reshape(n, t, -1)
    mean = p.mean(axis=1)
    c = p - mean[:, None]
    with blas_threads(1):
        cov = np.matmul(c.transpose(0, 2, 1), c)  # (N, D, D): one small GEMM per sequence (einsum: ~10x slower)
        cov /= max(t, 1)
        w, v = np.linalg.eigh(cov)  # ascending eigenvalues; columns of v are the directions
    k_have = min(k, v.shape[2])
    out = np.zeros((n, k, p.shape[2]))
    top = v[:, :, ::-1][:, :, :k_have].transpose(0, 2, 1)  # (n, k, D), largest variance first
    wt = w[:, ::-1][:, :k_have]
    out[:, :k_have] = top * (wt > 1e-12 * np.maximum(w[:, -1:], 1e-300))[..., None]
    return out, mean


def reference_directions(v: np.ndarray) -> np.ndarray:
    """Sign-free reference per principal component: the leading eigenvector of ``Σ_i v_i v_iᵀ`` (``v``:
    ``(N, k, D)``) → ``(k, D)``, itself given a deterministic sign (largest entry positive)."""
    refs = []
    with blas_threads(1):  # a thin (N, D) SVD: on two threads of a busy machine 10x slower
        for j in range(v.shape[1]):  # loop over components (few), vectorized over samples
            _, _, vt = np.linalg.svd(v[:, j], full_matrices=False)
            r = vt[0]
            refs.append(r * (1.0 if r[np.argmax(np.abs(r))] >= 0 else -1.0))
    return np.stack(refs)


def svd_signs(x: np.ndarray, v: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """(N, k) signs giving each sequence's directions ``v`` the sign scikit-learn's PCA (``svd_flip`` on U,
    versions ≤ 1.4) gives them: the frame whose projection on the direction is largest in magnitude projects
    positively. ``x`` is ``(N, T, J, 3)``, ``mean`` its ``(N, J·3)`` mean pose."""
    n, t = x.shape[:2]
    with blas_threads(1):
        proj = np.matmul(x.reshape(n, t, -1) - mean[:, None], v.transpose(0, 2, 1))  # (N, T, k)
    at = np.abs(proj).argmax(axis=1)  # (N, k): the frame of the largest |projection|
    extreme = np.take_along_axis(proj, at[:, None, :], axis=1)[:, 0]
    return np.where(extreme < 0, -1.0, 1.0)


@attrs.define(kw_only=True)
class GaitFeatures:
    """Feature extractor: ``fit(poses)`` learns what ``transform`` needs (the sign references of ``simple``),
    ``transform(poses) -> (N, D)`` float32."""

    kind: str = "flatten"
    centering: str = "frame"
    n_pcs: int = 1
    signs: str = "aligned"
    references_: np.ndarray | None = attrs.field(default=None, init=False, repr=False)

    def fit(self, x: np.ndarray) -> GaitFeatures:
        if self.kind == "simple" and self.signs == "aligned":
            v, _ = principal_directions(center(x, self.centering), self.n_pcs)
            self.references_ = reference_directions(v)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "flatten":  # sample by sample, so in blocks: no float64 copy of the whole set
            out = np.empty((len(x), int(np.prod(x.shape[1:]))), np.float32)
            block = max(1, _BLOCK_BYTES // (8 * max(out.shape[1], 1)))
            for start in range(0, len(x), block):
                out[start : start + block] = center(x[start : start + block], self.centering).reshape(-1, out.shape[1])
            return out
        c = center(x, self.centering)
        v, mean = principal_directions(c, self.n_pcs)
        if self.signs == "svd":
            sign = svd_signs(c, v, mean)
        else:
            ref = self.references_ if self.references_ is not None else reference_directions(v)
            dots = np.matmul(v.transpose(1, 0, 2), ref[:, :, None])[..., 0].T  # (N, k): v[i, j] · ref[j]
            sign = np.where(dots < 0, -1.0, 1.0)
        v = v * sign[..., None]
        return np.concatenate([v.reshape(len(v), -1), mean], axis=1).astype(np.float32)
