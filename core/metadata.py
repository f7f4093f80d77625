"""Joining a metadata file (attributes per file or per subject) onto the files of a data set.

Every dataset source that reads a metadata/attribute file next to its data follows these rules:

* **Key columns.** A column named (in any case) ``file``, ``path``, ``filename``, ``file_name``, ``filepath`` or
  ``file_path`` identifies a file; ``subject``, ``speaker``, ``subject_id``, ``speaker_id``, ``identity``,
  ``person``, ``participant`` or ``user`` identifies a subject. A file has at most one column of each kind
  (two are ambiguous: an error). Key columns never become attributes, and neither does a repeated column name.
* **Per file or per subject.** A metadata file with a file column is *per file*: each row gives the attributes
  of the one file its key names (a path relative to the data root, ``/``-separated, e.g. ``ann/u0.wav``). If it
  also has a subject column, that subject must be the file's subject in the folder layout. A metadata file with
  only a subject column is *per subject*: its attributes go to every file of that subject.
* **Duplicates.** Two rows for one file are an error naming the file and the lines. Several rows for one
  subject are allowed only when they agree; conflicting values are an error naming the subject, the columns
  and the lines.
* **Coverage.** A per-file row naming no file of the data set is an error (it usually means the paths are
  relative to another folder). A per-subject row naming a subject that is not in the data set is ignored (a
  speaker list may cover more speakers than one subset), unless no row names any subject: an error. Files
  (or subjects) without a row get null attributes and a :class:`MetadataWarning` naming them.

Errors are :class:`~bioanon.errors.DataError` naming the metadata file, the column and the offending keys and
lines.
"""

from __future__ import annotations

import csv
import io
import math
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from .errors import DataError
from .fileio import parse_cell, uniform_column

__all__ = [
    "FILE_COLUMNS",
    "SUBJECT_COLUMNS",
    "Metadata",
    "MetadataWarning",
    "file_key",
    "key_columns",
    "read_metadata_csv",
]

FILE_COLUMNS = ("file", "path", "filename", "file_name", "filepath", "file_path")
SUBJECT_COLUMNS = ("subject", "speaker", "subject_id", "speaker_id", "identity", "person", "participant", "user")
_SHOW = 5  # offending keys named in a message


class MetadataWarning(UserWarning):
    """Files or subjects of a data set have no row in its metadata file (their attributes are null)."""


def file_key(text: str) -> str:
    """A file key as compared: stripped, ``/``-separated, without ``./``."""
    return PurePosixPath(text.strip().replace("\\", "/")).as_posix()


def _listing(items: Sequence[str]) -> str:
    more = f" … and {len(items) - _SHOW} more" if len(items) > _SHOW else ""
    return ", ".join(items[:_SHOW]) + more


def _lines(lines: Iterable[int]) -> str:
    lines = list(lines)
    return ("line " if len(lines) == 1 else "lines ") + ", ".join(map(str, lines))


def key_columns(header: Sequence[str], where: str) -> tuple[str | None, str | None]:
    """The (file column, subject column) of a header, each None when absent; two of a kind are an error."""
    found = []
    for kind, names in (("file", FILE_COLUMNS), ("subject", SUBJECT_COLUMNS)):
        cols = [h for h in header if h.strip().lower() in names]
        if len(cols) > 1:
            raise DataError(f"{where}:1: columns {cols} all name the {kind}; keep one")
        found.append(cols[0] if cols else None)
    return found[0], found[1]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@dataclass
