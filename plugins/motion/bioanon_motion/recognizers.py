"""Attackers on ``imu`` windows: the core's generic recognizers on hand-crafted window features, and a small
1-D CNN trained from scratch (:mod:`bioanon_motion.cnn`).

The feature recognizers compose a core recognizer: every table they get is turned into a ``features`` table
(:func:`~bioanon_motion.signals.window_features`: per-channel statistics, spectral band energies, gait
periodicity, cross-channel correlation — same sample ids, subjects and attributes), which is handed to the core
method through its public ``fit`` / ``enroll`` / ``score`` contract:

* ``motion.random_forest`` → ``any.random_forest`` (the paper's identity and attribute model for MotionSense);
* ``motion.svm`` → ``any.pca_svm``;
* ``motion.lda`` → ``any.lda_cosine`` (a learned embedding: the strongest parrot attacker);
* ``motion.knn`` → ``any.knn``.

SEBA's options (``cv_folds``, ``keep``, and ``scores`` where the classifier has probabilities) are passed to the
core recognizer (:class:`bioanon.api.ClassifierOptions`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import (
    ClassifierOptions,
    FeatureRecognizer,
    LdaCosine,
    NearestNeighbors,
    PcaSvm,
    RandomForest,
    n_components_ok,
    param,
    scores_param,
)

from .signals import sample_rate_of, window_features

__all__ = ["FeaturesKnn", "FeaturesLda", "FeaturesRf", "FeaturesSvm", "features_table"]


_N_COMPONENTS_HELP = "PCA components of the features: a share of variance in (0, 1] or a count >= 1"


def features_table(table: Any, column: str = "imu", *, n_bands: int = 8, sample_rate: float = 0.0) -> Any:
    """The table with its ``imu`` payload replaced by window features (payload ``features``, float32 F)."""
    x = np.asarray(table.payload(column))
    feats = window_features(x, sample_rate_of(table, sample_rate), n_bands)
    return table.with_payload("features", feats, drop=column if column != "features" else None)


@attrs.define(kw_only=True)
class _FeatureRecognizer(FeatureRecognizer, ClassifierOptions):
    """Window features → a core recognizer (``inner_recognizer``), through its public contract."""

    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    has_embedding: ClassVar[bool] = True

    n_bands: int = param(8, help="spectral energy bands per channel (0 Hz to Nyquist)", low=1, high=64)
    sample_rate: float = param(0.0, help="sample rate in Hz (0: from the table's metadata)", low=0.0)
    payload: str = param("", help="payload column (default: imu)")

    def feature_table(self, table: Any) -> Any:
        """The ``features`` table the inner recognizer sees."""
        column = self.payload_column(table, self.payload or None)
        return features_table(table, column, n_bands=self.n_bands, sample_rate=self.sample_rate)


@attrs.define(kw_only=True)
class FeaturesRf(_FeatureRecognizer):
    """Random forest on window features (the paper's model for MotionSense identity and activity).

    Window features (per-channel statistics, band energies, periodicity, channel correlations) are
    standardized and projected on their principal components (learned in ``fit`` on the attacker's training
    set; ``n_components=1.0`` keeps them all), then ``enroll`` trains the forest on the gallery; scores are
    class vote shares. Wraps ``any.random_forest``."""

    id: ClassVar[str] = "motion.random_forest"
    reference: ClassVar[str] = "utility-preserving §5.1.3 (random forest on MotionSense)"

    n_estimators: int = param(300, help="number of trees", low=1)
    max_features: str = param("sqrt", help="features considered per split", choices=("sqrt", "log2", "all"))
    n_components: int | float = param(
        1.0, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    seed: int = param(0, help="random seed")
    n_jobs: int = param(1, help="parallel jobs (-1 = all cores)", affects_output=False)
    scores: str = scores_param("proba")

    def inner_recognizer(self):
        """A fresh core recognizer with this method's parameters."""
        return RandomForest(
            n_estimators=self.n_estimators,
            max_features=self.max_features,
            n_components=self.n_components,
            seed=self.seed,
            n_jobs=self.n_jobs,
            **self.classifier_options(),
        )


@attrs.define(kw_only=True)
class FeaturesSvm(_FeatureRecognizer):
    """Support vector machine on window features (standardization + PCA learned in ``fit``, the SVM trained on
    the gallery in ``enroll``; scores: one-vs-rest decision function). Wraps ``any.pca_svm``."""

    id: ClassVar[str] = "motion.svm"

    kernel: str = param("rbf", help="SVM kernel", choices=("linear", "rbf"))
    c: float = param(10.0, help="SVM regularization C", low=0.0, low_inclusive=False)
    n_components: int | float = param(
        0.99, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    seed: int = param(0, help="random seed (randomized PCA on very large data; Platt scaling with scores = proba)")
    scores: str = scores_param()

    def inner_recognizer(self):
        """A fresh core recognizer with this method's parameters."""
        return PcaSvm(
            kernel=self.kernel, c=self.c, n_components=self.n_components, seed=self.seed, **self.classifier_options()
        )


@attrs.define(kw_only=True)
class FeaturesLda(_FeatureRecognizer):
    """PCA + LDA embedding of window features learned on the labelled training set, cosine to the enrolled
    class centroids (a learned feature space: trained on anonymized windows it finds the identity they still
    carry — the parrot attacker). Wraps ``any.lda_cosine``."""

    id: ClassVar[str] = "motion.lda"

    n_components: int | float = param(
        0.99, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )
    lda_dims: int = param(0, help="LDA dimensions (0 = all, classes - 1)", low=0)
    shrinkage: float = param(0.05, help="shrink the within-class scatter towards a scaled identity", low=0.0, high=1.0)

    def inner_recognizer(self):
        """A fresh core recognizer with this method's parameters."""
        return LdaCosine(
            n_components=self.n_components,
            lda_dims=self.lda_dims,
            shrinkage=self.shrinkage,
            **self.classifier_options(),
        )


@attrs.define(kw_only=True)
class FeaturesKnn(_FeatureRecognizer):
    """k-nearest-neighbour matching of window features (standardization + PCA learned in ``fit``; the score of
    a class is minus the mean distance to its k nearest enrolled windows). Wraps ``any.knn``."""

    id: ClassVar[str] = "motion.knn"

    k: int = param(1, help="nearest enrolled windows per class averaged into its score", low=1)
    metric: str = param("euclidean", help="distance", choices=("euclidean", "cosine"))
    n_components: int | float = param(
        0.99, help=_N_COMPONENTS_HELP, check=n_components_ok, check_text="a float in (0, 1] or an int >= 1"
    )

    def inner_recognizer(self):
        """A fresh core recognizer with this method's parameters."""
        return NearestNeighbors(
            k=self.k, metric=self.metric, n_components=self.n_components, **self.classifier_options()
        )
