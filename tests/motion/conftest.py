"""Fixtures of the motion plugin's tests: a small data set in MotionSense's exact layout, written into tmp_path."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

MS_COLUMNS = [
    "attitude.roll", "attitude.pitch", "attitude.yaw", "gravity.x", "gravity.y", "gravity.z",
    "rotationRate.x", "rotationRate.y", "rotationRate.z", "userAcceleration.x", "userAcceleration.y",
    "userAcceleration.z",
]  # fmt: skip

#: (trial folder, subject code) -> number of rows of the fixture recording
MS_LENGTHS = {
    ("dws_1", 1): 300, ("dws_1", 2): 260, ("dws_1", 3): 130,
    ("wlk_7", 1): 400, ("wlk_7", 2): 128, ("wlk_7", 3): 90,  # 90 < one window of 128: no window
    ("jog_9", 1): 256, ("jog_9", 2): 200, ("jog_9", 3): 520,
    ("std_6", 1): 150,
}  # fmt: skip
MS_SUBJECTS = {1: (102, 188, 46, 1), 2: (72, 180, 28, 1), 3: (48, 161, 28, 0)}  # code: weight, height, age, gender


def write_motionsense_csv(path: Path, data: np.ndarray, columns: list[str] = MS_COLUMNS) -> None:
    """One recording in MotionSense's format: an unnamed index column, then the named columns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["," + ",".join(columns)]
    lines += [f"{i}," + ",".join(f"{v:.6f}" for v in row) for i, row in enumerate(data)]
    path.write_text("\n".join(lines) + "\n")


def motionsense_data(code: int, trial: str, n: int) -> np.ndarray:
    """Deterministic values: column j of row i is ``code * 1000 + trial_no + i / 1000 + j / 100``, so any window
    can be traced back to its file and row."""
    trial_no = int(trial.split("_")[1])
    i = np.arange(n)[:, None]
    j = np.arange(len(MS_COLUMNS))[None, :]
    return code * 1000.0 + trial_no + i / 1000.0 + j / 100.0


@pytest.fixture
def motionsense_dir(tmp_path: Path) -> Path:
    """A MotionSense-layout folder: ``A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` and
    ``data_subjects_info.csv`` (see :data:`MS_LENGTHS`, :data:`MS_SUBJECTS`)."""
    root = tmp_path / "motionsense"
    for (trial, code), n in MS_LENGTHS.items():
        write_motionsense_csv(
            root / "A_DeviceMotion_data" / trial / f"sub_{code}.csv", motionsense_data(code, trial, n)
        )
    (root / "A_DeviceMotion_data" / "__MACOSX").mkdir()  # ignored, as in the real archive
    info = ["code,weight,height,age,gender"] + [f"{c},{w},{h},{a},{g}" for c, (w, h, a, g) in MS_SUBJECTS.items()]
    (root / "data_subjects_info.csv").write_text("\n".join(info) + "\n")
    return root


def n_windows(length: int, window: int, stride: int) -> int:
    """Windows a recording of ``length`` samples gives."""
    return 0 if length < window else (length - window) // stride + 1


@pytest.fixture
def ms() -> SimpleNamespace:
    """The fixture's layout and helpers, for assertions: ``lengths``, ``subjects``, ``columns``, ``data(code,
    trial, n)``, ``write(path, data, columns)``, ``n_windows(length, window, stride)``."""
    return SimpleNamespace(
        lengths=MS_LENGTHS,
        subjects=MS_SUBJECTS,
        columns=MS_COLUMNS,
        data=motionsense_data,
        write=write_motionsense_csv,
        n_windows=n_windows,
    )


_LOADED: dict = {}


@pytest.fixture
def phone_gait(shared_data):
    """The shared phone-gait windows with the default parameters (both sub-sets, 19 subjects, 64 × 6), loaded
    once per session (tables are immutable); skips when ../shared/data is absent."""
    path = shared_data / "phone_gait_imu"
    if path not in _LOADED:
        import bioanon

        _LOADED[path] = bioanon.load_dataset("motion.phone_gait", path)
    return _LOADED[path]
