"""Signal-level voice anonymizers on the ``audio`` payload. All keep each utterance's length and the sample
rate; random draws are seeded by ``seed`` and the sample id (or subject), independent of the table's order.
A ``features`` payload derived from the clear audio is dropped (it would be stale)."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from bioanon.api import Anonymizer, param

from .dsp import EPS, audio_of, frames, lpc, poly_from_roots, poly_roots, sample_rng, with_audio


def _range_ok(v) -> bool:
    return v == () or (len(v) == 2 and v[0] <= v[1])


@attrs.define(kw_only=True)
class _VoiceAnonymizer(Anonymizer):
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)

    # each utterance on its own (``_one``), its draws seeded by the subject or the sample id: a subclass with
    # table-wide state sets False
    per_sample: ClassVar[bool] = True

    def transform(self, table):
        audio, sr = audio_of(table)
        subjects, ids = table.subjects, table.sample_ids
        out = [self._one(x, sr, str(s), str(i)) for x, s, i in zip(audio, subjects, ids, strict=True)]
        return with_audio(table, out)

    def _one(self, x: np.ndarray, sr: int, subject: str, sample_id: str) -> np.ndarray:
        raise NotImplementedError


def mcadams(
    x: np.ndarray, sr: int, alpha: float, order: int = 20, win_ms: float = 20.0, hop_ms: float = 10.0
) -> np.ndarray:
    """McAdams-coefficient anonymization of one signal (VoicePrivacy 2020 baseline B2).

    Frame-wise LPC analysis (sqrt-Hann analysis/synthesis windows, 50 % overlap); every complex pole's angle
    φ becomes φ^α (clipped to [0, π], conjugates mirrored, radii kept); the LPC residual is filtered through
    the modified all-pole filter and overlap-added. Unlike B2 (which normalizes to peak 1) the output is scaled
    to the input's peak, so α = 1 reconstructs the input."""
    from scipy.signal import lfilter

    n = len(x)
    win = max(8, int(np.floor(win_ms / 1000.0 * sr)))
    hop = max(1, int(np.floor(hop_ms / 1000.0 * sr)))
    w_pr = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)  # periodic Hann: w² overlap-adds to 1
    k_norm = w_pr.sum() / hop
    w = np.sqrt(w_pr / k_norm)
    pad = win
    xp = np.concatenate([np.zeros(pad), x.astype(np.float64), np.zeros(pad + win)])
    fr = frames(xp, win, hop) * w
    a = lpc(fr + EPS, order)
    poles = poly_roots(a)  # also for alpha = 1 (then the filter is rebuilt from its own poles)
    ang = np.angle(poles)
    cplx = np.abs(poles.imag) > 1e-12
    new = np.sign(ang) * np.clip(np.abs(ang) ** alpha, 0.0, np.pi)
    poles = np.where(cplx, np.abs(poles) * np.exp(1j * new), poles)
    a_new = poly_from_roots(poles)
    y = np.zeros(len(xp) + win)
    for m in range(len(fr)):
        res = lfilter(a[m], [1.0], fr[m])
        rec = lfilter([1.0], a_new[m], res) * w
        y[m * hop : m * hop + win] += rec
    y = y[pad : pad + n]
    peak_in, peak_out = np.max(np.abs(x)) if n else 0.0, np.max(np.abs(y)) if n else 0.0
    if peak_out > 0:
        y *= peak_in / peak_out
    return y.astype(np.float32)


