"""Engine of the random-set selective weighted-mean transform (the utility-preserving anonymization paper, Alg. 1).

The method class is :class:`bioanon.builtin.random_set_mean.RandomSetMean`; this module holds the array-level
steps so they can be tested, benchmarked and reused one by one:

* :func:`purity_count` — how many members of a set share the record's attribute-of-interest value (§4.2);
* :func:`sample_sets` — the dynamically assembled random sets G (Alg. 1 line 8), vectorized and seeded per
  block of records, so the sets do not depend on how the transform is chunked;
* :func:`estimate_relevance` and :func:`select_features` — lines 1–5 (relevance scores, the selection F and
  the indicator X_I);
* :func:`weighted_set_mean` — line 9 for given sets (a gather-and-sum of g rows per record);
* :func:`random_set_mean` — lines 6–12: sampling and weighting, chunked so memory stays bounded.

Line 9, for a record **d** with set G (|G| = g, **d** ∈ G) and weight w::

    d' = ((w - 1)·d + Σ_{x∈G} x) / ((w - 1) + g) ⊙ X_I  +  (Σ_{x∈G} x) / g ⊙ (1 - X_I)

The sum over G contains **d** itself, so on the selected features **d** has total weight w and every other
member weight 1 (w = 1 gives the plain mean of G everywhere). It is computed as one pass
``S = Σ_{x∈G} x`` (``torch.nn.functional.embedding_bag(mode="sum")`` on all cores, or a chunked numpy
fallback) followed by the per-feature combination ``d' = a ⊙ S + b ⊙ d`` with ``a_j = 1/((w-1)+g)``,
``b_j = (w-1)/((w-1)+g)`` on selected features and ``a_j = 1/g``, ``b_j = 0`` elsewhere — the same formula,
without ever materializing an N×g×D array. torch is imported lazily; without it the numpy path runs.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import DataError, MissingDependencyError, ParameterError, TableError
from .torchutil import cores, torch_threads

__all__ = [
    "SAMPLING_BLOCK",
    "check_finite",
    "check_set_sizes",
    "estimate_relevance",
    "factorize",
    "feature_count",
    "purity_count",
    "random_set_mean",
    "sample_sets",
    "select_features",
    "set_coefficients",
    "weighted_set_mean",
]

#: Records per random stream: the sets of records ``[k·B, (k+1)·B)`` are drawn from
#: ``numpy.random.default_rng([seed, k])``. Part of the output's definition (changing it changes the sets).
SAMPLING_BLOCK = 8192

_ALL_SETS_BYTES = 256 << 20  # up to this, the sets of all records are drawn at once and summed in one call
_SET_BYTES = 64 << 20  # else: budget for the index array of one super-chunk of records
_SUM_BYTES = 128 << 20  # ... and for its sums before they are copied into the output
_NUMPY_ROWS = 1024  # records per numpy work item
_DENSE_FACTOR = 2  # a pool smaller than this many times the draw count is sampled by random keys
_DENSE_ELEMS = 1 << 22  # random keys per dense sub-batch
_TOL = 1e-9


# --------------------------------------------------------------------------------------------------- sizes


def _round_half_up(v: float) -> int:
    return int(math.floor(v + 0.5 + _TOL))


def purity_count(purity: float, set_size: int) -> int:
    """Members of a set of ``set_size`` that share the record's attribute-of-interest value, the record included.

    ``m = max(1, round_half_up(t·g))`` (a float within 1e-9 of ``k + 0.5`` counts as ``k + 0.5``): the paper's
    t·g (§4.2) is rarely an integer (its own t = 0.6, g = 32 gives 19.2 → 19), so the realized purity is
    ``m / g``; a t below 1/g gives m = 1 — the record itself, every other member of another value — which is
    the paper's lower bound t = 1/g (its parameter grid starts at t = 0.0).
    """
    if not 0.0 <= purity <= 1.0:
        raise ParameterError("purity_count", "purity", purity, "a number in [0, 1]")
    if set_size < 1:
        raise ParameterError("purity_count", "set_size", set_size, "an integer >= 1")
    return min(set_size, max(1, _round_half_up(purity * set_size)))


def feature_count(ratio: float, n_features: int) -> int:
    """Features kept for a retention ratio: ``ceil(r·D)`` (within 1e-9), so any r > 0 keeps at least one."""
    if not 0.0 <= ratio <= 1.0:
        raise ParameterError("feature_count", "ratio", ratio, "a number in [0, 1]")
    return min(n_features, int(math.ceil(ratio * n_features - _TOL))) if ratio > 0 else 0


def factorize(values: Any, what: str = "attribute") -> tuple[np.ndarray, np.ndarray]:
    """(codes int64 in [0, C), the C distinct values sorted); raises TableError naming missing values."""
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(values), sort=True, use_na_sentinel=True)
    missing = np.flatnonzero(codes < 0)
    if missing.size:
        raise TableError(
            f"{what} has {missing.size} missing values (rows {missing[:5].tolist()}"
            f"{', ...' if missing.size > 5 else ''})"
        )
    return codes.astype(np.int64, copy=False), np.asarray(uniques)


# --------------------------------------------------------------------------------------------------- sets


_ClassIndex = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # what _class_index returns


def _class_index(codes: np.ndarray) -> _ClassIndex:
    """members (rows sorted by class, stable), start and count of each class, rank of each row in its class."""
    codes = np.asarray(codes, dtype=np.int64)
    n_classes = int(codes.max()) + 1 if codes.size else 0
    members = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_classes).astype(np.int64)
    start = np.zeros(n_classes, dtype=np.int64)
    np.cumsum(counts[:-1], out=start[1:])
    rank = np.empty(codes.size, dtype=np.int64)
    rank[members] = np.arange(codes.size, dtype=np.int64) - start[codes[members]]
    return members, start, counts, rank


def check_set_sizes(
    codes: np.ndarray,
    set_size: int,
    n_same: int | None,
    *,
    small_class: str = "error",
    classes: Sequence[Any] | np.ndarray | None = None,
    attribute: str = "the attribute",
) -> None:
    """Raise TableError when sets of ``set_size`` with ``n_same`` same-value members cannot be drawn.

    ``set_size`` larger than the number of records is always an error. A class with fewer than ``n_same``
    records, or fewer than ``set_size - n_same`` records of other values, is an error with
    ``small_class="error"``; with ``"with_replacement"`` those records draw that part with replacement,
    which still needs at least one candidate (a class whose only record is itself cannot supply others).
    """
    codes = np.asarray(codes, dtype=np.int64)
    n = codes.size
    if set_size > n:
        raise TableError(
            f"set_size g={set_size} exceeds the {n} records of the table: a random set holds g "
            f"distinct records of the data set"
        )
    if n_same is None or n == 0:
        return
    counts = np.bincount(codes)
    present = np.flatnonzero(counts)

    def name(c: int) -> str:
        if classes is None:
            return f"code {c}"
        v = classes[c]
        return repr(v.item() if isinstance(v, np.generic) else v)

    need_other = set_size - n_same
    for c in present.tolist():
        same_pool, other_pool = counts[c] - 1, n - counts[c]
        if (n_same > 1 and same_pool == 0) or (need_other > 0 and other_pool == 0):
            what = "no other record of this value" if n_same > 1 and same_pool == 0 else "no record of another value"
            raise TableError(
                f"{attribute} = {name(c)} has {counts[c]} records and there is {what}: sets of "
                f"g={set_size} with {n_same} sharing the value cannot be drawn even with replacement "
                f"(lower purity/set_size or drop the class)"
            )
        if small_class == "error" and (same_pool < n_same - 1 or other_pool < need_other):
            if same_pool < n_same - 1:
                detail = (
                    f"{attribute} = {name(c)} has {counts[c]} records; a set of g={set_size} needs "
                    f"{n_same} records of that value (the record itself included)"
                )
            else:
                detail = (
                    f"only {other_pool} records have a value other than {attribute} = {name(c)}; a set of "
                    f"g={set_size} needs {need_other} of them"
                )
            raise TableError(
                f"{detail}. Lower set_size or purity, or set small_class='with_replacement' to "
                f"draw that part with replacement"
            )


def _distinct_draws(rng: np.random.Generator, pool: np.ndarray, k: int, replace: np.ndarray) -> np.ndarray:
    """(B, k) draws per row from ``[0, pool[i])``: distinct within a row, or iid where ``replace[i]``.

    Large pools: iid draws whose repeats (every occurrence after the first) are redrawn until none is left; the
    rule treats every pool element alike, so the resulting set is uniform over the k-subsets. Pools smaller
    than ``2k``: the k smallest of iid uniform keys (uniform too). A draw is ``floor(u·n)`` with u a float64
    uniform (bias below n/2^53). int32 when every pool is below 2^31, else int64."""
    b = pool.size
    itype = np.int32 if b == 0 or int(pool.max()) < 2**31 else np.int64
    if k == 0 or b == 0:
        return np.empty((b, k), dtype=itype)
    u = rng.random((b, k))
    u *= pool[:, None]
    draws = u.astype(itype)
    del u
    dense = (~replace) & (pool < _DENSE_FACTOR * k)
    check = ~(replace | dense)
    if k > 1 and check.any():
        todo = np.arange(b) if check.all() else np.flatnonzero(check)
        flat = np.sort(draws if todo.size == b else draws[todo], axis=1).reshape(-1)  # rows with a repeat:
        eq = flat[1:] == flat[:-1]  # neighbours equal in sorted order (1-D: cheaper than per-row slices)
        eq[k - 1 :: k] = False  # pairs across two rows
        todo = todo[np.unique(np.flatnonzero(eq) // k)]
        while todo.size:  # redraw every occurrence after the first, until no row repeats
            sub = draws[todo]
            order = np.argsort(sub, axis=1, kind="stable")
            srt = np.take_along_axis(sub, order, axis=1)
            rep = np.zeros(sub.shape, dtype=bool)
            rep[:, 1:] = srt[:, 1:] == srt[:, :-1]
            has = rep.any(axis=1)
            r_local, c_sorted = np.nonzero(rep)
            rr = todo[r_local]
            draws[rr, order[r_local, c_sorted]] = (rng.random(rr.size) * pool[rr]).astype(itype)
            todo = todo[has]
    if dense.any():
        rows = np.flatnonzero(dense)
        width = int(pool[rows].max())
        step = max(1, _DENSE_ELEMS // width)
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            keys = rng.random((r.size, width))
            keys[np.arange(width)[None, :] >= pool[r][:, None]] = 2.0
            pick = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < width else np.argsort(keys, axis=1)[:, :k]
            draws[r] = pick
    return draws


def sample_sets(
    codes: np.ndarray,
    set_size: int,
    n_same: int | None,
    *,
    seed: int = 0,
    start: int = 0,
    stop: int | None = None,
    small_class: str = "error",
    classes: Sequence[Any] | np.ndarray | None = None,
    attribute: str = "the attribute",
    threads: int = 0,
) -> np.ndarray:
    """The random sets G of records ``start..stop`` (Alg. 1 line 8), as row indices into the data set.

    Parameters
    ----------
    codes : (N,) int
        Attribute-of-interest class of every record of the data set D (the table being transformed).
    set_size : int
        g.
    n_same : int or None
        Members sharing the record's value, the record included (:func:`purity_count`); ``None`` for
        population purity: the g − 1 others uniformly from D without the record, whatever their values.
    seed : int
        Records ``[k·B, (k+1)·B)`` (B = :data:`SAMPLING_BLOCK`) draw from ``default_rng([seed, k])``.
    start, stop : int
        Rows to draw sets for; ``start`` must be a multiple of B. The result equals the same rows of a
        call over all records.
    small_class : "error" or "with_replacement"
        What to do when a class is too small (:func:`check_set_sizes`).
    classes, attribute : optional
        The value of each code and the attribute's name, for error messages.
    threads : int
        Blocks drawn at a time (0 = every core); the result does not depend on it.

    Returns
    -------
    (stop - start, g) int64
        Column 0 is the record itself; columns ``1..n_same-1`` are distinct other records of its value;
        the remaining ``g - n_same`` are distinct records of other values (with ``None``: any other records).
        Without replacement no row repeats a record.
    """
    codes = np.asarray(codes, dtype=np.int64)
    n = codes.size
    stop = n if stop is None else min(int(stop), n)
    if start % SAMPLING_BLOCK:
        raise ParameterError("sample_sets", "start", start, f"a multiple of SAMPLING_BLOCK={SAMPLING_BLOCK}")
    if n_same is not None and not 1 <= n_same <= set_size:
        raise ParameterError("sample_sets", "n_same", n_same, f"an integer in [1, set_size={set_size}]")
    check_set_sizes(codes, set_size, n_same, small_class=small_class, classes=classes, attribute=attribute)
    index = _class_index(codes) if n_same is not None else None
    return _sample(codes, index, set_size, n_same, seed, start, stop, threads if threads > 0 else cores())


def _sample(
    codes: np.ndarray,
    index: _ClassIndex | None,
    set_size: int,
    n_same: int | None,
    seed: int,
    start: int,
    stop: int,
    threads: int = 1,
) -> np.ndarray:
    """sample_sets without the checks, with the class index computed once by the caller; the blocks of
    records are independent (one random stream each), so ``threads`` of them are drawn at a time."""
    out = np.empty((max(0, stop - start), set_size), dtype=np.int64)
    blocks = range(start, stop, SAMPLING_BLOCK)

    def one(b0: int) -> None:
        b1 = min(b0 + SAMPLING_BLOCK, stop)
        _sample_block(codes, index, set_size, n_same, seed, b0, out[b0 - start : b1 - start])

    if threads > 1 and len(blocks) > 1:
        from concurrent.futures import ThreadPoolExecutor  # here: ~5 ms of start-up otherwise

        with ThreadPoolExecutor(min(threads, len(blocks))) as pool:
            list(pool.map(one, blocks))
    else:
        for b0 in blocks:
            one(b0)
    return out


def _sample_block(
    codes: np.ndarray, index: _ClassIndex | None, set_size: int, n_same: int | None, seed: int, b0: int, blk: np.ndarray
) -> None:
    n = codes.size
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, b0 // SAMPLING_BLOCK])
    rows = np.arange(b0, b0 + len(blk), dtype=np.int64)
    blk[:, 0] = rows
    if n_same is None or index is None:
        pool = np.full(rows.size, n - 1, dtype=np.int64)
        u = _distinct_draws(rng, pool, set_size - 1, pool < set_size - 1).astype(np.int64)
        u += u >= rows[:, None]  # skip the record itself
        blk[:, 1:] = u
        return
    members, cstart, counts, rank = index
    c = codes[rows]
    k1, k2 = n_same - 1, set_size - n_same
    if k1:
        pool = counts[c] - 1
        u = _distinct_draws(rng, pool, k1, pool < k1)
        skip = u >= rank[rows][:, None]  # skip the record itself
        u = u + cstart[c][:, None]  # int64 position in members (take wants intp indices)
        u += skip
        np.take(members, u, out=blk[:, 1:n_same])
    if k2:
        pool = n - counts[c]
        v = _distinct_draws(rng, pool, k2, pool < k2).astype(np.int64)
        v += (v >= cstart[c][:, None]) * counts[c][:, None]  # skip the record's class
        np.take(members, v, out=blk[:, n_same:])


# --------------------------------------------------------------------------------------------------- relevance


def estimate_relevance(
    x: np.ndarray,
    labels: np.ndarray,
    method: str = "random_forest",
    *,
    seed: int = 0,
    n_trees: int = 50,
    threads: int = 0,
) -> np.ndarray:
    """Relevance of each feature (column of ``x``) to ``labels`` (Alg. 1 lines 1–3).

    ``"random_forest"``: Gini importances (``feature_importances_``) of a scikit-learn RandomForestClassifier
    with ``n_trees`` trees; ``"mutual_information"``: ``sklearn.feature_selection.mutual_info_classif``
    (the k-NN estimator of Ross, the paper's [30]). Both seeded. Returns float64 (D,), higher = more relevant.
    """
    codes, _ = factorize(labels, "the relevance labels")
    if np.unique(codes).size < 2:
        raise TableError("relevance needs at least two distinct label values in the sample")
    x = np.asarray(x, dtype=np.float32)
    jobs = threads if threads > 0 else cores()
    if method == "random_forest":
        from sklearn.ensemble import RandomForestClassifier

        rf = RandomForestClassifier(n_estimators=n_trees, random_state=seed, n_jobs=jobs)
        importances: np.ndarray = rf.fit(x, codes).feature_importances_.astype(np.float64)
        return importances
    if method == "mutual_information":
        from joblib import parallel_backend
        from sklearn.feature_selection import mutual_info_classif

        with parallel_backend("threading", n_jobs=jobs):  # processes would cost seconds to start
            mi = mutual_info_classif(x, codes, random_state=seed, n_jobs=jobs)
        return np.asarray(mi, dtype=np.float64)
    raise ParameterError("estimate_relevance", "method", method, "'random_forest' or 'mutual_information'")


def _top(relevance: np.ndarray, ratio: float) -> np.ndarray:
    k = feature_count(ratio, relevance.size)
    return np.argsort(-np.asarray(relevance, dtype=np.float64), kind="stable")[:k]


def select_features(
    n_features: int,
    relevance: np.ndarray | None,
    retention: float,
    additional: Sequence[tuple[np.ndarray | None, float]] = (),
    sensitive: tuple[np.ndarray | None, float] | None = None,
) -> np.ndarray:
    """The indicator X_I of Alg. 1 line 5 as a bool mask (§5.1.4, §5.2.7).

    ``I = ({c_p} ∪ {c_q1} ∪ … ∪ {c_qn}) \\ {c_s}``, where ``{c_a}`` is the ``ceil(r_a·D)`` features of highest
    relevance to attribute a (ties by lower index). A relevance of ``None`` is allowed where the ratio is 0 or 1.
    """

    def top(rel: np.ndarray | None, ratio: float) -> np.ndarray:
        if ratio >= 1.0:
            return np.arange(n_features)
        if ratio <= 0.0:
            return np.empty(0, dtype=np.int64)
        if rel is None or len(rel) != n_features:
            raise DataError(
                f"select_features: ratio {ratio} needs a relevance of length {n_features}, got "
                f"{'none' if rel is None else len(rel)}"
            )
        return _top(rel, ratio)

    mask = np.zeros(n_features, dtype=bool)
    mask[top(relevance, retention)] = True
    for rel, ratio in additional:
        mask[top(rel, ratio)] = True
    if sensitive is not None:
        mask[top(*sensitive)] = False
    return mask


# --------------------------------------------------------------------------------------------------- line 9


def set_coefficients(selected: np.ndarray, set_size: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature (a, b) with ``d' = a ⊙ Σ_G + b ⊙ d``, the line-9 formula (float32, length D)."""
    selected = np.asarray(selected, dtype=bool)
    den = (weight - 1.0) + set_size
    a = np.where(selected, 1.0 / den, 1.0 / set_size).astype(np.float32)
    b = np.where(selected, (weight - 1.0) / den, 0.0).astype(np.float32)
    return a, b


def _torch() -> Any:
    """torch, or None. When this is the first import of torch in the process, torch's CPU allocator is asked for
    transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``, unless the variable is already set): the transform's
    output is a fresh N×D allocation, and faulting it in 4 KiB pages costs up to a quarter of the transform
    (numpy already asks for huge pages for its large arrays)."""
    import sys

    if "torch" not in sys.modules:
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    try:
        import torch
    except ImportError:
        return None
    return torch


def _as_torch(torch: Any, a: np.ndarray) -> Any:
    with warnings.catch_warnings():  # read-only Arrow-backed arrays: torch only reads them
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)


