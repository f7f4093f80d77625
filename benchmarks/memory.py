"""Where the memory of an evaluation goes: a profile of a cold ``bioanon evaluate --jobs 1`` run, phase by phase.

    python -m benchmarks.memory [--quick] [--json out.json]
    python -m benchmarks.memory --config my_eval.toml        # profile your own evaluation

Each run is a fresh process (its imports count, as a user's run's do) with a cache of its own. A thread samples,
every 5 ms, the process's resident memory split into anonymous pages (``RssAnon``: Python objects, numpy and
Arrow buffers, the libraries' own allocations) and file-backed pages (``RssFile``: the libraries' code and the
cache's memory-mapped tables), and the bytes Arrow has allocated. The run is cut into phases: start-up, importing
the data, the plan, each task (its operation and label) and the results. For each phase: its seconds, the
resident memory at its end and its highest, and Arrow's share at that highest point.

A second run of the same evaluation traces Python's and numpy's allocations (``tracemalloc``, several times
slower; not with ``--quick``) and names the lines of bioanon's code that hold the most memory when its resident
memory is highest: where the remaining copies come from.
A third process imports every module the run had imported when its resident memory was highest, and nothing
else: that is the libraries' floor at the peak (a module the run imports later, such as pandas for the results
tables, is not part of it), and the peak minus that floor is the data and the work.

Cases: the SEBA-shaped gait case (``benchmarks/seba_case.py``: 100 identities × 16 walks × 150 frames ×
17 markers, noise, random 20 identities, SVM) and the scale case at 128,000 samples (``benchmarks/scale.py``:
256-D features, noise ×2, cosine + LDA). ``--quick`` runs both on tiny sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import figure, status_bytes

SAMPLE_S = 0.005
TOP_SITES = 8
ROOT = Path(__file__).resolve().parents[1]


# -- in the profiled process ------------------------------------------------------------------------------------


def rss_parts() -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes of this process (0, 0 off Linux)."""
    return status_bytes("RssAnon") or 0, status_bytes("RssFile") or 0


class Sampler:
    """Samples (seconds, anonymous bytes, file-backed bytes, Arrow bytes) on a thread, and records named phases
    (``with sampler.phase(name)``); with ``trace``, keeps the ``tracemalloc`` snapshot taken at the highest
    resident memory (a new one each time it grows by 3 % and 8 MiB)."""

    def __init__(self, trace: bool = False):
        import threading

        self.t0 = time.perf_counter()
        self.samples: list[tuple[float, int, int, int]] = []
        self.phases: list[tuple[str, float, float]] = []
        self.trace = trace
        self.snapshot: Any = None
        self.snapshot_at: tuple[float, int, int] | None = None  # (seconds, resident bytes, traced bytes)
        self._snap_bytes = 0
        self.peak_modules: list[str] = []  # the modules imported when resident memory was highest
        self._peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        if self.trace:
            import tracemalloc

            tracemalloc.start(8)
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        if self.trace:
            import tracemalloc

            tracemalloc.stop()

    def _sample(self) -> None:
        pa = sys.modules.get("pyarrow")
        total = getattr(pa, "total_allocated_bytes", None)  # None while pyarrow is being imported
        now, anon, file = time.perf_counter() - self.t0, *rss_parts()
        self.samples.append((now, anon, file, int(total()) if total else 0))
        if anon + file > self._peak_bytes:
            self._peak_bytes = anon + file
            self.peak_modules = list(sys.modules)
        if self.trace and anon + file > max(self._snap_bytes * 1.03, self._snap_bytes + 8 * 2**20):  # (costly)
            import tracemalloc

            self._snap_bytes = anon + file
            self.snapshot = tracemalloc.take_snapshot()
            self.snapshot_at = (now, anon + file, tracemalloc.get_traced_memory()[0])

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample()

    def phase(self, name: str) -> Any:
        import contextlib

        @contextlib.contextmanager
        def timed() -> Any:
            start = time.perf_counter() - self.t0
            try:
                yield
            finally:
                self.phases.append((name, start, time.perf_counter() - self.t0))

        return timed()


def _wrap(sampler: Sampler, name: Any, fn: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with sampler.phase(name(*args) if callable(name) else name):
            return fn(*args, **kwargs)

    return wrapped


def top_sites(snapshot: Any, top: int = TOP_SITES) -> list[dict[str, Any]]:
    """The lines of code that hold the most traced memory in ``snapshot``. An allocation made while a module was
    imported is charged to "importing modules"; any other to the innermost frame in bioanon's code (the core and
    the plugins), else in code outside the libraries (a script, a test), else to the library it was made in."""
    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]

    def library(filename: str) -> bool:
        return "site-packages" in filename or filename.startswith(stdlib) or filename.startswith("<")

    sizes: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        frames = list(stat.traceback)  # innermost last
        ours = [f for f in frames if f"{os.sep}core{os.sep}" in f.filename or f"{os.sep}plugins{os.sep}" in f.filename]
        callers = ours or [f for f in frames if not library(f.filename)]
        if any("importlib" in f.filename for f in frames):
            label = "importing modules (their code and objects)"
        elif callers:
            path = Path(callers[-1].filename)
            label = f"{path.parent.name}/{path.name}:{callers[-1].lineno}"
        else:
            parts = Path(frames[-1].filename).parts
            package = parts[parts.index("site-packages") + 1] if "site-packages" in parts else parts[-1]
            label = f"{package} (library)"
        sizes[label] = sizes.get(label, 0) + stat.size
    best = sorted(sizes.items(), key=lambda kv: -kv[1])[:top]
    return [{"site": site, "mib": round(size / 2**20, 1)} for site, size in best]


