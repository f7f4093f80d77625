"""One seeded training loop, the classification heads and batched inference for the networks bioanon trains.

The gait, motion and voice embedding networks, the face ArcFace recognizer, the perceptual-similarity backbone
and the MLP inversion all train the same way; this module is that way, written once:

* :func:`train_net` — build the network inside a forked, seeded torch RNG (the caller's global RNG is restored
  afterwards), Adam or AdamW (optional weight decay), a cosine or reduce-on-plateau learning-rate schedule,
  epochs over mini-batches of a seeded numpy permutation (the same numpy generator is handed to the batch
  callback for augmentation), batches smaller than two skipped when the network has batch norm, an optional
  validation loss with early stopping that restores the best epoch's weights, ``net.eval()`` at the end. It
  returns the trained network and the per-epoch loss history.
* :func:`arcface_head` — the additive-angular-margin (ArcFace / AAM-softmax) head of Deng et al. (2019)
  (``false-sense-of-privacy.txt`` §5.5: "ArcFace Retrained"); :func:`softmax_head` — the cross-entropy head.
* :func:`infer` — batched inference under ``torch.inference_mode()`` with a thread count, returning numpy.

torch is imported only when these functions run (``import bioanon.nettrain`` does not import it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .torchutil import import_torch, torch_threads

__all__ = ["Trained", "train_net", "arcface_head", "softmax_head", "infer", "has_batch_norm", "SCHEDULERS",
           "OPTIMIZERS"]

SCHEDULERS = ("cosine", "plateau", "none")
OPTIMIZERS = ("adam", "adamw")


@dataclass
class Trained:
    """What :func:`train_net` returns: the trained network (in eval mode), one record per epoch run
    (``epoch`` from 1, ``train_loss`` — the sample-weighted mean of the epoch's batch losses —, ``lr`` and, with
    validation, ``val_loss``) and the epoch whose weights the network holds when the best epoch was restored
    (else the last epoch)."""

    net: Any
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0

    @property
    def losses(self) -> list[float]:
        """The per-epoch training losses."""
        return [r["train_loss"] for r in self.history]


def has_batch_norm(net: Any) -> bool:
    """Whether the network has a batch-norm layer (which cannot train on a batch of one sample)."""
    import torch

    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in net.modules())


def train_net(
    build: Callable[[], Any],
    batch: Callable[[np.ndarray, np.random.Generator], Sequence[Any]],
    n: int,
    *,
    loss: Callable[..., Any] | None = None,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float = 0.0,
    optimizer: str = "adam",
    scheduler: str = "none",
    seed: int = 0,
    threads: int = 0,
    validation: Callable[[Any], float] | None = None,
    patience: int = 0,
    keep_best: bool | None = None,
    plateau_patience: int = 5,
    plateau_factor: float = 0.5,
    method_id: str = "bioanon.nettrain",
    install: str = "pip install torch",
) -> Trained:
    """Train the network ``build()`` on ``n`` samples; deterministic for ``seed`` on one machine.

    ``build()`` is called inside ``torch.random.fork_rng`` after ``torch.manual_seed(seed)`` (initialization and
    dropout are seeded; the caller's global RNG state is restored afterwards). Each epoch visits the samples in
    the order of ``np.random.default_rng(seed).permutation(n)`` (one generator for the whole run) in chunks of
    ``batch_size``; ``batch(idx, rng)`` turns a chunk's indices into the tensors the loss takes (it may use
    ``rng`` for augmentation). ``loss(net, *tensors)`` returns the scalar loss (default ``net.loss(*tensors)``).
    Chunks of one sample are skipped when the network has batch norm.

    ``optimizer``: ``adam`` or ``adamw`` (``weight_decay`` is Adam's L2 term or AdamW's decoupled decay).
    ``scheduler``: ``cosine`` (annealed to 0 over ``epochs``), ``plateau`` (the rate times ``plateau_factor``
    after ``plateau_patience`` epochs without a lower monitored loss) or ``none``, stepped once per epoch.
    ``validation(net)``: the validation loss, computed in eval mode without gradients; it is the monitored loss
    (else the training loss). With validation and ``patience`` > 0, training stops after ``patience`` epochs
    without a lower validation loss. ``keep_best`` (default: whenever there is validation) restores the weights
    of the epoch with the lowest monitored loss at the end. ``threads``: torch intra-op threads (0 = all cores)."""
    torch = import_torch(method_id, install)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"{method_id}: optimizer {optimizer!r} is not one of {OPTIMIZERS}")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"{method_id}: scheduler {scheduler!r} is not one of {SCHEDULERS}")
    if keep_best is None:
        keep_best = validation is not None
    rng = np.random.default_rng(seed)
    history: list[dict[str, float]] = []
    best, best_state, best_epoch, waited = float("inf"), None, 0, 0
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build()
        step_loss = loss if loss is not None else (lambda model, *tensors: model.loss(*tensors))
        opt_cls = torch.optim.Adam if optimizer == "adam" else torch.optim.AdamW
        opt = opt_cls(net.parameters(), lr=lr, weight_decay=weight_decay)
        if scheduler == "cosine":
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
        elif scheduler == "plateau":
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=plateau_factor,
                                                               patience=plateau_patience)
        else:
            sched = None
        min_batch = 2 if has_batch_norm(net) else 1
        for epoch in range(1, epochs + 1):
            net.train()
            order = rng.permutation(n)
            total, seen = 0.0, 0
            lr_now = float(opt.param_groups[0]["lr"])
            for start in range(0, n, batch_size):
                idx = order[start:start + batch_size]
                if len(idx) < min_batch:  # batch norm needs two samples
                    continue
                tensors = batch(idx, rng)
                opt.zero_grad(set_to_none=True)
                value = step_loss(net, *tensors)
                value.backward()
                opt.step()
                total += float(value.detach()) * len(idx)
                seen += len(idx)
            record = {"epoch": epoch, "train_loss": total / max(seen, 1), "lr": lr_now}
            if validation is not None:
                net.eval()
                with torch.no_grad():
                    record["val_loss"] = float(validation(net))
            history.append(record)
            monitored = record.get("val_loss", record["train_loss"])
            if sched is not None:
                if scheduler == "plateau":
                    sched.step(monitored)
                else:
                    sched.step()
            if monitored < best:
                best, best_epoch, waited = monitored, epoch, 0
                if keep_best:
                    best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                waited += 1
                if validation is not None and patience and waited >= patience:
                    break
        if keep_best and best_state is not None:
            net.load_state_dict(best_state)
        else:
            best_epoch = len(history)
        net.eval()
    return Trained(net=net, history=history, best_epoch=best_epoch)


# ------------------------------------------------------------------------------------------------------ heads

@functools.cache
def _head_classes(torch: Any) -> tuple[type, type]:
    """The head module classes, defined once torch is imported."""
    nn = torch.nn
    F = torch.nn.functional

    class ArcFaceHead(nn.Module):
        """Additive angular margin softmax (ArcFace, Deng et al. 2019): logits ``s·cos(θ_y + m)`` for the true
        class and ``s·cos θ_j`` for the others, θ the angle between the normalized embedding and class weight."""

        def __init__(self, in_dim: int, n_classes: int, margin: float, scale: float) -> None:
            super().__init__()
            self.n_classes, self.margin, self.scale = n_classes, float(margin), float(scale)
            self.weight = nn.Parameter(torch.randn(n_classes, in_dim) * 0.01)

        def forward(self, emb, labels=None):
            """Scaled cosine logits; with ``labels`` the true class's logit carries the margin."""
            cos = F.normalize(emb, dim=1) @ F.normalize(self.weight, dim=1).T
            if labels is None:
                return self.scale * cos
            cos = cos.clamp(-1 + 1e-7, 1 - 1e-7)
            target = torch.cos(torch.acos(cos) + self.margin)
            onehot = F.one_hot(labels, self.n_classes).to(cos.dtype)
            return self.scale * (onehot * target + (1 - onehot) * cos)

        def loss(self, emb, labels):
            """The AAM-softmax cross-entropy."""
            return F.cross_entropy(self(emb, labels), labels)

    class SoftmaxHead(nn.Module):
        """ReLU → dropout → linear classifier; cross-entropy (optionally label-smoothed) loss."""

        def __init__(self, in_dim: int, n_classes: int, dropout: float, label_smoothing: float) -> None:
            super().__init__()
            self.label_smoothing = float(label_smoothing)
            self.layers = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Linear(in_dim, n_classes))

        def forward(self, emb, labels=None):
            """Class logits."""
            return self.layers(emb)

        def loss(self, emb, labels):
            """The cross-entropy of the logits."""
            return F.cross_entropy(self(emb), labels, label_smoothing=self.label_smoothing)

    return ArcFaceHead, SoftmaxHead


