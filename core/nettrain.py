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
  (the False Sense of Privacy paper §5.5: "ArcFace Retrained"); :func:`softmax_head` — the cross-entropy head.
* :func:`infer` — batched inference under ``torch.inference_mode()`` with a thread count, returning numpy.

torch is imported only when these functions run (``import bioanon.nettrain`` does not import it).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import BioanonError, ParameterError
from .fileio import file_digest
from .torchutil import import_torch, torch_threads

log = logging.getLogger(__name__)

__all__ = [
    "Trained",
    "train_net",
    "arcface_head",
    "softmax_head",
    "infer",
    "has_batch_norm",
    "SCHEDULERS",
    "OPTIMIZERS",
    "WeightsError",
    "check_weights",
    "load_weights",
    "read_state_dict",
    "to_device",
    "training_key",
    "using_weight_cache",
    "file_digest",
    "stage",
    "batch_rows",
    "take_rows",
    "preflight_weights",
    "GraphedStep",
    "GraphedLoss",
    "method_training",
]

SCHEDULERS = ("cosine", "plateau", "multistep", "none")
OPTIMIZERS = ("adam", "adamw", "sgd")


@dataclass
class Trained:
    """What :func:`train_net` returns: the trained network (in eval mode), one record per epoch run
    (``epoch`` from 1, ``train_loss`` — the sample-weighted mean of the epoch's batch losses —, ``lr`` and, with
    validation, ``val_loss``) and the epoch whose weights the network holds when the best epoch was restored
    (else the last epoch)."""

    net: Any
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    precision: str = "fp32"  # the precision the weights were trained in (after any fallback to fp32)
    seed: int = 0  # the seed of the kept run (another than the one asked for after restarts)
    learned: bool | None = None  # whether its best monitored loss beat the baseline (None: no baseline given)
    # every training run, the kept one included, in order: seed, precision, epochs run, best monitored loss, learned
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def best_loss(self) -> float:
        """The monitored loss (validation, else training) of the epoch whose weights the network holds."""
        if not self.history:
            return float("inf")
        record = self.history[max(self.best_epoch, 1) - 1]
        return float(record.get("val_loss", record["train_loss"]))

    @property
    def losses(self) -> list[float]:
        """The per-epoch training losses."""
        return [r["train_loss"] for r in self.history]


def has_batch_norm(net: Any) -> bool:
    """Whether the network has a batch-norm layer (which cannot train on a batch of one sample)."""
    import torch

    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in net.modules())


class GraphedLoss:
    """A training loss whose forward and backward run as CUDA graphs, one graph per shape of the batch tensors
    (``torch.cuda.make_graphed_callables``): a small network's step is otherwise bound by the launch of its many
    tiny kernels. The optimizer step stays eager (:func:`train_net` uses it with SGD; Adam and AdamW train in
    whole-step graphs, :class:`GraphedStep`). A shape beyond the first ``limit`` runs eagerly; a failed
    capture (a loss that synchronizes with the host, an operation graphs do not support) is logged once and
    every later step runs eagerly. Capturing runs three warm-up passes on the batch, which would move the
    batch-norm running statistics: they are restored, so only the dropout draws differ from an eager training.
    Use it only for a loss whose computation is the same for the same input shapes (no host-side randomness or
    data-dependent control flow): a graph replays what it recorded."""

    def __init__(self, torch: Any, net: Any, step_loss: Callable[..., Any], method_id: str, limit: int = 64):
        self.torch, self.net, self.step_loss, self.method_id, self.limit = torch, net, step_loss, method_id, limit
        self.graphs: dict[tuple[Any, ...], Any] = {}
        self.failed: str | None = None

    def _wrap(self) -> Any:
        net, step_loss = self.net, self.step_loss
        module: Any = self.torch.nn.Module  # a value here (torch is imported lazily)

        class LossOf(module):  # type: ignore[misc]  # each graph gets its own wrapper: the network's parameters, this loss
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def forward(self, *tensors: Any) -> Any:
                return step_loss(self.net, *tensors)

        return LossOf()

    def __call__(self, *tensors: Any) -> Any:
        key = tuple((tuple(t.shape), t.dtype, t.requires_grad) for t in tensors)
        graphed = self.graphs.get(key)
        if graphed is None and self.failed is None and len(self.graphs) < self.limit:
            graphed = self._capture(key, tensors)
        return graphed(*tensors) if graphed is not None else self.step_loss(self.net, *tensors)

    def _capture(self, key: tuple[Any, ...], tensors: Sequence[Any]) -> Any:
        torch = self.torch
        buffers = [b.detach().clone() for b in self.net.buffers()]
        try:
            static = tuple(t.detach().clone(memory_format=torch.contiguous_format) for t in tensors)
            graphed = torch.cuda.make_graphed_callables(self._wrap(), static, num_warmup_iters=3)
        except Exception as exc:  # noqa: BLE001 - any capture failure: train eagerly, and say so
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("%s: CUDA graph capture failed (%s); training without graphs", self.method_id, self.failed)
            _end_failed_capture(torch)
            return None
        finally:
            with torch.no_grad():
                for b, saved in zip(self.net.buffers(), buffers, strict=True):
                    b.copy_(saved)
        self.graphs[key] = graphed
        return graphed