def _torch_sums(torch: Any, X: Any, sets: np.ndarray, row0: int, A: Any, B: Any) -> Any:
    """``a ⊙ Σ_j X[sets[i, j]] + b ⊙ X[row0 + i]`` as a new (rows, D) tensor.

    One ``embedding_bag(mode="sum")`` call for all the rows (parallel over records on every core, gathering
    whole rows: the reads run near memory bandwidth), then two in-place passes. Few large calls on purpose:
    on a busy machine every parallel call can wait a scheduler time slice for its threads."""
    sets = np.ascontiguousarray(sets, dtype=np.int64)
    n, g = sets.shape
    offsets = torch.from_numpy(np.arange(0, n * g, g, dtype=np.int64))  # (a 2-D input makes torch build them)
    index = torch.from_numpy(sets.reshape(-1))
    if X.device.type != "cpu":  # the index goes to the data (one copy per call), never the data to the CPU
        index, offsets = index.to(X.device, non_blocking=True), offsets.to(X.device, non_blocking=True)
    s = torch.nn.functional.embedding_bag(index, X, offsets, mode="sum")
    s.mul_(A)
    s.addcmul_(X[row0 : row0 + len(sets)], B)
    return s


def _numpy_chunk(
    x: np.ndarray, sets: np.ndarray, row0: int, a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int
) -> None:
    """The same with numpy: per block of rows, the g gathered rows are added in set order (bounded memory)."""
    rows, g = sets.shape
    d = x.shape[1]

    def work(r0: int) -> None:
        r1 = min(r0 + _NUMPY_ROWS, rows)
        acc = np.take(x, sets[r0:r1, 0], axis=0)
        buf = np.empty_like(acc)
        for j in range(1, g):
            np.take(x, sets[r0:r1, j], axis=0, out=buf)
            acc += buf
        acc *= a
        np.multiply(x[row0 + r0 : row0 + r1], b, out=buf)
        acc += buf
        out[r0:r1] = acc

    starts = range(0, rows, _NUMPY_ROWS)
    jobs = threads if threads > 0 else cores()
    if jobs == 1 or rows <= _NUMPY_ROWS or d == 0:
        for r0 in starts:
            work(r0)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(work, starts))


