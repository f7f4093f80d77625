"""The motion example configs stay valid (every id and parameter checked, without running them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bioanon.evaluation.config import load_config

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("motion-*.toml"))


def test_there_are_motion_examples():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_motion_example_config_is_valid(path):
    cfg = load_config(path, check_paths=False)
    assert cfg.dataset.source == "motion.phone_gait"
    assert cfg.dataset.path.endswith("shared/data/phone_gait_imu")  # relative to the TOML file
    assert any(a.id == "motion.random_set_mean" for a in cfg.anonymizers)
