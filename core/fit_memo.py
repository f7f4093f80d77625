"""Reuse of fitted recognizers within a process.

In a strong evaluation the clear, naive, lazy and deanon scenarios all train their recognizer on the clear
attacker set, which every anonymizer setting of a repeat shares, and the embedding selectors fit the same
recognizer on the same anonymized attacker set for every subject count. Without reuse a sweep of S settings
fits each recognizer 4·S times on identical data. :data:`FITTED` keeps the last few fits, keyed by the
recognizer's spec (id and parameters, seed included), an identifier of the training data (a cache key or a
content fingerprint) and the label. Fits are seeded, so a reused fit is what a refit would give. Callers get a
deep copy, so enrolment never touches the stored fit.

``BIOANON_FIT_MEMO=0`` turns the reuse off (every call fits anew).
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from .cache import fingerprint

__all__ = ["FITTED", "FittedRecognizers"]


class FittedRecognizers:
    """A small least-recently-used store of fitted recognizers (at most ``size``; thread-safe)."""

    def __init__(self, size: int = 8):
        self.size = size
        self._fits: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("BIOANON_FIT_MEMO", "1") != "0"

    def get(self, spec: Mapping[str, Any], train_id: Any, label: str, train: Callable[[], Any], *,
            kind: str | None = "recognizer") -> Any:
        """A recognizer built from ``spec`` (``{"id": ..., "params": {...}}``) and fitted on ``train()`` for
        ``label``; ``train_id`` (JSON-able) identifies that training data. ``train`` is called only on a miss."""
        from . import get_registry

        def fit() -> Any:
            rec = get_registry().create(spec["id"], kind, **dict(spec.get("params", {})))
            rec.fit(train(), label)
            return rec

        if self.size <= 0 or not self.enabled():
            return fit()
        key = fingerprint({"recognizer": {"id": spec["id"], "params": dict(spec.get("params", {}))},
                           "train": train_id, "label": label})
        with self._lock:
            fitted = self._fits.get(key)
            if fitted is not None:
                self._fits.move_to_end(key)
                self.hits += 1
        if fitted is None:
            fitted = fit()
            with self._lock:
                self.misses += 1
                self._fits[key] = fitted
                while len(self._fits) > self.size:
                    self._fits.popitem(last=False)
        return copy.deepcopy(fitted)

    def clear(self) -> None:
        with self._lock:
            self._fits.clear()
            self.hits = self.misses = 0


#: The process-wide store used by the evaluation's score tasks and the embedding selectors.
FITTED = FittedRecognizers()
