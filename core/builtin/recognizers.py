"""Trait-agnostic recognizers that work on flattened payloads.

Contract (used by the evaluation): ``fit(train, label)`` learns the attacker's feature space on the attacker's
training set (subjects disjoint from the gallery); ``enroll(gallery, label)`` builds the classifier of the
gallery's classes in that space and may be called many times on one fitted recognizer (it never refits the
space; without ``fit`` it fits on the gallery); ``score(probes)`` returns a :class:`ScoreMatrix`.

* ``any.cosine_centroid``: cosine to class mean templates (training-free apart from centering);
* ``any.pca_svm``, ``any.random_forest``, ``any.logistic_regression``, ``any.knn``: standardization + PCA
  learned in ``fit``, a classifier trained in ``enroll``;
* ``any.lda_cosine``: PCA + LDA learned on the labelled training set, cosine to class centroids.

Samples become vectors through :func:`bioanon.methods.feature_matrix`: the first fixed-shape payload present
(``features``, ``imu``, ``pose``, ``image``) flattened, else the default feature view a trait plugin registers for
a payload that cannot be flattened (``register_payload_features``; e.g. utterance MFCC statistics for ``audio``
with bioanon-voice). The fitted space checks that later tables give vectors of the same length.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from ..errors import TableError
from ..methods import (CentroidRecognizer, Recognizer, ScoreMatrix, class_sums, feature_matrix, fitted, labels_of,
                       n_components_ok, param)


def _check_dim(method, x: np.ndarray, fitted_dim: int) -> None:
    """TableError when samples have another number of values than the data the method was fitted on."""
    if x.shape[1] != fitted_dim:
        raise TableError(f"{method.id}: samples have {x.shape[1]} values each, but the recognizer was fitted on "
                         f"samples of {fitted_dim}: training, gallery and probes must come in one payload layout "
                         f"(the same payload, or features computed with the same settings)")


def _l2_normalize(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


@attrs.define(kw_only=True)
class CosineNearestCentroid(CentroidRecognizer):
    """Cosine similarity to each class's mean template (training-free; ``fit`` learns the centering).

    Flattened payloads are centered by the training mean (when fitted) and L2-normalized; each class's
    template is the normalized mean of its enrolled samples."""

    id: ClassVar[str] = "any.cosine_centroid"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    has_embedding: ClassVar[bool] = True

    center: bool = param(True, help="subtract the training mean before normalizing")
    payload: str = param("", help="payload column (default: the first supported one present)")

    mean_: np.ndarray | None = fitted()

    def _x(self, table) -> np.ndarray:
        return feature_matrix(table, self.payload or None, candidates=self.payloads, who=self.id)

    def fit(self, train, label: str = "subject"):
        self.mean_ = self._x(train).mean(axis=0) if self.center else None
        return self

    def embed(self, table) -> np.ndarray:
        x = self._x(table)
        if self.center and self.mean_ is not None:
            _check_dim(self, x, self.mean_.size)
        if self.center:
            x = x - (self.mean_ if self.mean_ is not None else x.mean(axis=0))
        return _l2_normalize(x)

    def is_fitted(self) -> bool:
        return not self.center or self.mean_ is not None


# ------------------------------------------------------------------------------------------ learned feature spaces


_N_COMPONENTS_HELP = "PCA components: a share of variance in (0, 1] (1.0 = all) or a count >= 1"
_RANDOMIZED_ABOVE = 2000  # exact SVD up to this min(N, D); a randomized truncated SVD above


@attrs.frozen(eq=False)
class FeatureSpace:
    """A fitted linear feature space ``z = ((x - mean) / scale) @ projection`` (immutable; shared by every
    enrolment of a recognizer)."""

    mean: np.ndarray  # (D,) float32
    scale: np.ndarray  # (D,) float32
    projection: np.ndarray  # (D, K) float32
    scaled_projection: np.ndarray = attrs.field(init=False, repr=False)  # projection / scale, (D, K) float32

    def __attrs_post_init__(self) -> None:
        scaled = self.projection.astype(np.float64)
        scaled /= self.scale.astype(np.float64)[:, None]  # in place: one (D, K) float64 array, not two
        object.__setattr__(self, "scaled_projection", scaled.astype(np.float32))
        for a in (self.mean, self.scale, self.projection, self.scaled_projection):
            a.setflags(write=False)

    def __deepcopy__(self, memo: dict) -> "FeatureSpace":
        """Itself: a space is immutable (read-only arrays), so the copies of a fitted recognizer handed out by
        :data:`bioanon.fit_memo.FITTED` share it instead of copying its (D, K) projections."""
        return self

    @classmethod
    def pca(cls, x: np.ndarray, n_components: int | float = 1.0, *, standardize: bool = True,
            max_rank: int | None = None, seed: int = 0) -> "FeatureSpace":
        """Standardize (per-feature z-score; constant features keep scale 1) and keep the leading principal
        components: ``n_components`` is a share of variance (float) or a count (int), capped by the data rank
        and ``max_rank``."""
        mean = x.mean(axis=0, dtype=np.float64).astype(np.float32)
        scale = x.std(axis=0, dtype=np.float64).astype(np.float32) if standardize else np.ones(x.shape[1], np.float32)
        scale[scale < 1e-8] = 1.0
        xs = x - mean
        xs /= scale  # in place: one temporary of the size of x, not two
        rank = max(1, min(len(x) - 1, x.shape[1], max_rank or x.shape[1]))
        if min(xs.shape) > _RANDOMIZED_ABOVE:
            from sklearn.utils.extmath import randomized_svd

            _, s, vt = randomized_svd(xs, min(rank, 512), random_state=seed)
            squares = np.square(xs, dtype=np.float64)
        else:
            # one float64 copy serves the Gram SVD and then, squared in place, the total variance: the float32
            # copy and a further float64 array of the squares are never held beside it
            squares = np.asarray(xs, dtype=np.float64)
            del xs
            s, vt = _gram_svd(squares)
            np.square(squares, out=squares)
        var = s.astype(np.float64) ** 2
        keep = var > var[0] * 1e-10 if var.size and var[0] > 0 else np.zeros(var.size, bool)
        k = int(min(rank, max(1, keep.sum())))
        total = float(squares.sum()) if isinstance(n_components, float) else 0.0
        del squares
        if isinstance(n_components, float):
            share = np.cumsum(var) / max(total, 1e-30)
            k = min(k, int(np.searchsorted(share, n_components - 1e-9)) + 1)
        else:
            k = min(k, n_components)
        projection = np.ascontiguousarray(vt[:k].T, dtype=np.float32)
        del vt  # (the (n, D) float64 directions are not held while the space scales its projection)
        return cls(mean, scale, projection)

    def then(self, projection: np.ndarray) -> "FeatureSpace":
        """This space followed by a further linear map (D', K) of its output."""
        return FeatureSpace(self.mean, self.scale, (self.projection @ projection).astype(np.float32))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``((x - mean) / scale) @ projection``, computed as ``(x - mean) @ (projection / scale)``: one
        temporary instead of two (centring first keeps float32 precise when the mean dwarfs the spread)."""
        return (x - self.mean) @ self.scaled_projection


def _gram_svd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors of ``x`` (descending) from the eigen-decomposition of the
    smaller Gram matrix in float64 — several times faster than a thin SVD of a tall or wide matrix. Of a wide
    matrix, the directions with a negligible singular value (≤ 1e-7 of the largest) are left out of ``vt``
    (callers keep fewer by their variance); of an all-zero one, ``vt`` is zeros."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    if n >= d:
        w, v = np.linalg.eigh(x.T @ x)
        w, v = w[::-1], v[:, ::-1]
        return np.sqrt(np.clip(w, 0.0, None)), np.ascontiguousarray(v.T)
    w, u = np.linalg.eigh(x @ x.T)
    w, u = w[::-1], u[:, ::-1]
    s = np.sqrt(np.clip(w, 0.0, None))
    ok = s > (s[0] if s.size else 0.0) * 1e-7  # a prefix: s is descending
    if not ok.any():
        return s, np.zeros((n, d))
    vt = u[:, ok].T @ x  # only the rows kept: no (n, d) array of zeros beside it
    vt /= s[ok, None]
    return s, vt


def _two_columns(d: np.ndarray) -> np.ndarray:
    """sklearn's binary decision_function gives one column (positive = second class): make it two."""
    return np.stack([-d, d], axis=1) if d.ndim == 1 else d


@attrs.define(kw_only=True)
class _SpaceRecognizer(Recognizer):
    """Shared machinery: ``fit`` learns a :class:`FeatureSpace` (standardize + PCA) on the attacker's training
    set; ``enroll`` maps the gallery through it and trains ``_train(z, y)``; ``score`` maps probes and calls
    ``_scores(z)``. Subclasses implement those two."""

    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    has_embedding: ClassVar[bool] = True

    payload: str = param("", help="payload column (default: the first supported one present)")
    n_components: int | float = param(0.95, help=_N_COMPONENTS_HELP, check=n_components_ok,
                                      check_text="a float in (0, 1] or an int >= 1")
    standardize: bool = param(True, help="z-score every feature (fitted on the training set) before PCA")

    space_: FeatureSpace | None = fitted()
    classes_: np.ndarray | None = fitted()
    model_: object = fitted()

    def _x(self, table) -> np.ndarray:
        return feature_matrix(table, self.payload or None, candidates=self.payloads, who=self.id)

    def fit(self, train, label: str = "subject"):
        self.space_ = FeatureSpace.pca(self._x(train), self.n_components, standardize=self.standardize,
                                       seed=getattr(self, "seed", 0))
        return self

    def embed(self, table) -> np.ndarray:
        if self.space_ is None:
            raise RuntimeError(f"{self.id}: fit() or enroll() before embed()")
        x = self._x(table)
        _check_dim(self, x, self.space_.mean.size)
        return self.space_.transform(x)

    def enroll(self, gallery, label: str = "subject"):
        if self.space_ is None:
            self.fit(gallery, label)
        classes, y = np.unique(labels_of(gallery, label), return_inverse=True)
        self.classes_ = classes
        self.model_ = self._train(self.embed(gallery), y) if len(classes) > 1 else None
        return self

    def score(self, probes) -> ScoreMatrix:
        if self.classes_ is None:
            raise RuntimeError(f"{self.id}: enroll() before score()")
        z = self.embed(probes)
        s = self._scores(z) if self.model_ is not None else np.zeros((len(z), 1))
        return ScoreMatrix(np.asarray(s, dtype=np.float64), self.classes_, probes.sample_ids)

    def _train(self, z: np.ndarray, y: np.ndarray) -> object:
        raise NotImplementedError

    def _scores(self, z: np.ndarray) -> np.ndarray:
        return _two_columns(self.model_.decision_function(z))


@attrs.define(kw_only=True)
class PcaSvm(_SpaceRecognizer):
    """Standardization + PCA, then a linear or RBF support vector machine on the enrolled classes.

    ``fit`` learns the standardization and the PCA basis on the attacker's training set; ``enroll`` trains a
    SVC on the gallery in that space. Scores are its one-vs-rest decision function."""

    id: ClassVar[str] = "any.pca_svm"

    kernel: str = param("linear", help="SVM kernel", choices=("linear", "rbf"))
    c: float = param(1.0, help="SVM regularization C", low=0.0, low_inclusive=False)
    seed: int = param(0, help="random seed (randomized PCA on very large data)")

    def _train(self, z, y):
        from sklearn.svm import SVC

        return SVC(kernel=self.kernel, C=self.c, gamma="scale", decision_function_shape="ovr").fit(z, y)


@attrs.define(kw_only=True)
class RandomForest(_SpaceRecognizer):
    """Standardization + PCA, then a random forest on the enrolled classes (scores = class vote shares).

    ``fit`` learns the PCA basis on the attacker's training set (this makes the forest's axis-aligned splits
    meaningful on rotated or mixed features); ``enroll`` trains the forest on the gallery."""

    id: ClassVar[str] = "any.random_forest"

    n_estimators: int = param(300, help="number of trees", low=1)
    max_features: str = param("sqrt", help="features considered per split", choices=("sqrt", "log2", "all"))
    seed: int = param(0, help="random seed")
    n_jobs: int = param(1, help="parallel jobs (-1 = all cores)", affects_output=False)

    def _train(self, z, y):
        from sklearn.ensemble import RandomForestClassifier

        mf = None if self.max_features == "all" else self.max_features
        return RandomForestClassifier(n_estimators=self.n_estimators, max_features=mf, random_state=self.seed,
                                      n_jobs=self.n_jobs).fit(z, y)

    def _scores(self, z):
        return self.model_.predict_proba(z)


@attrs.define(kw_only=True)
class LogisticRegression(_SpaceRecognizer):
    """Standardization + PCA, then multinomial logistic regression on the enrolled classes.

    ``fit`` learns the PCA basis on the attacker's training set; ``enroll`` trains the L2-regularized
    classifier on the gallery. Scores are the class logits (decision function)."""

    id: ClassVar[str] = "any.logistic_regression"

    c: float = param(1.0, help="inverse L2 regularization strength C", low=0.0, low_inclusive=False)
    max_iter: int = param(2000, help="maximum solver iterations", low=1)

    def _train(self, z, y):
        from sklearn.linear_model import LogisticRegression as LR

        return LR(C=self.c, max_iter=self.max_iter).fit(z, y)


@attrs.define(kw_only=True)
class NearestNeighbors(_SpaceRecognizer):
    """Standardization + PCA, then k-nearest-neighbour matching per class.

    ``fit`` learns the PCA basis on the attacker's training set; ``enroll`` stores the gallery in that space.
    The score of a class is minus the mean distance to its ``k`` nearest enrolled samples (k = 1: the nearest
    neighbour), a continuous score, so ties are rare."""

    id: ClassVar[str] = "any.knn"

    k: int = param(1, help="nearest enrolled samples per class averaged into its score", low=1)
    metric: str = param("euclidean", help="distance", choices=("euclidean", "cosine"))

    def _prep(self, z):
        return _l2_normalize(z) if self.metric == "cosine" else z

    def _train(self, z, y):
        order = np.argsort(y, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(y[order]) != 0])
        return self._prep(z[order]), starts

    def _scores(self, z):
        g, starts = self.model_
        q = self._prep(z)
        d = q @ g.T  # one (probes, gallery) matrix, then in-place passes
        if self.metric == "cosine":
            np.subtract(1.0, d, out=d)
        else:  # squared distances; the root after the minimum when k = 1 (monotone)
            d *= -2.0
            d += (q * q).sum(1)[:, None]
            d += (g * g).sum(1)[None, :]
            np.maximum(d, 0.0, out=d)
            if self.k == 1:
                return -np.sqrt(np.minimum.reduceat(d, starts, axis=1))
            np.sqrt(d, out=d)
        if self.k == 1:
            return -np.minimum.reduceat(d, starts, axis=1)
        ends = np.r_[starts[1:], d.shape[1]]
        out = np.empty((len(d), len(starts)))
        for c, (a, b) in enumerate(zip(starts, ends)):  # loop over classes, vectorized over probes
            kk = min(self.k, b - a)
            out[:, c] = np.partition(d[:, a:b], kk - 1, axis=1)[:, :kk].mean(axis=1)
        return -out