class Metadata:
    """Rows of a metadata file: their keys, line numbers and attribute columns (see the module docs).

    ``per`` is ``"file"`` or ``"subject"``; ``key_column`` names the key column (for messages); ``subjects``
    holds a per-file file's subject column (``subject_column``), checked against the layout."""

    source: str
    per: Literal["file", "subject"]
    key_column: str
    keys: list[str]
    lines: list[int]
    columns: dict[str, list[Any]] = field(default_factory=dict)
    subject_column: str | None = None
    subjects: list[str | None] | None = None

    def __post_init__(self) -> None:
        self.keys = [file_key(k) if self.per == "file" else k.strip() for k in self.keys]
        empty = [ln for k, ln in zip(self.keys, self.lines, strict=True) if k in ("", ".")]
        if empty:
            raise DataError(f"{self.source}: empty {self.key_column!r} on {_lines(empty[:_SHOW])}")

    @property
    def attribute_names(self) -> list[str]:
        return list(self.columns)

    def _where(self) -> str:
        return f"{self.source}: column {self.key_column!r}"

    # ------------------------------------------------------------------------------------------ per file
    def _file_index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        dups: dict[str, list[int]] = {}
        for i, k in enumerate(self.keys):
            if k in index:
                dups.setdefault(k, [self.lines[index[k]]]).append(self.lines[i])
            else:
                index[k] = i
        if dups:
            raise DataError(
                f"{self._where()}: duplicate file keys (each file may have one row): "
                + _listing([f"{k!r} ({_lines(v)})" for k, v in dups.items()])
            )
        return index

    def match_files(
        self,
        files: Sequence[str],
        subjects: Sequence[str] | None = None,
        *,
        other_files: Iterable[str] = (),
        warn: bool = True,
    ) -> list[int | None]:
        """The row of each of ``files`` (keys relative to the data root; None: no row), after the checks.

        ``subjects`` are the files' subjects in the layout, checked against a subject column; rows naming one
        of ``other_files`` (files present but not loaded) are no error."""
        index = self._file_index()
        files = [file_key(f) for f in files]
        pos = [index.get(f) for f in files]
        used = set(pos)
        used.update(index[f] for f in map(file_key, other_files) if f in index)
        unmatched = [i for i in range(len(self.keys)) if i not in used]
        if unmatched:
            example = f" such as {files[0]!r}" if files else ""
            raise DataError(
                f"{self._where()}: {len(unmatched)} row(s) name no file of the data set: "
                + _listing([f"{self.keys[i]!r} (line {self.lines[i]})" for i in unmatched])
                + f"; keys are paths relative to the data root{example}"
            )
        if self.subjects is not None and subjects is not None:
            bad = [
                f"{f!r}: {self.subjects[i]!r} on line {self.lines[i]}, but the layout says {s!r}"
                for f, s, i in zip(files, subjects, pos, strict=True)
                if i is not None and self.subjects[i] not in (None, "") and self.subjects[i] != str(s)
            ]
            if bad:
                raise DataError(
                    f"{self.source}: column {self.subject_column!r} disagrees with the folder layout "
                    "for " + _listing(bad)
                )
        if warn:
            missing = [f for f, i in zip(files, pos, strict=True) if i is None]
            if missing:
                warnings.warn(
                    f"{self.source}: {len(missing)} of {len(files)} files have no row (their attributes "
                    f"are null): " + _listing([repr(m) for m in missing]),
                    MetadataWarning,
                    stacklevel=3,
                )
        return pos

    # ------------------------------------------------------------------------------------------ per subject
    def _subject_index(self) -> dict[str, int]:
        groups: dict[str, list[int]] = {}
        for i, k in enumerate(self.keys):
            groups.setdefault(k, []).append(i)
        conflicts = []
        for k, rows in groups.items():
            if len(rows) < 2:
                continue
            cols = [c for c, v in self.columns.items() if any(not _same(v[rows[0]], v[r]) for r in rows[1:])]
            if cols:
                conflicts.append(f"{k!r} ({_lines(self.lines[r] for r in rows)}: {', '.join(map(repr, cols))} differ)")
        if conflicts:
            raise DataError(
                f"{self._where()}: conflicting rows for a subject (a per-subject file needs one value "
                "per subject; add a file column for per-file values): " + _listing(conflicts)
            )
        return {k: rows[0] for k, rows in groups.items()}

    def match_subjects(self, subjects: Sequence[str], *, warn: bool = True) -> list[int | None]:
        """The row of each sample's subject (None: no row), after the checks."""
        index = self._subject_index()
        subjects = [str(s) for s in subjects]
        pos = [index.get(s) for s in subjects]
        if index and subjects and all(p is None for p in pos):
            raise DataError(
                f"{self._where()}: no row names a subject of the data set (rows name e.g. "
                f"{_listing([repr(k) for k in list(index)[:3]])}; the subjects are e.g. "
                f"{_listing([repr(s) for s in sorted(set(subjects))[:3]])})"
            )
        if warn:
            missing = sorted({s for s, p in zip(subjects, pos, strict=True) if p is None})
            if missing:
                warnings.warn(
                    f"{self.source}: {len(missing)} subject(s) have no row (their attributes are null): "
                    + _listing([repr(m) for m in missing]),
                    MetadataWarning,
                    stacklevel=3,
                )
        return pos

    # ------------------------------------------------------------------------------------------ joining
    def match(self, files: Sequence[str], subjects: Sequence[str], **kw: Any) -> list[int | None]:
        """The row of each file: per file by its key, per subject by its subject."""
        if self.per == "file":
            return self.match_files(files, subjects, **kw)
        return self.match_subjects(subjects, **kw)

    def take(self, pos: Sequence[int | None]) -> dict[str, list[Any]]:
        """The attribute columns for the rows ``pos`` (None: null), one type per column."""
        return {c: uniform_column([None if i is None else v[i] for i in pos]) for c, v in self.columns.items()}

    def join(self, files: Sequence[str], subjects: Sequence[str], **kw: Any) -> dict[str, list[Any]]:
        """Attribute columns aligned with ``files`` (see :meth:`match`)."""
        return self.take(self.match(files, subjects, **kw))


