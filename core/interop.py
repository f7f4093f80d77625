"""Sample tables to and from pandas, Hugging Face ``datasets`` and PyTorch.

The :class:`~bioanon.table.SampleTable` methods ``to_pandas``/``from_pandas``, ``to_hf``/``from_hf`` and
``to_torch`` call into this module; the constructors ``from_pandas``/``from_hf`` get the class to build from the
method, so this module imports only the column layout (:mod:`bioanon.table_schema`) and the import graph stays
one-way: ``bioanon.table`` → ``bioanon.interop`` → ``bioanon.table_schema``. pandas, ``datasets`` and torch are
imported only when one of them is used (``import bioanon`` imports none of them).

What is zero-copy, and what is not
    * ``to_pandas``: every payload cell is a numpy view of the table's Arrow memory (read-only); scalar columns
      are converted by pyarrow (numbers without nulls may be shared, strings are copied).
    * ``from_pandas``: copies (pandas holds a payload as one Python object per row; they are stacked).
    * ``to_hf``: shares every payload's values: 1-D tensors (``features``) and ``list<float>`` payloads
      (``audio``) are already in the layout ``datasets`` uses; tensors of 2 to 5 dimensions become
      ``Array2D``..``Array5D``, whose nested-list layout needs new offsets buffers (one int32 per row of every
      inner level), the values stay shared.
    * ``from_hf``: shares the values of ``List``/``Sequence``/``Array2D``..``Array5D`` columns (of a data set
      read with ``load_from_disk`` they are views of the memory-mapped file); ``Image`` and ``Audio`` columns
      are decoded (a copy, necessarily); a data set with an indices mapping (after ``select``/``shuffle``/
      ``filter``) is gathered first.
    * ``to_torch``: each item's tensors are views of the table's memory (see :func:`to_torch`).

Why arrays, not ``Image``/``Audio`` features, in ``to_hf``
    ``datasets.Image`` and ``datasets.Audio`` store encoded files (PNG, WAV): encoding copies every sample and
    a float image or a non-default sample layout would not come back bit for bit, while ``Array3D`` and a
    ``float32`` sequence are exact and shared. ``from_hf`` reads ``Image`` and ``Audio`` columns all the same,
    as data sets published in ``datasets`` format usually have them.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_numpy import pandas_check_right
from .errors import MissingDependencyError, TableError
from .table_schema import (
    ATTR_PREFIX,
    METADATA_KEY,
    PAYLOAD_SPECS,
    SAMPLE_ID,
    SAMPLE_RATE,
    SUBJECT,
    _as_string_array,
    _default_ids,
    _dump_meta,
    _is_list_float_type,
    _is_tensor_type,
    _ragged_array,
    _tensor_array,
)

if TYPE_CHECKING:  # annotations only: bioanon.table imports this module (on use), not the other way round
    from .table import SampleTable

__all__ = ["to_pandas", "from_pandas", "to_hf", "from_hf", "to_torch", "HF_INSTALL", "TORCH_INSTALL"]

HF_INSTALL = "pip install 'bioanon[hf]'"
TORCH_INSTALL = "pip install 'bioanon[torch]'"
#: ``DataFrame.attrs`` keys: the table's metadata (a dict) and its Arrow schema (serialized, for exact types).
PANDAS_METADATA = "bioanon"
PANDAS_SCHEMA = "bioanon.schema"
#: ``datasets.DatasetInfo.description`` prefix followed by the table's JSON metadata (``datasets`` keeps no other
#: free-form metadata through ``save_to_disk``).
HF_DESCRIPTION_PREFIX = "bioanon sample table; metadata: "
_INT32_MAX = np.iinfo(np.int32).max


def _subject_column(names: Sequence[str], subject: str | None, where: str) -> str:
    """The subject column: ``subject`` when given, else the one column named as in ``SUBJECT_COLUMNS``."""
    from .metadata import SUBJECT_COLUMNS

    if subject is not None:
        if subject not in names:
            raise TableError(f"{where}: no subject column {subject!r}; columns: {list(names)}")
        return subject
    if SUBJECT in names:
        return SUBJECT
    found = [c for c in names if c.strip().lower() in SUBJECT_COLUMNS]
    if len(found) != 1:
        why = f"columns {found} all name the subject" if found else "no column names the subject"
        raise TableError(
            f"{where}: {why} (looked for {list(SUBJECT_COLUMNS)}); columns: {list(names)}; pass subject=<column>"
        )
    return found[0]


def _import_datasets(what: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError(what, {"datasets": HF_INSTALL}) from None
    return datasets


def _single_chunks(col: pa.ChunkedArray) -> list[pa.Array]:
    return list(col.chunks) if col.num_chunks else [pa.array([], type=col.type)]


# --------------------------------------------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------------------------------------------
def to_pandas(table: SampleTable) -> Any:
    """The table as a :class:`pandas.DataFrame` (see :meth:`SampleTable.to_pandas`)."""
    import pandas as pd

    pandas_check_right()

    arrow = table.arrow
    payloads = table.payload_names
    scalar = [n for n in arrow.schema.names if n not in payloads]
    df = arrow.select(scalar).replace_schema_metadata(None).to_pandas()
    n = table.num_rows
    for name in payloads:
        values = table.payload(name)  # zero-copy views
        cells = np.empty(n, dtype=object)
        for i in range(n):  # element-wise: assigning a stacked array would broadcast instead
            cells[i] = values[i]
        df.insert(arrow.schema.get_field_index(name), name, pd.Series(cells, index=df.index, dtype=object))
    df.attrs[PANDAS_METADATA] = table.metadata
    df.attrs[PANDAS_SCHEMA] = arrow.schema.remove_metadata().serialize().to_pybytes()
    return df


def _stored_schema(attrs: dict[str, Any]) -> pa.Schema | None:
    raw = attrs.get(PANDAS_SCHEMA)
    if not isinstance(raw, (bytes, bytearray)):
        return None
    try:
        return pa.ipc.read_schema(pa.py_buffer(bytes(raw)))
    except pa.ArrowException:
        return None


def _is_array_cell(v: Any) -> bool:
    return isinstance(v, (np.ndarray, list, tuple))


def _cells_payload(name: str, cells: Sequence[Any], stored: pa.DataType | None) -> pa.Array:
    """One payload column from pandas cells (arrays or lists), with the stored or well-known type when known."""
    arrs = [np.asarray(c) for c in cells]
    if stored is not None:
        kind = "tensor" if _is_tensor_type(stored) else "list"
        dtype = np.dtype(stored.value_type.to_pandas_dtype())
    elif name in PAYLOAD_SPECS:
        kind, dtype, _ = PAYLOAD_SPECS[name]
    else:
        kind = "tensor" if arrs and all(a.ndim > 1 for a in arrs) else "list"
        dtype = None
    if kind == "list":
        if dtype is None or dtype.kind != "f":
            dtype = np.dtype(np.float32)
        out = _ragged_array(arrs, name, dtype)
        if stored is not None and out.type != stored:
            out = out.cast(stored)  # list <-> large_list
        return out
    shapes = {a.shape for a in arrs}
    if len(shapes) > 1:
        raise TableError(
            f"from_pandas: payload {name!r} has cells of different shapes {sorted(shapes)[:5]}; a "
            f"fixed-shape payload needs one shape"
        )
    x = np.stack(arrs) if arrs else np.empty((0, *(stored.shape if stored is not None else (0,))), dtype or float)
    if dtype is not None and x.dtype != dtype and x.dtype.kind == dtype.kind == "f":
        x = x.astype(dtype)
    if x.ndim == 1:
        raise TableError(f"from_pandas: payload {name!r} has scalar cells; scalars are attributes")
    return _tensor_array(x, name)


def from_pandas(
    cls: type[SampleTable],
    df: Any,
    *,
    subject: str | None = None,
    sample_id: str = SAMPLE_ID,
    metadata: dict[str, Any] | None = None,
) -> SampleTable:
    """A ``cls`` table from a :class:`pandas.DataFrame` (see :meth:`SampleTable.from_pandas`)."""
    import pandas as pd

    pandas_check_right()
    if not isinstance(df, pd.DataFrame):
        raise TableError(f"from_pandas needs a pandas.DataFrame, got {type(df).__name__}")
    if sample_id not in df.columns and df.index.name == sample_id:
        df = df.reset_index()  # e.g. after df.set_index("sample_id")
    names = list(df.columns)
    bad = [c for c in names if not isinstance(c, str)]
    if bad:
        raise TableError(f"from_pandas: column names must be strings, got {bad[:5]}")
    subject = _subject_column(names, subject, "from_pandas")
    stored = _stored_schema(df.attrs)
    meta = dict(df.attrs.get(PANDAS_METADATA) or {}) if metadata is None else dict(metadata)
    n = len(df)
    fields: list[tuple[str, pa.Array | pa.ChunkedArray]] = []
    if sample_id not in names:
        fields.append((SAMPLE_ID, _default_ids(n)))
    for col in names:
        series = df[col]
        if col == sample_id:
            fields.append((SAMPLE_ID, _as_string_array(_arrow_of(series, col), "sample_id")))
            continue
        if col == subject:
            fields.append((SUBJECT, _as_string_array(_arrow_of(series, col), "subject")))
            continue
        out = col if col in (SAMPLE_RATE,) or col.startswith(ATTR_PREFIX) else None
        want = stored.field(col).type if stored is not None and col in stored.names else None
        payload_type = want is not None and (_is_tensor_type(want) or _is_list_float_type(want))
        cells = series.tolist() if series.dtype == object else []
        arrays = sum(_is_array_cell(c) for c in cells)
        if payload_type or arrays:
            if arrays != n:
                raise TableError(
                    f"from_pandas: payload column {col!r} has {n - arrays} cells that are not arrays (missing?)"
                )
            fields.append((col, _cells_payload(col, cells, want if payload_type else None)))
            continue
        arr = _arrow_of(series, col)
        if want is not None and arr.type != want:
            try:
                arr = arr.cast(want, safe=True)  # e.g. an int attribute with nulls (float64 in pandas) back to int
            except (pa.ArrowException, NotImplementedError):
                pass  # the column was changed in pandas: keep its new type
        fields.append((out or ATTR_PREFIX + col, arr))
    return _sample_table(cls, fields, meta, "from_pandas: columns {} occur twice once 'attr.' prefixes are added")


def _sample_table(
    cls: type[SampleTable], fields: list[tuple[str, Any]], meta: dict[str, Any], duplicate_message: str
) -> SampleTable:
    """The validated ``cls`` table of ``fields`` (name, Arrow array) with ``meta``; a name given twice is an error."""
    used = [f for f, _ in fields]
    dup = sorted({f for f in used if used.count(f) > 1})
    if dup:
        raise TableError(duplicate_message.format(dup))
    table = pa.table(dict(fields)).replace_schema_metadata({METADATA_KEY: _dump_meta(meta)})
    return cls(table, validate=True)


def _arrow_of(series: Any, col: str) -> pa.Array:
    try:
        arr = pa.Array.from_pandas(series)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise TableError(f"from_pandas: column {col!r} cannot be converted to Arrow: {e}") from None
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


# --------------------------------------------------------------------------------------------------------------
# Hugging Face datasets
# --------------------------------------------------------------------------------------------------------------
def _hf_tensor(chunk: pa.Array, hf_type: pa.DataType) -> pa.Array:
    """A fixed_shape_tensor chunk as a datasets ArrayXD chunk: the values are shared, offsets are new."""
    shape = [int(s) for s in chunk.type.shape]
    size = int(np.prod(shape))
    storage = chunk.storage
    flat = storage.values.slice(storage.offset * size, len(storage) * size)
    arr: pa.Array = flat
    count = len(storage) * size
    for d in reversed(shape):
        count //= d
        arr = pa.ListArray.from_arrays(pa.array(np.arange(count + 1, dtype=np.int32) * d), arr)
    return pa.ExtensionArray.from_storage(hf_type, arr)


def to_hf(table: SampleTable) -> Any:
    """The table as a :class:`datasets.Dataset` (see :meth:`SampleTable.to_hf`)."""
    datasets = _import_datasets("SampleTable.to_hf")
    arrow = table.arrow
    columns: dict[str, pa.ChunkedArray] = {}
    for field in arrow.schema:
        name, t = field.name, field.type
        col = arrow.column(name)
        if _is_tensor_type(t):
            perm = t.permutation
            if perm is not None and list(perm) != list(range(len(perm))):  # not row-major: copy into row-major
                col = pa.chunked_array([_tensor_array(cast(np.ndarray, table.payload(name)), name)])
                t = col.type
            shape = [int(s) for s in t.shape]
            if len(shape) == 1:  # the tensor's storage is the fixed-length sequence datasets uses
                columns[name] = pa.chunked_array([c.storage for c in _single_chunks(col)])
                continue
            if len(shape) > 5:
                raise TableError(
                    f"to_hf: payload {name!r} has {len(shape)} dimensions; datasets arrays have at most 5 (Array5D)"
                )
            dtype = datasets.Value(str(np.dtype(t.value_type.to_pandas_dtype()))).dtype
            hf_type = getattr(datasets, f"Array{len(shape)}D")(shape=tuple(shape), dtype=dtype)()
            size = max(int(np.prod(shape)), 1)
            step = max(1, _INT32_MAX // size)  # int32 offsets: split rows into chunks that fit
            chunks = [
                _hf_tensor(c.slice(o, step), hf_type)
                for c in _single_chunks(col)
                for o in range(0, max(len(c), 1), step)
            ]
            columns[name] = pa.chunked_array(chunks, type=hf_type)
        elif pa.types.is_dictionary(t):
            columns[name] = col.cast(t.value_type)  # datasets has no dictionary type
        else:
            columns[name] = col
    hf_table = pa.table(columns)
    try:
        features = datasets.Features.from_arrow_schema(hf_table.schema)
    except (ValueError, TypeError, NotImplementedError) as e:
        raise TableError(f"to_hf: a column type has no datasets feature: {e}") from None
    info = datasets.DatasetInfo(
        description=HF_DESCRIPTION_PREFIX + _dump_meta(table.metadata).decode(), features=features
    )
    return datasets.Dataset(hf_table, info=info)


def _parse_mapping(items: Sequence[str] | None, what: str) -> dict[str, str] | None:
    """``["col", "col:name"]`` -> ``{col: name}`` (None stays None: every suitable column)."""
    if items is None:
        return None
    if isinstance(items, str):
        items = [items]
    out: dict[str, str] = {}
    for it in items:
        col, _, name = str(it).partition(":")
        if not col:
            raise TableError(f"from_hf: {what} entry {it!r} must be 'column' or 'column:name'")
        out[col] = name or col
    return out


def _level_sizes(arr: pa.Array) -> tuple[pa.Array, list[int | None]]:
    """Peel the list levels of a chunk: (flat values, the size of each level, None where sizes vary); the values
    are a zero-copy slice."""
    sizes: list[int | None] = []
    while True:
        t = arr.type
        if isinstance(t, pa.ExtensionType):
            arr = arr.storage
            continue
        if pa.types.is_fixed_size_list(t):
            sizes.append(t.list_size)
            arr = arr.values.slice(arr.offset * t.list_size, len(arr) * t.list_size)
            continue
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            offsets = arr.offsets.to_numpy()
            lengths = np.diff(offsets)
            sizes.append(
                int(lengths[0]) if len(lengths) and (lengths == lengths[0]).all() else (0 if not len(lengths) else None)
            )
            arr = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0])) if len(offsets) else arr.values
            continue
        return arr, sizes


def _hf_array_payload(col: pa.ChunkedArray, column: str, name: str) -> pa.Array:
    """A list/sequence/ArrayXD column as a fixed_shape_tensor (equal shapes) or list<float> payload; zero-copy
    unless a cast to a well-known payload's dtype is needed."""
    kind = PAYLOAD_SPECS[name][0] if name in PAYLOAD_SPECS else None
    chunk = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if chunk.null_count:
        raise TableError(f"from_hf: column {column!r} has {chunk.null_count} missing values")
    flat, sizes = _level_sizes(chunk)
    if flat.null_count:
        raise TableError(f"from_hf: column {column!r} has missing values inside its arrays")
    if not (pa.types.is_integer(flat.type) or pa.types.is_floating(flat.type) or pa.types.is_boolean(flat.type)):
        raise TableError(f"from_hf: column {column!r} holds {flat.type} values, not numbers")
    if name in PAYLOAD_SPECS:  # a well-known payload in its dtype (a copy): float64 -> float32, int64 -> uint8
        want = pa.from_numpy_dtype(PAYLOAD_SPECS[name][1])
        if flat.type != want:
            try:
                flat = flat.cast(want, safe=not (pa.types.is_floating(want) and pa.types.is_floating(flat.type)))
            except pa.ArrowInvalid:
                pass  # values out of range: validation names the dtype
    depth = len(sizes)
    if kind == "list" or (kind is None and depth == 1 and sizes[0] is None):
        if depth != 1:
            raise TableError(
                f"from_hf: column {column!r} has {depth} nested levels; payload {name!r} is a "
                f"variable-length 1-D payload"
            )
        base = chunk.storage if isinstance(chunk.type, pa.ExtensionType) else chunk
        if not pa.types.is_floating(flat.type):
            flat = flat.cast(pa.float32())
        if pa.types.is_fixed_size_list(base.type):
            offsets = np.arange(len(base) + 1, dtype=np.int64) * base.type.list_size
        else:
            offsets = base.offsets.to_numpy().astype(np.int64)
            offsets -= offsets[0]  # relative to the (sliced) values
        if offsets[-1] > _INT32_MAX:
            return pa.LargeListArray.from_arrays(pa.array(offsets), flat)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat)  # the values stay shared
    if any(s is None for s in sizes):
        lvl = sizes.index(None)
        raise TableError(
            f"from_hf: column {column!r} has arrays of different sizes (level {lvl}); payload "
            f"{name!r} needs one shape for every sample (resize them, or name a variable-length 1-D "
            f"payload)"
        )
    shape = tuple(int(cast(int, s)) for s in sizes)  # no None left (checked above)
    if name == "image" and len(shape) == 2:
        shape = (*shape, 1)  # a grey H×W image is H×W×1
    size = int(np.prod(shape))
    storage = (
        pa.FixedSizeListArray.from_arrays(flat, size)
        if size
        else pa.FixedSizeListArray.from_arrays(pa.array([], type=flat.type), 0)
    )
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(flat.type, shape), storage)


