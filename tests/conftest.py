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


def pytest_addoption(parser):
    parser.addoption(
        "--shuffle",
        type=int,
        default=int(os.environ.get("BIOANON_TEST_SHUFFLE", "-1")),
        metavar="SEED",
        help="run the test files in a random order, and each file's tests in a random order, from SEED "
        "(like pytest-randomly; default $BIOANON_TEST_SHUFFLE, else the written order): finds tests that "
        "depend on what ran before them",
    )


def pytest_report_header(config):
    seed = config.getoption("--shuffle")
    return [f"bioanon: tests shuffled with --shuffle {seed}"] if seed >= 0 else []


def pytest_collection_modifyitems(config, items):
    """With ``--shuffle SEED``: files in a seeded random order, each file's tests shuffled within it (a file's
    module-scoped fixtures are still set up once)."""
    import random

    seed = config.getoption("--shuffle")
    if seed < 0:
        return
    rng = random.Random(seed)
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(str(item.path), []).append(item)
    files = list(by_file)
    rng.shuffle(files)
    shuffled = []
    for f in files:
        group = by_file[f]
        rng.shuffle(group)
        shuffled += group
    items[:] = shuffled
