"""Helpers shared by the benchmarks: timing, peak memory, and the figure record every benchmark returns."""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Variables a timed ``bioanon`` process must not inherit: the job count the command line gives, and a switch that
#: stops Python from writing compiled bytecode (set in some development shells). Without ``.pyc`` files every run
#: compiles every module again; an installed package, ours or a peer's, has them.
CHILD_ENV_DROPPED = ("BIOANON_JOBS", "PYTHONDONTWRITEBYTECODE")


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a timed child process: this one's, less :data:`CHILD_ENV_DROPPED`, plus ``extra``."""
    return {k: v for k, v in os.environ.items() if k not in CHILD_ENV_DROPPED} | extra


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


def status_bytes(key: str) -> int | None:
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
    before = status_bytes("VmRSS") if reset_peak_rss() else None
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = status_bytes("VmHWM") if before is not None else None
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


def run_cases(
    label: str,
    cases: list[Any],
    bench: Callable[[Any], tuple[list[dict[str, Any]], dict[str, Any]]],
    only: list[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Run ``bench(case)`` for every case whose ``method_id`` is installed (and in ``only``, when given).

    Returns (figures, per-case details, notes); a method that is not installed is skipped with a note."""
    import bioanon

    registry = bioanon.get_registry()
    figures: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    notes: list[str] = []
    for case in cases:
        if only and case.method_id not in only:
            continue
        if case.method_id not in registry:
            notes.append(f"{case.method_id} skipped: not installed (registered by its plugin when present)")
            continue
        figs, info = bench(case)
        figures += figs
        details.append(info)
    for note in notes:
        print(f"{label} benchmark: {note}")
    return figures, details, notes


def print_figures(header: str, figures: list[dict[str, Any]], quick: bool, width: int = 62) -> None:
    """Print a loop benchmark's figures: ratio, target, verdict and the absolute times behind the ratio."""
    print(header + (" — quick: tiny sizes, the ratios say nothing about the targets" if quick else ""))
    for f in figures:
        times = f"method {f['method_s']:.3f} s, " + (
            f"loop {f['loop_s']:.3f} s" if "loop_s" in f else f"python {f['python_s_extrapolated']:.1f} s (extrap.)"
        )
        print(
            f"  {f['name']:<{width}} {f['value']:9.1f}×  target {f['target']:<9} "
            f"{'PASS' if f['passed'] else 'FAIL'}  ({times})"
        )


def read_results(path: str | Path) -> dict[str, Any]:
    """The results document at ``path`` ({} when there is none, or when it is not a JSON object)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def update_results(path: str | Path, **sections: Any) -> None:
    """Set top-level ``sections`` of the results document at ``path``, keeping its other keys; written
    atomically (a temporary file renamed over it), so a crash never leaves half a file."""
    from bioanon.fileio import atomic_write_text

    atomic_write_text(path, json.dumps({**read_results(path), **sections}, indent=2, default=str))


def emit(res: dict[str, Any], show: Callable[[dict[str, Any]], None], json_path: str | None) -> int:
    """End of a benchmark's command line: print the result with ``show`` and write it to ``json_path``."""
    show(res)
    if json_path:
        Path(json_path).write_text(json.dumps(res, indent=2, default=str))
    return 0