class GraphedStep:
    """A whole training step — the loss's forward and backward, the optimizer's update and the loss's running
    sum — replayed as one CUDA graph per batch shape (``torch.cuda.graph``): one launch per step instead of the
    hundreds of a small network's eager step, so the host no longer paces the GPU. The optimizer must be
    capturable (Adam or AdamW with ``capturable=True`` and a tensor learning rate, which the schedule fills in
    place). :meth:`step` copies a batch into the shape's static inputs and replays its graph; it returns False
    when the step must run eagerly (a capture failed, logged once, or more than ``limit`` shapes).

    Capturing runs the step on a side stream first (``warmup`` times for the first shape, once for the next:
    lazy initializations and cuDNN's choice of algorithms must not happen inside a capture). Those passes would
    move the weights, the optimizer's moments, the batch-norm statistics and the loss sum: everything is
    restored afterwards (a moment that did not exist before is zeroed, which is the optimizer's fresh state), so
    only the dropout draws differ from an eager training. Use it only for a loss without host-side randomness
    or data-dependent control flow: a graph replays what it recorded."""

    def __init__(
        self,
        torch: Any,
        net: Any,
        step_loss: Callable[..., Any],
        opt: Any,
        amp: Callable[[], Any],
        method_id: str,
        device: str,
        limit: int = 64,
        warmup: int = 3,
    ):
        self.torch, self.net, self.step_loss, self.opt, self.amp = torch, net, step_loss, opt, amp
        self.method_id, self.limit, self.warmup = method_id, limit, warmup
        self.total = torch.zeros((), dtype=torch.float64, device=device)  # the replayed steps' loss sum
        self.graphs: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...]]] = {}
        self.failed: str | None = None

    def step(self, tensors: Sequence[Any], rows: int) -> bool:
        """Train on one batch (``rows`` samples) by replaying its shape's graph; False: run it eagerly."""
        key = tuple((tuple(t.shape), t.dtype) for t in tensors) + (rows,)
        entry = self.graphs.get(key)
        if entry is None:
            if self.failed is not None or len(self.graphs) >= self.limit:
                return False
            entry = self._capture(key, tensors, rows)
            if entry is None:
                return False
        graph, static = entry
        for s, t in zip(static, tensors, strict=True):
            s.copy_(t, non_blocking=True)
        graph.replay()
        return True

    def _run(self, static: tuple[Any, ...], rows: int) -> None:
        """The step a graph records (gradients start from None: the backward writes them, never adds)."""
        with self.amp():
            value = self.step_loss(self.net, *static)
        value.backward()
        self.opt.step()
        self.total.add_(value.detach().double() * rows)

    def _capture(self, key: tuple[Any, ...], tensors: Sequence[Any], rows: int) -> Any:
        torch = self.torch
        saved = self._state()
        static = tuple(t.detach().clone(memory_format=torch.contiguous_format) for t in tensors)
        warmup = self.warmup if not self.graphs else 1
        try:
            with warnings.catch_warnings():  # a capture on a side stream: torch warns, harmlessly
                warnings.filterwarnings("ignore", "The AccumulateGrad node's stream", UserWarning)
                graph = self._record(lambda: self._run(static, rows), warmup)
        except Exception as exc:  # noqa: BLE001 - any capture failure: train eagerly, and say so
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("%s: CUDA graph capture failed (%s); training without graphs", self.method_id, self.failed)
            graph = None
        finally:
            self._restore(saved)
            self.opt.zero_grad(set_to_none=True)
        if graph is None:
            return None
        self.graphs[key] = (graph, static)
        return graph, static

    def _record(self, run: Callable[[], None], warmup: int) -> Any:
        """``run`` warmed up on a side stream, then captured into a CUDA graph on that same stream (as torch's
        ``make_graphed_callables`` does: the autograd nodes the warm-up made remember their stream, and a
        backward that had to join another stream would invalidate the capture)."""
        torch = self.torch
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.opt.zero_grad(set_to_none=True)
                run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph, stream=side):
                run()
        except Exception:
            _end_failed_capture(torch)
            raise
        torch.cuda.synchronize()
        return graph

    def _tensors(self) -> list[Any]:
        """Every tensor a step changes: weights, buffers, the optimizer's state and the loss sum."""
        state = [v for s in self.opt.state.values() for v in s.values() if hasattr(v, "copy_")]
        return [*self.net.parameters(), *self.net.buffers(), *state, self.total]

    def _state(self) -> dict[int, Any]:
        with self.torch.no_grad():
            return {id(t): t.detach().clone() for t in self._tensors()}

    def _restore(self, saved: dict[int, Any]) -> None:
        with self.torch.no_grad():
            for t in self._tensors():
                old = saved.get(id(t))
                if old is None:
                    t.zero_()  # a moment made by the warm-up: an optimizer's fresh state is zero
                else:
                    t.copy_(old)


