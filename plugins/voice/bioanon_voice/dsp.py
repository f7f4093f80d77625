"""Signal processing shared by the voice methods: framing, LPC (vectorized Levinson–Durbin), MFCC statistics,
per-sample seeding. numpy/scipy only (librosa is imported by the methods that need it)."""

from __future__ import annotations

import functools
import zlib

import numpy as np

EPS = 1e-10


def audio_of(table) -> tuple[list[np.ndarray], int]:
    """The ``audio`` payload (list of float32 arrays) and the table's sample rate."""
    from bioanon.api import TableError

    if "audio" not in table.payload_names:
        raise TableError(f"the table has no 'audio' payload; it has {table.payload_names}")
    sr = table.metadata.get("sample_rate")
    if not sr:
        raise TableError("the audio table has no 'sample_rate' in its metadata")
    x = table.payload("audio")
    return [np.asarray(a, dtype=np.float32) for a in x], int(sr)


def with_audio(table, audio: list[np.ndarray]):
    """The table with new audio (float32); a stale ``features`` payload derived from the old audio is dropped."""
    drop = "features" if "features" in table.payload_names else None
    return table.with_payload("audio", [np.asarray(a, dtype=np.float32) for a in audio], drop=drop)


def sample_rng(seed: int, key: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and a string key (sample id or subject): independent of table order."""
    return np.random.default_rng([seed, zlib.crc32(str(key).encode())])


def frames(x: np.ndarray, length: int, hop: int) -> np.ndarray:
    """(F, length) strided frames of ``x`` (zero-padded so that at least one frame exists)."""
    if len(x) < length:
        x = np.pad(x, (0, length - len(x)))
    n = 1 + (len(x) - length) // hop
    return np.lib.stride_tricks.sliding_window_view(x, length)[::hop][:n]


def lpc(frames_: np.ndarray, order: int) -> np.ndarray:
    """LPC polynomials ``a`` (F, order+1), ``a[:, 0] = 1``, of each frame (autocorrelation method,
    Levinson–Durbin vectorized over frames)."""
    f = frames_.astype(np.float64)
    n = f.shape[1]
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    spec = np.fft.rfft(f, nfft, axis=1)
    r = np.fft.irfft(np.abs(spec) ** 2, nfft, axis=1)[:, : order + 1]
    r[:, 0] = r[:, 0] * (1 + 1e-9) + EPS  # white-noise correction keeps the recursion stable on silence
    F = len(f)
    a = np.zeros((F, order + 1))
    a[:, 0] = 1.0
    err = r[:, 0].copy()
    for i in range(1, order + 1):
        acc = r[:, i] + np.einsum("fj,fj->f", a[:, 1:i], r[:, i - 1 : 0 : -1]) if i > 1 else r[:, i].copy()
        k = -acc / err
        a_prev = a[:, 1:i].copy()
        a[:, 1:i] = a_prev + k[:, None] * a_prev[:, ::-1]
        a[:, i] = k
        err = err * (1.0 - k * k)
        err = np.maximum(err, EPS)
    return a


def poly_roots(a: np.ndarray) -> np.ndarray:
    """Roots (F, p) of the polynomials ``a`` (F, p+1) with ``a[:, 0] = 1`` (batched companion eigenvalues)."""
    F, p1 = a.shape
    p = p1 - 1
    comp = np.zeros((F, p, p))
    comp[:, 0, :] = -a[:, 1:]
    comp[:, np.arange(1, p), np.arange(p - 1)] = 1.0
    return np.linalg.eigvals(comp)


def poly_from_roots(roots: np.ndarray) -> np.ndarray:
    """Monic polynomials (F, p+1) with the given roots (F, p) (real part: conjugate pairs give real
    coefficients)."""
    F, p = roots.shape
    c = np.zeros((F, p + 1), dtype=np.complex128)
    c[:, 0] = 1.0
    for k in range(p):
        c[:, 1 : k + 2] = c[:, 1 : k + 2] - roots[:, k : k + 1] * c[:, : k + 1]
    return c.real


@functools.lru_cache(maxsize=16)
def mel_filterbank(sr: int, n_fft: int, n_mels: int, fmin: float = 20.0, fmax: float | None = None) -> np.ndarray:
    """(n_mels, n_fft//2+1) triangular mel filters (HTK mel scale), area-normalized (Slaney style)."""
    fmax = fmax or sr / 2.0

    def mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def hz(m):
        return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)

    pts = hz(np.linspace(mel(fmin), mel(fmax), n_mels + 2))
    freqs = np.linspace(0, sr / 2.0, n_fft // 2 + 1)
    lo, ce, hi = pts[:-2, None], pts[1:-1, None], pts[2:, None]
    up = (freqs[None] - lo) / np.maximum(ce - lo, EPS)
    down = (hi - freqs[None]) / np.maximum(hi - ce, EPS)
    fb = np.maximum(0.0, np.minimum(up, down))
    fb *= 2.0 / np.maximum(hi - lo, EPS)
    return fb


def log_mel(x: np.ndarray, sr: int, n_mels: int = 40, win_ms: float = 25.0, hop_ms: float = 10.0) -> np.ndarray:
    """(T, n_mels) log mel filter-bank energies of one signal (Hamming window, pre-emphasis 0.97)."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) > 1:
        x = np.append(x[0], x[1:] - 0.97 * x[:-1])
    win = max(16, int(round(sr * win_ms / 1000.0)))
    hop = max(1, int(round(sr * hop_ms / 1000.0)))
    n_fft = 1 << int(np.ceil(np.log2(win)))
    fr = frames(x, win, hop) * np.hamming(win)
    power = np.abs(np.fft.rfft(fr, n_fft, axis=1)) ** 2
    fmax = min(sr / 2.0, 8000.0)
    return np.log(power @ mel_filterbank(sr, n_fft, n_mels, 20.0, fmax).T + 1e-8)


def mfcc(x: np.ndarray, sr: int, n_mfcc: int = 20, n_mels: int = 40) -> np.ndarray:
    """(T, n_mfcc) MFCCs (DCT-II of the log mel energies, orthonormal)."""
    from scipy.fft import dct

    return dct(log_mel(x, sr, n_mels), type=2, axis=1, norm="ortho")[:, :n_mfcc]


def frame_stats(feats: np.ndarray, deltas: bool = True, energy_quantile: float = 0.0) -> np.ndarray:
    """Mean and standard deviation over time of frame features (and of their first differences)."""
    if energy_quantile > 0 and len(feats) > 4:
        keep = feats[:, 0] >= np.quantile(feats[:, 0], energy_quantile)
        feats = feats[keep] if keep.sum() >= 2 else feats
    parts = [feats.mean(0), feats.std(0)]
    if deltas:
        d = np.diff(feats, axis=0) if len(feats) > 1 else np.zeros_like(feats)
        parts += [d.mean(0), d.std(0)]
    return np.concatenate(parts)


def feature_stats(
    audio: list[np.ndarray],
    sr: int,
    kind: str = "mfcc",
    n_coeffs: int = 20,
    n_mels: int = 40,
    deltas: bool = True,
    energy_quantile: float = 0.3,
) -> np.ndarray:
    """(N, D) float32 utterance statistics: mean+std of MFCCs (``kind="mfcc"``) or log mel energies
    (``kind="fbank"``), with their deltas; frames below the ``energy_quantile`` of the log energy (c0 / mean
    log-mel) are dropped as silence."""
    out = []
    for a in audio:
        if kind == "mfcc":
            f = mfcc(a, sr, n_coeffs, n_mels)
        else:
            f = log_mel(a, sr, n_mels)
            f = np.concatenate([f.mean(1, keepdims=True), f], axis=1)  # column 0 = energy for the silence gate
        out.append(frame_stats(f, deltas, energy_quantile))
    return np.asarray(out, dtype=np.float32)


def segment_features(
    audio: list[np.ndarray], sr: int, n_coeffs: int = 20, segments: int = 5, energy_quantile: float = 0.3
) -> np.ndarray:
    """(N, segments·n_coeffs + 2·n_coeffs) float32: MFCC means over ``segments`` equal stretches of the
    non-silent frames (the temporal order that spoken content needs), plus the utterance mean and std."""
    out = []
    for a in audio:
        f = mfcc(a, sr, n_coeffs)
        if len(f) > 4 and energy_quantile > 0:
            keep = f[:, 0] >= np.quantile(f[:, 0], energy_quantile)
            if keep.sum() >= 2:
                idx = np.flatnonzero(keep)
                f = f[idx[0] : idx[-1] + 1]
        parts = [s.mean(0) if len(s) else f.mean(0) for s in np.array_split(f, segments)]
        out.append(np.concatenate(parts + [f.mean(0), f.std(0)]))
    return np.asarray(out, dtype=np.float32)
