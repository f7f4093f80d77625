"""Helpers shared by methods that compute on payload arrays."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import numpy as np


def restore_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast computed float values back to a payload dtype: integers are rounded and clipped to the dtype's
    range (e.g. uint8 images stay in 0..255); floats are cast."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return cast(np.ndarray, np.clip(np.rint(values), info.min, info.max).astype(dtype))
    return values.astype(dtype, copy=False)


def flatten_payload(x: np.ndarray) -> np.ndarray:
    """(N, *shape) → (N, prod(shape)) float32, a view when possible."""
    x2 = x.reshape(len(x), -1)
    return x2 if x2.dtype == np.float32 else x2.astype(np.float32)


def total_std(x: np.ndarray, block: int = 1 << 20) -> float:
    """The standard deviation of every value of ``x`` (``np.std(x, dtype=np.float64)``) in two passes over
    blocks of ``block`` values, each cast to float64 alone: no float64 copy of the whole array (numpy's makes
    one, 8 bytes a value, and a second for the squares) and about four times faster. The result agrees with
    numpy's to rounding (about 1e-15 relative). NaN for an empty array."""
    flat = np.ravel(x)
    n = flat.size
    if n == 0:
        return float("nan")
    total = 0.0
    for start in range(0, n, block):
        total += float(np.add.reduce(flat[start : start + block], dtype=np.float64))
    mean = total / n
    buf = np.empty(min(block, n))
    squares = 0.0
    for start in range(0, n, block):
        part = flat[start : start + block]
        dev = buf[: len(part)]
        np.subtract(part, mean, out=dev, dtype=np.float64)
        squares += float(np.dot(dev, dev))
    return float(np.sqrt(squares / n))


def table_rng(table: Any, seed: int) -> np.random.Generator:
    """A generator seeded by ``seed`` and the table's sample ids.

    Random anonymizations must not reuse one noise sequence for every table (the attacker and evaluation sets
    would get the same noise row by row, which a parrot attacker exploits); keyed by the sample ids, the same
    table always gets the same noise and different tables independent noise."""
    import hashlib

    ids = table.arrow.column("sample_id").combine_chunks()
    h = hashlib.blake2b(digest_size=16)
    for buf in ids.buffers():
        if buf is not None:
            h.update(memoryview(buf))
    h.update(str(len(ids)).encode())
    return np.random.default_rng([int(seed), int.from_bytes(h.digest()[:8], "little")])


@contextlib.contextmanager
def blas_threads(n: int = 1) -> Iterator[None]:
    """BLAS and LAPACK (numpy's and SciPy's) limited to ``n`` threads inside the block, restored afterwards.

    For batched small linear algebra: ``eigh`` or ``matmul`` over a stack of small matrices (per-sequence
    ``(J·3) × (J·3)`` pose covariances, per-window channel correlations). Each matrix is too small to share
    between threads, and OpenBLAS threads that wait by spinning make such a stack many times slower as soon as
    another process keeps a core busy (a batched ``eigh`` of 2000 51×51 matrices: 0.35 s on one thread, over
    1 s on two threads of a two-core machine with one other busy process). Costs a few milliseconds (the
    loaded libraries are looked up each time): use it around a whole batch, not per matrix. Without
    threadpoolctl (a scikit-learn dependency) the block runs unchanged."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        yield
        return
    with threadpool_limits(limits=max(1, int(n)), user_api="blas"):
        yield
