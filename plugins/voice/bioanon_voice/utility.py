"""Voice utility measures: spoken-content accuracy, pitch correlation ρF0 (VoicePrivacy) and signal-to-
distortion ratio."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from bioanon import UtilityMeasure, param
from bioanon.builtin.utility import AttributeAccuracy, align

from .dsp import audio_of, feature_stats, segment_features


@attrs.define(kw_only=True)
class ContentAccuracy(AttributeAccuracy):
    """Spoken-content accuracy: a classifier of ``attribute`` (default ``digit``) trained on clear speech's
    MFCC features (segment means in temporal order + utterance statistics), scored on anonymized speech (1 = the original content is recognized). Floor: the
    majority-class rate. (Core ``any.attribute_accuracy`` on MFCC statistics.)"""

    id: ClassVar[str] = "voice.content_accuracy"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)
    example_params: ClassVar[dict] = {"attribute": "group"}

    attribute: str = param("digit", help="the content attribute to predict (e.g. 'digit')")
    classifier: str = param("logistic_regression", help="the content classifier",
                            choices=("random_forest", "logistic_regression", "knn"))
    n_coeffs: int = param(20, help="MFCCs per frame", low=2, high=80)
    segments: int = param(5, help="MFCC means over this many equal stretches of the speech (temporal order); "
                                  "0 = utterance mean+std statistics only", low=0, high=50)

    def _x(self, table) -> np.ndarray:
        audio, sr = audio_of(table)
        if self.segments:
            return segment_features(audio, sr, self.n_coeffs, self.segments)
        return feature_stats(audio, sr, "mfcc", self.n_coeffs)


def f0_track(x: np.ndarray, sr: int, hop_ms: float, fmin: float = 75.0, fmax: float = 500.0) -> np.ndarray:
    """F0 in Hz every ``hop_ms`` (pYIN); unvoiced frames and values outside [fmin, fmax] are 0."""
    import librosa

    hop = max(1, int(round(sr * hop_ms / 1000.0)))
    frame = 1 << int(np.ceil(np.log2(max(sr * 0.064, 3 * sr / fmin))))
    x = np.asarray(x, dtype=np.float32)
    if len(x) < frame:
        x = np.pad(x, (0, frame - len(x)))
    f0, voiced, _ = librosa.pyin(x, fmin=fmin, fmax=fmax, sr=sr, frame_length=frame, hop_length=hop,
                                 center=True)
    f0 = np.where(voiced & np.isfinite(f0), f0, 0.0)
    return np.where((f0 >= fmin) & (f0 <= fmax), f0, 0.0)


def pitch_correlation(a: np.ndarray, b: np.ndarray, max_lag: int = 10) -> float:
    """ρF0 of two F0 tracks (METRICS.md): the shorter interpolated to the longer length, aligned by the lag
    (within ±``max_lag`` frames) maximizing the cross-correlation, Pearson correlation with unvoiced = 0.
    Two flat tracks: 1 if equal, else 0; one flat track: 0."""
    if len(a) != len(b):
        short, long_ = (a, b) if len(a) < len(b) else (b, a)
        s = np.interp(np.linspace(0, 1, len(long_)), np.linspace(0, 1, max(len(short), 1)), short)
        a, b = (s, long_) if len(a) < len(b) else (long_, s)
    n = len(a)
    best, best_c = 0, -np.inf
    for lag in range(-min(max_lag, n - 2), min(max_lag, n - 2) + 1):
        x, y = (a[lag:], b[: n - lag]) if lag >= 0 else (a[: n + lag], b[-lag:])
        c = float(np.dot(x - x.mean(), y - y.mean()))
        if c > best_c:
            best, best_c = lag, c
    x, y = (a[best:], b[: n - best]) if best >= 0 else (a[: n + best], b[-best:])
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return 1.0 if (sx == 0 and sy == 0 and np.allclose(x, y)) else 0.0
    return float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))


@attrs.define(kw_only=True)
class PitchCorrelation(UtilityMeasure):
    """Pitch correlation ρF0 (VoicePrivacy; METRICS.md) between each clear utterance and its anonymized
    version: pYIN F0 tracks in [75, 500] Hz every ``hop_ms`` ms, aligned by the best lag, Pearson correlation
    with unvoiced frames as 0. pYIN is slow: a larger hop is faster. Floor 0 (unrelated intonation)."""

    id: ClassVar[str] = "voice.pitch_correlation"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)

    hop_ms: float = param(10.0, help="F0 frame hop in ms (METRICS.md: 10)", low=1.0, high=100.0)
    max_lag: int = param(10, help="largest alignment lag in frames", low=0)
    fmin: float = param(75.0, help="lowest F0 in Hz", low=20.0)
    fmax: float = param(500.0, help="highest F0 in Hz", low=50.0)

    def measure(self, original, anonymized) -> np.ndarray:
        anonymized = align(original, anonymized)
        (xa, sr), (xb, sr_b) = audio_of(original), audio_of(anonymized)
        return np.array([pitch_correlation(f0_track(a, sr, self.hop_ms, self.fmin, self.fmax),
                                           f0_track(b, sr_b, self.hop_ms, self.fmin, self.fmax), self.max_lag)
                         for a, b in zip(xa, xb)], dtype=np.float64)


@attrs.define(kw_only=True)
class SignalToDistortion(UtilityMeasure):
    """Signal-to-distortion ratio in dB of each anonymized utterance against its clear original, over their
    common length: scale-invariant (SI-SDR: the clear signal is first scaled to best fit the anonymized one)
    or plain ``10 log10(Σx² / Σ(x − y)²)``; clipped to ±``max_db``. Floor 0 dB."""

    id: ClassVar[str] = "voice.sdr"
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)

    scale_invariant: bool = param(True, help="SI-SDR (optimal scaling of the reference) instead of plain SDR")
    max_db: float = param(100.0, help="cap in dB (identical signals)", low=0.0, low_inclusive=False)

    def measure(self, original, anonymized) -> np.ndarray:
        anonymized = align(original, anonymized)
        (xa, _), (xb, _) = audio_of(original), audio_of(anonymized)
        out = np.empty(len(xa))
        for i, (a, b) in enumerate(zip(xa, xb)):
            n = min(len(a), len(b))
            a, b = a[:n].astype(np.float64), b[:n].astype(np.float64)
            if self.scale_invariant:
                den = float(a @ a)
                a = a * ((a @ b) / den) if den > 0 else a
            sig, err = float(a @ a), float((a - b) @ (a - b))
            if err == 0:
                out[i] = self.max_db
            elif sig == 0:
                out[i] = -self.max_db
            else:
                out[i] = np.clip(10 * np.log10(sig / err), -self.max_db, self.max_db)
        return out
