"""Helpers shared by the benchmarks: timing, peak memory, and the figure record every benchmark returns."""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable
from pathlib import Path
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


def _status_bytes(key: str) -> int | None:
    """A ``/proc/self/status`` size (``VmRSS``, ``VmHWM``) in bytes, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the process's peak resident size (VmHWM) to its current size; False where Linux does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measured(fn: Callable[[], Any]) -> tuple[float, int | None, Any]:
    """(wall seconds, peak extra resident bytes, result) of one call. The extra is the peak resident size during
    the call (VmHWM, reset just before) minus the resident size before it — what the call needed on top of
    what existed, its result included. None where the peak cannot be reset."""
    before = _status_bytes("VmRSS") if reset_peak_rss() else None
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = _status_bytes("VmHWM") if before is not None else None
    return seconds, (None if peak is None else max(0, peak - before)), out


def side_by_side(fns: dict[str, Callable[[], Any]], repeat: int = 1) -> dict[str, dict[str, Any]]:
    """Time several implementations of one job interleaved (a, b, a, b, …: a load spike on a shared machine hits
    both), ``repeat`` rounds. Per name: best and all wall times, and the largest peak extra memory (MiB)."""
    out: dict[str, dict[str, Any]] = {name: {"all": [], "peak_mib": None} for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            seconds, extra, res = measured(fn)
            del res
            rec = out[name]
            rec["all"].append(round(seconds, 5))
            if extra is not None:
                rec["peak_mib"] = round(max(rec["peak_mib"] or 0.0, extra / 2**20), 1)
    for rec in out.values():
        rec["seconds"] = min(rec["all"])
    return out


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
