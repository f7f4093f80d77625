"""Trait-agnostic recognizers that work on flattened payloads."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from ..methods import Recognizer, ScoreMatrix, fitted, labels_of, param
from ..payloads import flatten_payload


def _l2_normalize(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


@attrs.define(kw_only=True)
class CosineNearestCentroid(Recognizer):
    """Cosine similarity to each class's mean template (training-free; ``fit`` learns the centering).

    Flattened payloads are centered by the training mean (when fitted) and L2-normalized; each class's
    template is the normalized mean of its enrolled samples."""

    id: ClassVar[str] = "any.cosine_centroid"
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    has_embedding: ClassVar[bool] = True

    center: bool = param(True, help="subtract the training mean before normalizing")
    payload: str = param("", help="payload column (default: the first supported one present)")

    mean_: np.ndarray | None = fitted()
    classes_: np.ndarray | None = fitted()
    templates_: np.ndarray | None = fitted()

    def _x(self, table) -> np.ndarray:
        return flatten_payload(table.payload(self.payload_column(table, self.payload or None)))

    def fit(self, train, label: str = "subject"):
        self.mean_ = self._x(train).mean(axis=0) if self.center else None
        return self

    def embed(self, table) -> np.ndarray:
        x = self._x(table)
        if self.center:
            x = x - (self.mean_ if self.mean_ is not None else x.mean(axis=0))
        return _l2_normalize(x)

    def enroll(self, gallery, label: str = "subject"):
        if self.center and self.mean_ is None:
            self.fit(gallery, label)
        e = self.embed(gallery)
        y = labels_of(gallery, label)
        classes, inv = np.unique(y, return_inverse=True)
        sums = np.zeros((len(classes), e.shape[1]), dtype=np.float64)
        np.add.at(sums, inv, e)
        self.classes_, self.templates_ = classes, _l2_normalize(sums).astype(np.float32)
        return self

    def score(self, probes) -> ScoreMatrix:
        if self.templates_ is None:
            raise RuntimeError(f"{self.id}: enroll() before score()")
        return ScoreMatrix(self.embed(probes) @ self.templates_.T, self.classes_, probes.sample_ids)
