"""Where torch-backed methods run: device selection, mixed precision and what a run records about its device.

Every torch-backed method has a ``device`` parameter. Its default, ``""``, means *the run's device*, which is,
from the first that is set:

1. ``--device`` on ``bioanon evaluate`` / ``anonymize`` / ``demo`` (or ``evaluate(..., device=...)``);
2. ``[run] device`` in the evaluation config;
3. the ``BIOANON_DEVICE`` environment variable;
4. ``"auto"``: CUDA when present, else Apple ``mps``, else the CPU.

A device is ``"auto"``, ``"cpu"``, ``"cuda"`` (the current CUDA device), ``"cuda:N"`` or ``"mps"``.
:func:`resolve_device` turns one into a concrete device (``"cuda:0"``, ``"cpu"``, …) and fails with a
:class:`DeviceError` naming the parameter when the device is not there. Inside a block, :func:`using_device`
sets the run's device for this thread (``bioanon.evaluate`` and the CLI do this).

Precision: ``precision="auto"`` trains and infers with bf16 autocast on a CUDA device that supports it (fp16 with
gradient scaling on older GPUs) and in fp32 on the CPU and ``mps``; ``"fp32"``, ``"bf16"`` and ``"fp16"`` force
one. Autocast keeps weights and losses in fp32; on the bundled tests the embeddings of an fp32 network under
bf16 autocast stay within a cosine of 0.99 of the fp32 embeddings (``tests/test_device.py``).

Caching: results computed on the CPU and on a GPU are not bitwise equal (other kernels, TF32, reduced precision),
and a trained network turns small differences into other votes. The cache key of a torch-backed method therefore
includes the *kind* of device it ran on (``cpu``, ``cuda``, ``mps``) — not the index: ``cuda:0`` and ``cuda:1``
share results — so a CPU run never reuses a GPU run's results or the other way round (:meth:`Method.fingerprint
<bioanon.methods.Method.fingerprint>`).

torch is imported only when a device is resolved (``import bioanon.device`` does not import it).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from .errors import BioanonError

__all__ = [
    "DEVICE_ENV",
    "DEVICE_HELP",
    "PRECISIONS",
    "DeviceError",
    "autocast",
    "check_device_text",
    "default_device",
    "describe_device",
    "device_kind",
    "resolve_device",
    "resolve_precision",
    "using_device",
    "method_device",
]  # the device_param / precision_param / weights_param helpers are in bioanon.methods (also bioanon.api)

DEVICE_ENV = "BIOANON_DEVICE"
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICE_HELP = (
    "torch device: '' = the run's device (--device, [run] device, BIOANON_DEVICE, else auto); "
    "auto, cpu, cuda, cuda:N or mps"
)
_DEVICE_RE = re.compile(r"(auto|cpu|mps|cuda(:\d+)?)")
_RUN_DEVICE: contextvars.ContextVar[str | None] = contextvars.ContextVar("bioanon_run_device", default=None)


class DeviceError(BioanonError, ValueError):
    """A device that is not valid, or not available on this machine."""


def check_device_text(value: Any) -> bool:
    """Whether ``value`` is a device text: ``""`` (the run's), ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``."""
    return isinstance(value, str) and (value == "" or _DEVICE_RE.fullmatch(value) is not None)


def default_device() -> str:
    """The run's device as set (not resolved): :func:`using_device`'s, else ``$BIOANON_DEVICE``, else ``auto``."""
    value = _RUN_DEVICE.get()
    if value:
        return value
    env = os.environ.get(DEVICE_ENV, "").strip()
    if env and not check_device_text(env):
        raise DeviceError(f"{DEVICE_ENV}={env!r} is not a device; use auto, cpu, cuda, cuda:N or mps")
    return env or "auto"


@contextlib.contextmanager
def using_device(device: str | None) -> Iterator[None]:
    """Inside the block, methods whose ``device`` is ``""`` run on ``device`` (None or ``""``: unchanged)."""
    if device and not check_device_text(device):
        raise DeviceError(f"device {device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    token = _RUN_DEVICE.set(device) if device else None
    try:
        yield
    finally:
        if token is not None:
            _RUN_DEVICE.reset(token)


def _torch_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def resolve_device(device: str = "", *, who: str = "", name: str = "device") -> str:
    """The concrete device ``device`` means here: ``"cpu"``, ``"cuda:N"`` or ``"mps"``.

    ``""`` is the run's device (:func:`default_device`); ``auto`` picks CUDA, then ``mps``, then the CPU. A CUDA
    or ``mps`` device that is not there is a :class:`DeviceError` naming ``who`` (a method id) and the
    parameter ``name``."""
    if not check_device_text(device):
        raise DeviceError(f"{who + ': ' if who else ''}{name} {device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    spec = device or default_device()
    prefix = f"{who}: " if who else ""
    if spec == "cpu":
        return "cpu"
    torch = _torch_or_none()
    if spec == "auto":
        if torch is not None and torch.cuda.is_available():
            return f"cuda:{torch.cuda.current_device()}"
        if torch is not None and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if torch is None:
        raise DeviceError(f"{prefix}{name} {spec!r} needs PyTorch, which is not installed")
    if spec == "mps":
        if getattr(torch.backends, "mps", None) is None or not torch.backends.mps.is_available():
            raise DeviceError(
                f"{prefix}{name} 'mps' is not available on this machine (no Apple GPU); use device='cpu' or 'auto'"
            )
        return "mps"
    if not torch.cuda.is_available():
        raise DeviceError(
            f"{prefix}{name} {spec!r}: CUDA is not available on this machine "
            f"(torch {torch.__version__}, torch.cuda.is_available() is False); use device='cpu' or "
            "'auto'"
        )
    index = int(spec.split(":")[1]) if ":" in spec else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(
            f"{prefix}{name} {spec!r}: this machine has {count} CUDA device"
            f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1})"
        )
    return f"cuda:{index}"


def device_kind(device: str) -> str:
    """``cpu``, ``cuda`` or ``mps``: the kind of a device text (``""`` and ``auto`` are resolved first)."""
    if device in ("", "auto"):
        device = resolve_device(device)
    return device.split(":")[0]


def method_device(method: Any) -> str:
    """The concrete device a method runs on: its ``device`` parameter, or the run's."""
    return resolve_device(getattr(method, "device", ""), who=getattr(method, "id", ""))


def resolve_precision(precision: str, device: str) -> str:
    """``fp32``, ``bf16`` or ``fp16`` for ``precision`` on the concrete ``device`` (``auto``: bf16 on a CUDA
    device that supports it, fp16 on an older one, fp32 elsewhere)."""
    if precision not in PRECISIONS:
        raise DeviceError(f"precision {precision!r} is not one of {PRECISIONS}")
    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def autocast(torch: Any, device: str, precision: str, cache: bool = True) -> Any:
    """``torch.autocast`` for a concrete device and a resolved precision (a no-op context for fp32); ``cache``
    False turns off autocast's weight-cast cache (CUDA graphs need that)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.split(":")[0], dtype=dtype, cache_enabled=cache)


def describe_device(device: str) -> dict[str, Any]:
    """What a run records about a concrete device: its text, kind and name, and for CUDA its memory and the
    CUDA and cuDNN versions torch was built with."""
    out: dict[str, Any] = {"device": device, "kind": device.split(":")[0]}
    torch = _torch_or_none() if device != "cpu" or "torch" in sys.modules else None
    if device.startswith("cuda") and torch is not None:
        props = torch.cuda.get_device_properties(int(device.split(":")[1]) if ":" in device else 0)
        out.update(
            name=props.name,
            memory_gb=round(props.total_memory / 2**30, 1),
            capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
        )
    elif device == "mps":
        out["name"] = "Apple GPU (mps)"
    else:
        import platform

        out["name"] = platform.processor() or platform.machine()
    if torch is not None:
        out["torch"] = torch.__version__
    return out