def _decode_files(col: pa.ChunkedArray, column: str, decode: Callable[[Any], Any]) -> list[Any]:
    """Decode an Image/Audio column's ``{bytes, path}`` cells (bytes first, else the file at path)."""
    out = []
    for i, cell in enumerate(col.to_pylist()):
        if cell is None:
            raise TableError(f"from_hf: column {column!r} row {i} is missing")
        data, path = cell.get("bytes"), cell.get("path")
        if data is None and (not path or not os.path.isfile(path)):
            raise TableError(f"from_hf: column {column!r} row {i} has no bytes and no readable file ({path!r})")
        try:
            out.append(decode(io.BytesIO(data) if data is not None else path))
        except Exception as e:  # a corrupt file: name it
            raise TableError(
                f"from_hf: column {column!r} row {i} ({path or 'embedded bytes'}) cannot be decoded: {e}"
            ) from None
    return out


def _decode_image(src: Any) -> np.ndarray:
    from PIL import Image

    with Image.open(src) as img:
        x = np.asarray(img)
    return x[..., None] if x.ndim == 2 else x


def _decode_audio(src: Any) -> tuple[np.ndarray, int]:
    try:
        import soundfile
    except ImportError:  # WAV only, through scipy
        from scipy.io import wavfile

        rate, x = wavfile.read(src)
        if x.dtype.kind in "iu":
            x = x.astype(np.float32) / float(np.iinfo(x.dtype).max)
    else:
        x, rate = soundfile.read(src, dtype="float32", always_2d=False)
    x = np.asarray(x, dtype=np.float32)
    return (x.mean(axis=1) if x.ndim == 2 else x), int(rate)


