"""Utility of anonymized faces: similarity to the clear images (SSIM, PSNR), face detectability (Haar
detection rate and confidence, the SEBA paper §9) and attribute accuracy on HOG features (per sample)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import AttributeAccuracy, TableError, UtilityMeasure, align, param


def _paired(method: UtilityMeasure, original: Any, anonymized: Any) -> tuple[np.ndarray, np.ndarray]:
    """The image arrays of both tables, anonymized rows matched to the original's by sample id."""
    column = method.payload_column(original, getattr(method, "payload", "") or None)
    x = original.payload(column)
    y = anonymized.payload(column)
    ids_o, ids_a = np.asarray(original.sample_ids), np.asarray(anonymized.sample_ids)
    if not np.array_equal(ids_o, ids_a):
        pos = {s: i for i, s in enumerate(ids_a)}
        missing = [s for s in ids_o if s not in pos]
        if missing:
            raise TableError(
                f"{method.id}: {len(missing)} samples of the original are not in the anonymized "
                f"table, e.g. {missing[:3]}"
            )
        y = y[np.array([pos[s] for s in ids_o])]
    if x.shape != y.shape:
        raise TableError(f"{method.id}: image shapes differ: {x.shape[1:]} clear vs {y.shape[1:]} anonymized")
    return x, y


def ssim_batch(
    x: np.ndarray, y: np.ndarray, *, sigma: float = 1.5, data_range: float = 255.0, k1: float = 0.01, k2: float = 0.03
) -> np.ndarray:
    """Mean SSIM per image (Wang et al. 2004), Gaussian window σ = ``sigma`` truncated at 3.5σ (11×11 for 1.5),
    reflect border, averaged over pixels and channels. x, y: (N, H, W, C) → (N,)."""
    from scipy.ndimage import gaussian_filter

    x = x.astype(np.float64)
    y = y.astype(np.float64)
    sig = (0.0, sigma, sigma, 0.0)

    def f(a):
        return gaussian_filter(a, sig, mode="reflect", truncate=3.5)

    mx, my = f(x), f(y)
    vx = f(x * x) - mx * mx
    vy = f(y * y) - my * my
    cxy = f(x * y) - mx * my
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return s.reshape(len(s), -1).mean(axis=1)


def psnr_batch(x: np.ndarray, y: np.ndarray, *, data_range: float = 255.0, cap: float = 100.0) -> np.ndarray:
    """PSNR per image in dB, capped at ``cap`` for identical images. x, y: (N, ...) → (N,)."""
    d = x.reshape(len(x), -1).astype(np.float64) - y.reshape(len(y), -1).astype(np.float64)
    mse = (d * d).mean(axis=1)
    with np.errstate(divide="ignore"):
        p = 10.0 * np.log10(data_range**2 / mse)
    return np.minimum(p, cap)


@attrs.define(kw_only=True)
class Ssim(UtilityMeasure):
    """Structural similarity (SSIM) of each anonymized image to its clear image, 1 = identical.

    Gaussian-window SSIM (σ 1.5, 11×11, K1 0.01, K2 0.03, range 255), averaged over the image and its
    channels; vectorized over the batch with scipy.ndimage. Floor 0."""

    id: ClassVar[str] = "face.ssim"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "ssim"

    sigma: float = param(1.5, help="standard deviation of the Gaussian window in pixels", low=0.0, low_inclusive=False)
    payload: str = param("", help="payload column (default: image)")

    def measure(self, original, anonymized) -> np.ndarray:
        x, y = _paired(self, original, anonymized)
        return ssim_batch(x, y, sigma=self.sigma)


@attrs.define(kw_only=True)
class Psnr(UtilityMeasure):
    """Peak signal-to-noise ratio of each anonymized image to its clear image, in dB (capped at ``cap`` for
    identical images). Floor 0 dB."""

    id: ClassVar[str] = "face.psnr"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)

    cap: float = param(100.0, help="value for identical images (dB)", low=0.0, low_inclusive=False)
    payload: str = param("", help="payload column (default: image)")

    def measure(self, original, anonymized) -> np.ndarray:
        x, y = _paired(self, original, anonymized)
        return psnr_batch(x, y, cap=self.cap)


# ------------------------------------------------------------------------------------------------ detectability


@attrs.define(kw_only=True)
class _Detectability(UtilityMeasure):
    """Runs OpenCV's frontal-face Haar cascade on the anonymized images (:func:`bioanon_face.detect.detect_faces`)."""

    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    paired: ClassVar[bool] = False

    scale_factor: float = param(
        1.1, help="scale step of the cascade's image pyramid", low=1.0, low_inclusive=False, high=2.0
    )
    min_neighbors: int = param(3, help="overlapping detections needed to keep a face (higher = stricter)", low=0)
    min_face: float = param(
        0.3, help="smallest face searched, as a share of the image's shorter side", low=0.0, high=1.0
    )
    min_side: int = param(80, help="images whose shorter side is below this (px) are enlarged to it first", low=24)
    payload: str = param("", help="payload column (default: image)")

    def _detections(self, original, anonymized):
        from .detect import detect_faces

        anonymized = align(original, anonymized)
        x = anonymized.payload(self.payload_column(anonymized, self.payload or None))
        return detect_faces(
            x,
            scale_factor=self.scale_factor,
            min_neighbors=self.min_neighbors,
            min_face=self.min_face,
            min_side=self.min_side,
        )


