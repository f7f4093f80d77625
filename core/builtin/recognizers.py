"""Trait-agnostic recognizers that work on flattened payloads.

Contract (used by the evaluation): ``fit(train, label)`` learns the attacker's feature space on the attacker's
training set (subjects disjoint from the gallery); ``enroll(gallery, label)`` builds the classifier of the
gallery's classes in that space and may be called many times on one fitted recognizer (it never refits the
space; without ``fit`` it fits on the gallery); ``score(probes)`` returns a :class:`ScoreMatrix`.

* ``any.cosine_centroid``: cosine to class mean templates (training-free apart from centering);
* ``any.pca_svm``, ``any.random_forest``, ``any.logistic_regression``, ``any.knn``: standardization + PCA
  learned in ``fit``, a classifier trained in ``enroll``;
* ``any.lda_cosine``: PCA + LDA learned on the labelled training set, cosine to class centroids.

SEBA-style options of every recognizer built on :class:`_SpaceRecognizer` (:class:`ClassifierOptions`):
``cv_folds`` (stratified k-fold cross-validation of the classifier on the data it is trained on, per-fold
balanced accuracies in ``cv_scores_``), ``keep`` (the best fold's estimator, or the mean of every fold's scores)
and, where the classifier has probabilities, ``scores`` (``"decision"`` values or ``"proba"`` probabilities).

``any.cosine_centroid`` and ``any.knn`` compare templates: when the gallery's templates come from a protection
that declares a comparator (:meth:`bioanon.methods.Anonymizer.comparator`, e.g. ``any.pe_miu``) they compare
with it instead (``declared_comparator``; the report names it).

Samples become vectors through :func:`bioanon.methods.feature_matrix`: the first fixed-shape payload present
(``features``, ``imu``, ``pose``, ``image``) flattened, else the default feature view a trait plugin registers for
a payload that cannot be flattened (``register_payload_features``; e.g. utterance MFCC statistics for ``audio``
with bioanon-voice). The fitted space checks that later tables give vectors of the same length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol, cast

import attrs
import numpy as np

from ..errors import ParameterError, TableError, require_fitted
from ..methods import (
    CentroidRecognizer,
    Comparator,
    Recognizer,
    ScoreMatrix,
    class_sums,
    feature_matrix,
    fitted,
    labels_of,
    n_components_ok,
    param,
    table_comparator,
)

DECLARED_COMPARATOR_HELP = (
    "compare templates with the comparator their protection declares, when the reference "
    "templates (training database or gallery) come from one (the black-box attacker; "
    "bioanon.methods.Comparator); false: always this method's own comparison"
)


def declared_comparator(method: Any, table: Any) -> Comparator | None:
    """The :class:`~bioanon.methods.Comparator` the templates of ``table`` (the reference side: an attacker
    database or a gallery) declare, when ``method.declared_comparator`` is on; else None."""
    return table_comparator(table) if getattr(method, "declared_comparator", False) else None


def class_top_mean(s: np.ndarray, codes: np.ndarray, n_classes: int, k: int | None) -> np.ndarray:
    """Per class, the mean of the ``k`` largest similarities of each probe to the class's references
    (``k = None``: all of them): ``(P, n_classes)``; a loop over classes, vectorized over probes."""
    out = np.empty((s.shape[0], n_classes))
    for c in range(n_classes):
        sc = s[:, codes == c]
        kk = sc.shape[1] if k is None else min(k, sc.shape[1])
        if kk == sc.shape[1]:
            out[:, c] = sc.mean(axis=1)
        else:
            out[:, c] = -np.partition(-sc, kk - 1, axis=1)[:, :kk].mean(axis=1)
    return out


class _ComparatorHost(Protocol):
    """What :class:`UsesDeclaredComparator` needs of the class it is mixed into."""

    comparator_: Comparator | None
    classes_: Any

    def _x(self, table: Any) -> np.ndarray: ...


class UsesDeclaredComparator:
    """For methods that compare templates: when the reference templates (a gallery, an attacker database) come
    from a protection that declares a comparator, use it (the black-box attacker; ``declared_comparator``
    parameter); the fitted ``comparator_`` holds it, ``comparator_used()`` names it for the report."""

    __slots__ = ()

    def comparator_used(self) -> str:
        c = getattr(self, "comparator_", None)
        return c.name if c is not None else ""

    def _comparator_enrolment(
        self: _ComparatorHost, gallery: Any, label: str
    ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
        """Sets ``comparator_`` from ``gallery``; with one, the classes and the enrolled ``(templates, class
        codes)`` kept as they are (standardization, PCA or mean templates are meaningless when, e.g., blocks are
        shuffled per template); None without one."""
        self.comparator_ = declared_comparator(self, gallery)
        if self.comparator_ is None:
            return None
        classes, codes = np.unique(labels_of(gallery, label), return_inverse=True)
        return classes, (self._x(gallery), codes)

    def _comparator_scores(
        self: _ComparatorHost, enrolled: tuple[np.ndarray, np.ndarray], probes: Any, k: int | None
    ) -> ScoreMatrix:
        """Per class, the mean of the probe's ``k`` highest comparator similarities to its enrolled templates
        (``k = None``: all of them)."""
        x, codes = enrolled
        s = cast(Comparator, self.comparator_)(self._x(probes), x)  # set by _comparator_enrolment
        return ScoreMatrix(class_top_mean(s, codes, len(self.classes_), k), self.classes_, probes.sample_ids)


def _check_dim(method: Any, x: np.ndarray, fitted_dim: int) -> None:
    """TableError when samples have another number of values than the data the method was fitted on."""
    if x.shape[1] != fitted_dim:
        raise TableError(
            f"{method.id}: samples have {x.shape[1]} values each, but the recognizer was fitted on "
            f"samples of {fitted_dim}: training, gallery and probes must come in one payload layout "
            f"(the same payload, or features computed with the same settings)"
        )


def _l2_normalize(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    out: np.ndarray = x / np.maximum(n, 1e-12)
    return out


@attrs.define(kw_only=True)
class CosineNearestCentroid(UsesDeclaredComparator, CentroidRecognizer):
    """Cosine similarity to each class's mean template (training-free; ``fit`` learns the centering).

    Flattened payloads are centered by the training mean (when fitted) and L2-normalized; each class's
    template is the normalized mean of its enrolled samples."""

    id: ClassVar[str] = "any.cosine_centroid"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    has_embedding: ClassVar[bool] = True

    center: bool = param(True, help="subtract the training mean before normalizing")
    payload: str = param("", help="payload column (default: the first supported one present)")
    declared_comparator: bool = param(True, help=DECLARED_COMPARATOR_HELP)

    mean_: np.ndarray | None = fitted()
    comparator_: Comparator | None = fitted()
    gallery_: tuple[np.ndarray, np.ndarray] | None = fitted()

    def _x(self, table: Any) -> np.ndarray:
        return feature_matrix(table, self.payload or None, candidates=self.payloads, who=self.id)

    def fit(self, train: Any, label: str = "subject") -> CosineNearestCentroid:
        self.mean_ = self._x(train).mean(axis=0) if self.center else None
        return self

    def embed(self, table: Any) -> np.ndarray:
        x = self._x(table)
        if self.center and self.mean_ is not None:
            _check_dim(self, x, self.mean_.size)
        if self.center:
            x = x - (self.mean_ if self.mean_ is not None else x.mean(axis=0))
        return _l2_normalize(x)

    def is_fitted(self) -> bool:
        return not self.center or self.mean_ is not None

    def enroll(self, gallery: Any, label: str = "subject") -> CentroidRecognizer:
        """Class templates as in :class:`CentroidRecognizer`; when the gallery's templates declare a comparator
        (a protection such as ``any.pe_miu``), the enrolled templates are kept as they are instead and a class
        scores the mean comparator similarity of the probe to its templates (a mean template is meaningless
        when, e.g., blocks are shuffled per template)."""
        enrolled = self._comparator_enrolment(gallery, label)
        if enrolled is None:
            self.gallery_ = None
            return super().enroll(gallery, label)
        self.classes_, self.gallery_ = enrolled
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        if self.comparator_ is None:
            return super().score(probes)
        return self._comparator_scores(cast(tuple[np.ndarray, np.ndarray], self.gallery_), probes, None)


# ------------------------------------------------------------------------------------------ learned feature spaces


_N_COMPONENTS_HELP = "PCA components: a share of variance in (0, 1] (1.0 = all) or a count >= 1"
_RANDOMIZED_ABOVE = 2000  # exact SVD up to this min(N, D); a randomized truncated SVD above
#: the largest scaled projection :meth:`FeatureSpace.transform` computes whole; larger ones in blocks of columns
SCALED_BLOCK_BYTES = 4 * 2**20


@attrs.frozen(eq=False)
class FeatureSpace:
    """A fitted linear feature space ``z = ((x - mean) / scale) @ projection`` (immutable; shared by every
    enrolment of a recognizer).

    The projection is kept in one of two forms. Either explicitly (``explicit``, (D, K) float32), or, for a
    PCA of a wide set (fewer samples N than features D) that keeps nearly all its N - 1 components, as its
    training samples: ``projection = ((basis - mean) / scale).T @ weights`` with ``basis`` the (N, D) samples
    as given (read-only, standardized block by block at each use) and ``weights`` (N, K). The second form holds
    the training samples, which the caller holds anyway while fitting, instead of allocating a (D, K)
    projection as large as they are: a fit's peak memory is then that of the samples once, not twice.
    :attr:`projection` gives the (D, K) projection in either form."""

    mean: np.ndarray  # (D,) float32
    scale: np.ndarray  # (D,) float32
    explicit: np.ndarray | None = None  # (D, K) float32
    basis: np.ndarray | None = None  # (N, D) training samples, read-only
    weights: np.ndarray | None = None  # (N, K) float32

    def __attrs_post_init__(self) -> None:
        if (self.explicit is None) == (self.basis is None or self.weights is None):
            raise ValueError("a FeatureSpace has either an explicit projection or a basis and its weights")
        for a in (self.mean, self.scale, self.explicit, self.basis, self.weights):
            if a is not None:
                a.setflags(write=False)

    @property
    def projection(self) -> np.ndarray:
        """The (D, K) float32 projection (computed from the basis and its weights when kept that way)."""
        if self.explicit is not None:
            return self.explicit
        basis, weights = cast(np.ndarray, self.basis), cast(np.ndarray, self.weights)
        out = np.empty((basis.shape[1], weights.shape[1]), np.float32)
        for cols, xb in self._standardized_basis():
            np.matmul(xb.T, weights, out=out[cols])
        return out

    @property
    def n_components(self) -> int:
        """K, the dimension of the space."""
        return int((self.explicit if self.explicit is not None else cast(np.ndarray, self.weights)).shape[1])

    def _standardized_basis(self) -> Iterator[tuple[slice, np.ndarray]]:
        """Blocks of columns of ``(basis - mean) / scale`` (float32, at most 8 MiB in float64 each)."""
        basis = cast(np.ndarray, self.basis)
        for cols in column_blocks(basis.shape[1], basis.shape[0]):
            xb = basis[:, cols] - self.mean[cols]
            xb /= self.scale[cols]
            yield cols, xb

    @property
    def scaled_projection(self) -> np.ndarray:
        """``projection / scale``, (D, K) float32, computed at each use rather than kept beside ``projection``
        (a fitted space then holds one (D, K) array, not two; the division costs D·K operations against the
        N·D·K of the product it serves). In float32: the quotient of two float32 numbers rounded once is the
        float64 one rounded again (double rounding is exact for division), so no float64 array is needed."""
        out: np.ndarray = self.projection / self.scale[:, None]
        return out

    def __deepcopy__(self, memo: dict[int, Any]) -> FeatureSpace:
        """Itself: a space is immutable (read-only arrays), so the copies of a fitted recognizer handed out by
        :data:`bioanon.fit_memo.FITTED` share it instead of copying its (D, K) projections."""
        return self

    @classmethod
    def pca(
        cls,
        x: np.ndarray,
        n_components: int | float = 1.0,
        *,
        standardize: bool = True,
        max_rank: int | None = None,
        seed: int = 0,
        keep_samples: bool = False,
    ) -> FeatureSpace:
        """Standardize (per-feature z-score; constant features keep scale 1) and keep the leading principal
        components: ``n_components`` is a share of variance (float) or a count (int), capped by the data rank
        and ``max_rank``. ``keep_samples``: ``x`` is never changed after this call (a view of a table's
        immutable payload, or an array nobody else holds), so that the PCA of a wide set that keeps at least
        4/5 of its components may keep ``x`` itself as its basis (see :class:`FeatureSpace`) rather than
        compute a projection as large."""
        mean = x.mean(axis=0, dtype=np.float64).astype(np.float32)
        scale = column_std(x).astype(np.float32) if standardize else np.ones(x.shape[1], np.float32)
        scale[scale < 1e-8] = 1.0
        rank = max(1, min(len(x) - 1, x.shape[1], max_rank or x.shape[1]))
        rows = fit_block_rows(x.shape[1])
        if len(x) < x.shape[1] and len(x) <= _RANDOMIZED_ABOVE:
            # a wide set (pixels, flattened sequences): the samples' Gram matrix summed over blocks of columns;
            # the samples themselves are kept as the basis, or only the kept directions are computed, straight
            # into the float32 projection
            s, total_sq, weights = cls._pca_wide(x, mean, scale)
            k = cls._kept(s, rank, n_components, total_sq)
            in_basis = cls(mean, scale, None, x.view(), weights(k))
            if keep_samples and 5 * k >= 4 * len(x) and _holds_only(x):
                return in_basis
            return cls(mean, scale, in_basis.projection)
        if len(x) > rows and len(x) >= x.shape[1] and x.shape[1] <= _RANDOMIZED_ABOVE:
            # a tall set: the Gram matrix and the total variance summed over blocks of rows, in float64, with
            # no float64 (or standardized) copy of the whole set
            gram = np.zeros((x.shape[1], x.shape[1]))
            total_sq = 0.0
            for start in range(0, len(x), rows):
                xb = x[start : start + rows] - mean
                xb /= scale
                xb64 = xb.astype(np.float64)
                gram += xb64.T @ xb64
                total_sq += float(np.square(xb64).sum())
            s, vt = _eigh_svd(gram)
            squares = np.array([total_sq])
        else:
            s, vt, squares = cls._pca_whole(x, mean, scale, rank, seed)
        total = float(squares.sum()) if isinstance(n_components, float) else 0.0
        del squares
        k = cls._kept(s, rank, n_components, total)
        projection = np.ascontiguousarray(vt[:k].T, dtype=np.float32)
        del vt  # (the (n, D) float64 directions are not held while the space scales its projection)
        return cls(mean, scale, projection)

    @staticmethod
    def _kept(s: np.ndarray, rank: int, n_components: int | float, total: float) -> int:
        """How many principal directions to keep: those with a non-negligible variance, at most ``rank``, and
        ``n_components`` of them (an int) or as many as reach that share of the ``total`` variance (a float)."""
        var = s.astype(np.float64) ** 2
        keep = var > var[0] * 1e-10 if var.size and var[0] > 0 else np.zeros(var.size, bool)
        k = int(min(rank, max(1, keep.sum())))
        if isinstance(n_components, float):
            share = np.cumsum(var) / max(total, 1e-30)
            return min(k, int(np.searchsorted(share, n_components - 1e-9)) + 1)
        return min(k, n_components)

    @staticmethod
    def _pca_wide(
        x: np.ndarray, mean: np.ndarray, scale: np.ndarray
    ) -> tuple[np.ndarray, float, Callable[[int], np.ndarray]]:
        """Of a wide set (fewer samples N than features D): the singular values of the standardized set, its
        total variance and a function giving the (N, k) float32 weights of its first ``k`` directions
        (``directions = standardized.T @ weights``). The N × N Gram matrix is summed over float64 blocks of at
        most 8 MiB of columns, so no standardized or float64 copy of the whole set is ever held."""
        n, d = x.shape
        gram = np.zeros((n, n))
        total = 0.0
        for cols in column_blocks(d, n):
            xb = x[:, cols] - mean[cols]
            xb /= scale[cols]
            xb64 = xb.astype(np.float64)
            del xb
            gram += xb64 @ xb64.T
            total += float(np.square(xb64).sum())
            del xb64
        w, u = np.linalg.eigh(gram)
        del gram
        u = u[:, ::-1]
        s = np.sqrt(np.clip(w[::-1], 0.0, None))

        def weights(k: int) -> np.ndarray:
            if not (k and s[0] > 0):  # an all-constant set: no direction at all
                return np.zeros((n, k), np.float32)
            # in float32, as the directions are kept (the Gram matrix, whose eigenvectors decide them, is float64)
            out: np.ndarray = (u[:, :k] / s[:k]).astype(np.float32)
            return out

        return s, total, weights

    @staticmethod
    def _pca_whole(
        x: np.ndarray, mean: np.ndarray, scale: np.ndarray, rank: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Singular values, directions and the squares (or anything whose sum is the total variance) of the
        standardized set, computed on the whole of it."""
        xs = x - mean
        xs /= scale  # in place: one temporary of the size of x, not two
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
        return s, vt, squares

    def then(self, projection: np.ndarray) -> FeatureSpace:
        """This space followed by a further linear map (D', K) of its output."""
        if self.explicit is None:
            weights = (cast(np.ndarray, self.weights) @ projection).astype(np.float32)
            return FeatureSpace(self.mean, self.scale, None, self.basis, weights)
        return FeatureSpace(self.mean, self.scale, (self.explicit @ projection).astype(np.float32))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``((x - mean) / scale) @ projection``. Large inputs go in blocks of rows of
        :data:`SCALED_BLOCK_BYTES`, so that no centred copy of the whole of ``x`` is held.

        An explicit projection is applied as ``(x - mean) @ (projection / scale)`` (centring first keeps
        float32 precise when the mean dwarfs the spread), one over :data:`SCALED_BLOCK_BYTES` in blocks of its
        columns, so that no scaled copy of the whole of it is held; each output value is the same sum either
        way. A basis is applied as ``(((x - mean) / scale) @ standardized_basis.T) @ weights``, the N × N
        similarities summed in float64 over blocks of columns."""
        k = self.n_components
        d = self.mean.size
        n_blocks = -(-x.nbytes // SCALED_BLOCK_BYTES) if len(x) >= 4 else 1
        n_blocks = max(1, min(n_blocks, len(x) // 2))  # blocks of at least 2 rows (one row may take another BLAS path)
        bounds = np.linspace(0, len(x), n_blocks + 1).astype(np.int64)
        dtype = np.result_type(x.dtype, self.mean.dtype, np.float32)
        if self.explicit is None:
            weights = cast(np.ndarray, self.weights)
            z = np.empty((len(x), k), dtype=dtype)
            for r0, r1 in zip(bounds[:-1], bounds[1:], strict=True):
                sims = np.zeros((r1 - r0, len(weights)))
                for cols, xb in self._standardized_basis():
                    xs = x[r0:r1, cols] - self.mean[cols]
                    xs /= self.scale[cols]
                    sims += xs @ xb.T
                z[r0:r1] = sims @ weights
            return z
        width = max(1, SCALED_BLOCK_BYTES // max(1, d * self.explicit.itemsize))
        if width >= k and n_blocks == 1:
            out: np.ndarray = (x - self.mean) @ self.scaled_projection
            return out
        z = np.empty((len(x), k), dtype=np.result_type(x.dtype, self.mean.dtype, self.explicit.dtype))
        scaled = self.scaled_projection if width >= k else None
        for r0, r1 in zip(bounds[:-1], bounds[1:], strict=True):
            xc = x[r0:r1] - self.mean
            if scaled is not None:
                z[r0:r1] = xc @ scaled
                continue
            for c0 in range(0, k, width):
                cols = slice(c0, min(c0 + width, k))
                z[r0:r1, cols] = xc @ (self.explicit[:, cols] / self.scale[:, None])
        return z


def column_blocks(d: int, rows: int) -> list[slice]:
    """Slices of the columns of a ``rows`` × ``d`` array, each at most 8 MiB in float64 (at least one column)."""
    width = max(1, 2**20 // max(int(rows), 1))
    return [slice(a, min(a + width, d)) for a in range(0, d, width)]


def _holds_only(x: np.ndarray) -> bool:
    """Whether keeping ``x`` keeps (about) no more memory alive than ``x`` itself: it is C-contiguous and the
    buffer it views (a numpy array, an Arrow buffer) is at most a quarter larger. A row slice of a larger
    table's payload would keep the whole payload."""
    if not x.flags.c_contiguous:
        return False
    base: Any = x
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    size: Any = base.nbytes if isinstance(base, np.ndarray) else getattr(base, "size", None)
    if not isinstance(size, int):
        try:
            size = memoryview(base).nbytes
        except TypeError:
            return False
    return bool(size <= 1.25 * x.nbytes)


