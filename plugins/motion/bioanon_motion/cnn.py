"""``motion.cnn``: a small 1-D convolutional network trained from scratch on ``imu`` windows.

``fit(train, label)`` trains the network with a classification head on the attacker's training set (identity or
any attribute); the head is then dropped and the penultimate layer is an embedding. ``enroll`` stores the
normalized mean embedding of every enrolled class and ``score`` is the cosine similarity of a probe's embedding
to those centroids — so subjects never seen in training can be enrolled and recognized (open-set, as the
evaluation requires: the attacker's training subjects are disjoint from the evaluation subjects).

torch is imported only when the method trains or scores. Training (:func:`bioanon.nettrain.train_net`) is
deterministic for a given ``seed`` on one device (initialization inside a forked, seeded torch RNG — the global
torch RNG is left untouched —, batch order from a seeded numpy generator). It trains and infers on ``device`` (the
run's by default; the training windows are staged there once) with ``precision`` autocast.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    CentroidRecognizer,
    DataError,
    TableError,
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
    train_net,
    weights_param,
)

__all__ = ["ImuCnn"]


_INSTALL = "pip install 'bioanon-motion[torch]'"


def _torch() -> Any:
    """The torch module, or an ImportError that says how to get it."""
    return import_torch("motion.cnn", _INSTALL)


def _build_model(n_channels: int, n_classes: int, width: int, embedding_dim: int) -> Any:
    """Conv1d(k7) → Conv1d(k5, /2) → Conv1d(k3, /2), each with batch norm and ReLU (the ``backbone``); global
    average and max pooling; a linear embedding layer; a linear classification head."""
    torch = _torch()
    nn = torch.nn
    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class Net(module):
        """The network: convolutional trunk, embedding layer, classification head."""

        def __init__(self) -> None:
            """Build the layers."""
            super().__init__()
            w = width
            self.backbone = nn.Sequential(
                nn.Conv1d(n_channels, w, 7, padding=3, bias=False),
                nn.BatchNorm1d(w),
                nn.ReLU(),
                nn.Conv1d(w, 2 * w, 5, stride=2, padding=2, bias=False),
                nn.BatchNorm1d(2 * w),
                nn.ReLU(),
                nn.Conv1d(2 * w, 2 * w, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm1d(2 * w),
                nn.ReLU(),
            )
            self.embedding = nn.Linear(4 * w, embedding_dim)
            self.head = softmax_head(embedding_dim, n_classes, dropout=0.2)

        def embed(self, x: Any) -> Any:
            """The embedding (before the head)."""
            h = self.backbone(x)
            return self.embedding(torch.cat([h.mean(dim=2), h.amax(dim=2)], dim=1))

        def forward(self, x: Any) -> Any:
            """Class logits (training only)."""
            return self.head(self.embed(x))

        def loss(self, x: Any, y: Any) -> Any:
            """Cross-entropy of the class logits."""
            return self.head.loss(self.embed(x), y)

    return Net()


@attrs.define(kw_only=True)
class ImuCnn(CentroidRecognizer):
    """A small 1-D CNN trained from scratch; cosine similarity of its embedding to enrolled class centroids.

    Three convolution blocks (batch norm, ReLU; strides 1, 2, 2) over time, global average and max pooling,
    a ``embedding_dim`` embedding and a softmax head used only for training (cross-entropy, AdamW, ``epochs``
    passes in mini-batches of ``batch_size``). Inputs are standardized per channel with the training set's
    statistics. Without ``fit``, ``enroll`` trains on the gallery. Scoring runs under ``torch.inference_mode``.
    ``weights``: the user's pretrained weights (a state dict of this network, e.g. saved from a fitted
    ``model_``; the head is not loaded) to fine-tune from; ``freeze`` keeps their convolutional backbone fixed.
    Runs on ``device`` with ``precision`` autocast."""

    id: ClassVar[str] = "motion.cnn"
    requires: ClassVar[dict[str, str]] = {"torch": _INSTALL}
    trait: ClassVar[str] = "motion"
    payloads: ClassVar[tuple[str, ...]] = ("imu",)
    has_embedding: ClassVar[bool] = True
    example_params: ClassVar[dict] = {"epochs": 2, "threads": 1}

    epochs: int = param(15, help="training passes over the training set", low=1)
    batch_size: int = param(64, help="mini-batch size (changes the optimization, so it is part of the result)", low=1)
    lr: float = param(3e-3, help="AdamW learning rate", low=0.0, low_inclusive=False)
    weight_decay: float = param(1e-4, help="AdamW weight decay", low=0.0)
    width: int = param(32, help="channels of the first convolution (the others have twice as many)", low=1)
    embedding_dim: int = param(64, help="embedding dimension", low=2)
    seed: int = param(0, help="random seed (initialization and batch order)")
    threads: int = param(
        0,
        help="torch CPU threads (0: every core; 1 is faster on a machine busy with other work)",
        low=0,
        affects_output=False,
    )
    payload: str = param("", help="payload column (default: imu)")
    device: str = device_param()
    precision: str = precision_param()
    cuda_graphs: bool = cuda_graphs_param()
    weights: str = weights_param()
    freeze: bool = param(
        False,
        help="keep the pretrained convolutional backbone fixed (train only the embedding "
        "layer and the classification head)",
    )

    model_: Any = fitted()
    mean_: np.ndarray | None = fitted()
    std_: np.ndarray | None = fitted()
    device_: str | None = fitted()

    def _x(self, table: Any) -> np.ndarray:
        """The windows (N, T, C) as float32."""
        x = np.asarray(table.payload(self.payload_column(table, self.payload or None)), dtype=np.float32)
        if x.ndim != 3:
            raise DataError(f"{self.id}: needs (window, channels) samples, got per-sample shape {x.shape[1:]}")
        return x

    def _input(self, x: np.ndarray) -> np.ndarray:
        """Standardized (N, C, T) float32 windows."""
        z = (x - self.mean_) / self.std_
        return np.ascontiguousarray(z.transpose(0, 2, 1), dtype=np.float32)

    def _builder(self, n_channels: int, n_classes: int):
        return lambda: _build_model(n_channels, n_classes, self.width, self.embedding_dim)

    def preflight(self, table) -> list[str]:
        """Problems found before any work: torch missing, or a ``weights`` file that does not fit the network
        built for ``table``'s channels (checked on torch's meta device)."""
        try:
            shape = table.payload_shape(self.payload_column(table, self.payload or None))
        except TableError:  # no such payload: the data checks report it
            shape = (None,)
        if len(shape) != 2 or None in shape:
            return preflight_weights(self, None)
        return preflight_weights(self, lambda torch: self._builder(int(shape[1]), 2)())

    def fit(self, train, label: str = "subject"):
        """Train the network on the training windows' labels (identity or an attribute)."""
        torch = _torch()
        dev = resolve_device(self.device, who=self.id)
        x = self._x(train)
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        flat = x.reshape(-1, x.shape[2])
        self.mean_ = flat.mean(axis=0).astype(np.float32)
        std = flat.std(axis=0)
        self.std_ = np.where(std > 1e-8, std, 1.0).astype(np.float32)
        inputs = stage(torch.from_numpy(self._input(x)), dev)
        targets = stage(torch.from_numpy(y.astype(np.int64)), dev)
        model = train_net(
            self._builder(x.shape[2], len(classes)),
            lambda idx, rng: take_rows(idx, inputs, targets),
            len(targets),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=self.weight_decay,
            optimizer="adamw",
            install=_INSTALL,
            **method_training(self, train, label=label, device=dev),
        ).net
        self.model_, self.device_ = model, dev
        return self

    def is_fitted(self) -> bool:
        return self.model_ is not None

    def embed(self, table) -> np.ndarray:
        """L2-normalized embeddings (N, embedding_dim)."""
        require_fitted(self, "model_", call="fit() or enroll()", before="embed()")
        _torch()
        e = infer(
            self.model_.embed,
            self._input(self._x(table)),
            out_shape=(self.embedding_dim,),
            batch_size=1024,
            threads=self.threads,
            dtype=np.float64,
            device=cast(str, self.device_),
            precision=self.precision,
        )
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
