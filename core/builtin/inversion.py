"""Learned non-linear inversion: a multilayer perceptron from anonymized to clear payloads (torch, lazy import).

The Fantômas paper §4–5: the strongest test of an anonymization is whether an attacker who can run it on their
own data learns to undo it. :class:`~bioanon.builtin.deanonymizers.RidgeInversion` undoes linear maps; this one
also undoes smooth non-linear ones (saturations, warps) given enough attacker pairs.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from ..device import resolve_device
from ..errors import DataError, require_fitted
from ..methods import Deanonymizer, device_param, fitted, param, precision_param, weights_param
from ..nettrain import infer, method_training, preflight_weights, stage, take_rows, train_net
from ..payloads import restore_dtype
from ..torchutil import import_torch
from .deanonymizers import held_out_pairs, paired_ids, paired_payloads
from .recognizers import column_std

__all__ = ["MlpInversion"]


def _torch() -> Any:
    return import_torch("any.mlp_inversion", "pip install 'bioanon[torch]'")


def _trivial_loss(xs: np.ndarray, ys: np.ndarray) -> float:
    """The mean squared error of trivial answers in the standardized space: the mean (zero), and the input itself
    when it has the output's size."""
    losses = [float(np.mean(ys.astype(np.float64) ** 2))]
    if xs.shape == ys.shape:
        losses.append(float(np.mean((xs.astype(np.float64) - ys) ** 2)))
    return min(losses)


