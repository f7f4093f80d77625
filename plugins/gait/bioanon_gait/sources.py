"""Dataset sources producing gait tables (``pose`` payload ``(frames, joints, 3)`` float32 + gait metadata).

* ``gait.ucalgary`` — the UCalgary normal & abnormal gait data set (Kinect v2, 18 joints);
* ``gait.c3d`` — C3D marker files listed in a manifest (e.g. Horst et al.'s 57-subject data set);
* ``gait.csv`` — one CSV per sequence listed in a manifest (users' own data);
* ``gait.seba`` — a data set in SEBA's motion layout, so SEBA users can migrate;
* ``gait.synthetic`` — seeded point-light walkers (in :mod:`bioanon_gait.synthetic`).

Every sequence is resampled (linearly, vectorized per distinct length) to ``frames`` frames, as in the paper
(the False Sense of Privacy paper §5.3: 100 frames). Malformed files raise :class:`~bioanon.errors.TableError`
naming the file, and the line where it applies.

**Manifests** (``gait.c3d``, ``gait.csv``) are CSV files with a header row: ``path`` (relative to the manifest's
folder), ``subject``, optionally ``sample_id``, and any further columns, which become attributes (``sex``,
``age``, ``height``, …; numbers are parsed, empty cells are nulls). ``path`` may be the manifest itself or a
folder holding ``manifest.csv``. The file column may also be named ``file``, ``filename``, … and the subject
column ``speaker``, ``identity``, … (the names of :mod:`bioanon.metadata`; two columns of one kind are an
error); key columns never become attributes. A file listed on two lines is an error naming both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from bioanon.api import (
    FILE_COLUMNS,
    SUBJECT_COLUMNS,
    DataError,
    DatasetSource,
    TableError,
    key_columns,
    param,
    parse_cell,
    read_csv_rows,
    resolve_within,
    seba_sample_attributes,
    seba_set,
    uniform_column,
)

from .skeleton import (
    BODY_PARTS_CHECK,
    KINECT_V2_18,
    KINECT_V2_18_PARTS,
    PLUG_IN_GAIT_PARTS,
    UNITS,
    frame_rate_after,
    gait_metadata,
    interpolate_gaps,
    resample_ragged,
    resample_stream,
    valid_body_parts_json,
)

_FRAMES_HELP = "frames every sequence is resampled to (linear interpolation; the paper uses 100)"


# --------------------------------------------------------------------------------------------------- helpers


def read_manifest(path: str | Path) -> tuple[Path, list[dict[str, Any]]]:
    """Read a manifest (see the module docs). Returns (its folder, one dict per row with ``path`` resolved).

    Raises
    ------
    TableError
        Naming the manifest (and line) when it is missing, lacks ``path``/``subject``, or a row is malformed.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "manifest.csv"
    if not p.is_file():
        raise TableError(f"{p}: no such manifest file (a CSV with columns path, subject, …)")
    header, lines = read_csv_rows(p, "manifest", TableError)
    file_col, subject_col = key_columns(header, str(p))
    for required, col, names in (("path", file_col, FILE_COLUMNS), ("subject", subject_col, SUBJECT_COLUMNS)):
        if col is None:
            raise TableError(
                f"{p}:1: the manifest header has no {required!r} column (nor {', '.join(names[1:])}; got {header})"
            )
    header = ["path" if h == file_col else "subject" if h == subject_col else h for h in header]
    rows = []
    first_line: dict[str, int] = {}
    for line, cells in lines:
        row: dict[str, Any] = dict(zip(header, (c.strip() for c in cells), strict=True))
        if not row["path"] or not row["subject"]:
            raise TableError(f"{p}:{line}: empty {file_col!r} or {subject_col!r}")
        try:
            row["path"] = str(resolve_within(p.parent, row["path"], where=f"{p}:{line}"))
        except DataError as e:
            raise TableError(str(e)) from None
        if row["path"] in first_line:
            raise TableError(
                f"{p}:{line}: column {file_col!r}: {row['path']!r} is listed twice (lines "
                f"{first_line[row['path']]} and {line}); each file may have one row"
            )
        first_line[row["path"]] = line
        row["_line"] = line
        rows.append(row)
    if not rows:
        raise TableError(f"{p}: the manifest lists no sequences")
    return p, rows