def _end_failed_capture(torch: Any) -> None:
    """Leave the CUDA random generator usable after a failed capture. A capture that fails at its end leaves
    the default generator in capture mode, and every later random draw on the device (dropout) would fail with
    "Offset increment outside graph capture": an empty capture begins and ends cleanly, which resets it."""
    try:
        torch.cuda.synchronize()
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            pass
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the training goes on eagerly; say what may follow
        log.warning("could not reset the CUDA random generator after a failed capture (%s)", exc)


def set_lr(group: dict[str, Any], value: float) -> None:
    """Set a parameter group's learning rate, in place when it is a tensor (a captured step reads it there)."""
    if hasattr(group["lr"], "fill_"):
        group["lr"].fill_(value)
    else:
        group["lr"] = value


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
    momentum: float = 0.9,
    scheduler: str = "none",
    milestones: Sequence[float] = (),
    seed: int = 0,
    threads: int = 0,
    validation: Callable[[Any], float] | None = None,
    patience: int = 0,
    keep_best: bool | None = None,
    plateau_patience: int = 5,
    plateau_factor: float = 0.5,
    warmup: int = 0,
    baseline: float | Callable[[], float] | None = None,
    restarts: int = 0,
    min_gain: float = 0.05,
    device: str = "cpu",
    precision: str = "fp32",
    init: Callable[[Any], None] | None = None,
    freeze: str | None = None,
    store_key: str | None = None,
    progress: bool | None = None,
    cuda_graphs: bool = False,
    method_id: str = "bioanon.nettrain",
    install: str = "pip install torch",
) -> Trained:
    """Train the network ``build()`` on ``n`` samples; deterministic for ``seed`` on one machine and device.

    ``build()`` is called inside ``torch.random.fork_rng`` after ``torch.manual_seed(seed)`` (initialization and
    dropout are seeded; the caller's global RNG state is restored afterwards), then ``init(net)`` (e.g.
    :func:`load_weights` of the user's pretrained weights) and the network is moved to ``device``. Each epoch
    visits the samples in the order of ``np.random.default_rng(seed).permutation(n)`` (one generator for the
    whole run) in chunks of ``batch_size``; ``batch(idx, rng)`` turns a chunk's indices into the tensors the
    loss takes (it may use ``rng`` for augmentation; CPU tensors are pinned and copied without blocking, tensors
    already on the device are used as they are). ``loss(net, *tensors)`` returns the scalar loss (default
    ``net.loss(*tensors)``). Chunks of one sample are skipped when the network has batch norm. Losses are summed
    on the device and read once per epoch (no synchronization per batch).

    ``optimizer``: ``adam``, ``adamw`` or ``sgd`` (with ``momentum``, Nesterov off); ``weight_decay`` is the L2
    term (AdamW: decoupled decay); on CUDA, Adam and AdamW use torch's fused implementation. ``scheduler``:
    ``cosine`` (annealed to 0 over ``epochs``), ``plateau`` (the rate times ``plateau_factor`` after
    ``plateau_patience`` epochs without a lower monitored loss),
    ``multistep`` (the rate divided by 10 at each of ``milestones``, fractions of ``epochs``) or ``none``,
    stepped once per epoch. ``validation(net)``: the validation loss, computed in eval mode without gradients
    (under the same autocast); it is the monitored loss (else the training loss). With validation and
    ``patience`` > 0, training stops after ``patience`` epochs without a lower validation loss. ``keep_best``
    (default: whenever there is validation) restores the weights of the epoch with the lowest monitored loss.

    ``warmup``: the first ``warmup`` epochs raise the learning rate linearly to ``lr`` (``lr·e/warmup`` in epoch
    e; the scheduler starts after them, cosine annealing over the remaining epochs). ``baseline``: the monitored
    loss of a trivial answer (e.g. the input returned unchanged, or the mean target; or a function computing it);
    a training whose best
    monitored loss is not below ``(1 − min_gain)·baseline`` has not learned, and is run again from the seeds
    ``seed + 1``, ``seed + 2``, … at most ``restarts`` times; the best run is kept, and
    :attr:`Trained.learned` says whether it beat the baseline (None without one), :attr:`Trained.seed` which
    seed it came from.

    ``device``: where the network trains (a device text, resolved by :func:`bioanon.device.resolve_device`).
    ``precision``: ``fp32``, ``bf16``, ``fp16`` (autocast; fp16 with a gradient scaler) or ``auto``
    (:func:`bioanon.device.resolve_precision`). ``freeze``: the name of a submodule (e.g. ``"backbone"``) whose
    parameters are not trained and which stays in eval mode (its batch-norm statistics are kept).
    ``store_key``: when set and a weight cache is active (:func:`using_weight_cache`; an evaluation activates
    its own cache), the trained weights and history are kept there under this key, and a later call with the
    same key — in this or another process — loads them instead of training (build it with
    :func:`training_key`). ``progress``: an epoch progress bar with the loss (default: when stderr is a
    terminal and ``BIOANON_PROGRESS`` is not ``0``). ``threads``: torch intra-op threads (0 = all cores).
    ``cuda_graphs``: on a CUDA device in fp32 or bf16, run each full batch's whole step (forward, backward and
    the Adam/AdamW update) as a CUDA graph, one per batch shape (:class:`GraphedStep`; with SGD only the loss's
    forward and backward, :class:`GraphedLoss`); only for a loss without host-side randomness or
    data-dependent control flow; ignored elsewhere."""
    torch = import_torch(method_id, install)
    from .device import autocast, resolve_device, resolve_precision

    if optimizer not in OPTIMIZERS:
        raise ParameterError(method_id, "optimizer", optimizer, f"one of {OPTIMIZERS}")
    if scheduler not in SCHEDULERS:
        raise ParameterError(method_id, "scheduler", scheduler, f"one of {SCHEDULERS}")
    dev = resolve_device(device, who=method_id)
    prec = resolve_precision(precision, dev)
    if keep_best is None:
        keep_best = validation is not None
    store = _WEIGHT_CACHE.get() if store_key else None
    if store is not None and store_key:  # (store_key is set whenever store is)
        found = _load_trained(torch, store, store_key, build, seed, dev)
        if found is not None:
            return found
    cuda = dev.startswith("cuda")

    for name, value in (("warmup", warmup), ("restarts", restarts)):
        if value < 0:
            raise ParameterError(method_id, name, value, "≥ 0")
    # computed only when there is a training to judge (not for cached weights)
    base_loss = float(baseline()) if callable(baseline) else baseline

    def attempt(prec: str, seed: int) -> Trained | None:
        """Train from ``seed`` in ``prec``; None when a reduced precision gave a non-finite loss."""
        rng = np.random.default_rng(seed)
        history: list[dict[str, float]] = []
        best, best_state, best_epoch, waited = float("inf"), None, 0, 0
        with torch_threads(threads), torch.random.fork_rng(devices=_rng_devices(dev)):
            torch.manual_seed(seed)
            net = build()
            if init is not None:
                init(net)
            net = net.to(dev)
            frozen = _freeze(net, freeze, method_id)
            step_loss: Callable[..., Any] = loss if loss is not None else (lambda model, *tensors: model.loss(*tensors))
            params = [p for p in net.parameters() if p.requires_grad]
            scaler = torch.amp.GradScaler(dev.split(":")[0]) if prec == "fp16" else None
            graphs = cuda_graphs and cuda and scaler is None
            # Adam and AdamW train in whole-step graphs (capturable, the rate a tensor); SGD graphs its loss only
            whole_step = graphs and optimizer != "sgd"
            if optimizer == "sgd":
                opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
            else:
                opt_cls = torch.optim.Adam if optimizer == "adam" else torch.optim.AdamW
                # on CUDA one fused kernel updates every parameter (the same Adam step; fewer launches per batch)
                fused: dict[str, Any] = {"fused": True} if cuda and all(p.is_floating_point() for p in params) else {}
                rate: Any = lr
                if whole_step:
                    fused["capturable"] = True
                    rate = torch.tensor(float(lr), dtype=torch.float32, device=dev)
                opt = opt_cls(params, lr=rate, weight_decay=weight_decay, **fused)
            if scheduler == "cosine":
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs - warmup))
            elif scheduler == "plateau":
                sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
                    opt, mode="min", factor=plateau_factor, patience=plateau_patience
                )
            elif scheduler == "multistep":
                steps = sorted({max(1, int(round(f * epochs))) for f in milestones})
                sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=steps, gamma=0.1)
            else:
                sched = None
            min_batch = 2 if has_batch_norm(net) else 1
            graphed = GraphedLoss(torch, net, step_loss, method_id) if graphs and not whole_step else None
            stepper = (
                GraphedStep(torch, net, step_loss, opt, lambda: autocast(torch, dev, prec, cache=False), method_id, dev)
                if whole_step
                else None
            )
            bar = _epoch_bar(epochs, method_id, progress)
            for epoch in range(1, epochs + 1):
                net.train()
                if frozen is not None:
                    frozen.eval()
                if epoch <= warmup:  # linear warm-up; the scheduler takes over after it
                    for group in opt.param_groups:
                        set_lr(group, lr * epoch / warmup)
                order = rng.permutation(n)
                total = torch.zeros((), dtype=torch.float64, device=dev)
                seen = 0
                lr_now = float(opt.param_groups[0]["lr"])
                for start in range(0, n, batch_size):
                    idx = order[start : start + batch_size]
                    if len(idx) < min_batch:  # batch norm needs two samples
                        continue
                    tensors = [to_device(t, dev) for t in batch(idx, rng)]
                    # full batches replay their shape's graph; the last, smaller one of an epoch runs eagerly
                    if stepper is not None and len(idx) == batch_size and stepper.step(tensors, len(idx)):
                        seen += len(idx)
                        continue
                    opt.zero_grad(set_to_none=True)
                    with autocast(torch, dev, prec, cache=graphed is None):
                        value = step_loss(net, *tensors) if graphed is None else graphed(*tensors)
                    if scaler is not None:
                        scaler.scale(value).backward()
                        scaler.step(opt)
                        scaler.update()
                    elif graphed is not None:
                        with warnings.catch_warnings():  # the capture ran on a side stream: torch warns, harmlessly
                            warnings.filterwarnings("ignore", "The AccumulateGrad node's stream", UserWarning)
                            value.backward()
                        opt.step()
                    else:
                        value.backward()
                        opt.step()
                    total += value.detach().double() * len(idx)
                    seen += len(idx)
                if stepper is not None:
                    total = total + stepper.total
                    stepper.total.zero_()
                record = {"epoch": epoch, "train_loss": float(total) / max(seen, 1), "lr": lr_now}
                if validation is not None:
                    net.eval()
                    with torch.no_grad(), autocast(torch, dev, prec):
                        record["val_loss"] = float(validation(net))
                history.append(record)
                if prec != "fp32" and not all(np.isfinite(v) for k, v in record.items() if k.endswith("loss")):
                    if bar is not None:
                        bar.close()
                    failed.append(epoch)  # reduced precision overflowed: the caller trains again in fp32
                    return None
                if bar is not None:
                    bar.set_postfix({k: f"{v:.4g}" for k, v in record.items() if k.endswith("loss")}, refresh=False)
                    bar.update()
                monitored = record.get("val_loss", record["train_loss"])
                if sched is not None and epoch > warmup:
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
            if bar is not None:
                bar.close()
            if keep_best and best_state is not None:
                net.load_state_dict(best_state)
            else:
                best_epoch = len(history)
            net.eval()
            if cuda:
                torch.cuda.synchronize(dev)
        return Trained(net=net, history=history, best_epoch=best_epoch, precision=prec, seed=seed)

    failed: list[int] = []
    attempts: list[dict[str, Any]] = []

    def run(seed: int) -> Trained:
        trained = attempt(prec, seed)
        if trained is None:
            warnings.warn(
                f"{method_id}: training in {prec} on {dev} gave a non-finite loss at epoch {failed[-1]}; trained "
                f"again from the same seed in fp32 (set precision = 'fp32' to skip the {prec} attempt)",
                RuntimeWarning,
                stacklevel=3,
            )
            trained = attempt("fp32", seed)
            if trained is None:  # pragma: no cover - fp32 never returns None
                raise BioanonError(f"{method_id}: training failed in fp32 too")
        if base_loss is not None:
            trained.learned = bool(trained.best_loss < (1.0 - min_gain) * base_loss)
        attempts.append(
            {
                "seed": trained.seed,
                "precision": trained.precision,
                "epochs": len(trained.history),
                "best_loss": trained.best_loss,
                "learned": trained.learned,
            }
        )
        return trained

    trained = run(seed)
    for k in range(1, restarts + 1):
        if trained.learned is not False:
            break
        log.warning(
            "%s: the training from seed %d did not learn (best monitored loss %.4g, a trivial answer's %.4g); "
            "training again from seed %d (restart %d of at most %d)",
            method_id, trained.seed, trained.best_loss, base_loss, seed + k, k, restarts,
        )  # fmt: skip
        again = run(seed + k)
        if again.best_loss < trained.best_loss:
            trained = again
    trained.attempts = attempts
    if store is not None and store_key:
        _store_trained(torch, store, store_key, trained)
    return trained


