"""Sanity checks of an imported data set, and the policy that decides what a problem does (``[dataset] on_bad``).

:func:`find_problems` reads a :class:`~bioanon.table.SampleTable` with numpy/Arrow reductions per column (no
loop over samples) and returns what is wrong, each :class:`Problem` naming its column and samples:

- **float payloads**: non-finite values, or values beyond a float32-safe bound: ``|x| > FEATURE_BOUND`` (1e30;
  float32 ends at 3.4e38, so such a value overflows at the first product or relative noise);
- **audio** (the ``audio`` payload, float samples expected in [-1, 1]): ``|x| > AUDIO_BOUND`` (1e3), and
  utterances shorter than ``min_duration`` seconds (default :data:`MIN_DURATION`, 0.1 s) at their sample rate
  (the ``sample_rate`` column, else the table metadata's ``sample_rate``);
- **attribute columns**: non-finite numbers (``nan``, ``inf``), and text columns that mix number cells with
  text cells (a CSV column of numbers with a cell ``x``, ``nan`` or ``inf`` is read as text: every value
  becomes a string); the bad samples are the cells of the rarer kind (ties: the text cells);
- **unread files**: files a data source found in the data folder but could not read as a sample (listed by the
  source in the table metadata under :data:`UNREAD_FILES`, e.g. a ``.txt`` in a speaker folder).

:func:`check_data` applies the policy ``on_bad``: ``"error"`` (default) raises a
:class:`~bioanon.errors.DataError` listing the problems, so that no number is computed from them; ``"skip"``
drops the samples at fault (and lists the unread files) in one warning; ``"warn"`` keeps them with a warning.
The warnings are kept in the table metadata under ``load_warnings`` (an evaluation lists them first).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_numpy import scalar, to_numpy
from .errors import DataError
from .table_schema import ATTR_PREFIX, LOAD_WARNINGS, SAMPLE_ID, SAMPLE_RATE

if TYPE_CHECKING:
    from .table import SampleTable

log = logging.getLogger("bioanon.sanity")

ON_BAD = ("error", "skip", "warn")
"""The values of ``[dataset] on_bad``."""
FEATURE_BOUND = 1e30
"""Largest magnitude accepted in a float payload other than audio."""
AUDIO_BOUND = 1e3
"""Largest magnitude accepted in the ``audio`` payload (float audio lies in [-1, 1])."""
MIN_DURATION = 0.1
"""Shortest accepted utterance of the ``audio`` payload, in seconds."""
UNREAD_FILES = "unread_files"
"""Table metadata key: files a data source found in its data folder but did not read as samples, as
``{"file": path, "reason": text}``; :func:`check_data` treats them as problems."""

SANITY_VERSION = 1
"""Part of the import cache key: raise it when the checks change, so that imports are checked again."""

_SHOW = 5
_BLOCK = 1 << 22  # elements per block of a payload's reductions
_NUMBER = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"
_INTEGER = r"^\s*[+-]?\d+\s*$"


@attrs.frozen
class Problem:
    """What is wrong with the samples at ``rows`` (row positions) of ``column``; ``files`` for unread files."""

    column: str
    what: str
    rows: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.int64), eq=False)
    files: tuple[str, ...] = ()

    def describe(self, ids: np.ndarray) -> str:
        """One line: the column, what is wrong, and the first sample ids (``ids``: the table's sample ids)."""
        if self.files:
            more = " …" if len(self.files) > _SHOW else ""
            return f"{len(self.files)} file(s) not read ({self.what}): {', '.join(self.files[:_SHOW])}{more}"
        shown = ", ".join(repr(str(s)) for s in ids[self.rows[:_SHOW]])
        more = " …" if self.rows.size > _SHOW else ""
        return f"column {self.column!r}: {self.what} in {self.rows.size} sample(s): {shown}{more}"


def _rows_of_flat(offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The list rows holding the flat ``positions`` (``offsets``: the lists' offsets)."""
    return np.unique(np.searchsorted(offsets, positions, side="right") - 1)


def _payload_problems(table: SampleTable, name: str, min_duration: float) -> list[Problem]:
    """Non-finite and out-of-bound values of one float payload; for ``audio``, too short utterances."""
    field = table.arrow.schema.field(name)
    storage_type = field.type.storage_type if isinstance(field.type, pa.BaseExtensionType) else field.type
    if not (pa.types.is_list(storage_type) or pa.types.is_large_list(storage_type)) and not pa.types.is_fixed_size_list(
        storage_type
    ):
        return []
    if not pa.types.is_floating(storage_type.value_type):
        return []
    audio = name == "audio"
    bound = AUDIO_BOUND if audio else FEATURE_BOUND
    nonfinite: list[np.ndarray] = []
    big: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    start = 0
    for chunk in table.arrow.column(name).chunks:
        arr = chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk
        if pa.types.is_fixed_size_list(arr.type):
            size = arr.type.list_size
            offsets = np.arange(len(arr) + 1, dtype=np.int64) * size
            flat = to_numpy(arr.flatten())
        else:
            raw = to_numpy(arr.offsets)
            offsets = (raw - raw[0]).astype(np.int64)
            flat = to_numpy(arr.flatten())
        lengths.append(np.diff(offsets))
        for b in range(0, flat.size, _BLOCK):
            part = flat[b : b + _BLOCK]
            bad = np.flatnonzero(~np.isfinite(part))
            if bad.size:
                nonfinite.append(start + _rows_of_flat(offsets, b + bad))
            with np.errstate(invalid="ignore"):
                far = np.flatnonzero(np.abs(part) > bound)
            if far.size:
                big.append(start + _rows_of_flat(offsets, b + far))
        start += len(arr)
    out = []
    if nonfinite:
        out.append(Problem(name, "non-finite values (NaN/inf)", np.unique(np.concatenate(nonfinite))))
    if big:
        out.append(Problem(name, f"values beyond ±{bound:g}", np.unique(np.concatenate(big))))
    if audio and min_duration > 0 and lengths:
        rate: Any = None
        if SAMPLE_RATE in table.arrow.schema.names:
            rate = to_numpy(table.arrow.column(SAMPLE_RATE)).astype(np.float64)
        elif isinstance(table.metadata.get("sample_rate"), (int, float)):
            rate = float(table.metadata["sample_rate"])
        if rate is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                short = np.flatnonzero(np.concatenate(lengths) < min_duration * rate - 1e-6)
            if short.size:
                out.append(Problem(name, f"audio shorter than {min_duration:g} s", short))
    return out


def _attribute_problems(table: SampleTable, name: str) -> list[Problem]:
    """Non-finite numbers of a float attribute column; number and text cells mixed in a text column."""
    col = table.arrow.column(name)
    if pa.types.is_floating(col.type):
        values = to_numpy(col)
        bad = np.flatnonzero(~np.isfinite(values) & ~to_numpy(col.is_null()))
        return [Problem(name, "non-finite values (nan/inf)", bad)] if bad.size else []
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return []
    present = to_numpy(col.is_valid())
    number = to_numpy(pc.fill_null(pc.match_substring_regex(col, _NUMBER), scalar(False)))
    text = present & ~number
    n_number, n_text = int(number.sum()), int(text.sum())
    if not n_number or not n_text:
        return []
    bad = number if n_number < n_text else text
    return [
        Problem(
            name,
            f"mixed types ({n_number} number cell(s), {n_text} text cell(s), e.g. "
            f"{col.take(pa.array(np.flatnonzero(text)[:3])).to_pylist()}): the column was read as text",
            np.flatnonzero(bad),
        )
    ]


def find_problems(table: SampleTable, *, min_duration: float = MIN_DURATION) -> list[Problem]:
    """What is wrong with ``table`` (see the module's text): one :class:`Problem` per column and kind, the
    unread files of :data:`UNREAD_FILES` last. Vectorized per column."""
    problems: list[Problem] = []
    for name in table.payload_names:
        problems += _payload_problems(table, name, min_duration)
    for name in table.arrow.schema.names:
        if name.startswith(ATTR_PREFIX):
            problems += _attribute_problems(table, name)
    unread = table.metadata.get(UNREAD_FILES) or []
    by_reason: dict[str, list[str]] = {}
    for f in unread:
        entry = f if isinstance(f, dict) else {"file": str(f)}
        by_reason.setdefault(str(entry.get("reason", "unreadable")), []).append(str(entry.get("file")))
    problems += [Problem("", reason, files=tuple(files)) for reason, files in by_reason.items()]
    return problems


def _numbers_again(table: SampleTable, columns: Sequence[str]) -> SampleTable:
    """``table`` with each text attribute column of ``columns`` whose cells are now all numbers cast back to
    numbers (int64 when every cell is an integer, else float64)."""
    arrow = table.arrow
    for name in columns:
        col = arrow.column(name)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or not len(col):
            continue
        if not pc.all(pc.fill_null(pc.match_substring_regex(col, _NUMBER), True)).as_py():
            continue
        is_int = pc.all(pc.fill_null(pc.match_substring_regex(col, _INTEGER), True)).as_py()
        stripped = pc.utf8_trim_whitespace(col)
        new = pc.cast(stripped, pa.int64() if is_int else pa.float64())
        i = arrow.schema.get_field_index(name)
        arrow = arrow.set_column(i, pa.field(name, new.type), new)
    from .table import SampleTable

    return SampleTable(arrow, validate=False) if arrow is not table.arrow else table


def check_data(
    table: SampleTable, on_bad: str = "error", *, where: str = "data set", min_duration: float = MIN_DURATION
) -> SampleTable:
    """``table`` checked with :func:`find_problems` and the policy ``on_bad`` applied (``where`` names the data
    set in the messages): ``"error"`` raises a DataError listing the problems; ``"skip"`` returns the table
    without the samples at fault (a mixed attribute column whose remaining cells are numbers becomes numbers);
    ``"warn"`` returns it whole. With ``skip`` and ``warn``, one warning (logged and added to the table
    metadata's ``load_warnings``) lists the problems."""
    if on_bad not in ON_BAD:
        raise DataError(f"on_bad: expected one of {', '.join(ON_BAD)}, got {on_bad!r}")
    problems = find_problems(table, min_duration=min_duration)
    if not problems:
        return table
    ids = to_numpy(table.arrow.column(SAMPLE_ID))
    lines = [p.describe(ids) for p in problems]
    if on_bad == "error":
        raise DataError(
            f"{where}: {len(problems)} problem(s) in the imported data:\n  - "
            + "\n  - ".join(lines)
            + '\nFix the data, or set [dataset] on_bad = "skip" to drop these samples (unread files are then '
            'listed in a warning) or on_bad = "warn" to keep them'
        )
    rows = [p.rows for p in problems if p.rows.size]
    bad = np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)
    if on_bad == "skip" and bad.size:
        if bad.size == table.num_rows:
            raise DataError(
                f"{where}: every sample has a problem, none is left to skip to:\n  - " + "\n  - ".join(lines)
            )
        keep = np.setdiff1d(np.arange(table.num_rows), bad)
        table = _numbers_again(table.take(keep), [p.column for p in problems if p.column.startswith(ATTR_PREFIX)])
    if on_bad == "warn":
        done = 'kept (on_bad = "warn")'
    else:
        done = f'{bad.size} sample(s) dropped (on_bad = "skip")' if bad.size else 'listed (on_bad = "skip")'
    warning = f"{where}: " + "; ".join(lines) + f" — {done}"
    log.warning("%s", warning)
    return table.with_metadata(**{LOAD_WARNINGS: [*(table.metadata.get(LOAD_WARNINGS) or []), warning]})


__all__ = [
    "SANITY_VERSION",
    "AUDIO_BOUND",
    "FEATURE_BOUND",
    "MIN_DURATION",
    "ON_BAD",
    "UNREAD_FILES",
    "Problem",
    "check_data",
    "find_problems",
]