@attrs.define(kw_only=True)
class McAdams(_VoiceAnonymizer):
    """McAdams-coefficient anonymization (VoicePrivacy 2020 baseline B2): LPC pole angles φ → φ^α.

    Frame-wise LPC (``order``) on ``win_ms`` windows every ``hop_ms``; the residual is resynthesized through
    the all-pole filter whose complex poles' angles are raised to the power α (α < 1 raises low formants,
    α > 1 lowers them). ``alpha`` is fixed, or with ``alpha_range = (lo, hi)`` drawn per speaker uniformly from
    that range (seeded by ``seed`` and the subject). Output scaled to the input's peak; α = 1 reconstructs."""

    id: ClassVar[str] = "voice.mcadams"
    reference: ClassVar[str] = "Patino et al., Speaker anonymisation using the McAdams coefficient, 2021 (B2)"

    alpha: float = param(0.8, help="McAdams coefficient α (pole angle φ → φ^α)", low=0.0, low_inclusive=False, high=2.0)
    alpha_range: tuple[float, ...] = param(
        (),
        help="(lo, hi): draw α per speaker uniformly (overrides alpha)",
        low=0.0,
        high=2.0,
        check=_range_ok,
        check_text="() or (lo, hi), lo <= hi",
    )
    order: int = param(20, help="LPC order", low=2, high=64)
    win_ms: float = param(20.0, help="analysis window in ms", low=2.0, high=200.0)
    hop_ms: float = param(10.0, help="hop in ms (half the window gives exact overlap-add)", low=1.0, high=100.0)
    seed: int = param(0, help="random seed (per-speaker α)")

    def alpha_for(self, subject: str) -> float:
        if self.alpha_range:
            lo, hi = self.alpha_range
            return float(sample_rng(self.seed, subject).uniform(lo, hi))
        return self.alpha

    def _one(self, x, sr, subject, sample_id):
        return mcadams(x, sr, self.alpha_for(subject), self.order, self.win_ms, self.hop_ms)


@attrs.define(kw_only=True)
class PitchShift(_VoiceAnonymizer):
    """Pitch shift by ``semitones`` (phase vocoder + resampling, ``librosa.effects.pitch_shift``); tempo and
    length kept. With ``semitones_range`` the shift is drawn per speaker (seeded)."""

    id: ClassVar[str] = "voice.pitch_shift"

    semitones: float = param(4.0, help="shift in semitones (positive = higher)", low=-24.0, high=24.0)
    semitones_range: tuple[float, ...] = param(
        (),
        help="(lo, hi): draw the shift per speaker (overrides semitones)",
        low=-24.0,
        high=24.0,
        check=_range_ok,
        check_text="() or (lo, hi), lo <= hi",
    )
    seed: int = param(0, help="random seed (per-speaker shift)")

    def _one(self, x, sr, subject, sample_id):
        import librosa

        st = self.semitones
        if self.semitones_range:
            st = float(sample_rng(self.seed, subject).uniform(*self.semitones_range))
        if st == 0 or len(x) < 64:
            return x
        n_fft = min(512, 1 << int(np.floor(np.log2(len(x)))))
        y = librosa.effects.pitch_shift(x, sr=sr, n_steps=st, n_fft=n_fft, res_type="soxr_hq")
        return np.asarray(y[: len(x)], dtype=np.float32)


