"""Lossless compact storage of 16-bit audio in the cache.

Audio decoded from 16-bit files (FLAC, WAV, the LibriSpeech and VoxCeleb corpora) holds float32 samples that are
all ``k / 32768`` for an integer ``k`` of 16 bits: 4 bytes a sample that carry 2. A cache entry stores such a
column (``list<float32>``, every value of that form) as the per-row first differences of ``k``, their low bytes
then their high bytes (``list<uint8>``), in an Arrow file compressed with zstd: 1.22 bytes a sample on the
recorded speech of FSDD (FLAC: 1.13) and 1.43 on synthetic speech (FLAC: 1.29), against 4.0 as float32.
Reading the entry gives back the same float32 values, bit for bit, in memory (the compressed column cannot be
memory-mapped); a range of rows reads only the record batches that hold them. Every other column, and every
table without such a column, is stored and read as before (memory-mapped, uncompressed).

The encoding marks the field with :data:`CODEC_KEY` in its metadata; only the cache reads and writes it, so no
table with an encoded column leaves the cache.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from bioanon.arrow_numpy import to_numpy

__all__ = [
    "BATCH_ROWS_KEY",
    "CODEC_KEY",
    "MIN_BYTES",
    "PCM16_DELTA",
    "batch_rows",
    "decode_pcm16",
    "encode_pcm16",
    "encoded",
    "read_options",
    "with_row_batches",
]

CODEC_KEY = b"bioanon.codec"
PCM16_DELTA = b"pcm16-delta"
#: schema metadata of an encoded table: the rows of each of its record batches (the last may hold fewer)
BATCH_ROWS_KEY = b"bioanon.batch_rows"
#: a column with fewer float32 bytes than this is stored as it is (compression would save little)
MIN_BYTES = 1 << 20
#: encoded bytes per record batch: a range of rows is read (decompressed) a batch at a time
BATCH_BYTES = 4 << 20
_SCALE = np.float32(32768.0)
_BLOCK = 1 << 22  # values checked or converted at a time (bounded temporary memory)


def _list_float32(field: pa.Field) -> bool:
    return bool(pa.types.is_list(field.type) and field.type.value_type == pa.float32())


def _flat(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets from 0) of a list column (its chunks combined)."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    offsets = to_numpy(arr.offsets).astype(np.int64)
    values = to_numpy(arr.values)[offsets[0] : offsets[-1]] if len(arr) else np.zeros(0)
    return values.astype(np.float32, copy=False), offsets - offsets[0]


def _as_pcm16(values: np.ndarray) -> np.ndarray | None:
    """The int16 ``k`` with ``values == k / 32768`` exactly, or None when any value is not of that form (NaN,
    out of range, more precision than 16 bits, or a negative zero, which ``k`` could not give back)."""
    out = np.empty(values.shape, np.int16)
    for lo in range(0, values.size, _BLOCK):
        v = values[lo : lo + _BLOCK]
        scaled = v * _SCALE  # exact: a power of two
        if not (
            np.all(scaled == np.rint(scaled))
            and np.all(scaled >= -32768.0)
            and np.all(scaled <= 32767.0)
            and not np.any(np.signbit(v) & (v == 0))
        ):
            return None
        out[lo : lo + _BLOCK] = scaled
    return out


def _starts(offsets: np.ndarray) -> np.ndarray:
    """First value of each non-empty row."""
    return offsets[:-1][offsets[1:] > offsets[:-1]]


def _row_blocks(offsets: np.ndarray) -> Iterator[tuple[int, int]]:
    """Ranges of rows ``[r0, r1)`` holding at most :data:`_BLOCK` values each (a longer row alone)."""
    r0, n = 0, len(offsets) - 1
    while r0 < n:
        r1 = int(np.searchsorted(offsets, offsets[r0] + _BLOCK, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n)
        yield r0, r1
        r0 = r1


def _plane_positions(offsets: np.ndarray, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the low and the high bytes of the values of rows ``[r0, r1)`` go in the byte array: each row's
    low bytes, then its high bytes (rows stay whole, so a record batch holds its rows' bytes alone)."""
    lengths = np.diff(offsets[r0 : r1 + 1])
    low = np.arange(offsets[r0], offsets[r1]) + np.repeat(offsets[r0:r1], lengths)
    return low, low + np.repeat(lengths, lengths)


def encode_pcm16(table: pa.Table) -> tuple[pa.Table, bool]:
    """``table`` with every ``list<float32>`` column of at least :data:`MIN_BYTES` whose values are all 16-bit
    samples stored as ``list<uint8>``: per row, the first differences of its 16-bit samples, their low bytes
    then their high bytes (small differences make long runs of equal high bytes, which zstd compresses well);
    field metadata :data:`CODEC_KEY`. Also whether any column was encoded. Other columns are untouched."""
    encoded = False
    for i, field in enumerate(table.schema):
        col = table.column(i)
        if not _list_float32(field) or col.null_count or sum(c.values.nbytes for c in col.chunks) < MIN_BYTES:
            continue
        values, offsets = _flat(col)
        pcm = _as_pcm16(values)
        if pcm is None:
            continue
        diff = np.empty_like(pcm)
        if pcm.size:
            diff[0] = pcm[0]
            np.subtract(pcm[1:], pcm[:-1], out=diff[1:])  # wraps modulo 2**16, as the sum that undoes it
            starts = _starts(offsets)
            diff[starts] = pcm[starts]
        del pcm
        pairs = diff.view(np.uint8).reshape(-1, 2)
        low_byte, high_byte = (0, 1) if sys.byteorder == "little" else (1, 0)
        planes = np.empty(2 * diff.size, np.uint8)
        for r0, r1 in _row_blocks(offsets):
            low, high = _plane_positions(offsets, r0, r1)
            planes[low] = pairs[offsets[r0] : offsets[r1], low_byte]
            planes[high] = pairs[offsets[r0] : offsets[r1], high_byte]
        typ = pa.list_(field.type.value_field.with_type(pa.uint8()))
        arr = pa.ListArray.from_arrays(pa.array((2 * offsets).astype(np.int32)), pa.array(planes), type=typ)
        meta = {**(field.metadata or {}), CODEC_KEY: PCM16_DELTA}
        table = table.set_column(i, field.with_type(typ).with_metadata(meta), arr)
        encoded = True
    return table, encoded


