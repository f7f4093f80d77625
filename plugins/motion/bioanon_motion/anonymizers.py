"""Anonymizers for ``imu`` payloads (batches of ``window × channels`` float32 windows).

Every transform works on the whole batch at once (numpy / scipy along the time axis, no per-window loop),
keeps the sample ids and their order, and — except ``motion.channel_removal`` with ``mode="drop"`` — keeps the
payload's shape, so attackers trained on clear data can be applied to the anonymized windows (the naive and
lazy scenarios). Random anonymizers take a ``seed``; their draws are keyed by the seed and the table's
sample ids, so the attacker and evaluation sets get independent noise and a rerun gives the same output.

Statistics an anonymizer needs (per-channel standard deviation or mean) are learned in ``fit(background)``
from the anonymization background set; without ``fit`` they are taken from the table being transformed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import Anonymizer, BioanonError, ParameterError, TableError, fitted, param

from .signals import channel_names_of, sample_rate_of, table_rng

__all__ = [
    "ChannelRemoval",
    "GaussianNoise",
    "LaplaceNoise",
    "LowPass",
    "Normalize",
    "Quantize",
    "Resample",
]


@attrs.define(kw_only=True)
class _ImuAnonymizer(Anonymizer):
    """Shared plumbing: reads the ``imu`` payload (or ``payload``) as float32, writes the result back."""

    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)

    payload: str = param("", help="payload column to anonymize (default: imu)")

    def _get(self, table: Any) -> tuple[str, np.ndarray]:
        """The payload column and its windows (N, T, C)."""
        column = self.payload_column(table, self.payload or None)
        x = np.asarray(table.payload(column))
        if x.ndim != 3:
            raise TableError(
                f"{self.id}: payload {column!r} must be (window, channels) per sample, got per-sample "
                f"shape {x.shape[1:]}"
            )
        return column, x

    @staticmethod
    def _put(table: Any, column: str, y: np.ndarray) -> Any:
        """The table with ``y`` as the new payload (float32)."""
        return table.with_payload(column, np.ascontiguousarray(y, dtype=np.float32))


@attrs.define(kw_only=True)
class _ChannelStats(_ImuAnonymizer):
    """An anonymizer that learns per-channel mean and standard deviation in ``fit(background)``."""

    mean_: np.ndarray | None = fitted()
    std_: np.ndarray | None = fitted()

    def fit(self, background):
        """Learn the per-channel mean and standard deviation on the background set."""
        _, x = self._get(background)
        self.mean_, self.std_ = _channel_stats(x)
        return self

    def _stats(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The fitted statistics, or those of ``x`` when unfitted (or fitted on another channel count)."""
        if self.std_ is not None and len(self.std_) == x.shape[2]:
            return cast(np.ndarray, self.mean_), self.std_  # fitted together
        return _channel_stats(x)


#: values per block of windows the element-wise anonymizations process at once (512 KiB of float64): the block
#: and its temporaries stay in the CPU cache, where whole-batch float64 temporaries made them no faster than a
#: per-window loop (``benchmarks/sequences.py``).
_BLOCK_VALUES = 1 << 16


