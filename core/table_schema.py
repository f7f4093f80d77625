"""The sample table's column layout, shared by :mod:`bioanon.table`, its I/O (:mod:`bioanon.table_io`), its
transforms (:mod:`bioanon.table_transforms`) and :mod:`bioanon.interop`: the reserved column names, the metadata
key, the payload specs, and the builders of Arrow arrays for ids, strings and payloads.

This module knows no :class:`~bioanon.table.SampleTable`, so every module above can import it one way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bioanon.errors import TableError
from bioanon.fileio import printable

from .arrow_numpy import from_values, to_numpy

#: Schema metadata key holding the JSON metadata dict.
METADATA_KEY = b"bioanon"
LOAD_WARNINGS = "load_warnings"
"""Table metadata key: problems a data source found while loading, as sentences (e.g. images without a face);
an evaluation lists them first among its warnings."""
SAMPLE_ID = "sample_id"
SUBJECT = "subject"
ATTR_PREFIX = "attr."
#: Optional per-sample sample-rate column (for variable-length audio payloads).
SAMPLE_RATE = "sample_rate"

#: Expected layout of the well-known payload columns, checked by :meth:`SampleTable.validate`.
#: ``name -> (kind, numpy dtype, per-sample shape)``; kind is ``"tensor"`` (fixed_shape_tensor) or ``"list"``
#: (list<float>); ``None`` in a shape is a wildcard. Plugins may add entries for their own payloads.
PAYLOAD_SPECS: dict[str, tuple[str, np.dtype, tuple[int | None, ...]]] = {
    "image": ("tensor", np.dtype(np.uint8), (None, None, None)),
    "pose": ("tensor", np.dtype(np.float32), (None, None, 3)),
    "imu": ("tensor", np.dtype(np.float32), (None, None)),
    "features": ("tensor", np.dtype(np.float32), (None,)),
    "audio": ("list", np.dtype(np.float32), (None,)),
}

_RESERVED = (SAMPLE_ID, SUBJECT, SAMPLE_RATE)
_SHOW = 5  # how many offending ids an error message names
_BLOCK_ELEMS = 1 << 22  # elements per block in the finiteness check
_TOL = 1e-9


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------
def _is_tensor_type(t: pa.DataType) -> bool:
    return isinstance(t, pa.FixedShapeTensorType)


def _is_list_float_type(t: pa.DataType) -> bool:
    return bool((pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_floating(t.value_type))


def _is_payload_field(field: pa.Field) -> bool:
    name = field.name
    if name in _RESERVED or name.startswith(ATTR_PREFIX):
        return False
    return _is_tensor_type(field.type) or _is_list_float_type(field.type)


def _is_string_type(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _attr_col(name: str) -> str:
    return name if name.startswith(ATTR_PREFIX) else ATTR_PREFIX + name


def _fmt_list(items: Sequence[Any], total: int | None = None) -> str:
    items = list(items)
    total = len(items) if total is None else total
    shown = ", ".join(repr(x) for x in items[:_SHOW])
    return f"[{shown}{', ...' if total > _SHOW else ''}]"


def _np_dtype(t: pa.DataType) -> np.dtype:
    return cast("np.dtype[Any]", np.dtype(t.to_pandas_dtype()))


def _type_desc(t: pa.DataType) -> str:
    if _is_tensor_type(t):
        return f"fixed_shape_tensor<{_np_dtype(t.value_type)}>{list(t.shape)}"
    if _is_list_float_type(t):
        return f"list<{_np_dtype(t.value_type)}>"
    return str(t)


def _shape_matches(actual: Sequence[int | None], expected: Sequence[int | None]) -> bool:
    return len(actual) == len(expected) and all(e is None or a == e for a, e in zip(actual, expected, strict=True))


def _dump_meta(meta: dict[str, Any]) -> bytes:
    try:
        return json.dumps(meta, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise TableError(f"metadata must be JSON-serializable (no NaN/inf): {e}") from None


def _as_string_array(values: Any, what: str) -> pa.Array:
    """Strings (or integers, which are formatted) as a pa.string() array; None stays null."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if _is_string_type(values.type) or pa.types.is_integer(values.type):
            return pc.cast(values, pa.string())
        raise TableError(f"{what} must be strings, got Arrow type {values.type}")
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise TableError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        arr = arr.astype(str)
    try:
        if arr.dtype.kind == "O":
            return from_values(arr.tolist(), type=pa.string())
        return pa.array(arr, type=pa.string())
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise TableError(not_utf8_problem(arr.tolist(), what) or f"{what} must be strings: {e}") from None


