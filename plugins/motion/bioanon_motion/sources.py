"""Motion-sensor data sources: real layouts cut into fixed-length windows (the synthetic generator
``motion.synthetic`` is in :mod:`bioanon_motion.synthetic`).

Every source returns a :class:`~bioanon.table.SampleTable` with one row per window: ``imu`` (float32
``window × channels``), ``subject``, attribute columns, and metadata ``trait="motion"``, ``channels`` (names),
``sample_rate`` (Hz), ``window``, ``stride`` and the source's parameters.

Windows are cut per recording with numpy stride tricks (:func:`~bioanon_motion.signals.sliding_windows`):
window ``i`` starts at sample ``i * stride``; a recording's tail shorter than a window is dropped, and a
recording shorter than one window gives no window (counted in the metadata's ``short_recordings``). With the
default ``stride = window`` windows do not overlap, so enrolment and test windows never share samples.

* ``motion.motionsense``: MotionSense (``A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` +
  ``data_subjects_info.csv``);
* ``motion.phone_gait``: the phone gait set of Zou et al. (``ten_users/`` and ``fifteen_users_9styles/``);
* ``motion.csv``: one CSV/TSV per recording plus a manifest of subject and attribute columns (your own data).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np

from bioanon.api import (
    FILE_COLUMNS,
    SUBJECT_COLUMNS,
    DataError,
    DatasetSource,
    Metadata,
    file_key,
    jsonable,
    param,
    resolve_within,
)

from .io import MotionDataError, read_numeric, require_path
from .signals import sliding_windows

__all__ = ["CsvRecordings", "MotionSense", "PhoneGait"]


@attrs.define(kw_only=True)
class _Recording:
    """One recording before windowing."""

    data: np.ndarray  # (T, C)
    subject: str
    name: str  # unique, becomes the prefix of the windows' sample ids
    attributes: dict[str, Any]


@attrs.define(kw_only=True)
class _WindowedSource(DatasetSource):
    """Shared windowing: ``window`` and ``stride`` in samples; subclasses list :class:`_Recording` objects."""

    trait: ClassVar[str] = "motion"

    window: int = param(128, help="window length in samples", low=2)
    stride: int = param(128, help="samples between the starts of consecutive windows (= window: no overlap)", low=1)
    max_windows_per_recording: int = param(
        0,
        help="keep at most this many windows of each recording, the first "
        "ones (0: all) — balances long and short recordings",
        low=0,
    )

    def _table(
        self, recordings: Sequence[_Recording], channels: list[str], sample_rate: float, attribute_names: Sequence[str]
    ) -> Any:
        """Cut every recording into windows and build the table (attributes repeated per window)."""
        from bioanon.api import SampleTable

        cap = self.max_windows_per_recording or None
        wins = [sliding_windows(r.data, self.window, self.stride)[:cap] for r in recordings]
        counts = np.array([len(w) for w in wins], dtype=np.int64)
        if counts.sum() == 0:
            longest = max((len(r.data) for r in recordings), default=0)
            raise MotionDataError(
                f"{self.id}: no recording is at least window={self.window} samples long "
                f"(longest: {longest}); choose a shorter window"
            )
        keep = counts > 0
        x = np.concatenate([w for w, k in zip(wins, keep, strict=True) if k], axis=0, dtype=np.float32)  # the one copy
        recs = [r for r, k in zip(recordings, keep, strict=True) if k]
        counts = counts[keep]
        index = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # window index per recording
        names = np.repeat(np.array([r.name for r in recs], dtype=object), counts)
        sample_id = names + np.char.zfill(index.astype(str), 4).astype(object)
        attributes = {
            a: np.repeat(_tidy(np.array([r.attributes.get(a) for r in recs], dtype=object)), counts)
            for a in attribute_names
        }  # one value per recording, repeated per window
        meta = {
            "trait": "motion",
            "source": self.id,
            "channels": list(channels),
            "sample_rate": float(sample_rate),
            "window": self.window,
            "stride": self.stride,
            "params": jsonable(self.get_params()),
            "recordings": len(recs),
            "short_recordings": int((~keep).sum()),
        }
        return SampleTable.from_arrays(
            subject=np.repeat(np.array([r.subject for r in recs], dtype=object), counts).astype(str),
            sample_id=sample_id.astype(str),
            payloads={"imu": np.ascontiguousarray(x)},
            attributes=attributes,
            metadata=meta,
        )


def _tidy(values: np.ndarray) -> np.ndarray:
    """An object column as int64 / float64 / str when all non-null values allow it (nulls stay None)."""
    present = [v for v in values if v is not None]
    if present and len(present) == len(values):
        if all(isinstance(v, (bool, np.bool_)) for v in present):
            return values.astype(bool)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in present):
            return values.astype(np.int64)
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in present):
            return values.astype(np.float64)
        return values.astype(str)
    return values  # with nulls: leave it to Arrow (None → null)


# --------------------------------------------------------------------------------------------------- MotionSense

MOTIONSENSE_ACTIVITIES = ("dws", "ups", "wlk", "jog", "sit", "std")
MOTIONSENSE_COLUMNS = (
    "attitude.roll", "attitude.pitch", "attitude.yaw", "gravity.x", "gravity.y", "gravity.z",
    "rotationRate.x", "rotationRate.y", "rotationRate.z", "userAcceleration.x", "userAcceleration.y",
    "userAcceleration.z",
)  # fmt: skip
_MS_CHANNELS = {
    "paper": MOTIONSENSE_COLUMNS[6:],  # rotationRate + userAcceleration, as in the paper (and MotionSense's own)
    "all": MOTIONSENSE_COLUMNS,
    "rotation": MOTIONSENSE_COLUMNS[6:9],
    "acceleration": MOTIONSENSE_COLUMNS[9:],
}
_MS_DIR = re.compile(r"^([a-z]+)_(\d+)$")
_MS_FILE = re.compile(r"^sub_(\d+)\.csv$")


@attrs.define(kw_only=True)
class MotionSense(_WindowedSource):
    """MotionSense smartphone device-motion data (24 subjects, 6 activities, 50 Hz), cut into windows.

    Layout (``path`` is the folder holding both)::

        A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv   # unnamed index column, attitude.roll/pitch/yaw,
                                                             # gravity.x/y/z, rotationRate.x/y/z,
                                                             # userAcceleration.x/y/z
        data_subjects_info.csv                               # code, weight, height, age, gender (0 f, 1 m)

    Activities: dws (downstairs), ups (upstairs), wlk (walking), jog (jogging), sit, std (standing).
    ``channels="paper"`` keeps rotationRate and userAcceleration (6 channels), as the utility-preserving
    anonymization paper (§5.1.2) and MotionSense's authors did. Subjects are ``sub_01`` …; attributes
    ``activity``, ``trial``, ``gender`` (female/male), ``age``, ``height`` (cm), ``weight`` (kg) and
    ``recording``. The paper's experiment used the four moving activities: ``activities=("dws","ups","wlk","jog")``.
    ``data_subjects_info.csv`` is per subject: a code on several lines with different values is an error naming
    the code and lines, and a recording of a subject it does not list is an error.
    """

    id: ClassVar[str] = "motion.motionsense"
    attribute_names: ClassVar[tuple[str, ...] | None] = (
        "activity",
        "trial",
        "gender",
        "age",
        "height",
        "weight",
        "recording",
    )
    reference: ClassVar[str] = "motionsense"

    channels: str = param(
        "paper",
        help="channel set: paper (rotationRate + userAcceleration), all (12), rotation, acceleration",
        choices=tuple(_MS_CHANNELS),
    )
    activities: tuple[str, ...] = param(
        MOTIONSENSE_ACTIVITIES,
        help="activities to load (codes)",
        check=lambda v: len(v) > 0 and set(v) <= set(MOTIONSENSE_ACTIVITIES),
        check_text="a non-empty subset of " + ", ".join(MOTIONSENSE_ACTIVITIES),
    )
    sample_rate: float = param(50.0, help="sampling rate of the recordings in Hz", low=0.0, low_inclusive=False)

    def load(self, path=None):
        """Read the MotionSense folder ``path`` and cut its recordings into windows."""
        root = require_path(path, self.id, directory=True)
        data_dir = root / "A_DeviceMotion_data"
        if not data_dir.is_dir():
            if root.name == "A_DeviceMotion_data":
                data_dir, root = root, root.parent
            else:
                raise MotionDataError(
                    f"{self.id}: {str(root)!r} has no A_DeviceMotion_data/ folder (expected "
                    f"A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv and data_subjects_info.csv)"
                )
        info = self._subjects_info(root)
        cols = list(_MS_CHANNELS[self.channels])
        recordings = []
        for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
            m = _MS_DIR.match(folder.name)
            if not m or m.group(1) not in MOTIONSENSE_ACTIVITIES:
                continue  # e.g. __MACOSX
            activity, trial = m.group(1), int(m.group(2))
            if activity not in self.activities:
                continue
            for f in sorted(folder.iterdir(), key=lambda p: p.name):
                fm = _MS_FILE.match(f.name)
                if not fm:
                    continue
                code = int(fm.group(1))
                if code not in info:
                    raise MotionDataError(f"{f}: subject {code} is not listed in {root / 'data_subjects_info.csv'}")
                subject = f"sub_{code:02d}"
                recordings.append(
                    _Recording(
                        data=read_numeric(f, cols, delimiter=",", header=True),
                        subject=subject,
                        name=f"{folder.name}/{subject}/",
                        attributes={
                            "activity": activity,
                            "trial": trial,
                            "recording": folder.name + "/" + subject,
                            **info[code],
                        },
                    )
                )
        if not recordings:
            raise MotionDataError(
                f"{self.id}: no recordings of activities {list(self.activities)} under "
                f"{str(data_dir)!r} (expected <activity>_<trial>/sub_<n>.csv)"
            )
        return self._table(
            recordings, cols, self.sample_rate, ["activity", "trial", "gender", "age", "height", "weight", "recording"]
        )

    @staticmethod
    def _subjects_info(root: Path) -> dict[int, dict[str, Any]]:
        """``code -> {weight, height, age, gender}`` from data_subjects_info.csv."""
        path = root / "data_subjects_info.csv"
        if not path.is_file():
            raise MotionDataError(
                f"motion.motionsense: {str(path)!r} is missing (columns code, weight, height, age, gender)"
            )
        v = read_numeric(path, ["code", "weight", "height", "age", "gender"], delimiter=",", header=True)
        bad = np.flatnonzero(~np.isin(v[:, 4], (0, 1)))
        if bad.size:
            raise MotionDataError(
                f"{path}: gender must be 0 (female) or 1 (male), got {v[bad[0], 4]:g} (data row {bad[0] + 1})"
            )
        with open(path, encoding="utf-8", errors="replace") as f:  # line numbers of the data rows, for messages
            lines = [n for n, ln in enumerate(f, 1) if ln.strip()][1:]
        if len(lines) != len(v):
            lines = list(range(2, len(v) + 2))
        meta = Metadata(
            str(path),
            "subject",
            "code",
            [f"{c:g}" for c in v[:, 0]],
            lines,
            {
                "weight": v[:, 1].tolist(),
                "height": v[:, 2].tolist(),
                "age": v[:, 3].tolist(),
                "gender": v[:, 4].tolist(),
            },
        )
        try:
            meta.match_subjects([], warn=False)  # a code on several lines must have one set of values
        except DataError as e:
            raise MotionDataError(str(e)) from None
        return {
            int(c): {"weight": float(w), "height": float(h), "age": int(a), "gender": ("female", "male")[int(g)]}
            for c, w, h, a, g in v
        }


# --------------------------------------------------------------------------------------------------- phone gait

_PG_CHANNELS = {
    "acc_gyro": (["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z"], [1, 2, 3, 4, 5, 6]),
    "all": (["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z", "pressure"], [1, 2, 3, 4, 5, 6, 7]),
    "acc": (["acc_x", "acc_y", "acc_z"], [1, 2, 3]),
    "gyro": (["gyro_x", "gyro_y", "gyro_z"], [4, 5, 6]),
}
_PG_TEN = re.compile(r"^([a-z]+)_([nf])([ab])(\d+)\.txt$")
_PG_FIFTEEN = re.compile(r"^([a-z]+)_m(\d+)([nf])([ab])_(\d+)\.txt$")
_SPEED = {"n": "normal", "f": "fast"}
_POCKET = {"a": "left", "b": "right"}


@attrs.define(kw_only=True)
class PhoneGait(_WindowedSource):
    """The smartphone gait set of Zou et al. (phone in a trouser pocket, ~50 Hz), cut into windows.

    Layout (``path`` holds one or both sub-sets)::

        ten_users/{normal|fast}/{user}/{user}_{n|f}{a|b}{k}.txt      # 10 users x 2 speeds x 2 pockets
        fifteen_users_9styles/{user}_m{1-9}{f|n}{a}_{k}.txt           # 15 users x 9 walking styles

    Each file: whitespace text, 8 fields per line — timestamp (YYYYMMDDhhmmss), acceleration x, y, z (m/s²),
    angular rate x, y, z (rad/s), air pressure (hPa). Attributes: ``speed`` (normal/fast), ``pocket``
    (left/right; a = left), ``style`` (m1…m9, walking style of the fifteen-user set; null in ten_users),
    ``subset`` and ``recording``. ``fifteen_users_9styles`` segments are short (79–164 samples), so keep
    ``window`` ≤ 79 to use every one of them.

    Six users' initials occur in both sub-sets (cxb, lt, nlh, wy, zm, zz). The source does not say whether
    they are the same people, but the data suggest so: a random forest on window features trained on
    ten_users names 4 of them (lt, nlh, wy, zz) in fifteen_users_9styles at 91–100 % (chance 10 %). So by
    default (``shared_users``) subject ids are the bare initials and such a user is one subject, which keeps
    the evaluation's subject-disjoint splits honest; ``shared_users=False`` gives ``<subset>/<user>`` ids."""

    id: ClassVar[str] = "motion.phone_gait"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("speed", "pocket", "style", "subset", "recording")
    reference: ClassVar[str] = (
        "Zou et al., Robust Gait Recognition by Integrating Inertial and RGBD Sensors, IEEE Trans. Cybernetics 2018"
    )

    window: int = param(64, help="window length in samples", low=2)
    stride: int = param(64, help="samples between the starts of consecutive windows (= window: no overlap)", low=1)
    max_windows_per_recording: int = param(
        0,
        help="keep at most this many windows of each recording, the first "
        "ones (0: all); 2 balances the long ten_users segments (~11 windows) "
        "against the short fifteen_users ones (1-2)",
        low=0,
    )
    subset: str = param("both", help="which sub-set(s) to load", choices=("both", "ten_users", "fifteen_users"))
    channels: str = param(
        "acc_gyro", help="channel set: acc_gyro (6), all (+ pressure), acc, gyro", choices=tuple(_PG_CHANNELS)
    )
    shared_users: bool = param(True, help="treat equal user initials in the two sub-sets as one subject")
    sample_rate: float = param(50.0, help="sampling rate of the recordings in Hz", low=0.0, low_inclusive=False)

    def load(self, path=None):
        """Read the phone gait folder ``path`` and cut its segments into windows."""
        root = require_path(path, self.id, directory=True)
        names, fields = _PG_CHANNELS[self.channels]
        recordings: list[_Recording] = []
        want_ten = self.subset in ("both", "ten_users")
        want_fifteen = self.subset in ("both", "fifteen_users")
        ten, fifteen = root / "ten_users", root / "fifteen_users_9styles"
        for folder, wanted in ((ten, want_ten), (fifteen, want_fifteen)):
            if wanted and not folder.is_dir() and self.subset != "both":
                raise MotionDataError(f"{self.id}: {str(root)!r} has no {folder.name}/ folder")
        if not (want_ten and ten.is_dir()) and not (want_fifteen and fifteen.is_dir()):
            raise MotionDataError(f"{self.id}: {str(root)!r} has neither ten_users/ nor fifteen_users_9styles/")
        if want_ten and ten.is_dir():
            for f in sorted(ten.glob("*/*/*.txt")):
                m = _PG_TEN.match(f.name)
                speed_dir, user_dir = f.parent.parent.name, f.parent.name
                if not m or speed_dir not in ("normal", "fast"):
                    continue
                user, speed, pocket, k = m.groups()
                if _SPEED[speed] != speed_dir or user != user_dir:
                    raise MotionDataError(
                        f"{f}: file name says user {user!r}, speed {_SPEED[speed]!r} but it is in "
                        f"{speed_dir}/{user_dir}/"
                    )
                recordings.append(
                    self._recording(
                        f, fields, "ten_users", user, {"speed": _SPEED[speed], "pocket": _POCKET[pocket], "style": None}
                    )
                )
        if want_fifteen and fifteen.is_dir():
            for f in sorted(fifteen.glob("*.txt")):
                m = _PG_FIFTEEN.match(f.name)
                if not m:
                    continue
                user, style, speed, pocket, k = m.groups()
                recordings.append(
                    self._recording(
                        f,
                        fields,
                        "fifteen_users",
                        user,
                        {"speed": _SPEED[speed], "pocket": _POCKET[pocket], "style": f"m{style}"},
                    )
                )
        if not recordings:
            raise MotionDataError(
                f"{self.id}: no recordings found under {str(root)!r} (see `bioanon describe {self.id}` for the layout)"
            )
        return self._table(recordings, names, self.sample_rate, ["speed", "pocket", "style", "subset", "recording"])

    def _recording(self, f: Path, fields: list[int], subset: str, user: str, attrs_: dict) -> _Recording:
        """Read one segment file."""
        subject = user if self.shared_users else f"{subset}/{user}"
        name = f"{subset}/{f.stem}"
        return _Recording(
            data=read_numeric(f, fields, delimiter=None, header=False, n_fields=8),
            subject=subject,
            name=name + "/",
            attributes={**attrs_, "subset": subset, "recording": name},
        )