def _hf_scalar(col: pa.ChunkedArray, feature: Any, datasets: Any) -> pa.ChunkedArray:
    """A scalar column; ClassLabel codes become their names."""
    if isinstance(feature, datasets.ClassLabel):
        codes = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        names = pa.array(feature.names, type=pa.string())
        return pa.chunked_array([pc.take(names, codes)])
    return col


def _hf_dataset(dataset: Any, split: str | None, datasets: Any) -> Any:
    if isinstance(dataset, (str, os.PathLike)):
        path = os.fspath(dataset)
        if not os.path.isdir(path):
            raise TableError(f"from_hf: {path!r} is not a folder written by datasets' save_to_disk")
        try:
            dataset = datasets.load_from_disk(path)
        except (FileNotFoundError, ValueError, OSError) as e:
            raise TableError(f"from_hf: cannot read {path!r} as a data set saved with save_to_disk: {e}") from None
    if isinstance(dataset, datasets.DatasetDict):
        splits = list(dataset)
        if split:
            if split not in dataset:
                raise TableError(f"from_hf: no split {split!r}; the data set has {splits}")
            return dataset[split]
        if len(splits) != 1:
            raise TableError(f"from_hf: the data set has the splits {splits}; choose one with split=")
        return dataset[splits[0]]
    if not isinstance(dataset, datasets.Dataset):
        raise TableError(
            f"from_hf needs a datasets.Dataset, a DatasetDict or a save_to_disk folder, got {type(dataset).__name__}"
        )
    if split:
        raise TableError(f"from_hf: split={split!r} given, but the data set is a single Dataset, not a DatasetDict")
    return dataset


