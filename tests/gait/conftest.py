"""Small gait tables shared by the gait tests."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.table import SampleTable
from bioanon_gait.skeleton import gait_metadata

TINY_JOINTS = ["knee_left", "knee_right", "head", "spine_base"]
TINY_PARTS = {"left_leg": ["knee_left"], "right_leg": ["knee_right"], "head": ["head"], "hip": ["spine_base"]}


def tiny_gait_table(n: int = 4, frames: int = 7, seed: int = 0, units: str = "m") -> SampleTable:
    """``n`` sequences (2 per subject) of ``frames`` frames × 4 joints, with body parts and a height attribute."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, frames, len(TINY_JOINTS), 3)).astype(np.float32)
    x[:, :, 2, 1] += 1.7  # head up
    subjects = np.array([f"s{i // 2}" for i in range(n)], dtype=object)
    meta = gait_metadata(
        joints=TINY_JOINTS, body_parts=TINY_PARTS, frame_rate=10.0, frames=frames, units=units, up_axis=1, source="test"
    )
    return SampleTable.from_arrays(
        subject=subjects,
        sample_id=np.array([f"q{i}" for i in range(n)], dtype=object),
        payloads={"pose": x},
        attributes={"height": 1.6 + 0.1 * np.arange(n), "sex": np.array(["F", "M"] * (n // 2), dtype=object)},
        metadata=meta,
    )


@pytest.fixture
def tiny_gait():
    """Factory of tiny gait tables: ``tiny_gait(n=4, frames=7, seed=0, units="m")``."""
    return tiny_gait_table
