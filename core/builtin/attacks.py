"""Attribute-inference attacks: the similarity-based attack on privacy-enhanced templates and classifier
baselines (the soft-biometric attack paper §III, Tables IV–IX).

The threat model of the paper: the attacker runs the privacy-enhancing method as a black box on their *own*
labelled data (the attacker database), intercepts a protected template, compares it with every database
template and infers the soft-biometric attribute from the labels of the most similar ones. In the evaluation
pipeline this database is exactly the training set a recognizer receives in ``fit(train, label)`` under the
``parrot`` scenario (the anonymized attacker set), with ``label`` the attribute name.

* ``any.similarity_attribute_attack``: the attack (majority vote, averaging, linearly and logarithmically
  weighted averaging of the n best scores; :func:`bioanon.metrics.similarity_attack_scores`);
* ``any.attribute_knn``, ``any.attribute_svm``: the machine-learning baselines of Table IV, trained on the
  attacker's labelled set in ``fit`` (unlike the identity recognizers, which train on the gallery in
  ``enroll``), so they infer an attribute of subjects they have never seen.

All three accept ``label="subject"`` too (then they are closed-set identifiers whose classes must occur in the
training data).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from ..errors import ParameterError, TableError, require_fitted
from ..methods import Comparator, Recognizer, ScoreMatrix, feature_view, fitted, labels_of, n_components_ok, param
from ..metrics import similarity_attack_scores
from .recognizers import (
    _N_COMPONENTS_HELP,
    DECLARED_COMPARATOR_HELP,
    UsesDeclaredComparator,
    _check_dim,
    _l2_normalize,
    _SpaceRecognizer,
    column_std,
    declared_comparator,
    scores_param,
    svc,
)
from .utility import _valid

__all__ = ["AttributeKnn", "AttributeSvm", "SimilarityAttributeAttack", "align_columns"]

_PAYLOADS = ("features", "imu", "pose", "image")
_BLOCK_ELEMENTS = 1 << 24  # probe × database similarities computed per block of at most this many entries


def align_columns(scores: np.ndarray, have: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Reorder score columns labelled ``have`` to the labels ``want``.

    A wanted label the scorer knows nothing about (absent from ``have``) gets each row's minimum minus one:
    finite, and never the prediction. Labels are matched by equality of their Python values."""
    scores = np.asarray(scores, dtype=np.float64)
    pos = {v: i for i, v in enumerate(np.asarray(have).tolist())}
    idx = np.array([pos.get(v, -1) for v in np.asarray(want).tolist()], dtype=np.intp)
    if scores.shape[1] == 0:
        return np.zeros((scores.shape[0], len(idx)))
    out = scores[:, np.maximum(idx, 0)]
    if (idx < 0).any():
        out[:, idx < 0] = scores.min(axis=1, keepdims=True) - 1.0
    return out


