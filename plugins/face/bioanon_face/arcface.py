"""``face.arcface``: a timm backbone trained from scratch with the ArcFace loss — the papers' "ArcFace Retrained".

The False Sense of Privacy paper §5.5–5.6 retrains ArcFace on the (anonymized) background identities so that the
recognizer adapts to the anonymization — the parrot attacker with a network that can actually learn it; the
Fantômas study (the Fantômas paper §6) identifies with ArcFace as well. Here the network is trained on the
attacker's training set (clear, or anonymized in the parrot scenario) with an additive angular margin loss
(:func:`bioanon.nettrain.arcface_head`, Deng et al. 2019) and scores by cosine similarity to enrolled class
centroids (:class:`~bioanon.methods.CentroidRecognizer`), so the gallery subjects need not be training subjects.

torch and timm are imported only when the method trains or embeds (``pip install 'bioanon-face[torch]'``). The
image helpers here (batch resizing with OpenCV, vectorized augmentation, the timm backbone) are shared with
``face.perceptual_similarity``.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    OPTIMIZERS,
    SCHEDULERS,
    CentroidRecognizer,
    MissingDependencyError,
    ParameterError,
    arcface_head,
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
    take_rows,
    to_device,
    train_net,
    weights_param,
)

from .imageio import to_batch

INSTALL = "pip install 'bioanon-face[torch]'"


def import_timm(method_id: str) -> Any:
    """timm, or a MissingDependencyError (an ImportError) naming the method and the install command."""
    try:
        import timm
    except ImportError:
        raise MissingDependencyError(method_id, {"timm": INSTALL}) from None
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


def augment(
    torch: Any,
    x: Any,
    rng: np.random.Generator,
    *,
    shift: float = 0.1,
    zoom: float = 0.1,
    brightness: float = 0.2,
    flip: bool = True,
) -> Any:
    """Random horizontal flips, shifts of up to ``shift`` of the image size, zooms of ±``zoom`` (one affine
    resampling, border pixels repeated) and brightness/contrast changes of ±``brightness``, vectorized over the
    batch ``x`` (float, N×C×H×W in 0..1) on its device. All randomness comes from ``rng`` (a few numbers per
    image, copied to the device in one piece)."""
    F = torch.nn.functional
    n = x.shape[0]
    s = 1.0 + rng.uniform(-zoom, zoom, n)
    sx = np.where(rng.random(n) < 0.5, -s, s) if flip else s
    t = rng.uniform(-2.0 * shift, 2.0 * shift, (2, n))  # affine_grid coordinates span 2 per image size
    p = np.zeros((n, 8), np.float32)  # theta (2×3), gain, offset
    p[:, 0], p[:, 4], p[:, 2], p[:, 5] = sx, s, t[0], t[1]
    p[:, 6] = 1.0 + rng.uniform(-brightness, brightness, n)
    p[:, 7] = 0.5 * rng.uniform(-brightness, brightness, n)
    p = torch.from_numpy(p).to(x.device, non_blocking=True)
    grid = F.affine_grid(p[:, :6].reshape(n, 2, 3).to(x.dtype), list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return x * p[:, 6, None, None, None].to(x.dtype) + p[:, 7, None, None, None].to(x.dtype)


def mean_std(x: np.ndarray, scale: float = 255.0) -> tuple[float, float]:
    """Mean and standard deviation (at least 1e-3) of ``x / scale`` over all values, accumulated in float64 in
    chunks (no float copy of the whole array)."""
    flat = x.reshape(len(x), -1) if len(x) else x.reshape(0, 1)
    total = squares = 0.0
    for s in range(0, len(flat), 1024):
        part = flat[s : s + 1024].astype(np.float64) / scale
        total += float(part.sum())
        squares += float(np.square(part).sum())
    count = max(flat.size, 1)
    mean = total / count
    return mean, float(max(np.sqrt(max(squares / count - mean * mean, 0.0)), 1e-3))


def build_backbone(torch: Any, name: str, in_chans: int, width: int, method_id: str) -> Any:
    """A timm model without classifier (``num_classes=0``, ``pretrained=False``: random initialization, never a
    download); ``width`` > 0 sets a timm ResNet's stage widths to (w, 2w, 4w, 8w) and its stem to w."""
    timm = import_timm(method_id)
    kwargs: dict[str, Any] = (
        {"channels": (width, 2 * width, 4 * width, 8 * width), "stem_width": width} if width else {}
    )
    try:
        return timm.create_model(name, pretrained=False, num_classes=0, in_chans=in_chans, **kwargs)
    except RuntimeError as e:
        if "Unknown model" in str(e):
            raise ParameterError(method_id, "backbone", name, "a timm model name (timm.list_models())") from None
        raise
    except TypeError:
        if width:
            raise ParameterError(
                method_id, "width", width, f"0 for {name!r} (widths can be set for timm ResNets such as resnet18 only)"
            ) from None
        raise