# --------------------------------------------------------------------------------------------------- generic CSV

_DELIMITERS = {"auto": None, ",": ",", "\\t": "\t", "tab": "\t", ";": ";", "whitespace": None}


@attrs.define(kw_only=True)
class CsvRecordings(_WindowedSource):
    """Your own data: one CSV/TSV file per recording, listed in a manifest with subject and attribute columns.

    ``path`` is the manifest (a CSV file) or a folder holding ``manifest.csv``. The manifest has a header; its
    ``file_column`` gives each recording's path (relative to the manifest's folder), ``subject_column`` its
    subject; every other column (or those named in ``attributes``) becomes an attribute of the recording's
    windows. Recording files hold one row per time step; ``channels`` names the columns to use (empty: every
    column except ``time_column``; without a header, give 0-based field numbers as strings, e.g. ``("1","2")``).
    ``delimiter="auto"`` picks a tab for ``.tsv``/``.tab`` files, whitespace for ``.txt``/``.dat`` and a comma
    otherwise. Left at their defaults, ``file_column`` and ``subject_column`` also find a column with another
    key name of :mod:`bioanon.metadata` (``path``, ``filename``, …; ``speaker``, ``identity``, …). Key columns
    never become attributes: without ``attributes``, a second file or subject column is an error, as are a
    repeated column name and a recording file listed on two lines (naming both). Example manifest::

        file,subject,activity
        rec/alice_walk.csv,alice,walk
        rec/bob_run.csv,bob,run
    """

    id: ClassVar[str] = "motion.csv"

    file_column: str = param("file", help="manifest column with each recording's file path")
    subject_column: str = param("subject", help="manifest column with each recording's subject")
    attributes: tuple[str, ...] = param((), help="manifest columns to keep as attributes (empty: all others)")
    channels: tuple[str, ...] = param((), help="recording columns to use as channels (empty: all but time_column)")
    time_column: str = param("", help="a timestamp column of the recordings to leave out (empty: none)")
    header: bool = param(True, help="recording files start with a header line of column names")
    delimiter: str = param("auto", help="field separator of the recording files", choices=tuple(_DELIMITERS))
    sample_rate: float = param(50.0, help="sampling rate of the recordings in Hz", low=0.0, low_inclusive=False)

    def load(self, path=None):
        """Read the manifest (or the folder holding manifest.csv) and its recordings."""
        import pandas as pd

        p = require_path(path, self.id)
        manifest = p / "manifest.csv" if p.is_dir() else p
        if not manifest.is_file():
            raise MotionDataError(f"{self.id}: {str(p)!r} is a folder without manifest.csv")
        if manifest.stat().st_size == 0:
            raise MotionDataError(f"{manifest}: the file is empty")
        try:
            man = pd.read_csv(manifest, dtype=str, keep_default_na=False, skip_blank_lines=True)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
            raise MotionDataError(f"{manifest}: cannot read the manifest: {e}") from None
        header = _header_cells(manifest)
        repeated = sorted({h for h in header if header.count(h) > 1})
        if repeated:
            raise MotionDataError(f"{manifest}, line 1: column(s) {repeated} appear more than once in the header")
        file_col = _key_column(man.columns, self.file_column, "file", FILE_COLUMNS)
        subject_col = _key_column(man.columns, self.subject_column, "subject", SUBJECT_COLUMNS)
        missing = [c for c in (file_col, subject_col, *self.attributes) if c not in man.columns]
        if missing:
            raise MotionDataError(
                f"{manifest}, line 1: missing column(s) {', '.join(map(repr, missing))}; the "
                f"header has {', '.join(map(repr, man.columns))}"
            )
        if len(man) == 0:
            raise MotionDataError(f"{manifest}: no recordings listed (only a header)")
        attr_names = list(self.attributes) or [c for c in man.columns if c not in (file_col, subject_col)]
        if not self.attributes:
            for kind, names, col in (("file", FILE_COLUMNS, file_col), ("subject", SUBJECT_COLUMNS, subject_col)):
                other = [c for c in attr_names if str(c).strip().lower() in names]
                if other:
                    raise MotionDataError(
                        f"{manifest}, line 1: columns {[col, *other]} all name the {kind}; keep "
                        f"one, or choose the attributes with the parameter 'attributes'"
                    )
        attr_values = {a: _manifest_column(man[a]) for a in attr_names}
        channels = list(self.channels)
        recordings = []
        first_line: dict[str, int] = {}
        for i, row in enumerate(man.itertuples(index=False)):
            line = i + 2  # 1-based, after the header (blank lines are rare in manifests)
            rec = dict(zip(man.columns, row, strict=True))
            rel, subject = rec[file_col].strip(), rec[subject_col].strip()
            if not rel or not subject:
                what = file_col if not rel else subject_col
                raise MotionDataError(f"{manifest}, line {line}: empty {what!r}")
            if file_key(rel) in first_line:
                raise MotionDataError(
                    f"{manifest}, line {line}: column {file_col!r}: {rel!r} is listed twice (lines "
                    f"{first_line[file_key(rel)]} and {line}); each recording may have one row"
                )
            first_line[file_key(rel)] = line
            try:
                f = resolve_within(manifest.parent, rel, where=f"{manifest}, line {line}")
            except DataError as e:
                raise MotionDataError(str(e)) from None
            if not f.is_file():
                raise MotionDataError(f"{manifest}, line {line}: recording file {str(f)!r} does not exist")
            delim = self._delimiter(f)
            if not channels:
                channels = self._all_channels(f, delim)
            cols: list[str | int] = channels if self.header else [_field_number(c, manifest) for c in channels]
            data = read_numeric(f, cols, delimiter=delim, header=self.header)
            recordings.append(
                _Recording(
                    data=data, subject=subject, name=f"{rel}/", attributes={a: attr_values[a][i] for a in attr_names}
                )
            )
        names = channels if self.header else [f"ch{c}" for c in channels]
        return self._table(recordings, names, self.sample_rate, attr_names)

    def _delimiter(self, f: Path) -> str | None:
        """The field separator of a recording file."""
        if self.delimiter != "auto":
            return _DELIMITERS[self.delimiter]
        suffix = f.suffix.lower()
        return "\t" if suffix in (".tsv", ".tab") else None if suffix in (".txt", ".dat") else ","

    def _all_channels(self, f: Path, delim: str | None) -> list[str]:
        """Every column of the first recording except the time column."""
        import pandas as pd

        try:
            head = pd.read_csv(f, sep=r"\s+" if delim is None else delim, header=0 if self.header else None, nrows=1)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
            raise MotionDataError(
                f"{f}: the file is empty"
                if isinstance(e, pd.errors.EmptyDataError)
                else f"{f}: not a readable text table ({type(e).__name__}: {e})"
            ) from None
        if self.header:
            cols = [str(c) for c in head.columns if str(c) != self.time_column and not str(c).startswith("Unnamed")]
        else:
            cols = [str(i) for i in range(head.shape[1]) if str(i) != self.time_column]
        if not cols:
            raise MotionDataError(f"{f}, line 1: no channel columns")
        return cols