def with_row_batches(table: pa.Table) -> pa.Table:
    """An encoded ``table`` cut into record batches of equal rows (about :data:`BATCH_BYTES` each), their size
    in its schema metadata (:data:`BATCH_ROWS_KEY`), so that :func:`batch_rows` reads a range of rows alone."""
    per_row = table.nbytes / max(table.num_rows, 1)
    rows = max(1, int(BATCH_BYTES // max(per_row, 1.0)))
    meta = {**(table.schema.metadata or {}), BATCH_ROWS_KEY: str(rows).encode()}
    batches = table.combine_chunks().to_batches(max_chunksize=rows)
    return pa.Table.from_batches(batches, schema=table.schema.with_metadata(meta))


def batch_rows(reader: Any, start: int, stop: int) -> tuple[pa.Table, int]:
    """The record batches of a stored table (an open ``RecordBatchFileReader``) that hold its rows
    ``[start, stop)``, and the row number of their first row. Every batch when the table has no
    :data:`BATCH_ROWS_KEY`."""
    per_batch = int((reader.schema.metadata or {}).get(BATCH_ROWS_KEY, b"0"))
    n = reader.num_record_batches
    if per_batch <= 0:
        return reader.read_all(), 0
    first = min(start // per_batch, n)
    last = min(max(stop - 1, start) // per_batch, n - 1)
    batches = [reader.get_batch(i) for i in range(first, last + 1)]
    return pa.Table.from_batches(batches, schema=reader.schema), first * per_batch


def decode_pcm16(table: pa.Table) -> pa.Table:
    """The inverse of :func:`encode_pcm16`: every column it encoded as float32 again (the values bit for bit)."""
    meta = table.schema.metadata or {}
    if BATCH_ROWS_KEY in meta:
        table = table.replace_schema_metadata({k: v for k, v in meta.items() if k != BATCH_ROWS_KEY} or None)
    for i, field in enumerate(table.schema):
        if (field.metadata or {}).get(CODEC_KEY) != PCM16_DELTA:
            continue
        col = table.column(i)
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        byte_offsets = to_numpy(arr.offsets).astype(np.int64)
        planes = to_numpy(arr.values)[byte_offsets[0] : byte_offsets[-1]] if len(arr) else np.zeros(0, np.uint8)
        offsets = (byte_offsets - byte_offsets[0]) // 2
        pairs = np.empty((offsets[-1], 2), np.uint8)
        low_byte, high_byte = (0, 1) if sys.byteorder == "little" else (1, 0)
        for r0, r1 in _row_blocks(offsets):
            low, high = _plane_positions(offsets, r0, r1)
            pairs[offsets[r0] : offsets[r1], low_byte] = planes[low]
            pairs[offsets[r0] : offsets[r1], high_byte] = planes[high]
        diff = pairs.view(np.int16).reshape(-1)
        running = np.cumsum(diff, dtype=np.int16)  # wraps modulo 2**16
        lengths = np.diff(offsets)
        before = np.zeros(len(lengths), np.int16)  # the running sum just before each row
        nonempty = lengths > 0
        before[nonempty] = np.where(offsets[:-1][nonempty] > 0, running[offsets[:-1][nonempty] - 1], 0)
        pcm = running - np.repeat(before, lengths)
        values = np.empty(pcm.shape, np.float32)
        for lo in range(0, pcm.size, _BLOCK):
            np.divide(pcm[lo : lo + _BLOCK], _SCALE, out=values[lo : lo + _BLOCK], dtype=np.float32)
        typ = pa.list_(field.type.value_field.with_type(pa.float32()))
        meta = {k: v for k, v in (field.metadata or {}).items() if k != CODEC_KEY}
        restored = field.with_type(typ)
        restored = restored.with_metadata(meta) if meta else restored.remove_metadata()
        table = table.set_column(
            i, restored, pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values), type=typ)
        )
    return table


def encoded(schema: pa.Schema) -> bool:
    """Whether a stored table's schema has a column :func:`encode_pcm16` encoded."""
    return any((f.metadata or {}).get(CODEC_KEY) == PCM16_DELTA for f in schema)


def read_options(schema: pa.Schema, columns: Any) -> pa.ipc.IpcReadOptions | None:
    """Options reading only ``columns`` of a stored table with ``schema`` (None: all): a compressed column
    not asked for is then not decompressed."""
    if columns is None:
        return None
    wanted = set(columns)
    return pa.ipc.IpcReadOptions(included_fields=[i for i, f in enumerate(schema) if f.name in wanted])