def _rng_devices(device: str) -> list[int]:
    """The CUDA devices whose RNG ``fork_rng`` saves and restores (none on the CPU)."""
    return [int(device.split(":")[1])] if device.startswith("cuda:") else []


def to_device(t: Any, device: str) -> Any:
    """A tensor on ``device``: CPU tensors bound for CUDA are pinned and copied without blocking; a tensor
    already there is returned as it is."""
    if not hasattr(t, "to") or str(t.device) == device or (device == "cpu" and t.device.type == "cpu"):
        return t
    if device.startswith("cuda") and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def batch_rows(idx: np.ndarray, like: Any) -> Any:
    """A batch's sample indices ``idx`` as an index tensor on the device of the staged tensor ``like``, for
    ``like[rows]``. On a CUDA device the copy does not block: indexing a CUDA tensor with a numpy array (or a
    CPU index tensor) makes torch copy the index and wait for the GPU's queue to drain at every batch, which
    for a small network costs more than the batch's own work."""
    import torch

    rows = torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int64))
    if like.device.type == "cpu":
        return rows
    return rows.to(like.device, non_blocking=True)


def take_rows(idx: np.ndarray, *tensors: Any) -> tuple[Any, ...]:
    """``t[idx]`` for each of the staged ``tensors`` (the batch of every tensor a loss takes), the index copied
    once per device with :func:`batch_rows` (staged tensors may sit on the GPU or, when too large, pinned on the
    CPU)."""
    rows: dict[Any, Any] = {}
    for t in tensors:
        if t.device not in rows:
            rows[t.device] = batch_rows(idx, t)
    return tuple(t[rows[t.device]] for t in tensors)


