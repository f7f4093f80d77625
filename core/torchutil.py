"""Small helpers for methods that use PyTorch (imported lazily: the core never imports torch at import time)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

CORES_ENV = "BIOANON_CORES"


def cores() -> int:
    """CPU cores this process may use: ``$BIOANON_CORES`` when set (a parallel run's worker gets its share of
    the machine), else the cores it may run on."""
    budget = os.environ.get(CORES_ENV, "")
    if budget.isdigit() and int(budget) > 0:
        return int(budget)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def import_torch(method_id: str, install: str = "pip install torch") -> Any:
    """Import torch, or fail with a :class:`~bioanon.errors.MissingDependencyError` (an ImportError) naming the
    method that needs it and how to install it."""
    try:
        import torch
    except ImportError:
        from .errors import MissingDependencyError

        raise MissingDependencyError(method_id, {"torch": install}) from None
    return torch


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` (0 = every core) inside the block, restored afterwards."""
    import torch

    old = torch.get_num_threads()
    want = n if n > 0 else cores()
    if want != old:
        torch.set_num_threads(want)
    try:
        yield
    finally:
        if want != old:
            torch.set_num_threads(old)
