"""Helpers of the fault-injection suite: seeded tries, the tries / held tally, CLI runs waited on by state."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from evalconfigs import SMALL, config

from bioanon.evaluation.config import load_config

#: probe name -> [tries, held], over the session
TALLY: dict[str, list[int]] = {}

DEADLINE = 300.0  # seconds for any one run to reach a state or end (a small run takes a few seconds)


def fault_tries(default: int) -> int:
    """How many tries a repeated probe makes: ``$BIOANON_FAULT_TRIES`` or ``default``."""
    return int(os.environ.get("BIOANON_FAULT_TRIES", default))


def fault_rng(probe: str) -> random.Random:
    """The seeded random source of one probe (``$BIOANON_FAULT_SEED``, default 33, and the probe's name)."""
    return random.Random(f"{os.environ.get('BIOANON_FAULT_SEED', '33')}:{probe}")


def count(probe: str, held: bool) -> None:
    """Count one try of ``probe`` and whether it held."""
    tries = TALLY.setdefault(probe, [0, 0])
    tries[0] += 1
    tries[1] += int(held)


def tally_lines() -> list[str]:
    """One line per probe: ``probe: held/tries held``."""
    return [f"{probe}: {held}/{tries} held" for probe, (tries, held) in sorted(TALLY.items())]


def small_toml(path: Path) -> Path:
    """The small evaluation of the tests (``evalconfigs.SMALL``) as a TOML file at ``path``."""
    path.write_text(load_config(config(**SMALL)).to_toml(), encoding="utf-8")
    return path


def json_records(cache_dir: Path) -> int:
    """How many JSON records (task records, whole: temp files of writes in progress do not count) the cache holds."""
    folder = cache_dir / "json"
    return sum(1 for _ in folder.rglob("*.json")) if folder.exists() else 0


def evaluate_command(toml: Path, out: Path, run_id: str) -> list[str]:
    """``bioanon evaluate`` of ``toml`` into ``out/run_id`` as a command line (the CLI of this Python)."""
    cli = "import sys; from bioanon.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", cli, "evaluate", str(toml), "--out", str(out), "--run-id", run_id]


def cli_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run with its own cache."""
    return {**os.environ, "BIOANON_CACHE": str(cache_dir), "PYTHONUNBUFFERED": "1", **extra}


def wait_for(state: Callable[[], bool], proc: subprocess.Popen, what: str) -> bool:
    """Poll until ``state()`` is true (True) or ``proc`` has ended first (False); fail after :data:`DEADLINE`."""
    end = time.monotonic() + DEADLINE
    while not state():
        if proc.poll() is not None:
            return False
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"{what} not reached in {DEADLINE:.0f} s")
        time.sleep(0.005)
    return True