def stage(t: Any, device: str, share: float = 0.25) -> Any:
    """A whole training tensor placed for batching: on a CUDA device when it takes at most ``share`` of the
    device's free memory (batches are then indexed there, with no copy per batch), else pinned in CPU memory
    (each batch is copied without blocking by :func:`train_net`); on the CPU it is returned as it is."""
    if not device.startswith("cuda") or t.device.type != "cpu":
        return t if device == "cpu" or t.device.type != "cpu" else t.to(device)
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    if t.element_size() * t.nelement() <= share * free:
        return t.to(device)
    return t.pin_memory()


def _freeze(net: Any, name: str | None, method_id: str) -> Any:
    """Stop training submodule ``name`` of ``net``; returns it (None without ``name``)."""
    if not name:
        return None
    part = getattr(net, name, None)
    if part is None or not hasattr(part, "parameters"):
        raise ParameterError(method_id, "freeze", name, "the name of a submodule of the network")
    part.requires_grad_(False)
    return part


def _epoch_bar(epochs: int, method_id: str, progress: bool | None) -> Any:
    from .log import progress_bar, show_progress

    if not show_progress(progress):
        return None
    return progress_bar(total=epochs, desc=f"{method_id} training", unit="epoch", leave=False)


# --------------------------------------------------------------------------------------- trained weight cache