def _labelled(table: Any, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels, mask of non-null labels) of the label column."""
    y = labels_of(table, label)
    return y, _valid(y)


def _sorted_classes(y: np.ndarray) -> np.ndarray:
    return np.unique(y)


# ------------------------------------------------------------------------------------------------ similarity attack


@attrs.define(kw_only=True)
class SimilarityAttributeAttack(UsesDeclaredComparator, Recognizer):
    """Similarity-based soft-biometric attack: the attribute of the most similar attacker-database templates.

    The database is the attacker's own labelled samples, anonymized by the same (black-box) method.

    ``fit(train, label)`` stores the database: the training set's flattened payloads (centred or z-scored with
    statistics of the database itself, then L2-normalized for cosine similarity) and their ``label`` values
    (an attribute name; null labels are dropped). Under the ``parrot`` scenario the training set is the
    attacker's data passed through the same anonymizer, which is the paper's attacker database. Any table with
    the same payload shape can be attacked afterwards (cross-database use: the database and the targets may
    come from different data sets, and the targets need no labels).

    ``enroll(gallery, label)`` records the gallery's classes (the columns of the score matrix). It does *not*
    add the gallery to the database unless ``add_gallery`` is set: in the paper the attacker knows only their
    own data; adding labelled samples of the probes' own subjects would turn the attack into re-identification
    followed by a label look-up. Without ``fit`` the gallery is the database.

    ``score(probes)`` compares each probe with the database (``similarity``: cosine, or negated Euclidean
    distance; when the database's templates come from a protection that declares a comparator, e.g.
    ``any.pe_miu``, that comparator on the unstandardized templates: the paper's black-box attacker runs the
    protection comparator included; ``declared_comparator = false`` turns this off) and returns
    :func:`bioanon.metrics.similarity_attack_scores` of the ``n`` best scores
    (``strategy``: ``vote`` = count of each value among the n best overall, ``average`` / ``linear`` /
    ``log`` = (weighted) mean of the n best per value). ``n`` is capped at the database size (``vote``) or at
    the smallest number of database samples of a value (the others); the value used is ``n_used_``. An enrolled
    class absent from the database scores below every other class."""

    id: ClassVar[str] = "any.similarity_attribute_attack"
    payloads: ClassVar[tuple[str, ...]] = _PAYLOADS
    reference: ClassVar[str] = "soft-biometric §III-B, Tables V-IX"
    example_params: ClassVar[dict[str, Any]] = {"n": 3}

    strategy: str = param(
        "average",
        help="how the n best scores become a per-value confidence",
        choices=("vote", "average", "linear", "log"),
    )
    n: int = param(10, help="number of best scores (overall for vote, per attribute value otherwise)", low=1)
    similarity: str = param(
        "cosine", help="template comparator (euclidean: minus the distance)", choices=("cosine", "euclidean")
    )
    standardize: str = param(
        "center", help="normalization fitted on the database before comparing", choices=("none", "center", "zscore")
    )
    add_gallery: bool = param(False, help="also add the enrolled (labelled) gallery to the attacker database")
    payload: str = param("", help="payload column (default: the first supported one present)")
    declared_comparator: bool = param(True, help=DECLARED_COMPARATOR_HELP)

    mean_: np.ndarray | None = fitted()
    scale_: np.ndarray | None = fitted()
    database_: np.ndarray | None = fitted()
    db_labels_: np.ndarray | None = fitted()
    label_: str | None = fitted()
    shape_: tuple[int, ...] | None = fitted()
    classes_: np.ndarray | None = fitted()
    n_used_: int | None = fitted()
    comparator_: Comparator | None = fitted()

    def _raw_shape(self, table: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        """Templates as vectors (a fixed-shape payload flattened, else a trait plugin's default feature view of
        the payload, e.g. ``audio``: :func:`bioanon.methods.feature_view`) and their per-sample shape."""
        column, x = feature_view(table, self.payload or None, candidates=self.payloads, who=self.id)
        raw = table.payload(column)
        shape = tuple(raw.shape[1:]) if isinstance(raw, np.ndarray) else (x.shape[1],)
        if self.shape_ is not None and shape != self.shape_:
            raise TableError(
                f"{self.id}: payload {column!r} has sample shape {shape}, the attacker "
                f"database has {self.shape_}: templates must come from the same anonymizer"
            )
        return x, shape

    def _raw(self, table: Any) -> np.ndarray:
        return self._raw_shape(table)[0]

    def _prepare(self, x: np.ndarray) -> np.ndarray:
        if self.comparator_ is not None:  # the protection's comparator takes the templates as they are
            return x.astype(np.float32, copy=False)
        z = x.astype(np.float32, copy=True)
        if self.mean_ is not None:
            z -= self.mean_
        if self.scale_ is not None:
            z /= self.scale_
        return _l2_normalize(z).astype(np.float32) if self.similarity == "cosine" else z

    def fit(self, train: Any, label: str = "subject") -> SimilarityAttributeAttack:
        y, ok = _labelled(train, label)
        if not ok.any():
            raise TableError(f"{self.id}: the attacker database has no sample with a {label!r} value")
        self.shape_ = None
        x, self.shape_ = self._raw_shape(train)
        x = x[ok]
        self.comparator_ = declared_comparator(self, train)
        standardize = self.standardize if self.comparator_ is None else "none"
        self.mean_ = x.mean(axis=0, dtype=np.float64).astype(np.float32) if standardize != "none" else None
        if standardize == "zscore":
            scale = column_std(x).astype(np.float32)
            scale[scale < 1e-8] = 1.0
            self.scale_ = scale
        else:
            self.scale_ = None
        self.database_ = self._prepare(x)
        self.db_labels_ = y[ok]
        self.label_ = label
        self.classes_ = None
        return self

    def enroll(self, gallery: Any, label: str = "subject") -> SimilarityAttributeAttack:
        if self.database_ is None:
            self.fit(gallery, label)
        elif label != self.label_:
            raise ParameterError(self.id, "label", label, f"{self.label_!r}, the label of the attacker database")
        elif self.add_gallery:
            y, ok = _labelled(gallery, label)
            self.database_ = np.concatenate([self.database_, self._prepare(self._raw(gallery)[ok])])
            self.db_labels_ = np.concatenate([cast(np.ndarray, self.db_labels_), y[ok]])
        y, ok = _labelled(gallery, label)
        self.classes_ = _sorted_classes(y[ok])
        return self

    def similarities(self, probes: Any) -> np.ndarray:
        """Probe × database similarity matrix (higher = more alike)."""
        require_fitted(self, "database_", call="fit() on the attacker database", before="score()")
        q = self._prepare(self._raw(probes))
        db = cast(np.ndarray, self.database_)
        if self.comparator_ is not None:
            return self.comparator_(q, db)
        if self.similarity == "cosine":
            s: np.ndarray = q @ db.T
            return s
        q, db = q.astype(np.float64), db.astype(np.float64)  # the expansion cancels badly in float32
        d2 = (q * q).sum(1)[:, None] + (db * db).sum(1)[None, :] - 2.0 * (q @ db.T)
        minus_distance: np.ndarray = -np.sqrt(np.maximum(d2, 0.0))
        return minus_distance

    def _n(self) -> int:
        if self.strategy == "vote":
            return max(1, min(self.n, len(cast(np.ndarray, self.db_labels_))))
        _, counts = np.unique(cast(np.ndarray, self.db_labels_), return_counts=True)
        return max(1, min(self.n, int(counts.min())))

    def score(self, probes: Any) -> ScoreMatrix:
        require_fitted(self, "database_", call="fit() on the attacker database", before="score()")
        n = self.n_used_ = self._n()
        block = max(1, _BLOCK_ELEMENTS // max(len(cast(np.ndarray, self.database_)), 1))
        parts: list[np.ndarray] = []
        db_classes = _sorted_classes(cast(np.ndarray, self.db_labels_))
        for start in range(0, len(probes), block):  # memory-bounded; one block for small tables
            sub = probes if len(probes) <= block else probes.take(np.arange(start, min(start + block, len(probes))))
            conf, db_classes = similarity_attack_scores(
                self.similarities(sub), cast(np.ndarray, self.db_labels_), n, self.strategy
            )
            parts.append(conf)
        conf = np.concatenate(parts) if parts else np.zeros((0, len(db_classes)))
        classes = db_classes if self.classes_ is None else self.classes_
        return ScoreMatrix(align_columns(conf, db_classes, classes), classes, probes.sample_ids)


# ------------------------------------------------------------------------------------------ classifier baselines


_STANDARDIZE_HELP = (
    "z-score every feature (fitted on the training set), then rotate onto the principal components "
    "(SEBA's StandardScaler + PCA()); false (default): with n_components = 1.0 the classifier sees the features "
    "as they are, as scikit-learn's classifier alone"
)


def _preset_param(presets: dict[str, dict[str, Any]]) -> Any:
    """The ``preset`` parameter of an attribute classifier: ``"paper"`` (the declared defaults) or ``"seba"``."""
    return param(
        "paper",
        choices=tuple(presets),
        help="'paper': scikit-learn's defaults on the features as they are (the soft-biometric attack paper Table IV's "
        "'basic configurations'); 'seba': SEBA's pipeline (peers/seba.md 8.1: StandardScaler + PCA() + the "
        "classifier, 10-fold cross-validation keeping the best fold); fills the parameters left at their defaults",
        affects_output=False,
    )


@attrs.define(kw_only=True)
class _AttributeClassifier(_SpaceRecognizer):
    """Shared machinery of the baselines: ``fit(train, label)`` learns the feature space (none by default;
    standardization and PCA when asked) *and* trains the classifier on the labelled training set;
    ``enroll(gallery, label)`` records the gallery's classes (fitting on the gallery when ``fit`` was not
    called); ``score`` gives the classifier's scores in the enrolled classes' order (a class the classifier never
    saw scores below all others). ``cv_folds`` cross-validates the classifier on the labelled training set in
    ``fit`` (SEBA's cross-validated attacker; see :class:`~bioanon.builtin.recognizers.ClassifierOptions`).

    The feature space: with the defaults (``standardize = false``, ``n_components = 1.0``) there is none, the
    classifier is trained on the features as they are (no centring, scaling or rotation), as scikit-learn's
    classifier alone and the paper's "basic configurations without optimisation" (the soft-biometric attack paper
    §V-A, Table IV). ``standardize = true`` z-scores every feature and rotates onto all principal components
    (SEBA's ``Pipeline(StandardScaler, PCA(), classifier)``); ``n_components`` below 1.0 (a share of variance)
    or a count keeps the leading principal components of the centred (with ``standardize``, z-scored) features."""

    payloads: ClassVar[tuple[str, ...]] = _PAYLOADS

    n_components: int | float = param(
        1.0, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    standardize: bool = param(False, help=_STANDARDIZE_HELP)

    label_: str | None = fitted()
    model_classes_: np.ndarray | None = fitted()
    raw_dim_: int | None = fitted()  # the number of features, when the classifier sees them as they are

    def _as_they_are(self) -> bool:
        """True when no feature space is learned: no standardization and every component kept (1.0)."""
        return not self.standardize and isinstance(self.n_components, float) and self.n_components >= 1.0

    def fit(self, train: Any, label: str = "subject") -> _AttributeClassifier:
        y, ok = _labelled(train, label)
        if not ok.any():
            raise TableError(f"{self.id}: the training set has no sample with a {label!r} value")
        if self._as_they_are():
            x = self._x(train)
            self.space_, self.raw_dim_ = None, int(x.shape[1])
            z = x[ok]
        else:
            self.raw_dim_ = None
            super().fit(train.filter(ok) if not ok.all() else train, label)
            z = self.embed(train)[ok]
        classes, yi = np.unique(y[ok], return_inverse=True)
        self.model_classes_ = classes
        self.model_ = self._fit_model(z, yi, len(classes))
        self.label_ = label
        self.classes_ = None
        return self

    def embed(self, table: Any) -> np.ndarray:
        """The features the classifier sees: as they are (the defaults) or mapped through the fitted space."""
        if self.raw_dim_ is None:
            return super().embed(table)
        x = self._x(table)
        _check_dim(self, x, self.raw_dim_)
        return x

    def enroll(self, gallery: Any, label: str = "subject") -> _AttributeClassifier:
        if self.model_classes_ is None:
            self.fit(gallery, label)
        elif label != self.label_:
            raise ParameterError(self.id, "label", label, f"{self.label_!r}, the label it was trained on")
        y, ok = _labelled(gallery, label)
        self.classes_ = _sorted_classes(y[ok])
        return self

    def score(self, probes: Any) -> ScoreMatrix:
        require_fitted(self, "model_classes_", call="fit()", before="score()")
        model_classes = cast(np.ndarray, self.model_classes_)
        z = self.embed(probes)
        s = self._scores(z) if self.model_ is not None else np.zeros((len(z), 1))
        classes = model_classes if self.classes_ is None else self.classes_
        return ScoreMatrix(align_columns(s, model_classes, classes), classes, probes.sample_ids)


_SEBA = {"standardize": True, "n_components": 1.0, "cv_folds": 10, "keep": "best"}  # peers/seba.md 8.1

_KNN_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"standardize": False, "n_components": 1.0, "k": 5, "cv_folds": 0},
    "seba": {**_SEBA, "k": 3},
}


@attrs.define(kw_only=True)
class AttributeKnn(_AttributeClassifier):
    """k-nearest-neighbour attribute classifier trained on the attacker's labelled set (Table IV's kNN).

    ``fit`` stores the training set with its labels; scores are the shares of each class among the ``k``
    nearest training samples (``predict_proba``). The defaults are scikit-learn's
    (``KNeighborsClassifier()``: k = 5, Euclidean distance) on the features as they are, the paper's "basic
    configurations without optimisation"; ``standardize = true`` z-scores every feature and rotates onto all
    principal components first, ``n_components`` below 1.0 (or a count) keeps the leading ones. Presets
    (``preset``): ``"paper"`` (default) is exactly these defaults; ``"seba"`` SEBA's ``Pipeline(StandardScaler,
    PCA(), KNeighborsClassifier(3))`` cross-validated over 10 folds, keeping the best fold's estimator
    (``standardize = true``, ``k = 3``, ``cv_folds = 10``, ``keep = "best"``)."""

    id: ClassVar[str] = "any.attribute_knn"
    # 2: standardize = false with n_components = 1.0 means the features as they are (before: centred and
    # rotated), so results cached under version 1 with that setting are not reused
    version: ClassVar[str] = "2"
    reference: ClassVar[str] = "soft-biometric Table IV (kNN baseline)"
    presets: ClassVar[dict[str, dict[str, Any]]] = _KNN_PRESETS

    preset: str = _preset_param(_KNN_PRESETS)
    k: int = param(5, help="number of neighbours (scikit-learn's default)", low=1)
    metric: str = param(
        "euclidean", help="distance (scikit-learn's default: euclidean)", choices=("euclidean", "cosine")
    )
    scores: str = scores_param("proba")

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        from sklearn.neighbors import KNeighborsClassifier

        return KNeighborsClassifier(n_neighbors=min(self.k, len(z)), metric=self.metric).fit(z, y)


_SVM_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"standardize": False, "n_components": 1.0, "scores": "decision", "cv_folds": 0},
    "seba": {**_SEBA, "scores": "proba"},
}


@attrs.define(kw_only=True)
class AttributeSvm(_AttributeClassifier):
    """Support-vector attribute classifier trained on the attacker's labelled set (Table IV's SVMs).

    ``fit`` trains an SVC with the given kernel on the labelled training set. The defaults are scikit-learn's
    (``SVC(kernel=kernel)``: C = 1, gamma = 'scale', degree 3, coef0 0) on the features as they are (no
    standardization, no PCA), the paper's "basic configurations without optimisation"; ``standardize = true``
    z-scores every feature and rotates onto all principal components first, ``n_components`` below 1.0 (or a
    count) keeps the leading ones. Scores are its one-vs-rest
    decision function, or with ``scores = "proba"`` its Platt-scaled class probabilities
    (``SVC(probability=True)`` seeded with ``seed``). Presets (``preset``): ``"paper"`` (default) is exactly
    these defaults; ``"seba"`` SEBA's ``Pipeline(StandardScaler, PCA(), SVC(probability=True))``
    cross-validated over 10 folds, keeping the best fold's estimator (``standardize = true``,
    ``scores = "proba"``, ``cv_folds = 10``, ``keep = "best"``). Standardizing changes the result: gamma =
    'scale' and the distances then weigh every feature alike, which on templates whose features differ in
    spread can be markedly weaker (or stronger) than the paper's setting."""

    id: ClassVar[str] = "any.attribute_svm"
    # 2: standardize = false with n_components = 1.0 means the features as they are (before: centred and
    # rotated), so results cached under version 1 with that setting are not reused
    version: ClassVar[str] = "2"
    reference: ClassVar[str] = "soft-biometric Table IV (SVM baselines)"
    presets: ClassVar[dict[str, dict[str, Any]]] = _SVM_PRESETS

    preset: str = _preset_param(_SVM_PRESETS)
    kernel: str = param(
        "rbf", help="SVM kernel (scikit-learn's default: rbf)", choices=("rbf", "poly", "sigmoid", "linear")
    )
    c: float = param(1.0, help="SVM regularization C (scikit-learn's default)", low=0.0, low_inclusive=False)
    degree: int = param(3, help="degree of the poly kernel (scikit-learn's default)", low=1)
    seed: int = param(0, help="random seed (randomized PCA on very large data; Platt scaling with scores = proba)")
    scores: str = scores_param()

    def _train(self, z: np.ndarray, y: np.ndarray) -> Any:
        return svc(z, y, proba=self.scores == "proba", seed=self.seed, kernel=self.kernel, C=self.c, degree=self.degree)