def warp_spectrum(x: np.ndarray, sr: int, alpha: float, n_fft: int = 512) -> np.ndarray:
    """VTLN-like frequency warping: the STFT magnitude at f is read at f/α below 0.8·Nyquist and linearly
    joined to Nyquist above (piecewise-linear warp); the original phase is kept; ISTFT to the same length."""
    from scipy.signal import istft, stft

    n = len(x)
    nper = min(n_fft, 1 << int(np.floor(np.log2(max(len(x), 16)))))
    _, _, z = stft(x, fs=sr, nperseg=nper, noverlap=nper * 3 // 4, boundary="zeros", padded=True)
    bins = z.shape[0]
    f = np.arange(bins, dtype=np.float64)
    nyq = bins - 1
    f0 = 0.8 * nyq / max(alpha, 1.0)  # input frequencies below f0 map to alpha * f; above, linear to Nyquist
    src = f / alpha  # output bin f reads input bin g^-1(f)
    hi = f > alpha * f0
    src[hi] = f0 + (f[hi] - alpha * f0) * (nyq - f0) / max(nyq - alpha * f0, EPS)
    src = np.clip(src, 0, nyq)
    mag = np.abs(z)
    lo_i = np.floor(src).astype(int)
    hi_i = np.minimum(lo_i + 1, nyq)
    t = (src - lo_i)[:, None]
    new_mag = (1 - t) * mag[lo_i] + t * mag[hi_i]
    z_new = new_mag * np.exp(1j * np.angle(z))
    _, y = istft(z_new, fs=sr, nperseg=nper, noverlap=nper * 3 // 4, boundary=True)
    y = y[:n]
    if len(y) < n:
        y = np.pad(y, (0, n - len(y)))
    return y.astype(np.float32)


@attrs.define(kw_only=True)
class FrequencyWarp(_VoiceAnonymizer):
    """VTLN-like frequency warping of the short-time spectrum by a factor α (α > 1 moves spectral envelope
    features such as formants up, α < 1 down), piecewise linear to keep the band; phase kept, length kept.
    With ``alpha_range`` α is drawn per speaker (seeded)."""

    id: ClassVar[str] = "voice.frequency_warp"

    alpha: float = param(1.15, help="warping factor α (1 = identity)", low=0.5, high=2.0)
    alpha_range: tuple[float, ...] = param(
        (),
        help="(lo, hi): draw α per speaker (overrides alpha)",
        low=0.5,
        high=2.0,
        check=_range_ok,
        check_text="() or (lo, hi), lo <= hi",
    )
    n_fft: int = param(512, help="STFT size (capped by the utterance length)", low=16)
    seed: int = param(0, help="random seed (per-speaker α)")

    def _one(self, x, sr, subject, sample_id):
        a = self.alpha
        if self.alpha_range:
            a = float(sample_rng(self.seed, subject).uniform(*self.alpha_range))
        return x if a == 1.0 else warp_spectrum(x, sr, a, self.n_fft)


@attrs.define(kw_only=True)
class SpeedChange(_VoiceAnonymizer):
    """Speed perturbation: play the utterance ``factor`` times faster (resampling: tempo and pitch both scale).

    The sample rate is kept, and so is the length: a faster utterance is padded with silence at the end, a
    slower one is truncated (its end is lost — keep factors near 1 or the content suffers)."""

    id: ClassVar[str] = "voice.speed"

    factor: float = param(1.1, help="speed factor (>1 faster and higher, <1 slower and lower)", low=0.5, high=2.0)

    def _one(self, x, sr, subject, sample_id):
        if self.factor == 1.0 or len(x) < 2:
            return x
        from fractions import Fraction

        from scipy.signal import resample_poly

        fr = Fraction(1.0 / self.factor).limit_denominator(200)
        y = resample_poly(x.astype(np.float64), fr.numerator, fr.denominator)
        y = y[: len(x)]
        return np.pad(y, (0, len(x) - len(y))).astype(np.float32)


@attrs.define(kw_only=True)
class AdditiveNoise(_VoiceAnonymizer):
    """Additive noise at a target signal-to-noise ratio per utterance (white, or pink = 1/f power), seeded by
    ``seed`` and the sample id."""

    id: ClassVar[str] = "voice.noise"

    snr_db: float = param(10.0, help="target SNR in dB", low=-30.0, high=100.0)
    color: str = param("white", help="noise colour", choices=("white", "pink"))
    seed: int = param(0, help="random seed")

    def _one(self, x, sr, subject, sample_id):
        rng = sample_rng(self.seed, sample_id)
        e = rng.standard_normal(len(x))
        if self.color == "pink" and len(x) > 2:
            spec = np.fft.rfft(e)
            f = np.arange(len(spec), dtype=np.float64)
            f[0] = 1.0
            e = np.fft.irfft(spec / np.sqrt(f), len(x))
        p_sig = float(np.mean(np.square(x, dtype=np.float64))) if len(x) else 0.0
        p_noise = float(np.mean(e * e)) if len(x) else 1.0
        if p_sig == 0 or p_noise == 0:
            return x
        g = np.sqrt(p_sig / (p_noise * 10 ** (self.snr_db / 10.0)))
        return (x + g * e).astype(np.float32)