_WEIGHT_CACHE: contextvars.ContextVar[Any] = contextvars.ContextVar("bioanon_weight_cache", default=None)


@contextlib.contextmanager
def using_weight_cache(cache: Any) -> Iterator[None]:
    """Inside the block, :func:`train_net` keeps trained weights in ``cache`` (a :class:`bioanon.cache.Cache`;
    None: keep nothing). ``BIOANON_WEIGHT_CACHE=0`` turns this off."""
    import os

    if os.environ.get("BIOANON_WEIGHT_CACHE", "1") == "0":
        cache = None
    token = _WEIGHT_CACHE.set(cache)
    try:
        yield
    finally:
        _WEIGHT_CACHE.reset(token)


def training_key(method: Any, *data: Any, label: str = "") -> str:
    """The key of a network trained by ``method`` on ``data`` (tables, arrays or JSON-able ids) for ``label``:
    the method's fingerprint (id, version, the parameters that change results and the device kind), the data's
    content fingerprints, the label and, for a ``weights`` file, its content digest."""
    from .cache import fingerprint, table_fingerprint

    parts = []
    for d in data:
        if getattr(d, "arrow", None) is not None:
            parts.append({"table": table_fingerprint(d)})
        elif isinstance(d, np.ndarray):
            parts.append({"array": _array_digest(d)})
        else:
            parts.append(d)
    weights = getattr(method, "weights", "")
    return fingerprint(
        {
            "method": method.fingerprint(),
            "data": parts,
            "label": label,
            "weights": file_digest(weights) if weights else "",
        }
    )


def _array_digest(a: np.ndarray) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=20)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).data)
    return h.hexdigest()


def _store_trained(torch: Any, cache: Any, key: str, trained: Trained) -> None:
    import io

    buf = io.BytesIO()
    state = {k: v.detach().cpu() for k, v in trained.net.state_dict().items()}
    torch.save(
        {
            "format": "bioanon.trained/1",
            "state_dict": state,
            "history": trained.history,
            "best_epoch": trained.best_epoch,
            "precision": trained.precision,
            "seed": trained.seed,
            "learned": trained.learned,
            "attempts": trained.attempts,
        },
        buf,
    )
    try:
        cache.put_blob(key, buf.getvalue())
    except Exception as exc:  # noqa: BLE001 - keeping weights is an optimization; the result stands
        warnings.warn(f"bioanon: could not keep trained weights {key} in the cache: {exc}", stacklevel=3)


def _load_trained(torch: Any, cache: Any, key: str, build: Callable[[], Any], seed: int, dev: str) -> Trained | None:
    import io

    raw = cache.get_blob(key)
    if raw is None:
        return None
    try:
        saved = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = build()
        net.load_state_dict(saved["state_dict"])
    except Exception as exc:  # noqa: BLE001 - an unreadable entry is moved aside and the network retrained
        cache.discard_blob(key, exc)
        return None
    net = net.to(dev).eval()
    precision = str(saved.get("precision", "fp32"))
    learned = saved.get("learned")
    return Trained(
        net=net,
        history=list(saved["history"]),
        best_epoch=int(saved["best_epoch"]),
        precision=precision,
        seed=int(saved.get("seed", seed)),
        learned=None if learned is None else bool(learned),
        attempts=[dict(a) for a in saved.get("attempts", [])],
    )


# ------------------------------------------------------------------------------------------------------ heads


