"""Run a command beside CPU-bound busy processes (a loaded machine), e.g. the test suite:

    python tools/busy.py --procs 1 -- python -m pytest tests --shuffle 7

The busy processes spin on arithmetic until the command ends (they are killed then, also on Ctrl-C); the exit
status is the command's. Used to check that the suite passes on a loaded machine (issue 32, item 8).
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys


def _spin() -> None:  # pragma: no cover - runs in the busy processes
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/busy.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=1, help="busy processes beside the command (default 1)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("give the command to run after --")
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(max(a.procs, 0))]
    for p in busy:
        p.start()
    try:
        return subprocess.call(command)
    finally:
        for p in busy:
            p.kill()
            p.join()


if __name__ == "__main__":
    sys.exit(main())
