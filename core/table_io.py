"""Files of a :class:`~bioanon.table.SampleTable`: Arrow IPC (``save``/``load``, and ``stream`` in bounded memory)
and Parquet (``to_parquet``/``from_parquet``), each written atomically; the table's methods of the same names call
these. Conversions to pandas, Hugging Face ``datasets`` and torch are in :mod:`bioanon.interop`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from bioanon.errors import TableError
from bioanon.fileio import atomic_write

if TYPE_CHECKING:  # annotations only: table.py imports this module, not the other way round
    from .table import SampleTable


def _write_ipc(table: pa.Table, sink: Any) -> None:
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _write_parquet(table: pa.Table, sink: Any) -> None:
    import pyarrow.parquet as pq

    # keep Arrow's list child name ("item") so the schema round-trips exactly
    pq.write_table(table, sink, use_compliant_nested_type=False)


def save(table: SampleTable, path: str | os.PathLike[str]) -> None:
    """The body of :meth:`SampleTable.save` (documented there)."""
    atomic_write(path, lambda f: _write_ipc(table.arrow, f))


def load(
    cls: type[SampleTable], path: str | os.PathLike[str], *, memory_map: bool = True, validate: bool = False
) -> SampleTable:
    """The body of :meth:`SampleTable.load` (documented there)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TableError(f"cannot load sample table {path!r}: no such file")
    try:
        with pa.memory_map(path, "r") if memory_map else pa.OSFile(path, "rb") as source:
            with pa.ipc.open_file(source) as reader:
                table = reader.read_all()
        table.validate()
    except (pa.ArrowException, OSError) as e:
        raise TableError(
            f"cannot load sample table {path!r}: not a valid Arrow IPC file (truncated or corrupt?): {e}"
        ) from None
    return _checked(cls, table, path, validate)


def stream(cls: type[SampleTable], path: str | os.PathLike[str], batch_size: int = 65536) -> Iterator[SampleTable]:
    """The body of :meth:`SampleTable.stream` (documented there)."""
    import mmap

    path = os.fspath(path)
    if int(batch_size) < 1:
        raise TableError(f"batch_size must be >= 1, got {batch_size}")
    if not os.path.isfile(path):
        raise TableError(f"cannot stream sample table {path!r}: no such file")
    try:
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        buf = pa.py_buffer(mm)
        reader = pa.ipc.open_file(pa.BufferReader(buf))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise TableError(
            f"cannot stream sample table {path!r}: not a valid Arrow IPC file (truncated or corrupt?): {e}"
        ) from None
    base, page = buf.address, mmap.PAGESIZE
    released = 0  # bytes from the file start whose pages were released

    def release(upto: int) -> None:
        nonlocal released
        upto -= upto % page
        if upto > released and hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_DONTNEED, released, upto - released)
            released = upto

    for i in range(reader.num_record_batches):
        try:
            batch = reader.get_batch(i)
            batch.validate()
        except pa.ArrowException as e:
            raise TableError(f"cannot stream sample table {path!r}: record batch {i} is corrupt: {e}") from None
        table = pa.Table.from_batches([batch], schema=reader.schema)
        if i == 0:
            _checked(cls, table.slice(0, 0), path, False)
        ends = [
            b.address + b.size - base
            for col in batch.columns
            for b in col.buffers()
            if b is not None and base <= b.address < base + buf.size
        ]
        for off in range(0, batch.num_rows, int(batch_size)):
            yield cls(table.slice(off, int(batch_size)), validate=False)
        del table, batch
        if ends:
            release(max(ends))


def _checked(cls: type[SampleTable], table: pa.Table, path: str, validate: bool) -> SampleTable:
    out = cls(table, validate=False)
    try:
        out.validate() if validate else out._check_structure()
    except TableError as e:
        raise TableError(f"{path!r}: {e}") from None
    return out


def to_parquet(table: SampleTable, path: str | os.PathLike[str]) -> None:
    """The body of :meth:`SampleTable.to_parquet` (documented there)."""
    atomic_write(path, lambda f: _write_parquet(table.arrow, f))


def from_parquet(cls: type[SampleTable], path: str | os.PathLike[str], *, validate: bool = True) -> SampleTable:
    """The body of :meth:`SampleTable.from_parquet` (documented there)."""
    import pyarrow.parquet as pq

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TableError(f"cannot read Parquet sample table {path!r}: no such file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise TableError(f"cannot read Parquet sample table {path!r}: {e}") from None
    return _checked(cls, table, path, validate)