@functools.cache
def _head_classes(torch: Any) -> tuple[type, type]:
    """The head module classes, defined once torch is imported."""
    nn = torch.nn
    F = torch.nn.functional

    class ArcFaceHead(nn.Module):  # type: ignore[misc,name-defined]  # torch is imported lazily: its classes are Any here
        """Additive angular margin softmax (ArcFace, Deng et al. 2019): logits ``s·cos(θ_y + m)`` for the true
        class and ``s·cos θ_j`` for the others, θ the angle between the normalized embedding and class weight."""

        def __init__(self, in_dim: int, n_classes: int, margin: float, scale: float) -> None:
            super().__init__()
            self.n_classes, self.margin, self.scale = n_classes, float(margin), float(scale)
            self.weight = nn.Parameter(torch.randn(n_classes, in_dim) * 0.01)

        def forward(self, emb: Any, labels: Any = None) -> Any:
            """Scaled cosine logits; with ``labels`` the true class's logit carries the margin."""
            cos = F.normalize(emb, dim=1) @ F.normalize(self.weight, dim=1).T
            if labels is None:
                return self.scale * cos
            cos = cos.clamp(-1 + 1e-7, 1 - 1e-7)
            target = torch.cos(torch.acos(cos) + self.margin)
            onehot = F.one_hot(labels, self.n_classes).to(cos.dtype)
            return self.scale * (onehot * target + (1 - onehot) * cos)

        def loss(self, emb: Any, labels: Any) -> Any:
            """The AAM-softmax cross-entropy."""
            return F.cross_entropy(self(emb, labels), labels)

    class SoftmaxHead(nn.Module):  # type: ignore[misc,name-defined]  # torch is imported lazily: its classes are Any here
        """ReLU → dropout → linear classifier; cross-entropy (optionally label-smoothed) loss."""

        def __init__(self, in_dim: int, n_classes: int, dropout: float, label_smoothing: float) -> None:
            super().__init__()
            self.label_smoothing = float(label_smoothing)
            self.layers = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Linear(in_dim, n_classes))

        def forward(self, emb: Any, labels: Any = None) -> Any:
            """Class logits."""
            return self.layers(emb)

        def loss(self, emb: Any, labels: Any) -> Any:
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


def infer(
    fn: Callable[[Any], Any],
    x: np.ndarray | Sequence[np.ndarray],
    *,
    out_shape: tuple[int, ...],
    batch_size: int = 256,
    threads: int = 0,
    dtype: Any = np.float32,
    device: str = "cpu",
    precision: str = "fp32",
) -> np.ndarray:
    """``fn`` applied to ``x`` in batches of ``batch_size`` under ``torch.inference_mode()`` with ``threads``
    torch threads, on ``device`` (batches are pinned and copied without blocking; the outputs stay on the
    device until the end, then come back in one copy) with ``precision`` autocast; the outputs as one numpy
    array of ``dtype`` with per-sample shape ``out_shape`` (which also gives the shape of an empty result).

    ``x`` is a numpy array (first axis the samples) or a list of per-sample arrays of different shapes (e.g.
    utterances of different lengths): samples of one shape are batched together, without padding, and the
    outputs are returned in the order of ``x``."""
    torch = import_torch("bioanon.nettrain.infer")
    from .device import autocast, resolve_device, resolve_precision

    dev = resolve_device(device, who="bioanon.nettrain.infer")
    prec = resolve_precision(precision, dev)
    groups: list[tuple[np.ndarray, np.ndarray | None]]
    if isinstance(x, np.ndarray):
        groups = [(np.arange(len(x)), x)]
    else:
        shapes: dict[tuple[int, ...], list[int]] = {}
        for i, a in enumerate(x):
            shapes.setdefault(np.shape(a), []).append(i)
        groups = [(np.array(rows), None) for rows in shapes.values()]
    with torch_threads(threads), torch.inference_mode(), autocast(torch, dev, prec):
        out = torch.empty(
            (len(x), *out_shape), dtype=torch.float64 if np.dtype(dtype) == np.float64 else torch.float32, device=dev
        )
        for rows, arr in groups:
            for start in range(0, len(rows), batch_size):
                part = rows[start : start + batch_size]
                chunk = arr[start : start + batch_size] if arr is not None else np.stack([x[i] for i in part])
                y = fn(to_device(torch.from_numpy(np.ascontiguousarray(chunk)), dev))
                if len(part) == part[-1] - part[0] + 1:  # consecutive rows: a slice, no index tensor
                    out[int(part[0]) : int(part[-1]) + 1] = y
                else:
                    out[to_device(torch.from_numpy(part), dev)] = y.to(out.dtype)
        result: np.ndarray = out.cpu().numpy()
    return result.astype(dtype, copy=False)


# ------------------------------------------------------------------------------------------- user weights


class WeightsError(BioanonError, ValueError):
    """A weights file that cannot be read or does not fit the network (names the file and the layer)."""


_CLASSIFIER_KEYS = ("fc.", "classifier.", "head.fc.", "last_linear.")  # timm classifiers (num_classes=0 here)


