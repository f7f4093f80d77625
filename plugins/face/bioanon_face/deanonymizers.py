"""Face de-anonymizers on the ``image`` payload (uint8 N×H×W×C in and out), learned on attacker pairs.

The Fantômas paper §6.2 and Table II: the classic, specialized reversals the paper compares its general model
with — re-sampling (linear/bicubic interpolation with a learned intermediate resolution), Wiener and
Richardson–Lucy deconvolution (a learned Gaussian PSF), wavelet denoising (BayesShrink/VisuShrink), neighbour
interpolation of DP Snow's grey pixels and the exact inversion of a learned fixed permutation. Every
``fit(clear, anonymized)`` pairs the attacker's images by sample id and chooses its free parameters to minimize
the mean squared error to the clear images (the paper chooses by SSIM). Every ``transform`` is vectorized over
the batch (OpenCV on stacked channels, batched FFTs, batched wavelet transforms). The general learned model
(``face.fantomas``) lives in :mod:`.fantomas`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    Deanonymizer,
    NotFittedError,
    TableError,
    fitted,
    paired_payloads,
    param,
    require_fitted,
    restore_dtype,
)

__all__ = [
    "LearnedPermutation",
    "NeighbourInterpolation",
    "ResampleInversion",
    "RichardsonLucy",
    "WaveletDenoise",
    "Wiener",
    "paired_images",
    "resize_batch",
]

_INTERP = {"linear": 1, "cubic": 2, "area": 3}  # cv2.INTER_* values (cv2 imported lazily)


# --------------------------------------------------------------------------------------------------- helpers


def _images(method: Deanonymizer, table: Any, column: str | None = None) -> tuple[str, np.ndarray]:
    column = column or method.payload_column(table, getattr(method, "payload", "") or None)
    x = table.payload(column)
    if not isinstance(x, np.ndarray) or x.ndim != 4:
        raise TableError(
            f"{method.id}: payload {column!r} must be N×H×W×C images, got "
            f"{getattr(x, 'shape', 'variable-length records')}"
        )
    return column, x


def paired_images(method: Deanonymizer, clear: Any, anonymized: Any) -> tuple[str, np.ndarray, np.ndarray]:
    """(column, clear, anonymized): the images of the samples in both tables, matched by sample id, as float32
    N×H×W×C arrays in grey levels."""
    column, xa = _images(method, anonymized)
    _, xc = _images(method, clear, column)
    if xa.shape[1:] != xc.shape[1:]:
        raise TableError(
            f"{method.id}: clear images {xc.shape[1:]} and anonymized images {xa.shape[1:]} of "
            f"payload {column!r} differ in shape; pairs must have one shape"
        )
    y, x = paired_payloads(clear, anonymized, column)
    return column, y.reshape((len(y), *xc.shape[1:])), x.reshape((len(x), *xa.shape[1:]))


def _subsample(n: int, max_pairs: int, seed: int) -> np.ndarray:
    """Seeded indices of at most ``max_pairs`` of ``n`` pairs (all of them, in order, when few)."""
    if max_pairs <= 0 or n <= max_pairs:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_pairs, replace=False))


def resize_batch(x: np.ndarray, size: tuple[int, int], interpolation: str = "linear") -> np.ndarray:
    """Resize an N×H×W×C batch to ``size`` = (height, width) with OpenCV, many images per call (stacked as
    channels: up to 512 for linear/cubic, 4 for area, OpenCV's limits). Returns float32."""
    import cv2

    x = np.asarray(x, dtype=np.float32)
    n, h, w, c = x.shape
    th, tw = int(size[0]), int(size[1])
    if (h, w) == (th, tw):
        return x.copy()
    flag = _INTERP[interpolation]
    per = max(1, (4 if flag == cv2.INTER_AREA else 512) // c)
    out = np.empty((n, th, tw, c), dtype=np.float32)
    for s in range(0, n, per):
        part = x[s : s + per]
        k = len(part)
        stacked = np.ascontiguousarray(part.transpose(1, 2, 0, 3).reshape(h, w, k * c))
        r = cv2.resize(stacked, (tw, th), interpolation=flag).reshape(th, tw, k, c)
        out[s : s + k] = r.transpose(2, 0, 1, 3)
    return out


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((np.asarray(a, np.float32) - b) ** 2))


_PAYLOAD: dict[str, Any] = dict(help="payload column (default: image)")
_MAX_PAIRS: dict[str, Any] = dict(
    help="attacker pairs (seeded subsample) used to choose the parameters (0: all)", low=0
)


@attrs.define(kw_only=True)
class _FaceDeanonymizer(Deanonymizer):
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "fantomas §6.2, Table II"

    payload: str = param("", **_PAYLOAD)

    column_: str | None = fitted()
    shape_: tuple | None = fitted()  # (H, W, C) of the fitting pairs
    train_mse_: float | None = fitted()  # MSE (grey levels²) of the fitted setting on the fitting pairs
    identity_mse_: float | None = fitted()  # MSE of the anonymized images themselves on those pairs

    def _pairs(self, clear, anonymized, max_pairs: int = 0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        column, y, x = paired_images(self, clear, anonymized)
        idx = _subsample(len(y), max_pairs, seed)
        self.column_, self.shape_ = column, tuple(int(v) for v in y.shape[1:])
        y, x = y[idx], x[idx]
        self.identity_mse_ = _mse(x, y)
        return y, x

    def _input(self, table, attr: str) -> tuple[str, np.ndarray]:
        require_fitted(self, attr, call="fit()", before="transform()")
        return _images(self, table, self.column_)

    @staticmethod
    def _output(table, column: str, x: np.ndarray, out: np.ndarray):
        return table.with_payload(column, restore_dtype(out, x.dtype))


# --------------------------------------------------------------------------------------------------- resample


@attrs.define(kw_only=True)
class ResampleInversion(_FaceDeanonymizer):
    """Down- and up-sampling with a learned intermediate resolution and interpolation (linear or bicubic).

    The Fantômas paper §6.2.1 (Linear/Bicubic interpolation): every image is shrunk (OpenCV ``INTER_AREA``) to an
    intermediate size and enlarged back with linear or bicubic interpolation. ``fit`` tries every intermediate
    height from 2 pixels to the full height, each with a square (as pixelation's cells) and an aspect-preserving
    width, with each interpolation, and keeps the one with the least squared error to the clear images.
    Against pixelation with ``s`` cells it finds ``s``×``s`` (the cell means) and smooths the blocks away;
    against noise a smaller size that averages it. The full size (identity) is a candidate, so the choice is
    never worse than the anonymized images on the fitting pairs. Images of another size than the pairs' are
    resampled at the same relative resolution."""

    id: ClassVar[str] = "face.resample_inversion"
    example_params: ClassVar[dict[str, Any]] = {"max_pairs": 16}

    interpolations: tuple[str, ...] = param(
        ("linear", "cubic"),
        help="up-sampling interpolations to try",
        check=lambda v: len(v) > 0 and all(i in ("linear", "cubic") for i in v),
        check_text="a non-empty tuple of 'linear' and 'cubic'",
    )
    max_pairs: int = param(256, **_MAX_PAIRS)
    seed: int = param(0, help="seed of the pair subsample")

    size_: tuple[int, int] | None = fitted()
    interpolation_: str | None = fitted()

    @staticmethod
    def candidates(h: int, w: int) -> list[tuple[int, int]]:
        """Intermediate sizes tried for h×w images: n×min(n, w) and n×round(n·w/h) for n = 2..h, and h×w."""
        sizes = {(h, w)}
        for n in range(2, h + 1):
            sizes.add((n, min(n, w)))
            sizes.add((n, max(1, min(w, int(round(n * w / h))))))
        return sorted(sizes)

    @staticmethod
    def resample(x: np.ndarray, size: tuple[int, int], interpolation: str) -> np.ndarray:
        """Shrink ``x`` (N×H×W×C) to ``size`` with area averaging and enlarge it back (float32)."""
        h, w = x.shape[1:3]
        if tuple(size) == (h, w):
            return np.asarray(x, np.float32)
        return resize_batch(resize_batch(x, size, "area"), (h, w), interpolation)

    def fit(self, clear, anonymized):
        y, x = self._pairs(clear, anonymized, self.max_pairs, self.seed)
        h, w = x.shape[1:3]
        best = (self.identity_mse_, (h, w), self.interpolations[0])
        for size in self.candidates(h, w):
            if size == (h, w):
                continue
            small = resize_batch(x, size, "area")
            for interp in self.interpolations:
                err = _mse(resize_batch(small, (h, w), interp), y)
                if err < best[0]:
                    best = (err, size, interp)
        self.train_mse_, self.size_, self.interpolation_ = best
        return self

    def transform(self, table):
        column, x = self._input(table, "size_")
        h, w = x.shape[1:3]
        fh, fw = self.shape_[:2]
        size = self.size_
        if (h, w) != (fh, fw):
            size = (max(1, round(size[0] * h / fh)), max(1, round(size[1] * w / fw)))
        return self._output(table, column, x, self.resample(x, size, self.interpolation_))


# --------------------------------------------------------------------------------------------------- deconvolution


def _gaussian_otf(shape: tuple[int, int], sigma: float) -> np.ndarray:
    """Transfer function (real, rfft2 layout Hp×(Wp//2+1)) of a normalized Gaussian kernel of std ``sigma``
    centred at the origin of a periodic Hp×Wp grid."""
    hp, wp = shape
    dy = np.minimum(np.arange(hp), hp - np.arange(hp)).astype(np.float64)
    dx = np.minimum(np.arange(wp), wp - np.arange(wp)).astype(np.float64)
    if sigma <= 1e-6:
        return np.ones((hp, wp // 2 + 1), np.float32)
    k = np.exp(-(dy[:, None] ** 2 + dx[None, :] ** 2) / (2.0 * sigma * sigma))
    k /= k.sum()
    return np.fft.rfft2(k).real.astype(np.float32)


class _Fourier:
    """Batched FFTs of N×H×W×C images, reflect-padded by at least ``pad`` pixels up to a fast FFT size.

    Spectra are kept in an (N·C)×Hp×(Wp//2+1) layout (contiguous transform axes, scipy.fft, single precision);
    :meth:`crop` returns N×H×W×C again."""

    def __init__(self, h: int, w: int, c: int, pad: int):
        import scipy.fft

        self.h, self.w, self.c, self.pad = h, w, c, pad
        self.shape = (scipy.fft.next_fast_len(h + 2 * pad, real=True), scipy.fft.next_fast_len(w + 2 * pad, real=True))

    def padded(self, x: np.ndarray) -> np.ndarray:
        """N×H×W×C → (N·C)×Hp×Wp, reflect-padded (pad pixels before, the rest after)."""
        p = self.pad
        n = len(x)
        planes = np.asarray(x, np.float32).transpose(0, 3, 1, 2).reshape(n * self.c, self.h, self.w)
        return np.pad(
            planes, ((0, 0), (p, self.shape[0] - self.h - p), (p, self.shape[1] - self.w - p)), mode="reflect"
        )

    @staticmethod
    def fft(x: np.ndarray) -> np.ndarray:
        import scipy.fft

        return scipy.fft.rfft2(x)

    def ifft(self, f: np.ndarray) -> np.ndarray:
        import scipy.fft

        return scipy.fft.irfft2(f, s=self.shape).astype(np.float32, copy=False)

    def crop(self, x: np.ndarray) -> np.ndarray:
        """(N·C)×Hp×Wp → N×H×W×C."""
        p = self.pad
        core = x[:, p : p + self.h, p : p + self.w]
        return core.reshape(-1, self.c, self.h, self.w).transpose(0, 2, 3, 1)

    def otf(self, sigma: float) -> np.ndarray:
        return _gaussian_otf(self.shape, sigma)[None]


def _pad_for(sigma: float, reach: float = 3.0) -> int:
    """Reflect padding (pixels) that keeps a filter reaching ``reach``·``sigma`` from wrapping around."""
    return int(math.ceil(reach * sigma)) + 2


def _chunks(n: int, size: int = 128):
    for s in range(0, n, size):
        yield slice(s, min(n, s + size))


def _sigma_grid(low: float, high: float, n: int) -> np.ndarray:
    return np.geomspace(low, high, n) if high > low else np.array([low])


@attrs.define(kw_only=True)
class Wiener(_FaceDeanonymizer):
    """Wiener deconvolution with a learned Gaussian blur kernel σ and noise-to-signal constant K.

    The Fantômas paper §6.2.1 (Wiener filter, parameters chosen on the training pairs): the estimate is
    X = G·Y / (G² + K) in the Fourier domain, where Y is the spectrum of the reflect-padded anonymized image and G
    the transfer function of a Gaussian of standard deviation σ (pixels). ``fit`` searches a log-spaced grid of
    (σ, K) on the pairs and refines the best point by Nelder–Mead in log space, minimizing the squared error to
    the clear images. All images and channels are filtered with one batched FFT."""

    id: ClassVar[str] = "face.wiener"
    reference: ClassVar[str] = "fantomas §6.2.1; Wiener–Hunt deconvolution (Hunt 1971)"
    example_params: ClassVar[dict[str, Any]] = {"max_pairs": 16, "max_sigma": 3.0}

    min_sigma: float = param(0.3, help="smallest blur σ tried (pixels)", low=0.0, low_inclusive=False)
    max_sigma: float = param(10.0, help="largest blur σ tried (pixels)", low=0.0, low_inclusive=False)
    max_pairs: int = param(32, **_MAX_PAIRS)
    seed: int = param(0, help="seed of the pair subsample")

    sigma_: float | None = fitted()
    k_: float | None = fitted()

    @staticmethod
    def restore(x01: np.ndarray, sigma: float, k: float) -> np.ndarray:
        """Wiener estimate of N×H×W×C images (0..1 scale) blurred by a Gaussian of std ``sigma``."""
        n, h, w, c = x01.shape
        fourier = _Fourier(h, w, c, _pad_for(sigma, 6.0))  # the inverse filter reaches further
        g = fourier.otf(sigma)
        return fourier.crop(fourier.ifft(fourier.fft(fourier.padded(x01)) * (g / (g * g + np.float32(k)))))

    def _clip_sigma(self, log_sigma: float) -> float:
        return float(np.clip(np.exp(log_sigma), self.min_sigma, max(self.max_sigma, self.min_sigma)))

    def fit(self, clear, anonymized):
        from scipy.optimize import minimize

        y, x = self._pairs(clear, anonymized, self.max_pairs, self.seed)
        x01, target = x / np.float32(255.0), y / np.float32(255.0)

        def err(v) -> float:
            return _mse(self.restore(x01, self._clip_sigma(v[0]), float(np.exp(v[1]))), target)

        grid = [
            (err((math.log(s), math.log(k))), math.log(s), math.log(k))
            for s in _sigma_grid(self.min_sigma, self.max_sigma, 12)
            for k in np.geomspace(1e-6, 1.0, 13)
        ]
        best, ls, lk = min(grid)
        res = minimize(
            err,
            np.array([ls, lk]),
            method="Nelder-Mead",
            options={
                "maxfev": 60,
                "xatol": 0.02,
                "fatol": 1e-9,
                "initial_simplex": [[ls, lk], [ls + 0.15, lk], [ls, lk + 0.5]],
            },
        )
        if res.fun < best:
            best, (ls, lk) = float(res.fun), res.x
        self.sigma_, self.k_ = self._clip_sigma(ls), float(np.exp(lk))
        self.train_mse_ = best * 255.0**2
        return self

    def transform(self, table):
        column, x = self._input(table, "sigma_")
        out = np.empty(x.shape, np.float32)
        for s in _chunks(len(x)):
            out[s] = self.restore(x[s] / np.float32(255.0), self.sigma_, self.k_) * 255.0
        return self._output(table, column, x, out)


@attrs.define(kw_only=True)
class RichardsonLucy(_FaceDeanonymizer):
    """Richardson–Lucy deconvolution with a learned Gaussian PSF σ and iteration count.

    The Fantômas paper Table II (Richardson 1972): the estimate is refined multiplicatively,
    x ← x · (PSF ⋆ (y / (PSF ⋆ x))), starting from the anonymized image y (grey levels scaled to 0..1 plus a
    small offset, so it stays positive); the symmetric Gaussian PSF is its own mirror. Convolutions are batched
    FFTs of the reflect-padded images. ``fit`` runs up to ``max_iterations`` iterations for every σ of a
    log-spaced grid (then a finer grid around the best) and keeps the (σ, iterations) pair with the least
    squared error to the clear images; zero iterations (the identity) is a candidate."""

    id: ClassVar[str] = "face.richardson_lucy"
    reference: ClassVar[str] = "Richardson, Bayesian-based iterative method of image restoration, 1972"
    example_params: ClassVar[dict[str, Any]] = {"max_pairs": 8, "max_sigma": 3.0, "max_iterations": 5}

    min_sigma: float = param(0.3, help="smallest PSF σ tried (pixels)", low=0.0, low_inclusive=False)
    max_sigma: float = param(10.0, help="largest PSF σ tried (pixels)", low=0.0, low_inclusive=False)
    max_iterations: int = param(50, help="most iterations tried", low=1)
    max_pairs: int = param(32, **_MAX_PAIRS)
    seed: int = param(0, help="seed of the pair subsample")

    sigma_: float | None = fitted()
    iterations_: int | None = fitted()

    _OFFSET: ClassVar[float] = 1.0 / 255.0

    def _iterate(self, x01: np.ndarray, sigma: float, iterations: int, target=None):
        """Run the iterations on x01 (N×H×W×C in 0..1); with ``target``, return the error after each one
        (index 0: before any), else the final estimate (0..1)."""
        _, h, w, c = x01.shape
        fourier = _Fourier(h, w, c, _pad_for(sigma))
        g = fourier.otf(sigma)
        observed = fourier.padded(x01 + np.float32(self._OFFSET))
        est = observed.copy()
        errors = [] if target is None else [_mse(fourier.crop(est) - self._OFFSET, target)]
        for _ in range(iterations):
            blurred = fourier.ifft(fourier.fft(est) * g)
            ratio = observed / np.maximum(blurred, np.float32(1e-6))
            est = est * fourier.ifft(fourier.fft(ratio) * g)
            if target is not None:
                errors.append(_mse(fourier.crop(est) - self._OFFSET, target))
                if len(errors) - 1 - int(np.argmin(errors)) >= 10:  # no better for 10 iterations: stop trying
                    break
        return errors if target is not None else fourier.crop(est) - np.float32(self._OFFSET)

    def fit(self, clear, anonymized):
        y, x = self._pairs(clear, anonymized, self.max_pairs, self.seed)
        x01, target = x / np.float32(255.0), y / np.float32(255.0)
        results: dict[float, list[float]] = {}

        def run(sigmas) -> None:
            for s in sigmas:
                if float(s) not in results:
                    results[float(s)] = self._iterate(x01, float(s), self.max_iterations, target)

        grid = _sigma_grid(self.min_sigma, max(self.max_sigma, self.min_sigma), 8)
        run(grid)
        best_sigma = min(results, key=lambda s: min(results[s]))
        i = int(np.argmin(np.abs(grid - best_sigma)))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        run(np.geomspace(lo, hi, 5)[1:-1] if hi > lo else [])
        best_sigma = min(results, key=lambda s: min(results[s]))
        errors = results[best_sigma]
        self.sigma_, self.iterations_ = best_sigma, int(np.argmin(errors))
        self.train_mse_ = float(min(errors)) * 255.0**2
        return self

    def transform(self, table):
        column, x = self._input(table, "sigma_")
        out = np.empty(x.shape, np.float32)
        for s in _chunks(len(x)):
            out[s] = self._iterate(x[s] / np.float32(255.0), self.sigma_, self.iterations_) * 255.0
        return self._output(table, column, x, out)


# --------------------------------------------------------------------------------------------------- wavelets


@attrs.define(kw_only=True)
class WaveletDenoise(_FaceDeanonymizer):
    """Wavelet denoising (BayesShrink or VisuShrink soft thresholding) with a learned threshold scale.

    The Fantômas paper Table II (wavelet denoising, Chang, Yu & Vetterli 2000): each image channel is decomposed
    (PyWavelets ``wavedec2``, batched over images and channels) and every detail coefficient is soft-thresholded;
    the noise σ is estimated per image and channel from the finest diagonal band (median |c| / 0.6745).
    BayesShrink uses T = σ² / σ_x per band (σ_x² = max(band variance − σ², 0)); VisuShrink the universal
    T = σ·√(2 ln(H·W)). ``fit`` chooses the rule (``method="auto"``: both), the number of levels (``levels=0``:
    1..4) and a scale of the threshold from a log grid (0 = the identity is a candidate) minimizing the squared
    error to the clear images."""

    id: ClassVar[str] = "face.wavelet_denoise"
    reference: ClassVar[str] = "Chang, Yu & Vetterli, Adaptive wavelet thresholding for image denoising, 2000"
    example_params: ClassVar[dict[str, Any]] = {"max_pairs": 16, "levels": 1}

    method: str = param(
        "auto", help="thresholding rule ('auto': choose on the pairs)", choices=("auto", "bayes", "visu")
    )
    wavelet: str = param(
        "db2",
        help="PyWavelets wavelet name",
        check=lambda v: _is_wavelet(v),
        check_text="a discrete wavelet known to PyWavelets (pywt.wavelist(kind='discrete'))",
    )
    levels: int = param(0, help="decomposition levels (0: choose 1..4 on the pairs)", low=0, high=8)
    max_pairs: int = param(128, **_MAX_PAIRS)
    seed: int = param(0, help="seed of the pair subsample")

    method_: str | None = fitted()
    levels_: int | None = fitted()
    scale_: float | None = fitted()

    def _max_level(self, h: int, w: int) -> int:
        import pywt

        return max(1, pywt.dwt_max_level(min(h, w), pywt.Wavelet(self.wavelet).dec_len))

    def _decompose(self, x: np.ndarray, levels: int):
        import pywt

        coeffs = pywt.wavedec2(x, self.wavelet, mode="symmetric", level=levels, axes=(1, 2))
        sigma = np.median(np.abs(coeffs[-1][2]), axis=(1, 2), keepdims=True) / 0.6745  # (N, 1, 1, C)
        return coeffs, sigma

    def _thresholds(self, coeffs, sigma: np.ndarray, method: str, hw: int) -> list[tuple[np.ndarray, ...]]:
        if method == "visu":
            t = sigma * np.sqrt(2.0 * np.log(hw))
            return [(t, t, t) for _ in coeffs[1:]]
        out = []
        for bands in coeffs[1:]:
            ts = []
            for c in bands:
                var = np.mean(c * c, axis=(1, 2), keepdims=True)
                sx = np.sqrt(np.maximum(var - sigma**2, 0.0))
                ts.append(
                    np.where(sx > 0, sigma**2 / np.maximum(sx, 1e-12), np.max(np.abs(c), axis=(1, 2), keepdims=True))
                )
            out.append(tuple(ts))
        return out

    def _reconstruct(self, coeffs, thresholds, scale: float, h: int, w: int) -> np.ndarray:
        import pywt

        new = [coeffs[0]]
        for bands, ts in zip(coeffs[1:], thresholds, strict=True):
            new.append(
                tuple(np.sign(c) * np.maximum(np.abs(c) - scale * t, 0.0) for c, t in zip(bands, ts, strict=True))
            )
        return pywt.waverec2(new, self.wavelet, mode="symmetric", axes=(1, 2))[:, :h, :w]

    def fit(self, clear, anonymized):
        y, x = self._pairs(clear, anonymized, self.max_pairs, self.seed)
        h, w = x.shape[1:3]
        top = self._max_level(h, w)
        level_options = [min(self.levels, top)] if self.levels else list(range(1, min(4, top) + 1))
        methods = ("bayes", "visu") if self.method == "auto" else (self.method,)
        best = (self.identity_mse_, methods[0], level_options[0], 0.0)
        x64 = x.astype(np.float64)
        for levels in level_options:
            coeffs, sigma = self._decompose(x64, levels)
            for method in methods:
                ts = self._thresholds(coeffs, sigma, method, h * w)
                for scale in np.geomspace(0.05, 8.0, 24):
                    err = _mse(self._reconstruct(coeffs, ts, float(scale), h, w), y)
                    if err < best[0]:
                        best = (err, method, levels, float(scale))
        self.train_mse_, self.method_, self.levels_, self.scale_ = best
        return self

    def transform(self, table):
        column, x = self._input(table, "scale_")
        h, w = x.shape[1:3]
        levels = min(self.levels_, self._max_level(h, w))
        out = np.empty(x.shape, np.float32)
        for s in _chunks(len(x), 256):
            coeffs, sigma = self._decompose(x[s].astype(np.float64), levels)
            out[s] = self._reconstruct(coeffs, self._thresholds(coeffs, sigma, self.method_, h * w), self.scale_, h, w)
        return self._output(table, column, x, out)


def _is_wavelet(name: Any) -> bool:
    if name == "db2":  # the default: every PyWavelets has it (registration checks defaults; pywt costs ~6 ms)
        return True
    try:
        import pywt
    except ImportError:  # pragma: no cover - a declared dependency
        return isinstance(name, str)
    return isinstance(name, str) and name in pywt.wavelist(kind="discrete")


# --------------------------------------------------------------------------------------------------- DP Snow


def _sum3x3(a: np.ndarray) -> np.ndarray:
    """Sum over each pixel's 8 neighbours (not itself) of an N×H×W(×C) array, zero outside the image."""
    p = np.pad(a, ((0, 0), (1, 1), (1, 1)) + ((0, 0),) * (a.ndim - 3))
    h, w = a.shape[1:3]
    total = np.zeros_like(a)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy != 1 or dx != 1:
                total += p[:, dy : dy + h, dx : dx + w]
    return total


@attrs.define(kw_only=True)
class NeighbourInterpolation(_FaceDeanonymizer):
    """DP Snow reversal: every pixel at the snow value is replaced by the mean of its non-snow 8 neighbours.

    The Fantômas paper §6.2.3 (Interpolation): a pixel whose channels all equal the snow grey is treated as
    missing and filled from its eight neighbours, ignoring missing ones (normalized convolution, vectorized over
    the batch); pixels with no known neighbour are filled in further rounds from the pixels filled before.
    ``fit`` learns the snow value as the most frequent grey of the anonymized pixels that differ from the clear
    ones (``value`` ≥ 0 fixes it); when the pairs show no such pixels it learns nothing and ``transform`` returns
    its input. Clear pixels that happen to have the snow value are interpolated too."""

    id: ClassVar[str] = "face.neighbour_interpolation"
    reference: ClassVar[str] = "fantomas §6.2.3; John et al., Let it snow, 2020"

    value: int = param(-1, help="grey level of the snow (-1: learn it from the pairs)", low=-1, high=255)
    max_rounds: int = param(10, help="filling rounds for pixels whose neighbours are all snow", low=1)

    value_: int | None = fitted()
    snow_share_: float | None = fitted()  # share of the changed pixels that carry the snow value
    fitted_: bool = fitted(False)

    def fit(self, clear, anonymized):
        y, x = self._pairs(clear, anonymized)
        changed = np.any(x != y, axis=-1)
        grey = np.all(x == x[..., :1], axis=-1) & changed
        if self.value >= 0:
            self.value_, self.snow_share_ = self.value, float(grey.sum() / max(changed.sum(), 1))
        elif grey.any():
            counts = np.bincount(np.clip(x[..., 0][grey], 0, 255).astype(np.int64), minlength=256)
            self.value_ = int(np.argmax(counts))
            self.snow_share_ = float(counts[self.value_] / changed.sum())
        else:
            self.value_, self.snow_share_ = None, 0.0
        self.fitted_ = True
        out = self.fill(x) if self.value_ is not None else x
        self.train_mse_ = _mse(out, y)
        return self

    def fill(self, x: np.ndarray) -> np.ndarray:
        """The images (float32) with the snow pixels interpolated."""
        x = np.asarray(x, np.float32)
        out = np.empty(x.shape, dtype=np.float32)
        buffer: list = []
        for s in _chunks(len(x), _fill_images(x.shape)):
            out[s] = self._fill_block(x[s], None, buffer)
        return out

    def _fill_block(self, x: np.ndarray, integral: bool | None, buffer: list) -> np.ndarray:
        """The images of the block ``x`` (N×H×W×C) with the snow pixels interpolated, float32 (a view into
        ``buffer``'s array, reused by the next block: copy it out first).

        Every round gives each missing pixel with known neighbours the mean of them (zero-padded 3×3 sums of
        the known values, :func:`_sum3x3`). The first round, where every known value is an original pixel, runs
        on OpenCV when those values are integers (``integral``; None: check): their sums are exact integers in
        float32 in any order, so they equal :func:`_sum3x3`'s, and the quotients are the same float32 divisions.
        Later rounds, with fractional values, run only on the few pixels still missing, adding their neighbours
        in :func:`_sum3x3`'s order. Other blocks take :func:`_sum3x3` itself."""
        n, h, w, c = x.shape
        if integral is None:
            integral = (np.issubdtype(x.dtype, np.integer) and x.dtype.itemsize <= 2) or (
                bool(np.all(np.abs(x) <= 1 << 20)) and np.array_equal(x, np.rint(x))
            )
        if not integral or c > 4:
            out = np.asarray(x, np.float32).copy()
            missing = np.all(out == np.float32(self.value_), axis=-1)  # (N, H, W)
            for _ in range(self.max_rounds):
                if not missing.any():
                    break
                known = (~missing).astype(np.float32)
                num = _sum3x3(out * known[..., None])
                den = _sum3x3(known)
                fill = missing & (den > 0)
                out[fill] = num[fill] / den[fill][:, None]
                missing &= ~fill
            return out
        import cv2

        # the block stacked vertically, a zero row below every image (OpenCV filters it as one image)
        if not buffer or buffer[0].shape[0] < n:
            buffer[:] = [np.zeros((n, h + 1, w, c), dtype=np.float32)]
        pad = buffer[0][:n]
        pad[:, :h] = x
        tall = pad.reshape(n * (h + 1), w, c)
        value = float(np.float32(self.value_))
        missing = cv2.inRange(tall, (value,) * c, (value,) * c).reshape(n, h + 1, w)  # 255: all channels snow
        missing[:, h] = 0
        if not missing.any():
            return pad[:, :h]
        known = cv2.bitwise_not(missing)
        known[:, h] = 0
        known = known.reshape(n * (h + 1), w)
        rows, wide = n * (h + 1), w * c  # masked copies run on (rows, W·C) views, a mask value per channel

        def channels(a: np.ndarray) -> np.ndarray:
            return (cv2.merge([a] * c) if c > 1 else a).reshape(rows, wide)

        values = cv2.copyTo(tall.reshape(rows, wide), channels(known))  # zero where missing
        num = cv2.boxFilter(values.reshape(tall.shape), -1, (3, 3), normalize=False, borderType=cv2.BORDER_CONSTANT)
        # OpenCV's stubs lack the scalar overloads of bitwise_and and compare (the runtime accepts scalars)
        den = cv2.boxFilter(
            cv2.bitwise_and(known, 1),  # type: ignore[call-overload]
            cv2.CV_32F,
            (3, 3),
            normalize=False,
            borderType=cv2.BORDER_CONSTANT,
        )  # a missing pixel is unknown: it adds 0 to both
        quotient = cv2.divide(num.reshape(rows, wide), channels(den))
        fill = cv2.bitwise_and(missing.reshape(den.shape), cv2.compare(den, 0.0, cv2.CMP_GT))  # type: ignore[call-overload]
        dst = tall.reshape(rows, wide)
        res = cv2.copyTo(quotient, channels(fill), dst=dst)
        if not np.shares_memory(res, dst):  # pragma: no cover - OpenCV wrote elsewhere
            dst[...] = res.reshape(dst.shape)
        left = (missing != 0) & (fill.reshape(missing.shape) == 0)
        out, left = pad[:, :h], left[:, :h]
        for _ in range(1, self.max_rounds):
            if not left.any():
                break
            _fill_round(out, left)
        return out

    def transform(self, table):
        if not self.fitted_:
            raise NotFittedError(self.id, "fit()", "transform()")
        column, x = _images(self, table, self.column_)
        if self.value_ is None:
            return table
        integral = True if np.issubdtype(x.dtype, np.integer) and x.dtype.itemsize <= 2 else None
        out = np.empty(x.shape, dtype=x.dtype)
        buffer: list = []
        for s in _chunks(len(x), _fill_images(x.shape)):
            out[s] = restore_dtype(self._fill_block(x[s], integral, buffer), x.dtype)
        return table.with_payload(column, out)


def _fill_images(shape: tuple[int, ...]) -> int:
    """Images per block of :meth:`NeighbourInterpolation._fill_block`: about 1 MiB of float32 pixels."""
    return max(1, (1 << 18) // max(1, int(np.prod(shape[1:]))))


def _fill_round(out: np.ndarray, missing: np.ndarray) -> None:
    """One interpolation round on the missing pixels only: each with a known neighbour gets the mean of its
    known 8 neighbours, summed in :func:`_sum3x3`'s order (the same float32 additions: unknown and outside
    neighbours add zero there). In place on ``out`` (N, H, W, C) and ``missing`` (N, H, W)."""
    n, h, w, c = out.shape
    img, yy, xx = np.nonzero(missing)
    num = np.zeros((len(img), c), dtype=np.float32)
    den = np.zeros(len(img), dtype=np.float32)
    zero = np.float32(0.0)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if dy == 0 and dx == 0:
                continue
            ny, nx = yy + dy, xx + dx
            inside = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
            ny, nx = np.clip(ny, 0, h - 1), np.clip(nx, 0, w - 1)
            known = inside & ~missing[img, ny, nx]
            num += np.where(known[:, None], out[img, ny, nx], zero)
            den += known
    fill = den > 0
    img, yy, xx = img[fill], yy[fill], xx[fill]
    out[img, yy, xx] = num[fill] / den[fill][:, None]
    missing[img, yy, xx] = False


# --------------------------------------------------------------------------------------------------- permutation


@attrs.define(kw_only=True)
class LearnedPermutation(_FaceDeanonymizer):
    """Exact inversion of a fixed pixel permutation (block permutation, pixel relocation) learned from pairs.

    The Fantômas paper §6.2.3 (Learn permutation): for every anonymized pixel position the clear position whose
    values across all pairs (and channels) match best is found — least squared difference, or highest
    correlation with ``criterion="correlation"`` — by chunked matrix products over all position pairs. The
    inverse then writes each anonymized pixel back to its source; when two positions claim one source the better
    match wins, and sources no position claims keep the anonymized pixel (``coverage_`` is the share claimed).
    With a fixed-key permutation and a few dozen pairs the mapping is exact (``match_error_`` 0), so the clear
    images are restored exactly. Images must have the pairs' size."""

    id: ClassVar[str] = "face.learned_permutation"
    reference: ClassVar[str] = "fantomas §6.2.3 (Learn permutation)"
    example_params: ClassVar[dict[str, Any]] = {"max_pairs": 16}

    criterion: str = param("mse", help="how positions are matched", choices=("mse", "correlation"))
    max_pairs: int = param(512, **_MAX_PAIRS)
    seed: int = param(0, help="seed of the pair subsample")

    source_: np.ndarray | None = fitted()  # source_[j]: clear position of anonymized position j (flat H·W)
    writes_: tuple | None = fitted()  # (clear positions, anonymized positions): the best claim of each source
    coverage_: float | None = fitted()
    match_error_: float | None = fitted()  # mean squared difference of the matched positions (grey levels²)

    def fit(self, clear, anonymized):
        y, x = self._pairs(clear, anonymized, self.max_pairs, self.seed)
        n, h, w, c = y.shape
        # one row per position: its values in every pair and channel
        a = np.ascontiguousarray(x.transpose(1, 2, 0, 3).reshape(h * w, n * c), dtype=np.float32)
        b = np.ascontiguousarray(y.transpose(1, 2, 0, 3).reshape(h * w, n * c), dtype=np.float32)
        if self.criterion == "correlation":

            def standard(m):
                m = m - m.mean(axis=1, keepdims=True)
                return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-6)

            a_s, b_s = standard(a), standard(b)
        b_sq = (b * b).sum(axis=1)
        source = np.empty(h * w, np.int64)
        cost = np.empty(h * w, np.float64)
        for s in _chunks(h * w, 1024):
            if self.criterion == "correlation":
                score = a_s[s] @ b_s.T
                source[s] = np.argmax(score, axis=1)
            else:
                d = b_sq[None, :] - 2.0 * (a[s] @ b.T)  # + |a|², constant per row
                source[s] = np.argmin(d, axis=1)
            cost[s] = np.mean((a[s] - b[source[s]]) ** 2, axis=1)
        self.source_ = source
        order = np.argsort(cost, kind="stable")  # best match first: np.unique keeps the first claim of a source
        targets, first = np.unique(source[order], return_index=True)
        self.writes_ = (targets, order[first])
        self.coverage_ = float(len(targets) / (h * w))
        self.match_error_ = float(cost.mean())
        self.train_mse_ = _mse(self.invert(x), y)
        return self

    def invert(self, x: np.ndarray) -> np.ndarray:
        """Write every anonymized pixel back to its learned source position."""
        n, h, w, c = x.shape
        flat = x.reshape(n, h * w, c)
        out = flat.copy()
        targets, sources = cast(tuple[np.ndarray, np.ndarray], self.writes_)
        out[:, targets] = flat[:, sources]
        return out.reshape(x.shape)

    def transform(self, table):
        column, x = self._input(table, "source_")
        if tuple(x.shape[1:]) != tuple(self.shape_):
            raise TableError(
                f"{self.id}: images of payload {column!r} have shape {x.shape[1:]}, but the "
                f"permutation was learned on {tuple(self.shape_)}"
            )
        return table.with_payload(column, self.invert(x))
