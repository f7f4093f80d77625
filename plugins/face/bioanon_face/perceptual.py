"""``face.perceptual_similarity``: identity-free perceptual similarity from our own trained backbone's features.

LPIPS (Zhang et al., CVPR 2018) compares two images by the distance of their channel-normalized deep feature maps
at several layers of a network pretrained on ImageNet. Here the network is our own and learns without identity
labels: ``fit(clear)`` trains a small convolutional denoising autoencoder on the clear images (reconstruction of
augmented images from noisy copies, :func:`bioanon.nettrain.train_net`), so its features describe image content
and structure, never who is shown. ``measure`` compares each anonymized image with its clear image at every
encoder stage (the utility side of the privacy–utility trade-off, the False Sense of Privacy paper §4).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    UtilityMeasure,
    device_param,
    fitted,
    import_torch,
    infer,
    method_training,
    param,
    precision_param,
    require_fitted,
    resolve_device,
    stage,
    take_rows,
    to_device,
    train_net,
)

from .arcface import INSTALL, augment, image_batch, mean_std
from .utility import _paired


def _build_net(torch: Any, channels: int, width: int) -> Any:
    nn = torch.nn

    def block(c_in: int, c_out: int, stride: int) -> list:
        return [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]

    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class ConvAutoencoder(module):
        """Three stages of two convolutions with batch norm (strides 1, 2, 2; widths w, 2w, 4w) and a mirrored
        transposed-convolution decoder."""

        def __init__(self) -> None:
            super().__init__()
            w = width
            self.stages = nn.ModuleList(
                [
                    nn.Sequential(*block(channels, w, 1), *block(w, w, 1)),
                    nn.Sequential(*block(w, 2 * w, 2), *block(2 * w, 2 * w, 1)),
                    nn.Sequential(*block(2 * w, 4 * w, 2), *block(4 * w, 4 * w, 1)),
                ]
            )
            self.decoder = nn.Sequential(
                nn.ConvTranspose2d(4 * w, 2 * w, 4, stride=2, padding=1),
                nn.BatchNorm2d(2 * w),
                nn.ReLU(),
                nn.ConvTranspose2d(2 * w, w, 4, stride=2, padding=1),
                nn.BatchNorm2d(w),
                nn.ReLU(),
                nn.Conv2d(w, channels, 3, padding=1),
            )

        def features(self, x) -> list:
            """The feature maps after each encoder stage."""
            out = []
            for part in self.stages:
                x = part(x)
                out.append(x)
            return out

        def loss(self, noisy, clean):
            """Mean squared reconstruction error of the clean image from the noisy one."""
            return torch.nn.functional.mse_loss(self.decoder(self.features(noisy)[-1]), clean)

    return ConvAutoencoder()


def feature_similarity(torch: Any, a: list, b: list) -> Any:
    """Per-sample similarity of two lists of feature maps (B, C, H, W): at every position the channel vectors
    are unit-normalized (LPIPS) and compared as 1 − ½‖â − b̂‖² (their cosine; 1 when both are zero), averaged
    over positions, then over layers. Identical features give 1."""
    sims = []
    for fa, fb in zip(a, b, strict=True):
        na = fa / (fa.norm(dim=1, keepdim=True) + 1e-10)
        nb = fb / (fb.norm(dim=1, keepdim=True) + 1e-10)
        sims.append(1.0 - 0.5 * ((na - nb) ** 2).sum(dim=1).mean(dim=(1, 2)))
    return torch.stack(sims).mean(dim=0)


@attrs.define(kw_only=True)
class PerceptualSimilarity(UtilityMeasure):
    """Perceptual similarity of each anonymized image to its clear image from a self-supervised backbone's
    feature maps (LPIPS-like, identity-free), 1 = identical.

    ``fit(clear)`` trains a small convolutional denoising autoencoder (encoder widths ``width``, 2·, 4·; stride
    1, 2, 2) on the clear images resized to ``size``×``size`` — no labels: it reconstructs randomly flipped,
    shifted and brightness-changed images from copies with Gaussian noise of ``noise`` standard deviations.
    ``measure`` feeds both images through the encoder and averages, over its three stages, the mean over
    positions of the cosine similarity of the channel-normalized features (Zhang et al. 2018's LPIPS
    normalization, equal layer weights, no learned weights). The floor is the mean similarity of each image to
    an image of another subject (the level of two unrelated faces). Training (:func:`bioanon.nettrain.train_net`)
    and the measure run on ``device`` (the run's by default) with ``precision`` autocast; the images are placed
    on the device once and augmented and noised there; the similarities are computed from float32 features.
    Inside an evaluation the trained autoencoder is kept in the cache. torch is imported when the measure
    runs."""

    id: ClassVar[str] = "face.perceptual_similarity"
    requires: ClassVar[dict[str, str]] = {"torch": INSTALL}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "lpips"
    example_params: ClassVar[dict] = {"epochs": 2, "size": 16, "width": 4, "threads": 1}

    size: int = param(64, help="input height and width in pixels (images are resized in batch)", low=8)
    width: int = param(16, help="channels of the first encoder stage (the others have 2× and 4×)", low=1)
    epochs: int = param(10, help="autoencoder training epochs", low=1)
    batch_size: int = param(16, help="images per training batch", low=2)
    lr: float = param(2e-3, help="Adam learning rate", low=0.0, low_inclusive=False)
    noise: float = param(
        0.3,
        help="standard deviation of the Gaussian input noise (in standardized units) the autoencoder learns to remove",
        low=0.0,
    )
    augment: bool = param(True, help="random flips, shifts, zooms and brightness changes of the training images")
    seed: int = param(0, help="random seed (initialization, batch order, augmentation, noise)")
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

    def _column(self, table: Any) -> str:
        return self.payload_column(table, self.payload or None)

    def preflight(self, table) -> list[str]:
        """torch missing (found before any work)."""
        return self.requirement_problems()

    def fit(self, clear):
        torch = import_torch(self.id, INSTALL)
        dev = resolve_device(self.device, who=self.id)
        raw = clear.payload(self._column(clear))
        channels = raw.shape[-1] if raw.ndim == 4 else 1
        x = image_batch(raw, self.size, channels)
        mean, std = mean_std(x)
        xt = stage(torch.from_numpy(x), dev)
        gen = torch.Generator(device=dev)

        def batch(idx: np.ndarray, rng: np.random.Generator):
            (xi,) = take_rows(idx, xt)
            xb = to_device(xi, dev).float() / 255.0
            if self.augment:
                xb = augment(torch, xb, rng)
            clean = (xb - mean) / std
            gen.manual_seed(int(rng.integers(2**62)))  # the noise is drawn on the device, seeded from rng
            noise = torch.randn(clean.shape, generator=gen, device=clean.device, dtype=clean.dtype)
            return clean + self.noise * noise, clean

        trained = train_net(
            lambda: _build_net(torch, channels, self.width),
            batch,
            len(x),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            scheduler="cosine",
            install=INSTALL,
            **method_training(self, clear, label="clear", device=dev),
        )
        self.model_, self.channels_, self.mean_, self.std_ = trained.net, channels, mean, std
        self.device_, self.history_ = dev, trained.history
        return self

    def similarity(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-pair similarity of two image arrays (N, H, W, C) of the same shape."""
        require_fitted(self, "model_", call="fit(clear)", before="measure()")
        torch = import_torch(self.id, INSTALL)
        channels = cast(int, self.channels_)  # channels_, device_: set with model_ by fit()
        pairs = np.stack(
            [image_batch(x, self.size, channels), image_batch(y, self.size, channels)], axis=1
        )  # (N, 2, C, size, size) uint8
        mean, std = np.float32(self.mean_), np.float32(self.std_)

        def fn(t):
            z = (t.flatten(0, 1).float() / 255.0 - mean) / std  # originals and anonymized in one batch
            feats = [f.float() for f in self.model_.features(z)]
            return feature_similarity(torch, [f[0::2] for f in feats], [f[1::2] for f in feats])

        return infer(
            fn,
            pairs,
            out_shape=(),
            batch_size=64,
            threads=self.threads,
            dtype=np.float64,
            device=cast(str, self.device_),
            precision=self.precision,
        )

    def measure(self, original, anonymized) -> np.ndarray:
        x, y = _paired(self, original, anonymized)
        return self.similarity(x, y)

    def floor(self, table) -> float:
        """Mean similarity of each image to the image half the table away in subject order — another subject's
        whenever no subject holds more than half of the table."""
        x = table.payload(self._column(table))
        if len(x) < 2:
            return 0.0
        order = np.argsort(np.asarray(table.subjects).astype(str), kind="stable")
        partner = np.empty(len(x), dtype=np.int64)
        partner[order] = np.roll(order, len(x) // 2)
        return float(np.mean(self.similarity(x, x[partner])))
