"""Skeleton layouts, the gait metadata convention and shared array helpers.

Every gait table carries a ``pose`` payload of shape ``(frames, joints, 3)`` (float32) and, in its metadata
(``SampleTable.metadata``), these keys:

``trait``        ``"gait"``
``joints``       list of joint (or marker) names, one per joint axis of the pose
``body_parts``   ``{part: [joint names]}`` with parts among :data:`BODY_PARTS` (a joint belongs to at most one
                 part; parts may be missing, e.g. a marker set without head markers)
``frame_rate``   frames per second of the stored (resampled) sequences
``source_frame_rate``  the recording's rate before resampling (when known)
``frames``       the fixed frame count every sequence was resampled to
``units``        ``"m"``, ``"cm"`` or ``"mm"``: the unit of the coordinates
``up_axis``      index (0, 1, 2) of the vertical axis (Kinect: 1 = y; most marker labs: 2 = z)

Tables without this metadata (e.g. ``bioanon.testing.make_table(payload="pose")``) still work with every method
that does not need it: joints are then named ``j0, j1, …``, units are metres, the up axis is 1 and there are no
body-part groups (methods that need groups say so, or take them as a ``body_parts`` parameter).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from bioanon.api import ParameterError, TableError

#: The body-part groups gait tables use (the names of SEBA's ``body_parts_to_marker``).
BODY_PARTS = ("head", "torso", "left_arm", "right_arm", "hip", "left_leg", "right_leg")

#: Coordinate units and their size in metres.
UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001}

#: Kinect v2 joints as stored in the UCalgary GeometricPositions CSVs (column order).
KINECT_V2_18 = (
    "foot_left", "ankle_left", "knee_left", "hip_left",
    "foot_right", "ankle_right", "knee_right", "hip_right",
    "spine_base", "spine_mid", "neck", "head",
    "shoulder_left", "shoulder_right", "wrist_left", "wrist_right", "elbow_left", "elbow_right",
)  # fmt: skip

#: Body parts of the 18 Kinect joints: shoulders move with the trunk (torso), the hip group is the pelvis.
KINECT_V2_18_PARTS = {
    "head": ["head", "neck"],
    "torso": ["spine_mid", "shoulder_left", "shoulder_right"],
    "left_arm": ["elbow_left", "wrist_left"],
    "right_arm": ["elbow_right", "wrist_right"],
    "hip": ["spine_base", "hip_left", "hip_right"],
    "left_leg": ["knee_left", "ankle_left", "foot_left"],
    "right_leg": ["knee_right", "ankle_right", "foot_right"],
}

#: Plug-in Gait full-body marker labels by body part (Vicon's standard set, used by many lab gait data sets,
#: e.g. Horst et al. 2019). Labels are matched case-insensitively after stripping a ``Subject:`` prefix.
PLUG_IN_GAIT_PARTS = {
    "head": ["LFHD", "RFHD", "LBHD", "RBHD"],
    "torso": ["C7", "T10", "CLAV", "STRN", "RBAK", "LSHO", "RSHO"],
    "left_arm": ["LUPA", "LELB", "LFRM", "LWRA", "LWRB", "LFIN"],
    "right_arm": ["RUPA", "RELB", "RFRM", "RWRA", "RWRB", "RFIN"],
    "hip": ["LASI", "RASI", "LPSI", "RPSI", "SACR"],
    "left_leg": ["LTHI", "LKNE", "LTIB", "LANK", "LHEE", "LTOE", "LMT5", "LMT1"],
    "right_leg": ["RTHI", "RKNE", "RTIB", "RANK", "RHEE", "RTOE", "RMT5", "RMT1"],
}


# --------------------------------------------------------------------------------------------------- metadata


def gait_metadata(
    *,
    joints: Sequence[str],
    body_parts: Mapping[str, Sequence[str]] | None,
    frame_rate: float | None,
    frames: int,
    units: str = "m",
    up_axis: int = 1,
    source: str,
    source_frame_rate: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The metadata dict of a gait table (checked: body parts name existing joints, no joint in two parts)."""
    joints = [str(j) for j in joints]
    parts = check_body_parts(body_parts or {}, joints, where=source)
    meta: dict[str, Any] = {
        "trait": "gait",
        "joints": joints,
        "body_parts": parts,
        "frames": int(frames),
        "units": units,
        "up_axis": int(up_axis),
        "source": source,
    }
    if frame_rate is not None:
        meta["frame_rate"] = float(frame_rate)
    if source_frame_rate is not None:
        meta["source_frame_rate"] = float(source_frame_rate)
    meta.update(extra)
    return meta