def read_csv_rows(
    path: Path, what: str = "metadata file", error: type[Exception] = DataError
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """A CSV's header (stripped, no repeated names) and an iterator of its non-blank rows with their line numbers,
    every row as long as the header (checked as they are read, so header problems come first); ``error`` naming
    the file and line for anything else."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read the {what}: {e}") from None
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise error(f"{path}: the {what} is empty (expected a header row)") from None
    except csv.Error as e:
        raise error(f"{path}:1: not a readable CSV ({e})") from None
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise error(f"{path}:1: column(s) {repeated} appear more than once in the header of the {what}")

    def rows() -> Iterator[tuple[int, list[str]]]:
        try:
            for line, row in enumerate(reader, start=2):
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    raise error(f"{path}:{line}: {len(row)} cells, but the header has {len(header)} columns")
                yield line, row
        except csv.Error as e:
            raise error(f"{path}:{reader.line_num}: not a readable CSV ({e})") from None

    return header, rows()


def read_metadata_csv(
    path: str | os.PathLike[str], *, per: Literal["file", "subject"] | None = None, parse: bool = True
) -> Metadata:
    """A metadata CSV (header row; blank lines skipped) as :class:`Metadata`.

    ``per`` forces the kind (its key column must exist); by default a file column makes it per file, else a
    subject column per subject. Cells are parsed (numbers, empty = null) unless ``parse`` is false."""
    p = Path(path)
    header, rows = read_csv_rows(p)
    file_col, subject_col = key_columns(header, str(p))
    if per == "subject":
        file_col = None
    if (
        (per == "file" and file_col is None)
        or (per == "subject" and subject_col is None)
        or (file_col is None and subject_col is None)
    ):
        need = {"file": FILE_COLUMNS, "subject": SUBJECT_COLUMNS}.get(per or "", FILE_COLUMNS + SUBJECT_COLUMNS)
        raise DataError(
            f"{p}:1: the metadata file has no key column (one of {', '.join(need)}); its header is {header}"
        )
    key = file_col or subject_col
    assert key is not None
    attr_cols = [h for h in header if h and h not in (file_col, subject_col)]
    cells: dict[str, list[Any]]
    keys, subjects, lines, cells = [], [], [], {c: [] for c in attr_cols}
    cast = parse_cell if parse else (lambda v: v.strip() or None)
    for line, row in rows:
        rec = dict(zip(header, row, strict=True))
        keys.append(rec[key])
        subjects.append(rec[subject_col].strip() if file_col and subject_col else None)
        lines.append(line)
        for c in attr_cols:
            cells[c].append(cast(rec[c]))
    if file_col:
        return Metadata(
            str(p),
            "file",
            file_col,
            keys,
            lines,
            cells,
            subject_col if subject_col else None,
            subjects if subject_col else None,
        )
    return Metadata(str(p), "subject", key, keys, lines, cells)
