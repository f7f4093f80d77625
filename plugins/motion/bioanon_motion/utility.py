"""Utility measures for ``imu`` windows: how useful the anonymized motion data still is.

* ``motion.attribute_accuracy`` (task-based): an attribute classifier (e.g. activity or walking speed) trained
  on clear window features, applied to anonymized windows — the paper's utility protocol (§5.1.3). Wraps
  ``any.attribute_accuracy``.
* ``motion.correlation`` (paired): Pearson correlation over time between each clear window and its anonymized
  version, averaged over channels.
* ``motion.dtw`` (paired, lower is better): dynamic-time-warping distance between each clear window and its
  anonymized version, vectorized over the batch (:func:`~bioanon_motion.signals.dtw_distance`).

Paired measures align the anonymized rows to the clear ones by sample id and return one value per sample.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import AttributeAccuracy as _CoreAttributeAccuracy
from bioanon.api import DataError, UtilityMeasure, align, fitted, param, require_fitted

from .recognizers import features_table
from .signals import dtw_distance, pearson_per_channel

__all__ = ["AttributeAccuracy", "Correlation", "Dtw"]


@attrs.define(kw_only=True)
class AttributeAccuracy(UtilityMeasure):
    """Task-based utility: an attribute classifier (random forest by default) trained on clear window features
    and applied to anonymized windows; 1 where it predicts the window's true attribute, else 0 (the paper's
    protocol for MotionSense activity). Floor: the majority-class rate. Wraps ``any.attribute_accuracy`` on
    :func:`~bioanon_motion.signals.window_features`."""

    id: ClassVar[str] = "motion.attribute_accuracy"
    attribute_params: ClassVar[tuple[str, ...]] = ("attribute",)
    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    paired: ClassVar[bool] = False
    reference: ClassVar[str] = "utility-preserving §5.1.3"

    attribute: str = param("activity", help="attribute to predict (one of the table's attributes)")
    classifier: str = param(
        "random_forest", help="the attribute classifier", choices=("random_forest", "logistic_regression", "knn")
    )
    n_bands: int = param(8, help="spectral energy bands per channel in the window features", low=1, high=64)
    payload: str = param("", help="payload column (default: imu)")
    seed: int = param(0, help="random seed (random forest)")
    n_jobs: int = param(1, help="parallel jobs of the random forest (-1 = all cores)", affects_output=False)

    inner_: Any = fitted()

    def _features(self, table: Any) -> Any:
        """The table with window features as its payload."""
        return features_table(table, self.payload_column(table, self.payload or None), n_bands=self.n_bands)

    def fit(self, clear):
        """Train the attribute classifier on clear windows."""
        self.inner_ = _CoreAttributeAccuracy(
            attribute=self.attribute, classifier=self.classifier, seed=self.seed, n_jobs=self.n_jobs
        )
        self.inner_.fit(self._features(clear))
        return self

    def measure(self, original, anonymized) -> np.ndarray:
        """1 where the anonymized window's attribute is predicted right, else 0."""
        require_fitted(self, "inner_", call="fit(clear)", before="measure()")
        return self.inner_.measure(self._features(original), self._features(anonymized))

    def floor(self, table) -> float:
        """The majority-class rate."""
        return _CoreAttributeAccuracy(attribute=self.attribute).floor(table)


@attrs.define(kw_only=True)
class _PairedImu(UtilityMeasure):
    """Shared plumbing of the paired measures: clear and anonymized windows matched by sample id."""

    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    paired: ClassVar[bool] = True

    payload: str = param("", help="payload column (default: imu)")

    def _pair(self, original: Any, anonymized: Any) -> tuple[np.ndarray, np.ndarray]:
        """(clear windows, anonymized windows) aligned by sample id, of equal shape."""
        anonymized = align(original, anonymized)
        column = self.payload_column(original, self.payload or None)
        a, b = np.asarray(original.payload(column)), np.asarray(anonymized.payload(column))
        if a.shape != b.shape:
            raise DataError(
                f"{self.id}: clear windows {a.shape[1:]} and anonymized windows {b.shape[1:]} differ in "
                f"shape (e.g. motion.channel_removal with mode='drop'); a paired measure needs equal "
                f"shapes"
            )
        return a, b


@attrs.define(kw_only=True)
class Correlation(_PairedImu):
    """Pearson correlation over time between each clear window and its anonymized version, averaged over
    channels (1 = same shape up to offset and scale; 0 = unrelated). Floor 0."""

    id: ClassVar[str] = "motion.correlation"

    def measure(self, original, anonymized) -> np.ndarray:
        """Mean over channels of the per-channel correlation, per window."""
        a, b = self._pair(original, anonymized)
        return pearson_per_channel(a, b).mean(axis=1)


@attrs.define(kw_only=True)
class Dtw(_PairedImu):
    """Dynamic-time-warping distance between each clear window and its anonymized version (lower is better;
    0 = identical up to time warping).

    With ``standardize`` every channel is divided by its standard deviation on the clear data (learned in
    ``fit``), so accelerometer and gyroscope channels weigh alike; the distance is the Euclidean frame distance
    summed along the optimal warping path (within a Sakoe–Chiba ``band``), divided by 2 × window length.
    Floor: the mean distance between a clear window and another, randomly paired, clear window (what an
    unrelated signal scores). Computed batch-wise on the anti-diagonals — no per-pair Python loop."""

    id: ClassVar[str] = "motion.dtw"
    higher_is_better: ClassVar[bool] = False

    band: float = param(
        0.1,
        help="Sakoe-Chiba band as a share of the window length (1.0: unconstrained)",
        low=0.0,
        high=1.0,
        low_inclusive=False,
    )
    standardize: bool = param(True, help="divide every channel by its clear-data standard deviation")
    seed: int = param(0, help="random seed of the pairing that defines the floor")
    batch_size: int = param(512, help="windows per vectorized batch (bounds memory)", low=1, affects_output=False)

    std_: np.ndarray | None = fitted()

    def fit(self, clear):
        """Learn the per-channel standard deviation of the clear data."""
        column = self.payload_column(clear, self.payload or None)
        x = np.asarray(clear.payload(column))
        std = x.reshape(-1, x.shape[2]).std(axis=0)
        self.std_ = np.where(std > 1e-12, std, 1.0)
        return self

    def _distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """DTW distance of paired windows, in batches."""
        if self.standardize:
            std = (
                self.std_
                if self.std_ is not None and len(self.std_) == a.shape[2]
                else np.where(a.reshape(-1, a.shape[2]).std(axis=0) > 1e-12, a.reshape(-1, a.shape[2]).std(axis=0), 1.0)
            )
            a, b = a / std, b / std
        out = np.empty(len(a))
        for s in range(0, len(a), self.batch_size):  # batches bound the N × T × T cost matrices
            out[s : s + self.batch_size] = dtw_distance(
                a[s : s + self.batch_size], b[s : s + self.batch_size], self.band
            )
        return out

    def measure(self, original, anonymized) -> np.ndarray:
        """DTW distance per window (lower = more alike)."""
        a, b = self._pair(original, anonymized)
        return self._distance(a, b)

    def floor(self, table) -> float:
        """Mean DTW distance between randomly paired clear windows."""
        column = self.payload_column(table, self.payload or None)
        x = np.asarray(table.payload(column))
        if len(x) < 2:
            return float("nan")
        perm = np.random.default_rng(self.seed).permutation(len(x))
        other = np.empty(len(x), np.int64)
        other[perm] = np.roll(perm, 1)  # a derangement: every window meets another one
        return float(self._distance(x, x[other]).mean())