def _build_net(torch: Any, m: ArcFace, in_chans: int, n_classes: int) -> Any:
    nn = torch.nn
    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class ArcFaceNet(module):
        """timm backbone → linear embedding with batch norm; ArcFace head for training."""

        def __init__(self) -> None:
            super().__init__()
            self.backbone = build_backbone(torch, m.backbone, in_chans, m.width, m.id)
            features = getattr(self.backbone, "head_hidden_size", None) or self.backbone.num_features
            self.neck = nn.Sequential(
                nn.Dropout(m.dropout), nn.Linear(features, m.embedding_dim), nn.BatchNorm1d(m.embedding_dim)
            )
            self.head = arcface_head(m.embedding_dim, n_classes, margin=m.margin, scale=m.scale)

        def embed(self, x):
            return self.neck(self.backbone(x))

        def loss(self, x, y):
            return self.head.loss(self.embed(x), y)

    return ArcFaceNet()


_PRESETS: dict[str, dict[str, Any]] = {
    # today's CPU-friendly network: a ResNet-18 at width 16 (0.7 M parameters) at 64×64, Adam, cosine schedule
    "fast": {
        "backbone": "resnet18",
        "width": 16,
        "size": 64,
        "embedding_dim": 128,
        "epochs": 40,
        "batch_size": 16,
        "optimizer": "adam",
        "lr": 5e-3,
        "weight_decay": 5e-4,
        "scheduler": "cosine",
        "margin": 0.3,
        "scale": 16.0,
    },
    # Deng et al. 2019 §3.1-3.2 / §4.1 (implementation details): 112×112 crops, ResNet-50, 512-d embedding,
    # s = 64, m = 0.5, SGD (momentum 0.9, weight decay 5e-4), batch 512, lr 0.1 divided by 10 at 20 K and 28 K
    # of 32 K iterations (CASIA setting): 32 epochs with steps at 0.625 and 0.875 of them
    "paper": {
        "backbone": "resnet50",
        "width": 0,
        "size": 112,
        "embedding_dim": 512,
        "epochs": 32,
        "batch_size": 512,
        "optimizer": "sgd",
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "scheduler": "multistep",
        "milestones": (0.625, 0.875),
        "margin": 0.5,
        "scale": 64.0,
    },
}