def _manifest_attributes(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Attribute columns of a manifest: every column but path, subject and sample_id."""
    skip = {"path", "subject", "sample_id", "_line"}
    names = [k for k in rows[0] if k not in skip]
    return {n.removeprefix("attr."): uniform_column([parse_cell(r[n]) for r in rows]) for n in names}


def _sample_ids(rows: list[dict[str, Any]], manifest: Path) -> list[str]:
    """Sample ids from the manifest's ``sample_id`` column or the files' paths; duplicates name the line."""
    if "sample_id" in rows[0]:
        ids = [r["sample_id"] for r in rows]
    else:  # the path relative to the manifest's folder, without extension: stable and unique
        ids = [
            str(Path(r["path"]).relative_to(manifest.parent.resolve()).with_suffix(""))
            if Path(r["path"]).is_relative_to(manifest.parent.resolve())
            else Path(r["path"]).stem
            for r in rows
        ]
    seen: dict[str, int] = {}
    for r, sid in zip(rows, ids, strict=True):
        if sid in seen:
            raise TableError(f"{manifest}:{r['_line']}: sample id {sid!r} repeats line {seen[sid]}")
        seen[sid] = r["_line"]
    return ids


class EmptyFileError(TableError, DataError):
    """A data file without data rows: a :class:`~bioanon.errors.DataError` as well as a TableError."""


def read_numeric_csv(
    path: str | Path, *, delimiter: str = ",", header: bool = True, usecols: list[int] | None = None
) -> tuple[list[str], np.ndarray]:
    """A numeric CSV file as (header cells, float64 array rows × columns).

    The fast path is ``np.loadtxt``; when it fails the file is scanned to name the first bad line and cell.
    """
    import warnings

    p = Path(path)
    try:
        with open(p, encoding="utf-8-sig") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            head = fh.readline() if header else ""
            data = np.loadtxt(fh, delimiter=delimiter, dtype=np.float64, ndmin=2, usecols=usecols)
    except FileNotFoundError:
        raise TableError(f"{p}: no such file") from None
    except UnicodeDecodeError as e:  # a ValueError: before the next clause, which rereads the file as text
        raise TableError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start}); is it a CSV file?") from None
    except (ValueError, IndexError):
        _raise_bad_line(p, delimiter, header, usecols)
        raise
    except OSError as e:
        raise TableError(f"{p}: cannot read: {e}") from None
    names = [h.strip() for h in head.rstrip("\r\n").split(delimiter)] if header else []
    if data.size == 0 or data.shape[0] == 0:
        raise EmptyFileError(f"{p}: no data rows" + (" after the header" if header else ""))
    return names, data


def _raise_bad_line(p: Path, delimiter: str, header: bool, usecols: list[int] | None) -> None:
    """Find the first malformed line of a numeric CSV and raise a TableError naming it."""
    width = None
    with open(p, encoding="utf-8-sig") as fh:
        for line_no, line in enumerate(fh, start=1):
            if header and line_no == 1:
                continue
            if not line.strip():
                continue
            cells = line.rstrip("\r\n").split(delimiter)
            if width is None:
                width = len(cells)
            if len(cells) != width:
                raise TableError(f"{p}:{line_no}: {len(cells)} cells, expected {width} as on the first data line")
            cols = usecols if usecols is not None else range(len(cells))
            for c in cols:
                if c >= len(cells):
                    raise TableError(f"{p}:{line_no}: has {len(cells)} cells, expected at least {c + 1}")
                try:
                    float(cells[c])
                except ValueError:
                    raise TableError(f"{p}:{line_no}: cell {c + 1} = {cells[c].strip()!r} is not a number") from None
    raise TableError(f"{p}: could not be read as numbers")


def _finite_or_raise(x: np.ndarray, path: str | Path) -> None:
    """Raise naming the file (and first frame) when coordinates are NaN or infinite."""
    bad = ~np.isfinite(x)
    if bad.any():
        frame = int(np.argwhere(bad)[0][0])
        raise TableError(f"{path}: NaN or infinite coordinates (first at frame {frame + 1})")


def _body_parts_choice(value: str, labels: list[str], where: str) -> dict[str, list[str]]:
    """Resolve a body_parts parameter of a marker source: '' (none), 'plug_in_gait' or JSON."""
    if not value:
        return {}
    if value == "plug_in_gait":
        lookup = {lab.upper(): lab for lab in labels}
        out = {}
        for part, names in PLUG_IN_GAIT_PARTS.items():
            present = [lookup[n] for n in names if n in lookup]
            if present:
                out[part] = present
        if not out:
            raise TableError(f"{where}: body_parts='plug_in_gait' but no Plug-in Gait labels among {labels[:8]}")
        return out
    return json.loads(value)


def _valid_marker_parts(v: str) -> bool:
    """Validator of a marker source's ``body_parts``: '', 'plug_in_gait' or JSON."""
    return v == "plug_in_gait" or valid_body_parts_json(v)


def _table(
    *,
    sequences: list[np.ndarray] | np.ndarray,
    subjects: list[str],
    sample_ids: list[str],
    attributes: dict[str, list[Any]],
    frames: int,
    meta: dict[str, Any],
):
    """Resample the sequences (unless given resampled, as one ``(N, frames, joints, 3)`` array) and build the
    validated gait table."""
    from bioanon.api import SampleTable

    pose = sequences if isinstance(sequences, np.ndarray) else resample_ragged(sequences, frames)
    return SampleTable.from_arrays(
        subject=np.array(subjects, dtype=object),
        sample_id=np.array(sample_ids, dtype=object),
        payloads={"pose": pose},
        attributes=attributes,
        metadata=meta,
    )


# --------------------------------------------------------------------------------------------------- UCalgary

_UCALGARY_NAME = re.compile(
    r"subject(?P<subject>\d+)_Seq_(?P<run>\d+)_Gen_(?P<sex>[MF])_GeometricPositions_(?P<gait>[A-Z]+)\.csv$"
)


@attrs.define(kw_only=True)
class UCalgaryGait(DatasetSource):
    """The UCalgary normal & abnormal gait data set: Kinect v2 skeletons, 18 joints, 28 subjects × 6 walks.

    Layout: ``sub{N}/Run{k}/subject{N}_Seq_{k}_Gen_{M|F}_GeometricPositions_{N|AR|AL|OA}.csv`` (120 frames ×
    18 joints × XYZ in metres, then 8 derived distance columns, which are ignored), with an optional
    ``metadata.csv`` (``path,subject,run,sex,gait_type,n_frames``); without it the file names are parsed. A
    metadata row that disagrees with its file's name, or a file or walk listed twice, is an error naming the line.
    Attributes: ``sex`` (M/F), ``gait_type`` (N normal, AR/AL abnormal right/left leg), ``run``, ``n_frames``.
    Sample ids are ``sub{N}_run{k}``; subjects are the numbers as strings.

    Quirks of the data, handled here:

    * run 7 of subjects 1–5 has gait type OA, an experimental run the authors ask to ignore: left out unless
      ``include_oa``;
    * subject 8 is labelled M in runs 1–2 and F in runs 3–6 in the source. ``sex_policy='majority'`` (default)
      gives the subject its majority label over its runs (F), so sex is a per-subject attribute; ``'as_labelled'``
      keeps each file's label; ``'null'`` sets inconsistent subjects' sex to null (note: null attribute values
      make task-based utility measures undefined on those samples);
    * one source file of subject 6 is empty (absent from the staged copy, so subject 6 has 5 walks): files
      without data rows are skipped and listed in the metadata's ``skipped_empty_files``.

    Kinect v2 records at 30 Hz; after resampling to ``frames`` the metadata's ``frame_rate`` is the effective
    rate (about 25 Hz for 100 frames). Coordinates are camera space: x right, y up, z away from the camera."""

    id: ClassVar[str] = "gait.ucalgary"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("sex", "gait_type", "run", "n_frames")
    trait: ClassVar[str] = "gait"
    reference: ClassVar[str] = (
        "Kozlow, Abid, Yanushkevich: Utilizing gait traits to improve e-border watchlist performance, IEEE SSCI 2017"
    )

    frames: int = param(100, help=_FRAMES_HELP, low=2)
    include_oa: bool = param(False, help="keep the experimental OA runs (the data's authors say: ignore them)")
    sex_policy: Literal["majority", "as_labelled", "null"] = param(
        "majority", help="how to resolve subjects whose files disagree on sex (subject 8)"
    )

    def _entries(self, root: Path) -> list[dict[str, Any]]:
        meta = root / "metadata.csv"
        if meta.is_file():
            _, rows = read_manifest(meta)
            out = []
            for r in rows:
                try:
                    out.append(
                        {
                            "path": Path(r["path"]),
                            "subject": str(int(r["subject"])),
                            "run": int(r["run"]),
                            "sex": r["sex"].strip(),
                            "gait_type": r["gait_type"].strip(),
                            "line": r["_line"],
                        }
                    )
                except (KeyError, ValueError) as e:
                    raise TableError(f"{meta}:{r['_line']}: malformed row ({e})") from None
                _check_ucalgary_row(meta, out[-1])
            seen: dict[tuple[str, int], int] = {}
            for entry in out:
                key = (entry["subject"], entry["run"])
                if key in seen:
                    raise TableError(
                        f"{meta}: subject {key[0]} run {key[1]} is listed twice (lines {seen[key]} and {entry['line']})"
                    )
                seen[key] = entry["line"]
            return out
        files = sorted(root.glob("sub*/Run*/*GeometricPositions*.csv"))
        if not files:
            raise TableError(
                f"{root}: neither metadata.csv nor sub*/Run*/*GeometricPositions*.csv files found; "
                "is this the UCalgary gait folder?"
            )
        out = []
        for f in files:
            m = _UCALGARY_NAME.search(f.name)
            if m is None:
                raise TableError(
                    f"{f}: file name does not follow subject{{N}}_Seq_{{k}}_Gen_{{M|F}}_"
                    "GeometricPositions_{{type}}.csv"
                )
            out.append(
                {
                    "path": f,
                    "subject": str(int(m["subject"])),
                    "run": int(m["run"]),
                    "sex": m["sex"],
                    "gait_type": m["gait"],
                    "line": None,
                }
            )
        return out

    def load(self, path=None):
        if path is None:
            raise TableError(f"{self.id}: give the path of the ucalgary_gait folder")
        root = Path(path)
        if not root.is_dir():
            raise TableError(f"{self.id}: {root} is not a directory")
        entries = [e for e in self._entries(root) if self.include_oa or e["gait_type"] != "OA"]
        entries.sort(key=lambda e: (int(e["subject"]), e["run"]))
        sequences, lengths, kept, skipped = [], [], [], []
        for e in entries:
            try:
                names, data = read_numeric_csv(e["path"], usecols=list(range(54)))
            except EmptyFileError:  # the source has one empty file (subject 6); an empty walk is no sample
                skipped.append(
                    str(Path(e["path"]).relative_to(root)) if Path(e["path"]).is_relative_to(root) else str(e["path"])
                )
                continue
            if not names or "foot left" not in names[0].lower():
                raise TableError(
                    f"{e['path']}:1: header does not start with 'Foot Left X' (not a UCalgary GeometricPositions file?)"
                )
            _finite_or_raise(data, e["path"])
            sequences.append(data.reshape(len(data), 18, 3))
            lengths.append(len(data))
            kept.append(e)
        entries = kept
        if not entries:
            raise TableError(f"{root}: no UCalgary walks with data")
        sex = [e["sex"] for e in entries]
        subjects = [e["subject"] for e in entries]
        if self.sex_policy != "as_labelled":
            by_subject: dict[str, list[str]] = {}
            for s, x in zip(subjects, sex, strict=True):
                by_subject.setdefault(s, []).append(x)
            resolved = {}
            for s, xs in by_subject.items():
                values, counts = np.unique(xs, return_counts=True)
                if len(values) == 1:
                    resolved[s] = values[0]
                elif self.sex_policy == "null" or counts.max() == counts.min():
                    resolved[s] = None
                else:
                    resolved[s] = str(values[np.argmax(counts)])
            sex = [resolved[s] for s in subjects]
        meta = gait_metadata(
            joints=KINECT_V2_18,
            body_parts=KINECT_V2_18_PARTS,
            frames=self.frames,
            frame_rate=frame_rate_after(30.0, lengths, self.frames),
            source_frame_rate=30.0,
            units="m",
            up_axis=1,
            source=self.id,
            params=self.get_params(),
            skipped_empty_files=skipped,
        )
        return _table(
            sequences=sequences,
            subjects=subjects,
            sample_ids=[f"sub{e['subject']}_run{e['run']}" for e in entries],
            attributes={
                "sex": sex,
                "gait_type": [e["gait_type"] for e in entries],
                "run": np.array([e["run"] for e in entries], np.int64),
                "n_frames": np.array(lengths, np.int64),
            },
            frames=self.frames,
            meta=meta,
        )


def _check_ucalgary_row(meta: Path, e: dict[str, Any]) -> None:
    """A metadata.csv row must agree with its file's name (subject, run, sex, gait type), when the name parses."""
    m = _UCALGARY_NAME.search(Path(e["path"]).name)
    if m is None:
        return
    named = {"subject": str(int(m["subject"])), "run": int(m["run"]), "sex": m["sex"], "gait_type": m["gait"]}
    bad = [f"{k} = {e[k]!r} but the file name says {v!r}" for k, v in named.items() if e[k] != v]
    if bad:
        raise TableError(f"{meta}:{e['line']}: {Path(e['path']).name}: " + "; ".join(bad))


# --------------------------------------------------------------------------------------------------- CSV

_COORD_COLUMN = re.compile(r"^(?P<joint>.*?\S)[\s_.:\-]+(?P<axis>[xyzXYZ])$")


def coordinate_columns(header: list[str], where: str) -> tuple[list[str], list[int]]:
    """Joint names and the column indices (x, y, z per joint, joint-major) of a CSV header whose coordinate
    columns are named ``<joint><sep><axis>`` (sep: space, ``_``, ``.``, ``:`` or ``-``; axis x/y/z in any case).
    Other columns (time, frame number, …) are ignored."""
    found: dict[str, dict[str, int]] = {}
    for i, name in enumerate(header):
        m = _COORD_COLUMN.match(name.strip())
        if m:
            found.setdefault(m["joint"].strip(), {})[m["axis"].lower()] = i
    if not found:
        raise TableError(f"{where}:1: no coordinate columns; name them <joint>_x, <joint>_y, <joint>_z")
    joints, cols = [], []
    for joint, axes in found.items():
        missing = [a for a in "xyz" if a not in axes]
        if missing:
            raise TableError(f"{where}:1: joint {joint!r} has no {'/'.join(missing)} column")
        joints.append(joint)
        cols += [axes["x"], axes["y"], axes["z"]]
    return joints, cols


@attrs.define(kw_only=True)
class CsvGait(DatasetSource):
    """Gait sequences from CSV files, one per sequence, listed in a manifest (for users' own data).

    Each CSV has a header row and one row per frame; coordinate columns are named ``<joint><sep><axis>``
    (``knee_left_x``, ``Knee Left X``, ``LKNE:X``, …) and other columns are ignored. Every file must have the
    same joints. The manifest (``path``, ``subject``, optional ``sample_id``, further columns = attributes) is
    described in :mod:`bioanon_gait.sources`. Give the recording's ``frame_rate`` (0 = unknown), its ``units``,
    its vertical axis and, optionally, body-part groups as JSON (``{"left_leg": ["knee_left", …], …}``)."""

    id: ClassVar[str] = "gait.csv"
    trait: ClassVar[str] = "gait"

    frames: int = param(100, help=_FRAMES_HELP, low=2)
    frame_rate: float = param(0.0, help="recording frame rate in Hz (0 = unknown)", low=0.0)
    units: Literal["m", "cm", "mm"] = param("m", help="unit of the coordinates")
    up_axis: Literal["x", "y", "z"] = param("y", help="the vertical axis")
    delimiter: str = param(",", help="cell delimiter", check=lambda v: len(v) == 1, check_text="one character")
    body_parts: str = param(
        "",
        help="body parts as JSON: part -> joint names (default: none)",
        check=valid_body_parts_json,
        check_text=BODY_PARTS_CHECK,
    )

    def load(self, path=None):
        if path is None:
            raise TableError(f"{self.id}: give the path of the manifest (or of its folder)")
        manifest, rows = read_manifest(path)
        sequences, joints = [], None
        for r in rows:
            header, data = read_numeric_csv(r["path"], delimiter=self.delimiter)
            j, cols = coordinate_columns(header, r["path"])
            if joints is None:
                joints = j
            elif j != joints:
                raise TableError(f"{r['path']}: joints {j[:6]} differ from those of the first file {joints[:6]}")
            x = data[:, cols]
            _finite_or_raise(x, r["path"])
            sequences.append(x.reshape(len(x), len(joints), 3))
        assert joints is not None
        meta = gait_metadata(
            joints=joints,
            body_parts=json.loads(self.body_parts) if self.body_parts else {},
            frames=self.frames,
            frame_rate=frame_rate_after(self.frame_rate, [len(s) for s in sequences], self.frames),
            source_frame_rate=self.frame_rate or None,
            units=self.units,
            up_axis="xyz".index(self.up_axis),
            source=self.id,
            params=self.get_params(),
        )
        return _table(
            sequences=sequences,
            subjects=[r["subject"] for r in rows],
            sample_ids=_sample_ids(rows, manifest),
            attributes=_manifest_attributes(rows),
            frames=self.frames,
            meta=meta,
        )


# --------------------------------------------------------------------------------------------------- C3D


def _clean_label(label: str) -> str:
    """A C3D marker label without padding and without a ``Subject:`` prefix."""
    label = label.strip()
    return label.split(":", 1)[1].strip() if ":" in label else label


def read_c3d(path: str | Path) -> tuple[list[str], np.ndarray, np.ndarray, float, str]:
    """Read a C3D file's markers with the ``c3d`` package: (labels, xyz ``(T, M, 3)``, valid ``(T, M)``,
    point rate in Hz, units)."""
    try:
        import c3d
    except ImportError:  # pragma: no cover - a declared dependency
        raise TableError("gait.c3d needs the 'c3d' package: pip install c3d") from None
    import warnings

    p = Path(path)
    try:
        with open(p, "rb") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # e.g. "No analog data found in file."
            reader = c3d.Reader(fh)
            labels = [_clean_label(str(x)) for x in reader.point_labels]
            frames = [points[:, :4].copy() for _, points, _ in reader.read_frames(copy=False)]
            rate = float(reader.point_rate)
            try:
                units = reader.get("POINT").get("UNITS").string_value.strip()
            except Exception:  # noqa: BLE001 - optional parameter
                units = "mm"
    except FileNotFoundError:
        raise TableError(f"{p}: no such file") from None
    except Exception as e:  # noqa: BLE001 - the reader raises many types on corrupt input
        raise TableError(f"{p}: not a readable C3D file: {type(e).__name__}: {e}") from None
    if not frames:
        raise TableError(f"{p}: the C3D file has no frames")
    arr = np.stack(frames)  # (T, M, 4): x, y, z, residual (-1 = invalid)
    if arr.shape[1] != len(labels):
        labels = (labels + [f"m{i}" for i in range(len(labels), arr.shape[1])])[: arr.shape[1]]
    valid = (arr[:, :, 3] >= 0) & np.isfinite(arr[:, :, :3]).all(axis=2)
    return labels, arr[:, :, :3].astype(np.float64), valid, rate, units


@attrs.define(kw_only=True)
class C3dGait(DatasetSource):
    """Marker trajectories from C3D files listed in a manifest (read with the maintained ``c3d`` package).

    Suited to optical motion-capture gait data such as Horst et al.'s 57 subjects × 20 walks (52 markers), used
    in the False Sense of Privacy paper §5.3: write a manifest ``path,subject`` (+ attributes) and load. Markers
    are the labels of the first file (or ``markers``), looked up by label in every file (a ``Subject:`` prefix
    is dropped); a marker missing from a file is an error naming both. Gaps (invalid samples, residual < 0)
    are filled by linear interpolation in time; a marker never seen in a file is an error. ``body_parts`` is
    ``''`` (none), ``'plug_in_gait'`` (Vicon's standard labels) or JSON part -> marker labels. Units come from
    the file (``POINT:UNITS``, default mm); the vertical axis is a parameter (most labs: z)."""

    id: ClassVar[str] = "gait.c3d"
    trait: ClassVar[str] = "gait"
    reference: ClassVar[str] = (
        "Horst et al.: Explaining the unique nature of individual gait patterns with deep "
        "learning, Scientific Reports 9, 2019"
    )

    frames: int = param(100, help=_FRAMES_HELP, low=2)
    markers: tuple[str, ...] = param((), help="marker labels to keep, in this order (default: all of the first file)")
    body_parts: str = param(
        "",
        help="'' (none), 'plug_in_gait', or JSON part -> marker labels",
        check=_valid_marker_parts,
        check_text="'', 'plug_in_gait' or " + BODY_PARTS_CHECK,
    )
    up_axis: Literal["x", "y", "z"] = param("z", help="the vertical axis")

    def load(self, path=None):
        if path is None:
            raise TableError(f"{self.id}: give the path of the manifest (or of its folder)")
        manifest, rows = read_manifest(path)
        sequences, labels, rate, units = [], list(self.markers), None, None
        for r in rows:
            file_labels, xyz, valid, file_rate, file_units = read_c3d(r["path"])
            if not labels:
                labels = file_labels
            index = {lab: i for i, lab in enumerate(file_labels)}
            missing = [lab for lab in labels if lab not in index]
            if missing:
                raise TableError(
                    f"{r['path']}: markers {missing[:5]} are not in this file (it has "
                    f"{file_labels[:8]}{' …' if len(file_labels) > 8 else ''})"
                )
            cols = [index[lab] for lab in labels]
            xyz, valid = xyz[:, cols], valid[:, cols]
            never = [labels[m] for m in np.flatnonzero(~valid.any(axis=0))]
            if never:
                raise TableError(f"{r['path']}: markers {never[:5]} have no valid sample")
            if rate is None:
                rate, units = file_rate, file_units
            elif abs(file_rate - rate) > 1e-6:
                raise TableError(f"{r['path']}: point rate {file_rate} Hz differs from the first file's {rate} Hz")
            sequences.append(interpolate_gaps(xyz, valid))
        unit = (units or "mm").lower()
        if unit not in UNITS:
            raise TableError(f"{rows[0]['path']}: POINT:UNITS = {units!r} is not one of {list(UNITS)}")
        meta = gait_metadata(
            joints=labels,
            body_parts=_body_parts_choice(self.body_parts, labels, self.id),
            frames=self.frames,
            frame_rate=frame_rate_after(rate, [len(s) for s in sequences], self.frames),
            source_frame_rate=rate,
            units=unit,
            up_axis="xyz".index(self.up_axis),
            source=self.id,
            params=self.get_params(),
        )
        return _table(
            sequences=sequences,
            subjects=[r["subject"] for r in rows],
            sample_ids=_sample_ids(rows, manifest),
            attributes=_manifest_attributes(rows),
            frames=self.frames,
            meta=meta,
        )


# --------------------------------------------------------------------------------------------------- SEBA


@attrs.define(kw_only=True)
class SebaGait(DatasetSource):
    """Import a data set in SEBA's motion layout (https://github.com/kit-ps/seba), so SEBA users can migrate.

    Layout under SEBA's ``data/`` folder: ``<set>.meta.yaml`` (``trait: motion``, ``fps``,
    ``body_parts_to_marker`` {part: marker indices}, optionally ``position_range`` [start, end) of the
    position columns and ``markers`` names) and ``<set>/`` holding ``<id>[.<session>].<point>.mocap`` — a JSON
    list of frames, each ``[x0, y0, z0, x1, y1, z1, …]`` (marker-major) — with identity attributes in
    ``<set>/<id>.yaml`` and per-sample ones in ``<set>/<id>[.<session>].<point>.yaml`` (YAML read with
    ``yaml.safe_load`` only). ``path`` is the ``data/`` folder (then ``set`` names the set; it may be left empty
    when there is exactly one motion set), the ``<set>.meta.yaml`` file or the ``<set>/`` folder. Files whose
    name contains ``empty`` are skipped, as SEBA does. Sample ids are the file names without ``.mocap``.
    Per-sample values override the identity's; a ``subject`` or ``sample_id`` in an attribute file that differs
    from the file name is an error naming the file (they never become attributes)."""

    id: ClassVar[str] = "gait.seba"
    trait: ClassVar[str] = "gait"
    reference: ClassVar[str] = "seba"

    set: str = param("", help="name of the SEBA data set (default: the only motion set in the folder)")
    frames: int = param(100, help=_FRAMES_HELP, low=2)
    units: Literal["m", "cm", "mm"] = param("mm", help="unit of the coordinates (SEBA's gait data: mm)")
    up_axis: Literal["x", "y", "z"] = param("z", help="the vertical axis")

    def load(self, path=None):
        if path is None:
            raise TableError(f"{self.id}: give the path of SEBA's data folder (or of a <set>.meta.yaml)")
        meta_path, folder, meta = seba_set(path, self.set, "motion", who=self.id)
        files = sorted(f for f in folder.glob("*.mocap") if "empty" not in f.name)
        if not files:
            raise TableError(f"{folder}: no .mocap files")
        rng = meta.get("position_range")
        ids, subjects, attrs_rows = [], [], []
        identity_attrs: dict[str, dict] = {}

        def read() -> Iterator[np.ndarray]:  # one file at a time: the float64 source data is never held whole
            first: np.ndarray | None = None
            for f in files:
                parts = f.name.split(".")
                if len(parts) not in (3, 4):
                    raise TableError(f"{f}: expected <id>.<point>.mocap or <id>.<session>.<point>.mocap")
                identity = parts[0]
                x = _read_mocap(f, rng)
                if first is None:
                    first = x
                elif x.shape[1] != first.shape[1]:
                    raise TableError(f"{f}: {x.shape[1]} markers here but {first.shape[1]} in {files[0].name}")
                ids.append(f.name[: -len(".mocap")])
                subjects.append(identity)
                attrs_rows.append(
                    seba_sample_attributes(folder, identity, ids[-1], f.name, identity_attrs, who=self.id)
                )
                yield x

        pose, lengths = resample_stream(read(), len(files), self.frames)
        n_markers = pose.shape[2]
        names = meta.get("markers") or meta.get("marker_names")
        joints = (
            [str(n) for n in names]
            if isinstance(names, list) and len(names) == n_markers
            else [f"m{i}" for i in range(n_markers)]
        )
        parts = {}
        for part, idx in (meta.get("body_parts_to_marker") or {}).items():
            try:
                parts[part] = [joints[int(i)] for i in idx]
            except (IndexError, TypeError, ValueError):
                raise TableError(
                    f"{meta_path}: body_parts_to_marker[{part!r}] = {idx!r} is not a list of marker "
                    f"indices below {n_markers}"
                ) from None
        fps = meta.get("fps")
        fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        keys = list(dict.fromkeys(k for row in attrs_rows for k in row))
        attributes = {k: uniform_column([row.get(k) for row in attrs_rows]) for k in keys}
        attributes = {k: v for k, v in attributes.items() if k not in ("subject", "sample_id")}
        out_meta = gait_metadata(
            joints=joints,
            body_parts=parts,
            frames=self.frames,
            frame_rate=frame_rate_after(fps, lengths.tolist(), self.frames),
            source_frame_rate=fps,
            units=self.units,
            up_axis="xyz".index(self.up_axis),
            source=self.id,
            params=self.get_params(),
        )
        return _table(
            sequences=pose,
            subjects=subjects,
            sample_ids=ids,
            attributes=attributes,
            frames=self.frames,
            meta=out_meta,
        )


def _fast_json(raw: bytes) -> Any:
    """orjson's parse of ``raw`` (5× the json module's speed on SEBA's frames); json's when orjson is absent."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency of bioanon-gait
        return json.loads(raw)
    return orjson.loads(raw)


def _read_mocap(path: Path, position_range: Any) -> np.ndarray:
    """A SEBA .mocap file as ``(T, markers, 3)``."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e}") from None
    try:
        data = _fast_json(raw)
    except ValueError:  # not strict JSON for orjson (e.g. NaN): the json module decides and names the line
        try:
            data = json.loads(raw.decode("utf-8"))
        except json.JSONDecodeError as e:
            raise TableError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        except UnicodeDecodeError as e:
            raise TableError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except RecursionError:
            raise TableError(f"{path}: invalid JSON: lists nested too deeply (expected frames of numbers)") from None
    try:
        x = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise TableError(f"{path}: expected a JSON list of frames, each a list of numbers of equal length") from None
    if x.ndim != 2 or x.shape[0] == 0:
        raise TableError(f"{path}: expected a non-empty list of frames of equal length, got shape {x.shape}")
    if position_range is not None:
        try:
            a, b = int(position_range[0]), int(position_range[1])
        except (TypeError, ValueError, IndexError):
            raise TableError(f"{path}: position_range {position_range!r} is not [start, end]") from None
        x = x[:, a:b]
    if x.shape[1] % 3:
        raise TableError(f"{path}: frames have {x.shape[1]} values, not a multiple of 3 (x, y, z per marker)")
    _finite_or_raise(x, path)
    return x.reshape(len(x), -1, 3)
