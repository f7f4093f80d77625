"""The content-addressed store of derived tables, JSON results and blobs.

:class:`Cache` stores Arrow IPC tables and JSON documents by fingerprint on any ``pyarrow.fs`` filesystem
(local directory or object store shared by Dask workers). Writes go to a temporary file in the destination
directory and are then renamed, so readers never see half a file. Every entry carries a SHA-256 of its bytes,
verified on read: JSON documents and blobs begin with a header line holding it, a table has a ``.sha256`` file
beside it (written before the table itself appears). An entry that is unreadable, or whose bytes no longer match
(flipped bits, a truncated copy, a hand edit, an entry of an older bioanon without a checksum), is moved aside as
``*.corrupt`` with a :class:`CacheWarning` and treated as a miss, so it is computed again.
:meth:`Cache.verify` checks every entry, :meth:`Cache.clean` removes debris of dead writers, :meth:`Cache.clear`
evicts entries by age.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from bioanon.arrow_numpy import to_numpy
from bioanon.errors import CacheError
from bioanon.fileio import fsync_dir, pid_running
from bioanon.table_schema import take_rows

from .keys import _as_table
from .pcm16 import batch_rows, decode_pcm16, encode_pcm16, encoded, read_options, with_row_batches

_KEY_RE = re.compile(r"[0-9a-f]{16,64}")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_CACHEDIR_TAG = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This file is a cache directory tag created by bioanon.\n"
    b"# For information about cache directory tags see https://bford.info/cachedir/\n"
)


class CacheWarning(UserWarning):
    """A cache entry was unreadable (moved aside) or a computed result could not be stored."""


class DamagedEntry(ValueError):
    """A cache entry's bytes do not match its checksum (or it has none)."""


_HEADER = b"bioanon-cache sha256="  # first line of a JSON or blob entry: the header, 64 hex digits, a newline
_SUM_SUFFIX = ".sha256"  # beside a table entry: the SHA-256 of its bytes (64 hex digits)
_HASH_CHUNK = 1 << 20
_VERIFIED: dict[str, tuple[int, int, int]] = {}  # local table path -> (inode, size, mtime) whose hash was checked
_VERIFIED_LOCK = threading.Lock()
# local table path -> ((inode, size, mtime), a weak reference to its decoded table) for the tables stored in the
# compact audio encoding (pcm16): while this process holds the decoded table (the run's data set, say), reading the
# whole entry again gives that table back instead of decompressing and decoding it again
_DECODED: dict[str, tuple[tuple[int, int, int], Any]] = {}


#: A read records a use of an entry (its time, for eviction) only when its time is older than this (1 hour).
TOUCH_EVERY_NS = 3600 * 10**9


def checked_tables() -> dict[str, tuple[int, int, int]]:
    """The local tables whose bytes this process has checked against their checksums, with the
    identity of the file it checked: what a worker process of the same run is given (:func:`add_checked_tables`),
    so that it does not hash them again."""
    with _VERIFIED_LOCK:
        return dict(_VERIFIED)


def add_checked_tables(checked: Mapping[str, tuple[int, int, int]]) -> None:
    """Take tables another process of the run has checked (:func:`checked_tables`) as checked here: a table is
    read without hashing its bytes again while its file still has the identity that process checked (the same
    rule as for the tables this process checked itself)."""
    with _VERIFIED_LOCK:
        _VERIFIED.update({path: tuple(ident) for path, ident in checked.items()})  # type: ignore[misc]


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    """What tells a local file apart from its other versions: (inode, size, mtime)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _frame(payload: bytes) -> bytes:
    """A JSON or blob entry's bytes: the checksum header line, then ``payload``."""
    return _HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _unframe(raw: bytes) -> bytes:
    """The payload of an entry written by :func:`_frame`; :class:`DamagedEntry` when it does not match."""
    head, sep, payload = raw.partition(b"\n")
    if not sep or not head.startswith(_HEADER):
        raise DamagedEntry("no checksum header (damaged, or written by an older bioanon)")
    if hashlib.sha256(payload).hexdigest().encode() != head[len(_HEADER) :]:
        raise DamagedEntry("its bytes do not match its checksum")
    return payload


def _sha256_stream(stream: Any) -> str:
    """The SHA-256 of what ``stream`` reads, through one reused buffer where it reads into one."""
    h = hashlib.sha256()
    if hasattr(stream, "readinto"):
        buf = bytearray(_HASH_CHUNK)
        view = memoryview(buf)
        while n := stream.readinto(buf):
            h.update(view[:n])
        return h.hexdigest()
    while chunk := stream.read(_HASH_CHUNK):
        h.update(chunk)
    return h.hexdigest()