@attrs.define(kw_only=True)
class ArcFace(CentroidRecognizer):
    """ArcFace Retrained: a timm backbone trained with the additive angular margin loss on the attacker's
    training set; cosine similarity to enrolled class centroids (the False Sense of Privacy paper §5.5).

    Images are resized to ``size``×``size`` (OpenCV, in batch), scaled to 0..1 and standardized with the
    training set's mean and standard deviation; grey images train a one-channel network (colour probes are
    converted to grey, and grey probes expanded for a colour network). The backbone (``pretrained=False``, or
    the user's ``weights``) feeds a linear ``embedding_dim`` embedding with batch norm; the ArcFace head (margin
    m, scale s) over the training classes is used only for training. Training runs in
    :func:`bioanon.nettrain.train_net` on ``device`` (the run's by default) with ``precision`` autocast: the
    training images are placed on the device once (as uint8) and augmented there in batches (flips, shifts,
    zooms, brightness/contrast). ``enroll`` without ``fit`` trains on the gallery. Inside an evaluation the
    trained weights are kept in the cache, so the same network on the same data is trained once. Deterministic
    for a ``seed`` on one machine and device kind; inference batched on the device under
    ``torch.inference_mode``.

    ``weights``: a timm checkpoint of the backbone (e.g. ``resnet50`` from timm, saved with ``torch.save(model.
    state_dict())``; its classifier is ignored) or a state dict of this whole network (its ArcFace head, whose
    size is the number of training classes, is not loaded); read with ``torch.load(weights_only=True)`` and
    checked against the network before any work. The attacker fine-tunes from it on its training data;
    ``freeze`` keeps the backbone fixed (only the embedding layer and head train).

    Presets (``preset``): ``"fast"`` (default) — ResNet-18 at width 16 (0.7 M parameters), 64×64, 128-d, Adam
    5e-3 with a cosine schedule, batch 16, 40 epochs, m = 0.3, s = 16: trains on two CPU cores. ``"paper"`` —
    Deng et al., ArcFace, CVPR 2019 (§3 and the implementation details of the experiments), the "ArcFace"
    of the False Sense of Privacy paper §5.5: 112×112 inputs, ResNet-50 (timm's widths: ``width`` 0), 512-d
    embedding (BN–dropout–FC–BN), s = 64, m = 0.5, SGD with momentum 0.9 and weight decay 5e-4, batch 512,
    learning rate 0.1 divided by 10 at 20 K and 28 K of 32 K iterations — here 32 epochs with steps at 0.625
    and 0.875 of them (about the CASIA-WebFace schedule: 32 K iterations of 512 over its 0.49 M images are 33
    epochs). A GPU is needed for it at any real size."""

    id: ClassVar[str] = "face.arcface"
    requires: ClassVar[dict[str, str]] = {"torch": INSTALL, "timm": INSTALL}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    has_embedding: ClassVar[bool] = True
    reference: ClassVar[str] = "arcface; false-sense §5.5 (ArcFace Retrained)"
    example_params: ClassVar[dict] = {"epochs": 2, "size": 32, "width": 8, "embedding_dim": 16, "threads": 1}
    presets: ClassVar[dict[str, dict[str, Any]]] = _PRESETS

    preset: str = param(
        "fast",
        choices=tuple(_PRESETS),
        help="'fast': a small ResNet-18 at 64×64 (CPU-friendly); "
        "'paper': Deng et al. 2019 (ResNet-50, 112×112, 512-d, SGD 0.1, batch 512; a GPU); fills "
        "the parameters left at their defaults",
        affects_output=False,
    )
    backbone: str = param(
        "resnet18",
        help="timm model name, created with pretrained=False and num_classes=0 "
        "(e.g. resnet18, resnet50, resnet10t, mobilenetv3_small_050)",
    )
    width: int = param(
        16,
        help="stage widths (w, 2w, 4w, 8w) and stem width of a timm ResNet backbone; 0 keeps "
        "the model's own widths (required for other backbones and for timm checkpoints)",
        low=0,
    )
    size: int = param(64, help="input height and width in pixels (images are resized in batch)", low=16)
    embedding_dim: int = param(128, help="embedding size", low=2)
    epochs: int = param(40, help="training epochs", low=1)
    batch_size: int = param(16, help="images per training batch", low=2)
    optimizer: str = param("adam", help="optimizer (adam, adamw, sgd with momentum)", choices=OPTIMIZERS)
    lr: float = param(5e-3, help="learning rate", low=0.0, low_inclusive=False)
    momentum: float = param(0.9, help="SGD momentum", low=0.0, high=1.0, high_inclusive=False)
    weight_decay: float = param(5e-4, help="weight decay (L2; AdamW: decoupled)", low=0.0)
    scheduler: str = param(
        "cosine",
        help="learning-rate schedule: cosine, multistep (÷10 at milestones), plateau or none",
        choices=SCHEDULERS,
    )
    milestones: tuple[float, ...] = param(
        (0.625, 0.875),
        help="multistep: the fractions of the epochs at which the learning rate is divided by 10",
        check=lambda v: all(0.0 < f < 1.0 for f in v),
        check_text="fractions between 0 and 1",
    )
    margin: float = param(0.3, help="additive angular margin m (radians)", low=0.0, high=1.0)
    scale: float = param(16.0, help="logit scale s of the ArcFace loss (larger for thousands of classes)", low=1.0)
    dropout: float = param(0.2, help="dropout before the embedding layer", low=0.0, high=1.0, high_inclusive=False)
    augment: bool = param(
        True,
        help="random horizontal flips, shifts (10 %), zooms (±10 %) and brightness/"
        "contrast changes (±20 %) during training",
    )
    weights: str = weights_param("a torch state dict / timm checkpoint file")
    freeze: bool = param(False, help="keep the pretrained backbone fixed (train only the head)")
    seed: int = param(0, help="random seed (initialization, batch order, augmentation)")
    device: str = device_param()
    precision: str = precision_param()
    threads: int = param(0, help="torch intra-op threads (0 = all cores)", low=0, affects_output=False)
    payload: str = param("", help="payload column (default: image)")

    model_: Any = fitted()
    channels_: int | None = fitted()
    mean_: float | None = fitted()
    std_: float | None = fitted()
    device_: str | None = fitted()
    history_: list | None = fitted()

    def _images(self, table: Any, channels: int) -> np.ndarray:
        """uint8 (N, channels, size, size)."""
        return image_batch(table.payload(self.payload_column(table, self.payload or None)), self.size, channels)

    def preflight(self, table) -> list[str]:
        """Problems found before any work: torch or timm missing, an unknown backbone, a ``weights`` file that
        does not fit the network built for the data's images."""
        column = self.payload or next((c for c in self.payloads if c in table.payload_names), None)
        shape: tuple[Any, ...] = table.payload_shape(column) if column in table.payload_names else (None,)
        channels = shape[2] if len(shape) == 3 and shape[2] else 1
        try:
            return preflight_weights(self, lambda torch: _build_net(torch, self, channels, 2))
        except ParameterError as exc:  # e.g. an unknown backbone
            return [str(exc)]

    def fit(self, train, label: str = "subject"):
        torch = import_torch(self.id, INSTALL)
        import_timm(self.id)
        dev = resolve_device(self.device, who=self.id)
        raw = train.payload(self.payload_column(train, self.payload or None))
        table_channels = raw.shape[-1] if raw.ndim == 4 else 1
        x = self._images(train, table_channels)
        classes, y = np.unique(labels_of(train, label).astype(str), return_inverse=True)
        mean, std = mean_std(x)
        xt, yt = stage(torch.from_numpy(x), dev), stage(torch.from_numpy(y.astype(np.int64)), dev)

        def batch(idx: np.ndarray, rng: np.random.Generator):
            xi, yb = take_rows(idx, xt, yt)
            xb = to_device(xi, dev).float() / 255.0
            if self.augment:
                xb = augment(torch, xb, rng)
            return (xb - mean) / std, yb

        trained = train_net(
            lambda: _build_net(torch, self, table_channels, max(len(classes), 2)),
            batch,
            len(x),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            optimizer=self.optimizer,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            scheduler=self.scheduler,
            milestones=self.milestones,
            install=INSTALL,
            **method_training(self, train, label=label, device=dev),
        )
        self.model_, self.channels_, self.mean_, self.std_ = trained.net, table_channels, mean, std
        self.device_, self.history_ = dev, trained.history
        return self

    def is_fitted(self) -> bool:
        return self.model_ is not None

    def embed(self, table) -> np.ndarray:
        """L2-normalized embeddings (N, embedding_dim)."""
        require_fitted(self, "model_", call="fit() or enroll()", before="embed()")
        import_torch(self.id, INSTALL)
        x = self._images(table, cast(int, self.channels_))  # channels_, device_: set with model_ by fit()
        mean, std = np.float32(self.mean_), np.float32(self.std_)
        e = infer(
            lambda t: self.model_.embed((t.float() / 255.0 - mean) / std),
            x,
            out_shape=(self.embedding_dim,),
            batch_size=128,
            threads=self.threads,
            device=cast(str, self.device_),
            precision=self.precision,
        )
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
