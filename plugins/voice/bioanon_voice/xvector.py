"""``voice.xvector``: an x-vector network trained from scratch (PyTorch, imported lazily).

Log-mel frames (per-utterance mean normalized) → a TDNN (dilated 1-D convolutions with batch norm, the
``backbone``) → statistics pooling (mean and standard deviation over time) → a linear embedding. ``fit`` trains
it on the attacker's training speakers on random fixed-length crops, with an additive angular margin (ArcFace /
AAM-softmax) loss or, as in Snyder et al. (2018), a softmax over the speakers after a further hidden layer;
``enroll`` stores each enrolled class's normalized mean embedding and ``score`` is the cosine similarity to those
centroids, so speakers never seen in training can be enrolled. ``preset = "paper"`` gives the network of Snyder
et al.'s Table 1 (see :class:`XVector`). Deterministic for a seed on one device (torch's global RNG is forked and
restored, crops and batches come from a seeded numpy generator). Trains and infers on ``device`` (the run's by
default; the training frames are staged there once and cropped there) with ``precision`` autocast.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    CentroidRecognizer,
    arcface_head,
    batch_rows,
    device_param,
    fitted,
    import_torch,
    infer,
    labels_of,
    method_training,
    param,
    precision_param,
    preflight_weights,
    require_fitted,
    resolve_device,
    stage,
    train_net,
    weights_param,
)

from .dsp import audio_of, log_mel

_INSTALL = "pip install 'bioanon-voice[torch]'"


def _at_least(f: np.ndarray, frames: int) -> np.ndarray:
    """``f`` (n_mels, T) tiled along time to at least ``frames`` frames."""
    t = f.shape[1]
    return f if t >= frames else np.tile(f, (1, int(np.ceil(frames / t))))


def _build(
    torch: Any,
    n_mels: int,
    channels: int,
    pool: int,
    frame_layers: int,
    emb: int,
    n_classes: int,
    loss: str,
    margin: float,
    scale: float,
):
    nn = torch.nn
    F = torch.nn.functional
    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class Segment7Softmax(module):
        """Snyder et al.'s training head: ReLU, BN, segment7 (emb → emb), ReLU, BN, a softmax over speakers."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential(
                nn.ReLU(),
                nn.BatchNorm1d(emb),
                nn.Linear(emb, emb),
                nn.ReLU(),
                nn.BatchNorm1d(emb),
                nn.Linear(emb, n_classes),
            )

        def forward(self, e, labels=None):
            return self.layers(e)

        def loss(self, e, y):
            return F.cross_entropy(self.layers(e), y)

    class XVectorNet(module):
        """TDNN frame layers (``backbone``) → mean+std pooling → embedding (segment6); a training head."""

        def __init__(self) -> None:
            super().__init__()
            c = channels
            layers = [
                nn.Conv1d(n_mels, c, 5, padding=2),
                nn.ReLU(),
                nn.BatchNorm1d(c),  # frame1 [t-2, t+2]
                nn.Conv1d(c, c, 3, dilation=2, padding=2),
                nn.ReLU(),
                nn.BatchNorm1d(c),  # frame2 {t-2, t, t+2}
                nn.Conv1d(c, c, 3, dilation=3, padding=3),
                nn.ReLU(),
                nn.BatchNorm1d(c),  # frame3 {t-3, t, t+3}
            ]
            if frame_layers == 5:
                layers += [nn.Conv1d(c, c, 1), nn.ReLU(), nn.BatchNorm1d(c)]  # frame4 {t}
            layers += [nn.Conv1d(c, pool, 1), nn.ReLU(), nn.BatchNorm1d(pool)]  # the last frame layer {t}
            self.backbone = nn.Sequential(*layers)
            self.embedding = nn.Linear(2 * pool, emb)
            self.head = (
                Segment7Softmax() if loss == "softmax" else arcface_head(emb, n_classes, margin=margin, scale=scale)
            )

        def embed(self, x):  # (B, n_mels, T) -> (B, emb)
            h = self.backbone(x)
            stats = torch.cat([h.mean(dim=2), torch.sqrt(h.var(dim=2, unbiased=False) + 1e-5)], dim=1)
            return self.embedding(stats)

        def loss(self, x, y):
            return self.head.loss(self.embed(x), y)

    return XVectorNet()


