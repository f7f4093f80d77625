"""The Fantômas general de-anonymizer (``fantomas.txt`` §5, §7.5): an under-complete convolutional auto-encoder
with one linear layer over the flattened latent code, trained with an SSIM loss on (anonymized → clear) attacker
pairs — and its convolution-only ablation. Torch is imported lazily (``pip install bioanon-face[torch]``).

Architecture (Figure 3; kernel sizes are not given in the paper and are ours): encoder conv 3×3 (C → F) +
LeakyReLU + 2×2 max-pool, conv 3×3 (F → F) + LeakyReLU + 2×2 max-pool; a linear layer (F·h/4·w/4 → same) +
LeakyReLU over the flattened code; decoder transposed conv 2×2 stride 2 (F → F) + LeakyReLU, twice (each
quadruples the pixels), and a final conv 3×3 (F → C). Training (§7.5): SSIM loss, Adam with learning rate 1e-4,
batch 64, learning rate × 0.75 when the validation loss has not improved for 5 epochs, at most 200 epochs,
early stop after 20 epochs without improvement (keeping the best weights).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon import Deanonymizer, fitted, param
from bioanon.errors import ParameterError, TableError
from bioanon.payloads import restore_dtype

from .deanonymizers import _images, paired_images, resize_batch

__all__ = ["Fantomas", "FantomasConv", "build_network", "ssim", "ssim_loss"]

_MAX_LINEAR_WEIGHTS = 200_000_000  # 0.8 GB of float32 weights (×3 with Adam's moments)


def _torch(method_id: str):
    from bioanon.torchutil import import_torch

    return import_torch(method_id, "pip install 'bioanon-face[torch]'")


# --------------------------------------------------------------------------------------------------- SSIM


def _gaussian_window(torch, size: int, sigma: float, channels: int):
    t = torch.arange(size, dtype=torch.float32) - (size - 1) / 2.0
    g = torch.exp(-(t ** 2) / (2.0 * sigma ** 2))
    g = g / g.sum()
    return g.view(1, 1, 1, size).repeat(channels, 1, 1, 1), g.view(1, 1, size, 1).repeat(channels, 1, 1, 1)


def ssim(a, b, *, window: int = 11, sigma: float = 1.5, data_range: float = 1.0):
    """Mean structural similarity (Wang et al. 2004) of two N×C×H×W tensors, per image (N,): a Gaussian window
    (``window`` pixels, std ``sigma``; shrunk to the image when it is smaller), valid positions only,
    K1 = 0.01, K2 = 0.03. Differentiable (separable depthwise convolutions)."""
    import torch
    import torch.nn.functional as F

    c = a.shape[1]
    size = min(window, a.shape[2], a.shape[3])
    size -= 1 - size % 2  # odd
    gx, gy = _gaussian_window(torch, size, sigma, c)
    gx, gy = gx.to(a.dtype), gy.to(a.dtype)

    def blur(t):
        return F.conv2d(F.conv2d(t, gx, groups=c), gy, groups=c)

    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a ** 2
    var_b = blur(b * b) - mu_b ** 2
    cov = blur(a * b) - mu_a * mu_b
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return s.flatten(1).mean(1)


def ssim_loss(output, target):
    """1 − mean SSIM (images in 0..1)."""
    return 1.0 - ssim(output, target).mean()


# --------------------------------------------------------------------------------------------------- network


def build_network(torch, channels: int, features: int, size: tuple[int, int], linear_layer: bool):
    """The auto-encoder for ``channels``-channel images of ``size`` (height, width; multiples of 4)."""
    nn = torch.nn
    h4, w4 = size[0] // 4, size[1] // 4
    latent = features * h4 * w4

    class FantomasNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(channels, features, 3, padding=1), nn.LeakyReLU(), nn.MaxPool2d(2),
                nn.Conv2d(features, features, 3, padding=1), nn.LeakyReLU(), nn.MaxPool2d(2))
            self.linear = nn.Sequential(
                nn.Flatten(), nn.Linear(latent, latent), nn.LeakyReLU(),
                nn.Unflatten(1, (features, h4, w4))) if linear_layer else nn.Identity()
            self.decoder = nn.Sequential(
                nn.ConvTranspose2d(features, features, 2, stride=2), nn.LeakyReLU(),
                nn.ConvTranspose2d(features, features, 2, stride=2), nn.LeakyReLU(),
                nn.Conv2d(features, channels, 3, padding=1))

        def forward(self, x):
            return self.decoder(self.linear(self.encoder(x)))

    return FantomasNet()


def _check_resolution(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and (
        value == (0, 0) or all(isinstance(v, int) and v >= 4 and v % 4 == 0 for v in value))


# --------------------------------------------------------------------------------------------------- method


@attrs.define(kw_only=True)
class Fantomas(Deanonymizer):
    """Fantômas: a convolutional auto-encoder with a global linear layer, trained with SSIM to undo anonymization.

    ``fantomas.txt`` §5 (model, Figure 3) and §7.5 (training): see :mod:`bioanon_face.fantomas` for the layers.
    The convolutions reconstruct locally; the one linear layer over the flattened latent code lets any output
    position depend on any input position, so global, position-dependent anonymizations (block permutation,
    pixel relocation) can be inverted — which a convolution-only model (``face.fantomas_conv``, E2.2) cannot.

    ``fit(clear, anonymized)`` pairs the attacker's images by sample id, resizes both to ``resolution`` (OpenCV,
    batched; area when shrinking) and scales them to 0..1; a seeded share ``validation`` of the pairs is held out
    for the plateau schedule and early stopping (the best weights are kept). ``transform`` resizes any image
    size to ``resolution``, runs the network and resizes back, returning uint8 (grey or RGB, as the pairs).
    Paper defaults except the resolution (the paper used 224×224 on a GPU; the linear layer has
    (F·h·w/16)² weights, 16.8 M at 64×64 with 16 features; F is not given in the paper). With the defaults one
    epoch over ORL's 400 pairs took about 4 s on two shared CPU cores (``threads=1``), so a full run takes
    minutes; on a busy machine ``threads=1`` avoids OpenMP oversubscription. Determinism: initialization
    (``torch.manual_seed`` inside ``torch.random.fork_rng``, so the global RNG is left as it was), validation
    split and batch order come from ``seed`` (same machine and thread count). Checkpoints:
    :meth:`save_checkpoint` / :meth:`load_checkpoint` (``torch.load(weights_only=True)``)."""

    id: ClassVar[str] = "face.fantomas"
    requires: ClassVar[dict[str, str]] = {"torch": "pip install 'bioanon-face[torch]'"}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "fantomas.txt §5 (model), §7.5 (training)"
    example_params: ClassVar[dict[str, Any]] = {"features": 4, "resolution": (16, 16), "epochs": 2,
                                                "batch_size": 16}

    features: int = param(16, help="channels of the convolutional layers (F)", low=1)
    resolution: tuple[int, int] = param(
        (64, 64), help="(height, width) the network works at; (0, 0): the pairs' size rounded up to multiples of 4",
        check=_check_resolution, check_text="(0, 0) or two multiples of 4 (≥ 4)")
    linear_layer: bool = param(True, help="the linear layer between encoder and decoder (False: the ablation)")
    loss: str = param("ssim", help="training loss", choices=("ssim", "mse", "l1"))
    epochs: int = param(200, help="maximum training epochs", low=1)
    lr: float = param(1e-4, help="initial Adam learning rate", low=0.0, low_inclusive=False)
    batch_size: int = param(64, help="minibatch size", low=1)
    lr_factor: float = param(0.75, help="learning-rate factor on a validation plateau", low=0.0, high=1.0,
                             low_inclusive=False)
    lr_patience: int = param(5, help="epochs without improvement before the learning rate is reduced", low=0)
    patience: int = param(20, help="epochs without improvement before training stops (0: never)", low=0)
    validation: float = param(0.1, help="share of the pairs held out for the schedule and early stopping "
                                        "(0: none; then the training loss is monitored)", low=0.0, high=0.5)
    seed: int = param(0, help="random seed (initialization, validation split, batch order)")
    threads: int = param(0, help="torch intra-op threads (0 = all available cores)", low=0, affects_output=False)
    payload: str = param("", help="payload column (default: image)")

    model_: Any = fitted()
    column_: str | None = fitted()
    size_: tuple | None = fitted()  # (h, w) the network works at
    channels_: int | None = fitted()
    dtype_: str | None = fitted()
    history_: list | None = fitted()
    best_epoch_: int | None = fitted()

    # ------------------------------------------------------------------------------------------------ helpers
    def _work_size(self, h: int, w: int) -> tuple[int, int]:
        if self.resolution != (0, 0):
            return tuple(self.resolution)
        return (-(-h // 4) * 4, -(-w // 4) * 4)

    def _network(self, torch, channels: int, size: tuple[int, int]):
        latent = self.features * (size[0] // 4) * (size[1] // 4)
        if self.linear_layer and latent * latent > _MAX_LINEAR_WEIGHTS:
            raise ParameterError(self.id, "features", self.features,
                                 f"a linear layer of at most {_MAX_LINEAR_WEIGHTS:,} weights: at resolution {size} "
                                 f"it would have {latent * latent:,}; lower features or resolution")
        return build_network(torch, channels, self.features, size, self.linear_layer)

    def _to_tensor(self, torch, x: np.ndarray, size: tuple[int, int]):
        """N×H×W×C grey levels → N×C×h×w float tensor in 0..1."""
        r = resize_batch(x, size, "area" if size[0] <= x.shape[1] and size[1] <= x.shape[2] else "linear")
        return torch.from_numpy(np.ascontiguousarray(r.transpose(0, 3, 1, 2) / np.float32(255.0)))

    def _loss_fn(self, torch):
        if self.loss == "ssim":
            return ssim_loss
        return torch.nn.MSELoss() if self.loss == "mse" else torch.nn.L1Loss()

    # ---------------------------------------------------------------------------------------------------- fit
    def fit(self, clear, anonymized):
        from bioanon.torchutil import torch_threads

        torch = _torch(self.id)
        column, y, x = paired_images(self, clear, anonymized)
        n, h, w, c = y.shape
        size = self._work_size(h, w)
        self.column_, self.size_, self.channels_ = column, size, int(c)
        self.dtype_ = np.dtype(anonymized.payload(column).dtype).str
        n_val = int(round(self.validation * n)) if n >= 10 and self.validation > 0 else 0
        perm = np.random.default_rng(self.seed).permutation(n)
        val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
        with torch_threads(self.threads):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                model = self._network(torch, c, size)
            gen = torch.Generator().manual_seed(self.seed)
            x_all, y_all = self._to_tensor(torch, x, size), self._to_tensor(torch, y, size)
            x_tr, y_tr, x_va, y_va = x_all[tr], y_all[tr], x_all[val], y_all[val]
            opt = torch.optim.Adam(model.parameters(), lr=self.lr)
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=self.lr_factor,
                                                               patience=self.lr_patience)
            loss_fn = self._loss_fn(torch)
            history: list[dict[str, float]] = []
            best, best_state, best_epoch, waited = float("inf"), None, 0, 0
            for epoch in range(1, self.epochs + 1):
                model.train()
                order = torch.randperm(len(tr), generator=gen)
                total = 0.0
                for start in range(0, len(tr), self.batch_size):
                    idx = order[start:start + self.batch_size]
                    opt.zero_grad(set_to_none=True)
                    loss = loss_fn(model(x_tr[idx]), y_tr[idx])
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * len(idx)
                record = {"epoch": epoch, "train_loss": total / max(len(tr), 1), "lr": opt.param_groups[0]["lr"]}
                if n_val:
                    model.eval()
                    with torch.no_grad():
                        record["val_loss"] = float(loss_fn(model(x_va), y_va))
                history.append(record)
                monitored = record.get("val_loss", record["train_loss"])
                sched.step(monitored)
                if monitored < best:
                    best, best_epoch, waited = monitored, epoch, 0
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                else:
                    waited += 1
                    if n_val and self.patience and waited >= self.patience:
                        break
            if best_state is not None:
                model.load_state_dict(best_state)
        model.eval()
        self.model_, self.history_, self.best_epoch_ = model, history, best_epoch
        return self

    # ---------------------------------------------------------------------------------------------- transform
    def predict(self, x: np.ndarray) -> np.ndarray:
        """De-anonymized images (float32 grey levels, N×H×W×C at the input's size) of N×H×W×C images ``x``."""
        from bioanon.torchutil import torch_threads

        if self.model_ is None:
            raise RuntimeError(f"{self.id}: fit() before transform()")
        if x.shape[-1] != self.channels_:
            raise TableError(f"{self.id}: images of payload {self.column_!r} have {x.shape[-1]} channels, the "
                             f"model was trained on {self.channels_}")
        torch = _torch(self.id)
        n, h, w, _ = x.shape
        out = np.empty(x.shape, np.float32)
        with torch_threads(self.threads), torch.inference_mode():
            for s in range(0, n, 256):
                y = self.model_(self._to_tensor(torch, x[s:s + 256], self.size_)).clamp(0.0, 1.0)
                y = y.numpy().transpose(0, 2, 3, 1) * np.float32(255.0)
                shrink = h <= self.size_[0] and w <= self.size_[1]
                out[s:s + 256] = resize_batch(y, (h, w), "area" if shrink else "linear")
        return out

    def transform(self, table):
        if self.model_ is None:
            raise RuntimeError(f"{self.id}: fit() before transform()")
        column, x = _images(self, table, self.column_)
        return table.with_payload(column, restore_dtype(self.predict(x), np.dtype(self.dtype_)))

    # -------------------------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Save the fitted network and the parameters (``torch.save``)."""
        if self.model_ is None:
            raise RuntimeError(f"{self.id}: fit() before save_checkpoint()")
        torch = _torch(self.id)
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()}
        torch.save({"id": self.id, "version": self.version, "params": params,
                    "state_dict": self.model_.state_dict(), "column": self.column_, "size": list(self.size_),
                    "channels": self.channels_, "dtype": self.dtype_, "history": self.history_,
                    "best_epoch": self.best_epoch_}, os.fspath(path))

    @classmethod
    def load_checkpoint(cls, path: str | os.PathLike) -> "Fantomas":
        """A fitted instance from :meth:`save_checkpoint`'s file (``torch.load(weights_only=True)``)."""
        torch = _torch(cls.id)
        ck = torch.load(os.fspath(path), weights_only=True, map_location="cpu")
        if ck.get("id") != cls.id:
            raise ValueError(f"{path}: not a {cls.id} checkpoint (id {ck.get('id')!r})")
        m = cls(**ck["params"])
        size = tuple(ck["size"])
        model = m._network(torch, ck["channels"], size)
        model.load_state_dict(ck["state_dict"])
        model.eval()
        m.model_, m.column_, m.size_, m.channels_, m.dtype_ = model, ck["column"], size, ck["channels"], ck["dtype"]
        m.history_, m.best_epoch_ = ck["history"], ck["best_epoch"]
        return m


@attrs.define(kw_only=True)
class FantomasConv(Fantomas):
    """The Fantômas auto-encoder without its linear layer: the convolution-only ablation of ``fantomas.txt`` §7.6.

    Same encoder, decoder and training as ``face.fantomas``; without the linear layer every output pixel depends
    only on a small neighbourhood of the input (receptive field about 10 pixels at the working resolution), as in
    Pix2Pix-like convolutional models, so global permutations cannot be undone (E2.2)."""

    id: ClassVar[str] = "face.fantomas_conv"
    reference: ClassVar[str] = "fantomas.txt §7.6 (version of the model without the linear layer)"

    linear_layer: bool = param(False, help="the linear layer between encoder and decoder (False: the ablation)")
