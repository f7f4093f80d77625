"""Vectorized signal helpers for ``imu`` payloads (batches of windows, ``(N, T, C)`` float arrays).

* :func:`sliding_windows` — cut a recording into windows with numpy stride tricks (no copy until stacked);
* :func:`window_features` — hand-crafted per-window features (per-channel statistics, spectral energy,
  periodicity, cross-channel correlation) for the classical recognizers and utility models;
* :func:`dtw_distance` — dynamic time warping between paired windows, vectorized over the batch
  (anti-diagonal wavefront: ``2T - 1`` numpy steps, no per-pair Python loop);
* :func:`pearson_per_channel` — correlation of paired windows, per channel;
* :func:`sample_rate_of`, :func:`channel_names_of`, :func:`table_rng` — table metadata and seeding helpers.

Only numpy (and scipy where noted) — nothing heavy at import time.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from bioanon.api import DataError, ParameterError, blas_threads

__all__ = [
    "DEFAULT_SAMPLE_RATE",
    "channel_names_of",
    "dtw_distance",
    "feature_names",
    "pearson_per_channel",
    "sample_rate_of",
    "sliding_windows",
    "table_rng",
    "window_features",
]

DEFAULT_SAMPLE_RATE = 50.0
"""Rate (Hz) assumed when a table's metadata has no ``sample_rate`` (phone IMUs are typically 50 Hz)."""


# --------------------------------------------------------------------------------------------------- metadata


def sample_rate_of(table: Any, override: float = 0.0) -> float:
    """The sample rate of a table's ``imu`` payload: ``override`` when > 0, else the metadata's
    ``sample_rate``, else :data:`DEFAULT_SAMPLE_RATE`."""
    if override and override > 0:
        return float(override)
    rate = table.metadata.get("sample_rate")
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        return DEFAULT_SAMPLE_RATE
    return rate if rate > 0 else DEFAULT_SAMPLE_RATE


def channel_names_of(table: Any, n_channels: int) -> list[str]:
    """Channel names from the metadata (``channels``), or ``ch0 … ch{C-1}`` when absent or of the wrong length."""
    names = table.metadata.get("channels")
    if isinstance(names, list) and len(names) == n_channels and all(isinstance(n, str) for n in names):
        return names
    return [f"ch{i}" for i in range(n_channels)]


def table_rng(seed: int, table: Any) -> np.random.Generator:
    """A generator seeded by ``seed`` and the table's sample ids: deterministic, yet different tables (e.g. the
    attacker and evaluation sets) get independent draws, and row order does not matter for the key."""
    ids = np.sort(np.asarray(table.sample_ids).astype(str))
    digest = hashlib.sha256("\x1f".join(ids.tolist()).encode()).digest()
    return np.random.default_rng([int(seed), int.from_bytes(digest[:8], "little")])


# --------------------------------------------------------------------------------------------------- windows