def profile_here(argv: list[str], trace: bool) -> dict[str, Any]:
    """Run ``bioanon`` with ``argv`` in this process under a :class:`Sampler`; the samples, the phases, the
    modules imported and (with ``trace``) the top allocation sites."""
    with Sampler(trace=trace) as sampler:
        with sampler.phase("start-up and imports"):
            import bioanon.evaluation.run as run_module
            import bioanon.evaluation.tasks as tasks_module
            from bioanon.cli import main

        run_module.import_data = _wrap(sampler, "import the data", run_module.import_data)
        run_module.build_plan = _wrap(sampler, "plan", run_module.build_plan)
        run_module._results = _wrap(sampler, "results", run_module._results)
        tasks_module.run_task = _wrap(sampler, lambda t, *a: f"task {t.op}: {t.label}", tasks_module.run_task)
        rc = main(argv)
    out: dict[str, Any] = {
        "rc": rc,
        "samples": sampler.samples,
        "phases": sampler.phases,
        "modules": _ours_left_out(sys.modules),
        "peak_modules": _ours_left_out(sampler.peak_modules),
    }
    if sampler.snapshot is not None and sampler.snapshot_at is not None:
        at, resident, traced = sampler.snapshot_at
        phase = [name for name, start, end in sampler.phases if start <= at <= end and name.startswith("task")]
        phase = phase or [name for name, start, end in sampler.phases if start <= at <= end]
        out["snapshot"] = {"seconds": round(at, 2), "rss_mib": round(resident / 2**20, 1),
                           "traced_mib": round(traced / 2**20, 1), "phase": (phase or ["-"])[-1]}  # fmt: skip
        out["sites"] = top_sites(sampler.snapshot)
    return out


def _ours_left_out(modules: Any) -> list[str]:
    return sorted(m for m in modules if m != "__main__" and not m.startswith("benchmarks"))


# -- in the benchmark's process ---------------------------------------------------------------------------------


