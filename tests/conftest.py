"""Shared test configuration."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# bioanon's fixtures (register_bioanon_plugin, tiny_table, ...): the pytest plugin loads only when asked for
pytest_plugins = ["bioanon.testing"]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # shared helpers (evalconfigs.py) for --import-mode=importlib
# evaluations run in the test process (monkeypatches and spies apply); the worker pool has its own tests
os.environ.setdefault("BIOANON_JOBS", "1")
SHARED_DATA = Path(os.environ.get("BIOANON_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache directory, never the user's."""
    monkeypatch.setenv("BIOANON_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip with the reason when a fresh clone does not have it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA} (present in CI; see README)")
    return SHARED_DATA
