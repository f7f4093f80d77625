"""``face.arcface``: a timm backbone trained from scratch with the ArcFace loss — the papers' "ArcFace Retrained".

``false-sense-of-privacy.txt`` §5.5–5.6 retrains ArcFace on the (anonymized) background identities so that the
recognizer adapts to the anonymization — the parrot attacker with a network that can actually learn it; the
Fantômas study (``fantomas.txt`` §6) identifies with ArcFace as well. Here the network is trained on the
attacker's training set (clear, or anonymized in the parrot scenario) with an additive angular margin loss
(:func:`bioanon.nettrain.arcface_head`, Deng et al. 2019) and scores by cosine similarity to enrolled class
centroids (:class:`~bioanon.methods.CentroidRecognizer`), so the gallery subjects need not be training subjects.

torch and timm are imported only when the method trains or embeds (``pip install 'bioanon-face[torch]'``). The
image helpers here (batch resizing with OpenCV, vectorized augmentation, the timm backbone) are shared with
``face.perceptual_similarity``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import param
from bioanon.errors import ParameterError
from bioanon.methods import CentroidRecognizer, fitted, labels_of
from bioanon.nettrain import arcface_head, infer, train_net
from bioanon.torchutil import import_torch

from .imageio import to_batch

INSTALL = "pip install 'bioanon-face[torch]'"


def import_timm(method_id: str) -> Any:
    """timm, or an ImportError naming the method and the install command."""
    try:
        import timm
    except ImportError:
        raise ImportError(f"{method_id} needs timm, which is not installed: {INSTALL}") from None
    return timm


def image_batch(images: np.ndarray, size: int, channels: int) -> np.ndarray:
    """uint8 (N, H, W, C) images → uint8 (N, channels, size, size): resized together with OpenCV (area
    interpolation when shrinking), grey expanded to or colour converted from (BT.601 luma) ``channels``."""
    x = np.asarray(images)
    if x.dtype != np.uint8:
        x = np.clip(np.rint(x.astype(np.float32)), 0, 255).astype(np.uint8)
    if x.ndim == 3:
        x = x[..., None]
    if len(x) == 0:
        return np.zeros((0, channels, size, size), np.uint8)
    out = to_batch(x[..., 0] if x.shape[-1] == 1 else x, (size, size), channels)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def augment(torch: Any, x: Any, rng: np.random.Generator, *, shift: float = 0.1, zoom: float = 0.1,
            brightness: float = 0.2, flip: bool = True) -> Any:
    """Random horizontal flips, shifts of up to ``shift`` of the image size, zooms of ±``zoom`` (one affine
    resampling, border pixels repeated) and brightness/contrast changes of ±``brightness``, vectorized over the
    batch ``x`` (float, N×C×H×W in 0..1). All randomness comes from ``rng``."""
    F = torch.nn.functional
    n = x.shape[0]
    s = 1.0 + rng.uniform(-zoom, zoom, n)
    sx = np.where(rng.random(n) < 0.5, -s, s) if flip else s
    t = rng.uniform(-2.0 * shift, 2.0 * shift, (2, n))  # affine_grid coordinates span 2 per image size
    theta = np.zeros((n, 2, 3), np.float32)
    theta[:, 0, 0], theta[:, 1, 1], theta[:, 0, 2], theta[:, 1, 2] = sx, s, t[0], t[1]
    grid = F.affine_grid(torch.from_numpy(theta), list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    gain = torch.from_numpy((1.0 + rng.uniform(-brightness, brightness, n)).astype(np.float32))
    offset = torch.from_numpy((0.5 * rng.uniform(-brightness, brightness, n)).astype(np.float32))
    return x * gain[:, None, None, None] + offset[:, None, None, None]


def build_backbone(torch: Any, name: str, in_chans: int, width: int, method_id: str) -> Any:
    """A timm model without classifier (``num_classes=0``, ``pretrained=False``: random initialization, never a
    download); ``width`` > 0 sets a timm ResNet's stage widths to (w, 2w, 4w, 8w) and its stem to w."""
    timm = import_timm(method_id)
    kwargs: dict[str, Any] = {"channels": (width, 2 * width, 4 * width, 8 * width), "stem_width": width} \
        if width else {}
    try:
        return timm.create_model(name, pretrained=False, num_classes=0, in_chans=in_chans, **kwargs)
    except RuntimeError as e:
        if "Unknown model" in str(e):
            raise ParameterError(method_id, "backbone", name, "a timm model name (timm.list_models())") from None
        raise
    except TypeError:
        if width:
            raise ParameterError(method_id, "width", width, f"0 for {name!r} (widths can be set for timm "
                                 "ResNets such as resnet18 only)") from None
        raise


def _build_net(torch: Any, m: "ArcFace", in_chans: int, n_classes: int) -> Any:
    nn = torch.nn

    class ArcFaceNet(nn.Module):
        """timm backbone → linear embedding with batch norm; ArcFace head for training."""

        def __init__(self) -> None:
            super().__init__()
            self.backbone = build_backbone(torch, m.backbone, in_chans, m.width, m.id)
            features = getattr(self.backbone, "head_hidden_size", None) or self.backbone.num_features
            self.neck = nn.Sequential(nn.Dropout(m.dropout), nn.Linear(features, m.embedding_dim),
                                      nn.BatchNorm1d(m.embedding_dim))
            self.head = arcface_head(m.embedding_dim, n_classes, margin=m.margin, scale=m.scale)

        def embed(self, x):
            return self.neck(self.backbone(x))

        def loss(self, x, y):
            return self.head.loss(self.embed(x), y)

    return ArcFaceNet()


