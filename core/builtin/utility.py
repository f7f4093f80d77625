"""Trait-agnostic utility measures: how useful the anonymized data still is.

Paired measures compare each anonymized sample with its clear original; the task-based measure trains a model
on clear data and scores it on anonymized data. ``measure(original, anonymized)`` aligns the anonymized rows to
the original's by ``sample_id`` (any row order; the id sets must be equal) and returns one value per sample in
the original's row order.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from ..errors import TableError, TooFewValuesError, require_fitted
from ..methods import UtilityMeasure, align, feature_matrix, fitted, param  # noqa: F401 -- align re-exported
from ..payloads import flatten_payload


def _valid(v: np.ndarray) -> np.ndarray:
    """True where an attribute value is not null (None/NaN)."""
    if v.dtype.kind == "f":
        known: np.ndarray = ~np.isnan(v)
        return known
    if v.dtype.kind == "O":
        return np.fromiter((x is not None and x == x for x in v), bool, count=len(v))
    return np.ones(len(v), bool)


@attrs.define(kw_only=True)
class _Paired(UtilityMeasure):
    """Per-sample comparison of flattened payloads; variable-length payloads (audio) are compared over their
    common length, one sample at a time."""

    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image", "audio")
    paired: ClassVar[bool] = True

    payload: str = param("", help="payload column (default: the first supported one present)")

    def measure(self, original: Any, anonymized: Any) -> np.ndarray:
        anonymized = align(original, anonymized)
        col = self.payload_column(original, self.payload or None)
        x, y = original.payload(col), anonymized.payload(col)
        if isinstance(x, list):
            return np.array(
                [
                    self._compare(a[None, : min(len(a), len(b))], b[None, : min(len(a), len(b))])[0]
                    for a, b in zip(x, y, strict=True)
                ],
                dtype=np.float64,
            )
        return self._compare(flatten_payload(x), flatten_payload(y))

    def _compare(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@attrs.define(kw_only=True)
class CosineSimilarity(_Paired):
    """Cosine similarity between each clear sample and its anonymized version (1 = same direction).

    Two all-zero samples count as identical (1), one all-zero sample as unrelated (0). Floor 0."""

    id: ClassVar[str] = "any.cosine_similarity"

    def _compare(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = x.astype(np.float64), y.astype(np.float64)
        nx, ny = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)
        den = nx * ny
        cos = np.einsum("ij,ij->i", x, y) / np.where(den > 0, den, 1.0)
        return np.where(den > 0, np.clip(cos, -1.0, 1.0), np.where((nx == 0) & (ny == 0), 1.0, 0.0))


@attrs.define(kw_only=True)
class Snr(_Paired):
    """Signal-to-noise ratio in dB of each anonymized sample against its clear original.

    ``10 log10(sum(x²) / sum((x − y)²))``, clipped to ±``max_db`` (identical samples give ``max_db``).
    Floor 0 dB (as much noise as signal)."""

    id: ClassVar[str] = "any.snr"

    max_db: float = param(100.0, help="cap of the SNR in dB (identical samples)", low=0.0, low_inclusive=False)

    def _compare(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = x.astype(np.float64), y.astype(np.float64)
        sig, noise = np.square(x).sum(axis=1), np.square(x - y).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            db = 10.0 * (np.log10(sig) - np.log10(noise))
        return np.clip(np.where(noise == 0, self.max_db, db), -self.max_db, self.max_db)


_CLASSIFIERS = ("random_forest", "logistic_regression", "knn")


@attrs.define(kw_only=True)
class AttributeAccuracy(UtilityMeasure):
    """Task-based utility: how well an attribute classifier trained on clear data works on anonymized data.

    ``fit(clear)`` trains ``classifier`` (on standardized flattened payloads, or a trait plugin's default feature
    view of a payload that cannot be flattened, e.g. ``audio``: :func:`bioanon.methods.feature_matrix`) to predict
    attribute ``attribute``; ``measure`` gives 1.0 where it predicts an anonymized sample's true (original) attribute
    and 0.0 where not (NaN where the original value is null). Floor: the majority-class rate."""

    id: ClassVar[str] = "any.attribute_accuracy"
    attribute_params: ClassVar[tuple[str, ...]] = ("attribute",)
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    paired: ClassVar[bool] = False
    example_params: ClassVar[dict[str, Any]] = {"attribute": "group"}

    attribute: str = param("", help="attribute to predict (required: one of the table's attributes)")
    classifier: str = param("random_forest", help="the attribute classifier", choices=_CLASSIFIERS)
    payload: str = param("", help="payload column (default: the first supported one present)")
    seed: int = param(0, help="random seed (random forest)")
    n_jobs: int = param(1, help="parallel jobs of the random forest (-1 = all cores)", affects_output=False)

    model_: Any = fitted()  # a fitted scikit-learn pipeline (untyped)

    def _labels(self, table: Any) -> np.ndarray:
        if not self.attribute:
            raise TableError(
                f"{self.id}: set the parameter 'attribute' to one of the table's attributes: {table.attribute_names}"
            )
        labels: np.ndarray = table.attribute(self.attribute)
        return labels

    def _x(self, table: Any) -> np.ndarray:
        return feature_matrix(table, self.payload or None, candidates=self.payloads, who=self.id)

    def fit(self, clear: Any) -> AttributeAccuracy:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.linear_model import LogisticRegression
        from sklearn.neighbors import KNeighborsClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        y = self._labels(clear)
        ok = _valid(y)
        if len(np.unique(y[ok].astype(str))) < 2:
            raise TooFewValuesError(
                f"{self.id}: attribute {self.attribute!r} needs at least 2 distinct values to train on"
            )
        clf = {
            "random_forest": lambda: RandomForestClassifier(
                n_estimators=200, random_state=self.seed, n_jobs=self.n_jobs
            ),
            "logistic_regression": lambda: LogisticRegression(max_iter=2000),
            "knn": lambda: KNeighborsClassifier(n_neighbors=5),
        }[self.classifier]()
        self.model_ = make_pipeline(StandardScaler(), clf).fit(self._x(clear)[ok], y[ok])
        return self

    def measure(self, original: Any, anonymized: Any) -> np.ndarray:
        require_fitted(self, "model_", call="fit(clear)", before="measure()")
        anonymized = align(original, anonymized)
        true = self._labels(original)
        x = self._x(anonymized)
        fitted_dim = getattr(self.model_, "n_features_in_", x.shape[1])
        if x.shape[1] != fitted_dim:
            raise TableError(
                f"{self.id}: anonymized samples have {x.shape[1]} values each, but the classifier was "
                f"fitted on clear samples of {fitted_dim} (payloads {anonymized.payload_names}); the "
                f"clear and anonymized tables must share a payload layout"
            )
        pred = self.model_.predict(x)
        return np.where(_valid(true), (pred == true).astype(np.float64), np.nan)

    def floor(self, table: Any) -> float:
        from ..metrics import majority_chance

        y = self._labels(table)
        return majority_chance(y[_valid(y)].astype(str))