def sliding_windows(x: np.ndarray, window: int, stride: int) -> np.ndarray:
    """Windows of a recording ``x`` (T, C): a read-only strided view of shape ``(n, window, C)``,
    ``n = (T - window) // stride + 1`` (0 when ``T < window``). The start of window i is ``i * stride``; a tail
    shorter than a window is dropped."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise DataError(f"sliding_windows needs a (time, channels) array, got shape {x.shape}")
    for name, value in (("window", window), ("stride", stride)):
        if value < 1:
            raise ParameterError("sliding_windows", name, value, "an integer >= 1")
    if len(x) < window:
        return np.empty((0, window, x.shape[1]), dtype=x.dtype)
    view = np.lib.stride_tricks.sliding_window_view(x, window, axis=0)  # (T - w + 1, C, w)
    return view[::stride].transpose(0, 2, 1)


# --------------------------------------------------------------------------------------------------- features

_STATS = ("mean", "std", "min", "max", "p10", "p25", "p50", "p75", "p90", "rms", "skew", "kurtosis", "jerk", "zcr")
_SPECTRAL = ("log_energy", "dominant_hz", "centroid_hz", "entropy", "acf_peak", "acf_lag_s")


def feature_names(channels: list[str], n_bands: int) -> list[str]:
    """Names of the columns :func:`window_features` returns, in order."""
    per = list(_STATS) + [f"band{b}" for b in range(n_bands)] + list(_SPECTRAL)
    names = [f"{c}:{p}" for p in per for c in channels]
    names += [f"corr:{channels[i]}:{channels[j]}" for i, j in zip(*np.triu_indices(len(channels), 1), strict=True)]
    return names


def window_features(x: np.ndarray, sample_rate: float = DEFAULT_SAMPLE_RATE, n_bands: int = 8) -> np.ndarray:
    """Hand-crafted features of a batch of windows ``x`` (N, T, C) → (N, F) float32, all vectorized.

    Per channel: mean, std, min, max, 10/25/50/75/90th percentiles, RMS, skewness, kurtosis, mean absolute
    first difference (jerk), zero-crossing rate of the centered signal; the relative spectral energy in
    ``n_bands`` equal-width bands from 0 to Nyquist, log total energy, dominant and centroid frequency (Hz),
    spectral entropy; the highest autocorrelation at lags of 0.25–1.5 s and its lag (gait periodicity).
    Then the Pearson correlation of every pair of channels. Undefined values (a constant channel) are 0.
    :func:`feature_names` gives the column names."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise DataError(f"window_features needs (N, T, C) windows, got shape {x.shape}")
    n, t, c = x.shape
    mean = x.mean(axis=1)
    xc = x - mean[:, None, :]
    var = (xc**2).mean(axis=1)
    std = np.sqrt(var)
    safe = np.where(std > 1e-12, std, 1.0)
    z = xc / safe[:, None, :]
    q = np.percentile(x, [10, 25, 50, 75, 90], axis=1)  # (5, N, C)
    skew = np.where(std > 1e-12, (z**3).mean(axis=1), 0.0)
    kurt = np.where(std > 1e-12, (z**4).mean(axis=1) - 3.0, 0.0)
    jerk = np.abs(np.diff(x, axis=1)).mean(axis=1) if t > 1 else np.zeros((n, c))
    sign = np.signbit(xc)
    zcr = (sign[:, 1:] != sign[:, :-1]).mean(axis=1) if t > 1 else np.zeros((n, c))
    stats = [mean, std, x.min(axis=1), x.max(axis=1), *q, np.sqrt((x**2).mean(axis=1)), skew, kurt, jerk, zcr]

    # spectrum of the centered, Hann-tapered window
    power = np.abs(np.fft.rfft(xc * np.hanning(t)[None, :, None], axis=1)) ** 2  # (N, K, C)
    freqs = np.fft.rfftfreq(t, d=1.0 / sample_rate)
    total = power.sum(axis=1)
    tot_safe = np.where(total > 0, total, 1.0)
    edges = np.linspace(0.0, freqs[-1] + 1e-9, n_bands + 1)
    band_of = np.clip(np.searchsorted(edges, freqs, side="right") - 1, 0, n_bands - 1)
    onehot = np.eye(n_bands)[band_of]  # (K, B)
    bands = np.matmul(onehot.T, power) / tot_safe[:, None, :]  # (B, K) @ (N, K, C) -> (N, B, C)
    p = power / tot_safe[:, None, :]
    entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1) / np.log(max(len(freqs), 2))
    dominant = freqs[np.argmax(power[:, 1:, :], axis=1) + 1] if len(freqs) > 1 else np.zeros((n, c))
    centroid = np.matmul(freqs, p)  # (K,) @ (N, K, C) -> (N, C)
    spectral = [np.log1p(total), dominant, centroid, entropy]

    # autocorrelation (via FFT, zero-padded) at gait-cycle lags
    f = np.fft.rfft(xc, n=2 * t, axis=1)
    acf = np.fft.irfft(np.abs(f) ** 2, axis=1)[:, :t, :]
    acf = acf / np.where(acf[:, :1, :] > 1e-12, acf[:, :1, :], 1.0)
    lo, hi = max(1, int(round(0.25 * sample_rate))), min(t - 1, int(round(1.5 * sample_rate)))
    if hi > lo:
        seg = acf[:, lo : hi + 1, :]
        peak, lag = seg.max(axis=1), (seg.argmax(axis=1) + lo) / sample_rate
    else:
        peak, lag = np.zeros((n, c)), np.zeros((n, c))
    spectral += [peak, lag]

    iu = np.triu_indices(c, 1)
    with blas_threads(1):  # one small (C, T) @ (T, C) product per window (einsum: ~10x slower)
        corr = np.matmul(z.transpose(0, 2, 1), z)[:, iu[0], iu[1]] / t
    blocks = [
        np.stack(stats, axis=1).reshape(n, -1),
        bands.reshape(n, -1),
        np.stack(spectral, axis=1).reshape(n, -1),
        corr,
    ]
    out = np.concatenate(blocks, axis=1)
    return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)