def _standardize_stats(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = a.mean(axis=0, dtype=np.float64)
    scale = column_std(a)
    scale[scale < 1e-8] = 1.0
    return mean.astype(np.float32), scale.astype(np.float32)


def _build(
    torch: Any, d_in: int, d_out: int, hidden: tuple[int, ...], activation: str, skip: bool, generator: Any = None
) -> Any:
    """The network; initialized from ``generator`` (PyTorch's default init, without the global RNG)."""
    nn = torch.nn
    act = {"relu": nn.ReLU, "gelu": nn.GELU}[activation]

    def linear(i: int, o: int, bias: bool = True) -> Any:
        layer = torch.nn.utils.skip_init(nn.Linear, i, o, bias=bias)
        if generator is not None:  # nn.Linear.reset_parameters, with our generator
            nn.init.kaiming_uniform_(layer.weight, a=5**0.5, generator=generator)
            if bias:
                bound = 1.0 / i**0.5 if i > 0 else 0.0
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
        return layer

    class Net(nn.Module):  # type: ignore[misc,name-defined]  # torch is imported lazily: its classes are Any here
        def __init__(self) -> None:
            super().__init__()
            layers: list[Any] = []
            width = d_in
            for h in hidden:
                layers += [linear(width, h), act()]
                width = h
            layers.append(linear(width, d_out))
            self.mlp = nn.Sequential(*layers)
            self.skip = linear(d_in, d_out, bias=False) if skip and hidden else None
            if self.skip is not None and generator is not None:
                nn.init.zeros_(self.skip.weight)  # start as the plain MLP; the skip learns the linear part

        def forward(self, x: Any) -> Any:
            y = self.mlp(x)
            return y if self.skip is None else y + self.skip(x)

    return Net()


@attrs.define(kw_only=True)
class MlpInversion(Deanonymizer):
    """Non-linear inversion: an MLP regressing clear payloads from anonymized ones, learned on attacker pairs.

    ``fit(clear, anonymized)`` pairs the attacker's samples by sample id, standardizes inputs and targets
    (per feature, on the pairs), and trains a multilayer perceptron (``hidden`` sizes, ReLU or GELU, an optional
    linear skip connection from input to output) with the mean squared error and Adam. A seeded share
    ``validation`` of the pairs is held out; training stops after ``patience`` epochs without a lower validation
    loss and keeps the best weights. ``history_`` holds the per-epoch losses (standardized units).

    Determinism: all randomness comes from ``seed`` — initialization through a private ``torch.Generator``,
    validation split and batch order through seeded numpy generators (the loop is
    :func:`bioanon.nettrain.train_net`, which leaves torch's global RNG as it found it) —, so two fits with the
    same parameters and data give the same weights on the same machine and device. ``device``/``precision``:
    where and in what arithmetic it trains and infers (:mod:`bioanon.device`); the training pairs stay on the
    device. ``weights``: a state dict of this network (e.g. a :meth:`save_checkpoint` file) to fine-tune from;
    :meth:`preflight` checks it fits before a run starts. ``threads`` sets torch's intra-op threads during
    fit/transform (0 = all available cores) and is restored afterwards. ``transform`` runs under
    ``torch.inference_mode()`` and returns the clear payload's shape and dtype (integers rounded and clipped).
    Checkpoints:
    :meth:`save_checkpoint` / :meth:`load_checkpoint` (``torch.save`` / ``torch.load(weights_only=True)``)."""

    id: ClassVar[str] = "any.mlp_inversion"
    requires: ClassVar[dict[str, str]] = {"torch": "pip install 'bioanon[torch]'"}
    payloads: ClassVar[tuple[str, ...]] = ("features", "imu", "pose", "image")
    reference: ClassVar[str] = "fantomas §4-5 (de-anonymization before recognition)"
    example_params: ClassVar[dict[str, Any]] = {"hidden": (16,), "epochs": 3, "batch_size": 16}

    hidden: tuple[int, ...] = param((256, 256), help="hidden layer sizes (empty: a linear model)", low=1)
    activation: str = param("relu", help="hidden-layer activation", choices=("relu", "gelu"))
    skip: bool = param(True, help="add a linear skip connection from input to output")
    epochs: int = param(200, help="maximum training epochs", low=1)
    batch_size: int = param(64, help="minibatch size", low=1)
    lr: float = param(1e-3, help="Adam learning rate", low=0.0, low_inclusive=False)
    weight_decay: float = param(0.0, help="Adam weight decay (L2)", low=0.0)
    validation: float = param(0.1, help="share of the pairs held out for early stopping (0: none)", low=0.0, high=0.5)
    patience: int = param(10, help="epochs without a lower validation loss before stopping (0: never stop)", low=0)
    warmup: int = param(0, help="epochs of linear learning-rate warm-up", low=0)
    restarts: int = param(
        2,
        help="trainings again from the next seeds when the validation loss never beat the anonymized input's or "
        "the mean's (a model that did not learn)",
        low=0,
    )
    seed: int = param(0, help="random seed (initialization, validation split, batch order)")
    threads: int = param(0, help="torch intra-op threads (0 = all available cores)", low=0, affects_output=False)
    payload: str = param("", help="payload column (default: the first supported one present)")
    device: str = device_param()
    precision: str = precision_param()
    weights: str = weights_param("a state dict of this network (or a save_checkpoint file)")

    model_: Any = fitted()
    x_mean_: np.ndarray | None = fitted()
    x_scale_: np.ndarray | None = fitted()
    y_mean_: np.ndarray | None = fitted()
    y_scale_: np.ndarray | None = fitted()
    column_: str | None = fitted()
    shape_: tuple[int, ...] | None = fitted()
    dtype_: str | None = fitted()
    history_: list[dict[str, float]] | None = fitted()
    best_epoch_: int | None = fitted()
    device_: str | None = fitted()
    held_out_: np.ndarray | None = fitted()  # sample ids of the validation pairs (not trained on)
    learned_: bool | None = fitted()  # whether the kept training beat the trivial answers (None: no validation)
    seed_used_: int | None = fitted()  # the seed of the kept training (seed + k after k restarts)

    def _threads(self) -> int:
        return self.threads

    def _net(self, torch: Any, d_in: int, d_out: int, seed: int | None = None) -> Any:
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        return _build(torch, d_in, d_out, self.hidden, self.activation, self.skip, gen)

    def preflight(self, table: Any) -> list[str]:
        """Problems found before any work: torch missing, or a ``weights`` file that does not fit the network
        for ``table``'s payload (input and output sizes are the payload's)."""
        column = self.payload_column(table, self.payload or None)
        shape = table.payload_shape(column)
        d = int(np.prod(shape)) if None not in shape else 0  # variable-length payloads: the data checks say so
        return preflight_weights(self, (lambda torch: self._net(torch, d, d)) if d else None, skip=())

    # ------------------------------------------------------------------------------------------------- fit
    def fit(self, clear: Any, anonymized: Any) -> MlpInversion:
        torch = _torch()
        column = self.payload_column(anonymized, self.payload or None)
        y, x = paired_payloads(clear, anonymized, column)
        sample = clear.payload(column)
        self.column_, self.shape_, self.dtype_ = column, tuple(sample.shape[1:]), np.dtype(sample.dtype).str
        self.x_mean_, self.x_scale_ = _standardize_stats(x)
        self.y_mean_, self.y_scale_ = _standardize_stats(y)
        xs = (x - self.x_mean_) / self.x_scale_
        ys = (y - self.y_mean_) / self.y_scale_
        ids = paired_ids(clear, anonymized)
        val, tr = held_out_pairs(ids, self.validation, self.seed)  # augmented copies share their source's part
        n_val = len(val)
        self.held_out_ = ids[np.sort(val)] if n_val else None
        dev = resolve_device(self.device, who=self.id)
        x_tr, y_tr = (stage(torch.from_numpy(np.ascontiguousarray(a[tr])), dev) for a in (xs, ys))
        x_va, y_va = (torch.from_numpy(np.ascontiguousarray(a[val])).to(dev) for a in (xs, ys))
        loss_fn = torch.nn.MSELoss()

        def batch(idx: np.ndarray, rng: np.random.Generator) -> tuple[Any, Any]:
            return take_rows(idx, x_tr, y_tr)

        trained = train_net(
            lambda: self._net(torch, xs.shape[1], ys.shape[1], self.seed),
            batch,
            len(tr),
            loss=lambda net, xb, yb: loss_fn(net(xb).float(), yb),
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=self.weight_decay,
            validation=(lambda net: loss_fn(net(x_va).float(), y_va)) if n_val else None,
            patience=self.patience,
            keep_best=True,
            warmup=self.warmup,
            baseline=_trivial_loss(xs[val], ys[val]) if n_val else None,
            restarts=self.restarts,
            **method_training(self, x, y, label="mlp_inversion", device=dev),
        )
        self.model_, self.history_, self.best_epoch_ = trained.net, trained.history, trained.best_epoch
        self.device_, self.learned_, self.seed_used_ = dev, trained.learned, trained.seed
        return self

    # ------------------------------------------------------------------------------------------- transform
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Clear-domain estimates (float32, flattened) of flattened anonymized payloads ``x`` (N, D)."""
        require_fitted(self, "model_", call="fit()", before="transform()")
        _torch()
        # the four statistics are set by fit() with model_ (or by load_checkpoint)
        x_mean, x_scale = cast(np.ndarray, self.x_mean_), cast(np.ndarray, self.x_scale_)
        y_mean, y_scale = cast(np.ndarray, self.y_mean_), cast(np.ndarray, self.y_scale_)
        xs = ((np.asarray(x, dtype=np.float32) - x_mean) / x_scale).astype(np.float32)
        dev = self._run_device()
        out = infer(
            self.model_,
            xs,
            out_shape=(len(y_mean),),
            batch_size=4096,
            threads=self._threads(),
            device=dev,
            precision=self.precision,
        )
        estimate: np.ndarray = out * y_scale + y_mean
        return estimate

    def _run_device(self) -> str:
        """The fitted network's device (moved there once when a loaded model sits elsewhere)."""
        if self.device_ is None:
            self.device_ = resolve_device(self.device, who=self.id)
            self.model_.to(self.device_)
        return self.device_

    def transform(self, table: Any) -> Any:
        require_fitted(self, "model_", call="fit()", before="transform()")
        x = table.payload(self.column_)
        out = self.predict(x.reshape(len(x), -1)).reshape((len(x), *cast(tuple[int, ...], self.shape_)))
        return table.with_payload(self.column_, restore_dtype(out, np.dtype(self.dtype_)))

    # ----------------------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Save the fitted network, the standardization and the parameters (``torch.save``)."""
        require_fitted(self, "model_", call="fit()", before="save_checkpoint()")
        torch = _torch()
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()}
        torch.save(
            {
                "id": self.id,
                "version": self.version,
                "params": params,
                "state_dict": {k: v.cpu() for k, v in self.model_.state_dict().items()},
                "stats": {
                    k: torch.from_numpy(getattr(self, k).copy()) for k in ("x_mean_", "x_scale_", "y_mean_", "y_scale_")
                },
                "column": self.column_,
                "shape": list(cast(tuple[int, ...], self.shape_)),
                "dtype": self.dtype_,
                "history": self.history_,
                "best_epoch": self.best_epoch_,
            },
            os.fspath(path),
        )

    @classmethod
    def load_checkpoint(cls, path: str | os.PathLike[str]) -> MlpInversion:
        """A fitted instance from :meth:`save_checkpoint`'s file (``torch.load(weights_only=True)``)."""
        torch = _torch()
        ck = torch.load(os.fspath(path), weights_only=True, map_location="cpu")
        if ck.get("id") != cls.id:
            raise DataError(f"{path}: not a {cls.id} checkpoint (id {ck.get('id')!r})")
        m = cls(**ck["params"])
        for k, v in ck["stats"].items():
            setattr(m, k, v.numpy())
        model = m._net(torch, len(cast(np.ndarray, m.x_mean_)), len(cast(np.ndarray, m.y_mean_)))
        model.load_state_dict(ck["state_dict"])
        model.eval()
        m.model_, m.column_, m.shape_, m.dtype_ = model, ck["column"], tuple(ck["shape"]), ck["dtype"]
        m.history_, m.best_epoch_ = ck["history"], ck["best_epoch"]
        return m
