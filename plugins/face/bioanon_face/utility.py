"""Image-similarity utility of anonymized faces against the clear images: SSIM and PSNR (per sample)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import UtilityMeasure, param
from bioanon.errors import TableError


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
            raise TableError(f"{method.id}: {len(missing)} samples of the original are not in the anonymized "
                             f"table, e.g. {missing[:3]}")
        y = y[np.array([pos[s] for s in ids_o])]
    if x.shape != y.shape:
        raise TableError(f"{method.id}: image shapes differ: {x.shape[1:]} clear vs {y.shape[1:]} anonymized")
    return x, y


def ssim_batch(x: np.ndarray, y: np.ndarray, *, sigma: float = 1.5, data_range: float = 255.0,
               k1: float = 0.01, k2: float = 0.03) -> np.ndarray:
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
        p = 10.0 * np.log10(data_range ** 2 / mse)
    return np.minimum(p, cap)


@attrs.define(kw_only=True)
class Ssim(UtilityMeasure):
    """Structural similarity (SSIM) of each anonymized image to its clear image, 1 = identical.

    Gaussian-window SSIM (σ 1.5, 11×11, K1 0.01, K2 0.03, range 255), averaged over the image and its
    channels; vectorized over the batch with scipy.ndimage. Floor 0."""

    id: ClassVar[str] = "face.ssim"
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "Wang et al., Image quality assessment: from error visibility to structural similarity, 2004"

    sigma: float = param(1.5, help="standard deviation of the Gaussian window in pixels", low=0.0,
                         low_inclusive=False)
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