def _blocks(x: np.ndarray):
    """Slices of consecutive windows of ``x`` (N, T, C) of about :data:`_BLOCK_VALUES` values each."""
    per = max(1, _BLOCK_VALUES // max(1, x.shape[1] * x.shape[2]))
    return (slice(s, min(s + per, len(x))) for s in range(0, len(x), per))


def _per_value(per_channel: np.ndarray, t: int) -> np.ndarray:
    """A per-channel constant (C,) tiled over time to (T·C,): broadcasts against windows flattened to
    (n, T·C) along one long contiguous axis (numpy's inner loop over the C channels alone is slow)."""
    return np.tile(per_channel, t)


def _channel_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation over samples and time (float32; std 1 where it is 0).

    Computed block by block, channels first (reductions over a contiguous axis), and merged with Chan et al.'s
    pairwise update of (count, mean, sum of squared deviations): numerically as stable as two passes over the
    whole table, without its (N·T, C) float64 temporaries."""
    c = x.shape[-1]
    flat = x.reshape(-1, c)
    count, mean, m2 = 0, np.zeros(c), np.zeros(c)
    per = max(1, _BLOCK_VALUES // max(1, c))
    for s in range(0, len(flat), per):
        block = np.ascontiguousarray(flat[s : s + per].T, dtype=np.float64)  # (C, rows)
        k = block.shape[1]
        bmean = block.mean(axis=1)
        block -= bmean[:, None]
        bm2 = np.einsum("ij,ij->i", block, block)
        delta = bmean - mean
        total = count + k
        mean = mean + delta * (k / total)
        m2 = m2 + bm2 + delta * delta * (count * k / total)
        count = total
    std = np.sqrt(m2 / count) if count else np.full(c, np.nan)
    return mean.astype(np.float32), np.where(std > 1e-12, std, 1.0).astype(np.float32)


# --------------------------------------------------------------------------------------------------- noise


@attrs.define(kw_only=True)
class GaussianNoise(_ChannelStats):
    """Add zero-mean Gaussian noise scaled per channel: noise std = ``sigma`` × the channel's standard deviation
    (learned on the background set), so accelerometer and gyroscope channels are perturbed alike."""

    id: ClassVar[str] = "motion.gaussian_noise"

    sigma: float = param(0.5, help="noise standard deviation in units of each channel's standard deviation", low=0.0)
    seed: int = param(0, help="random seed")

    def _noise(self, rng: np.random.Generator, shape: tuple[int, ...], out: np.ndarray | None = None) -> np.ndarray:
        """Zero-mean, unit-variance float32 noise of ``shape`` (into ``out`` when given)."""
        return rng.standard_normal(shape, dtype=np.float32, out=out)

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order).

        The noise is drawn block by block from one generator (the same values as one draw for the whole
        table) straight into the output, then scaled and added in place."""
        column, x = self._get(table)
        _, std = self._stats(x)
        rng = table_rng(self.seed, table)
        scale = _per_value(np.float32(self.sigma) * std, x.shape[1])
        out = np.empty(x.shape, dtype=np.float32)
        for rows in _blocks(x):
            y = self._noise(rng, out[rows].shape, out=out[rows]).reshape(-1, scale.size)
            y *= scale
            y += x[rows].reshape(y.shape)
        return self._put(table, column, out)


@attrs.define(kw_only=True)
class LaplaceNoise(GaussianNoise):
    """Add zero-mean Laplace noise scaled per channel, with the same standard deviation as
    ``motion.gaussian_noise`` at equal ``sigma`` (Laplace scale b = sigma·std/√2): heavier tails, as in
    Laplace-mechanism perturbation."""

    id: ClassVar[str] = "motion.laplace_noise"

    def _noise(self, rng, shape, out=None):
        """Zero-mean, unit-variance float32 noise of ``shape`` (into ``out`` when given)."""
        z = rng.laplace(0.0, 1.0 / np.sqrt(2.0), size=shape)
        if out is None:
            return z.astype(np.float32)
        out[...] = z
        return out


# --------------------------------------------------------------------------------------------------- filtering


@attrs.define(kw_only=True)
class LowPass(_ImuAnonymizer):
    """Zero-phase Butterworth low-pass filter along time (``scipy.signal.sosfiltfilt``, forward and backward,
    so the gait events do not shift): removes the fine, high-frequency detail of each step while keeping the
    cadence and the coarse movement that activity recognition uses. Each window is filtered on its own, mirror-
    extended at both ends (about three cut-off periods) to limit edge transients."""

    id: ClassVar[str] = "motion.lowpass"
    per_sample: ClassVar[bool] = True  # each window filtered on its own

    cutoff_hz: float = param(
        3.0, help="cut-off frequency in Hz (below the Nyquist frequency)", low=0.0, low_inclusive=False
    )
    order: int = param(4, help="Butterworth filter order", low=1, high=12)
    sample_rate: float = param(0.0, help="sample rate in Hz (0: from the table's metadata)", low=0.0)

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order)."""
        from scipy.signal import butter, sosfiltfilt

        column, x = self._get(table)
        fs = sample_rate_of(table, self.sample_rate)
        if self.cutoff_hz >= fs / 2:
            raise ParameterError(
                self.id,
                "cutoff_hz",
                self.cutoff_hz,
                f"below the Nyquist frequency {fs / 2:g} Hz (sample rate {fs:g} Hz)",
            )
        sos = butter(self.order, self.cutoff_hz, btype="low", fs=fs, output="sos")
        # mirror-extend each window by ~3 cut-off periods so the edges start from a steady state
        padlen = min(max(3 * (2 * len(sos) + 1), int(np.ceil(3 * fs / self.cutoff_hz))), x.shape[1] - 1)
        y = sosfiltfilt(sos, x.astype(np.float64), axis=1, padtype="even", padlen=padlen)
        return self._put(table, column, y)


@attrs.define(kw_only=True)
class Resample(_ImuAnonymizer):
    """Downsample by ``factor`` and upsample back to the original length (the window shape is kept).

    Downsampling uses ``scipy.signal.resample_poly`` (a polyphase anti-aliasing FIR filter) when
    ``antialias``, else plain decimation (every ``factor``-th sample, aliasing included). The low-rate signal is
    brought back to the original rate by ``interpolation``: ``linear`` (between the low-rate samples) or
    ``hold`` (each low-rate sample repeated, a staircase). The effect is a loss of every detail above the new
    Nyquist frequency ``rate / (2 factor)``."""

    id: ClassVar[str] = "motion.resample"
    per_sample: ClassVar[bool] = True  # each window resampled on its own

    factor: int = param(4, help="downsampling factor (new rate = rate / factor)", low=2)
    antialias: bool = param(True, help="low-pass before downsampling (polyphase filter)")
    interpolation: str = param(
        "linear", help="how the low-rate signal is brought back to the original length", choices=("linear", "hold")
    )

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order)."""
        from scipy.signal import resample_poly

        column, x = self._get(table)
        t = x.shape[1]
        if self.antialias:
            low = resample_poly(x.astype(np.float64), 1, self.factor, axis=1)
        else:
            low = x[:, :: self.factor, :].astype(np.float64)
        m = low.shape[1]
        pos = np.arange(t) / self.factor  # position of every original sample on the low-rate grid
        i0 = np.minimum(np.floor(pos).astype(np.int64), m - 1)
        if self.interpolation == "hold":
            y = low[:, i0, :]
        else:
            i1 = np.minimum(i0 + 1, m - 1)
            w = (pos - i0)[None, :, None]
            y = (1.0 - w) * low[:, i0, :] + w * low[:, i1, :]
        return self._put(table, column, y)