def _header_cells(manifest: Path) -> list[str]:
    """The manifest's header cells as written (pandas renames a repeated name to ``name.1``)."""
    import csv

    with open(manifest, encoding="utf-8-sig", errors="replace", newline="") as f:
        for line in f:
            if line.strip():
                return [c.strip() for c in next(csv.reader([line]))]
    return []


def _key_column(columns: Any, chosen: str, kind: str, names: tuple[str, ...]) -> str:
    """The manifest's file (subject) column: ``chosen``; when it is the default and absent, the one column with
    another key name of that kind."""
    default = {"file": "file", "subject": "subject"}[kind]
    if chosen in columns or chosen != default:
        return chosen
    found = [c for c in columns if str(c).strip().lower() in names]
    return found[0] if len(found) == 1 else chosen


def _field_number(c: str, manifest: Path) -> int:
    """A 0-based field number given as text, or a clear error."""
    if not str(c).isdigit():
        raise MotionDataError(
            f"motion.csv: without a header, channels are 0-based field numbers; got {c!r} (manifest {manifest})"
        )
    return int(c)


def _manifest_column(col: Any) -> np.ndarray:
    """A manifest column (read as text) as int64, float64 or str values; empty cells become None."""
    import pandas as pd

    s = col.str.strip()
    empty = s == ""
    num = pd.to_numeric(s.where(~empty), errors="coerce")
    if (num.notna() | empty).all() and num.notna().any():
        if ((num.dropna() % 1) == 0).all() and not s[~empty].str.contains(r"[.eE]").any():
            vals = np.array([None if e else int(v) for v, e in zip(num, empty, strict=True)], dtype=object)
        else:
            vals = np.array([None if e else float(v) for v, e in zip(num, empty, strict=True)], dtype=object)
        return vals
    return np.array([None if e else v for v, e in zip(s, empty, strict=True)], dtype=object)
