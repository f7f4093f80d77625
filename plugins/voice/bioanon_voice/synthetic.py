"""``voice.synthetic``: a seeded source–filter speech synthesizer.

A glottal pulse train (speaker-specific F0 with a word-level contour and jitter) excites a cascade of
second-order formant resonators. Each "word" (attribute ``digit``) is a fixed sequence of three vowels with
word-specific formant targets (F1–F3); each speaker scales all formants by a speaker-specific vocal-tract
factor and has a speaker-specific breathiness. So identity lives in F0, formant scaling and voice quality,
spoken content in the formant sequence — what voice anonymization separates.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import DatasetSource, param

# (F1, F2, F3) of some vowels in Hz (adult male averages)
_VOWELS = np.array(
    [
        [730, 1090, 2440],  # a
        [270, 2290, 3010],  # i
        [300, 870, 2240],  # u
        [530, 1840, 2480],  # e
        [570, 840, 2410],  # o
        [660, 1720, 2410],  # ae
        [440, 1020, 2240],  # schwa-ish
        [390, 1990, 2550],  # I
    ],
    dtype=np.float64,
)
_BANDWIDTHS = np.array([80.0, 100.0, 140.0])


def resonator(x: np.ndarray, f: float, bw: float, sr: int) -> np.ndarray:
    """A second-order resonator (unit gain at DC) at frequency ``f`` with bandwidth ``bw``."""
    from scipy.signal import lfilter

    r = np.exp(-np.pi * bw / sr)
    theta = 2 * np.pi * f / sr
    a = [1.0, -2 * r * np.cos(theta), r * r]
    return lfilter([sum(a)], a, x)


def synth_vowels(
    formants: np.ndarray, f0: np.ndarray, sr: int, rng: np.random.Generator, breath: float = 0.02
) -> np.ndarray:
    """Synthesize a sequence of vowel segments: ``formants`` (V, 3) Hz, ``f0`` per-sample contour (N,)."""
    n = len(f0)
    phase = np.cumsum(f0 / sr)
    pulses = np.diff(np.floor(phase), prepend=0.0)  # an impulse at each new period
    src = np.convolve(pulses, np.hanning(max(3, int(sr * 0.002))), mode="same")  # smoothed glottal pulse
    src = src + breath * rng.standard_normal(n)
    seg = np.array_split(np.arange(n), len(formants))
    out = np.zeros(n)
    fade = max(8, int(0.01 * sr))
    for v, idx in enumerate(seg):
        lo, hi = max(0, idx[0] - fade), min(n, idx[-1] + 1 + fade)
        y = src[lo:hi]
        for k in range(3):
            if formants[v, k] < sr / 2 - 100:
                y = resonator(y, formants[v, k], _BANDWIDTHS[k], sr)
        w = np.ones(hi - lo)
        ramp = np.linspace(0, 1, fade)
        if lo > 0:
            w[:fade] = ramp
        if hi < n:
            w[-fade:] = ramp[::-1]
        out[lo:hi] += y * w
    env = np.sin(np.linspace(0, np.pi, n)) ** 0.5
    out = out * env
    return out / max(np.max(np.abs(out)), 1e-9) * 0.5


@attrs.define(kw_only=True)
class SyntheticVoice(DatasetSource):
    """Seeded source–filter speech: speakers differ in F0, vocal-tract (formant) scaling and breathiness;
    each utterance says one of ``n_words`` words (attribute ``digit``), a word-specific sequence of three
    vowels.

    Columns: ``audio`` (float32 at ``sample_rate``), attributes ``digit`` (per sample) and ``gender`` (per
    speaker, from the F0 range); with ``with_features`` also a ``features`` payload of MFCC statistics so the
    core's ``any.*`` methods run on it (``bioanon demo --trait voice`` runs the voice methods without it). Voice
    anonymizers transform the audio and drop that stale ``features`` payload."""

    id: ClassVar[str] = "voice.synthetic"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("digit", "gender")
    trait: ClassVar[str] = "voice"
    needs_path: ClassVar[bool] = False
    demo: ClassVar[dict[str, Any] | None] = {
        # `bioanon demo --trait voice`: this plugin's own methods (no torch, no ASR); 30 speakers leave 12 to
        # evaluate
        "params": {"n_speakers": 30, "with_features": False},
        "anonymizers": [
            {"id": "voice.mcadams", "grid": {"alpha": [0.9, 0.7]}},
            {"id": "voice.noise", "grid": {"snr_db": [20.0, 5.0]}},
        ],
        "recognizers": [{"id": "voice.svm"}, {"id": "voice.lda"}],
        "utility": [{"id": "voice.content_accuracy", "params": {"attribute": "digit"}}, {"id": "voice.sdr"}],
        "selection": {"selectors": ["random", "classification"], "subject_counts": [12, 6], "random_draws": 3},
    }

    n_speakers: int = param(20, help="number of speakers", low=2)
    utterances_per_speaker: int = param(10, help="utterances per speaker", low=1)
    n_words: int = param(5, help="number of distinct words (values of attr.digit)", low=2, high=10)
    duration: float = param(0.4, help="utterance duration in seconds", low=0.05, high=10.0)
    sample_rate: int = param(8000, help="sample rate in Hz", low=4000)
    speaker_spread: float = param(1.0, help="scale of the between-speaker differences (0 = all alike)", low=0.0)
    noise: float = param(0.005, help="additive white noise standard deviation", low=0.0)
    with_features: bool = param(True, help="also store MFCC statistics as a 'features' payload")
    seed: int = param(0, help="random seed")

    def load(self, path=None):
        from bioanon.api import SampleTable

        from .dsp import feature_stats

        rng = np.random.default_rng(self.seed)
        S, K, sr = self.n_speakers, self.utterances_per_speaker, self.sample_rate
        gender = rng.integers(0, 2, size=S)
        base_f0 = np.where(gender == 0, 120.0, 210.0)
        f0 = base_f0 * np.exp(self.speaker_spread * 0.15 * rng.standard_normal(S))
        scale = np.exp(self.speaker_spread * 0.08 * rng.standard_normal(S)) * np.where(gender == 0, 1.0, 1.15)
        breath = 0.01 + 0.04 * rng.random(S) * min(self.speaker_spread, 1.0)
        words = np.stack([_VOWELS[rng.choice(len(_VOWELS), 3, replace=False)] for _ in range(self.n_words)])
        n = int(round(self.duration * sr))
        audio, subj, digit = [], [], []
        for s in range(S):
            for k in range(K):
                w = int(rng.integers(self.n_words)) if K < self.n_words or k >= self.n_words else k
                contour = f0[s] * (1.0 + 0.08 * np.linspace(1, -1, n) + 0.01 * rng.standard_normal())
                contour *= 1 + 0.005 * rng.standard_normal(n).cumsum() / np.sqrt(n)
                formants = words[w] * scale[s] * (1 + 0.02 * rng.standard_normal((3, 3)))
                y = synth_vowels(formants, contour, sr, rng, breath[s])
                y = y + self.noise * rng.standard_normal(n)
                audio.append(y.astype(np.float32))
                subj.append(s)
                digit.append(w)
        subj = np.array(subj)
        width = len(str(S - 1))
        names = np.array([f"spk{i:0{width}d}" for i in range(S)])
        payloads = {"audio": audio}
        if self.with_features:
            payloads["features"] = feature_stats(audio, sr)
        return SampleTable.from_arrays(
            subject=names[subj],
            payloads=payloads,
            attributes={"digit": np.array(digit, dtype=np.int64), "gender": np.array(["male", "female"])[gender[subj]]},
            metadata={"trait": "voice", "source": self.id, "sample_rate": sr, "params": self.get_params()},
        )