_FAST = {
    "n_mels": 30,
    "channels": 64,
    "frame_layers": 4,
    "pool_channels": 0,
    "embedding_dim": 64,
    "loss": "aam",
    "epochs": 30,
    "batch_size": 32,
    "crop_frames": 60,
    "learning_rate": 0.002,
    "weight_decay": 1e-4,
    "threads": 1,
}
_PAPER = {
    "n_mels": 24,
    "channels": 512,
    "frame_layers": 5,
    "pool_channels": 1500,
    "embedding_dim": 512,
    "loss": "softmax",
    "epochs": 60,
    "batch_size": 64,
    "crop_frames": 300,
    "learning_rate": 0.001,
    "weight_decay": 1e-4,
    "threads": 0,
}


@attrs.define(kw_only=True)
class XVector(CentroidRecognizer):
    """An x-vector speaker embedding network (TDNN + statistics pooling) trained from scratch on the attacker's
    training speakers; cosine to enrolled centroids.

    Needs PyTorch (``pip install 'bioanon-voice[torch]'``), which a plain install of bioanon-voice does not
    pull. ``preset = "fast"`` (the defaults) is tiny: four frame layers of 64 channels, 64-d embeddings, 0.6 s
    crops, an AAM-softmax loss, 30 epochs, one torch thread — seconds to a minute on a few hundred utterances.
    ``preset = "paper"`` is the x-vector network of Snyder et al., "X-vectors: robust DNN embeddings for speaker
    recognition", ICASSP 2018, Table 1:
    24 filter-bank channels (frame1's input is 5 × 24), frame1–frame3 with contexts [t-2, t+2], {t-2, t, t+2} and
    {t-3, t, t+3} and frame4 ({t}) of 512 channels, frame5 ({t}) of 1500 channels into statistics pooling (3000
    values), segment6 (3000 → 512, the x-vector, taken before its ReLU), and for training only segment7 (512 →
    512) and a softmax over the training speakers (multiclass cross-entropy). Crops are 3 s (300 frames of 10 ms;
    shorter utterances are tiled), the middle of the 2–4 s training chunks of the paper's Kaldi recipe. (The
    x-vector paper is not in ``shared/papers``; the architecture values are those of its Table 1.) Table 1 gives
    no optimizer, and the recipe's (natural-gradient SGD, 3 epochs over millions of augmented chunks of thousands
    of speakers, several chunks per recording) has no counterpart on attacker sets of hundreds to thousands of
    utterances with one crop per utterance per epoch. The preset uses Adam at lr 0.001 annealed to 0 (cosine;
    the recipe also decays its rate tenfold), minibatches of 64 (the recipe's) and 60 epochs — each utterance is
    seen under 60 random crops, far fewer examples than the recipe's 3 epochs give, so more passes —, with
    weight decay 1e-4. Parameters set explicitly win over the preset's. The paper network and its 3 s crops are
    meant for a GPU (``device``).

    ``weights``: the user's pretrained weights (a state dict of this network, e.g. saved from a fitted
    ``model_``; the training head is not loaded) to fine-tune from; ``freeze`` keeps their TDNN frame layers
    fixed. Runs on ``device`` with ``precision`` autocast."""

    id: ClassVar[str] = "voice.xvector"
    requires: ClassVar[dict[str, str]] = {"torch": _INSTALL}
    trait: ClassVar[str] = "voice"
    payloads: ClassVar[tuple[str, ...]] = ("audio",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = "x-vectors Table 1; arcface"
    example_params: ClassVar[dict] = {"epochs": 2, "channels": 8, "embedding_dim": 8, "crop_frames": 20}
    presets: ClassVar[dict[str, dict[str, Any]]] = {"fast": _FAST, "paper": _PAPER}

    preset: str = param(
        "fast",
        help="fast: small CPU-friendly network (the defaults); paper: Snyder et al. 2018 "
        "Table 1 (512-channel TDNN, 1500-channel pooling, 512-d x-vector, softmax, 3 s crops)",
        choices=("fast", "paper"),
    )
    n_mels: int = param(30, help="log mel bands per frame", low=8, high=128)
    channels: int = param(64, help="TDNN channels of the frame layers before the last", low=4)
    frame_layers: int = param(
        4,
        help="TDNN frame layers: 4 (three context layers, one 1×1 layer) or 5 (Table 1: frame4 and frame5 are 1×1)",
        choices=(4, 5),
    )
    pool_channels: int = param(
        0, help="channels of the last frame layer, fed to statistics pooling (0 = 2 × channels)", low=0
    )
    embedding_dim: int = param(64, help="embedding dimension", low=2)
    loss: str = param(
        "aam",
        help="training loss: aam (additive angular margin softmax) or softmax (cross-entropy "
        "after a hidden segment7 layer, as in Snyder et al.)",
        choices=("aam", "softmax"),
    )
    epochs: int = param(30, help="training epochs", low=1)
    batch_size: int = param(32, help="utterances per batch", low=2)
    crop_frames: int = param(60, help="training crop length in 10 ms frames (shorter utterances are tiled)", low=8)
    margin: float = param(0.2, help="additive angular margin m (radians; loss = aam)", low=0.0, high=1.0)
    scale: float = param(30.0, help="logit scale s of the AAM-softmax (loss = aam)", low=1.0)
    learning_rate: float = param(0.002, help="Adam learning rate (cosine-annealed)", low=0.0, low_inclusive=False)
    weight_decay: float = param(1e-4, help="Adam weight decay", low=0.0)
    seed: int = param(0, help="random seed (initialization, crops, batches)")
    threads: int = param(
        1,
        help="torch intra-op threads (0 = all cores). The fast preset's small batches run "
        "fastest on one: on two busy cores, two threads made a fit ten times slower; the paper "
        "preset uses every core",
        low=0,
        affects_output=False,
    )
    device: str = device_param()
    precision: str = precision_param()
    weights: str = weights_param()
    freeze: bool = param(
        False, help="keep the pretrained TDNN frame layers fixed (train only the embedding layer and the training head)"
    )

    model_: Any = fitted()
    device_: str | None = fitted()

    def _frames(self, table) -> list[np.ndarray]:
        audio, sr = audio_of(table)
        out = []
        for a in audio:
            f = log_mel(a, sr, self.n_mels)
            out.append((f - f.mean(0)).T.astype(np.float32))  # (n_mels, T), per-utterance mean normalized
        return out

    def _builder(self, torch: Any, n_classes: int):
        pool = self.pool_channels or 2 * self.channels
        return lambda: _build(
            torch,
            self.n_mels,
            self.channels,
            pool,
            self.frame_layers,
            self.embedding_dim,
            n_classes,
            self.loss,
            self.margin,
            self.scale,
        )

    def preflight(self, table) -> list[str]:
        """Problems found before any work: torch missing, or a ``weights`` file that does not fit the network
        (checked on torch's meta device)."""
        return preflight_weights(self, lambda torch: self._builder(torch, 2)())

    def fit(self, train, label: str = "subject"):
        torch = import_torch(self.id, _INSTALL)
        dev = resolve_device(self.device, who=self.id)
        crop = self.crop_frames
        feats = [_at_least(f, crop) for f in self._frames(train)]  # short utterances tiled, as cropped before
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        lengths = np.array([f.shape[1] for f in feats], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        # every utterance's frames one after another, (total frames, n_mels), staged on the device once
        flat = stage(torch.from_numpy(np.ascontiguousarray(np.concatenate(feats, axis=1).T)), dev)
        yt = stage(torch.from_numpy(y.astype(np.int64)), dev)
        steps = torch.arange(crop, device=flat.device)

        def batch(idx: np.ndarray, rng: np.random.Generator):
            first = starts[idx] + rng.integers(0, lengths[idx] - crop + 1)  # a random crop of each utterance
            rows = batch_rows(first, flat)[:, None] + steps  # (B, crop) frame indices
            return flat[rows].transpose(1, 2), yt[batch_rows(idx, yt)]  # (B, n_mels, crop)

        net = train_net(
            self._builder(torch, max(len(classes), 2)),
            batch,
            len(feats),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.learning_rate,
            weight_decay=self.weight_decay,
            scheduler="cosine",
            install=_INSTALL,
            **method_training(self, train, label=label, device=dev),
        ).net
        self.model_, self.device_ = net, dev
        return self

    def is_fitted(self) -> bool:
        return self.model_ is not None

    def embed(self, table) -> np.ndarray:
        require_fitted(self, "model_", call="fit() or enroll()", before="embed()")
        import_torch(self.id, _INSTALL)
        # utterances of one length form one batch (no padding, which would change the statistics pooling)
        frames = [_at_least(f, 8) for f in self._frames(table)]
        e = infer(
            self.model_.embed,
            frames,
            out_shape=(self.embedding_dim,),
            batch_size=64,
            threads=self.threads,
            device=cast(str, self.device_),
            precision=self.precision,
        )
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