@attrs.define(kw_only=True)
class Quantize(_ChannelStats):
    """Coarsen every value to a grid of width ``step`` (rounding to the nearest grid point).

    With ``relative`` the grid width of each channel is ``step`` × its standard deviation (learned on the
    background set), else ``step`` in sensor units."""

    id: ClassVar[str] = "motion.quantize"

    step: float = param(
        0.5, help="grid width (in channel standard deviations when relative)", low=0.0, low_inclusive=False
    )
    relative: bool = param(True, help="the step is relative to each channel's standard deviation")

    @classmethod
    def rows_independent(cls, params: Mapping[str, Any]) -> bool:
        """Per-sample only with ``relative`` false: a relative grid follows the channels' spread over the
        background set or the table (``per_sample`` stays False, the default answer)."""
        try:
            return not cls(**params).relative
        except BioanonError:  # invalid parameters: reported where the config is validated
            return False

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order)."""
        column, x = self._get(table)
        step = self.step * (self._stats(x)[1] if self.relative else np.ones(x.shape[2], np.float32))
        step = _per_value(step.astype(np.float64), x.shape[1])
        out = np.empty(x.shape, dtype=np.float32)
        for rows in _blocks(x):
            y = x[rows].reshape(-1, step.size) / step
            np.round(y, out=y)
            y *= step
            out[rows] = y.reshape(out[rows].shape)
        return self._put(table, column, out)


# --------------------------------------------------------------------------------------------------- channels


@attrs.define(kw_only=True)
class ChannelRemoval(_ChannelStats):
    """Remove sensor channels: by default zeroed (``mode="zero"``) or set to the background mean
    (``mode="mean"``), which keeps the ``window × channels`` shape so attackers trained on clear data still
    apply; ``mode="drop"`` deletes the channels from the payload (and from the metadata's channel names) — a
    smaller fixed shape, suitable for pipelines but not for the naive or lazy scenarios, where models trained on
    the full channel set meet the reduced one.

    ``channels`` are shell-style patterns over the channel names in the table's metadata (e.g. ``gyro_*``,
    ``rotationRate.*``); unnamed channels are called ``ch0``, ``ch1``, …. A pattern that matches nothing is an
    error."""

    id: ClassVar[str] = "motion.channel_removal"
    example_params: ClassVar[dict] = {"channels": ("ch0", "ch3")}
    per_sample: ClassVar[bool] = True  # zeroed or dropped channels: each window on its own (not mode "mean")

    channels: tuple[str, ...] = param(
        ("gyro_*",),
        help="channel-name patterns to remove",
        check=lambda v: len(v) > 0,
        check_text="at least one pattern",
    )
    mode: str = param(
        "zero", help="zero, mean (background mean) or drop (changes the shape)", choices=("zero", "mean", "drop")
    )

    @classmethod
    def rows_independent(cls, params: Mapping[str, Any]) -> bool:
        """Per-sample unless ``mode`` is ``mean``: the background's (or the table's) channel means fill the
        removed channels then."""
        try:
            return cls(**params).mode != "mean"
        except BioanonError:  # invalid parameters: reported where the config is validated
            return False

    def removed(self, names: list[str]) -> np.ndarray:
        """Boolean mask of the channels the patterns select."""
        mask = np.zeros(len(names), bool)
        for pat in self.channels:
            hit = np.array([fnmatch.fnmatchcase(n, pat) for n in names], bool)
            if not hit.any():
                raise ParameterError(self.id, "channels", pat, f"patterns that match some of the channels {names}")
            mask |= hit
        return mask

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order)."""
        column, x = self._get(table)
        names = channel_names_of(table, x.shape[2])
        mask = self.removed(names)
        if self.mode == "drop":
            if mask.all():
                raise ParameterError(self.id, "mode", "drop", "'zero' or 'mean' when the patterns select every channel")
            out = self._put(table, column, x[:, :, ~mask])
            if table.metadata.get("channels") is not None:
                out = out.with_metadata(channels=[n for n, m in zip(names, mask, strict=True) if not m])
            return out
        y = np.array(x, dtype=np.float32, copy=True)
        y[:, :, mask] = 0.0 if self.mode == "zero" else self._stats(x)[0][mask]
        return self._put(table, column, y)