@attrs.define(kw_only=True)
class LdaCosine(_SpaceRecognizer):
    """PCA then linear discriminant analysis learned on labelled training data; cosine to class centroids.

    ``fit`` learns standardization, PCA (capped at N − C components so the within-class scatter is regular)
    and the LDA directions that separate the training classes relative to their within-class scatter (a
    learned embedding: trained on anonymized data it finds the identity left in the anonymized data, which
    makes the parrot attacker stronger than a naive one). ``enroll`` stores each class's normalized mean
    embedding; ``score`` is the cosine similarity to it (minus the Euclidean distance when the embedding has
    a single dimension, e.g. a binary attribute, where cosines would only be ±1)."""

    id: ClassVar[str] = "any.lda_cosine"

    n_components: int | float = param(0.99, help=_N_COMPONENTS_HELP, check=n_components_ok,
                                      check_text="a float in (0, 1] or an int >= 1")
    lda_dims: int = param(0, help="LDA dimensions (0 = all, C - 1)", low=0)
    shrinkage: float = param(0.05, help="shrink the within-class scatter towards a scaled identity", low=0.0,
                             high=1.0)

    def fit(self, train, label: str = "subject"):
        x = self._x(train)
        classes, y = np.unique(labels_of(train, label), return_inverse=True)
        n_classes = len(classes)
        if n_classes < 2:
            raise TableError(f"{self.id}: fit() learns directions that separate values of {label!r} and needs at "
                             f"least 2 of them in the training set, which has {len(x)} samples of only "
                             f"{[str(c) for c in classes]}; train on data with several values (e.g. a larger "
                             f"attacker share, [rates] attacker) or use a recognizer without a learned "
                             f"space (e.g. any.cosine_centroid)")
        space = FeatureSpace.pca(x, self.n_components, standardize=self.standardize,
                                 max_rank=max(1, len(x) - n_classes))
        z = space.transform(x).astype(np.float64)
        counts = np.bincount(y, minlength=n_classes).astype(np.float64)
        means = class_sums(z, y, n_classes) / counts[:, None]
        centered = z - means[y]
        sw = centered.T @ centered / max(len(z) - n_classes, 1)
        mu = counts @ means / counts.sum()
        sb = ((means - mu).T * counts) @ (means - mu) / counts.sum()
        d = z.shape[1]
        sw = (1.0 - self.shrinkage) * sw + self.shrinkage * np.trace(sw) / d * np.eye(d) + 1e-9 * np.eye(d)
        import scipy.linalg

        _, vecs = scipy.linalg.eigh(sb, sw)  # ascending; vecs.T @ sw @ vecs = I
        k = min(n_classes - 1, d, self.lda_dims or n_classes - 1)
        self.space_ = space.then(vecs[:, ::-1][:, :k])
        return self

    def embed(self, table) -> np.ndarray:
        z = super().embed(table)
        return _l2_normalize(z) if z.shape[1] > 1 else z

    def _train(self, z, y):
        sums = class_sums(z, y, int(y.max()) + 1)
        means = sums / np.bincount(y)[:, None]
        return (_l2_normalize(means) if z.shape[1] > 1 else means).astype(np.float32)

    def _scores(self, z):
        t = self.model_
        if z.shape[1] > 1:
            return z @ t.T
        return -np.abs(z - t.T)