def from_hf(
    cls: type[SampleTable],
    dataset: Any,
    *,
    split: str | None = None,
    subject: str | None = None,
    sample_id: str = SAMPLE_ID,
    payloads: Sequence[str] | None = None,
    attributes: Sequence[str] | None = None,
    sample_rate: float | None = None,
    metadata: dict[str, Any] | None = None,
) -> SampleTable:
    """A ``cls`` table from a Hugging Face data set (see :meth:`SampleTable.from_hf`)."""
    datasets = _import_datasets("SampleTable.from_hf")
    ds = _hf_dataset(dataset, split, datasets)
    features = ds.features
    arrow = ds.data.table if getattr(ds, "_indices", None) is None else ds.with_format("arrow")[:]
    names = list(arrow.schema.names)
    subject = _subject_column(names, subject, "from_hf")
    pay_map = _parse_mapping(payloads, "payloads")
    attr_map = _parse_mapping(attributes, "attributes")
    for what, mapping in (("payload", pay_map), ("attribute", attr_map)):
        missing = [c for c in (mapping or {}) if c not in names]
        if missing:
            raise TableError(f"from_hf: no {what} column(s) {missing}; columns: {names}")

    def is_array(col: str) -> bool:
        f, t = features.get(col), arrow.schema.field(col).type
        if isinstance(f, (datasets.Image, datasets.Audio)):
            return True
        inner = t.storage_type if isinstance(t, pa.ExtensionType) else t
        while pa.types.is_list(inner) or pa.types.is_large_list(inner) or pa.types.is_fixed_size_list(inner):
            inner = inner.value_type
            if not (pa.types.is_list(inner) or pa.types.is_large_list(inner) or pa.types.is_fixed_size_list(inner)):
                return bool(pa.types.is_floating(inner) or pa.types.is_integer(inner))
        return False

    reserved = {subject, sample_id}
    if pay_map is None:
        pay_map = {c: c for c in names if c not in reserved and is_array(c) and c not in (attr_map or {})}
    meta: dict[str, Any] = {}
    info = getattr(ds, "info", None)
    desc = getattr(info, "description", "") or ""
    if desc.startswith(HF_DESCRIPTION_PREFIX):
        try:
            meta = json.loads(desc[len(HF_DESCRIPTION_PREFIX) :])
        except ValueError:
            meta = {}
    if metadata is not None:
        meta = dict(metadata)
    if sample_rate:
        meta["sample_rate"] = sample_rate
    fields: list[tuple[str, Any]] = []
    if sample_id not in names:
        fields.append((SAMPLE_ID, _default_ids(len(arrow))))
    for col in names:
        data = arrow.column(col)
        feature = features.get(col)
        if col == sample_id:
            fields.append((SAMPLE_ID, _as_string_array(_hf_scalar(data, feature, datasets), "sample_id")))
        elif col == subject:
            fields.append((SUBJECT, _as_string_array(_hf_scalar(data, feature, datasets), "subject")))
        elif col in pay_map:
            name = pay_map[col]
            if isinstance(feature, datasets.Image):
                imgs = _decode_files(data, col, _decode_image)
                shapes = {x.shape for x in imgs}
                if len(shapes) > 1:
                    raise TableError(
                        f"from_hf: image column {col!r} has images of different sizes "
                        f"{sorted(shapes)[:5]}; resize them to one size first"
                    )
                fields.append((name, _tensor_array(np.stack(imgs) if imgs else np.zeros((0, 1, 1, 1), np.uint8), name)))
            elif isinstance(feature, datasets.Audio):
                decoded = _decode_files(data, col, _decode_audio)
                rates = {r for _, r in decoded}
                if len(rates) > 1:
                    fields.append((SAMPLE_RATE, pa.array([r for _, r in decoded], type=pa.int64())))
                elif rates and "sample_rate" not in meta:
                    meta["sample_rate"] = rates.pop()
                fields.append((name, _ragged_array([x for x, _ in decoded], name)))
            else:
                if not is_array(col):
                    raise TableError(
                        f"from_hf: column {col!r} ({feature}) is not an array of numbers, an Image or "
                        f"an Audio column; it cannot be a payload"
                    )
                fields.append((name, _hf_array_payload(data, col, name)))
        elif attr_map is None or col in attr_map:
            t = data.type
            if pa.types.is_nested(t) or isinstance(t, pa.ExtensionType):
                if attr_map is not None:
                    raise TableError(f"from_hf: column {col!r} ({feature}) is not a scalar; it cannot be an attribute")
                continue  # by default, columns that are neither payloads nor scalars are left out
            target = (attr_map or {}).get(col, col)
            if target == SAMPLE_RATE and (pa.types.is_integer(t) or pa.types.is_floating(t)):
                fields.append((SAMPLE_RATE, data))
            else:
                fields.append(
                    (
                        target if target.startswith(ATTR_PREFIX) else ATTR_PREFIX + target,
                        _hf_scalar(data, feature, datasets),
                    )
                )
    return _sample_table(cls, fields, meta, "from_hf: columns {} occur twice after renaming; rename with 'column:name'")


