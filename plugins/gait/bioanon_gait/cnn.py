"""``gait.cnn``: a small temporal convolutional network trained from scratch (PyTorch, imported lazily).

``fit`` trains the network on the attacker's training set with a classification head over the training
subjects (cross-entropy with label smoothing; random temporal crops and jitter as augmentation). The layer
before the head is the embedding: ``enroll`` stores each enrolled class's normalized mean embedding and
``score`` is the cosine similarity to those centroids, so subjects never seen in training can be enrolled
(the evaluation's gallery subjects are disjoint from the attacker's). Deterministic for a seed on one device
(torch's global RNG is forked and restored; batches and crops come from a seeded numpy generator, the jitter
from a seeded torch generator on the device). Trains and infers on ``device`` (the run's by default; the
training tensors are staged there once, crops and jitter are made there) with ``precision`` autocast, through
:func:`bioanon.nettrain.train_net` and :func:`bioanon.nettrain.infer`; ``threads`` CPU threads.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    CentroidRecognizer,
    cuda_graphs_param,
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
    softmax_head,
    stage,
    take_rows,
    to_device,
    train_net,
    weights_param,
)

from .features import CENTERING_HELP, Centering, center
from .skeleton import poses

_INSTALL = "pip install 'bioanon-gait[torch]'"


def _build_net(torch: Any, c_in: int, channels: int, emb: int, n_classes: int, dropout: float) -> Any:
    """The network (built inside a function so torch is imported only when the method runs)."""
    nn = torch.nn
    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class TemporalNet(module):
        """Dilated 1-D convolutions over time (``backbone``), mean+max pooling, a linear embedding, a
        classification head."""

        def __init__(self) -> None:
            super().__init__()
            c = channels
            self.backbone = nn.Sequential(
                nn.Conv1d(c_in, c, 5, padding=2),
                nn.BatchNorm1d(c),
                nn.ReLU(),
                nn.Conv1d(c, c, 5, padding=4, dilation=2),
                nn.BatchNorm1d(c),
                nn.ReLU(),
                nn.Conv1d(c, 2 * c, 3, padding=4, dilation=4),
                nn.BatchNorm1d(2 * c),
                nn.ReLU(),
            )
            self.embedding = nn.Linear(4 * c, emb)
            self.head = softmax_head(emb, n_classes, dropout=dropout, label_smoothing=0.1)

        def embed(self, x):
            h = self.backbone(x)
            return self.embedding(torch.cat([h.mean(dim=-1), h.amax(dim=-1)], dim=1))

        def forward(self, x):
            return self.head(self.embed(x))

        def loss(self, x, y):
            return self.head.loss(self.embed(x), y)

    return TemporalNet()


_FREEZE_HELP = (
    "keep the pretrained convolutional backbone fixed (train only the embedding layer and the classification head)"
)


@attrs.define(kw_only=True)
class TemporalCnn(CentroidRecognizer):
    """Temporal CNN trained from scratch on the attacker's training set; cosine to enrolled class centroids.

    Input: translation-invariant poses (``centering``) as ``joints · 3`` channels over time, standardized per
    channel with training statistics. Three dilated convolution blocks (the ``backbone``), mean and max pooling
    over time, a linear embedding of ``embedding_dim``; a classification head over the training subjects is
    used only for training. ``weights``: the user's pretrained weights (a state dict of this network, e.g. saved
    from a fitted ``model_``; the head is not loaded) to fine-tune from, ``freeze`` keeps their backbone fixed.
    Runs on ``device`` with ``precision`` autocast. Needs PyTorch (imported when the method runs, not when it
    is listed)."""

    id: ClassVar[str] = "gait.cnn"
    requires: ClassVar[dict[str, str]] = {"torch": _INSTALL}
    trait: ClassVar[str] = "gait"
    payloads: ClassVar[tuple[str, ...]] = ("pose",)
    has_embedding: ClassVar[bool] = True
    example_params: ClassVar[dict] = {"epochs": 2, "channels": 8, "embedding_dim": 8}

    centering: Centering = param("frame", help=CENTERING_HELP)
    channels: int = param(48, help="convolution channels of the first blocks (the last has twice as many)", low=2)
    embedding_dim: int = param(64, help="embedding size", low=2)
    epochs: int = param(60, help="training epochs", low=1)
    batch_size: int = param(32, help="training batch size", low=2)
    learning_rate: float = param(2e-3, help="Adam learning rate", low=0.0, low_inclusive=False)
    weight_decay: float = param(1e-4, help="Adam weight decay", low=0.0)
    dropout: float = param(0.2, help="dropout before the classification head", low=0.0, high=1.0, high_inclusive=False)
    augment: bool = param(True, help="random temporal crops (75-100 %) and jitter during training")
    seed: int = param(0, help="random seed (initialization, batches, augmentation)")
    threads: int = param(0, help="CPU threads (0 = all cores)", low=0, affects_output=False)
    device: str = device_param()
    precision: str = precision_param()
    cuda_graphs: bool = cuda_graphs_param()
    weights: str = weights_param()
    freeze: bool = param(False, help=_FREEZE_HELP)

    model_: Any = fitted()
    mean_: np.ndarray | None = fitted()
    std_: np.ndarray | None = fitted()
    device_: str | None = fitted()

    def _inputs(self, table) -> np.ndarray:
        """``(N, joints·3, T)`` float32 network inputs (standardized when fitted)."""
        x = center(poses(table), self.centering)
        x = x.reshape(x.shape[0], x.shape[1], -1).transpose(0, 2, 1)
        if self.mean_ is not None:
            x = (x - self.mean_) / self.std_
        return np.ascontiguousarray(x, dtype=np.float32)

    def _builder(self, torch: Any, c_in: int, n_classes: int):
        return lambda: _build_net(torch, c_in, self.channels, self.embedding_dim, n_classes, self.dropout)

    def preflight(self, table) -> list[str]:
        """Problems found before any work: torch missing, or a ``weights`` file that does not fit the network
        built for ``table``'s joints (checked on torch's meta device)."""
        shape = table.payload_shape("pose") if "pose" in table.payload_names else (None,)
        if None in shape:  # no (fixed-shape) pose payload: the data checks report it
            return preflight_weights(self, None)
        return preflight_weights(self, lambda torch: self._builder(torch, int(np.prod(shape[1:])), 2)())

    def fit(self, train, label: str = "subject"):
        torch = import_torch(self.id, _INSTALL)
        dev = resolve_device(self.device, who=self.id)
        raw = center(poses(train), self.centering)
        raw = raw.reshape(raw.shape[0], raw.shape[1], -1).transpose(0, 2, 1)  # (N, C, T)
        self.mean_ = raw.mean(axis=(0, 2), keepdims=True)[0]
        self.std_ = np.maximum(raw.std(axis=(0, 2), keepdims=True)[0], 1e-6)
        x = ((raw - self.mean_) / self.std_).astype(np.float32)
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        n, c, t = x.shape
        xt, yt = stage(torch.from_numpy(x), dev), stage(torch.from_numpy(y.astype(np.int64)), dev)
        jitter = torch.Generator(device=dev).manual_seed(self.seed)

        def batch(idx: np.ndarray, rng: np.random.Generator):
            xb, yb = take_rows(idx, xt, yt)
            xb = to_device(xb, dev)
            if self.augment:
                length = int(rng.integers(max(4, int(0.75 * t)), t + 1))
                offset = int(rng.integers(0, t - length + 1))
                xb = xb[:, :, offset : offset + length]
                xb = xb + 0.05 * torch.randn(xb.shape, generator=jitter, device=dev, dtype=xb.dtype)
            return xb, yb

        net = train_net(
            self._builder(torch, c, max(len(classes), 2)),
            batch,
            n,
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
        e = infer(
            self.model_.embed,
            self._inputs(table),
            out_shape=(self.embedding_dim,),
            threads=self.threads,
            device=cast(str, self.device_),
            precision=self.precision,
        )
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