def not_utf8_problem(values: Iterable[Any], what: str) -> str | None:
    """The problem of the first string of ``values`` that is not valid UTF-8 (a file or folder name whose bytes
    are not UTF-8, as Python reads them: :func:`os.fsdecode`), naming it with those bytes as ``\\xff``; None
    when there is none."""
    for v in values:
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return (
                    f"{what} '{printable(v)}' is not valid UTF-8 text (from a file or folder name that is not "
                    "UTF-8?); rename the file or folder"
                )
    return None


def take_rows(table: pa.Table, rows: Any) -> pa.Table:
    """``table.take(rows)`` (``rows``: row positions) that copies only the rows taken, its tensor payloads
    gathered by numpy.

    A fixed-shape tensor payload of numbers (:func:`_rows_view`) is gathered row by row into a numpy array that
    the result wraps without a copy: about 2.5 times as fast as Arrow's take (which builds an index per value)
    and, since numpy asks the kernel for huge pages for large arrays, with a few hundred page faults where
    Arrow's buffer takes one per 4 KiB (25,600 rows of 256 float32: 270 against 6,400). Arrow's take of a table
    whose other columns come in several chunks (a table read as the concatenation of stored shards) first
    concatenates all the chunks, so it would copy a whole ragged payload to take even one row: here each chunk
    gives its own rows, put back in the order asked for by a take of the rows taken alone."""
    idx = np.asarray(rows, dtype=np.int64)
    if idx.ndim != 1:
        raise TableError(f"take_rows needs a 1-D array of row positions, got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= table.num_rows):
        raise TableError(f"take_rows: row positions out of range [0, {table.num_rows})")
    views = {i: _rows_views(col) for i, col in enumerate(table.columns)}
    gathered = {i: _gather_rows(table.field(i).type, v, idx) for i, v in views.items() if v is not None}
    if not gathered:
        return _arrow_take(table, idx)
    rest = [i for i in range(table.num_columns) if i not in gathered]
    taken = _arrow_take(table.select(rest), idx) if rest else pa.table({})
    arrays = [gathered[i] if i in gathered else taken.column(rest.index(i)) for i in range(table.num_columns)]
    return pa.Table.from_arrays(arrays, schema=table.schema)


def filter_rows(table: pa.Table, mask: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``table.filter(mask)`` (a boolean Arrow mask; null counts as false), by :func:`take_rows` where the table
    has a payload that numpy gathers faster (:func:`_rows_view`)."""
    if not any(_rows_views(col) is not None for col in table.columns):
        return table.filter(mask)
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    return take_rows(table, np.flatnonzero(to_numpy(mask)))


def _rows_view(chunk: pa.Array) -> np.ndarray | None:
    """A fixed-shape tensor array of integers or floats without nulls as a (rows, values per row) numpy view of
    its values; None for any other array (its rows are taken by Arrow)."""
    t = chunk.type
    if not isinstance(t, pa.FixedShapeTensorType) or chunk.null_count:
        return None
    if not (pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)):
        return None
    size = int(np.prod(t.shape))
    storage = chunk.storage
    values = storage.values.slice(storage.offset * size, len(storage) * size)
    if values.null_count:
        return None
    return to_numpy(values).reshape(len(storage), size)


def _rows_views(column: pa.ChunkedArray) -> list[np.ndarray] | None:
    """:func:`_rows_view` of each chunk of ``column``, or None unless every chunk (at least one) has one."""
    views = [_rows_view(c) for c in column.chunks]
    return [v for v in views if v is not None] if views and all(v is not None for v in views) else None


def _gather_rows(t: pa.DataType, views: list[np.ndarray], idx: np.ndarray) -> pa.Array:
    """The rows ``idx`` of a chunked tensor column (its chunks' :func:`_rows_view`) as one tensor array of type
    ``t``, wrapping the numpy array it gathers into."""
    width = int(np.prod(t.shape))
    if len(views) == 1:
        out = np.take(views[0], idx, axis=0)
    else:
        out = np.empty((idx.size, width), dtype=views[0].dtype)
        for b, group, start in _by_chunk(idx, [len(v) for v in views]):
            first, last = int(group[0]), int(group[-1])
            local = idx[group] - start
            if last - first + 1 == group.size:  # the chunk's rows fill a range of the output: gathered in place
                np.take(views[b], local, axis=0, out=out[first : last + 1], mode="clip")  # "raise" would buffer
            else:
                out[group] = views[b][local]
    storage = pa.FixedSizeListArray.from_arrays(pa.array(out.reshape(-1), type=t.value_type), width)
    return pa.ExtensionArray.from_storage(t, storage)


def _by_chunk(idx: np.ndarray, lengths: Sequence[int]) -> Iterator[tuple[int, np.ndarray, int]]:
    """For each chunk (of the given lengths, in order) that holds any of the rows ``idx``: its number, the
    positions in ``idx`` of its rows (increasing) and its first row. Empty chunks are skipped."""
    starts = np.cumsum([0, *lengths])
    which = np.searchsorted(starts, idx, side="right") - 1
    order = np.argsort(which, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(which[order])) + 1) if idx.size else ():
        b = int(which[group[0]])
        yield b, group, int(starts[b])


def _arrow_take(table: pa.Table, idx: np.ndarray) -> pa.Table:
    """Arrow's take of the rows ``idx`` (checked), chunk by chunk where a column has several chunks."""
    if all(col.num_chunks <= 1 for col in table.columns):
        return table.take(pa.array(idx))
    order = None
    if idx.size > 1 and np.any(np.diff(idx) < 0):
        order = np.argsort(idx, kind="stable")
        idx = idx[order]
    batches = table.to_batches()  # zero-copy slices, their boundaries the same in every column
    parts = [
        batches[b].take(pa.array(idx[group] - start)) for b, group, start in _by_chunk(idx, [len(b) for b in batches])
    ]
    out = pa.Table.from_batches(parts, schema=table.schema)
    if order is not None:  # back to the order asked for
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        out = out.combine_chunks().take(pa.array(inverse))
    return out


def _tensor_array(arr: np.ndarray, name: str) -> pa.Array:
    """(N, *shape) ndarray -> fixed_shape_tensor extension array (zero-copy for C-contiguous numeric input)."""
    if arr.ndim < 2:
        raise TableError(
            f"payload {name!r}: an ndarray payload must have shape (N, *sample_shape) with at least 2 dims, "
            f"got shape {arr.shape}; give scalars as attributes and 1-D samples as shape (N, D)"
        )
    if arr.dtype.kind not in "biuf":
        raise TableError(f"payload {name!r}: unsupported dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr)
    shape = tuple(int(s) for s in arr.shape[1:])
    size = int(np.prod(shape))
    value_type = pa.from_numpy_dtype(arr.dtype)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1), type=value_type), size)
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(value_type, shape), storage)


