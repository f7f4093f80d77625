"""Transforms of a :class:`~bioanon.table.SampleTable`: row selection (take, filter, subjects), concatenation,
subject-disjoint and within-subject splits, and batches; the table's methods of the same names call these.

Every transform returns new tables sharing the input's Arrow buffers (tables are immutable).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bioanon.errors import TableError

from .arrow_numpy import scalar, to_numpy
from .table_schema import (
    _SHOW,
    _TOL,
    ATTR_PREFIX,
    SAMPLE_ID,
    SUBJECT,
    _dump_meta,
    _fmt_list,
    _type_desc,
    filter_rows,
    take_rows,
)

if TYPE_CHECKING:  # annotations only: table.py imports this module, not the other way round
    from .table import SampleTable


#: How part sizes are rounded: bioanon's largest-remainder rule, or SEBA's truncation (``int(N * rate)`` for every
#: part but the last, which gets the rest; SEBA's ``interid1to3`` splitter).
ROUNDINGS = ("largest_remainder", "seba")


def _part_sizes(count: np.ndarray, rates: np.ndarray, rounding: str = "largest_remainder") -> np.ndarray:
    """Part sizes, vectorized over ``count`` (shape (M,)) -> (M, k) int64: largest remainder, or with
    ``rounding = "seba"`` SEBA's truncation ``int(count * rate)`` (float64 product, no tolerance: 100 × 0.58 =
    57.99… gives 57) for every part but the last, which gets the rest."""
    if rounding not in ROUNDINGS:
        raise TableError(f"rounding must be one of {', '.join(map(repr, ROUNDINGS))}, got {rounding!r}")
    q = count[:, None].astype(np.float64) * rates[None, :]
    if rounding == "seba":
        t = np.floor(q).astype(np.int64)
        t[:, -1] = count - t[:, :-1].sum(axis=1)
        return cast(np.ndarray, t)
    n = np.floor(q + _TOL).astype(np.int64)
    frac = np.round(np.maximum(q - n, 0.0), 9)
    left = count - n.sum(axis=1)
    order = np.argsort(-frac, axis=1, kind="stable")  # ties -> lower part index
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(rates.size)[None, :].repeat(len(count), axis=0), axis=1)
    n += rank < left[:, None]
    return cast(np.ndarray, n)


def _check_rates(rates: Sequence[float]) -> np.ndarray:
    try:
        r = np.asarray(rates, dtype=np.float64)
    except (TypeError, ValueError):
        raise TableError(f"rates must be a sequence of positive floats summing to 1, got {rates!r}") from None
    if r.ndim != 1 or r.size < 1 or not np.all(np.isfinite(r)) or np.any(r <= 0) or abs(r.sum() - 1.0) > _TOL:
        raise TableError(f"rates must be one or more positive floats summing to 1, got {list(np.atleast_1d(r))}")
    return r


def take(table: SampleTable, indices: Any) -> SampleTable:
    """The body of :meth:`SampleTable.take` (documented there)."""
    if not isinstance(indices, (pa.Array, pa.ChunkedArray)):
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        if idx.dtype.kind == "b":
            raise TableError("take() needs integer indices; use filter() for a boolean mask")
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise TableError(f"take() needs a 1-D integer array, got dtype {idx.dtype} shape {idx.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= table.num_rows):
            raise TableError(f"take() indices out of range [0, {table.num_rows})")
        return type(table)(take_rows(table.arrow, idx), validate=False)
    try:
        return type(table)(table.arrow.take(indices), validate=False)
    except (pa.ArrowException, IndexError) as e:
        raise TableError(f"take() failed: {e}") from None


def filter(table: SampleTable, mask: Any) -> SampleTable:
    """The body of :meth:`SampleTable.filter` (documented there)."""
    if not isinstance(mask, (pa.Array, pa.ChunkedArray)):
        m = np.asarray(mask)
        if m.dtype != np.bool_ or m.ndim != 1:
            raise TableError(f"filter() needs a 1-D boolean mask, got dtype {m.dtype} shape {m.shape}")
        mask = pa.array(m)
    elif not pa.types.is_boolean(mask.type):
        raise TableError(f"filter() needs a boolean mask, got Arrow type {mask.type}")
    if len(mask) != table.num_rows:
        raise TableError(f"filter() mask has length {len(mask)}, table has {table.num_rows} rows")
    return type(table)(filter_rows(table.arrow, mask), validate=False)


def select_subjects(table: SampleTable, subjects: Iterable[str]) -> SampleTable:
    """The body of :meth:`SampleTable.select_subjects` (documented there)."""
    wanted = pa.array(list(dict.fromkeys(subjects)), type=pa.string())
    present = pc.is_in(wanted, value_set=pc.unique(table._column(SUBJECT)))
    missing = pc.filter(wanted, pc.invert(present)).to_pylist()
    if missing:
        raise TableError(f"select_subjects: unknown subjects {_fmt_list(missing)}")
    return type(table)(filter_rows(table.arrow, pc.is_in(table._column(SUBJECT), value_set=wanted)), validate=False)


def concat(tables: Sequence[SampleTable]) -> SampleTable:
    """The body of :meth:`SampleTable.concat` (documented there)."""
    tables = list(tables)
    if not tables:
        raise TableError("concat() needs at least one table")
    first = tables[0]
    ref = first.schema
    arrows = []
    for i, tab in enumerate(tables):
        s = tab.schema
        missing = [n for n in ref.names if n not in s.names]
        extra = [n for n in s.names if n not in ref.names]
        if missing or extra:
            col = (missing or extra)[0]
            raise TableError(f"concat: table {i} {'lacks' if missing else 'has extra'} column {col!r}")
        for f in ref:
            if s.field(f.name).type != f.type:
                raise TableError(
                    f"concat: column {f.name!r} has type {_type_desc(s.field(f.name).type)} in "
                    f"table {i} but {_type_desc(f.type)} in table 0"
                )
        arrows.append(tab.arrow.select(ref.names).replace_schema_metadata(ref.metadata))
    meta0 = first.metadata
    lineages = [t.lineage for t in tables]
    base0 = {k: v for k, v in meta0.items() if k != "lineage"}
    for i, tab in enumerate(tables[1:], 1):
        base = {k: v for k, v in tab.metadata.items() if k != "lineage"}
        if base != base0:
            key = sorted(k for k in set(base) | set(base0) if base.get(k) != base0.get(k))[0]
            raise TableError(f"concat: metadata {key!r} differs between table 0 and table {i}")
    out = type(tables[0])(pa.concat_tables(arrows), validate=False)
    sid = out._column(SAMPLE_ID)
    counts = pc.value_counts(sid)
    dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), scalar(1)))
    if len(dup):
        raise TableError(
            f"concat: {len(dup)} sample ids occur in more than one table: "
            f"{_fmt_list(dup.slice(0, _SHOW).to_pylist(), len(dup))}"
        )
    if any(lin != lineages[0] for lin in lineages[1:]):
        import hashlib

        fp = hashlib.sha256(_dump_meta({"inputs": lineages})).hexdigest()
        meta0["lineage"] = lineages[0] + [{"step": "concat", "fingerprint": fp, "inputs": lineages}]
        out = out._with_meta(meta0)
    return out


def _subject_codes(table: SampleTable) -> tuple[pa.Array, np.ndarray]:
    """(sorted unique subjects, code of each row into them)."""
    subj = table._column(SUBJECT)
    if subj.null_count:
        raise TableError(f"column {SUBJECT!r} has null values; cannot split")
    uniq = pc.unique(subj)
    uniq = pc.take(uniq, pc.sort_indices(uniq))
    codes = pc.index_in(subj, value_set=uniq)
    codes = np.concatenate([to_numpy(c) for c in codes.chunks]) if codes.num_chunks else np.empty(0, dtype=np.int32)
    return uniq, codes.astype(np.int64, copy=False)


def _parts_from_row_part(table: SampleTable, row_part: np.ndarray, k: int) -> list[SampleTable]:
    return [type(table)(take_rows(table.arrow, np.flatnonzero(row_part == i)), validate=False) for i in range(k)]


def _subject_values(table: SampleTable, name: str, codes: np.ndarray, s: int) -> tuple[np.ndarray, list[str], int]:
    """(each subject's value code into the sorted values of attribute ``name`` — its most frequent value, ties to
    the first in sorted order —, those values as text (a missing value is ``"<missing>"``), the number of subjects
    whose samples hold more than one value)."""
    column = ATTR_PREFIX + name
    if column not in table.arrow.schema.names:
        raise TableError(
            f"cannot stratify by {name!r}: the table has no column {column!r}; its attribute columns: "
            f"{table.attribute_names}"
        )
    col = table.arrow.column(column)
    try:
        text = pc.cast(col, pa.string()) if not pa.types.is_string(col.type) else col
    except pa.ArrowException as exc:
        raise TableError(f"cannot stratify by {name!r}: its values ({col.type}) have no text form: {exc}") from None
    text = pc.fill_null(text, scalar("<missing>"))
    values = pc.unique(text)
    values = pc.take(values, pc.sort_indices(values))
    vcode = np.asarray(to_numpy(pc.index_in(text, value_set=values)), dtype=np.int64)
    v = len(values)
    pair, count = np.unique(codes * v + vcode, return_counts=True)  # (subject, value) pairs and their samples
    subject = pair // v
    order = np.lexsort((pair % v, -count, subject))  # per subject: the most frequent value first, ties sorted
    first = np.ones(len(order), dtype=bool)
    first[1:] = subject[order][1:] != subject[order][:-1]
    chosen = np.empty(s, dtype=np.int64)
    chosen[subject[order][first]] = (pair % v)[order][first]
    varying = int(np.count_nonzero(np.bincount(subject, minlength=s) > 1))
    return chosen, [str(x) for x in values.to_pylist()], varying


def subject_strata(
    table: SampleTable, names: Sequence[str]
) -> tuple[np.ndarray, list[tuple[str, ...]], dict[str, int]]:
    """The subject-level strata of ``names`` (attribute columns): (the stratum of each of the sorted subjects,
    each stratum's values — one per name —, the number of subjects whose samples hold more than one value, per
    name). A subject whose value varies is put in the stratum of its most frequent value (ties: the first in
    sorted order)."""
    uniq, codes = _subject_codes(table)
    s = len(uniq)
    columns, texts, varying = [], [], {}
    for name in names:  # few attributes; each vectorized over samples and subjects
        chosen, values, n_varying = _subject_values(table, name, codes, s)
        columns.append(chosen)
        texts.append(values)
        varying[name] = n_varying
    if not columns:
        return np.zeros(s, dtype=np.int64), [()], varying
    combos, stratum = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    labels = [tuple(texts[j][int(c)] for j, c in enumerate(row)) for row in combos]  # one per stratum (few)
    return stratum.reshape(-1).astype(np.int64), labels, varying


def stratified_sizes(counts: np.ndarray, rates: Sequence[float]) -> np.ndarray:
    """Subjects of each stratum (``counts``, shape (H,)) per part: (H, k) int64, each within one subject of the
    stratum's quota ``count * rate``. Every stratum first gets the floors of its quotas; the subjects left over
    (fewer than k per stratum) are settled across strata, so that the part sizes stay those of the unstratified
    largest-remainder split where they can (one stratum: exactly its sizes): strata with the most left over
    first, each giving one subject to each of as many parts, preferring a part the stratum would otherwise miss
    (where it has at least k subjects), then the parts furthest below their unstratified size, then the
    stratum's largest remainders, then the lower part index. A stratum of at least k subjects still missing a
    part then gives it one subject of its largest part, so that every part gets every stratum where the counts
    allow. Depends only on the counts and the rates (not on the seed)."""
    r = _check_rates(rates)
    counts = np.asarray(counts, dtype=np.int64)
    k = r.size
    quota = counts[:, None].astype(np.float64) * r[None, :]
    sizes = np.floor(quota + _TOL).astype(np.int64)
    frac = np.round(np.maximum(quota - sizes, 0.0), 9)
    left = counts - sizes.sum(axis=1)
    below = _part_sizes(np.array([int(counts.sum())]), r)[0] - sizes.sum(axis=0)  # per part, vs the plain split
    index = np.arange(k)
    for h in np.lexsort((np.arange(len(counts)), -left)):  # strata, not samples; most left over first
        if left[h] <= 0:
            continue
        missed = (sizes[h] == 0) & (counts[h] >= k)
        chosen = np.lexsort((index, -frac[h], -below, ~missed))[: left[h]]
        sizes[h, chosen] += 1
        below[chosen] -= 1
    rows = np.arange(len(counts))
    for j in range(k):  # few parts
        fix = (sizes[:, j] == 0) & (counts >= k)
        if fix.any():
            donor = np.argmax(sizes[fix], axis=1)
            sizes[rows[fix], donor] -= 1
            sizes[fix, j] += 1
    return cast(np.ndarray, sizes)


def split_subjects(
    table: SampleTable,
    rates: Sequence[float],
    seed: int,
    *,
    stratify: Sequence[str] = (),
    rounding: str = "largest_remainder",
) -> list[SampleTable]:
    """The body of :meth:`SampleTable.split_subjects` (documented there)."""
    r = _check_rates(rates)
    uniq, codes = _subject_codes(table)
    s = len(uniq)
    perm = np.random.default_rng(seed).permutation(s)
    part_of_subject = np.empty(s, dtype=np.int64)
    if stratify:
        if rounding != "largest_remainder":
            raise TableError(f"split rounding {rounding!r} does not combine with stratify (SEBA does not stratify)")
        stratum, _, _ = subject_strata(table, stratify)
        sizes_hk = stratified_sizes(np.bincount(stratum), r.tolist())
        empty = np.flatnonzero(sizes_hk.sum(axis=0) == 0)
        if empty.size:
            raise TableError(f"split rates {r.tolist()} over {s} subjects leave part {int(empty[0])} empty")
        position = np.empty(s, dtype=np.int64)
        position[perm] = np.arange(s)
        order = np.lexsort((position, stratum))  # by stratum, then in the permutation's order
        part_of_subject[order] = np.repeat(np.tile(np.arange(r.size), len(sizes_hk)), sizes_hk.reshape(-1))
        return _parts_from_row_part(table, part_of_subject[codes], r.size)
    sizes = _part_sizes(np.array([s]), r, rounding)[0]
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        raise TableError(f"split rates {r.tolist()} over {s} subjects leave part {int(empty[0])} empty")
    part_of_subject[perm] = np.repeat(np.arange(r.size), sizes)
    return _parts_from_row_part(table, part_of_subject[codes], r.size)


def split_within_subjects(
    table: SampleTable, rates: Sequence[float], seed: int, *, min_per_part: int = 1
) -> list[SampleTable]:
    """The body of :meth:`SampleTable.split_within_subjects` (documented there)."""
    r = _check_rates(rates)
    if min_per_part < 0:
        raise TableError(f"min_per_part must be >= 0, got {min_per_part}")
    uniq, codes = _subject_codes(table)
    n = len(codes)
    counts = np.bincount(codes, minlength=len(uniq))
    sizes = _part_sizes(counts, r)  # (S, k)
    short = np.flatnonzero((sizes < min_per_part).any(axis=1))
    if short.size:
        names = pc.take(uniq, pa.array(short[:_SHOW])).to_pylist()
        desc = ", ".join(f"{nm!r} ({int(counts[i])} samples)" for nm, i in zip(names, short[:_SHOW], strict=True))
        raise TableError(
            f"split rates {r.tolist()} with min_per_part={min_per_part}: {short.size} subjects "
            f"have too few samples: {desc}{', ...' if short.size > _SHOW else ''}"
        )
    # canonical order (by sample_id) -> one random key per sample, independent of the row order
    canon = to_numpy(pc.sort_indices(table._column(SAMPLE_ID)))
    row_key = np.empty(n, dtype=np.int64)
    row_key[canon] = np.random.default_rng(seed).permutation(n)
    shuffled = np.argsort(codes * n + row_key)  # by subject, then random key (all keys distinct)
    sub = codes[shuffled]
    starts = np.zeros(len(uniq), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    rank = np.arange(n, dtype=np.int64) - starts[sub]
    cuts = np.cumsum(sizes, axis=1)  # (S, k): end of each part
    part = np.zeros(n, dtype=np.int64)
    for i in range(r.size - 1):  # loop over parts (few), not subjects
        part += rank >= cuts[sub, i]
    row_part = np.empty(n, dtype=np.int64)
    row_part[shuffled] = part
    return _parts_from_row_part(table, row_part, r.size)


def iter_batches(table: SampleTable, batch_size: int = 65536) -> Iterator[SampleTable]:
    """The body of :meth:`SampleTable.iter_batches` (documented there)."""
    if int(batch_size) < 1:
        raise TableError(f"batch_size must be >= 1, got {batch_size}")
    for off in range(0, table.num_rows, int(batch_size)):
        yield type(table)(table.arrow.slice(off, int(batch_size)), validate=False)
