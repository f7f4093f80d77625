"""Signal anonymizers: McAdams reconstruction at α = 1, formant movement at α ≠ 1, lengths and rates kept."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.table import SampleTable
from bioanon_voice.anonymizers import AdditiveNoise, FrequencyWarp, McAdams, PitchShift, SpeedChange, mcadams
from bioanon_voice.dsp import frames, lpc, poly_roots
from bioanon_voice.synthetic import synth_vowels

SR = 8000


def _vowel(f1=730, f2=1090, f3=2440, f0=120.0, seconds=0.5, seed=0):
    rng = np.random.default_rng(seed)
    n = int(SR * seconds)
    return synth_vowels(np.array([[f1, f2, f3]], float), np.full(n, f0), SR, rng, breath=0.005).astype(np.float32)


def _table(signals):
    return SampleTable.from_arrays(
        subject=[f"s{i % 2}" for i in range(len(signals))], payloads={"audio": signals}, metadata={"sample_rate": SR}
    )


def _snr(x, y):
    return 10 * np.log10(np.sum(x.astype(float) ** 2) / max(np.sum((x.astype(float) - y) ** 2), 1e-30))


def _formant_angles(x, order=12):
    """Angles (Hz) of the LPC poles of the middle of the signal, sorted, positive half only."""
    n = len(x)
    fr = frames(x[n // 4 : 3 * n // 4].astype(float) * 1.0, 256, 128) * np.hanning(256)
    roots = poly_roots(lpc(fr, order))
    ang = np.angle(roots)
    ang = ang[(np.abs(roots.imag) > 1e-9) & (ang > 0) & (np.abs(roots) > 0.85)]
    return np.sort(ang) * SR / (2 * np.pi)


def _centroid(x):
    spec = np.abs(np.fft.rfft(x.astype(float))) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    return float((f * spec).sum() / spec.sum())


def test_mcadams_alpha_one_reconstructs():
    x = _vowel()
    y = mcadams(x, SR, 1.0)
    snr = _snr(x, y)
    print(f"\nMcAdams alpha=1 reconstruction SNR: {snr:.1f} dB")
    assert len(y) == len(x)
    assert snr > 40, f"alpha=1 reconstruction SNR {snr:.1f} dB"


@pytest.mark.parametrize("alpha,direction", [(0.8, +1), (1.2, -1)])
def test_mcadams_moves_formants(alpha, direction):
    x = _vowel()
    y = mcadams(x, SR, alpha)
    fx, fy = _formant_angles(x), _formant_angles(y)
    low_x, low_y = fx[fx < 1500].mean(), fy[fy < 1500].mean()  # F1/F2 region: φ^α moves angles < 1 rad most
    cx, cy = _centroid(x), _centroid(y)
    assert direction * (low_y - low_x) > 50, f"alpha={alpha}: low pole angles {low_x:.0f} -> {low_y:.0f} Hz"
    assert direction * (cy - cx) > 30, f"alpha={alpha}: spectral centroid {cx:.0f} -> {cy:.0f} Hz"
    assert _snr(x, y) < 10


def test_mcadams_per_speaker_alpha_is_seeded():
    m = McAdams(alpha_range=(0.6, 0.9), seed=3)
    a, b = m.alpha_for("spk1"), m.alpha_for("spk2")
    assert 0.6 <= a <= 0.9 and a != b and a == McAdams(alpha_range=(0.6, 0.9), seed=3).alpha_for("spk1")


@pytest.mark.parametrize(
    "method",
    [
        McAdams(),
        McAdams(alpha_range=(0.6, 0.9)),
        PitchShift(),
        FrequencyWarp(),
        SpeedChange(factor=1.2),
        SpeedChange(factor=0.8),
        AdditiveNoise(),
    ],
)
def test_lengths_and_rate_kept(method):
    sig = [_vowel(seconds=s, seed=i) for i, s in enumerate((0.13, 0.31, 0.5))]
    out = method.transform(_table(sig))
    assert out.metadata["sample_rate"] == SR
    assert [len(a) for a in out.payload("audio")] == [len(a) for a in sig]
    assert all(np.all(np.isfinite(a)) for a in out.payload("audio"))
    assert any(not np.allclose(a, b) for a, b in zip(out.payload("audio"), sig, strict=True))


def test_noise_hits_target_snr():
    x = _vowel()
    y = AdditiveNoise(snr_db=5.0).transform(_table([x])).payload("audio")[0]
    assert abs(_snr(x, y) - 5.0) < 0.5


def test_frequency_warp_raises_centroid():
    x = _vowel()
    up = FrequencyWarp(alpha=1.2).transform(_table([x])).payload("audio")[0]
    assert _centroid(up) > _centroid(x) + 50