def column_std(x: np.ndarray) -> np.ndarray:
    """``x.std(axis=0, dtype=float64)`` bit for bit, without a float64 copy of the whole of ``x``: the squared
    deviations are summed over blocks of at most 8 MiB of rows, each block's sum continuing from the previous
    one's (the running sum is the block's first row), which is numpy's own row-by-row order."""
    if x.ndim != 2 or x.size <= 2**20 or min(x.shape) < 2:
        return np.asarray(x.std(axis=0, dtype=np.float64))
    n, d = x.shape
    mean = np.add.reduce(x, axis=0, dtype=np.float64, keepdims=True)
    mean /= n
    rows = max(2, 2**20 // d)
    buf = np.empty((rows + 1, d))
    acc = np.zeros(d)
    for start in range(0, n, rows):
        block = x[start : start + rows]
        dev = buf[1 : 1 + len(block)]
        np.subtract(block, mean, out=dev)
        np.multiply(dev, dev, out=dev)
        first = 1 if start == 0 else 0  # the first block's sum starts from its own first row, as numpy's does
        buf[0] = acc
        acc = np.add.reduce(buf[first : 1 + len(block)], axis=0)
    acc /= n
    return np.sqrt(acc)


def fit_block_rows(dim: int) -> int:
    """Rows of a block when a fit sums over a large training set in float64 (32 MiB a block, at least 4,096
    rows). A set of at most this many rows is computed whole, exactly as before blocks existed."""
    return max(4096, 2**25 // (8 * max(int(dim), 1)))


def _eigh_svd(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors (descending) from the Gram matrix ``xᵀx`` of a tall ``x``."""
    w, v = np.linalg.eigh(gram)
    w, v = w[::-1], v[:, ::-1]
    return np.sqrt(np.clip(w, 0.0, None)), np.ascontiguousarray(v.T)


def _gram_svd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors of ``x`` (descending) from the eigen-decomposition of the
    smaller Gram matrix in float64 — several times faster than a thin SVD of a tall or wide matrix. Of a wide
    matrix, the directions with a negligible singular value (≤ 1e-7 of the largest) are left out of ``vt``
    (callers keep fewer by their variance); of an all-zero one, ``vt`` is zeros."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    if n >= d:
        return _eigh_svd(x.T @ x)
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


# ------------------------------------------------------------------------------------- SEBA-style classifier options


def _cv_folds_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (value == 0 or value >= 2)


_SCORES_HELP = {
    "decision": "scores: 'decision' = the classifier's decision values, 'proba' = its class probabilities "
    "(SEBA's scores: SEBA's distance is 1 - probability)",
    "proba": "scores: class probabilities (predict_proba; this classifier has no decision function)",
}


def scores_param(default: str = "decision") -> Any:
    """The ``scores`` parameter of a classifier with ``predict_proba``: ``"decision"`` | ``"proba"``; a
    classifier with probabilities only (random forest, k-NN vote shares) declares ``scores_param("proba")``,
    whose only allowed value is ``"proba"`` (so a config that asks every classifier for probabilities loads)."""
    choices = ("decision", "proba") if default == "decision" else ("proba",)
    return param(default, help=_SCORES_HELP[default], choices=choices)


def svc(z: np.ndarray, y: np.ndarray, *, proba: bool, seed: int, small_classes: bool = False, **params: Any) -> Any:
    """A fitted one-vs-rest ``SVC(**params)``; with ``proba`` Platt-scaled probabilities seeded with ``seed``
    (``SVC(probability=True)`` as SEBA, or scikit-learn's replacement ``CalibratedClassifierCV(SVC(),
    ensemble=False)`` where that parameter is gone, scikit-learn >= 1.11). With ``small_classes`` (a gallery
    of identities), decision scores of classes small enough (every pair of classes at most
    :data:`~bioanon.builtin.svm.MAX_PAIR_SAMPLES` samples) come from :class:`~bioanon.builtin.svm.OvoSvc`:
    the same model to within the solver's tolerance, without importing scikit-learn."""
    import warnings

    if small_classes and not proba:
        from .svm import MAX_PAIR_SAMPLES, OvoSvc

        counts = np.sort(np.unique(y, return_counts=True)[1])
        if len(counts) >= 2 and counts[-1] + counts[-2] <= MAX_PAIR_SAMPLES:
            return OvoSvc(gamma="scale", **params).fit(z, y)
    from sklearn.svm import SVC

    base = SVC(gamma="scale", decision_function_shape="ovr", **params)
    if not proba:
        return base.fit(z, y)
    if "probability" in base.get_params():
        with warnings.catch_warnings():  # deprecated in scikit-learn 1.9, the same model until it is removed
            warnings.simplefilter("ignore", FutureWarning)
            return base.set_params(probability=True, random_state=seed).fit(z, y)
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import StratifiedKFold

    folds = max(2, min(5, int(np.bincount(y).max())))
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return CalibratedClassifierCV(base, method="sigmoid", ensemble=False, cv=cv).fit(z, y)


@attrs.define(kw_only=True, slots=False)
class ClassifierOptions:
    """Mixin: SEBA's cross-validated classifier training (``peers/seba.md`` §8.1).

    ``cv_folds`` = k >= 2 trains the classifier with stratified k-fold cross-validation (scikit-learn's
    ``StratifiedKFold(k)``, unshuffled, as SEBA's ``cross_validate``) on the data it is trained on (the
    enrolment gallery for identity recognizers, the labelled training set for attribute classifiers) and
    records each fold's balanced accuracy on its held-out part (``cv_scores_``). ``keep = "best"`` keeps the
    estimator of the fold with the highest balanced accuracy (the first on ties; trained on (k−1)/k of the
    data, as SEBA), ``"all"`` scores with the mean of every fold estimator's scores. 0 = off (one estimator on
    all the data). Like scikit-learn, it needs at least k samples in at least one class (ParameterError
    otherwise); a smaller class is absent from some held-out parts (scikit-learn warns; bioanon does not), and a
    class with a single sample is absent from one fold's training part (that fold's estimator scores it below
    every other class; with ``keep = "all"`` a class's score is the mean over the folds trained on it).

    A recognizer that wraps a core one (:class:`~bioanon.methods.FeatureRecognizer`) takes the mixin too and
    passes :meth:`classifier_options` to its inner recognizer."""

    cv_folds: int = param(
        0,
        help="stratified k-fold cross-validation of the classifier on its training data (SEBA); 0 = off",
        check=_cv_folds_ok,
        check_text="0 (off) or an int >= 2",
    )
    keep: str = param(
        "best",
        help="with cv_folds: 'best' = the best fold's estimator (SEBA), 'all' = the mean "
        "of every fold estimator's scores",
        choices=("best", "all"),
    )

    def classifier_options(self) -> dict[str, object]:
        """``cv_folds``, ``keep`` and (when declared) ``scores``: the parameters to pass to an inner
        recognizer."""
        names = [n for n in ("cv_folds", "keep", "scores") if n in attrs.fields_dict(type(self))]
        return {n: getattr(self, n) for n in names}


@attrs.frozen
class FoldModels:
    """The estimators kept by cross-validation, each with the (sorted) class indices it was trained on."""

    models: tuple[Any, ...]  # fitted scikit-learn estimators (untyped)
    classes: tuple[np.ndarray, ...]
    n_classes: int
    n_samples: int  # the samples cross-validated


def cv_summary(recognizer: Any) -> dict[str, Any] | None:
    """Mean, (population) std, min and max of the per-fold balanced accuracies of a cross-validated recognizer
    (also one wrapped by a :class:`~bioanon.methods.FeatureRecognizer`), with the number of folds, classes and
    samples cross-validated and ``keep``; None without cross-validation."""
    rec: Any = (
        recognizer if getattr(recognizer, "cv_scores_", None) is not None else getattr(recognizer, "inner_", None)
    )
    cv = getattr(rec, "cv_scores_", None)
    model = getattr(rec, "model_", None)
    if cv is None or not isinstance(model, FoldModels):
        return None
    cv = np.asarray(cv, dtype=np.float64)
    return {
        "mean": float(cv.mean()),
        "std": float(cv.std()),
        "min": float(cv.min()),
        "max": float(cv.max()),
        "folds": int(cv.size),
        "classes": model.n_classes,
        "samples": model.n_samples,
        "keep": rec.keep,
    }


def _balanced_accuracy(true: np.ndarray, pred: np.ndarray) -> float:
    """Mean recall over the classes present in ``true`` (scikit-learn's ``balanced_accuracy_score``)."""
    classes = np.unique(true)
    return float(np.mean([np.mean(pred[true == c] == c) for c in classes]))


@attrs.define(kw_only=True)
class _SpaceRecognizer(Recognizer, ClassifierOptions):
    """Shared machinery: ``fit`` learns a :class:`FeatureSpace` (standardize + PCA) on the attacker's training
    set; ``enroll`` maps the gallery through it and trains ``_train(z, y)`` (cross-validated with
    ``cv_folds``: :class:`ClassifierOptions`); ``score`` maps probes and calls ``_model_scores(model, z)``.
    Subclasses implement those two."""

    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    has_embedding: ClassVar[bool] = True

    payload: str = param("", help="payload column (default: the first supported one present)")
    n_components: int | float = param(
        0.95, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    standardize: bool = param(True, help="z-score every feature (fitted on the training set) before PCA")

    space_: FeatureSpace | None = fitted()
    classes_: np.ndarray | None = fitted()
    model_: Any = fitted()  # a fitted scikit-learn estimator (untyped), FoldModels, or a subclass's own model
    cv_scores_: np.ndarray | None = fitted()  # per-fold balanced accuracies of the last cross-validated training

    def _x(self, table: Any) -> np.ndarray:
        return feature_matrix(table, self.payload or None, candidates=self.payloads, who=self.id)

    def fit(self, train: Any, label: str = "subject") -> _SpaceRecognizer:
        self.space_ = FeatureSpace.pca(
            self._x(train),
            self.n_components,
            standardize=self.standardize,
            seed=getattr(self, "seed", 0),
            keep_samples=True,  # a view of the table's payload, or our own copy
        )
        return self

    def embed(self, table: Any) -> np.ndarray:
        require_fitted(self, "space_", call="fit() or enroll()", before="embed()")
        space = cast(FeatureSpace, self.space_)
        x = self._x(table)
        _check_dim(self, x, space.mean.size)
        return space.transform(x)

    def enroll(self, gallery: Any, label: str = "subject") -> _SpaceRecognizer:
        if self.space_ is None:
            self.fit(gallery, label)
        classes, y = np.unique(labels_of(gallery, label), return_inverse=True)
        self.classes_ = classes
        self.model_ = self._fit_model(self.embed(gallery), y, len(classes))
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        require_fitted(self, "classes_", call="enroll()", before="score()")
        z = self.embed(probes)
        s = np.asarray(self._scores(z) if self.model_ is not None else np.zeros((len(z), 1)))
        s = s if s.dtype in (np.float32, np.float64) else s.astype(np.float64)  # float32 scores kept as computed
        return ScoreMatrix(s, cast(np.ndarray, self.classes_), probes.sample_ids)

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        raise NotImplementedError

    def _model_scores(self, model: Any, z: np.ndarray) -> np.ndarray:
        """Scores (probes × the classes ``model`` was trained on) of one trained model."""
        if getattr(self, "scores", "decision") == "proba":
            proba: np.ndarray = model.predict_proba(z)
            return proba
        return _two_columns(model.decision_function(z))

    def _scores(self, z: np.ndarray) -> np.ndarray:
        f = self.model_
        if not isinstance(f, FoldModels):
            return self._model_scores(f, z)
        if len(f.models) == 1:
            return self._fold_scores(f.models[0], f.classes[0], f.n_classes, z)
        # keep = all: each class's score is the mean over the fold estimators trained on it (a class with a
        # single sample is missing from one fold's training part)
        s = np.stack(
            [self._fold_scores(m, c, f.n_classes, z, missing=np.nan) for m, c in zip(f.models, f.classes, strict=True)]
        )
        mean: np.ndarray = np.nanmean(s, axis=0)
        return mean

    def _fold_scores(
        self, model: Any, classes: np.ndarray, n_classes: int, z: np.ndarray, *, missing: float | None = None
    ) -> np.ndarray:
        """A fold estimator's scores in all ``n_classes`` columns; a class it was not trained on gets
        ``missing``, or (None) each row's minimum minus one (never the prediction)."""
        s = np.asarray(self._model_scores(model, z), dtype=np.float64)
        if len(classes) == n_classes:
            return s
        fill = s.min(axis=1, keepdims=True) - 1.0 if missing is None else np.full((len(s), 1), missing)
        out = np.repeat(fill, n_classes, axis=1)
        out[:, classes] = s
        return out

    def _fit_model(self, z: np.ndarray, y: np.ndarray, n_classes: int) -> Any:
        """The classifier of ``n_classes`` classes (``y`` in 0..n_classes-1): ``_train(z, y)``, or with
        ``cv_folds`` the cross-validated :class:`FoldModels` (``cv_scores_`` set); None for a single class."""
        self.cv_scores_ = None
        if n_classes < 2:
            return None
        if not self.cv_folds:
            return self._train(z, y)
        import warnings

        from sklearn.model_selection import StratifiedKFold

        k = self.cv_folds
        counts = np.bincount(y, minlength=n_classes)
        if counts.max() < k:
            raise ParameterError(
                self.id,
                "cv_folds",
                k,
                f"at most the size of the largest class (cross-validation needs >= {k} samples "
                f"in at least one class; the largest class has {counts.max()} samples, the "
                f"smallest {counts.min()}): lower cv_folds or enrol more samples per class",
            )
        with warnings.catch_warnings():  # "the least populated class has only n members": documented above
            warnings.simplefilter("ignore", UserWarning)
            folds = list(StratifiedKFold(n_splits=k).split(z, y))
        models: list[Any] = []
        present: list[np.ndarray] = []
        accuracy: list[float] = []
        for i, (tr, te) in enumerate(folds):
            classes, yi = np.unique(y[tr], return_inverse=True)
            if len(classes) < 2:
                raise ParameterError(
                    self.id,
                    "cv_folds",
                    k,
                    f"folds whose training part holds at least 2 classes (fold {i + 1} of {k} "
                    f"trains on one class only; the smallest class has {counts.min()} samples)",
                )
            m = self._train(z[tr], yi)
            pred = np.argmax(self._fold_scores(m, classes, n_classes, z[te]), axis=1)
            models.append(m)
            present.append(classes)
            accuracy.append(_balanced_accuracy(y[te], pred))
        self.cv_scores_ = np.asarray(accuracy)
        if self.keep == "best":
            b = int(np.argmax(self.cv_scores_))  # the first best fold, as np.argmax in SEBA
            return FoldModels((models[b],), (present[b],), n_classes, len(y))
        return FoldModels(tuple(models), tuple(present), n_classes, len(y))


@attrs.define(kw_only=True)
class PcaSvm(_SpaceRecognizer):
    """Standardization + PCA, then a linear or RBF support vector machine on the enrolled classes.

    ``fit`` learns the standardization and the PCA basis on the attacker's training set; ``enroll`` trains a
    SVC on the gallery in that space. Scores are its one-vs-rest decision function, or with ``scores =
    "proba"`` its Platt-scaled class probabilities (``SVC(probability=True)``, seeded with ``seed``; SEBA's
    scores). The decision scores of a gallery of small classes come from bioanon's own solver of the same
    model (:class:`~bioanon.builtin.svm.OvoSvc`, equal to scikit-learn's to within its tolerance), which
    spares the run scikit-learn's import."""

    id: ClassVar[str] = "any.pca_svm"

    kernel: str = param("linear", help="SVM kernel", choices=("linear", "rbf"))
    c: float = param(1.0, help="SVM regularization C", low=0.0, low_inclusive=False)
    seed: int = param(0, help="random seed (randomized PCA on very large data; Platt scaling with scores = proba)")
    scores: str = scores_param()

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        return svc(z, y, proba=self.scores == "proba", seed=self.seed, small_classes=True, kernel=self.kernel, C=self.c)


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
    scores: str = scores_param("proba")

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        from sklearn.ensemble import RandomForestClassifier

        mf = None if self.max_features == "all" else self.max_features
        return RandomForestClassifier(
            n_estimators=self.n_estimators, max_features=mf, random_state=self.seed, n_jobs=self.n_jobs
        ).fit(z, y)


@attrs.define(kw_only=True)
class LogisticRegression(_SpaceRecognizer):
    """Standardization + PCA, then multinomial logistic regression on the enrolled classes.

    ``fit`` learns the PCA basis on the attacker's training set; ``enroll`` trains the L2-regularized
    classifier on the gallery. Scores are the class logits (decision function), or with ``scores = "proba"``
    the class probabilities (their softmax)."""

    id: ClassVar[str] = "any.logistic_regression"

    c: float = param(1.0, help="inverse L2 regularization strength C", low=0.0, low_inclusive=False)
    max_iter: int = param(2000, help="maximum solver iterations", low=1)
    scores: str = scores_param()

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        from sklearn.linear_model import LogisticRegression as LR

        return LR(C=self.c, max_iter=self.max_iter).fit(z, y)


@attrs.define(kw_only=True)
class NearestNeighbors(UsesDeclaredComparator, _SpaceRecognizer):
    """Standardization + PCA, then k-nearest-neighbour matching per class.

    ``fit`` learns the PCA basis on the attacker's training set; ``enroll`` stores the gallery in that space.
    The score of a class is minus the mean distance to its ``k`` nearest enrolled samples (k = 1: the nearest
    neighbour), a continuous score, so ties are rare. (No ``scores`` option: the scores are distances, there is
    no probability; SEBA's k-NN vote shares are ``any.attribute_knn``'s scores.)"""

    id: ClassVar[str] = "any.knn"

    k: int = param(1, help="nearest enrolled samples per class averaged into its score", low=1)
    metric: str = param("euclidean", help="distance", choices=("euclidean", "cosine"))
    declared_comparator: bool = param(True, help=DECLARED_COMPARATOR_HELP)

    comparator_: Comparator | None = fitted()

    def enroll(self, gallery: Any, label: str = "subject") -> _SpaceRecognizer:
        """As :class:`_SpaceRecognizer`; when the gallery's templates declare a comparator (a protection such as
        ``any.pe_miu``), the raw gallery templates are kept and a class scores the mean of the probe's ``k``
        highest comparator similarities to its templates (no standardization or PCA: they are meaningless
        when, e.g., blocks are shuffled per template)."""
        enrolled = self._comparator_enrolment(gallery, label)
        if enrolled is None:
            return super().enroll(gallery, label)
        self.classes_, self.model_ = enrolled
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        if self.comparator_ is None:
            return super().score(probes)
        require_fitted(self, "classes_", call="enroll()", before="score()")
        return self._comparator_scores(self.model_, probes, self.k)

    def _prep(self, z: np.ndarray) -> np.ndarray:
        return _l2_normalize(z) if self.metric == "cosine" else z

    def _train(self, z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(y, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(y[order]) != 0])
        return self._prep(z[order]), starts

    def _model_scores(self, model: tuple[np.ndarray, np.ndarray], z: np.ndarray) -> np.ndarray:
        g, starts = model
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
        for c, (a, b) in enumerate(zip(starts, ends, strict=True)):  # loop over classes, vectorized over probes
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

    n_components: int | float = param(
        0.99, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    lda_dims: int = param(0, help="LDA dimensions (0 = all, C - 1)", low=0)
    shrinkage: float = param(0.05, help="shrink the within-class scatter towards a scaled identity", low=0.0, high=1.0)

    def fit(self, train: Any, label: str = "subject") -> LdaCosine:
        x = self._x(train)
        classes, y = np.unique(labels_of(train, label), return_inverse=True)
        n_classes = len(classes)
        if n_classes < 2:
            raise TableError(
                f"{self.id}: fit() learns directions that separate values of {label!r} and needs at "
                f"least 2 of them in the training set, which has {len(x)} samples of only "
                f"{[str(c) for c in classes]}; train on data with several values (e.g. a larger "
                f"attacker share, [rates] attacker) or use a recognizer without a learned "
                f"space (e.g. any.cosine_centroid)"
            )
        space = FeatureSpace.pca(
            x,
            self.n_components,
            standardize=self.standardize,
            max_rank=max(1, len(x) - n_classes),
            keep_samples=True,  # a view of the table's payload, or our own copy
        )
        counts = np.bincount(y, minlength=n_classes).astype(np.float64)
        rows = fit_block_rows(x.shape[1])
        if len(x) <= rows:
            z = space.transform(x).astype(np.float64)
            means = class_sums(z, y, n_classes) / counts[:, None]
            centered = z - means[y]
            sw = centered.T @ centered / max(len(z) - n_classes, 1)
        else:  # a large set: class sums and within-class scatter over blocks, no float64 copy of it all
            z32 = space.transform(x)
            means = np.zeros((n_classes, z32.shape[1]))
            for start in range(0, len(z32), rows):
                means += class_sums(z32[start : start + rows], y[start : start + rows], n_classes)
            means /= counts[:, None]
            sw = np.zeros((z32.shape[1], z32.shape[1]))
            for start in range(0, len(z32), rows):
                c = z32[start : start + rows].astype(np.float64) - means[y[start : start + rows]]
                sw += c.T @ c
            sw /= max(len(z32) - n_classes, 1)
            z = z32
        mu = counts @ means / counts.sum()
        sb = ((means - mu).T * counts) @ (means - mu) / counts.sum()
        d = z.shape[1]
        sw = (1.0 - self.shrinkage) * sw + self.shrinkage * np.trace(sw) / d * np.eye(d) + 1e-9 * np.eye(d)
        import scipy.linalg

        _, vecs = scipy.linalg.eigh(sb, sw)  # ascending; vecs.T @ sw @ vecs = I
        k = min(n_classes - 1, d, self.lda_dims or n_classes - 1)
        self.space_ = space.then(vecs[:, ::-1][:, :k])
        return self

    def embed(self, table: Any) -> np.ndarray:
        z = super().embed(table)
        return _l2_normalize(z) if z.shape[1] > 1 else z

    def _train(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        sums = class_sums(z, y, int(y.max()) + 1)
        means = sums / np.bincount(y)[:, None]
        return (_l2_normalize(means) if z.shape[1] > 1 else means).astype(np.float32)

    def _model_scores(self, model: np.ndarray, z: np.ndarray) -> np.ndarray:
        t = model
        s: np.ndarray = z @ t.T if z.shape[1] > 1 else -np.abs(z - t.T)
        return s
