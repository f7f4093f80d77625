"""The plugin's recognizers (attackers): ordinary attrs classes deriving from bioanon's ``Recognizer``."""

from __future__ import annotations

from typing import ClassVar, cast

import attrs
import numpy as np

from bioanon.api import Recognizer, ScoreMatrix, fitted, param, require_fitted


@attrs.define(kw_only=True)
class NearestNeighbour(Recognizer):
    """1-nearest-neighbour identification: a class's score is minus the distance to its closest enrolled
    sample (Euclidean or cosine)."""

    id: ClassVar[str] = "example.nearest_neighbour"
    trait: ClassVar[str] = "example"
    payloads: ClassVar[tuple[str, ...]] = ("features",)

    metric: str = param("euclidean", help="distance between feature vectors", choices=("euclidean", "cosine"))

    gallery_: np.ndarray | None = fitted()
    gallery_labels_: np.ndarray | None = fitted()

    def _x(self, table) -> np.ndarray:
        x = table.payload("features").astype(np.float32)
        if self.metric == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return x

    def enroll(self, gallery, label: str = "subject"):
        self.gallery_ = self._x(gallery)
        self.gallery_labels_ = gallery.subjects if label == "subject" else gallery.attribute(label)
        return self

    def score(self, probes) -> ScoreMatrix:
        require_fitted(self, "gallery_", call="enroll()", before="score()")
        # set by enroll (require_fitted checked it; cast tells the type checker they are no longer None)
        gallery, labels = cast(np.ndarray, self.gallery_), cast(np.ndarray, self.gallery_labels_)
        q = self._x(probes)
        # squared distances probes × gallery, then the best (smallest) per class
        d = (q * q).sum(1)[:, None] - 2 * q @ gallery.T + (gallery**2).sum(1)[None, :]
        classes, inv = np.unique(labels, return_inverse=True)
        best = np.full((len(q), len(classes)), np.inf, dtype=np.float32)
        for c in range(len(classes)):  # loop over classes, vectorized over probes
            best[:, c] = d[:, inv == c].min(axis=1)
        return ScoreMatrix(-np.sqrt(np.maximum(best, 0)), classes, probes.sample_ids)
