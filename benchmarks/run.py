"""Run every benchmark and write ``benchmarks/results.json`` and ``benchmarks/results.md``.

    python -m benchmarks.run            # full sizes (tens of minutes; needs several GB of disk)
    python -m benchmarks.run --quick    # tiny sizes, a smoke run
    python -m benchmarks.run table_io   # only some benchmarks

Every figure is a ratio (or a value against its target) measured side by side in the same run, with the
absolute times beside it.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import read_results, update_results

HERE = Path(__file__).resolve().parent
# gpu.py has its own command and its own key in results.json (``make bench-gpu``; it needs a CUDA GPU)
BENCHMARKS = [p.stem for p in sorted(HERE.glob("*.py")) if p.stem not in ("__init__", "run", "common", "gpu")]


def markdown(results: list[dict[str, Any]]) -> str:
    """A markdown table of every figure."""
    lines = ["| benchmark | figure | value | target | met | context |", "|---|---|---|---|---|---|"]
    for res in results:
        if "error" in res:
            lines.append(f"| {res['benchmark']} | (failed) | – | – | ✗ | {res['error']} |")
            continue
        for f in res["figures"]:
            ctx = ", ".join(
                f"{k}={v}"
                for k, v in f.items()
                if k not in ("name", "value", "unit", "target", "passed") and not isinstance(v, dict)
            )
            lines.append(
                f"| {res['benchmark']} | {f['name']} | {f['value']:.3g} {f['unit']} | {f['target']} | "
                f"{'✓' if f['passed'] else '✗'} | {ctx} |"
            )
        for note in res.get("notes", []):  # e.g. a method skipped because it is not installed
            lines.append(f"| {res['benchmark']} | (note) | – | – | – | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {BENCHMARKS})")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--out", default=str(HERE / "results.json"))
    a = ap.parse_args(argv)
    unknown = set(a.names) - set(BENCHMARKS)
    if unknown:
        ap.error(f"unknown benchmark(s) {sorted(unknown)}; available: {BENCHMARKS}")
    results = []
    for name in a.names or BENCHMARKS:
        print(f"== {name}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            res = importlib.import_module(f"benchmarks.{name}").run(quick=a.quick)
        except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the others
            res = {"benchmark": name, "error": f"{type(exc).__name__}: {exc}", "figures": []}
        res["seconds"] = round(time.perf_counter() - t0, 2)
        results.append(res)
    out = Path(a.out)
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": __import__("os").cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    for res in results:
        res["machine"], res["quick"] = machine, a.quick
    # a run of some benchmarks replaces their entries and keeps the others' (and the "gpu" key of benchmarks.gpu)
    replaced = {x["benchmark"] for x in results}
    kept = [r for r in read_results(out).get("results", []) if r.get("benchmark") not in replaced]
    update_results(out, machine=machine, quick=a.quick, results=kept + results)
    out.with_suffix(".md").write_text(markdown(kept + results))
    print(markdown(results))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