def check_body_parts(parts: Mapping[str, Sequence[str]], joints: Sequence[str], *, where: str) -> dict[str, list]:
    """Validate a ``{part: [joint names]}`` mapping against ``joints``; returns it with lists (parts in
    :data:`BODY_PARTS` order)."""
    if not isinstance(parts, Mapping):
        raise TableError(f"{where}: body parts must be a mapping part -> joint names, got {type(parts).__name__}")
    unknown_parts = [p for p in parts if p not in BODY_PARTS]
    if unknown_parts:
        raise TableError(f"{where}: unknown body parts {unknown_parts}; allowed: {list(BODY_PARTS)}")
    known = set(joints)
    seen: dict[str, str] = {}
    out: dict[str, list] = {}
    for part in BODY_PARTS:
        if part not in parts:
            continue
        names = parts[part]
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise TableError(f"{where}: body part {part!r} must list joint names, got {names!r}")
        for name in names:
            if name not in known:
                raise TableError(
                    f"{where}: body part {part!r} names joint {name!r}, which is not one of the "
                    f"joints {list(joints)[:8]}{' …' if len(joints) > 8 else ''}"
                )
            if name in seen:
                raise TableError(f"{where}: joint {name!r} is in body parts {seen[name]!r} and {part!r}")
            seen[name] = part
        out[part] = [str(n) for n in names]
    return out


def joint_names(table: Any) -> list[str]:
    """The table's joint names (``j0, j1, …`` when its metadata has none)."""
    n = table.payload_shape("pose")[1]
    names = table.metadata.get("joints")
    if isinstance(names, list) and len(names) == n:
        return [str(x) for x in names]
    return [f"j{i}" for i in range(n)]


