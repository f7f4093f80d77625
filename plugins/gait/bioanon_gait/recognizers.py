"""Gait recognizers (attackers): SVM, random forest and k-NN on the paper's ``flatten`` / ``simple`` features.

Each is a composition: a :class:`~bioanon_gait.features.GaitFeatures` extractor (translation-invariant, sign-
fixed, fitted on the attacker's training set) followed by the core recognizer (``any.pca_svm``,
``any.random_forest``, ``any.knn``), whose standardization and PCA are also learned in ``fit`` on the
attacker's training set and whose classifier is trained in ``enroll`` on the gallery. So a parrot attacker,
trained on anonymized data, learns the feature space of the anonymized data (SEBA's attackers ignored the
attacker training set). SEBA's options (``cv_folds``, ``keep``, and ``scores`` where the classifier has
probabilities) are passed to the core recognizer (:class:`bioanon.api.ClassifierOptions`). The temporal CNN is in
:mod:`bioanon_gait.cnn`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs

from bioanon.api import (
    ClassifierOptions,
    FeatureRecognizer,
    NearestNeighbors,
    PcaSvm,
    RandomForest,
    fitted,
    n_components_ok,
    param,
    require_fitted,
    scores_param,
)

from .features import CENTERING_HELP, FEATURES_HELP, SIGNS_HELP, Centering, Features, GaitFeatures, Signs
from .skeleton import per_walk, poses

_REF = "false-sense §5.5 (SVM, random forest, k-NN on flatten and simple features)"


@attrs.define(kw_only=True)
class _GaitRecognizer(FeatureRecognizer, ClassifierOptions):
    """Gait features, then a core recognizer (built by ``inner_recognizer()``) on a ``features`` table."""

    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = _REF

    features: Features = param("flatten", help=FEATURES_HELP)
    centering: Centering = param("frame", help=CENTERING_HELP)
    n_pcs: int = param(1, help="principal pose directions in the simple features (the paper: the first)", low=1)
    signs: Signs = param("aligned", help=SIGNS_HELP)
    n_components: int | float = param(
        1.0,
        help="PCA of the classifier: share of variance in (0, 1] or a count "
        "(1.0: all components — best on UCalgary, 28 subjects)",
        check=n_components_ok,
        check_text="a float in (0, 1] or an int >= 1",
    )

    extractor_: GaitFeatures | None = fitted()

    def feature_table(self, table):
        """The table with its poses replaced by feature vectors (``features`` payload; ids, subjects and
        attributes kept)."""
        require_fitted(self, "extractor_", call="fit() or enroll()", before="feature_table()")
        return table.with_payload("features", per_walk(table, self.extractor_.transform), drop="pose")

    def fit_features(self, train) -> None:
        self.extractor_ = GaitFeatures(kind=self.features, centering=self.centering, n_pcs=self.n_pcs, signs=self.signs)
        self.extractor_.fit(poses(train))


@attrs.define(kw_only=True)
class GaitSvm(_GaitRecognizer):
    """SVM on gait features: translation-invariant ``flatten`` or ``simple`` features, standardization and
    PCA learned on the attacker's training set, a support vector machine trained on the enrolled subjects
    (the paper's default attacker SVM+flatten)."""

    id: ClassVar[str] = "gait.svm"

    kernel: Literal["linear", "rbf"] = param("linear", help="SVM kernel")
    c: float = param(1.0, help="SVM regularization C", low=0.0, low_inclusive=False)
    scores: str = scores_param()

    def inner_recognizer(self):
        return PcaSvm(kernel=self.kernel, c=self.c, n_components=self.n_components, **self.classifier_options())


@attrs.define(kw_only=True)
class GaitRandomForest(_GaitRecognizer):
    """Random forest on gait features (``flatten`` or ``simple``; PCA learned on the attacker's training set,
    the forest trained on the enrolled subjects; scores are vote shares)."""

    id: ClassVar[str] = "gait.random_forest"

    n_estimators: int = param(300, help="number of trees", low=1)
    seed: int = param(0, help="random seed")
    n_jobs: int = param(1, help="parallel jobs (-1 = all cores)", affects_output=False)
    scores: str = scores_param("proba")

    def inner_recognizer(self):
        return RandomForest(
            n_estimators=self.n_estimators,
            seed=self.seed,
            n_jobs=self.n_jobs,
            n_components=self.n_components,
            **self.classifier_options(),
        )


@attrs.define(kw_only=True)
class GaitKnn(_GaitRecognizer):
    """k-nearest neighbours on gait features (``flatten`` or ``simple``; PCA learned on the attacker's training
    set; a class's score is minus the mean distance to its k nearest enrolled samples)."""

    id: ClassVar[str] = "gait.knn"

    k: int = param(1, help="nearest enrolled samples per class averaged into its score", low=1)
    metric: Literal["euclidean", "cosine"] = param("euclidean", help="distance")

    def inner_recognizer(self):
        return NearestNeighbors(
            k=self.k, metric=self.metric, n_components=self.n_components, **self.classifier_options()
        )
