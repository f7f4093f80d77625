"""``voice.resemblyzer``: the pretrained Resemblyzer speaker encoder as an attacker (optional).

Resemblyzer ships its GE2E-trained LSTM weights inside its wheel, so nothing is downloaded. Install it with
``pip install --no-deps resemblyzer webrtcvad-wheels`` (its ``webrtcvad`` pin needs a C compiler; the wheels
package is the same module prebuilt; PyTorch and librosa are needed too). The plugin registers the method only
when resemblyzer, webrtcvad and torch are installed; they are imported when the method first embeds audio, and
the encoder is loaded once per process and device (``device``: the run's by default).
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import (
    CentroidRecognizer,
    MissingDependencyError,
    class_sums,
    device_param,
    import_torch,
    infer,
    param,
    precision_param,
    resolve_device,
    reuse_computed,
)

from .dsp import audio_of

_INSTALL = "pip install --no-deps resemblyzer webrtcvad-wheels (and torch)"
_ENCODERS: dict[str, Any] = {}  # concrete device -> encoder
_LOCK = threading.Lock()


def resemblyzer_available() -> bool:
    """Whether resemblyzer, webrtcvad and torch are installed (checked without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("resemblyzer", "webrtcvad", "torch"))


def _resemblyzer(method_id: str) -> Any:
    import_torch(method_id, _INSTALL)
    try:
        with warnings.catch_warnings():  # resemblyzer imports a deprecated scipy.ndimage path
            warnings.simplefilter("ignore", DeprecationWarning)
            import resemblyzer
    except ImportError as e:
        raise MissingDependencyError(method_id, {"resemblyzer": _INSTALL}, f"import failed: {e}") from None
    return resemblyzer


def encoder(method_id: str = "voice.resemblyzer", device: str = "cpu") -> Any:
    """The process-wide ``resemblyzer.VoiceEncoder`` on ``device`` (a concrete device, e.g. ``"cuda:0"``;
    loaded from the weights in resemblyzer's wheel on first use, in eval mode)."""
    with _LOCK:
        enc = _ENCODERS.get(device)
        if enc is None:
            r = _resemblyzer(method_id)
            enc = r.VoiceEncoder(device=device, verbose=False)
            enc.eval()
            _ENCODERS[device] = enc
    return enc


def preprocess(x: np.ndarray, sr: int) -> np.ndarray:
    """``resemblyzer.preprocess_wav(x, source_sr=sr)`` (resampling to 16 kHz, volume normalization, VAD
    trimming of long silences). When the VAD keeps less than one 30 ms window (e.g. a pure tone) or the signal
    is silent, the resampled signal without trimming is used instead, so every utterance gets an embedding."""
    import librosa
    from resemblyzer import hparams, preprocess_wav

    x = np.asarray(x, dtype=np.float32)
    target = hparams.sampling_rate
    if len(x) and np.any(x):
        with np.errstate(all="ignore"):
            w = preprocess_wav(x, source_sr=sr)
        if len(w) >= target * hparams.vad_window_length // 1000 and np.all(np.isfinite(w)):
            return np.asarray(w, dtype=np.float32)
    w = librosa.resample(x, orig_sr=sr, target_sr=target) if sr != target and len(x) > 1 else x
    return np.asarray(w if len(w) else np.zeros(1), dtype=np.float32)


