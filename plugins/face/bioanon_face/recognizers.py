"""Face recognizers: eigenfaces (PCA + SVM on pixels), with opencv-contrib LBPH, and with dlib the papers' FR-KNN."""

from __future__ import annotations

import functools
import hashlib
import warnings
from collections import OrderedDict
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import PcaSvm, Recognizer, ScoreMatrix, fitted, labels_of, n_components_ok, param, require_fitted


@attrs.define(kw_only=True)
class Eigenfaces(PcaSvm):
    """Eigenfaces: PCA on the raw pixels (no per-pixel standardization), then an SVM on the enrolled classes.

    The core ``any.pca_svm`` restricted to the ``image`` payload, with face defaults: 0.95 of the variance,
    no standardization (the classic eigenface space), linear kernel. Scores are the SVM's one-vs-rest decision
    function."""

    id: ClassVar[str] = "face.eigenfaces"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "eigenfaces"

    n_components: int | float = param(
        0.95,
        help="PCA components: a share of the variance in (0, 1] or a count",
        check=n_components_ok,
        check_text="a float in (0, 1] or an int >= 1",
    )
    standardize: bool = param(False, help="z-score every pixel (fitted on the training set) before PCA")


# cv2.face (LBPH) is in the opencv-contrib wheels only; reinstalling repairs a plain OpenCV shadowing it
LBPH_INSTALL = "pip install --force-reinstall opencv-contrib-python-headless"