def parse_body_parts_param(text: str, method_id: str) -> dict[str, list[str]] | None:
    """Parse a ``body_parts`` parameter (JSON object part -> joint names); ``""`` means: use the table's."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ParameterError(method_id, "body_parts", text, f"a JSON object part -> joint names ({e})") from None
    if not isinstance(value, dict):
        raise ParameterError(method_id, "body_parts", text, f"a JSON object, not a {type(value).__name__}")
    return value


def valid_body_parts_json(text: str) -> bool:
    """Validator of ``body_parts`` parameters: empty, or a JSON object of part -> list of joint names."""
    if text == "":
        return True
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return False
    return isinstance(value, dict) and all(
        p in BODY_PARTS and isinstance(v, list) and all(isinstance(j, str) for j in v) for p, v in value.items()
    )


BODY_PARTS_HELP = (
    'body parts as a JSON object part -> joint names, e.g. {"left_leg": ["knee_left"]}, '
    "overriding the table's metadata (default \"\": the table's own)"
)
BODY_PARTS_CHECK = "'' or a JSON object mapping parts (" + ", ".join(BODY_PARTS) + ") to lists of joint names"


def body_part_indices(table: Any, override: str = "", *, method_id: str = "") -> dict[str, np.ndarray]:
    """``{part: joint indices}`` from the ``override`` JSON (when given) or the table's metadata.

    Raises
    ------
    TableError
        When neither defines body parts, naming the method and how to give them.
    """
    joints = joint_names(table)
    parts = parse_body_parts_param(override, method_id) if override else table.metadata.get("body_parts")
    if not parts:
        raise TableError(
            f"{method_id}: the table has no body-part groups (metadata 'body_parts'); load it with a gait "
            f"source that defines them, or give the parameter body_parts as JSON, e.g. "
            f'{{"left_leg": [{", ".join(repr(j) for j in joints[:2])}]}}'
        )
    parts = check_body_parts(parts, joints, where=method_id or "body_parts")
    index = {name: i for i, name in enumerate(joints)}
    return {p: np.array([index[n] for n in names], dtype=np.int64) for p, names in parts.items()}


def unit_scale(table: Any) -> float:
    """Data units per metre (1 for metres, 1000 for millimetres)."""
    units = table.metadata.get("units", "m")
    if units not in UNITS:
        raise TableError(f"metadata 'units' = {units!r} is not one of {list(UNITS)}")
    return 1.0 / UNITS[units]


def up_axis(table: Any) -> int:
    """Index of the vertical axis (metadata ``up_axis``, default 1)."""
    axis = table.metadata.get("up_axis", 1)
    if axis not in (0, 1, 2):
        raise TableError(f"metadata 'up_axis' = {axis!r} must be 0, 1 or 2")
    return int(axis)


def poses(table: Any) -> np.ndarray:
    """The ``pose`` payload as a read-only float32 array ``(N, frames, joints, 3)``."""
    _require_poses(table)
    return table.payload("pose")


def per_walk(table: Any, function: Any) -> np.ndarray:
    """``function(poses(table))`` for a function that maps each walk on its own (features), computed on the
    payload's chunks in turn: the poses of a table read from several stored parts are not first copied into
    one array."""
    _require_poses(table)
    return np.asarray(table.map_payload("pose", function))


def _require_poses(table: Any) -> None:
    if "pose" not in table.payload_names:
        raise TableError(f"a gait method needs a 'pose' payload; the table has {table.payload_names}")


# --------------------------------------------------------------------------------------------------- arrays


def resample(x: np.ndarray, frames: int) -> np.ndarray:
    """Linear resampling along axis 1 of a batch ``(N, T, ...)`` to ``(N, frames, ...)``, vectorized.

    The first and last frames are kept; frame k of the output sits at time ``k * (T - 1) / (frames - 1)`` of
    the input. ``T == 1`` repeats the single frame."""
    x = np.asarray(x)
    t = x.shape[1]
    if t == frames:
        return x.astype(np.float32, copy=False)
    if t == 1:
        return np.repeat(x, frames, axis=1).astype(np.float32)
    pos = np.linspace(0.0, t - 1.0, frames)
    i0 = np.minimum(np.floor(pos).astype(np.int64), t - 2)
    w = (pos - i0).reshape((1, frames) + (1,) * (x.ndim - 2))
    out = x[:, i0] * (1.0 - w) + x[:, i0 + 1] * w
    return out.astype(np.float32)


def resample_ragged(sequences: Sequence[np.ndarray], frames: int) -> np.ndarray:
    """Resample sequences of different lengths (each ``(T_i, joints, 3)``) to ``(N, frames, joints, 3)``:
    one vectorized call per distinct length (recordings usually share a handful of lengths)."""
    if not sequences:
        return np.zeros((0, frames, 0, 3), np.float32)
    out = np.empty((len(sequences), frames) + sequences[0].shape[1:], np.float32)
    lengths = np.array([len(s) for s in sequences])
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        # in blocks of rows (each row is resampled on its own): no second copy of the whole data set
        for block in np.array_split(rows, max(1, len(rows) // _RESAMPLE_BLOCK)):
            out[block] = resample(np.stack([sequences[i] for i in block]), frames)
    return out


_RESAMPLE_BLOCK = 128  # sequences resampled at once by resample_ragged


def resample_stream(sequences: Iterable[np.ndarray], count: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`resample_ragged` of ``count`` sequences read one at a time (e.g. from files): at most
    ``_RESAMPLE_BLOCK`` source sequences are held at once, never the whole source data set beside the result
    (the same values: each sequence is resampled on its own). Returns ``(N, frames, joints, 3)`` float32 and the
    source lengths."""
    lengths = np.zeros(count, np.int64)
    out: np.ndarray | None = None
    block: list[np.ndarray] = []
    done = 0

    def flush() -> None:
        nonlocal out, done
        resampled = resample_ragged(block, frames)
        if out is None:
            out = np.empty((count, *resampled.shape[1:]), np.float32)
        out[done : done + len(block)] = resampled
        done += len(block)
        block.clear()

    for i, x in enumerate(sequences):
        if i >= count:
            raise TableError(f"resample_stream: more than the {count} sequences announced")
        lengths[i] = len(x)
        block.append(x)
        if len(block) == _RESAMPLE_BLOCK:
            flush()
    if block:
        flush()
    if done != count:
        raise TableError(f"resample_stream: {done} sequences, {count} announced")
    return (out if out is not None else np.zeros((0, frames, 0, 3), np.float32)), lengths


def interpolate_gaps(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Fill invalid samples of marker trajectories by linear interpolation in time (edges: nearest valid).

    ``x``: ``(T, M, 3)``; ``valid``: ``(T, M)`` bool. Markers with no valid sample are left unchanged (the caller
    reports them). Only markers with gaps are touched (one ``np.interp`` per axis of such a marker)."""
    out = x.copy()
    t = np.arange(x.shape[0])
    for m in np.flatnonzero(~valid.all(axis=0) & valid.any(axis=0)):  # only markers with gaps
        ok = valid[:, m]
        for a in range(3):
            out[:, m, a] = np.interp(t, t[ok], x[ok, m, a])
    return out


def frame_rate_after(source_rate: float | None, lengths: Sequence[int], frames: int) -> float | None:
    """The frame rate of sequences of the given lengths after resampling to ``frames`` frames (median length)."""
    if not source_rate or not len(lengths):
        return None
    length = float(np.median(lengths))
    if length <= 1:
        return float(source_rate)
    return float(source_rate) * (frames - 1) / (length - 1)
