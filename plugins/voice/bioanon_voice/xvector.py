"""``voice.xvector``: a small x-vector-style network trained from scratch (PyTorch, imported lazily).

Log-mel frames (per-utterance mean normalized) → a TDNN (dilated 1-D convolutions with batch norm) →
statistics pooling (mean and standard deviation over time) → a linear embedding. ``fit`` trains it on the
attacker's training speakers with an additive angular margin (ArcFace / AAM-softmax) loss on random fixed-
length crops; ``enroll`` stores each enrolled class's normalized mean embedding and ``score`` is the cosine
similarity to those centroids, so speakers never seen in training can be enrolled. Deterministic for a seed
(torch's global RNG is forked and restored, crops and batches come from a seeded numpy generator); CPU only,
``threads`` intra-op threads.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import param
from bioanon.methods import CentroidRecognizer, fitted, labels_of
from bioanon.nettrain import arcface_head, infer, train_net
from bioanon.torchutil import import_torch

from .dsp import audio_of, log_mel

_INSTALL = "pip install torch or bioanon-voice[xvector]"


def _at_least(f: np.ndarray, frames: int) -> np.ndarray:
    """``f`` (n_mels, T) tiled along time to at least ``frames`` frames."""
    t = f.shape[1]
    return f if t >= frames else np.tile(f, (1, int(np.ceil(frames / t))))


def _build(torch: Any, n_mels: int, channels: int, emb: int, n_classes: int, margin: float, scale: float):
    nn = torch.nn

    class XVector(nn.Module):
        """TDNN frames → mean+std pooling → embedding; AAM-softmax head for training."""

        def __init__(self) -> None:
            super().__init__()
            c = channels
            self.tdnn = nn.Sequential(
                nn.Conv1d(n_mels, c, 5, padding=2), nn.ReLU(), nn.BatchNorm1d(c),
                nn.Conv1d(c, c, 3, dilation=2, padding=2), nn.ReLU(), nn.BatchNorm1d(c),
                nn.Conv1d(c, c, 3, dilation=3, padding=3), nn.ReLU(), nn.BatchNorm1d(c),
                nn.Conv1d(c, 2 * c, 1), nn.ReLU(), nn.BatchNorm1d(2 * c),
            )
            self.embedding = nn.Linear(4 * c, emb)
            self.head = arcface_head(emb, n_classes, margin=margin, scale=scale)

        def embed(self, x):  # (B, n_mels, T) -> (B, emb)
            h = self.tdnn(x)
            stats = torch.cat([h.mean(dim=2), torch.sqrt(h.var(dim=2, unbiased=False) + 1e-5)], dim=1)
            return self.embedding(stats)

        def loss(self, x, y):
            return self.head.loss(self.embed(x), y)

    return XVector()


@attrs.define(kw_only=True)
class XVector(CentroidRecognizer):
    """A small x-vector-style speaker embedding network (TDNN + statistics pooling) trained from scratch with
    an additive angular margin loss on the attacker's training speakers; cosine to enrolled centroids.

    Needs PyTorch (``pip install torch``), which bioanon-voice does not install. Tiny by default (two cores,
    seconds to a minute on a few hundred utterances); ``epochs`` and ``channels`` trade time for accuracy."""

    id: ClassVar[str] = "voice.xvector"
    requires: ClassVar[dict[str, str]] = {"torch": _INSTALL}
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = ("Snyder et al., X-vectors: robust DNN embeddings for speaker recognition, 2018; "
                                "Deng et al., ArcFace, 2019")
    example_params: ClassVar[dict] = {"epochs": 2, "channels": 8, "embedding_dim": 8, "crop_frames": 20}

    n_mels: int = param(30, help="log mel bands per frame", low=8, high=128)
    channels: int = param(64, help="TDNN channels", low=4)
    embedding_dim: int = param(64, help="embedding dimension", low=2)
    epochs: int = param(30, help="training epochs", low=1)
    batch_size: int = param(32, help="utterances per batch", low=2)
    crop_frames: int = param(60, help="training crop length in 10 ms frames (shorter utterances are tiled)",
                             low=8)
    margin: float = param(0.2, help="additive angular margin m (radians)", low=0.0, high=1.0)
    scale: float = param(30.0, help="logit scale s of the AAM-softmax", low=1.0)
    learning_rate: float = param(0.002, help="Adam learning rate", low=0.0, low_inclusive=False)
    seed: int = param(0, help="random seed (initialization, crops, batches)")
    threads: int = param(0, help="torch intra-op threads (0 = all cores)", low=0, affects_output=False)

    model_: Any = fitted()

    def _frames(self, table) -> list[np.ndarray]:
        audio, sr = audio_of(table)
        out = []
        for a in audio:
            f = log_mel(a, sr, self.n_mels)
            out.append((f - f.mean(0)).T.astype(np.float32))  # (n_mels, T), per-utterance mean normalized
        return out

    def _crop(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        t = f.shape[1]
        if t < self.crop_frames:
            f = np.tile(f, (1, int(np.ceil(self.crop_frames / t))))
            t = f.shape[1]
        o = int(rng.integers(0, t - self.crop_frames + 1))
        return f[:, o : o + self.crop_frames]

    def fit(self, train, label: str = "subject"):
        torch = import_torch(self.id, _INSTALL)
        feats = self._frames(train)
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        yt = torch.from_numpy(y.astype(np.int64))

        def batch(idx: np.ndarray, rng: np.random.Generator):
            return torch.from_numpy(np.stack([self._crop(feats[i], rng) for i in idx])), yt[idx]

        net = train_net(
            lambda: _build(torch, self.n_mels, self.channels, self.embedding_dim, max(len(classes), 2),
                           self.margin, self.scale),
            batch, len(feats), epochs=self.epochs, batch_size=self.batch_size, lr=self.learning_rate,
            weight_decay=1e-4, scheduler="cosine", seed=self.seed, threads=self.threads, method_id=self.id,
            install=_INSTALL).net
        self.model_ = net
        return self

    def is_fitted(self) -> bool:
        return self.model_ is not None

    def embed(self, table) -> np.ndarray:
        if self.model_ is None:
            raise RuntimeError(f"{self.id}: fit() or enroll() before embed()")
        import_torch(self.id, _INSTALL)
        # utterances of one length form one batch (no padding, which would change the statistics pooling)
        frames = [_at_least(f, 8) for f in self._frames(table)]
        e = infer(self.model_.embed, frames, out_shape=(self.embedding_dim,), batch_size=64, threads=self.threads)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