@attrs.define(kw_only=True)
class Resemblyzer(CentroidRecognizer):
    """Pretrained Resemblyzer speaker encoder (GE2E LSTM, 256-d d-vectors); cosine to enrolled centroids.

    Each utterance is preprocessed as by ``resemblyzer.preprocess_wav`` (16 kHz, volume normalization, VAD
    trimming), cut into 1.6 s partial utterances (``rate`` per second, the last kept when it covers
    ``min_coverage``; short utterances are zero-padded to one partial), the partials of all utterances run
    through the encoder in batches of ``batch_size``, and each utterance's embedding is the L2-normalized mean
    of its partials' embeddings — ``VoiceEncoder.embed_utterance``, batched across utterances. ``fit`` learns
    nothing: the encoder was trained on thousands of speakers (VoxCeleb, LibriSpeech) and ships inside the
    wheel. A strong pretrained attacker in the sense of the False Sense of Privacy paper §4.3 (the naive and
    lazy attackers); it cannot adapt to anonymized speech (no parrot training). The encoder runs on ``device``
    (the run's by default), in fp32 unless ``precision`` asks for autocast (the published weights' embeddings;
    the partials are short, so reduced precision gains little).
    Needs ``pip install --no-deps resemblyzer webrtcvad-wheels`` and PyTorch."""

    id: ClassVar[str] = "voice.resemblyzer"
    requires: ClassVar[dict[str, str]] = {"torch": _INSTALL, "resemblyzer": _INSTALL, "webrtcvad": _INSTALL}
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)
    has_embedding: ClassVar[bool] = True
    embeds_per_sample: ClassVar[bool] = True  # a fixed encoder: [templates] embeds each data set once, in shards
    reference: ClassVar[str] = (
        "Wan et al., Generalized end-to-end loss for speaker verification, 2018; github:resemble-ai/Resemblyzer"
    )

    rate: float = param(
        1.3, help="partial utterances per second (≥ 0.625: the partials must cover the utterance)", low=0.625, high=20.0
    )
    min_coverage: float = param(
        0.75, help="keep the last partial if it covers this share of 1.6 s", low=0.0, low_inclusive=False, high=1.0
    )
    batch_size: int = param(64, help="partial utterances per encoder batch", low=1, affects_output=False)
    threads: int = param(
        1,
        help="torch intra-op threads (0 = all cores; the LSTM on short batches gains "
        "little from more, and loses much on a busy machine)",
        low=0,
        affects_output=False,
    )
    device: str = device_param()
    precision: str = precision_param("fp32")

    def fit(self, train: Any, label: str = "subject") -> Resemblyzer:
        """Nothing to learn: the encoder is pretrained."""
        return self

    def preflight(self, table: Any) -> list[str]:
        """Problems found before any work: resemblyzer, webrtcvad or torch missing."""
        if resemblyzer_available():
            return []
        return [f"{self.id} needs resemblyzer, webrtcvad and torch, which are not all installed: {_INSTALL}"]

    def embed(self, table: Any) -> np.ndarray:
        """(N, 256) L2-normalized utterance embeddings. The encoder is fixed, so the embeddings of the same
        utterances (the clear evaluation set under every anonymizer setting, the anonymized one under every
        scenario) are computed once per process and reused (:func:`bioanon.api.reuse_computed`), and kept per
        utterance in the run's cache: another split or other rates embed only the utterances not met before."""
        dev = resolve_device(self.device, who=self.id)
        audio, sr = audio_of(table)
        settings = {
            "rate": self.rate,
            "min_coverage": self.min_coverage,
            "batch_size": self.batch_size,
            "threads": self.threads,
            "precision": self.precision,
            "device": dev,
            "sample_rate": sr,
        }
        return reuse_computed(
            self.id + ":embed",
            settings,
            audio,
            lambda: self._embed(audio, sr, dev),
            rows=lambda idx: self._embed([audio[i] for i in idx], sr, dev),  # per utterance: kept per sample
        )

    def _embed(self, audio: list[np.ndarray], sr: int, dev: str) -> np.ndarray:
        enc = encoder(self.id, dev)
        from resemblyzer import audio as r_audio

        partials: list[np.ndarray] = []
        owner: list[int] = []
        for i, x in enumerate(audio):
            wav = preprocess(x, sr)
            wav_slices, mel_slices = enc.compute_partial_slices(len(wav), self.rate, self.min_coverage)
            stop = wav_slices[-1].stop
            if stop >= len(wav):
                wav = np.pad(wav, (0, stop - len(wav)))
            mel = r_audio.wav_to_mel_spectrogram(wav)
            partials.extend(mel[s] for s in mel_slices)
            owner.extend([i] * len(mel_slices))
        n = len(audio)
        if n == 0:
            return np.zeros((0, 256), dtype=np.float32)
        mels = np.stack(partials).astype(np.float32)
        e = infer(
            enc,
            mels,
            out_shape=(256,),
            batch_size=self.batch_size,
            threads=self.threads,
            device=dev,
            precision=self.precision,
        )
        e = np.nan_to_num(e)  # an all-zero partial has no direction (0/0 in the encoder)
        sums = class_sums(e, np.asarray(owner), n)
        return (sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)).astype(np.float32)