def format_bytes(n: float) -> str:
    """Human-readable size with binary units: ``format_bytes(1536) == "1.5 KiB"``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """Summary of a cache: entry counts, total size, and debris (left-over temp files, moved-aside entries)."""

    root: str
    n_tables: int
    n_json: int
    total_bytes: int
    n_temp: int
    n_corrupt: int
    n_blobs: int = 0

    def __str__(self) -> str:
        return (
            f"cache {self.root}: {self.n_tables} tables, {self.n_json} JSON results, {self.n_blobs} trained "
            f"networks, {format_bytes(self.total_bytes)}; {self.n_temp} temp files, {self.n_corrupt} corrupt entries"
        )


_ENTRY_NAME = re.compile(r"[0-9a-f]{16,64}\.(arrow|json|bin)")
_SUM_NAME = re.compile(r"[0-9a-f]{16,64}\.arrow\.sha256")
_TEMP_PID = re.compile(r"\.tmp-(\d+)-[0-9a-f]+$")


def _classify(name: str) -> str:
    """``entry``, ``temp``, ``corrupt`` or ``other`` for a file name inside ``tables/`` or ``json/``."""
    if _ENTRY_NAME.fullmatch(name):
        return "entry"
    if _SUM_NAME.fullmatch(name):
        return "sum"
    if ".tmp-" in name:
        return "temp"
    if name.endswith(".corrupt"):
        return "corrupt"
    return "other"


def _checked_take(take: np.ndarray, n_rows: int) -> np.ndarray:
    """``take`` if every position is a row of a table of ``n_rows`` rows, else a :class:`CacheError`."""
    if take.size and (take.min() < 0 or take.max() >= n_rows):
        raise CacheError(f"get_table: take holds positions outside the table's {n_rows} rows")
    return take


def column_names(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    """The names ``columns`` stands for in ``schema``, in the order given: a name ending in ``*`` stands for every
    column that starts with the rest (in the schema's order); other names are kept (a missing one fails where
    it is read)."""
    out: list[str] = []
    for c in columns:
        out += [n for n in schema.names if n.startswith(c[:-1])] if c.endswith("*") else [c]
    return list(dict.fromkeys(out))


def _wrap_table(tbl: pa.Table) -> Any:
    """Wrap as a SampleTable; a plain ``pyarrow.Table`` while ``bioanon.table`` does not exist yet."""
    try:
        from bioanon.table import SampleTable
    except ModuleNotFoundError as exc:
        if exc.name != "bioanon.table":
            raise
        return tbl
    return SampleTable(tbl, validate=False)


_MISSING = object()
#: Schema metadata of a row-selection entry (:meth:`Cache.put_rows`): the key of its base table, and whether it
#: carries table metadata of its own.
_ROWS_OF = b"bioanon.rows_of"
_HAS_META = b"bioanon.rows_meta"
#: Schema metadata of a concatenation entry (:meth:`Cache.put_concat`): the keys of its parts, as JSON.
_CONCAT_OF = b"bioanon.concat_of"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"a value of type {type(obj).__name__} cannot be stored as JSON")


def _restore_cache(fs: pafs.FileSystem, root: str, uri: str, fsync: bool) -> Cache:
    cache = Cache.__new__(Cache)
    cache._init(fs, root, uri, fsync)
    return cache


class Cache:
    """Content-addressed store of derived tables (Arrow IPC) and small JSON results, keyed by fingerprint.

    ``root`` is a directory path or a URI (``file:///...``, ``s3://bucket/prefix``) resolved through
    ``pyarrow.fs``; by default ``$BIOANON_CACHE`` or the user cache directory. Layout:
    ``<root>/tables/<key[:2]>/<key>.arrow`` and ``<root>/json/<key[:2]>/<key>.json``. Keys are lowercase
    hex strings of 16–64 characters. Safe for concurrent use by threads and processes sharing the root.
    ``fsync=False`` skips flushing to disk (faster, for throw-away caches).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, fsync: bool = True):
        if root is None:
            root = os.environ.get("BIOANON_CACHE") or None
        if root is None:
            import platformdirs

            root = platformdirs.user_cache_dir("bioanon")
        if isinstance(root, os.PathLike):
            root = os.fspath(root)
        if not isinstance(root, str) or not root:
            raise CacheError(f"cache root must be a non-empty path or URI, got {root!r}")
        if _URI_RE.match(root):
            try:
                fs, path = pafs.FileSystem.from_uri(root)
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise CacheError(f"cannot open cache at {root!r}: {exc}") from exc
            path = path.rstrip("/") or path
            uri = root.rstrip("/")
            if isinstance(fs, pafs.LocalFileSystem):
                uri = _file_uri(path)
        else:
            fs = pafs.LocalFileSystem()
            path = os.path.abspath(os.path.expanduser(root))
            uri = _file_uri(path)
        self._init(fs, path, uri, fsync)

    def _init(self, fs: pafs.FileSystem, root: str, uri: str, fsync: bool) -> None:
        self.fs = fs
        self.root = root
        self.uri = uri
        self._fsync = fsync
        self._local = isinstance(fs, pafs.LocalFileSystem)
        self._lock = threading.Lock()
        self._stats = {"hits": 0, "misses": 0, "writes": 0}
        self._tagged = False

    def __reduce__(self) -> tuple[Callable[..., Cache], tuple[Any, ...]]:
        return _restore_cache, (self.fs, self.root, self.uri, self._fsync)

    def __repr__(self) -> str:
        return f"Cache({self.uri!r})"

    # -- statistics --------------------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, int]:
        """Counts for this ``Cache`` object: ``hits`` and ``misses`` of ``get_*``, ``writes`` actually done."""
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        """Set all :attr:`stats` counters back to zero."""
        with self._lock:
            self._stats = dict.fromkeys(self._stats, 0)

    def _count(self, what: str) -> None:
        with self._lock:
            self._stats[what] += 1

    # -- paths ---------------------------------------------------------------------------------------------

    @staticmethod
    def _check_key(key: Any) -> str:
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise CacheError(f"invalid cache key {key!r}: expected 16-64 lowercase hex characters")
        return key

    def _samples_dir(self, namespace: str) -> str:
        namespace = self._check_key(namespace)
        return f"{self.root}/samples/{namespace[:2]}/{namespace}"

    def _path(self, kind: str, key: str) -> str:
        key = self._check_key(key)
        ext = {"tables": "arrow", "json": "json", "blobs": "bin"}[kind]
        return f"{self.root}/{kind}/{key[:2]}/{key}.{ext}"

    def table_path(self, key: str) -> str:
        """Where the table entry ``key`` lives (whether or not it exists)."""
        return self._path("tables", key)

    def json_path(self, key: str) -> str:
        """Where the JSON entry ``key`` lives (whether or not it exists)."""
        return self._path("json", key)

    # -- filesystem primitives ---------------------------------------------------------------------------

    def _exists(self, path: str) -> bool:
        if self._local:
            return os.path.isfile(path)
        try:
            return bool(self.fs.get_file_info(path).type == pafs.FileType.File)
        except (pa.ArrowException, OSError) as exc:
            raise CacheError(f"cannot check cache entry {path}: {exc}") from exc

    def _makedirs(self, path: str) -> None:
        if self._local:
            os.makedirs(path, exist_ok=True)
        else:
            self.fs.create_dir(path, recursive=True)
        if not self._tagged:
            self._tagged = True
            self._write_tag()

    def _write_tag(self) -> None:
        """Best effort: a CACHEDIR.TAG so backup tools skip the cache."""
        tag = f"{self.root}/CACHEDIR.TAG"
        try:
            if not self._exists(tag):
                self._atomic_write(tag, lambda sink: sink.write(_CACHEDIR_TAG))
        except Exception:  # noqa: BLE001 - the tag is a courtesy, never a failure
            pass

    def _atomic_write(self, path: str, write: Callable[[Any], None], checksum: bool = False) -> bool:
        """Write via a temp file + rename. Returns False if the entry appeared meanwhile (nothing written).
        ``checksum``: the SHA-256 of the written bytes goes to ``<path>.sha256`` (atomically) before the entry
        is renamed into place, so a reader never finds the entry without its checksum."""
        directory = path.rsplit("/", 1)[0]
        tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            self._makedirs(directory)
            if self._local:
                with pa.OSFile(tmp, "wb") as sink:
                    write(sink)
                if self._fsync:
                    _fsync_path(tmp)
                if checksum:
                    with open(tmp, "rb") as f:
                        digest = _sha256_stream(f)
                    self._atomic_write(path + _SUM_SUFFIX, lambda sink: sink.write(digest.encode()))
                try:
                    os.replace(tmp, path)
                except PermissionError:
                    # Windows refuses to replace a file another process has open; the entry is there.
                    if os.path.isfile(path):
                        _remove_quietly(tmp)
                        return False
                    raise
                if self._fsync:
                    fsync_dir(directory)
            else:
                with self.fs.open_output_stream(tmp) as sink:
                    write(sink)
                if checksum:
                    with self.fs.open_input_stream(tmp) as f:
                        digest = _sha256_stream(f)
                    self._atomic_write(path + _SUM_SUFFIX, lambda sink: sink.write(digest.encode()))
                self.fs.move(tmp, path)
        except BaseException as exc:
            self._remove_quietly(tmp)
            if isinstance(exc, (pa.ArrowException, OSError)) and not isinstance(exc, CacheError):
                raise CacheError(f"cannot write cache entry {path}: {exc}") from exc
            raise
        return True

    def _remove_quietly(self, path: str) -> None:
        if self._local:
            _remove_quietly(path)
            return
        try:
            self.fs.delete_file(path)
        except (pa.ArrowException, OSError):
            pass

    def _read_bytes(self, path: str) -> bytes | None:
        try:
            if self._local:
                with open(path, "rb") as f:
                    return f.read()
            with self.fs.open_input_stream(path) as f:
                return cast(bytes, f.read())
        except FileNotFoundError:
            return None
        except PermissionError as exc:
            raise CacheError(f"cannot read cache entry {path}: {exc}") from exc

    def _touch(self, path: str) -> None:
        """Record a use (local filesystems only), so ``clear(older_than_days=...)`` evicts unused entries. The time
        moves only when it is older than :data:`TOUCH_EVERY_NS` (an hour): eviction counts in days, and each new
        time is a new identity of the file, which every other process of the run (the pool's workers) would
        otherwise meet by checking the table's bytes again. A table checked in this process stays checked, and a
        decoded one held: the new time is its new identity."""
        if not self._local:
            return
        try:
            if time.time_ns() - os.stat(path).st_mtime_ns < TOUCH_EVERY_NS:
                return
            os.utime(path)
            with _VERIFIED_LOCK:
                if path in _VERIFIED or path in _DECODED:
                    st = os.stat(path)
                    ident = _identity(st)
                    if path in _VERIFIED:
                        _VERIFIED[path] = ident
                    if path in _DECODED:
                        _DECODED[path] = (ident, _DECODED[path][1])
        except OSError:
            pass

    def _quarantine(self, path: str, error: BaseException, stat: os.stat_result | None = None) -> None:
        """Move an unreadable entry aside to ``<path>.corrupt`` and warn."""
        dest = f"{path}.corrupt"
        try:
            if self._local:
                if stat is not None:
                    now = os.stat(path)
                    if _identity(now) != _identity(stat):
                        return  # replaced by a fresh write meanwhile: leave it
                os.replace(path, dest)
            else:
                self.fs.move(path, dest)
        except (pa.ArrowException, OSError):
            return  # already moved or removed by another process
        if path.endswith(".arrow"):
            self._remove_quietly(path + _SUM_SUFFIX)
            with _VERIFIED_LOCK:
                _VERIFIED.pop(path, None)
        warnings.warn(
            f"bioanon cache: entry {path} is unreadable ({type(error).__name__}: {error}); "
            f"moved it to {dest} and treated it as a miss",
            CacheWarning,
            stacklevel=3,
        )

    # -- tables ----------------------------------------------------------------------------------------------

    def has_table(self, key: str) -> bool:
        """Whether a table entry for ``key`` exists with its checksum (it is not opened)."""
        path = self.table_path(key)
        return self._exists(path) and self._exists(path + _SUM_SUFFIX)

    def _intact(self, path: str) -> bool:
        """Whether the table file at ``path`` matches its checksum; a damaged one is moved aside (False)."""
        try:
            self._open_verified(path)
        except FileNotFoundError:
            return False
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
            self._quarantine(path, exc)
            return False
        return True

    def _open_verified(
        self, path: str, columns: Sequence[str] | None = None, rows: tuple[int, int] | None = None
    ) -> tuple[pa.Table, os.stat_result | None]:
        """The Arrow table at ``path`` (memory-mapped on local disks), its bytes checked against its ``.sha256`` (once
        per process for an unchanged local file, or once per run: :func:`add_checked_tables`) and its data validated; as
        stored (a column in the compact audio encoding stays encoded: :mod:`bioanon.cache.pcm16`). ``columns``: a
        compressed column not among them is not read. ``rows`` (start, stop): a plain table's rows ``[start, stop)``
        only (of a compressed table, only the record batches that hold them are read); a row selection or concatenation
        entry comes back whole. Raises FileNotFoundError, :class:`DamagedEntry` or Arrow's errors."""
        stat = os.stat(path) if self._local else None
        source = pa.memory_map(path, "r") if self._local else self.fs.open_input_file(path)
        ident = _identity(stat) if stat is not None else None
        with _VERIFIED_LOCK:
            checked = ident is not None and _VERIFIED.get(path) == ident
        if not checked:
            expected = self._read_bytes(path + _SUM_SUFFIX)
            if expected is None:
                raise DamagedEntry("its checksum file is missing (damaged, or written by an older bioanon)")
            if self._local:  # read, not through the memory map: hashing would map every page into this process
                with open(path, "rb") as f:
                    actual = _sha256_stream(f)
            else:
                with self.fs.open_input_stream(path) as f:
                    actual = _sha256_stream(f)
            if actual.encode() != expected.strip():
                raise DamagedEntry("its bytes do not match its checksum")
        reader = pa.ipc.open_file(source)
        packed = encoded(reader.schema)
        if packed and columns is not None:
            reader = pa.ipc.open_file(source, options=read_options(reader.schema, column_names(reader.schema, columns)))
        meta = reader.schema.metadata or {}
        plain = _ROWS_OF not in meta and _CONCAT_OF not in meta
        if rows is not None and plain and packed:
            tbl, first = batch_rows(reader, *rows)
            tbl = tbl.slice(rows[0] - first, rows[1] - rows[0])
        else:
            tbl = reader.read_all()
            tbl = tbl.slice(rows[0], rows[1] - rows[0]) if rows is not None and plain else tbl
        tbl.validate(full=True)
        if ident is not None and not checked:
            with _VERIFIED_LOCK:
                _VERIFIED[path] = ident
        return tbl, stat

    def put_table(self, key: str, table: Any) -> str:
        """Store ``table`` (SampleTable, ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``) under ``key``.

        Atomic: readers see the whole file or none. If the entry already exists nothing is written (the
        content is addressed by the key). Returns the entry's path on the cache filesystem.
        """
        path = self.table_path(key)
        reader = table if isinstance(table, pa.RecordBatchReader) else None
        tbl = None if reader is not None else _as_table(table, "put_table")
        if self._exists(path) and self._intact(path):
            return path
        packed = False
        if reader is not None:

            def write(sink: Any) -> None:
                with pa.ipc.new_file(sink, reader.schema) as writer:
                    for batch in reader:
                        writer.write_batch(batch)
        else:
            assert tbl is not None  # for mypy: set whenever there is no reader
            stored, packed = encode_pcm16(tbl)  # 16-bit audio: 2.4x smaller, the same values when read
            options = pa.ipc.IpcWriteOptions(compression="zstd") if packed else None
            stored = with_row_batches(stored) if packed else stored  # a range of rows reads only its batches

            def write(sink: Any) -> None:
                with pa.ipc.new_file(sink, stored.schema, options=options) as writer:
                    for batch in stored.to_batches():
                        writer.write_batch(batch)

        if self._atomic_write(path, write, checksum=True):
            self._count("writes")
            if tbl is not None and packed:
                self._remember_decoded(path, tbl)  # what reading the entry gives back
        return path

    def _remember_decoded(self, path: str, tbl: pa.Table) -> None:
        if not self._local:
            return
        try:
            stat = os.stat(path)
        except OSError:
            return
        with _VERIFIED_LOCK:
            for gone in [p for p, (_, ref) in _DECODED.items() if ref() is None]:  # tables no longer held
                del _DECODED[gone]
            _DECODED[path] = (_identity(stat), weakref.ref(tbl))

    def _recall_decoded(self, path: str) -> pa.Table | None:
        """The decoded table of the compact entry at ``path`` while this process still holds it, else None."""
        with _VERIFIED_LOCK:
            known = _DECODED.get(path)
        if known is None:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if known[0] != _identity(stat):
            return None
        return cast("pa.Table | None", known[1]())

    def put_rows(self, key: str, base_key: str, rows: Any, schema_metadata: Any = None) -> str:
        """Store under ``key`` the rows ``rows`` (positions, in their order) of the stored table ``base_key``: a
        row selection, not a copy. :meth:`get_table` gives it back as that table's rows with ``schema_metadata``
        (the selection's own table metadata, e.g. its lineage; default: the base table's). The entry is a small
        table of row positions; the base table must stay in the cache (a selection whose base is gone reads as
        missing)."""
        positions = pa.array(np.asarray(rows, dtype=np.int64))
        meta = {k: v for k, v in (schema_metadata or {}).items() if k != _ROWS_OF}
        meta[_ROWS_OF] = self._check_key(base_key).encode()
        meta[_HAS_META] = b"1" if schema_metadata is not None else b"0"
        return self.put_table(key, pa.table({"row": positions}).replace_schema_metadata(meta))

    def put_concat(self, key: str, part_keys: Sequence[str], schema_metadata: Any = None) -> str:
        """Store under ``key`` the stored tables ``part_keys`` one after the other (e.g. the shards of a table
        computed as separate tasks): a list of keys, not a copy. :meth:`get_table` gives back their rows in order
        (memory-mapped, one chunk per part) with ``schema_metadata`` (default: the first part's); the parts must
        have the same columns and stay in the cache (a concatenation with a part gone reads as missing)."""
        if not part_keys:
            raise CacheError("put_concat: no part to concatenate")
        meta = {k: v for k, v in (schema_metadata or {}).items() if k not in (_CONCAT_OF, _ROWS_OF)}
        meta[_CONCAT_OF] = json.dumps([self._check_key(k) for k in part_keys]).encode()
        meta[_HAS_META] = b"1" if schema_metadata is not None else b"0"
        return self.put_table(
            key, pa.table({"part": pa.array(range(len(part_keys)), pa.int64())}).replace_schema_metadata(meta)
        )

    def _resolve_concat(self, path: str, tbl: pa.Table, columns: Sequence[str] | None = None) -> Any:
        """The parts' rows of a concatenation entry (see :meth:`put_concat`), one after the other; None if a part
        is gone, or the entry is moved aside when the parts do not fit together."""
        meta = dict(tbl.schema.metadata or {})
        parts = []
        for k in json.loads(meta.pop(_CONCAT_OF)):
            part = self.get_table(k, columns=columns)
            if part is None:
                return None
            parts.append(part.arrow if hasattr(part, "arrow") else part)
        first = parts[0].schema
        if any(not p.schema.equals(first, check_metadata=False) for p in parts[1:]):
            self._quarantine(path, ValueError("the parts of a concatenation have different columns"))
            return None
        own = meta.pop(_HAS_META) == b"1"
        whole = pa.concat_tables([p.replace_schema_metadata(first.metadata) for p in parts])
        return _wrap_table(whole.replace_schema_metadata(meta) if own else whole)

    def _resolve_rows(
        self,
        path: str,
        tbl: pa.Table,
        stat: os.stat_result | None,
        columns: Sequence[str] | None = None,
        take: np.ndarray | None = None,
    ) -> Any:
        """The base table's rows of a row-selection entry (see :meth:`put_rows`); None if the base is gone or
        the entry does not fit it (then moved aside). ``take``: only these of the entry's rows, taken from the
        base at once (no copy of the others)."""
        meta = dict(tbl.schema.metadata or {})
        base = self.get_table(meta.pop(_ROWS_OF).decode(), columns=columns)
        if base is None:
            return None
        rows = to_numpy(tbl.column("row")) if tbl.num_columns == 1 else None
        base_tbl = base.arrow if hasattr(base, "arrow") else base
        if rows is None or (rows.size and (rows.min() < 0 or rows.max() >= base_tbl.num_rows)):
            self._quarantine(path, ValueError("row selection does not fit its base table"), stat)
            return None
        if take is not None:
            rows = rows[_checked_take(take, rows.size)]
        taken = base_tbl if rows.size == base_tbl.num_rows and np.array_equal(rows, np.arange(rows.size)) else None
        taken = take_rows(base_tbl, rows) if taken is None else taken  # all rows in order: memory-mapped as is
        if meta.pop(_HAS_META) == b"1":
            taken = taken.replace_schema_metadata(meta)
        return _wrap_table(taken)

    def get_table(
        self,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        rows: tuple[int, int] | None = None,
        take: Any = None,
    ) -> Any:
        """The stored table for ``key`` as a SampleTable (memory-mapped on local disks), or ``None``.

        An unreadable entry (truncated, corrupt) is moved aside as ``*.corrupt`` with a
        :class:`CacheWarning` and counts as a miss. A row selection (:meth:`put_rows`) gives its base table's
        rows. ``columns``: only these columns (e.g. ``("subject", "sample_id")``), so a row selection copies
        none of the payloads; a name ending in ``*`` stands for every column that starts with the rest
        (``"attr.*"``: all attributes, none when there are none). ``rows`` (start, stop): only the rows
        ``[start, stop)`` (of 16-bit audio stored compact, only those are decompressed). ``take``: only the rows
        at these positions, in this order (of a row selection or a concatenation, only they are copied; not with
        ``rows``).
        """
        if rows is not None and not 0 <= rows[0] <= rows[1]:
            raise CacheError(f"get_table: rows {rows} is not a range (start, stop) with 0 <= start <= stop")
        if take is not None:
            if rows is not None:
                raise CacheError("get_table: give rows or take, not both")
            take = np.asarray(take)
            if take.ndim != 1 or (take.size and take.dtype.kind not in "iu"):
                raise CacheError(f"get_table: take must be a list of row positions, got {take.dtype} {take.shape}")
            take = take.astype(np.int64, copy=False)
        path = self.table_path(key)
        if columns is None and rows is None and self._local:
            held = self._recall_decoded(path)
            if held is not None:
                self._touch(path)
                self._count("hits")
                return _wrap_table(held if take is None else take_rows(held, _checked_take(take, held.num_rows)))
        stat = None
        try:
            tbl, stat = self._open_verified(path, columns, rows)
        except FileNotFoundError:
            self._count("misses")
            return None
        except PermissionError as exc:
            raise CacheError(f"cannot read cache entry {path}: {exc}") from exc
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:  # DamagedEntry is a ValueError
            if not self._local and not self._exists(path):
                self._count("misses")
                return None
            self._quarantine(path, exc, stat)
            self._count("misses")
            return None
        self._touch(path)
        resolved: Any = _MISSING
        if _ROWS_OF in (tbl.schema.metadata or {}):
            resolved = self._resolve_rows(path, tbl, stat, columns, take)
            take = None  # taken from the base
        elif _CONCAT_OF in (tbl.schema.metadata or {}):
            resolved = self._resolve_concat(path, tbl, columns)
        if resolved is not _MISSING:
            self._count("hits" if resolved is not None else "misses")
            if resolved is None or (rows is None and take is None):
                return resolved
            whole = resolved.arrow if hasattr(resolved, "arrow") else resolved
            if take is not None:
                return _wrap_table(take_rows(whole, _checked_take(take, whole.num_rows)))
            start, stop = cast(tuple[int, int], rows)
            return _wrap_table(whole.slice(start, stop - start))
        self._count("hits")
        if columns is not None:  # first (a view): the rows taken below are copied without the other columns
            tbl = tbl.select(column_names(tbl.schema, columns))
        if take is not None:  # a memory-mapped table: only the rows taken are copied
            tbl = take_rows(tbl, _checked_take(take, tbl.num_rows))
        if not encoded(tbl.schema):
            return _wrap_table(tbl)
        decoded = decode_pcm16(tbl)
        if columns is None and rows is None and take is None:
            self._remember_decoded(path, decoded)
        return _wrap_table(decoded)

    def get_or_compute_table(self, key: str, fn: Callable[[], Any]) -> Any:
        """The cached table for ``key``; on a miss, ``fn()`` computes it and it is stored.

        If storing fails (e.g. disk full), a :class:`CacheWarning` is issued and the computed table is still
        returned.
        """
        cached = self.get_table(key)
        if cached is not None:
            return cached
        result = fn()
        if isinstance(result, pa.RecordBatchReader):  # streamed: store, then read back memory-mapped
            self.put_table(key, result)
            stored = self.get_table(key)
            if stored is None:
                raise CacheError(f"table {key} could not be read back after storing it")
            return stored
        try:
            self.put_table(key, result)
        except CacheError as exc:
            warnings.warn(f"bioanon cache: could not store table {key}: {exc}", CacheWarning, stacklevel=2)
        if getattr(result, "arrow", None) is not None and not isinstance(result, pa.Table):
            return result
        return _wrap_table(_as_table(result, "get_or_compute_table"))

    # -- JSON --------------------------------------------------------------------------------------------------

    # -- per-sample results ----------------------------------------------------------------------------------

    def put_sample_rows(self, namespace: str, digests: Any, values: Any) -> None:
        """Store one result row per sample (``values[i]`` for the sample whose content digest is ``digests[i]``)
        under ``namespace`` (a key: the function and its parameters). Entries are immutable tables written
        atomically; a namespace gathers them, so a later call that meets the same samples in another table (a
        new split, other rates, another selection) finds their rows (:meth:`sample_rows`)."""
        values = np.ascontiguousarray(values)
        digests = [str(d) for d in digests]
        if len(digests) != len(values):
            raise CacheError(f"put_sample_rows: {len(digests)} digests for {len(values)} rows")
        if not digests:
            return
        from .keys import fingerprint

        flat = values.reshape(len(values), -1)
        column = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), max(flat.shape[1], 1))
        meta = {b"dtype": values.dtype.str.encode(), b"shape": json.dumps(list(values.shape[1:])).encode()}
        tbl = pa.table({"digest": pa.array(digests, pa.string()), "value": column}).replace_schema_metadata(meta)
        key = fingerprint({"namespace": namespace, "digests": digests})
        path = f"{self._samples_dir(namespace)}/{key}.arrow"
        if self._exists(path):
            return

        def write(sink: Any) -> None:
            with pa.ipc.new_file(sink, tbl.schema) as writer:
                writer.write_table(tbl)

        if self._atomic_write(path, write, checksum=True):
            self._count("writes")

    def sample_rows(self, namespace: str, digests: Any) -> tuple[np.ndarray | None, np.ndarray]:
        """The rows stored under ``namespace`` for the samples ``digests`` (see :meth:`put_sample_rows`):
        ``(values, found)``, ``values`` in the order of ``digests`` (rows not found are zeros; None when none
        is found) and ``found`` a boolean mask. An unreadable entry is moved aside and its rows count as not
        found."""
        digests = np.asarray([str(d) for d in digests], dtype=object)
        found = np.zeros(len(digests), dtype=bool)
        values: np.ndarray | None = None
        selector = pafs.FileSelector(self._samples_dir(namespace), allow_not_found=True)
        try:
            infos = [i for i in self.fs.get_file_info(selector) if _classify(i.base_name) == "entry"]
        except (pa.ArrowException, OSError) as exc:
            raise CacheError(f"cannot list cache {self.uri}: {exc}") from exc
        import pyarrow.compute as pc

        wanted = pa.array(digests.tolist(), pa.string())
        for info in sorted(infos, key=lambda i: i.path):
            if found.all():
                break
            try:
                tbl, _stat = self._open_verified(info.path)
                meta = tbl.schema.metadata or {}
                dtype, shape = np.dtype(meta[b"dtype"].decode()), tuple(json.loads(meta[b"shape"]))
            except FileNotFoundError:
                continue
            except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
                self._quarantine(info.path, exc)
                continue
            pos = to_numpy(pc.index_in(wanted, value_set=tbl.column("digest")))
            take = ~found & ~np.isnan(pos.astype(float))
            if not take.any():
                continue
            flat = to_numpy(tbl.column("value").combine_chunks().flatten())
            rows = flat.reshape((tbl.num_rows, *shape)).astype(dtype, copy=False)
            if values is None:
                values = np.zeros((len(digests), *shape), dtype=dtype)
            values[take] = rows[pos[take].astype(np.int64)]
            found |= take
            self._touch(info.path)
        self._count("hits" if found.any() else "misses")
        return values, found

    def has_json(self, key: str) -> bool:
        """Whether a JSON entry for ``key`` exists."""
        return self._exists(self.json_path(key))

    def put_json(self, key: str, value: Any) -> str:
        """Store a JSON-able ``value`` under ``key`` (atomic; skipped if present). Returns the entry's path.

        Encoded with sorted keys; tuples become lists, numpy scalars/arrays become numbers/lists, NaN and
        infinities are kept (as JSON's ``NaN``/``Infinity`` extension). Never pickled.
        """
        path = self.json_path(key)
        if self._exists(path):
            return path
        try:
            data = json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
            ).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise CacheError(f"cannot store JSON entry {key}: {exc}") from exc
        framed = _frame(data)
        if self._atomic_write(path, lambda sink: sink.write(framed)):
            self._count("writes")
        return path

    def _lookup_json(self, key: str) -> Any:
        path = self.json_path(key)
        raw = self._read_bytes(path)
        if raw is None:
            self._count("misses")
            return _MISSING
        try:
            value = json.loads(_unframe(raw).decode("utf-8"))
        except ValueError as exc:  # DamagedEntry, JSONDecodeError and UnicodeDecodeError
            self._quarantine(path, exc)
            self._count("misses")
            return _MISSING
        self._touch(path)
        self._count("hits")
        return value

    def discard_json(self, key: str) -> None:
        """Remove the JSON entry ``key`` (a record whose outputs are gone: it is computed again)."""
        self._remove_quietly(self.json_path(key))

    def get_json(self, key: str, default: Any = None) -> Any:
        """The stored JSON value for ``key``, or ``default`` on a miss (unreadable entries are moved aside)."""
        value = self._lookup_json(key)
        return default if value is _MISSING else value

    def get_or_compute_json(self, key: str, fn: Callable[[], Any]) -> Any:
        """The cached JSON value for ``key``; on a miss, ``fn()`` computes it and it is stored.

        Returns the value as read back from JSON would look (tuples as lists), also on a miss, so a first and
        a second run return equal values.
        """
        value = self._lookup_json(key)
        if value is not _MISSING:
            return value
        result = fn()
        try:
            self.put_json(key, result)
        except CacheError as exc:
            warnings.warn(f"bioanon cache: could not store JSON {key}: {exc}", CacheWarning, stacklevel=2)
            return result
        return json.loads(json.dumps(result, default=_json_default))

    # -- blobs (opaque bytes, e.g. trained network weights) ------------------------------------------------

    def has_blob(self, key: str) -> bool:
        """Whether a blob entry for ``key`` exists."""
        return self._exists(self._path("blobs", key))

    def put_blob(self, key: str, data: bytes) -> str:
        """Store opaque bytes under ``key`` (atomic; skipped if present). Returns the entry's path. The caller
        chooses a format that never unpickles code (trained weights are read with ``torch.load(weights_only=True)``)."""
        path = self._path("blobs", key)
        if self._exists(path):
            return path
        framed = _frame(bytes(data))
        if self._atomic_write(path, lambda sink: sink.write(framed)):
            self._count("writes")
        return path

    def get_blob(self, key: str) -> bytes | None:
        """The stored bytes for ``key``, or None on a miss."""
        path = self._path("blobs", key)
        raw = self._read_bytes(path)
        if raw is not None:
            try:
                raw = _unframe(raw)
            except DamagedEntry as exc:
                self._quarantine(path, exc)
                raw = None
        self._count("misses" if raw is None else "hits")
        if raw is not None:
            self._touch(path)
        return raw

    def discard_blob(self, key: str, error: BaseException) -> None:
        """Move an unreadable blob aside (it is recomputed next time)."""
        self._quarantine(self._path("blobs", key), error)

    # -- maintenance ------------------------------------------------------------------------------------------

    def _walk(self) -> list[tuple[str, str, pafs.FileInfo]]:
        """(kind, class, info) of every file under ``tables/`` and ``json/``."""
        out = []
        for kind in ("tables", "json", "blobs", "samples"):
            selector = pafs.FileSelector(f"{self.root}/{kind}", recursive=True, allow_not_found=True)
            try:
                infos = self.fs.get_file_info(selector)
            except (pa.ArrowException, OSError) as exc:
                raise CacheError(f"cannot list cache {self.uri}: {exc}") from exc
            for info in infos:
                if info.type == pafs.FileType.File:
                    out.append((kind, _classify(info.base_name), info))
        return out

    def info(self) -> CacheInfo:
        """Counts and total size of the entries and of left-over files (checksum files count in the size)."""
        counts = {"tables": 0, "json": 0, "blobs": 0, "temp": 0, "corrupt": 0}
        total = 0
        for kind, cls, info in self._walk():
            if cls == "entry":
                counts["tables" if kind == "samples" else kind] += 1
            elif cls in counts:
                counts[cls] += 1
            total += info.size or 0
        return CacheInfo(
            self.uri, counts["tables"], counts["json"], total, counts["temp"], counts["corrupt"], counts["blobs"]
        )

    def quarantined(self) -> list[str]:
        """The paths of the entries moved aside as damaged (``*.corrupt``), oldest first."""
        found = [(info.mtime_ns or 0, info.path) for _kind, cls, info in self._walk() if cls == "corrupt"]
        return [path for _t, path in sorted(found)]

    def verify(self, progress: bool | None = False) -> dict[str, Any]:
        """Check every entry against its checksum (tables are read whole, and validated); a damaged one is moved
        aside (``*.corrupt``, with a :class:`CacheWarning`) so that the next run computes it again. Returns
        ``{"checked": n, "damaged": [paths]}``."""
        from ..log import progress_bar

        entries = [(kind, info) for kind, cls, info in self._walk() if cls == "entry"]
        damaged: list[str] = []
        for kind, info in progress_bar(entries, progress=progress, desc="verifying", unit="entry"):
            path = info.path
            try:
                if path.endswith(".arrow"):
                    with _VERIFIED_LOCK:
                        _VERIFIED.pop(path, None)
                    self._open_verified(path)
                else:
                    raw = self._read_bytes(path)
                    if raw is None:
                        continue
                    payload = _unframe(raw)
                    if kind == "json":
                        json.loads(payload.decode("utf-8"))
            except FileNotFoundError:
                continue  # removed meanwhile
            except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
                damaged.append(path)
                self._quarantine(path, exc)
        return {"checked": len(entries), "damaged": damaged}

    def clean(self, *, older_than_hours: float = 24.0) -> int:
        """Remove debris: temporary files of writers that are gone (their process no longer runs, or, where that
        cannot be told, older than ``older_than_hours``) and table checksum files whose table never appeared
        (older than ``older_than_hours``: a write in progress writes the checksum first). Entries and ``*.corrupt``
        files are kept (``clear`` removes those). Returns how many files were removed."""
        cutoff_ns = time.time_ns() - int(older_than_hours * 3600e9)
        removed = 0
        walked = self._walk()
        tables = {info.path for _k, cls, info in walked if cls == "entry" and info.path.endswith(".arrow")}
        for _kind, cls, info in walked:
            old = info.mtime_ns is not None and info.mtime_ns < cutoff_ns
            if cls == "temp":
                m = _TEMP_PID.search(info.base_name)
                if not (old or (m is not None and self._local and not pid_running(int(m.group(1))))):
                    continue
            elif cls == "sum":
                if not old or info.path[: -len(_SUM_SUFFIX)] in tables:
                    continue
            else:
                continue
            try:
                self.fs.delete_file(info.path)
                removed += 1
            except (pa.ArrowException, OSError):
                continue
        return removed

    def clear(self, *, older_than_days: float | None = None) -> int:
        """Remove entries, left-over temp files and moved-aside corrupt files; return how many were removed.

        With ``older_than_days``, only files last written (or, on local disks, last read: to the hour) longer ago
        than that.
        Without it, everything goes, including temp files of writes in progress (those writes then fail).
        Unknown files are left alone.
        """
        cutoff_ns = None
        if older_than_days is not None:
            if (
                isinstance(older_than_days, bool)
                or not isinstance(older_than_days, (int, float))
                or not math.isfinite(older_than_days)
                or older_than_days < 0
            ):
                raise CacheError(f"older_than_days must be a non-negative number, got {older_than_days!r}")
            cutoff_ns = time.time_ns() - int(older_than_days * 86400e9)
        removed = 0
        for _kind, cls, info in self._walk():
            if cls == "other":
                continue
            if cutoff_ns is not None:
                mtime = info.mtime_ns
                if mtime is None or mtime >= cutoff_ns:
                    continue
            try:
                self.fs.delete_file(info.path)
            except FileNotFoundError:
                continue
            except (pa.ArrowException, OSError) as exc:
                raise CacheError(f"cannot remove {info.path}: {exc}") from exc
            removed += cls != "sum"  # a table's checksum file goes with it, uncounted
        return removed


def _file_uri(path: str) -> str:
    from pathlib import Path

    return Path(path).as_uri()


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