def arcface_head(in_dim: int, n_classes: int, *, margin: float = 0.2, scale: float = 30.0) -> Any:
    """An additive-angular-margin (ArcFace / AAM-softmax) head: ``head(emb, labels)`` → margin logits,
    ``head(emb)`` → scaled cosine logits, ``head.loss(emb, labels)`` → cross-entropy. ``margin`` m in radians,
    ``scale`` s. Class weights start as N(0, 0.01²). Deng et al., ArcFace, CVPR 2019."""
    torch = import_torch("bioanon.nettrain.arcface_head")
    return _head_classes(torch)[0](in_dim, n_classes, margin, scale)


def softmax_head(in_dim: int, n_classes: int, *, dropout: float = 0.0, label_smoothing: float = 0.0) -> Any:
    """A cross-entropy classification head: ReLU, dropout, linear; ``head.loss(emb, labels)``."""
    torch = import_torch("bioanon.nettrain.softmax_head")
    return _head_classes(torch)[1](in_dim, n_classes, dropout, label_smoothing)


# -------------------------------------------------------------------------------------------------- inference

def infer(fn: Callable[[Any], Any], x: np.ndarray | Sequence[np.ndarray], *, out_shape: tuple[int, ...],
          batch_size: int = 256, threads: int = 0, dtype: Any = np.float32) -> np.ndarray:
    """``fn`` applied to ``x`` in batches of ``batch_size`` under ``torch.inference_mode()`` with ``threads``
    torch threads; the outputs as one numpy array of ``dtype`` with per-sample shape ``out_shape`` (which also
    gives the shape of an empty result).

    ``x`` is a numpy array (first axis the samples) or a list of per-sample arrays of different shapes (e.g.
    utterances of different lengths): samples of one shape are batched together, without padding, and the
    outputs are returned in the order of ``x``."""
    torch = import_torch("bioanon.nettrain.infer")
    out = np.empty((len(x), *out_shape), dtype=dtype)
    if isinstance(x, np.ndarray):
        groups = [(np.arange(len(x)), x)]
    else:
        shapes: dict[tuple, list[int]] = {}
        for i, a in enumerate(x):
            shapes.setdefault(np.shape(a), []).append(i)
        groups = [(np.array(rows), None) for rows in shapes.values()]
    with torch_threads(threads), torch.inference_mode():
        for rows, arr in groups:
            for start in range(0, len(rows), batch_size):
                part = rows[start:start + batch_size]
                chunk = arr[start:start + batch_size] if arr is not None else np.stack([x[i] for i in part])
                out[part] = fn(torch.from_numpy(np.ascontiguousarray(chunk))).numpy()
    return out