@attrs.define(kw_only=True)
class ArcFace(CentroidRecognizer):
    """ArcFace Retrained: a timm backbone trained from scratch with the additive angular margin loss on the
    attacker's training set; cosine similarity to enrolled class centroids (false-sense-of-privacy.txt §5.5).

    Images are resized to ``size``×``size`` (OpenCV, in batch), scaled to 0..1 and standardized with the
    training set's mean and standard deviation; grey images train a one-channel network (colour probes are
    converted to grey, and grey probes expanded for a colour network). The backbone (``pretrained=False``) feeds
    a linear ``embedding_dim`` embedding with batch norm; the ArcFace head (margin m, scale s) over the training
    classes is used only for training: Adam, cosine learning-rate schedule, vectorized augmentation (flips,
    shifts, zooms, brightness/contrast). ``enroll`` without ``fit`` trains on the gallery. Deterministic for a
    ``seed`` (:func:`bioanon.nettrain.train_net`); CPU, ``threads`` torch threads; inference under
    ``torch.inference_mode``. The default ResNet-18 at width 16 (0.7 M parameters) trains on two cores."""

    id: ClassVar[str] = "face.arcface"
    requires: ClassVar[dict[str, str]] = {"torch": INSTALL, "timm": INSTALL}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = ("Deng et al., ArcFace: additive angular margin loss for deep face recognition, "
                                "CVPR 2019; false-sense-of-privacy.txt §5.5 (ArcFace Retrained)")
    example_params: ClassVar[dict] = {"epochs": 2, "size": 32, "width": 8, "embedding_dim": 16, "threads": 1}

    backbone: str = param("resnet18", help="timm model name, created with pretrained=False and num_classes=0 "
                          "(e.g. resnet18, resnet10t, mobilenetv3_small_050)")
    width: int = param(16, help="stage widths (w, 2w, 4w, 8w) and stem width of a timm ResNet backbone; 0 keeps "
                       "the model's own widths (required for other backbones)", low=0)
    size: int = param(64, help="input height and width in pixels (images are resized in batch)", low=16)
    embedding_dim: int = param(128, help="embedding size", low=2)
    epochs: int = param(40, help="training epochs", low=1)
    batch_size: int = param(16, help="images per training batch", low=2)
    lr: float = param(5e-3, help="Adam learning rate", low=0.0, low_inclusive=False)
    weight_decay: float = param(5e-4, help="Adam weight decay (L2)", low=0.0)
    margin: float = param(0.3, help="additive angular margin m (radians)", low=0.0, high=1.0)
    scale: float = param(16.0, help="logit scale s of the ArcFace loss (larger for thousands of classes)", low=1.0)
    dropout: float = param(0.2, help="dropout before the embedding layer", low=0.0, high=1.0, high_inclusive=False)
    augment: bool = param(True, help="random horizontal flips, shifts (10 %), zooms (±10 %) and brightness/"
                          "contrast changes (±20 %) during training")
    seed: int = param(0, help="random seed (initialization, batch order, augmentation)")
    threads: int = param(0, help="torch intra-op threads (0 = all cores)", low=0, affects_output=False)
    payload: str = param("", help="payload column (default: image)")

    model_: Any = fitted()
    channels_: int | None = fitted()
    mean_: float | None = fitted()
    std_: float | None = fitted()
    history_: list | None = fitted()

    def _images(self, table: Any, channels: int) -> np.ndarray:
        """uint8 (N, channels, size, size)."""
        return image_batch(table.payload(self.payload_column(table, self.payload or None)), self.size, channels)

    def fit(self, train, label: str = "subject"):
        torch = import_torch(self.id, INSTALL)
        import_timm(self.id)
        raw = train.payload(self.payload_column(train, self.payload or None))
        table_channels = raw.shape[-1] if raw.ndim == 4 else 1
        x = self._images(train, table_channels)
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        scaled = x.astype(np.float32) / 255.0
        mean, std = float(scaled.mean()), float(max(scaled.std(), 1e-3))
        xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

        def batch(idx: np.ndarray, rng: np.random.Generator):
            xb = xt[idx].float() / 255.0
            if self.augment:
                xb = augment(torch, xb, rng)
            return (xb - mean) / std, yt[idx]

        trained = train_net(lambda: _build_net(torch, self, table_channels, max(len(classes), 2)), batch, len(x),
                            epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                            weight_decay=self.weight_decay, scheduler="cosine", seed=self.seed,
                            threads=self.threads, method_id=self.id, install=INSTALL)
        self.model_, self.channels_, self.mean_, self.std_ = trained.net, table_channels, mean, std
        self.history_ = trained.history
        return self

    def is_fitted(self) -> bool:
        return self.model_ is not None

    def embed(self, table) -> np.ndarray:
        """L2-normalized embeddings (N, embedding_dim)."""
        if self.model_ is None:
            raise RuntimeError(f"{self.id}: fit() or enroll() before embed()")
        import_torch(self.id, INSTALL)
        x = self._images(table, self.channels_)
        mean, std = np.float32(self.mean_), np.float32(self.std_)
        e = infer(lambda t: self.model_.embed((t.float() / 255.0 - mean) / std), x,
                  out_shape=(self.embedding_dim,), batch_size=128, threads=self.threads)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
