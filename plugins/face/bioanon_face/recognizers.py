"""Face recognizers: eigenfaces (PCA + SVM on pixels) and, with opencv-contrib, LBPH."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import Recognizer, ScoreMatrix, fitted, param
from bioanon.builtin.recognizers import PcaSvm
from bioanon.methods import n_components_ok
from bioanon.methods import labels_of


@attrs.define(kw_only=True)
class Eigenfaces(PcaSvm):
    """Eigenfaces: PCA on the raw pixels (no per-pixel standardization), then an SVM on the enrolled classes.

    The core ``any.pca_svm`` restricted to the ``image`` payload, with face defaults: 0.95 of the variance,
    no standardization (the classic eigenface space), linear kernel. Scores are the SVM's one-vs-rest decision
    function."""

    id: ClassVar[str] = "face.eigenfaces"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "Turk & Pentland, Eigenfaces for recognition, 1991"

    n_components: int | float = param(0.95, help="PCA components: a share of the variance in (0, 1] or a count",
                                      check=n_components_ok, check_text="a float in (0, 1] or an int >= 1")
    standardize: bool = param(False, help="z-score every pixel (fitted on the training set) before PCA")


def _has_lbph() -> bool:
    try:
        import cv2

        return hasattr(cv2, "face") and hasattr(cv2.face, "LBPHFaceRecognizer_create")
    except ImportError:  # pragma: no cover
        return False


@attrs.define(kw_only=True)
class Lbph(Recognizer):
    """Local binary pattern histograms (OpenCV contrib's LBPH): chi-square distance of spatial LBP histograms.

    The score of a class is minus the smallest histogram distance to one of its enrolled images. Training-free;
    colour images are converted to grey. Needs ``opencv-contrib-python-headless``."""

    id: ClassVar[str] = "face.lbph"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "Ahonen, Hadid & Pietikäinen, Face description with local binary patterns, 2006"

    radius: int = param(1, help="LBP radius", low=1)
    neighbors: int = param(8, help="LBP sampling points", low=1, high=32)
    grid: tuple[int, int] = param((8, 8), help="histogram cells (x, y)", low=1)
    payload: str = param("", help="payload column (default: image)")

    classes_: np.ndarray | None = fitted()
    model_: Any = fitted()
    labels_: np.ndarray | None = fitted()

    def _grey(self, table) -> list[np.ndarray]:
        x = table.payload(self.payload_column(table, self.payload or None))
        if x.shape[-1] == 3:
            g = np.rint(x.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32))
            x = np.clip(g, 0, 255).astype(np.uint8)
        else:
            x = x[..., 0]
        return list(np.ascontiguousarray(x))

    def enroll(self, gallery, label: str = "subject"):
        import cv2

        classes, y = np.unique(labels_of(gallery, label), return_inverse=True)
        self.classes_, self.labels_ = classes, y
        m = cv2.face.LBPHFaceRecognizer_create(radius=self.radius, neighbors=self.neighbors,
                                               grid_x=self.grid[0], grid_y=self.grid[1])
        m.train(self._grey(gallery), y.astype(np.int32))
        self.model_ = m
        return self

    def score(self, probes) -> ScoreMatrix:
        if self.model_ is None:
            raise RuntimeError(f"{self.id}: enroll() before score()")
        gallery = np.stack([np.asarray(h).ravel() for h in self.model_.getHistograms()]).astype(np.float64)
        probe_h = []
        import cv2

        for img in self._grey(probes):  # one histogram per image, computed by OpenCV
            tmp = cv2.face.LBPHFaceRecognizer_create(radius=self.radius, neighbors=self.neighbors,
                                                     grid_x=self.grid[0], grid_y=self.grid[1])
            tmp.train([img], np.zeros(1, dtype=np.int32))
            probe_h.append(np.asarray(tmp.getHistograms()[0]).ravel())
        p = np.stack(probe_h).astype(np.float64)
        # chi-square distance (OpenCV's HISTCMP_CHISQR): sum (p - g)^2 / p over p > 0
        d = np.zeros((len(p), len(gallery)))
        for s in range(0, len(p), 64):
            a = p[s:s + 64, None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(a > 0, (a - gallery[None]) ** 2 / a, 0.0)
            d[s:s + 64] = t.sum(-1)
        scores = np.full((len(p), len(self.classes_)), -np.inf)
        for j in range(len(self.classes_)):
            scores[:, j] = -d[:, self.labels_ == j].min(axis=1)
        return ScoreMatrix(scores, self.classes_, probes.sample_ids)