def _place(torch: Any, X: Any, device: str, share: float = 0.4) -> Any:
    """``X`` on ``device`` when it takes at most ``share`` of the device's free memory (the sums of a
    super-chunk need room beside it), else ``X`` where it is: the CPU path is then used."""
    if device == "cpu" or not device:
        return X
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        if X.element_size() * X.nelement() > share * free:
            return X
    return X.to(device)


def _resolve_backend(backend: str) -> Any:
    if backend not in ("auto", "torch", "numpy"):
        raise ParameterError("random_set_mean", "backend", backend, "'auto', 'torch' or 'numpy'")
    torch = None if backend == "numpy" else _torch()
    if backend == "torch" and torch is None:
        raise MissingDependencyError(
            "random_set_mean backend='torch'", {"torch": "pip install torch"}, "or use backend='numpy'"
        )
    return torch


def weighted_set_mean(
    x: np.ndarray,
    sets: np.ndarray,
    selected: np.ndarray,
    weight: float,
    *,
    row0: int = 0,
    out: np.ndarray | None = None,
    backend: str = "auto",
    threads: int = 0,
    device: str = "cpu",
) -> np.ndarray:
    """Line 9 of Alg. 1 for given sets: ``d' = ((w-1)·d + Σ_G) / ((w-1)+g) ⊙ X_I + Σ_G / g ⊙ (1 - X_I)``.

    Parameters
    ----------
    x : (N, D) float32
        The data set D (flattened records).
    sets : (n, g) int
        Row indices into ``x`` of each set G; record i of the result is ``d = x[row0 + i]``, which must be one
        of its set's members (:func:`sample_sets` puts it in column 0) — the sum over G includes it.
    selected : (D,) bool
        X_I.
    weight : float
        w >= 1.
    row0 : int
        Row of ``x`` of the first record.
    out : (n, D) float32, optional
        Written in place.
    backend : "auto", "torch" or "numpy"
        ``auto`` uses torch's ``embedding_bag(mode="sum")`` when torch is installed; both agree to float32
        rounding.
    threads : int
        0 = every core of the machine.
    device : str
        A concrete torch device for the torch backend (``"cpu"``, ``"cuda:0"``, …): the data go there once
        when they fit, the sums come back in one copy.

    Returns
    -------
    (n, D) float32
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    sets = np.asarray(sets)
    n, g = sets.shape
    if n == 0:
        return np.empty((0, x.shape[1]), dtype=np.float32) if out is None else out
    a, b = set_coefficients(selected, g, weight)
    torch = _resolve_backend(backend)
    if torch is None:
        if out is None:
            out = np.empty((n, x.shape[1]), dtype=np.float32)
        _numpy_chunk(x, sets, row0, a, b, out, threads)
        return out
    with torch_threads(threads):
        X = _place(torch, _as_torch(torch, x), device)
        s = _torch_sums(torch, X, sets, row0, torch.from_numpy(a).to(X.device), torch.from_numpy(b).to(X.device))
        if out is None:
            sums: np.ndarray = s.cpu().numpy()
            return sums
        torch.from_numpy(out).copy_(s)
    return out


def random_set_mean(
    x: np.ndarray,
    codes: np.ndarray,
    selected: np.ndarray,
    *,
    set_size: int,
    n_same: int | None,
    weight: float,
    seed: int = 0,
    small_class: str = "error",
    backend: str = "auto",
    threads: int = 0,
    check: bool = True,
    classes: Sequence[Any] | np.ndarray | None = None,
    attribute: str = "the attribute",
    device: str = "cpu",
) -> np.ndarray:
    """Alg. 1 lines 6–12 on a flattened data set: draw every record's set and apply line 9.

    Equal to ``weighted_set_mean(x, sample_sets(codes, set_size, n_same, seed=seed), selected, weight)``.
    Memory: the input, the output, the (N, g) index array while it stays under 256 MiB — else the records are
    done in super-chunks whose index array stays under 64 MiB and whose sums under 128 MiB — and, with numpy,
    a few MiB per thread. The sets are drawn on every core (blocks of records are independent). With
    ``check``, raises TableError for non-finite values, naming the rows: a NaN would spread into every set it
    is drawn into. ``device``: where the torch backend sums (a concrete device; the data are copied there once
    when they take under 40 % of its free memory, else the sums run on the CPU); the sets are drawn on the CPU
    either way, so the output does not depend on the device beyond float32 rounding of the sums.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    codes = np.asarray(codes, dtype=np.int64)
    n, d = x.shape
    if codes.shape != (n,):
        raise DataError(f"random_set_mean: codes has shape {codes.shape}, expected ({n},) (one per row of x)")
    check_set_sizes(codes, set_size, n_same, small_class=small_class, classes=classes, attribute=attribute)
    a, b = set_coefficients(selected, set_size, weight)
    torch = _resolve_backend(backend)
    jobs = threads if threads > 0 else cores()
    index = _class_index(codes) if n_same is not None else None
    if n * set_size * 8 <= _ALL_SETS_BYTES:
        rows = max(n, 1)
    else:
        rows = min(_SET_BYTES // (8 * set_size), _SUM_BYTES // max(4 * d, 1))
        rows = max(SAMPLING_BLOCK, rows // SAMPLING_BLOCK * SAMPLING_BLOCK)
    if torch is None:
        if check:
            check_finite(x)
        out = np.empty((n, d), dtype=np.float32)
        for r0 in range(0, n, rows):
            r1 = min(r0 + rows, n)
            _numpy_chunk(x, _sample(codes, index, set_size, n_same, seed, r0, r1, jobs), r0, a, b, out[r0:r1], threads)
        return out
    with torch_threads(threads):
        X = _place(torch, _as_torch(torch, x), device)
        A, B = torch.from_numpy(a).to(X.device), torch.from_numpy(b).to(X.device)
        if check and not math.isfinite(float(X.sum())):  # one parallel pass, no temporary; a non-finite sum
            check_finite(x)  # (NaN/inf, or a float32 overflow) triggers the exact row-by-row check
        if rows >= n:  # one call; its result is the output
            result: np.ndarray = (
                _torch_sums(torch, X, _sample(codes, index, set_size, n_same, seed, 0, n, jobs), 0, A, B).cpu().numpy()
            )
            return result
        out = np.empty((n, d), dtype=np.float32)
        out_t = torch.from_numpy(out)
        for r0 in range(0, n, rows):
            r1 = min(r0 + rows, n)
            sets = _sample(codes, index, set_size, n_same, seed, r0, r1, jobs)
            out_t[r0:r1].copy_(_torch_sums(torch, X, sets, r0, A, B))
        return out


def check_finite(x: np.ndarray, what: str = "the payload") -> None:
    """Raise TableError naming the first rows of ``x`` (2-D) that hold NaN or inf."""
    step = max(1, (1 << 22) // max(x.shape[1], 1))
    bad: list[np.ndarray] = []
    for r0 in range(0, x.shape[0], step):
        ok = np.isfinite(x[r0 : r0 + step]).all(axis=1)
        if not ok.all():
            bad.append(r0 + np.flatnonzero(~ok))
    if bad:
        rows = np.concatenate(bad)
        raise TableError(
            f"{what} has NaN/inf values in {rows.size} records (rows {rows[:5].tolist()}"
            f"{', ...' if rows.size > 5 else ''}); a non-finite value would spread into every "
            f"set it is drawn into — clean or drop those records first"
        )