def read_state_dict(path: str, *, who: str = "", param: str = "weights") -> dict[str, Any]:
    """The tensors of a weights file: a torch state dict, or a checkpoint holding one under ``state_dict``,
    ``model``, ``state_dict_ema`` or ``net`` (timm, Lightning and bioanon checkpoints); ``module.`` prefixes
    (DataParallel) are removed. Read with ``torch.load(weights_only=True)``: a file that would run code is
    refused. Errors name ``who`` (the method), the parameter and the file."""
    import os

    torch = import_torch(who or "bioanon.nettrain")
    prefix = f"{who}: {param} {path!r}"
    if not path or not os.path.isfile(path):
        raise WeightsError(f"{prefix}: no such file")
    try:
        obj = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - pickles with code, truncated files, other formats
        raise WeightsError(
            f"{prefix}: not a torch weights file that loads with weights_only=True "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    for key in ("state_dict", "model", "state_dict_ema", "net"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not obj or not all(hasattr(v, "shape") for v in obj.values()):
        raise WeightsError(f"{prefix}: holds no state dict of tensors")
    return {(k[7:] if k.startswith("module.") else k): v for k, v in obj.items()}


def load_weights(
    net: Any,
    path: str,
    *,
    who: str = "",
    param: str = "weights",
    skip: Sequence[str] = ("head.",),
    dry_run: bool = False,
) -> list[str]:
    """Load a weights file into ``net`` (or, with ``dry_run``, only check that it fits); returns the names of
    the network's parameters and buffers it set.

    The file's keys are matched against the network's as they are or under ``backbone.`` (a timm backbone
    checkpoint for a bioanon network whose backbone is ``net.backbone``), whichever matches more. Keys under
    ``skip`` (default: the classification head, whose size is the number of training classes) are not
    loaded; timm classifier keys (``fc.``, ``classifier.``, …) of the file are ignored. Every other key of the
    matched part of the network must be in the file with the same shape.

    Raises
    ------
    WeightsError
        naming the file and the first layers that are missing or whose shapes differ (file vs network), or
        when nothing matches.
    """
    state = read_state_dict(path, who=who, param=param)
    own = net.state_dict()
    prefix = f"{who}: {param} {path!r}"
    candidates = [""] + (["backbone."] if hasattr(net, "backbone") else [])
    best = max(candidates, key=lambda p: sum((p + k) in own for k in state))
    mapped = {best + k: v for k, v in state.items()}
    scope = [k for k in own if k.startswith(best) and not any(k.startswith(s) for s in skip)]
    matched = [k for k in scope if k in mapped]
    if not matched:
        raise WeightsError(
            f"{prefix}: none of its {len(state)} tensors (e.g. {next(iter(state))!r}) matches a "
            f"layer of the network (e.g. {next(iter(own))!r}); is it for another architecture?"
        )
    bad = [
        f"{k}: {tuple(mapped[k].shape)} in the file, {tuple(own[k].shape)} in the network"
        for k in matched
        if tuple(mapped[k].shape) != tuple(own[k].shape)
    ]
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise WeightsError(f"{prefix} does not fit the network: layer " + "; layer ".join(bad[:3]) + more)
    missing = [k for k in scope if k not in mapped and not k.endswith("num_batches_tracked")]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise WeightsError(f"{prefix} does not fit the network: it has no layer " + ", ".join(missing[:3]) + more)
    extra = [
        k
        for k in state
        if best + k not in own
        and not any(k.startswith(c) for c in _CLASSIFIER_KEYS)
        and not any((best + k).startswith(s) for s in skip)
    ]
    if extra:
        raise WeightsError(
            f"{prefix} does not fit the network: the network has no layer "
            + ", ".join(repr(k) for k in extra[:3])
            + (f" (and {len(extra) - 3} more)" if len(extra) > 3 else "")
        )
    if not dry_run:
        net.load_state_dict({k: mapped[k] for k in matched}, strict=False)
    return matched


def method_training(method: Any, *data: Any, label: str = "", device: str) -> dict[str, Any]:
    """The :func:`train_net` arguments every torch method passes the same way: its ``seed``, ``threads``,
    ``precision``, the concrete ``device``, its ``weights`` file loaded before training (the head skipped),
    ``freeze`` of its ``backbone``, the trained-weight cache key of ``method`` on ``data`` for ``label``, its
    ``cuda_graphs`` (False when it has none) and its id for messages."""
    weights = getattr(method, "weights", "")
    return {
        "seed": method.seed,
        "threads": method.threads,
        "device": device,
        "precision": getattr(method, "precision", "fp32"),
        "init": (lambda net: load_weights(net, weights, who=method.id)) if weights else None,
        "freeze": "backbone" if getattr(method, "freeze", False) else None,
        "store_key": training_key(method, *data, label=label),
        "cuda_graphs": bool(getattr(method, "cuda_graphs", False)),
        "method_id": method.id,
    }


def preflight_weights(
    method: Any, build: Callable[[Any], Any] | None, *, skip: Sequence[str] = ("head.",)
) -> list[str]:
    """A torch-backed method's ``preflight``: its missing packages, else the problems of loading its ``weights``
    file (if any) into ``build(torch)`` (:func:`check_weights`). ``build`` None: the network cannot be built for
    this data (the data checks report why), so the file is not checked."""
    problems: list[str] = method.requirement_problems()
    if problems or not getattr(method, "weights", "") or build is None:
        return problems
    torch = import_torch(method.id)
    return check_weights(lambda: build(torch), method.weights, who=method.id, skip=skip)


def check_weights(
    build: Callable[[], Any], path: str, *, who: str = "", param: str = "weights", skip: Sequence[str] = ("head.",)
) -> list[str]:
    """Problems (one line each; empty when it fits) of loading ``path`` into ``build()``: the network is built on
    torch's ``meta`` device, so nothing is allocated or computed."""
    torch = import_torch(who or "bioanon.nettrain")
    try:
        with torch.device("meta"):
            net = build()
        load_weights(net, path, who=who, param=param, skip=skip, dry_run=True)
    except WeightsError as exc:
        return [str(exc)]
    return []