@attrs.define(kw_only=True)
class DetectionRate(_Detectability):
    """Face detectability: 1 where OpenCV's Haar face detector still finds a face in the anonymized image, else 0.

    The mean is the share of anonymized images with a detectable face — a naturalness proxy (the SEBA paper §5.2:
    a detector trained on natural images that still finds a face suggests the image looks natural). Frontal-face
    cascade ``haarcascade_frontalface_default`` with scale step ``scale_factor`` and ``min_neighbors``; images
    with a shorter side below ``min_side`` are enlarged first. Floor 0 (no face found anywhere)."""

    id: ClassVar[str] = "face.detection_rate"
    reference: ClassVar[str] = "Viola & Jones 2001 (OpenCV Haar cascade); seba §5.2, §9"

    def measure(self, original, anonymized) -> np.ndarray:
        return self._detections(original, anonymized).found.astype(np.float64)


@attrs.define(kw_only=True)
class DetectionConfidence(_Detectability):
    """Face detector confidence per anonymized image: the Haar cascade's level weight of its best face, 0 where none.

    SEBA's naturalness utility (the SEBA paper §9: the mean detector confidence over the anonymized images,
    zero where no face is detected). The confidence is OpenCV's ``detectMultiScale3(...,
    outputRejectLevels=True)`` level weight — the summed weak-classifier outputs of the cascade's last stage
    — of the highest-weighted detection (negative weights count as 0). Typical clear ORL faces score about
    6–10. Floor 0."""

    id: ClassVar[str] = "face.detection_confidence"
    reference: ClassVar[str] = "Viola & Jones 2001 (OpenCV Haar cascade); seba §9"

    def measure(self, original, anonymized) -> np.ndarray:
        return self._detections(original, anonymized).confidence


# ------------------------------------------------------------------------------------------------ attributes


def hog_features(x: np.ndarray, *, cell: int = 8, bins: int = 9) -> np.ndarray:
    """Histograms of oriented gradients (Dalal & Triggs 2005) of grey images, vectorized over the batch.

    x: (N, H, W) → (N, D) float32. Central-difference gradients, unsigned orientation in ``bins`` bins with
    linear interpolation between the two nearest bins, magnitude-weighted cell histograms of ``cell``×``cell``
    pixels, 2×2-cell blocks (stride one cell) normalized by L2-Hys (clip 0.2)."""
    x = x.astype(np.float32)
    n, h, w = x.shape
    gx = np.zeros_like(x)
    gy = np.zeros_like(x)
    gx[:, :, 1:-1] = x[:, :, 2:] - x[:, :, :-2]
    gy[:, 1:-1, :] = x[:, 2:, :] - x[:, :-2, :]
    ch, cw = h // cell, w // cell
    gx, gy = gx[:, : ch * cell, : cw * cell], gy[:, : ch * cell, : cw * cell]
    mag = np.hypot(gx, gy)
    pos = np.mod(np.degrees(np.arctan2(gy, gx)), 180.0) / (180.0 / bins) - 0.5
    lo = np.floor(pos)
    w_hi = (pos - lo).astype(np.float32)
    lo = lo.astype(np.int64) % bins
    hi = (lo + 1) % bins
    hist = np.empty((n, ch, cw, bins), dtype=np.float32)
    for b in range(bins):  # a loop over the bins, vectorized over images and pixels
        wb = mag * ((lo == b) * (1.0 - w_hi) + (hi == b) * w_hi)
        hist[..., b] = wb.reshape(n, ch, cell, cw, cell).sum(axis=(2, 4))
    if ch >= 2 and cw >= 2:
        blocks = np.concatenate([hist[:, :-1, :-1], hist[:, :-1, 1:], hist[:, 1:, :-1], hist[:, 1:, 1:]], axis=-1)
    else:
        blocks = hist
    eps = 1e-3
    blocks = blocks / np.sqrt((blocks * blocks).sum(-1, keepdims=True) + eps)
    blocks = np.minimum(blocks, 0.2)
    blocks = blocks / np.sqrt((blocks * blocks).sum(-1, keepdims=True) + eps)
    return blocks.reshape(n, -1)


def _feature_size_ok(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) and v >= 8 for v in value)


@attrs.define(kw_only=True)
class FaceAttributeAccuracy(AttributeAccuracy):
    """Task-based utility: accuracy of a face-attribute classifier (HOG features) trained on clear images.

    ``fit(clear)`` converts the clear images to grey, resizes them to ``feature_size`` (INTER_AREA), takes
    histograms of oriented gradients (``cell``-pixel cells, 9 orientations, 2×2-cell L2-Hys blocks) and
    trains ``classifier`` (standardized features) to predict attribute ``attribute`` (e.g. expression,
    glasses, CelebA's ``Smiling``); ``measure`` gives 1.0 where it predicts an anonymized image's original
    attribute, 0.0 where not (NaN where the original value is null). Floor: the majority-class rate. The core
    ``any.attribute_accuracy`` on raw pixels barely beats chance on expressions that move with face geometry
    (face.synthetic's smile: ≈ 0.6 with chance ≈ 0.5); gradient histograms find them (≈ 0.85)."""

    id: ClassVar[str] = "face.attribute_accuracy"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "Dalal & Triggs, Histograms of oriented gradients for human detection, 2005"
    example_params: ClassVar[dict] = {"attribute": "group"}

    classifier: str = param(
        "logistic_regression", help="the attribute classifier", choices=("random_forest", "logistic_regression", "knn")
    )
    feature_size: tuple[int, int] = param(
        (64, 64),
        help="(height, width) the images are resized to for the features",
        check=_feature_size_ok,
        check_text="two integers >= 8",
    )
    cell: int = param(8, help="HOG cell side in pixels", low=2, high=32)

    def _x(self, table) -> np.ndarray:
        from .detect import grey
        from .imageio import to_batch

        x = table.payload(self.payload_column(table, self.payload or None))
        g = to_batch(grey(x[..., 0] if x.shape[-1] == 1 else x), self.feature_size, 1)[..., 0]
        return hog_features(g, cell=self.cell)