# --------------------------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------------------------
_DATASET_CLASS: list[type] = []


def _dataset_class() -> type:
    """:class:`SampleDataset`, defined on first use (it subclasses torch's Dataset, so torch is imported then)."""
    if _DATASET_CLASS:
        return _DATASET_CLASS[0]
    from .torchutil import import_torch

    torch = import_torch("SampleTable.to_torch", TORCH_INSTALL)

    class SampleDataset(torch.utils.data.Dataset):  # type: ignore[misc,name-defined]  # torch: imported at run time, untyped here
        """A map-style torch Dataset over a sample table: item ``i`` is ``(x, label)`` (or ``x`` without a label).

        ``x`` is the payload's tensor (a tuple of tensors for several payloads); tensors of fixed-shape payloads
        and of variable-length ones (e.g. ``audio``: 1-D, different lengths, so batch them with a ``collate_fn``
        or ``batch_size=1``) are views of the table's memory unless ``copy=True``. Attributes: ``payloads``,
        ``label``, ``classes`` (the label's class names, index = label value; ``None`` for a numeric label).
        """

        def __init__(
            self,
            parts: list[tuple[Any, Any]],
            payloads: list[str],
            label: str | None,
            labels: Any,
            classes: list[Any] | None,
            transform: Callable[..., Any] | None,
            copy: bool,
        ):
            self.payloads, self.label, self.classes = payloads, label, classes
            self.transform, self._copy = transform, copy
            self._parts, self._labels = parts, labels

        def __len__(self) -> int:
            return self._n

        @property
        def _n(self) -> int:
            flat, offsets = self._parts[0]
            return len(flat) if offsets is None else len(offsets) - 1

        def _item(self, k: int, i: int) -> Any:
            flat, offsets = self._parts[k]
            x = flat[i] if offsets is None else flat[int(offsets[i]) : int(offsets[i + 1])]
            return x.clone() if self._copy else x

        def __getitem__(self, i: int) -> Any:
            if not -self._n <= i < self._n:
                raise IndexError(f"sample index {i} out of range for {self._n} samples")
            i = i % self._n if self._n else i
            xs = tuple(self._item(k, i) for k in range(len(self._parts)))
            x = xs[0] if len(xs) == 1 else xs
            if self.transform is not None:
                x = self.transform(x)
            return x if self._labels is None else (x, self._labels[i])

        def __repr__(self) -> str:
            return (
                f"SampleDataset({self._n} samples, payloads {self.payloads}, label {self.label!r}"
                f"{f', {len(self.classes)} classes' if self.classes is not None else ''})"
            )

    SampleDataset.__module__ = __name__
    SampleDataset.__qualname__ = "SampleDataset"
    _DATASET_CLASS.append(SampleDataset)
    return SampleDataset


