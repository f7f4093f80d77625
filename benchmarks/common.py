"""Helpers shared by the benchmarks: timing, peak memory, and the figure record every benchmark returns."""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def cpu_timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Process CPU time (all threads) of one call, and its result."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def figure(name: str, *, value: float, target: str, passed: bool, unit: str = "×", **context: Any) -> dict[str, Any]:
    """One measured figure: a ratio (or value) with its target, whether it is met, and absolute context."""
    return {"name": name, "value": float(value), "unit": unit, "target": target, "passed": bool(passed), **context}


def main(run: Callable[..., dict[str, Any]], doc: str | None) -> None:
    """Command line of a single benchmark module: ``--quick`` and ``--json PATH``."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--json", default=None, help="also write the result here")
    a = ap.parse_args()
    res = run(quick=a.quick)
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