@attrs.define(kw_only=True)
class Normalize(_ImuAnonymizer):
    """Per-window normalization of every channel: ``zscore`` (mean 0, standard deviation 1), ``center`` (mean
    0: removes sensor orientation and gravity offsets) or ``minmax`` (scaled to [-1, 1]: removes intensity).
    Constant channels become 0."""

    id: ClassVar[str] = "motion.normalize"
    per_sample: ClassVar[bool] = True  # statistics of each window alone

    mode: str = param("zscore", help="zscore, center or minmax", choices=("zscore", "center", "minmax"))

    def transform(self, table):
        """Anonymize every window of ``table`` (same sample ids, same order)."""
        column, x = self._get(table)
        out = np.empty(x.shape, dtype=np.float32)
        for rows in _blocks(x):  # per block, channels first: the statistics reduce a contiguous time axis
            out[rows] = self._normalize(np.ascontiguousarray(x[rows].transpose(0, 2, 1), dtype=np.float64)).transpose(
                0, 2, 1
            )
        return self._put(table, column, out)

    def _normalize(self, x: np.ndarray) -> np.ndarray:
        """Normalize windows given channels first, (n, C, T) float64."""
        if self.mode == "minmax":
            lo, hi = x.min(axis=2, keepdims=True), x.max(axis=2, keepdims=True)
            span = hi - lo
            return np.where(span > 1e-12, 2.0 * (x - lo) / np.where(span > 1e-12, span, 1.0) - 1.0, 0.0)
        y = x - x.mean(axis=2, keepdims=True)
        if self.mode == "zscore":
            std = y.std(axis=2, keepdims=True)
            y = np.where(std > 1e-12, y / np.where(std > 1e-12, std, 1.0), 0.0)
        return y