def __getattr__(name: str) -> Any:
    # bioanon.interop.SampleDataset, resolvable (e.g. by pickle in DataLoader workers) once torch is installed
    if name == "SampleDataset":
        return _dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _label_values(table: SampleTable, label: str) -> tuple[np.ndarray, list[Any] | None]:
    """(per-row label values, class names or None): strings/booleans/dictionaries become sorted class indices."""
    if label == SUBJECT:
        col = table.arrow.column(SUBJECT)
    elif label == SAMPLE_ID:
        raise TableError("to_torch: label='sample_id' is unique per sample; use 'subject' or an attribute")
    else:
        name = label if label.startswith(ATTR_PREFIX) else ATTR_PREFIX + label
        if name not in table.arrow.schema.names:
            raise TableError(
                f"to_torch: no label column {label!r}; use 'subject', None or one of the attributes "
                f"{table.attribute_names}"
            )
        col = table.arrow.column(name)
    if col.null_count:
        raise TableError(f"to_torch: label {label!r} has {col.null_count} missing values; filter those samples out")
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        values = col.to_numpy()
        return (values.astype(np.float32) if values.dtype == np.float16 else values), None
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
    uniq = pc.unique(col)
    uniq = pc.take(uniq, pc.sort_indices(uniq))
    codes = pc.index_in(col, value_set=uniq)
    codes = (
        np.concatenate([c.to_numpy(zero_copy_only=False) for c in codes.chunks])
        if codes.num_chunks
        else np.empty(0, np.int64)
    )
    return codes.astype(np.int64), uniq.to_pylist()