@attrs.define(kw_only=True)
class Lbph(Recognizer):
    """Local binary pattern histograms (OpenCV contrib's LBPH): chi-square distance of spatial LBP histograms.

    The score of a class is minus the smallest histogram distance to one of its enrolled images. Training-free;
    colour images are converted to grey. Needs ``opencv-contrib-python-headless``."""

    id: ClassVar[str] = "face.lbph"
    requires: ClassVar[dict[str, str]] = {"cv2.face": LBPH_INSTALL}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "lbph"

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

        if not hasattr(cv2, "face"):  # a plain OpenCV wheel installed over the contrib one
            from bioanon.api import MissingDependencyError

            raise MissingDependencyError(self.id, self.requires, "this OpenCV has no cv2.face")
        classes, y = np.unique(labels_of(gallery, label), return_inverse=True)
        self.classes_, self.labels_ = classes, y
        # cv2.face (opencv-contrib) is missing from OpenCV's type stubs
        m = cv2.face.LBPHFaceRecognizer_create(  # type: ignore[attr-defined]
            radius=self.radius,
            neighbors=self.neighbors,
            grid_x=self.grid[0],
            grid_y=self.grid[1],
        )
        m.train(self._grey(gallery), y.astype(np.int32))
        self.model_ = m
        return self

    def score(self, probes) -> ScoreMatrix:
        require_fitted(self, "model_", call="enroll()", before="score()")
        gallery = np.stack([np.asarray(h).ravel() for h in self.model_.getHistograms()]).astype(np.float64)
        probe_h = []
        import cv2

        for img in self._grey(probes):  # one histogram per image, computed by OpenCV
            tmp = cv2.face.LBPHFaceRecognizer_create(  # type: ignore[attr-defined]  # not in OpenCV's stubs
                radius=self.radius, neighbors=self.neighbors, grid_x=self.grid[0], grid_y=self.grid[1]
            )
            tmp.train([img], np.zeros(1, dtype=np.int32))
            probe_h.append(np.asarray(tmp.getHistograms()[0]).ravel())
        p = np.stack(probe_h).astype(np.float64)
        # chi-square distance (OpenCV's HISTCMP_CHISQR): sum (p - g)^2 / p over p > 0
        d = np.zeros((len(p), len(gallery)))
        for s in range(0, len(p), 64):
            a = p[s : s + 64, None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(a > 0, (a - gallery[None]) ** 2 / a, 0.0)
            d[s : s + 64] = t.sum(-1)
        classes = cast(np.ndarray, self.classes_)  # set with model_ by enroll()
        scores = np.full((len(p), len(classes)), -np.inf)
        for j in range(len(classes)):
            scores[:, j] = -d[:, self.labels_ == j].min(axis=1)
        return ScoreMatrix(scores, classes, probes.sample_ids)


DLIB_INSTALL = "pip install 'bioanon-face[dlib]'"


def _import_face_recognition_models() -> Any:
    with warnings.catch_warnings():  # it imports the deprecated pkg_resources
        warnings.simplefilter("ignore")
        import face_recognition_models
    return face_recognition_models


def _has_dlib() -> bool:
    """dlib and the pretrained models of ``face_recognition_models`` import (``bioanon-face[dlib]``)."""
    try:
        import dlib  # noqa: F401

        _import_face_recognition_models()
    except Exception:  # noqa: BLE001 - ImportError, or pkg_resources missing with setuptools >= 81
        return False
    return True


@functools.lru_cache(maxsize=1)
def _dlib_models() -> tuple[Any, Any, Any]:
    """(dlib, the 5-point shape predictor, the ResNet face recognition model), loaded once per process from the
    weights inside the ``face_recognition_models`` wheel."""
    try:
        import dlib

        frm = _import_face_recognition_models()
    except Exception as e:  # noqa: BLE001
        from bioanon.api import MissingDependencyError

        missing = DlibKnn.missing_requirements() or dict(DlibKnn.requires)  # found, but failed to import
        raise MissingDependencyError("face.dlib_knn", missing, f"{type(e).__name__}: {e}") from None
    return (
        dlib,
        dlib.shape_predictor(frm.pose_predictor_five_point_model_location()),
        dlib.face_recognition_model_v1(frm.face_recognition_model_location()),
    )


_DESCRIPTORS: OrderedDict[bytes, np.ndarray] = OrderedDict()  # image digest → dlib descriptor (LRU)
_DESCRIPTORS_MAX = 50_000  # 128 float32 each: at most ~26 MB


@attrs.define(kw_only=True)
class DlibKnn(Recognizer):
    """FR-KNN: dlib's pretrained ResNet face embeddings (128-D) and k-nearest-neighbour voting over the gallery.

    The papers' "fr-knn" (the Fantômas paper §7, [65] = the ``face_recognition`` library, embeddings from dlib
    [66]): every image is treated as a face crop — the face rectangle is the image with ``inset`` of its width
    and height cut from each side — dlib's 5-point shape predictor places the landmarks in it, and dlib's
    ``face_recognition_model_v1`` (a ResNet-34-like network trained on ~3 million faces; weights shipped in the
    ``face_recognition_models`` wheel, nothing is downloaded) maps the aligned 150×150 chip to a 128-D
    descriptor. ``fit`` learns nothing (the network is pretrained). ``enroll`` stores the gallery
    descriptors; a probe's ``k`` nearest gallery descriptors (Euclidean) vote with weights 1/distance, as in
    ``face_recognition``'s KNN example (``KNeighborsClassifier(weights="distance")``). Scores: a class's vote
    share where it got votes (in (0, 1]; the argmax is the KNN's decision), else minus the distance to its
    nearest enrolled descriptor (≤ 0), so every class is ranked. Grey images are replicated to RGB. Needs
    ``pip install 'bioanon-face[dlib]'``."""

    id: ClassVar[str] = "face.dlib_knn"
    # face_recognition_models imports pkg_resources (setuptools < 81, pinned by the extra)
    requires: ClassVar[dict[str, str]] = {
        "dlib": DLIB_INSTALL,
        "face_recognition_models": DLIB_INSTALL,
        "pkg_resources": DLIB_INSTALL,
    }
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = (
        "King, Dlib-ml, JMLR 2009; Geitgey, face_recognition (KNN classifier); "
        "fantomas §7 (fr-knn); seba App. B.3 (FR-KNN)"
    )

    k: int = param(
        1,
        help="gallery neighbours that vote (weighted by 1/distance); 0 = round(sqrt(gallery "
        "size)) as in face_recognition's KNN example",
        low=0,
    )
    inset: float = param(
        0.1,
        help="share of the image width/height cut from each side to form the face rectangle (0 = the whole image)",
        low=0.0,
        high=0.45,
    )
    batch_size: int = param(32, help="images per dlib call", low=1, affects_output=False)
    payload: str = param("", help="payload column (default: image)")

    classes_: np.ndarray | None = fitted()
    gallery_: np.ndarray | None = fitted()
    labels_: np.ndarray | None = fitted()

    def embed(self, table) -> np.ndarray:
        """(N, 128) float32 dlib face descriptors."""
        dlib, predictor, model = _dlib_models()
        x = table.payload(self.payload_column(table, self.payload or None))
        if x.dtype != np.uint8:
            x = np.clip(np.rint(x), 0, 255).astype(np.uint8)
        if x.shape[-1] == 1:
            x = np.repeat(x, 3, axis=-1)
        h, w = x.shape[1:3]
        dx, dy = int(round(self.inset * w)), int(round(self.inset * h))
        rect = dlib.rectangle(dx, dy, max(dx, w - 1 - dx), max(dy, h - 1 - dy))
        out = np.empty((len(x), 128), dtype=np.float32)
        # the network costs ~0.05-0.15 s per image on a CPU: descriptors of images seen before (the same gallery
        # scored in several scenarios) are reused from a per-process cache keyed by the image's bytes and rectangle
        salt = np.array([h, w, dx, dy], np.int64).tobytes()
        keys = [hashlib.blake2b(salt + im.tobytes(), digest_size=20).digest() for im in x]
        todo = [i for i, key in enumerate(keys) if key not in _DESCRIPTORS]
        for s in range(0, len(todo), self.batch_size):
            idx = todo[s : s + self.batch_size]
            imgs = [np.ascontiguousarray(x[i]) for i in idx]
            shapes = []
            for im in imgs:  # the landmark fit is per image in dlib's API (cheap next to the network)
                d = dlib.full_object_detections()
                d.append(predictor(im, rect))
                shapes.append(d)
            desc = model.compute_face_descriptor(imgs, shapes)
            for i, v in zip(idx, desc, strict=True):
                _DESCRIPTORS[keys[i]] = np.asarray(v[0], dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = _DESCRIPTORS[key]
            _DESCRIPTORS.move_to_end(key)
        while len(_DESCRIPTORS) > _DESCRIPTORS_MAX:
            _DESCRIPTORS.popitem(last=False)
        return out

    def enroll(self, gallery, label: str = "subject"):
        classes, y = np.unique(labels_of(gallery, label), return_inverse=True)
        order = np.argsort(y, kind="stable")
        self.classes_, self.labels_ = classes, y[order]
        self.gallery_ = self.embed(gallery)[order]
        return self

    def score(self, probes) -> ScoreMatrix:
        require_fitted(self, "gallery_", call="enroll()", before="score()")
        q = self.embed(probes).astype(np.float64)
        g = cast(np.ndarray, self.gallery_).astype(np.float64)
        classes, labels = cast(np.ndarray, self.classes_), cast(np.ndarray, self.labels_)  # set with gallery_
        d = np.sqrt(np.maximum((q * q).sum(1)[:, None] + (g * g).sum(1)[None, :] - 2.0 * (q @ g.T), 0.0))
        n_g, n_c = len(g), len(classes)
        k = min(n_g, self.k or max(1, int(round(np.sqrt(n_g)))))
        nn = np.argpartition(d, k - 1, axis=1)[:, :k]
        wts = 1.0 / np.maximum(np.take_along_axis(d, nn, axis=1), 1e-12)
        cells = (np.arange(len(q))[:, None] * n_c + labels[nn]).ravel()
        # weighted: float64 counts (numpy's stubs type every bincount as integer)
        votes = cast(np.ndarray, np.bincount(cells, weights=wts.ravel(), minlength=len(q) * n_c)).reshape(len(q), n_c)
        votes /= votes.sum(axis=1, keepdims=True)
        starts = np.flatnonzero(np.r_[True, np.diff(labels) != 0])
        nearest = np.minimum.reduceat(d, starts, axis=1)
        scores = np.where(votes > 0, votes, -nearest)
        return ScoreMatrix(scores, classes, probes.sample_ids)
