"""The Arrow-backed sample table.

A :class:`SampleTable` wraps one :class:`pyarrow.Table` with one row per sample:

* ``sample_id`` (string, unique, non-null) and ``subject`` (string, non-null);
* attribute columns ``attr.<name>`` (any scalar Arrow type, nulls allowed);
* payload columns: fixed-shape payloads as ``pa.fixed_shape_tensor(value_type, shape)`` extension arrays
  (``image`` uint8 H×W×C, ``pose`` float32 frames×joints×3, ``imu`` float32 time×channels, ``features``
  float32 D) and variable-length payloads as ``list<float*>`` (``audio``, list<float32>, with a
  ``sample_rate`` in the metadata or a ``sample_rate`` column). Any other column whose type is a
  fixed_shape_tensor or a list of floats is a payload too, so plugins can add new payload names;
* an optional numeric ``sample_rate`` column.

Trait metadata (trait name, joint and channel names, rates, ``lineage``) is a JSON dict in the schema
metadata under the key ``b"bioanon"``.

Tables are immutable: every ``with_*``/selection method returns a new table sharing the Arrow buffers.

The class keeps the public methods; their bodies live by concern: files (Arrow IPC, Parquet) in
:mod:`bioanon.table_io`, selections, concatenation, splits and batches in :mod:`bioanon.table_transforms`, and the
column layout (names, payload specs, Arrow array builders) in :mod:`bioanon.table_schema`, which the other modules
share without importing this one.

Interop (:mod:`bioanon.interop`, imported on use): :meth:`SampleTable.to_pandas`/:meth:`~SampleTable.from_pandas`,
:meth:`~SampleTable.to_hf`/:meth:`~SampleTable.from_hf` (Hugging Face ``datasets``) and
:meth:`~SampleTable.to_torch` (a torch ``Dataset``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bioanon.errors import TableError

from . import table_io as _io
from . import table_transforms as _transforms
from .arrow_numpy import from_values, scalar, to_numpy
from .table_schema import (
    _BLOCK_ELEMS,
    _RESERVED,
    _SHOW,
    ATTR_PREFIX,
    METADATA_KEY,
    PAYLOAD_SPECS,
    SAMPLE_ID,
    SAMPLE_RATE,
    SUBJECT,
    _as_string_array,
    _attr_col,
    _default_ids,
    _dump_meta,
    _fmt_list,
    _is_list_float_type,
    _is_payload_field,
    _is_string_type,
    _is_tensor_type,
    _np_dtype,
    _payload_to_arrow,
    _shape_matches,
    _type_desc,
    not_utf8_problem,
)
from .table_schema import LOAD_WARNINGS as LOAD_WARNINGS
from .table_schema import _tensor_array as _tensor_array  # used by the tests
from .table_transforms import _part_sizes as _part_sizes  # used by bioanon.evaluation.run

__all__ = ["SampleTable", "PAYLOAD_SPECS", "METADATA_KEY", "SAMPLE_ID", "SUBJECT", "ATTR_PREFIX", "SAMPLE_RATE"]


# --------------------------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------------------------
class SampleTable:
    """An immutable, Arrow-backed table of samples (one row per sample).

    Parameters
    ----------
    table : pyarrow.Table
        The table to wrap (not copied).
    validate : bool, default True
        Run :meth:`validate` on it.

    Raises
    ------
    TableError
        If ``validate`` and the table is malformed.
    """

    __slots__ = ("_table",)

    def __init__(self, table: pa.Table, *, validate: bool = True):
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise TableError(f"SampleTable wraps a pyarrow.Table, got {type(table).__name__}")
        self._table = table
        if validate:
            self.validate()

    # ---------------------------------------------------------------------------------------------- construction
    @classmethod
    def from_arrays(
        cls,
        *,
        subject: Any,
        payloads: dict[str, Any],
        sample_id: Any = None,
        attributes: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SampleTable:
        """Build a validated table from numpy data.

        Parameters
        ----------
        subject : array-like of str (or int, formatted as str), or a single str for all samples
            Subject of each sample.
        payloads : dict
            ``name -> ndarray (N, *shape)`` (stored as fixed_shape_tensor, dtype kept, zero-copy when
            C-contiguous), or ``name -> list of 1-D arrays`` (variable length, stored as list<float32>).
            A list of equal-shape arrays with more than one dimension is stacked into a tensor.
        sample_id : array-like of str, optional
            Defaults to ``f"{i:0{width}d}"`` with ``width = len(str(N - 1))``.
        attributes : dict, optional
            ``name -> 1-D array-like``, stored as ``attr.<name>``.
        metadata : dict, optional
            JSON-serializable metadata (stored under ``b"bioanon"``).

        Returns
        -------
        SampleTable
        """
        payload_arrays = {name: _payload_to_arrow(name, value) for name, value in payloads.items()}
        n: int | None = None
        if not isinstance(subject, str):
            subj = _as_string_array(subject, "subject")
            n = len(subj)
        for name, arr in payload_arrays.items():
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise TableError(f"payload {name!r} has {len(arr)} samples, expected {n} (length of subject)")
        if isinstance(subject, str):
            if n is None:
                raise TableError("subject is a single string and there are no payloads to tell the row count")
            subj = pa.array([subject] * n, type=pa.string())
        assert n is not None
        if sample_id is None:
            sid = _default_ids(n)
        else:
            sid = _as_string_array(sample_id, "sample_id")
            if len(sid) != n:
                raise TableError(f"sample_id has {len(sid)} entries, expected {n}")
        columns: dict[str, Any] = {SAMPLE_ID: sid, SUBJECT: subj}
        for name, values in (attributes or {}).items():
            col = _attr_col(name)
            columns[col] = cls._attribute_array(col, values, n)
        for name, arr in payload_arrays.items():
            if name in columns or name in _RESERVED or name.startswith(ATTR_PREFIX):
                raise TableError(f"payload name {name!r} is reserved or used twice")
            columns[name] = arr
        table = pa.table(columns)
        table = table.replace_schema_metadata({METADATA_KEY: _dump_meta(dict(metadata or {}))})
        return cls(table, validate=True)

    @classmethod
    def from_arrow(cls, table: pa.Table | pa.RecordBatch) -> SampleTable:
        """Wrap and validate an Arrow table or record batch.

        Parameters
        ----------
        table : pyarrow.Table or pyarrow.RecordBatch

        Returns
        -------
        SampleTable
        """
        return cls(table, validate=True)

    @staticmethod
    def _attribute_array(col: str, values: Any, n: int) -> pa.Array:
        try:
            if isinstance(values, pa.ChunkedArray):
                arr = values.combine_chunks()
            elif isinstance(values, pa.Array):
                arr = values
            else:
                np_values = np.asarray(values) if not isinstance(values, (list, tuple)) else None
                if np_values is not None and np_values.ndim != 1:
                    raise TableError(f"attribute {col!r} must be one-dimensional, got shape {np_values.shape}")
                arr = from_values(values)
        except (pa.ArrowException, UnicodeEncodeError) as e:
            arrow = isinstance(values, (pa.Array, pa.ChunkedArray))
            bad = None if arrow else not_utf8_problem(values, f"attribute {col!r}: value")
            raise TableError(bad or f"attribute {col!r}: cannot convert values to Arrow: {e}") from None
        if pa.types.is_nested(arr.type) or isinstance(arr.type, pa.ExtensionType):
            raise TableError(f"attribute {col!r} must be a scalar type, got {arr.type}")
        if len(arr) != n:
            raise TableError(f"attribute {col!r} has {len(arr)} values, expected {n}")
        return arr

    # ---------------------------------------------------------------------------------------------- basic access
    @property
    def arrow(self) -> pa.Table:
        """pyarrow.Table: the wrapped table."""
        return self._table

    @property
    def schema(self) -> pa.Schema:
        """pyarrow.Schema: the table's schema (including the metadata)."""
        return self._table.schema

    @property
    def num_rows(self) -> int:
        """int: number of samples."""
        return cast(int, self._table.num_rows)

    def __len__(self) -> int:
        """Number of samples."""
        return cast(int, self._table.num_rows)

    def __repr__(self) -> str:
        """Short summary: rows, subjects, payloads with shapes, attributes."""
        pays = []
        for name in self.payload_names:
            t = self._table.schema.field(name).type
            if _is_tensor_type(t):
                pays.append(f"{name} {_np_dtype(t.value_type)}{list(t.shape)}")
            else:
                pays.append(f"{name} list<{_np_dtype(t.value_type)}>")
        try:
            subjects = str(self.num_subjects)
        except Exception:  # pragma: no cover - repr must not fail on a malformed table
            subjects = "?"
        return (
            f"SampleTable({self.num_rows} rows, {subjects} subjects; payloads: {', '.join(pays) or '-'}; "
            f"attributes: {', '.join(self.attribute_names) or '-'})"
        )

    def _repr_html_(self) -> str:
        """Notebook display: counts, payloads, attributes, lineage and the first rows."""
        from .notebook import table_html

        return table_html(self)

    def _column(self, name: str) -> pa.ChunkedArray:
        return self._table.column(name)

    @property
    def sample_ids(self) -> np.ndarray:
        """numpy.ndarray of str (object dtype): the sample ids in row order."""
        return to_numpy(self._column(SAMPLE_ID))

    @property
    def subjects(self) -> np.ndarray:
        """numpy.ndarray of str (object dtype): the subject of each row."""
        return to_numpy(self._column(SUBJECT))

    @property
    def subject_names(self) -> list[str]:
        """list of str: the distinct subjects, sorted."""
        uniq = pc.unique(self._column(SUBJECT))
        return cast(list[str], pc.take(uniq, pc.sort_indices(uniq)).to_pylist())

    @property
    def num_subjects(self) -> int:
        """int: number of distinct subjects."""
        return len(pc.unique(self._column(SUBJECT)))

    @property
    def payload_names(self) -> list[str]:
        """list of str: payload column names, in column order."""
        return [f.name for f in self._table.schema if _is_payload_field(f)]

    @property
    def attribute_names(self) -> list[str]:
        """list of str: attribute names without the ``attr.`` prefix, in column order."""
        return [n[len(ATTR_PREFIX) :] for n in self._table.schema.names if n.startswith(ATTR_PREFIX)]

    def _require_payload(self, name: str) -> pa.Field:
        idx = self._table.schema.get_field_index(name)
        if idx < 0 or not _is_payload_field(self._table.schema.field(idx)):
            raise TableError(f"no payload column {name!r}; available: {self.payload_names}")
        return self._table.schema.field(idx)

    def payload(self, name: str) -> np.ndarray | list[np.ndarray]:
        """A payload column as numpy.

        Zero-copy when the column has a single chunk (e.g. a fresh or loaded table, or a slice of one);
        a multi-chunk column (e.g. after :meth:`concat`) is combined into one copy first. Arrays backed by
        Arrow memory are read-only.

        Parameters
        ----------
        name : str
            Payload column name.

        Returns
        -------
        numpy.ndarray or list of numpy.ndarray
            ``(N, *shape)`` for a fixed-shape payload; for a list<float> payload a list of N 1-D arrays,
            each a zero-copy view of the flat values.

        Raises
        ------
        TableError
            If there is no such payload, or it has null entries.
        """
        field = self._require_payload(name)
        col = self._column(name)
        if col.null_count:
            bad = self._rows_to_ids(np.flatnonzero(to_numpy(col.is_null())))
            raise TableError(f"payload {name!r} has {col.null_count} null entries, e.g. samples {bad}")
        chunk = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if isinstance(chunk, pa.ChunkedArray):  # pragma: no cover - pyarrow < 15 returns ChunkedArray
            chunk = chunk.combine_chunks()
        if _is_tensor_type(field.type):
            return self._tensor_numpy(name, chunk)
        return self._list_numpy(name, chunk)

    def map_payload(self, name: str, function: Callable[[np.ndarray], Any]) -> np.ndarray:
        """``function(self.payload(name))`` for a ``function`` of a fixed-shape payload that maps each row on
        its own (row ``i`` of the result depends on row ``i`` of its input only: per-sample features), computed
        chunk by chunk: a payload in several chunks (e.g. rows taken from stored shards) is never copied into
        one array, and the results go straight into one output array.

        Parameters
        ----------
        name : str
            Payload column name (fixed-shape; a list payload is passed whole).
        function : callable
            ``(n, *shape) array -> (n, ...) array``.

        Returns
        -------
        numpy.ndarray
        """
        col = self._column(name)
        if col.num_chunks <= 1 or not _is_tensor_type(self._require_payload(name).type) or col.null_count:
            return np.asarray(function(cast(np.ndarray, self.payload(name))))
        out: np.ndarray | None = None
        start = 0
        for chunk in col.chunks:
            if not len(chunk):
                continue
            part = np.asarray(function(self._tensor_numpy(name, chunk)))
            if len(part) != len(chunk):
                raise TableError(f"map_payload({name!r}): {len(part)} result rows for {len(chunk)} samples")
            if out is None:
                out = np.empty((len(col), *part.shape[1:]), dtype=part.dtype)
            out[start : start + len(part)] = part
            start += len(part)
        return out if out is not None else np.asarray(function(cast(np.ndarray, self.payload(name))))

    @staticmethod
    def _flat_values(name: str, chunk: pa.Array) -> tuple[np.ndarray, Any]:
        """Numpy view of a tensor chunk's values as (len, size) plus the type."""
        t = chunk.type
        size = int(np.prod(t.shape))
        storage = chunk.storage
        vals = storage.values.slice(storage.offset * size, len(storage) * size)
        if vals.null_count:
            raise TableError(f"payload {name!r} has null values inside its tensors")
        flat = to_numpy(vals)  # a view of numbers; bit-packed booleans unpacked
        return flat.reshape(len(storage), size), t

    def _tensor_numpy(self, name: str, chunk: pa.Array) -> np.ndarray:
        t = chunk.type
        perm = t.permutation
        if perm is not None and list(perm) != list(range(len(perm))):
            return cast(np.ndarray, chunk.to_numpy_ndarray())
        flat, _ = self._flat_values(name, chunk)
        return flat.reshape((len(chunk), *t.shape))

    @staticmethod
    def _list_numpy(name: str, chunk: pa.Array) -> list[np.ndarray]:
        offsets = to_numpy(chunk.offsets)
        vals = chunk.values
        if vals.null_count:
            raise TableError(f"payload {name!r} has null values inside its lists")
        flat = to_numpy(vals)
        start = int(offsets[0]) if len(offsets) else 0
        return (
            np.split(flat[start : int(offsets[-1])] if len(offsets) else flat[:0], offsets[1:-1] - start)
            if len(chunk)
            else []
        )

    def payload_shape(self, name: str) -> tuple[int | None, ...]:
        """Per-sample shape of a payload: ``(H, W, C)`` etc.; ``(None,)`` for a variable-length payload.

        Parameters
        ----------
        name : str

        Returns
        -------
        tuple
        """
        t = self._require_payload(name).type
        return tuple(int(s) for s in t.shape) if _is_tensor_type(t) else (None,)

    def attribute(self, name: str) -> np.ndarray:
        """An attribute column as numpy (copy if needed; nulls become NaN/None as pyarrow converts them).

        Parameters
        ----------
        name : str
            Attribute name without the ``attr.`` prefix (a name already starting with ``attr.`` is used as is).

        Returns
        -------
        numpy.ndarray
        """
        col = _attr_col(name)
        if col not in self._table.schema.names:
            raise TableError(f"no attribute column {col!r}; available: {self.attribute_names}")
        return to_numpy(self._column(col))

    # -------------------------------------------------------------------------------------------------- metadata
    @property
    def metadata(self) -> dict[str, Any]:
        """dict: a copy of the JSON metadata (``{}`` when absent)."""
        raw = (self._table.schema.metadata or {}).get(METADATA_KEY)
        if raw is None:
            return {}
        try:
            meta = json.loads(raw)
        except ValueError as e:
            raise TableError(f"schema metadata {METADATA_KEY!r} is not valid JSON: {e}") from None
        if not isinstance(meta, dict):
            raise TableError(f"schema metadata {METADATA_KEY!r} must be a JSON object, got {type(meta).__name__}")
        return meta

    def _with_meta(self, meta: dict[str, Any]) -> SampleTable:
        schema_meta = dict(self._table.schema.metadata or {})
        schema_meta[METADATA_KEY] = _dump_meta(meta)
        return SampleTable(self._table.replace_schema_metadata(schema_meta), validate=False)

    def with_metadata(self, **updates: Any) -> SampleTable:
        """A table whose metadata is this one's updated with ``updates`` (data shared).

        Returns
        -------
        SampleTable
        """
        meta = self.metadata
        meta.update(updates)
        if "lineage" in updates:
            _check_lineage(meta["lineage"])
        return self._with_meta(meta)

    @property
    def lineage(self) -> list[dict[str, Any]]:
        """list of dict: the processing steps applied so far (``[]`` when none)."""
        return list(self.metadata.get("lineage", []))

    def with_lineage_step(self, step: dict[str, Any]) -> SampleTable:
        """A table with ``step`` appended to the lineage.

        Parameters
        ----------
        step : dict
            Must hold ``"step"`` (the method id, str) and ``"fingerprint"`` (str); other JSON values allowed.

        Returns
        -------
        SampleTable
        """
        _check_lineage([step])
        meta = self.metadata
        meta["lineage"] = list(meta.get("lineage", [])) + [dict(step)]
        return self._with_meta(meta)

    # ---------------------------------------------------------------------------------------------- new columns
    def with_payload(self, name: str, array: Any, *, drop: str | None = None) -> SampleTable:
        """Replace or add a payload column (row order and ids kept); the new column is validated.

        Parameters
        ----------
        name : str
            Payload name; an existing column keeps its position, a new one is appended.
        array : ndarray (N, *shape), list of 1-D arrays, or Arrow array
            As in :meth:`from_arrays`; N must equal :attr:`num_rows`.
        drop : str, optional
            A payload column to remove at the same time (e.g. ``"audio"`` when adding ``"features"``).

        Returns
        -------
        SampleTable
        """
        if name in _RESERVED or name.startswith(ATTR_PREFIX):
            raise TableError(f"{name!r} cannot be a payload name")
        arr = _payload_to_arrow(name, array)
        if len(arr) != self.num_rows:
            raise TableError(f"payload {name!r} has {len(arr)} samples, table has {self.num_rows}")
        table = self._table
        if drop is not None and drop != name:
            self._require_payload(drop)
            table = table.drop_columns([drop])
        idx = table.schema.get_field_index(name)
        field = pa.field(name, arr.type)
        table = table.set_column(idx, field, arr) if idx >= 0 else table.append_column(field, arr)
        out = SampleTable(table, validate=False)
        out._validate_payload_column(name)
        return out

    def with_attribute(self, name: str, values: Any) -> SampleTable:
        """Replace or add the attribute column ``attr.<name>``.

        Parameters
        ----------
        name : str
            Attribute name without the prefix.
        values : array-like
            N scalar values (nulls allowed).

        Returns
        -------
        SampleTable
        """
        col = _attr_col(name)
        arr = self._attribute_array(col, values, self.num_rows)
        idx = self._table.schema.get_field_index(col)
        field = pa.field(col, arr.type)
        table = self._table.set_column(idx, field, arr) if idx >= 0 else self._table.append_column(field, arr)
        return SampleTable(table, validate=False)

    # ------------------------------------------------------------------------------------------------ validation
    def _rows_to_ids(self, rows: np.ndarray) -> list[Any]:
        rows = np.asarray(rows)[:_SHOW]
        return cast(list[Any], pc.take(self._column(SAMPLE_ID), pa.array(rows, type=pa.int64())).to_pylist())

    def _ids_desc(self, rows: np.ndarray) -> str:
        return _fmt_list(self._rows_to_ids(rows), len(rows))

    def _check_structure(self) -> None:
        """Cheap O(columns) checks: required columns, column types, metadata."""
        schema = self._table.schema
        names = schema.names
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TableError(f"duplicate column names {dup}")
        for req in (SAMPLE_ID, SUBJECT):
            if req not in names:
                raise TableError(f"missing required column {req!r}; columns: {names}")
            if not _is_string_type(schema.field(req).type):
                raise TableError(f"column {req!r} must be string, got {schema.field(req).type}")
        for field in schema:
            name, t = field.name, field.type
            if name in (SAMPLE_ID, SUBJECT):
                continue
            if name.startswith(ATTR_PREFIX):
                if pa.types.is_nested(t) or isinstance(t, pa.ExtensionType):
                    raise TableError(f"attribute column {name!r} must be a scalar type, got {t}")
            elif name == SAMPLE_RATE:
                if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                    raise TableError(f"column {SAMPLE_RATE!r} must be numeric, got {t}")
            elif name in PAYLOAD_SPECS or _is_payload_field(field):
                self._check_payload_type(name, t)
            else:
                raise TableError(
                    f"column {name!r} of type {t} is neither {SAMPLE_ID!r}, {SUBJECT!r}, {SAMPLE_RATE!r}, an "
                    f"attribute ('{ATTR_PREFIX}{name}') nor a payload (fixed_shape_tensor or list<float>)"
                )
        meta = self.metadata
        if "lineage" in meta:
            _check_lineage(meta["lineage"])
        if any(_is_list_float_type(f.type) and f.name == "audio" for f in schema):
            if "sample_rate" not in meta and SAMPLE_RATE not in names:
                raise TableError(
                    "payload 'audio' needs a sample rate: set metadata 'sample_rate' or add a 'sample_rate' column"
                )

    @staticmethod
    def _check_payload_type(name: str, t: pa.DataType) -> None:
        if not (_is_tensor_type(t) or _is_list_float_type(t)):
            want = ""
            if name in PAYLOAD_SPECS:
                kind, dtype, _ = PAYLOAD_SPECS[name]
                want = f"fixed_shape_tensor<{dtype}>" if kind == "tensor" else f"list<{dtype}>"
            raise TableError(
                f"payload column {name!r} has wrong Arrow type {t}; expected "
                f"{want or 'fixed_shape_tensor or list<float>'}"
            )
        if name in PAYLOAD_SPECS:
            kind, dtype, shape = PAYLOAD_SPECS[name]
            actual_kind = "tensor" if _is_tensor_type(t) else "list"
            actual_dtype = _np_dtype(t.value_type)
            actual_shape = tuple(t.shape) if actual_kind == "tensor" else (None,)
            if actual_kind != kind:
                want = f"fixed_shape_tensor<{dtype}>" if kind == "tensor" else f"list<{dtype}>"
                raise TableError(f"payload column {name!r} has wrong Arrow type {_type_desc(t)}; expected {want}")
            if actual_dtype != dtype:
                raise TableError(
                    f"payload column {name!r} has dtype {actual_dtype}, expected {dtype}"
                    f"{' (use .astype(np.' + str(dtype) + '))' if kind == 'tensor' else ''}"
                )
            if not _shape_matches(actual_shape, shape):
                raise TableError(
                    f"payload column {name!r} has per-sample shape {actual_shape}, expected {_shape_str(shape)}"
                )

    def _validate_payload_column(self, name: str) -> None:
        """Type/spec, nulls and finiteness of one payload column."""
        t = self._table.schema.field(name).type
        self._check_payload_type(name, t)
        col = self._column(name)
        if col.null_count:
            rows = np.flatnonzero(to_numpy(col.is_null()))
            raise TableError(f"payload column {name!r} has null entries at samples {self._ids_desc(rows)}")
        if not pa.types.is_floating(t.value_type):
            return
        bad_rows: list[np.ndarray] = []
        start = 0
        for chunk in col.chunks:
            if _is_tensor_type(t):
                flat, _ = self._flat_values(name, chunk)
                step = max(1, _BLOCK_ELEMS // max(flat.shape[1], 1))
                for b in range(0, flat.shape[0], step):
                    ok = np.isfinite(flat[b : b + step]).all(axis=1)
                    if not ok.all():
                        bad_rows.append(start + b + np.flatnonzero(~ok))
            else:
                vals = chunk.values
                if vals.null_count:
                    raise TableError(f"payload column {name!r} has null values inside its lists")
                offsets = to_numpy(chunk.offsets)
                if len(chunk):
                    lo, hi = int(offsets[0]), int(offsets[-1])
                    flat = to_numpy(vals)
                    for b in range(lo, hi, _BLOCK_ELEMS):
                        part = flat[b : min(b + _BLOCK_ELEMS, hi)]
                        bad = np.flatnonzero(~np.isfinite(part))
                        if bad.size:
                            rows = np.searchsorted(offsets, b + bad, side="right") - 1
                            bad_rows.append(start + np.unique(rows))
            start += len(chunk)
        if bad_rows:
            rows = np.unique(np.concatenate(bad_rows))
            raise TableError(
                f"payload column {name!r} has NaN/inf values in {rows.size} samples: {self._ids_desc(rows)}"
            )

    def validate(self) -> None:
        """Check the table; raise :class:`TableError` naming the column and the first offending samples.

        Checks: ``sample_id``/``subject`` present and string; no null or duplicate sample ids; no null subjects;
        every other column is an ``attr.*`` scalar column, a numeric ``sample_rate`` or a payload
        (fixed_shape_tensor / list<float>); the well-known payloads match :data:`PAYLOAD_SPECS` (kind, dtype,
        shape); payloads have no nulls and float payloads no NaN/inf; ``audio`` has a sample rate; the metadata
        is a JSON object whose ``lineage`` entries have ``step`` and ``fingerprint``. Vectorized.
        """
        self._check_structure()
        sid = self._column(SAMPLE_ID)
        if sid.null_count:
            rows = np.flatnonzero(to_numpy(sid.is_null()))
            raise TableError(
                f"column {SAMPLE_ID!r} has {sid.null_count} null values at rows {_fmt_list(rows.tolist())}"
            )
        counts = pc.value_counts(sid)
        dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), scalar(1)))
        if len(dup):
            raise TableError(
                f"column {SAMPLE_ID!r} has {len(dup)} duplicate ids: "
                f"{_fmt_list(dup.slice(0, _SHOW).to_pylist(), len(dup))}"
            )
        subj = self._column(SUBJECT)
        if subj.null_count:
            rows = np.flatnonzero(to_numpy(subj.is_null()))
            raise TableError(f"column {SUBJECT!r} has {subj.null_count} null values at samples {self._ids_desc(rows)}")
        for name in self.payload_names:
            self._validate_payload_column(name)

    def validate_payload(self, name: str, *, shape: Sequence[int | None] | None = None, dtype: Any = None) -> None:
        """Assert that payload ``name`` exists with the given per-sample shape and dtype.

        Parameters
        ----------
        name : str
        shape : sequence of int or None, optional
            Expected per-sample shape; ``None`` entries are wildcards. For a variable-length payload the shape
            is ``(length,)``; a fixed length is checked against every sample.
        dtype : numpy dtype-like, optional
            Expected value dtype.

        Raises
        ------
        TableError
        """
        t = self._require_payload(name).type
        if dtype is not None and _np_dtype(t.value_type) != np.dtype(dtype):
            raise TableError(f"payload {name!r} has dtype {_np_dtype(t.value_type)}, expected {np.dtype(dtype)}")
        if shape is None:
            return
        shape = tuple(shape)
        if _is_tensor_type(t):
            actual = tuple(int(s) for s in t.shape)
            if not _shape_matches(actual, shape):
                raise TableError(f"payload {name!r} has per-sample shape {actual}, expected {_shape_str(shape)}")
            return
        if len(shape) != 1:
            raise TableError(
                f"payload {name!r} is variable-length (1-D per sample), expected shape {_shape_str(shape)}"
            )
        if shape[0] is not None:
            lengths = pc.list_value_length(self._column(name))
            lengths = (
                to_numpy(lengths)
                if isinstance(lengths, pa.Array)
                else np.concatenate([to_numpy(c) for c in lengths.chunks] or [np.empty(0)])
            )
            rows = np.flatnonzero(lengths != shape[0])
            if rows.size:
                raise TableError(
                    f"payload {name!r}: {rows.size} samples do not have length {shape[0]}, e.g. "
                    f"{self._ids_desc(rows)} (lengths {lengths[rows[:_SHOW]].tolist()})"
                )

    # ------------------------------------------------------------------------------------------------ selection
    def take(self, indices: Any) -> SampleTable:
        """Rows at ``indices`` (in that order), metadata kept.

        Parameters
        ----------
        indices : array-like of int or pyarrow integer array
            Non-negative row positions.

        Returns
        -------
        SampleTable
        """
        return _transforms.take(self, indices)

    def filter(self, mask: Any) -> SampleTable:
        """Rows where ``mask`` is true (order kept; null mask entries drop the row), metadata kept.

        Parameters
        ----------
        mask : numpy bool array or pyarrow boolean array of length N

        Returns
        -------
        SampleTable
        """
        return _transforms.filter(self, mask)

    def select_subjects(self, subjects: Iterable[str]) -> SampleTable:
        """Rows of the given subjects (row order kept).

        Parameters
        ----------
        subjects : iterable of str
            Each must occur in the table.

        Returns
        -------
        SampleTable
        """
        return _transforms.select_subjects(self, subjects)

    @staticmethod
    def concat(tables: Sequence[SampleTable]) -> SampleTable:
        """Concatenate tables (chunks are kept, no copy).

        Schemas must agree (same columns and types; column order follows the first table); sample ids must be
        unique across the tables; metadata other than ``lineage`` must be equal. The result has the first
        table's metadata; when the lineages differ, the result's lineage is the first table's plus a
        ``{"step": "concat", "fingerprint": ..., "inputs": [lineage of each table]}`` step.

        Parameters
        ----------
        tables : sequence of SampleTable

        Returns
        -------
        SampleTable
        """
        return _transforms.concat(tables)

    # ---------------------------------------------------------------------------------------------------- splits

    def split_subjects(
        self,
        rates: Sequence[float],
        seed: int,
        *,
        stratify: Sequence[str] = (),
        rounding: str = "largest_remainder",
    ) -> list[SampleTable]:
        """Split into subject-disjoint parts.

        The S distinct subjects are sorted (so the result does not depend on row order), permuted with
        ``numpy.random.default_rng(seed)``, and cut into consecutive groups whose sizes follow the
        largest-remainder (Hamilton) rule: with ``q_i = rates[i] * S``, part i first gets ``floor(q_i)``
        subjects; the ``S - sum(floor(q_i))`` remaining subjects go one each to the parts with the largest
        remainders ``q_i - floor(q_i)``, ties going to the lower part index. (In float64, ``q_i`` within 1e-9
        of an integer counts as that integer and remainders are compared rounded to 9 decimals.) With
        ``rounding = "seba"`` the sizes follow SEBA's ``interid1to3`` splitter instead: every part but the last
        gets ``int(S * rates[i])`` subjects (the float64 product truncated, no tolerance: 100 × 0.58 gives 57),
        the last part the rest. Rows keep their relative order in each part; metadata is kept.

        With ``stratify`` (attribute names), each subject gets its value of every named attribute (its most
        frequent value where its samples hold several; ties to the first in sorted order), and the subjects of each
        stratum (one combination of values) are divided by the rates, in the order of the same permutation, so
        that every part gets every stratum where the counts allow: each stratum gets the floors of its quotas and
        its left-over subjects are settled across strata to keep the unstratified part sizes where they can (see
        :func:`~bioanon.table_transforms.stratified_sizes`; the sizes depend on the strata, not on the seed). One
        stratum gives the unstratified split.

        Parameters
        ----------
        rates : sequence of float
            One or more positive shares summing to 1 (±1e-9).
        seed : int
            Seed of the permutation.
        stratify : sequence of str
            Attribute columns (without ``attr.``) to stratify by; empty (default): no stratification.
        rounding : {"largest_remainder", "seba"}, default "largest_remainder"
            How the part sizes are rounded (see above).

        Returns
        -------
        list of SampleTable
            One table per rate.

        Raises
        ------
        TableError
            For invalid rates or rounding, if a part would get no subject, for a ``stratify`` name that is no
            column, or for ``stratify`` with ``rounding = "seba"`` (SEBA does not stratify).
        """
        return _transforms.split_subjects(self, rates, seed, stratify=stratify, rounding=rounding)

    def split_within_subjects(self, rates: Sequence[float], seed: int, *, min_per_part: int = 1) -> list[SampleTable]:
        """Split every subject's samples into parts (each part holds all subjects when counts allow).

        Every sample gets a random key: the samples sorted by sample_id (so the result does not depend on row
        order) receive ``numpy.random.default_rng(seed).permutation(N)``. A subject's samples, ordered by key,
        are its shuffle: a subject with c samples gives its first ``n_0`` shuffled samples to part 0, the next
        ``n_1`` to part 1, ..., where the sizes follow the same largest-remainder rule as :meth:`split_subjects`
        applied to c. Rows keep their relative order in each part.

        Parameters
        ----------
        rates : sequence of float
            One or more positive shares summing to 1 (±1e-9).
        seed : int
        min_per_part : int, default 1
            Every subject must get at least this many samples in every part.

        Returns
        -------
        list of SampleTable

        Raises
        ------
        TableError
            For invalid rates, or naming the subjects (and their sample counts) that would get fewer than
            ``min_per_part`` samples in some part.
        """
        return _transforms.split_within_subjects(self, rates, seed, min_per_part=min_per_part)

    # -------------------------------------------------------------------------------------------------- batches
    def iter_batches(self, batch_size: int = 65536) -> Iterator[SampleTable]:
        """Consecutive zero-copy slices of at most ``batch_size`` rows.

        Parameters
        ----------
        batch_size : int, default 65536

        Yields
        ------
        SampleTable
        """
        return _transforms.iter_batches(self, batch_size)

    # ------------------------------------------------------------------------------------------------------- I/O
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write an Arrow IPC file atomically (temp file in the same directory, fsync, os.replace).

        Parameters
        ----------
        path : str or path-like
        """
        _io.save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, memory_map: bool = True, validate: bool = False) -> SampleTable:
        """Read a table written by :meth:`save`.

        Parameters
        ----------
        path : str or path-like
        memory_map : bool, default True
            Memory-map the file: payloads are then zero-copy views of the mapped file.
        validate : bool, default False
            Run the full :meth:`validate` (the cheap structural checks always run).

        Returns
        -------
        SampleTable

        Raises
        ------
        TableError
            Naming the path, if it is missing, not an Arrow IPC file, truncated, or not a sample table.
        """
        return _io.load(cls, path, memory_map=memory_map, validate=validate)

    @classmethod
    def stream(cls, path: str | os.PathLike[str], batch_size: int = 65536) -> Iterator[SampleTable]:
        """Iterate a saved table in batches with bounded resident memory, however large the file.

        The file is memory-mapped and every batch is a zero-copy view of it (batches follow the file's record
        batches, split to at most ``batch_size`` rows). Once the consumer moves on, the pages of the batches
        already yielded are released from this process (``madvise(MADV_DONTNEED)``); views kept by the
        consumer stay valid, their pages are read again from the page cache on access. So peak RSS is about one
        batch, not the file (a plain :meth:`load` + :meth:`iter_batches` keeps every touched page resident).

        Parameters
        ----------
        path : str or path-like
        batch_size : int, default 65536

        Yields
        ------
        SampleTable

        Raises
        ------
        TableError
            Naming the path, if it is missing, not an Arrow IPC file, truncated, or not a sample table.
        """
        return _io.stream(cls, path, batch_size)

    def to_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write a Parquet file atomically (extension types and metadata are kept via the Arrow schema).

        Parameters
        ----------
        path : str or path-like
        """
        _io.to_parquet(self, path)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str], *, validate: bool = True) -> SampleTable:
        """Read a Parquet file written by :meth:`to_parquet` (or any Parquet file with the sample-table layout).

        Parameters
        ----------
        path : str or path-like
        validate : bool, default True
            Run the full :meth:`validate` (the structural checks always run).

        Returns
        -------
        SampleTable
        """
        return _io.from_parquet(cls, path, validate=validate)

    # ----------------------------------------------------------------------------------------------- interop
    def to_pandas(self) -> Any:
        """The table as a :class:`pandas.DataFrame`, one row per sample.

        Columns keep the table's names and order (``sample_id``, ``subject``, ``attr.*``, payloads). A payload
        cell is a numpy array: for a fixed-shape payload (e.g. ``features``) a zero-copy, read-only view of the
        table's memory; for ``audio`` one 1-D view per sample. ``df.attrs["bioanon"]`` holds the metadata
        (trait, rates, lineage) and ``df.attrs["bioanon.schema"]`` the Arrow types, so :meth:`from_pandas`
        gives the same table back (nulls in float attributes come back as nulls, NaN included).

        Returns
        -------
        pandas.DataFrame
        """
        from .interop import to_pandas

        return to_pandas(self)

    @classmethod
    def from_pandas(
        cls, df: Any, *, subject: str | None = None, sample_id: str = SAMPLE_ID, metadata: dict[str, Any] | None = None
    ) -> SampleTable:
        """A validated table from a :class:`pandas.DataFrame` (copies the data).

        Columns: the subject (``subject=``; by default the column ``subject``, else the one named ``speaker``,
        ``speaker_id``, ``identity``, ``person``, ... as in :data:`bioanon.metadata.SUBJECT_COLUMNS`), ``sample_id``
        (optional, also as the index; default ids as in :meth:`from_arrays`), ``sample_rate`` (optional, numeric); a
        column whose cells are numpy arrays or lists is a payload (equal shapes are stacked into a fixed-shape
        payload; ``audio`` and other 1-D cells of varying length become variable-length payloads); every other
        column is an attribute (``attr.`` is prepended unless the name has it). A frame from :meth:`to_pandas` keeps
        its Arrow types and metadata (``df.attrs``).

        Parameters
        ----------
        df : pandas.DataFrame
        subject : str, optional
            The subject column (default: found by name, see above).
        sample_id : str, default "sample_id"
            The sample-id column.
        metadata : dict, optional
            The table's metadata; default ``df.attrs["bioanon"]`` (or none).

        Returns
        -------
        SampleTable
        """
        from .interop import from_pandas

        return from_pandas(cls, df, subject=subject, sample_id=sample_id, metadata=metadata)

    def to_hf(self) -> Any:
        """The table as a Hugging Face :class:`datasets.Dataset` (needs ``pip install 'bioanon[hf]'``).

        Feature types: ``sample_id``/``subject``/attributes/``sample_rate`` as ``Value``; a 1-D payload
        (``features``) as a fixed-length ``List``/``Sequence`` of its dtype; 2-D to 5-D payloads (``imu``,
        ``pose``, ``image`` H×W×C) as ``Array2D``..``Array5D`` of their dtype; ``audio`` (variable length) as a
        ``List`` of float32, with the sample rate in the metadata (or the ``sample_rate`` column). Arrays, not
        ``Image``/``Audio`` features: those re-encode every sample (PNG/WAV), arrays are exact and share the
        table's memory (``Array2D``..``Array5D`` need new offsets, the values are shared). The metadata
        (trait, rates, lineage) is kept as JSON in ``info.description``, which ``save_to_disk`` keeps, so
        :meth:`from_hf` gives the same table back. Save with ``.save_to_disk(folder)``; ``any.hf`` evaluates
        such a folder.

        Returns
        -------
        datasets.Dataset
        """
        from .interop import to_hf

        return to_hf(self)

    @classmethod
    def from_hf(
        cls,
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
        """A validated table from a Hugging Face data set (needs ``pip install 'bioanon[hf]'``).

        ``List``/``Sequence``/``Array2D``..``Array5D`` columns of numbers are read zero-copy (of a data set
        loaded with ``load_from_disk``: views of the memory-mapped files), as a fixed-shape payload when every
        sample has the same shape, else (1-D) as a variable-length one; ``Image`` columns are decoded to
        uint8 H×W×C (grey: H×W×1; all images of one size); ``Audio`` columns to mono float32 with their sample
        rate. ``ClassLabel`` columns give their names. A 2-D payload named ``image`` becomes H×W×1.

        Parameters
        ----------
        dataset : datasets.Dataset, datasets.DatasetDict or path
            A path is a folder written by ``save_to_disk``.
        split : str, optional
            The split of a DatasetDict (required when it has more than one).
        subject : str, optional
            The subject column; default ``subject``, else the one column named ``speaker``, ``speaker_id``,
            ``identity``, ``person``, ... (:data:`bioanon.metadata.SUBJECT_COLUMNS`).
        sample_id : str, default "sample_id"
            The sample-id column (default ids as in :meth:`from_arrays` when it is missing).
        payloads : sequence of str, optional
            Payload columns, ``"column"`` or ``"column:name"`` to rename (e.g. ``"img:image"``,
            ``"embedding:features"``); default: every array, numeric list, Image and Audio column.
        attributes : sequence of str, optional
            Attribute columns (``"column"`` or ``"column:name"``); default: every other scalar column (other
            columns are left out).
        sample_rate : float, optional
            Sample rate of audio stored as plain float lists (set in the metadata).
        metadata : dict, optional
            The table's metadata; default: what :meth:`to_hf` stored, else none.

        Returns
        -------
        SampleTable
        """
        from .interop import from_hf

        return from_hf(
            cls,
            dataset,
            split=split,
            subject=subject,
            sample_id=sample_id,
            payloads=payloads,
            attributes=attributes,
            sample_rate=sample_rate,
            metadata=metadata,
        )

    def to_torch(
        self,
        payload: str | Sequence[str] | None = None,
        *,
        label: str | None = SUBJECT,
        transform: Any = None,
        copy: bool = False,
    ) -> Any:
        """A map-style :class:`torch.utils.data.Dataset` over the table (needs ``pip install 'bioanon[torch]'``).

        Item ``i`` is ``(x, y)``: ``x`` the payload's tensor (a tuple of tensors when ``payload`` names several),
        ``y`` the label as a 0-d tensor. A string, boolean or categorical label (``subject`` by default) is a
        class index into ``dataset.classes`` (the sorted names); a numeric attribute is its value.

        The tensors share the table's memory (no copy; the whole payload is wrapped once): treat them as
        read-only, or pass ``copy=True`` for a fresh tensor per item (a DataLoader's default collate copies
        anyway). ``audio`` items are 1-D tensors of different lengths: batch them with ``batch_size=1`` or a
        ``collate_fn`` that pads.

        Parameters
        ----------
        payload : str or sequence of str, optional
            Payload name(s); default the table's only payload.
        label : str or None, default "subject"
            ``"subject"``, an attribute name (with or without ``attr.``), or None for items without a label.
        transform : callable, optional
            Applied to ``x`` of every item.
        copy : bool, default False
            Clone every item's tensors.

        Returns
        -------
        bioanon.interop.SampleDataset
        """
        from .interop import to_torch

        return to_torch(self, payload, label=label, transform=transform, copy=copy)


def _shape_str(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _check_lineage(lineage: Any) -> None:
    if not isinstance(lineage, list):
        raise TableError(f"metadata 'lineage' must be a list of steps, got {type(lineage).__name__}")
    for i, step in enumerate(lineage):
        if (
            not isinstance(step, dict)
            or not isinstance(step.get("step"), str)
            or not isinstance(step.get("fingerprint"), str)
        ):
            raise TableError(f"lineage step {i} must be a dict with str 'step' and 'fingerprint', got {step!r}")