def to_torch(
    table: SampleTable,
    payload: str | Sequence[str] | None = None,
    *,
    label: str | None = SUBJECT,
    transform: Callable[..., Any] | None = None,
    copy: bool = False,
) -> Any:
    """A map-style :class:`torch.utils.data.Dataset` (see :meth:`SampleTable.to_torch`)."""
    import warnings

    from .torchutil import import_torch

    torch = import_torch("SampleTable.to_torch", TORCH_INSTALL)
    cls = _dataset_class()
    if payload is None:
        names = table.payload_names
        if len(names) != 1:
            raise TableError(f"to_torch: the table has the payloads {names}; choose with payload=")
    else:
        names = [payload] if isinstance(payload, str) else list(payload)
        if not names:
            raise TableError("to_torch: payload= names no payload")
    parts: list[tuple[Any, Any]] = []
    with warnings.catch_warnings():  # Arrow memory is read-only; the tensors share it (documented)
        warnings.filterwarnings("ignore", message=".*not writable.*")
        for name in names:
            if _is_tensor_type(table._require_payload(name).type):  # TableError for an unknown name
                parts.append((torch.from_numpy(table.payload(name)), None))  # zero-copy numpy, wrapped once
                continue
            col = table.arrow.column(name)
            if col.null_count:
                raise TableError(f"to_torch: payload {name!r} has {col.null_count} null entries")
            chunk = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            offsets = chunk.offsets.to_numpy()
            flat = chunk.values.to_numpy(zero_copy_only=True)
            parts.append((torch.from_numpy(flat), offsets))
        labels, classes = (None, None) if label is None else _label_values(table, label)
        label_t = None if labels is None else torch.from_numpy(np.ascontiguousarray(labels))
    return cls(parts, names, label, label_t, classes, transform, copy)
