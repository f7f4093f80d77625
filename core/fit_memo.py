"""Reuse of fitted recognizers and computed arrays within a run.

In a strong evaluation the clear, naive, lazy and deanon scenarios all train their recognizer on the clear
attacker set, which every anonymizer setting of a repeat shares, and the embedding selectors fit the same
recognizer on the same anonymized attacker set for every subject count. Without reuse a sweep of S settings
fits each recognizer 4·S times on identical data. :class:`FittedRecognizers` keeps the last few fits, keyed by the
recognizer's spec (id and parameters, seed included), an identifier of the training data (a cache key or a
content fingerprint) and the label. Fits are seeded, so a reused fit is what a refit would give. Callers get a
deep copy, so enrolment never touches the stored fit.

The same holds for features that a fixed function computes from a table's content (a pretrained encoder's
embeddings, utterance statistics, spectrograms): the clear evaluation set is embedded again for every
anonymizer setting, and the anonymized one once per attacker scenario. :class:`ComputedFeatures` keeps the last
results of such computations, keyed by what was computed, its parameters and a digest of the input arrays'
bytes, so a repeat returns a copy of the array first computed — the same values, bit for bit.

Both stores belong to a run: each :class:`~bioanon.context.RunContext` has its own (``context.fitted``,
``context.computed``); there is no process-wide store. :func:`bioanon.context.reuse_computed` (also
``bioanon.api.reuse_computed``) reaches the active run's store.

``BIOANON_FIT_MEMO=0`` turns both reuses off (every call fits and computes anew).
"""

from __future__ import annotations

import copy
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ComputedFeatures", "FittedRecognizers", "content_digest"]


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

    def get(
        self,
        spec: Mapping[str, Any],
        train_id: Any,
        label: str,
        train: Callable[[], Any],
        *,
        create: Callable[..., Any],
        kind: str | None = "recognizer",
        keep: bool = True,
    ) -> Any:
        """A recognizer built from ``spec`` (``{"id": ..., "params": {...}}``) by ``create(id, kind, **params)``
        (a registry's ``create``) and fitted on ``train()`` for ``label``; ``train_id`` (JSON-able) identifies
        that training data. ``train`` is called only on a miss. ``keep = False``: a new fit is returned as it
        is, not stored (no other task will ask for it: no copy is held for it)."""
        from .cache import fingerprint

        def fit() -> Any:
            rec = create(spec["id"], kind, **dict(spec.get("params", {})))
            rec.fit(train(), label)
            return rec

        if self.size <= 0 or not self.enabled():
            return fit()
        key = fingerprint(
            {
                "recognizer": {"id": spec["id"], "params": dict(spec.get("params", {}))},
                "train": train_id,
                "label": label,
            }
        )
        with self._lock:
            fitted = self._fits.get(key)
            if fitted is not None:
                self._fits.move_to_end(key)
                self.hits += 1
        if fitted is None:
            fitted = fit()
            with self._lock:
                self.misses += 1
                if not keep:
                    return fitted
                self._fits[key] = fitted
                while len(self._fits) > self.size:
                    self._fits.popitem(last=False)
        return copy.deepcopy(fitted)

    def clear(self) -> None:
        with self._lock:
            self._fits.clear()
            self.hits = self.misses = 0


def sample_digests(samples: Sequence[np.ndarray] | np.ndarray) -> list[str]:
    """One :func:`content_digest` per sample: the rows of an array, or the arrays of a sequence (a ragged
    payload)."""
    return [content_digest(a) for a in samples]


def reuse_per_sample(
    cache: Any,
    what: str,
    params: Mapping[str, Any],
    samples: Sequence[np.ndarray] | np.ndarray,
    rows: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The result rows of a fixed per-sample function for ``samples`` (``rows(indices)`` computes the rows of
    ``samples[indices]``, one per sample, in order), kept per sample in ``cache`` under ``what``, ``params``
    and the code of the module that defines ``rows``: only the samples not met before are computed (a new
    split or other rates reuse every unchanged sample's row)."""
    from .cache import fingerprint
    from .fileio import code_digest

    namespace = fingerprint({"what": what, "params": dict(params), "code": code_digest(rows), "per_sample": 1})
    digests = sample_digests(samples)
    values, found = cache.sample_rows(namespace, digests)
    missing = np.flatnonzero(~found)
    if missing.size or values is None:
        new = np.asarray(rows(missing))
        if len(new) != missing.size:
            from .errors import BioanonError

            raise BioanonError(f"{what}: {len(new)} result rows for {missing.size} samples")
        cache.put_sample_rows(namespace, [digests[i] for i in missing], new)
        if values is None:
            return new
        values[missing] = new
    out: np.ndarray = values
    return out


def content_digest(arrays: Sequence[np.ndarray] | np.ndarray) -> str:
    """A digest of the dtype, shape and bytes of every array of ``arrays`` (one array or a sequence, e.g. a
    ragged payload), in order."""
    h = hashlib.blake2b(digest_size=20)
    for a in [arrays] if isinstance(arrays, np.ndarray) else arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(memoryview(a).cast("B"))  # type: ignore[arg-type]  # numpy types the buffer protocol for 3.12+ only
    return h.hexdigest()


class ComputedFeatures:
    """A least-recently-used store of arrays computed by deterministic functions of array content (at most
    ``max_bytes`` in all; thread-safe). Only for computations whose result depends on nothing but ``what``,
    ``params`` and the input arrays: no fitted state, no random draws."""

    def __init__(self, max_bytes: int = 256 * 2**20):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(
        self,
        what: str,
        params: Mapping[str, Any],
        inputs: Sequence[np.ndarray] | np.ndarray,
        compute: Callable[[], np.ndarray],
    ) -> np.ndarray:
        """``compute()`` (an array), or a copy of what it returned for the same ``what`` (e.g. the method id),
        JSON-able ``params`` and input arrays; ``compute`` is called only on a miss."""
        if self.max_bytes <= 0 or not FittedRecognizers.enabled():
            return compute()
        from .cache import fingerprint  # (imports pyarrow: not when a plugin module imports this one)

        key = fingerprint({"what": what, "params": dict(params), "inputs": content_digest(inputs)})
        with self._lock:
            out = self._items.get(key)
            if out is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return out.copy()
        out = np.array(compute())  # our own copy: the caller may change what it gets
        with self._lock:
            self.misses += 1
            if key not in self._items and out.nbytes <= self.max_bytes:
                self._items[key] = out
                self._bytes += out.nbytes
                while self._bytes > self.max_bytes:
                    self._bytes -= self._items.popitem(last=False)[1].nbytes
        return out.copy()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
            self.hits = self.misses = 0