def _ragged_array(items: Sequence[Any], name: str, dtype: Any = np.float32) -> pa.Array:
    """Sequence of 1-D arrays -> list<dtype> (float32 by default; large_list when over 2**31 - 1 values)."""
    arrs = [np.asarray(a) for a in items]
    for i, a in enumerate(arrs):
        if a.ndim != 1 or a.dtype.kind not in "biuf":
            raise TableError(
                f"payload {name!r}: item {i} must be a 1-D numeric array for a variable-length payload, "
                f"got shape {a.shape} dtype {a.dtype}"
            )
    lengths = np.fromiter((a.shape[0] for a in arrs), dtype=np.int64, count=len(arrs))
    offsets = np.zeros(len(arrs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = (np.concatenate(arrs) if arrs else np.empty(0)).astype(dtype, copy=False)
    if offsets[-1] > np.iinfo(np.int32).max:
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))


def _default_ids(n: int) -> pa.Array:
    """The default sample ids of n rows: ``f"{i:0{width}d}"`` with ``width = len(str(n - 1))``."""
    width = len(str(n - 1)) if n > 0 else 1
    return pa.array(np.char.zfill(np.arange(n).astype(str), width) if n else [], type=pa.string())


def _payload_to_arrow(name: str, value: Any) -> pa.Array | pa.ChunkedArray:
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        if not (_is_tensor_type(value.type) or _is_list_float_type(value.type)):
            raise TableError(
                f"payload {name!r}: Arrow type {value.type} is not a payload type (fixed_shape_tensor or list<float>)"
            )
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        return _tensor_array(value, name)
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if items and all(np.ndim(a) > 1 for a in items):
            shapes = {np.shape(a) for a in items}
            if len(shapes) != 1:
                raise TableError(
                    f"payload {name!r}: items have different shapes {sorted(shapes)[:_SHOW]}; "
                    f"only 1-D items may have different lengths"
                )
            return _tensor_array(np.stack(items), name)
        return _ragged_array(items, name)
    raise TableError(
        f"payload {name!r}: expected an ndarray (N, *shape) or a list of 1-D arrays, got {type(value).__name__}"
    )
