"""Content keys: canonical JSON, parameter fingerprints and table content hashes.

:func:`canonical_json` / :func:`fingerprint` hash parameters deterministically (no pickle, no paths, no
mtimes), :func:`derive_fingerprint` keys a derived table by its method, version, parameters, inputs and seed,
and :func:`table_fingerprint` hashes a table's logical content.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bioanon.arrow_numpy import to_numpy
from bioanon.errors import CacheError

#: Length (hex characters) of the fingerprints this module produces.
FINGERPRINT_LENGTH = 32
_RESERVED_KEYS = frozenset({"__ndarray__"})
#: Keys of the ``b"bioanon"`` schema metadata that describe history, not content (left out of table hashes).
_HISTORY_KEYS = ("lineage", "fingerprint")


# --------------------------------------------------------------------------------------------- fingerprints


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text of ``obj`` for fingerprinting.

    Sorted keys, no whitespace, ASCII only. Accepted: ``dict`` (any ``Mapping``) with ``str`` keys, ``list``
    and ``tuple`` (both encode as a JSON list), ``str``, ``int``, ``bool``, ``None``, finite ``float``
    (shortest round-trip ``repr``, so ``0.1`` and ``0.1000000001`` differ), numpy scalars (as the equal
    Python scalar) and numpy arrays (as ``{"__ndarray__": {"dtype", "shape", "sha256"}}`` of their bytes).
    An integral float encodes as ``1.0`` and an int as ``1``, so the two differ: methods coerce parameters
    to their declared types before fingerprinting. Paths, NaN/inf, sets and any other type raise
    :class:`~bioanon.errors.CacheError` naming the offending value's type.
    """
    return json.dumps(
        _canon(obj, set(), "$"), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def fingerprint(obj: Any) -> str:
    """The first 32 hex characters of the SHA-256 of :func:`canonical_json` of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()[:FINGERPRINT_LENGTH]


def derive_fingerprint(
    *,
    method_id: str,
    version: str,
    params: Mapping[str, Any],
    inputs: Sequence[str],
    seed: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Fingerprint of a derived result: method id and version, parameters, ordered input fingerprints, seed.

    ``params`` must already have defaults applied and output-irrelevant parameters (batch size, device,
    threads) removed. ``inputs`` is ordered (e.g. ``[table, background]``). ``extra`` holds anything else
    that changes the output; ``None`` and ``{}`` are the same.
    """
    if not isinstance(method_id, str) or not method_id:
        raise CacheError(f"derive_fingerprint: method_id must be a non-empty str, got {method_id!r}")
    if not isinstance(version, str):
        raise CacheError(f"derive_fingerprint: version must be a str, got {type(version).__name__}")
    if not isinstance(params, Mapping):
        raise CacheError(f"derive_fingerprint: params must be a mapping, got {type(params).__name__}")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise CacheError("derive_fingerprint: inputs must be a sequence of fingerprint strings")
    for i, fp in enumerate(inputs):
        if not isinstance(fp, str):
            raise CacheError(f"derive_fingerprint: inputs[{i}] must be a str, got {type(fp).__name__}")
    if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))):
        raise CacheError(f"derive_fingerprint: seed must be an int or None, got {type(seed).__name__}")
    if extra is not None and not isinstance(extra, Mapping):
        raise CacheError(f"derive_fingerprint: extra must be a mapping or None, got {type(extra).__name__}")
    return fingerprint(
        {
            "fp": "bioanon.derive/1",
            "method": method_id,
            "version": version,
            "params": params,
            "inputs": list(inputs),
            "seed": None if seed is None else int(seed),
            "extra": extra or {},
        }
    )


def _canon(obj: Any, active: set[int], where: str) -> Any:
    """Convert ``obj`` to plain JSON-able Python values, refusing anything ambiguous."""
    if obj is None or isinstance(obj, (bool, np.bool_)):
        return None if obj is None else bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if not math.isfinite(value):
            raise CacheError(f"cannot fingerprint non-finite float {value!r} at {where}")
        return value
    if isinstance(obj, str):
        return str.__str__(obj)  # a plain str even for str subclasses (e.g. StrEnum)
    if isinstance(obj, os.PathLike):
        raise CacheError(
            f"cannot fingerprint {type(obj).__name__} at {where}: paths must not enter fingerprints "
            "(fingerprint the data's content instead)"
        )
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": _ndarray_digest(obj, where)}
    if isinstance(obj, np.generic):  # remaining numpy scalars (datetime64, str_, ...): via their Python value
        item = obj.item()
        if isinstance(item, np.generic):
            raise CacheError(f"cannot fingerprint numpy scalar of dtype {obj.dtype} at {where}")
        return _canon(item, active, where)
    if isinstance(obj, (Mapping, list, tuple)):
        if id(obj) in active:
            raise CacheError(f"cannot fingerprint a self-referencing container at {where}")
        active.add(id(obj))
        try:
            if isinstance(obj, Mapping):
                out = {}
                for k, v in obj.items():
                    if not isinstance(k, str):
                        raise CacheError(
                            f"cannot fingerprint dict key {k!r} of type {type(k).__name__} at {where}: keys must be str"
                        )
                    if k in _RESERVED_KEYS:
                        raise CacheError(f"dict key {k!r} at {where} is reserved for fingerprint encoding")
                    out[str.__str__(k)] = _canon(v, active, f"{where}.{k}")
                return out
            return [_canon(v, active, f"{where}[{i}]") for i, v in enumerate(obj)]
        finally:
            active.discard(id(obj))
    hint = " (use a sorted list)" if isinstance(obj, (set, frozenset)) else ""
    raise CacheError(
        f"cannot fingerprint a value of type {type(obj).__module__}.{type(obj).__qualname__} at {where}{hint}"
    )


