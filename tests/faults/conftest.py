"""The fault-injection suite (issue 33): random kills, damaged cache entries, hostile configs and data files.

Every probe counts its tries and how many held (``tally``); the counts are printed at the end of the session
(and by each test under ``pytest -s``). ``BIOANON_FAULT_TRIES=N`` runs N tries of the repeated probes (default a
few, to keep the suite fast), ``BIOANON_FAULT_SEED=S`` draws other points."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the suite's helpers (faultkit.py) for --import-mode=importlib

from faultkit import tally_lines  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    lines = tally_lines()
    if lines:
        terminalreporter.section("fault injection: tries / held")
        for line in lines:
            terminalreporter.write_line(line)
