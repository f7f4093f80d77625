"""Reading numeric text files (CSV, TSV, whitespace) with errors that name the file and the line.

The fast path is pandas' C parser; when it fails or finds a missing value, the file is re-read line by line
(only then) to report the first problem precisely: ``<file>, line <n>: ...``.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bioanon.api import DataError

__all__ = ["MotionDataError", "MotionDataNotFound", "read_numeric", "require_path"]


class MotionDataError(DataError):
    """A motion data file or directory layout is malformed; the message names the file (and line). A
    :class:`~bioanon.errors.DataError` (so also a BioanonError and a ValueError); the name stays for code that
    catches it."""


class MotionDataNotFound(MotionDataError, FileNotFoundError):
    """A data path does not exist."""


def require_path(path: str | os.PathLike[str] | None, what: str, *, directory: bool | None = None) -> Path:
    """``path`` as a Path, or a :class:`MotionDataNotFound` naming it (``directory``: must be a dir / a file)."""
    if path is None:
        raise MotionDataNotFound(f"{what}: no path given")
    p = Path(os.fspath(path)).expanduser()
    if not p.exists():
        raise MotionDataNotFound(f"{what}: no such file or directory: {str(p)!r}")
    if directory is True and not p.is_dir():
        raise MotionDataError(f"{what}: {str(p)!r} is not a directory")
    if directory is False and not p.is_file():
        raise MotionDataError(f"{what}: {str(p)!r} is not a file")
    return p


def _split_line(line: str, delimiter: str | None) -> list[str]:
    """Fields of one text line."""
    if delimiter is None:
        return line.split()
    return next(csv.reader([line], delimiter=delimiter))


def _name(names: list[str], k: int) -> str:
    """Column name of field ``k``."""
    return names[k] if k < len(names) else f"field {k + 1}"


def _locate_problem(
    path: Path, delimiter: str | None, header: bool, need: list[int], names: list[str], n_fields: int | None
) -> str:
    """Scan the file line by line and describe the first problem (only called after the fast path failed)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        seen_header = not header
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            fields = _split_line(line, delimiter)
            if n_fields is None:  # like pandas: the first line fixes the number of fields
                n_fields = len(fields)
            if not seen_header:
                seen_header = True
                continue
            if n_fields is not None and len(fields) != n_fields:
                return f"{path}, line {lineno}: expected {n_fields} fields, found {len(fields)}"
            for k in need:
                if k >= len(fields):
                    return (
                        f"{path}, line {lineno}: missing value for column {_name(names, k)!r} "
                        f"(only {len(fields)} fields)"
                    )
                v = fields[k].strip()
                if v == "":
                    return f"{path}, line {lineno}: missing value in column {_name(names, k)!r}"
                try:
                    ok = math.isfinite(float(v))
                except ValueError:
                    ok = False
                if not ok:
                    return f"{path}, line {lineno}: non-numeric value {v[:40]!r} in column {_name(names, k)!r}"
    return f"{path}: cannot parse the file"


def read_numeric(
    path: str | os.PathLike,
    columns: Sequence[str | int],
    *,
    delimiter: str | None = ",",
    header: bool = True,
    n_fields: int | None = None,
) -> np.ndarray:
    """The numeric ``columns`` of a delimited text file as a float64 array (rows, len(columns)).

    Parameters
    ----------
    path : the file.
    columns : header names (with ``header``) or 0-based field indices.
    delimiter : ``","``, ``"\\t"``…, or ``None`` for runs of whitespace.
    header : the first non-blank line holds column names.
    n_fields : the exact number of fields every data line must have (None: not checked).

    Raises
    ------
    MotionDataNotFound
        If the file does not exist.
    MotionDataError
        Naming the file and, where it applies, the line: empty file, no data rows, missing columns, a wrong
        number of fields, a missing or non-numeric value.
    """
    import pandas as pd

    p = require_path(path, "motion data file", directory=False)
    with open(p, "rb") as f:
        head = f.read(65536)
    if not head.strip():  # zero bytes, or only blank lines
        raise MotionDataError(f"{p}: the file is empty")
    sep = r"\s+" if delimiter is None else delimiter
    try:
        df = pd.read_csv(p, sep=sep, header=0 if header else None, engine="c", skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise MotionDataError(f"{p}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        where = _locate_problem(p, delimiter, header, [], [], n_fields)
        raise MotionDataError(where if "line" in where else f"{where}: {e}") from None
    names = [str(c) for c in df.columns] if header else [f"field {i + 1}" for i in range(df.shape[1])]
    if header:
        missing = [c for c in columns if str(c) not in names]
        if missing:
            shown = ", ".join(repr(n) for n in names if not n.startswith("Unnamed"))
            raise MotionDataError(
                f"{p}, line 1: missing column(s) {', '.join(repr(str(m)) for m in missing)}; "
                f"the header has {shown or 'no named columns'}"
            )
        idx = [names.index(str(c)) for c in columns]
    else:
        idx = [int(c) for c in columns]
        if idx and max(idx) >= df.shape[1]:
            raise MotionDataError(
                _locate_problem(p, delimiter, header, idx, names, max(idx) + 1)
                if len(df)
                else f"{p}: expected at least {max(idx) + 1} fields"
            )
    if len(df) == 0:
        raise MotionDataError(f"{p}: no data rows" + (" (only a header)" if header else ""))
    if n_fields is not None and (df.shape[1] != n_fields or df.isna().to_numpy().any()):  # short lines pad NaN
        raise MotionDataError(_locate_problem(p, delimiter, header, list(range(n_fields)), names, n_fields))
    sub = df.iloc[:, idx]
    numeric = all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in sub.dtypes)
    values = sub.to_numpy(dtype=np.float64) if numeric else None
    if values is None or not np.isfinite(values).all():  # re-read line by line to name the first bad cell
        raise MotionDataError(_locate_problem(p, delimiter, header, idx, names, n_fields))
    return values