def _ndarray_digest(arr: np.ndarray, where: str) -> dict[str, Any]:
    """dtype, shape and SHA-256 of a numpy array's C-order bytes (byte order normalized to little endian)."""
    dtype = arr.dtype
    if dtype.hasobject:
        raise CacheError(f"cannot fingerprint a numpy array of object dtype at {where}")
    if dtype.fields is None and dtype.kind in "biufcmM" and dtype.itemsize > 1:
        dtype = dtype.newbyteorder("<")
        arr = arr.astype(dtype, copy=False)
    flat = np.ascontiguousarray(arr).reshape(-1)
    digest = hashlib.sha256(flat.view(np.uint8).data).hexdigest()
    dtype_desc = dtype.str if dtype.fields is None else repr(dtype.descr)
    return {"dtype": dtype_desc, "shape": [int(n) for n in arr.shape], "sha256": digest}


# ----------------------------------------------------------------------------------------- table hashing


def table_fingerprint(table: Any) -> str:
    """Content hash (32 hex characters, BLAKE2b) of a table's schema, trait metadata and logical values.

    Accepts a ``pyarrow.Table``, ``pyarrow.RecordBatch`` or anything with an ``.arrow`` table (SampleTable).
    Independent of chunk layout, slicing offsets, dictionary encoding and the values hidden under nulls;
    the ``lineage``/``fingerprint`` entries of the ``b"bioanon"`` metadata and foreign ``pandas``/``ARROW:``
    metadata are left out, so the same data reached by two routes hashes the same. Buffers are hashed in
    place (no copy of the payload unless a column has nulls or needs decoding).
    """
    tbl = _as_table(table, "table_fingerprint")
    h = hashlib.blake2b(digest_size=FINGERPRINT_LENGTH // 2)
    h.update(b"bioanon.table/1\0")
    h.update(canonical_json(_schema_desc(tbl.schema)).encode("ascii"))
    h.update(tbl.num_rows.to_bytes(8, "little"))
    for i in range(tbl.num_columns):
        column = tbl.column(i)
        chunks = column.chunks if column.num_chunks else [column.combine_chunks()]
        stream = _Stream()
        for chunk in chunks:
            stream.feed(chunk, tbl.schema.field(i).name)
        h.update(stream.digest())
    return h.hexdigest()


def _as_table(obj: Any, what: str) -> pa.Table:
    """Unwrap a SampleTable / RecordBatch into a ``pyarrow.Table``."""
    inner = getattr(obj, "arrow", None)
    if isinstance(inner, pa.Table):
        return inner
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    raise CacheError(f"{what}: expected a pyarrow.Table, RecordBatch or SampleTable, got {type(obj).__name__}")


def _latin1(b: bytes | str) -> str:
    return b if isinstance(b, str) else b.decode("latin-1")


def _type_desc(t: pa.DataType) -> Any:
    """A JSON-able, canonical description of an Arrow type."""
    if isinstance(t, pa.FixedShapeTensorType):
        perm = t.permutation
        if perm is not None and list(perm) == list(range(len(t.shape))):
            perm = None  # identity permutation given explicitly == not given
        return {
            "extension": t.extension_name,
            "value_type": _type_desc(t.value_type),
            "shape": [int(n) for n in t.shape],
            "dim_names": None if t.dim_names is None else list(t.dim_names),
            "permutation": None if perm is None else [int(p) for p in perm],
        }
    if isinstance(t, pa.BaseExtensionType):
        desc = {"extension": t.extension_name, "storage": _type_desc(t.storage_type), "str": str(t)}
        serialize = getattr(t, "__arrow_ext_serialize__", None)
        if serialize is not None:
            desc["serialized"] = bytes(serialize()).hex()
        return desc
    return str(t)


def _metadata_desc(metadata: Mapping[bytes, bytes] | None) -> dict[str, str]:
    return {_latin1(k): _latin1(v) for k, v in (metadata or {}).items()}


def _schema_desc(schema: pa.Schema) -> dict[str, Any]:
    fields = [
        {"name": f.name, "type": _type_desc(f.type), "nullable": f.nullable, "metadata": _metadata_desc(f.metadata)}
        for f in schema
    ]
    meta: dict[str, Any] = {}
    for k, v in (schema.metadata or {}).items():
        if k == b"pandas" or k.startswith(b"ARROW:"):
            continue
        if k == b"bioanon":
            try:
                doc = json.loads(v)
                if isinstance(doc, dict):
                    doc = {dk: dv for dk, dv in doc.items() if dk not in _HISTORY_KEYS}
                meta["bioanon"] = {"json": canonical_json(doc)}
                continue
            except (ValueError, CacheError):
                pass  # not canonicalizable: hash the raw bytes below
        meta[_latin1(k)] = _latin1(v)
    return {"fields": fields, "metadata": meta}


_BINARY_OFFSET_DTYPES = {
    pa.types.is_string: np.int32,
    pa.types.is_binary: np.int32,
    pa.types.is_large_string: np.int64,
    pa.types.is_large_binary: np.int64,
}


class _Stream:
    """Incremental hash of one logical array (a column or a nested child), fed chunk by chunk.

    Each part is a separate hash over the concatenation across chunks, so the result does not depend on
    where the chunk boundaries are: positions of nulls (global int64 indices), lengths of variable-size
    values (int64), the bytes of the non-null values, and one sub-stream per child array.
    """

    __slots__ = ("n", "nulls", "lengths", "data", "children")

    def __init__(self) -> None:
        self.n = 0
        self.nulls = hashlib.blake2b()
        self.lengths = hashlib.blake2b()
        self.data = hashlib.blake2b()
        self.children: dict[int, _Stream] = {}

    def child(self, i: int) -> _Stream:
        stream = self.children.get(i)
        if stream is None:
            stream = self.children[i] = _Stream()
        return stream

    def feed(self, arr: pa.Array, name: str) -> None:
        # 1. reduce to a canonical physical encoding (logical values unchanged)
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        t = arr.type
        if pa.types.is_dictionary(t):
            arr = arr.dictionary_decode()
        elif pa.types.is_run_end_encoded(t):
            arr = pc.run_end_decode(arr)
        elif pa.types.is_string_view(t) or pa.types.is_binary_view(t):
            arr = arr.cast(pa.large_binary())
        if isinstance(arr, pa.ExtensionArray):  # a dictionary of extension values
            arr = arr.storage
        t = arr.type
        n = len(arr)
        if pa.types.is_null(t):
            self.n += n
            return
        if pa.types.is_union(t):
            raise CacheError(f"table_fingerprint: column {name!r} has a union type ({t}), which is not supported")
        # 2. nulls: record where they are, then hash only the valid values
        if arr.null_count:
            valid = to_numpy(arr.is_valid())
            idx = np.flatnonzero(~valid).astype("<i8") + self.n
            self.nulls.update(idx.data)
            arr = arr.drop_null()
        self.n += n
        m = len(arr)
        # 3. values
        if pa.types.is_boolean(t):
            self.data.update(to_numpy(arr).view(np.uint8).data)
        elif pa.types.is_struct(t):
            for i, child in enumerate(arr.flatten()):
                self.child(i).feed(child, f"{name}.{t.field(i).name}")
        elif pa.types.is_fixed_size_list(t):
            size = t.list_size
            self.child(0).feed(arr.values.slice(arr.offset * size, m * size), f"{name}[]")
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            offsets = to_numpy(arr.offsets)  # respects the slice offset; values do not
            self.lengths.update(np.diff(offsets).astype("<i8").data)
            start, stop = (int(offsets[0]), int(offsets[-1])) if m else (0, 0)
            self.child(0).feed(arr.values.slice(start, stop - start), f"{name}[]")
        elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
            lengths = to_numpy(pc.list_value_length(arr)).astype("<i8")
            self.lengths.update(lengths.data)
            self.child(0).feed(pc.list_flatten(arr), f"{name}[]")
        else:
            for pred, off_dtype in _BINARY_OFFSET_DTYPES.items():
                if pred(t):
                    self._feed_binary(arr, np.dtype(off_dtype))
                    return
            try:
                width = t.bit_width
            except ValueError:
                width = 0
            if width <= 0 or width % 8:
                raise CacheError(f"table_fingerprint: column {name!r} has an unsupported type ({t})")
            nbytes = width // 8
            buf = arr.buffers()[1]
            if m:
                self.data.update(memoryview(buf.slice(arr.offset * nbytes, m * nbytes)))

    def _feed_binary(self, arr: pa.Array, off_dtype: np.dtype) -> None:
        m = len(arr)
        if m == 0:
            return
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, dtype=off_dtype, count=m + 1, offset=arr.offset * off_dtype.itemsize)
        self.lengths.update(np.diff(offsets).astype("<i8").data)
        start, stop = int(offsets[0]), int(offsets[-1])
        if stop > start:
            self.data.update(memoryview(data_buf.slice(start, stop - start)))

    def digest(self) -> bytes:
        h = hashlib.blake2b()
        h.update(self.n.to_bytes(8, "little"))
        for part in (self.nulls, self.lengths, self.data):
            h.update(part.digest())
        h.update(len(self.children).to_bytes(4, "little"))
        for i in sorted(self.children):
            h.update(self.children[i].digest())
        return h.digest()


# ------------------------------------------------------------------------------------------------- cache