# --------------------------------------------------------------------------------------------------- similarity


def pearson_per_channel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation over time of paired windows, per channel: (N, T, C) × (N, T, C) → (N, C).

    Two constant channels count as 1 when equal and 0 otherwise; one constant channel gives 0."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ac, bc = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    sa, sb = np.sqrt((ac**2).sum(axis=1)), np.sqrt((bc**2).sum(axis=1))
    den = sa * sb
    r = (ac * bc).sum(axis=1) / np.where(den > 0, den, 1.0)
    both_flat = (sa <= 1e-12) & (sb <= 1e-12)
    equal = np.all(np.isclose(a, b), axis=1)
    return np.where(den > 0, np.clip(r, -1.0, 1.0), np.where(both_flat & equal, 1.0, 0.0))


def dtw_distance(a: np.ndarray, b: np.ndarray, band: float = 1.0, normalize: bool = True) -> np.ndarray:
    """Dynamic-time-warping distance between paired windows ``a[i]`` and ``b[i]`` (N, T, C) → (N,).

    Local cost: Euclidean distance between the C-channel frames. Steps (1,0), (0,1), (1,1). ``band`` is the
    Sakoe–Chiba band as a share of T (1.0 = unconstrained). With ``normalize`` the cumulative cost is divided by
    the path-length bound ``2T`` (so it is in frame-distance units). The dynamic programme runs along the
    ``2T − 1`` anti-diagonals, each a vectorized numpy step over the whole batch and the diagonal's cells."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 3:
        raise DataError(f"dtw_distance needs two (N, T, C) arrays of equal shape, got {a.shape} and {b.shape}")
    n, t, _ = a.shape
    if t == 0:
        return np.zeros(n)
    # cost[n, i, j] = ||a[n, i] - b[n, j]|| (N × T × T), summed channel by channel (exact: 0 for equal frames)
    sq = np.zeros((n, t, t))
    for c in range(a.shape[2]):
        sq += np.square(a[:, :, None, c] - b[:, None, :, c])
    cost = np.sqrt(sq)
    w = max(int(np.ceil(band * t)), 1)
    i_idx, j_idx = np.indices((t, t))
    cost[:, np.abs(i_idx - j_idx) > w] = np.inf
    acc = np.full((n, t + 1, t + 1), np.inf)
    acc[:, 0, 0] = 0.0
    for d in range(2, 2 * t + 1):  # cells (i, j) with i + j = d, 1-based; loop over diagonals only
        i = np.arange(max(1, d - t), min(t, d - 1) + 1)
        j = d - i
        best = np.minimum(np.minimum(acc[:, i - 1, j], acc[:, i, j - 1]), acc[:, i - 1, j - 1])
        acc[:, i, j] = cost[:, i - 1, j - 1] + best
    out = acc[:, t, t]
    return out / (2.0 * t) if normalize else out