def _child(config: Path, work: Path, trace: bool) -> dict[str, Any]:
    out = work / ("trace.json" if trace else "profile.json")
    argv = ["evaluate", str(config), "--out", str(work / "out"), "--cache-dir", str(work / f"cache-{trace}")]
    argv += ["--jobs", "1", "--quiet", "--no-report"]
    code = (
        "import json, sys; from benchmarks.memory import profile_here; "
        f"r = profile_here({argv!r}, {trace!r}); open({str(out)!r}, 'w').write(json.dumps(r)); sys.exit(r['rc'])"
    )
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the profiled evaluation of {config} failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def library_floor(modules: list[str]) -> dict[str, float]:
    """Resident MiB and seconds of a fresh process that imports ``modules`` (those a run imported) and does
    nothing else."""
    code = (
        "import importlib, sys, time, warnings; t = time.perf_counter(); warnings.simplefilter('ignore')\n"
        f"for m in {modules!r}:\n"
        "    try: importlib.import_module(m)\n"
        "    except BaseException: pass\n"
        "s = open('/proc/self/status').read().split('VmRSS:')[1].split()[0]\n"
        "print(time.perf_counter() - t, int(s) / 1024)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, mib = done.stdout.split()[-2:]
    return {"seconds": round(float(seconds), 3), "mib": round(float(mib), 1)}


def phase_table(prof: dict[str, Any]) -> list[dict[str, Any]]:
    """Per phase: seconds, resident MiB at its end and at its highest (anonymous, file-backed), Arrow's MiB
    at that highest point."""
    samples = prof["samples"]
    rows = []
    for name, start, end in sorted(prof["phases"], key=lambda p: (p[1], -p[2])):
        before = [s for s in samples if s[0] <= end]
        inside = [s for s in samples if start <= s[0] <= end] or (before or samples)[-1:]  # none: the last before
        high = max(inside, key=lambda s: s[1] + s[2])
        last = inside[-1]
        rows.append(
            {
                "phase": name,
                "seconds": round(end - start, 3),
                "rss_end_mib": round((last[1] + last[2]) / 2**20, 1),
                "rss_high_mib": round((high[1] + high[2]) / 2**20, 1),
                "anon_high_mib": round(high[1] / 2**20, 1),
                "file_high_mib": round(high[2] / 2**20, 1),
                "arrow_high_mib": round(high[3] / 2**20, 1),
            }
        )
    return rows


def profile_config(config: Path, work: Path, trace: bool = True) -> dict[str, Any]:
    """The profile of one evaluation config: phases, peak split into libraries and data, and (``trace``: a
    second, traced run, several times slower) the top sites."""
    prof = _child(config, work, trace=False)
    traced = _child(config, work, trace=True) if trace else {}
    floor = library_floor(prof.get("peak_modules") or prof["modules"])
    peak = max(prof["samples"], key=lambda s: s[1] + s[2])
    peak_mib = (peak[1] + peak[2]) / 2**20
    return {
        "peak_mib": round(peak_mib, 1),
        "peak_anon_mib": round(peak[1] / 2**20, 1),
        "peak_file_mib": round(peak[2] / 2**20, 1),
        "peak_arrow_mib": round(peak[3] / 2**20, 1),
        "peak_at_s": round(peak[0], 2),
        "libraries_mib": floor["mib"],
        "libraries_import_s": floor["seconds"],
        "data_and_work_mib": round(peak_mib - floor["mib"], 1),
        "seconds": round(prof["samples"][-1][0], 2),
        "phases": phase_table(prof),
        "traced_at": traced.get("snapshot"),
        "top_sites": traced.get("sites", []),
    }


def _cases(tmp: Path, quick: bool) -> dict[str, Path]:
    from benchmarks import scale, seba_case

    data = seba_case.write_seba_layout(
        tmp / "seba", ids=50 if quick else 100, walks=4 if quick else 16, frames=30 if quick else 150
    )
    seba = seba_case.seba_config(data, 30 if quick else 150)
    if quick:
        seba["selection"]["subject_counts"] = [3]
    subjects = 40 if quick else 6400
    grid = scale.bench_config(subjects, scale.QUICK_COUNTS if quick else scale.COUNTS)
    return {
        "SEBA-shaped gait case": scale.write_config(seba, tmp / "seba.toml"),
        f"scale case, {subjects * scale.SAMPLES_PER_SUBJECT:,} samples": scale.write_config(grid, tmp / "scale.toml"),
    }


def print_profile(name: str, p: dict[str, Any]) -> None:
    print(f"\n{name}: peak {p['peak_mib']:.0f} MiB at {p['peak_at_s']} s of {p['seconds']} s")
    print(
        f"  libraries {p['libraries_mib']:.0f} MiB (importing them alone: {p['libraries_import_s']} s), data and "
        f"work {p['data_and_work_mib']:.0f} MiB; at the peak: anonymous {p['peak_anon_mib']:.0f}, file-backed "
        f"{p['peak_file_mib']:.0f}, of which Arrow buffers {p['peak_arrow_mib']:.0f} MiB"
    )
    print(f"  {'phase':<58} {'s':>6} {'end':>6} {'high':>6} {'anon':>6} {'file':>6} {'arrow':>6}  (MiB)")
    for r in p["phases"]:
        print(
            f"  {r['phase'][:58]:<58} {r['seconds']:>6.2f} {r['rss_end_mib']:>6.0f} {r['rss_high_mib']:>6.0f} "
            f"{r['anon_high_mib']:>6.0f} {r['file_high_mib']:>6.0f} {r['arrow_high_mib']:>6.0f}"
        )
    if p["top_sites"] and p["traced_at"]:
        t = p["traced_at"]
        print(
            f"  the traced run at its highest resident memory ({t['rss_mib']:.0f} MiB, tracing included, at "
            f"{t['seconds']} s, in {t['phase'][:50]}): {t['traced_mib']:.0f} MiB traced (Python and numpy), most "
            "of it held by:"
        )
    for s in p["top_sites"]:
        print(f"    {s['mib']:>7.1f} MiB  {s['site']}")


def run(quick: bool = False, configs: list[Path] | None = None) -> dict[str, Any]:
    figures, cases = [], {}
    with tempfile.TemporaryDirectory(prefix="bioanon-memory-") as tmp:
        named = {str(c): Path(c) for c in configs} if configs else _cases(Path(tmp), quick)
        for i, (name, config) in enumerate(named.items()):
            work = Path(tmp) / f"case{i}"
            work.mkdir()
            p = profile_config(config, work, trace=not quick)
            cases[name] = p
            print_profile(name, p)
            figures.append(
                figure(
                    f"memory: {name}, peak resident memory of a cold --jobs 1 run",
                    value=p["peak_mib"],
                    unit="MiB",
                    target="(context: where it goes)",
                    passed=True,
                    libraries_mib=p["libraries_mib"],
                    data_and_work_mib=p["data_and_work_mib"],
                    arrow_mib_at_peak=p["peak_arrow_mib"],
                    file_backed_mib_at_peak=p["peak_file_mib"],
                    top_data_site=next((s["site"] for s in p["top_sites"] if not s["site"].startswith("import")), "-"),
                )
            )
    return {"benchmark": "memory", "figures": figures, "notes": [], "cases": cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--config", action="append", type=Path, help="profile this evaluation config instead")
    ap.add_argument("--json", default=None, help="also write the result here")
    a = ap.parse_args()
    res = run(quick=a.quick, configs=a.config)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
