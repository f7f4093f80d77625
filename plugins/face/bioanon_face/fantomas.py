"""The Fantômas general de-anonymizer (the Fantômas paper §5, §7.5): an under-complete convolutional auto-encoder
with one linear layer over the flattened latent code, trained with an SSIM loss on (anonymized → clear) attacker
pairs — and its convolution-only ablation. Torch is imported lazily (``pip install bioanon-face[torch]``).

Architecture (Figure 3; kernel sizes are not given in the paper and are ours): encoder conv 3×3 (C → F) +
LeakyReLU + 2×2 max-pool, conv 3×3 (F → F) + LeakyReLU + 2×2 max-pool; a linear layer (F·h/4·w/4 → same) +
LeakyReLU over the flattened code; decoder transposed conv 2×2 stride 2 (F → F) + LeakyReLU, twice (each
quadruples the pixels), and a final conv 3×3 (F → C). Training (§7.5), through the core trainer
:func:`bioanon.nettrain.train_net`: SSIM loss, Adam with learning rate 1e-4, batch 64, learning rate × 0.75 when
the validation loss has not improved for 5 epochs, at most 200 epochs, early stop after 20 epochs without
improvement (keeping the best weights).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from bioanon.api import (
    DataError,
    Deanonymizer,
    ParameterError,
    TableError,
    device_param,
    fitted,
    param,
    precision_param,
    require_fitted,
    restore_dtype,
    weights_param,
)

from .deanonymizers import _images, paired_images, resize_batch

__all__ = ["Fantomas", "FantomasConv", "build_network", "ssim", "ssim_loss"]

_MAX_LINEAR_WEIGHTS = 200_000_000  # 0.8 GB of float32 weights (×3 with Adam's moments)


def _torch(method_id: str):
    from bioanon.api import import_torch

    return import_torch(method_id, "pip install 'bioanon-face[torch]'")


# --------------------------------------------------------------------------------------------------- SSIM


def _gaussian_window(torch, size: int, sigma: float, channels: int, device: Any = None, dtype: Any = None):
    """The separable Gaussian window as two depthwise kernels (1×size and size×1), built on ``device`` in
    ``dtype`` (those of the images it blurs)."""
    t = torch.arange(size, dtype=torch.float64, device=device) - (size - 1) / 2.0
    g = torch.exp(-(t**2) / (2.0 * sigma**2))
    g = (g / g.sum()).to(dtype or torch.float32)
    return g.view(1, 1, 1, size).repeat(channels, 1, 1, 1), g.view(1, 1, size, 1).repeat(channels, 1, 1, 1)


def ssim(a, b, *, window: int = 11, sigma: float = 1.5, data_range: float = 1.0):
    """Mean structural similarity (Wang et al. 2004) of two N×C×H×W tensors, per image (N,): a Gaussian window
    (``window`` pixels, std ``sigma``; shrunk to the image when it is smaller), valid positions only,
    K1 = 0.01, K2 = 0.03. Differentiable (separable depthwise convolutions). Computed on the tensors' device, in
    their dtype, but at least in float32: half-precision inputs (e.g. a network's output under autocast) are
    promoted and autocast is off inside, since the variances are differences of nearly equal means."""
    import contextlib

    import torch
    import torch.nn.functional as F

    low = (torch.float16, torch.bfloat16)
    a = a.float() if a.dtype in low else a
    b = b.float() if b.dtype in low else b
    if b.dtype != a.dtype:
        common = torch.promote_types(a.dtype, b.dtype)
        a, b = a.to(common), b.to(common)
    c = a.shape[1]
    size = min(window, a.shape[2], a.shape[3])
    size -= 1 - size % 2  # odd
    gx, gy = _gaussian_window(torch, size, sigma, c, a.device, a.dtype)

    def blur(t):
        return F.conv2d(F.conv2d(t, gx, groups=c), gy, groups=c)

    kind = a.device.type
    no_autocast = torch.autocast(kind, enabled=False) if kind in ("cpu", "cuda") else contextlib.nullcontext()
    with no_autocast:
        c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
        mu_a, mu_b = blur(a), blur(b)
        var_a = blur(a * a) - mu_a**2
        var_b = blur(b * b) - mu_b**2
        cov = blur(a * b) - mu_a * mu_b
        s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
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
    module: Any = nn.Module  # torch is imported lazily: a value here, not a type mypy knows

    class FantomasNet(module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(channels, features, 3, padding=1),
                nn.LeakyReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(features, features, 3, padding=1),
                nn.LeakyReLU(),
                nn.MaxPool2d(2),
            )
            self.linear = (
                nn.Sequential(
                    nn.Flatten(), nn.Linear(latent, latent), nn.LeakyReLU(), nn.Unflatten(1, (features, h4, w4))
                )
                if linear_layer
                else nn.Identity()
            )
            self.decoder = nn.Sequential(
                nn.ConvTranspose2d(features, features, 2, stride=2),
                nn.LeakyReLU(),
                nn.ConvTranspose2d(features, features, 2, stride=2),
                nn.LeakyReLU(),
                nn.Conv2d(features, channels, 3, padding=1),
            )

        def forward(self, x):
            return self.decoder(self.linear(self.encoder(x)))

    return FantomasNet()


def _check_resolution(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and (value == (0, 0) or all(isinstance(v, int) and v >= 4 and v % 4 == 0 for v in value))
    )


# --------------------------------------------------------------------------------------------------- method

_PRESETS: dict[str, dict[str, Any]] = {
    # CPU-friendly: a 64×64 network, one epoch over ORL's 400 pairs in seconds on two cores; a larger rate and
    # smaller batches than the paper's so that 60 epochs suffice, with a warm-up so that the larger rate does not
    # collapse the linear layer at the start (a collapsed run is also trained again: ``restarts``)
    "fast": {"features": 16, "resolution": (64, 64), "epochs": 60, "lr": 1e-3, "batch_size": 16, "warmup": 5},
    # fantomas.txt §7.3 (images resized to 224×224), §7.5 (SSIM, Adam 1e-4, batch 64, plateau ×0.75 after 5
    # epochs, at most 200 epochs, early stop after 20); F is not given (§5: "limited by the available GPU
    # memory"): 4 is the largest F whose linear layer at 224×224 stays within the weight cap (157 M weights)
    "paper": {
        "features": 4,
        "resolution": (224, 224),
        "loss": "ssim",
        "epochs": 200,
        "lr": 1e-4,
        "batch_size": 64,
        "lr_factor": 0.75,
        "lr_patience": 5,
        "patience": 20,
    },
}


@attrs.define(kw_only=True)
class Fantomas(Deanonymizer):
    """Fantômas: a convolutional auto-encoder with a global linear layer, trained with SSIM to undo anonymization.

    The Fantômas paper §5 (model, Figure 3) and §7.5 (training): see :mod:`bioanon_face.fantomas` for the layers.
    The convolutions reconstruct locally; the one linear layer over the flattened latent code lets any output
    position depend on any input position, so global, position-dependent anonymizations (block permutation,
    pixel relocation) can be inverted — which a convolution-only model (``face.fantomas_conv``, E2.2) cannot.

    ``fit(clear, anonymized)`` pairs the attacker's images by sample id, resizes both to ``resolution`` (OpenCV,
    batched; area when shrinking) and scales them to 0..1; a seeded share ``validation`` of the pairs is held out
    for the plateau schedule and early stopping (the best weights are kept). Training runs in
    :func:`bioanon.nettrain.train_net` on ``device`` (the run's by default) with ``precision`` autocast (the SSIM
    itself is computed in float32); the pairs are placed on the device once. ``transform`` resizes any image
    size to ``resolution``, runs the network there in batches and resizes back, returning uint8 (grey or RGB, as
    the pairs). Inside an evaluation the trained weights are kept in the cache: the same model on the same pairs
    is trained once. ``weights``: a state dict of this network to fine-tune from (a :meth:`save_checkpoint` file
    or ``torch.save(m.model_.state_dict(), path)``); it must fit the network built for the data (checked
    before any work, naming the layer and both shapes).

    Presets (``preset``): ``"fast"`` (default) works at 64×64 with F = 16 (linear layer (F·h·w/16)² = 16.8 M
    weights) and trains at most 60 epochs with learning rate 1e-3, batch 16 and 5 epochs of warm-up (fewer,
    faster epochs than the paper's; one epoch over ORL's 400 pairs took about 4 s on two shared CPU cores).
    Any preset trains again from the next seed (at most ``restarts`` times) when the validation loss never beat
    the anonymized input's or the mean face's, and an evaluation flags a model that still did not learn.
    ``"paper"`` follows the
    paper: input 224×224 (§7.3, the LightFace size), SSIM loss, Adam with learning rate 1e-4, batch 64, learning
    rate × 0.75 after 5 epochs without a lower validation loss, at most 200 epochs, early stop after 20 (§7.5).
    The paper does not give F (§5: it is limited by GPU memory since the linear layer grows with it); at 224×224
    the linear layer has (3136·F)² weights, so the preset uses F = 4 (157 M weights), the largest within the
    cap of 200 M weights (a larger ``features`` or ``resolution`` is refused with a message naming them). The
    other parameters of the §7.5 schedule are the defaults of both presets. The paper's 200 epochs assume a
    large pair set: on ORL's 216 training pairs (4 steps an epoch) they left the model short of learning
    (restored top-1 0.41 of clear at 224 px on an H200), 1,000 allowed epochs (early stop at 507) reached 0.88
    and the fast preset's rate, batch and warm-up 0.90 in 60 epochs; ``attempts_`` lists every training run
    (restarts included). Determinism: initialization,
    validation split and batch order come from ``seed`` (same machine, device kind and thread count).
    Checkpoints: :meth:`save_checkpoint` / :meth:`load_checkpoint` (``torch.load(weights_only=True)``)."""

    id: ClassVar[str] = "face.fantomas"
    requires: ClassVar[dict[str, str]] = {"torch": "pip install 'bioanon-face[torch]'"}
    trait: ClassVar[str] = "face"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    reference: ClassVar[str] = "fantomas §5 (model), §7.3 (224×224 input), §7.5 (training)"
    example_params: ClassVar[dict[str, Any]] = {"features": 4, "resolution": (16, 16), "epochs": 2, "batch_size": 16}
    presets: ClassVar[dict[str, dict[str, Any]]] = _PRESETS

    preset: str = param(
        "fast",
        choices=tuple(_PRESETS),
        help="'fast': 64×64, F = 16 (CPU-friendly); 'paper': "
        "224×224 and the §7.5 training of the Fantômas paper (a GPU); fills the parameters left at "
        "their defaults",
        affects_output=False,
    )
    features: int = param(16, help="channels of the convolutional layers (F)", low=1)
    resolution: tuple[int, int] = param(
        (64, 64),
        help="(height, width) the network works at; (0, 0): the pairs' size rounded up to multiples of 4",
        check=_check_resolution,
        check_text="(0, 0) or two multiples of 4 (≥ 4)",
    )
    linear_layer: bool = param(True, help="the linear layer between encoder and decoder (False: the ablation)")
    loss: str = param("ssim", help="training loss", choices=("ssim", "mse", "l1"))
    epochs: int = param(200, help="maximum training epochs", low=1)
    lr: float = param(1e-4, help="initial Adam learning rate", low=0.0, low_inclusive=False)
    batch_size: int = param(64, help="minibatch size", low=1)
    lr_factor: float = param(
        0.75, help="learning-rate factor on a validation plateau", low=0.0, high=1.0, low_inclusive=False
    )
    lr_patience: int = param(5, help="epochs without improvement before the learning rate is reduced", low=0)
    patience: int = param(20, help="epochs without improvement before training stops (0: never)", low=0)
    validation: float = param(
        0.1,
        help="share of the pairs held out for the schedule and early stopping "
        "(0: none; then the training loss is monitored)",
        low=0.0,
        high=0.5,
    )
    warmup: int = param(0, help="epochs of linear learning-rate warm-up before the schedule", low=0)
    restarts: int = param(
        2,
        help="trainings again from the next seeds when the validation loss never beat the anonymized input's or "
        "the mean face's (a collapsed model)",
        low=0,
    )
    weights: str = weights_param("a torch state dict of this network (e.g. a save_checkpoint file)")
    seed: int = param(0, help="random seed (initialization, validation split, batch order)")
    device: str = device_param()
    precision: str = precision_param()
    threads: int = param(0, help="torch intra-op threads (0 = all available cores)", low=0, affects_output=False)
    payload: str = param("", help="payload column (default: image)")

    model_: Any = fitted()
    column_: str | None = fitted()
    size_: tuple | None = fitted()  # (h, w) the network works at
    channels_: int | None = fitted()
    dtype_: str | None = fitted()
    device_: str | None = fitted()  # the concrete device the network is on
    history_: list | None = fitted()
    best_epoch_: int | None = fitted()
    held_out_: np.ndarray | None = fitted()  # sample ids of the validation pairs (not trained on)
    learned_: bool | None = fitted()  # whether the kept training beat the trivial answers (None: no validation)
    seed_used_: int | None = fitted()  # the seed of the kept training (seed + k after k restarts)
    attempts_: list | None = fitted()  # each training run (restarts included): seed, epochs, best loss, learned

    # ------------------------------------------------------------------------------------------------ helpers
    def _work_size(self, h: int, w: int) -> tuple[int, int]:
        if self.resolution != (0, 0):
            return cast(tuple[int, int], tuple(self.resolution))
        return (-(-h // 4) * 4, -(-w // 4) * 4)

    def _linear_problem(self, size: tuple[int, int]) -> str:
        """Why the linear layer at ``size`` is too large ('' when it is not)."""
        latent = self.features * (size[0] // 4) * (size[1] // 4)
        if not self.linear_layer or latent * latent <= _MAX_LINEAR_WEIGHTS:
            return ""
        return (
            f"a linear layer of at most {_MAX_LINEAR_WEIGHTS:,} weights ({_MAX_LINEAR_WEIGHTS * 4 / 1e9:.1f} GB "
            f"in float32, about 4× that while training with Adam): with features={self.features} at "
            f"resolution {tuple(size)} it would have (features·h/4·w/4)² = {latent * latent:,}; lower the "
            f"parameter 'features' or 'resolution'"
        )

    def _network(self, torch, channels: int, size: tuple[int, int]):
        problem = self._linear_problem(size)
        if problem:
            raise ParameterError(self.id, "features", self.features, problem)
        return build_network(torch, channels, self.features, size, self.linear_layer)

    @staticmethod
    def _to_array(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """N×H×W×C grey levels → N×C×h×w float32 in 0..1."""
        r = resize_batch(x, size, "area" if size[0] <= x.shape[1] and size[1] <= x.shape[2] else "linear")
        return np.ascontiguousarray(r.transpose(0, 3, 1, 2) / np.float32(255.0))

    def _loss_fn(self, torch):
        if self.loss == "ssim":
            return ssim_loss
        return torch.nn.MSELoss() if self.loss == "mse" else torch.nn.L1Loss()

    # ------------------------------------------------------------------------------------------------- checks
    def preflight(self, table) -> list[str]:
        """Problems found before any work: torch missing, a linear layer over the cap at the data's image size,
        a ``weights`` file that does not fit the network built for the data."""
        missing = self.requirement_problems()
        if missing:
            return missing
        column = self.payload or next((c for c in self.payloads if c in table.payload_names), None)
        shape: tuple[Any, ...] = table.payload_shape(column) if column in table.payload_names else (None,)
        if len(shape) != 3 or None in shape:
            return []  # the payload check reports the table
        size = self._work_size(shape[0], shape[1])
        problem = self._linear_problem(size)
        if problem:
            return [f"{self.id}: features={self.features}, resolution={tuple(self.resolution)}: {problem}"]
        from bioanon.api import preflight_weights

        return preflight_weights(
            self, lambda torch: build_network(torch, shape[2], self.features, size, self.linear_layer), skip=()
        )

    # ---------------------------------------------------------------------------------------------------- fit
    def fit(self, clear, anonymized):
        from bioanon.api import (
            held_out_pairs,
            method_training,
            paired_ids,
            resolve_device,
            stage,
            take_rows,
            train_net,
        )

        torch = _torch(self.id)
        dev = resolve_device(self.device, who=self.id)
        column, y, x = paired_images(self, clear, anonymized)
        n, h, w, c = y.shape
        size = self._work_size(h, w)
        problem = self._linear_problem(size)
        if problem:
            raise ParameterError(self.id, "features", self.features, problem)
        self.column_, self.size_, self.channels_ = column, size, int(c)
        self.dtype_ = np.dtype(anonymized.payload(column).dtype).str
        ids = paired_ids(clear, anonymized)
        val, tr = (np.sort(part) for part in held_out_pairs(ids, self.validation, self.seed))  # copies: by source
        n_val = len(val)
        self.held_out_ = ids[val] if n_val else None
        x_all, y_all = self._to_array(x, size), self._to_array(y, size)
        del x, y
        x_tr, y_tr = stage(torch.from_numpy(x_all[tr]), dev), stage(torch.from_numpy(y_all[tr]), dev)
        x_va, y_va = stage(torch.from_numpy(x_all[val]), dev), stage(torch.from_numpy(y_all[val]), dev)
        del x_all, y_all
        loss_fn = self._loss_fn(torch)

        def batch(idx: np.ndarray, rng: np.random.Generator):
            return take_rows(idx, x_tr, y_tr)

        def validation(net):
            total = 0.0
            for s in range(0, n_val, self.batch_size):
                xb, yb = x_va[s : s + self.batch_size], y_va[s : s + self.batch_size]
                xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
                total = total + loss_fn(net(xb), yb).double() * len(xb)
            return total / n_val

        def baseline() -> float:  # the validation loss of trivial answers: the anonymized input, the mean face
            mean_face = y_tr.to(dev).float().mean(dim=0, keepdim=True)
            with torch.no_grad():
                return min(float(validation(lambda xb: xb)), float(validation(lambda xb: mean_face.expand_as(xb))))

        trained = train_net(
            lambda: self._network(torch, c, size),
            batch,
            len(tr),
            loss=lambda net, xb, yb: loss_fn(net(xb), yb),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            optimizer="adam",
            scheduler="plateau",
            plateau_factor=self.lr_factor,
            plateau_patience=self.lr_patience,
            validation=validation if n_val else None,
            patience=self.patience,
            keep_best=True,
            warmup=self.warmup,
            baseline=baseline if n_val else None,
            restarts=self.restarts,
            install=self.requires["torch"],
            **method_training(self, clear, anonymized, label="pairs", device=dev),
        )
        self.model_, self.device_ = trained.net, dev
        self.history_, self.best_epoch_ = trained.history, trained.best_epoch
        self.learned_, self.seed_used_ = trained.learned, trained.seed
        self.attempts_ = trained.attempts
        return self

    # ---------------------------------------------------------------------------------------------- transform
    def predict(self, x: np.ndarray) -> np.ndarray:
        """De-anonymized images (float32 grey levels, N×H×W×C at the input's size) of N×H×W×C images ``x``."""
        from bioanon.api import infer

        require_fitted(self, "model_", call="fit()", before="transform()")
        if x.shape[-1] != self.channels_:
            raise TableError(
                f"{self.id}: images of payload {self.column_!r} have {x.shape[-1]} channels, the "
                f"model was trained on {self.channels_}"
            )
        _torch(self.id)
        n, h, w, c = x.shape
        out = np.empty(x.shape, np.float32)
        size = cast(tuple[int, int], self.size_)  # set with model_ by fit() or a checkpoint
        shrink = h <= size[0] and w <= size[1]
        model = self.model_
        for s in range(0, n, 4096):  # bounds the resized copies in host memory
            y = infer(
                lambda t: model(t).clamp(0.0, 1.0),
                self._to_array(x[s : s + 4096], size),
                out_shape=(c, *size),
                batch_size=256,
                threads=self.threads,
                device=cast(str, self.device_),
                precision=self.precision,
            )
            out[s : s + 4096] = resize_batch(
                y.transpose(0, 2, 3, 1) * np.float32(255.0), (h, w), "area" if shrink else "linear"
            )
        return out

    def transform(self, table):
        require_fitted(self, "model_", call="fit()", before="transform()")
        column, x = _images(self, table, self.column_)
        return table.with_payload(column, restore_dtype(self.predict(x), np.dtype(self.dtype_)))

    # -------------------------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Save the fitted network (CPU tensors) and the parameters (``torch.save``)."""
        require_fitted(self, "model_", call="fit()", before="save_checkpoint()")
        torch = _torch(self.id)
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()}
        state = {k: v.detach().cpu() for k, v in self.model_.state_dict().items()}
        torch.save(
            {
                "id": self.id,
                "version": self.version,
                "params": params,
                "state_dict": state,
                "column": self.column_,
                "size": list(cast(tuple[int, int], self.size_)),
                "channels": self.channels_,
                "dtype": self.dtype_,
                "history": self.history_,
                "best_epoch": self.best_epoch_,
            },
            os.fspath(path),
        )

    @classmethod
    def load_checkpoint(cls, path: str | os.PathLike, *, device: str | None = None) -> Fantomas:
        """A fitted instance from :meth:`save_checkpoint`'s file (``torch.load(weights_only=True)``), on
        ``device`` (default: the saved ``device`` parameter, i.e. usually the run's device)."""
        from bioanon.api import resolve_device

        torch = _torch(cls.id)
        ck = torch.load(os.fspath(path), weights_only=True, map_location="cpu")
        if ck.get("id") != cls.id:
            raise DataError(f"{path}: not a {cls.id} checkpoint (id {ck.get('id')!r})")
        params = dict(ck["params"])
        if device is not None:
            params["device"] = device
        m = cls(**params)
        size = tuple(ck["size"])
        model = m._network(torch, ck["channels"], size)
        model.load_state_dict(ck["state_dict"])
        dev = resolve_device(m.device, who=m.id)
        m.model_, m.column_, m.size_, m.channels_, m.dtype_ = (
            model.to(dev).eval(),
            ck["column"],
            size,
            ck["channels"],
            ck["dtype"],
        )
        m.device_, m.history_, m.best_epoch_ = dev, ck["history"], ck["best_epoch"]
        return m


@attrs.define(kw_only=True)
class FantomasConv(Fantomas):
    """The Fantômas auto-encoder without its linear layer: the convolution-only ablation of the Fantômas paper §7.6.

    Same encoder, decoder and training as ``face.fantomas``; without the linear layer every output pixel depends
    only on a small neighbourhood of the input (receptive field about 10 pixels at the working resolution), as in
    Pix2Pix-like convolutional models, so global permutations cannot be undone (E2.2)."""

    id: ClassVar[str] = "face.fantomas_conv"
    reference: ClassVar[str] = "fantomas §7.6 (version of the model without the linear layer)"

    linear_layer: bool = param(False, help="the linear layer between encoder and decoder (False: the ablation)")
