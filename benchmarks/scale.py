"""Scale: how an evaluation's time, memory and cache grow with the number of samples (issue 29, item 6).

    python -m benchmarks.scale [--quick] [--max-samples N] [--time-cap S] [--only CASES] [--json out.json]
    BIOANON_BENCH_SCALE_MAX_SAMPLES=32000 python -m benchmarks.run scale   # the same limit through the runner
    (BIOANON_BENCH_SCALE_TIME_CAP=S likewise sets --time-cap, BIOANON_BENCH_SCALE_ONLY=voice --only: a
    comma-separated list of growth, all_subjects, rates_only, parallel, dask, voice)

Every evaluation is a separate process, ``bioanon evaluate CONFIG --cache-dir DIR --out DIR --jobs N --no-report
--quiet`` on a fresh cache, so its wall time, peak resident memory (``ru_maxrss`` of ``os.wait4``: the process's
own, not this one's) and imports count. The config: ``any.synthetic`` (20 samples of 256 float32 values per
subject), ``any.gaussian_noise`` at two settings (grid ``sigma``), recognizers ``any.cosine_centroid`` and
``any.lda_cosine``, scenarios naive and parrot, ``[report] bootstrap = 100``, one repeat, the default rates
(0.2 / 0.4 / 0.4).

* Growth: 8k / 32k / 128k / 512k / 1M samples (400 / 1,600 / 6,400 / 25,600 / 51,200 subjects), ``--jobs 1``
  (one process: its peak memory is the run's). Identification runs on a FIXED identity set — a random selection
  of 150 and of 50 subjects (every size has ≥ 160 evaluation subjects) — because identifying among all subjects
  is quadratic in the data by nature (P probes × C classes grow together), so the linear-growth target applies
  to a fixed set. Per size: wall time, peak RSS, payload bytes (n × 256 × 4), the cache's size on disk after the
  run (apparent bytes) and the task seconds per stage. Targets: peak RSS ≤ 3× payload + 300 MiB at every size;
  the log–log exponent of time vs samples over the sizes that ran ≤ log 4.5 / log 4 ≈ 1.085 (×4 data → ≤ ×4.5
  time). Before each size its time, memory and cache are extrapolated linearly from the previous size (×1.3
  safety); a size that would exceed the memory available (``MemAvailable``), the free disk or the time cap
  (default 20 min per run) is skipped, with the larger ones, and a note says so.
* All subjects: the default selection (every evaluation subject: the config of the issue's own table) at 8k, 32k
  and 128k samples, wall and peak RSS, with the score matrix size P × C for context (this path is quadratic).
  Target: peak RSS ≤ 3× payload + 300 MiB.
* A rates-only change: the 32k growth run's cache, rerun with only ``[rates]`` changed (0.1 / 0.45 / 0.45).
  Counts of tasks recomputed and reused (``environment.json`` ``tasks.by_stage`` of the run folder); the figure is
  the number of anonymization or embedding tasks (stages ``templates``, ``anonymize``, ``extract``) recomputed,
  target 0.
* Parallel: ``--jobs 2`` vs ``--jobs 1`` at 128k samples (or the largest size allowed by ``--max-samples``),
  each cold on a fresh cache, interleaved 1, 2, 1, 2 (best of each), first on a quiet machine, then with a second
  CPU-bound process running; on the growth config (the fixed identity set) and on the all-subjects config at
  the same size. Targets: speed-up ≥ 1.6 quiet, ≥ 1.0 loaded. The peak RSS of a ``--jobs 2`` run is the largest
  single process of its tree (``wait4``), not the sum of the workers.
* Dask: the parallel case's growth run again on a local Dask cluster of 2 workers (``--executor dask``), whose
  metric rows (values and CI bounds) must equal the local run's up to rounding (1e-12: the workers' BLAS runs
  single-threaded, which can move a last bit). Target: 0 rows differ; the largest difference is recorded.
* Voice (the issue's LibriSpeech report: "changing only [rates] re-embedded all 351 utterances, the unchanged
  attacker corpus included; the cache grew to 721 MB for a 71 MB corpus"): a synthetic corpus written in
  LibriSpeech's layout (``<subset>/<speaker>/<chapter>/<spk>-<chap>-<utt>.flac``, 16 kHz 16-bit FLAC,
  ``*.trans.txt``, ``SPEAKERS.TXT``; the audio of ``voice.synthetic``), 39 speakers × 9 utterances of 6 s = 351,
  read by ``voice.librispeech``, and a second corpus of 20 other speakers (180 utterances) as
  ``[attacker_dataset]``; ``[templates]`` by ``voice.resemblyzer`` (``voice.lda`` when resemblyzer is not
  installed: the figures name it), ``any.gaussian_noise`` on the templates, ``any.cosine_centroid``, naive and
  parrot, rates 0.2 / 0.8. Run cold on a fresh cache, then on the same cache with only ``[rates]`` changed (0.3 /
  0.7). Figures: the cold run (wall, peak RSS, cache); the embeddings the rerun computed — the rows it added to
  the cache's per-sample store (``samples/``, where per-sample reuse keeps each utterance's embedding), with the
  rerun's tasks per stage — target 0; the cache's bytes after the rerun over the FLAC bytes of both corpora,
  target ≤ 1.3, with where they go (MiB per kind of entry and per payload of the stored tables, the largest
  entries). A note flags an utterance embedded twice in the cold run, or an audio table stored twice.

Quick mode: 400 / 1,600 / 6,400 samples, a selection of 6 and 3 subjects, all subjects at 400 and 1,600, the
parallel cases at 1,600, one interleaved round, the voice case with 6 + 4 speakers × 4 utterances of 1 s: a smoke
run — start-up (~2–3 s a process) dominates, so its ratios say nothing about the targets.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import child_env, figure, main
from tools.free_space import folder_bytes as dir_bytes  # apparent size of every file under a folder

SAMPLES_PER_SUBJECT = 20
DIM = 256
SUBJECTS = [400, 1_600, 6_400, 25_600, 51_200]  # 8k / 32k / 128k / 512k / 1M samples
QUICK_SUBJECTS = [20, 80, 320]  # 400 / 1,600 / 6,400 samples
COUNTS = [150, 50]  # the fixed identity set: ≤ the 160 evaluation subjects of the smallest size
QUICK_COUNTS = [6, 3]  # ≤ the 8 evaluation subjects of 20 subjects
RATES_AFTER = {"background": 0.1, "attacker": 0.45, "evaluation": 0.45}
EMBEDDING_STAGES = ("templates", "anonymize", "extract")  # stages that anonymize or embed samples
SAFETY = 1.3
EXPONENT_TARGET = math.log(4.5) / math.log(4)  # ×4 data → ≤ ×4.5 time
MIB = 2**20
RSS_BASE_MIB = 300
MAX_SAMPLES_ENV = "BIOANON_BENCH_SCALE_MAX_SAMPLES"
TIME_CAP_ENV = "BIOANON_BENCH_SCALE_TIME_CAP"
ONLY_ENV = "BIOANON_BENCH_SCALE_ONLY"
CASES = ("growth", "all_subjects", "rates_only", "parallel", "dask", "voice")  # what --only names
DEFAULT_TIME_CAP_S = 1200.0
CLI = "import sys; from bioanon.cli import main; sys.exit(main(sys.argv[1:]))"


def bench_config(n_subjects: int, counts: list[int] | None, rates: dict[str, float] | None = None) -> dict[str, Any]:
    """The evaluation config at ``n_subjects`` × 20 samples; ``counts`` None: every evaluation subject."""
    selection: dict[str, Any] = {"selectors": ["random"], "random_draws": 1}
    if counts:
        selection["subject_counts"] = list(counts)
    cfg: dict[str, Any] = {
        "name": "scale",
        "seed": 0,
        "repeats": 1,
        "dataset": {
            "source": "any.synthetic",
            "params": {"n_subjects": n_subjects, "samples_per_subject": SAMPLES_PER_SUBJECT, "dim": DIM},
        },
        "anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0]}}],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}],
        "scenarios": ["naive", "parrot"],
        "selection": selection,
        "report": {"bootstrap": 100},
    }
    if rates:
        cfg["rates"] = dict(rates)
    return cfg


def write_config(cfg: dict[str, Any], path: Path) -> Path:
    from bioanon.evaluation.config import load_config

    path.write_text(load_config(cfg).to_toml())
    return path


def mem_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes, None off Linux."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def estimate(prev: dict[str, Any], samples: int, power: float = 1.0) -> dict[str, float]:
    """Wall seconds, peak RSS and cache bytes at ``samples``, extrapolated from the run ``prev`` as
    (samples / prev samples) ** power × the safety factor."""
    f = (samples / prev["samples"]) ** power * SAFETY
    return {
        "wall_s": prev["wall_s"] * f,
        "peak_bytes": prev["peak_mib"] * MIB * f,
        "cache_bytes": prev["cache_bytes"] * f,
    }


def skip_reason(est: dict[str, float], *, memory: int | None, disk: int | None, time_cap_s: float) -> str | None:
    """Why a run with estimate ``est`` must not start (None: it may)."""
    if memory is not None and est["peak_bytes"] > memory:
        return f"estimated peak RSS {est['peak_bytes'] / MIB:.0f} MiB > MemAvailable {memory / MIB:.0f} MiB"
    if disk is not None and est["cache_bytes"] > disk:
        return f"estimated cache {est['cache_bytes'] / MIB:.0f} MiB > free disk {disk / MIB:.0f} MiB"
    if est["wall_s"] > time_cap_s:
        return f"estimated wall {est['wall_s']:.0f} s > the time cap {time_cap_s:.0f} s"
    return None


def loglog_exponent(samples: list[int], seconds: list[float]) -> float:
    """Slope of log(seconds) against log(samples) (least squares)."""
    return float(np.polyfit(np.log(samples), np.log(seconds), 1)[0])


def rss_limit_bytes(samples: int) -> int:
    """The memory target: 3× the payload (samples × 256 × 4 bytes) + 300 MiB."""
    return 3 * samples * DIM * 4 + RSS_BASE_MIB * MIB


def cli_evaluate(
    config: Path,
    cache: Path,
    out: Path,
    run_id: str,
    jobs: int,
    limit_s: float,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One ``bioanon evaluate`` in a fresh process: wall seconds, its peak RSS (MiB), its CPU seconds (its own
    and its waited-for children's, which leaves out the pool's workers), the CPU seconds of the whole machine
    while it ran (``machine_busy_s``: all processes, so the run's own on a quiet machine; None off Linux), and
    what its run folder says (tasks per stage, the largest P and C of its metric rows). Killed after
    ``limit_s``. ``extra``: more command-line options (e.g. ``--executor dask``); ``env``: more environment
    variables (e.g. ``BIOANON_CORES``)."""
    from bioanon.executors import machine_busy_seconds
    from bioanon.report import timeline_summary

    cmd = [sys.executable, "-c", CLI, "evaluate", str(config), "--out", str(out), "--run-id", run_id]
    cmd += ["--cache-dir", str(cache), "--jobs", str(jobs), "--quiet", "--no-report", *extra]
    env = child_env(**(env or {}))
    with tempfile.TemporaryFile() as err:
        t0, busy0 = time.perf_counter(), machine_busy_seconds()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        killer = threading.Timer(limit_s, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall, busy1 = time.perf_counter() - t0, machine_busy_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-1500:]
    if proc.returncode != 0:
        killed = proc.returncode == -9 and wall >= limit_s
        raise RuntimeError(
            f"bioanon evaluate {'was killed after ' + str(round(wall)) + ' s' if killed else 'failed'} "
            f"({proc.returncode}): {tail}"
        )
    folder = out / run_id
    environment = json.loads((folder / "environment.json").read_text())
    tasks = environment["tasks"]
    when = timeline_summary(tasks.get("timeline") or [], environment.get("jobs"))
    import pyarrow.parquet as pq

    metrics = pq.read_table(folder / "metrics.parquet", columns=["n_subjects", "n_probes"]).to_pydict()
    return {
        "folder": str(folder),
        "wall_s": round(wall, 3),
        "peak_mib": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "machine_busy_s": None if busy0 is None or busy1 is None else round(busy1 - busy0, 2),
        "tasks": {k: tasks[k] for k in ("executed", "cached", "failed")},
        # from the run's task timeline: when its first task started (start-up, data import and plan before it),
        # and the seconds its workers ran no task between the first task and the last
        "first_task_s": round(when["first"], 3) if when else None,
        "worker_idle_s": round(when["idle"], 3) if when else None,
        "by_stage": {
            s: {k: (round(v, 3) if k == "seconds" else int(v)) for k, v in rec.items()}
            for s, rec in tasks.get("by_stage", {}).items()
        },
        "classes": max((n for n in metrics["n_subjects"] if n is not None), default=0),
        "probes": max((n for n in metrics["n_probes"] if n is not None), default=0),
    }


def _max_samples() -> int | None:
    value = os.environ.get(MAX_SAMPLES_ENV, "")
    return int(value) if value.strip() else None


class _Runner:
    """Runs the cases in ``root``, collecting notes."""

    def __init__(self, root: Path, time_cap_s: float):
        self.root, self.time_cap_s = root, time_cap_s
        self.notes: list[str] = []
        self.counter = 0

    def evaluate(
        self,
        cfg: dict[str, Any],
        cache: Path,
        jobs: int = 1,
        tag: str = "run",
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        self.counter += 1
        run_id = f"{tag}-{self.counter}"
        config = write_config(cfg, self.root / f"{run_id}.toml")
        rec = cli_evaluate(config, cache, self.root / "out", run_id, jobs, 1.5 * self.time_cap_s, extra, env)
        rec["cache_bytes"] = dir_bytes(cache)
        return rec

    def check(self, label: str, prev: dict[str, Any] | None, samples: int, power: float = 1.0) -> str | None:
        """A note (and the reason) when the run at ``samples`` must be skipped; None when it may start."""
        if prev is None:
            return None
        est = estimate(prev, samples, power)
        reason = skip_reason(
            est, memory=mem_available(), disk=shutil.disk_usage(self.root).free, time_cap_s=self.time_cap_s
        )
        if reason:
            self.notes.append(f"{label} at {samples:,} samples skipped (and every larger size): {reason}")
        return reason


def growth(r: _Runner, subjects: list[int], counts: list[int], max_samples: int | None) -> list[dict[str, Any]]:
    """The growth series on a fixed identity set; stops at the first size that is over a limit."""
    runs: list[dict[str, Any]] = []
    for s in subjects:
        n = s * SAMPLES_PER_SUBJECT
        if max_samples is not None and n > max_samples:
            r.notes.append(f"growth: {n:,} samples not run (--max-samples {max_samples:,})")
            continue
        if r.check("growth", runs[-1] if runs else None, n):
            break
        cache = r.root / f"growth-{n}"
        rec = r.evaluate(bench_config(s, counts), cache, tag=f"growth{n}")
        stage_s = sum(v["seconds"] for v in rec["by_stage"].values())
        rec.update(
            samples=n,
            subjects=s,
            payload_bytes=n * DIM * 4,
            cache=str(cache),
            other_s=round(rec["wall_s"] - stage_s, 3),
        )
        runs.append(rec)
    return runs


def rss_figure(name: str, rec: dict[str, Any], samples: int, **context: Any) -> dict[str, Any]:
    """The figure of a run's peak RSS against the memory target at ``samples``, with its wall time."""
    limit = rss_limit_bytes(samples)
    return figure(
        name,
        value=rec["peak_mib"],
        unit="MiB",
        target=f"≤ {limit / MIB:.0f} MiB (3× payload + {RSS_BASE_MIB} MiB)",
        passed=rec["peak_mib"] * MIB <= limit,
        wall_s=rec["wall_s"],
        **context,
    )


def growth_figures(runs: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    figures = []
    for rec in runs:
        figures.append(
            rss_figure(
                f"scale: peak RSS at {rec['samples']:,} samples (fixed identity set, --jobs 1)",
                rec,
                rec["samples"],
                payload_mib=round(rec["payload_bytes"] / MIB, 1),
                cache_mib=round(rec["cache_bytes"] / MIB, 1),
                peak_over_payload=round(rec["peak_mib"] * MIB / rec["payload_bytes"], 2),
                stage_seconds={k: v["seconds"] for k, v in rec["by_stage"].items()},
                other_s=rec["other_s"],
                tasks=rec["tasks"]["executed"],
            )
        )
    if len(runs) >= 2:
        samples = [x["samples"] for x in runs]
        walls = [x["wall_s"] for x in runs]
        slope = loglog_exponent(samples, walls)
        figures.append(
            figure(
                "scale: log-log exponent of wall time vs samples (fixed identity set)",
                value=slope,
                unit="",
                target=f"≤ {EXPONENT_TARGET:.3f} (×4 data → ≤ ×4.5 time)",
                passed=slope <= EXPONENT_TARGET,
                samples=samples,
                wall_s=walls,
                step_ratios=[round(b / a, 2) for a, b in zip(walls[:-1], walls[1:], strict=True)],
                quick=quick,
            )
        )
    return figures


def all_subjects(r: _Runner, subjects: list[int], max_samples: int | None) -> tuple[list[dict[str, Any]], list[Any]]:
    runs: list[dict[str, Any]] = []
    figures = []
    for s in subjects:
        n = s * SAMPLES_PER_SUBJECT
        if max_samples is not None and n > max_samples:
            r.notes.append(f"all subjects: {n:,} samples not run (--max-samples {max_samples:,})")
            continue
        if r.check("all subjects", runs[-1] if runs else None, n, power=2.0):  # quadratic: P × C
            break
        cache = r.root / f"all-{n}"
        rec = r.evaluate(bench_config(s, None), cache, tag=f"all{n}")
        rec.update(samples=n, subjects=s)
        shutil.rmtree(cache, ignore_errors=True)
        runs.append(rec)
        figures.append(
            rss_figure(
                f"scale: peak RSS at {n:,} samples, every evaluation subject identified",
                rec,
                n,
                probes=rec["probes"],
                classes=rec["classes"],
                score_cells=rec["probes"] * rec["classes"],
                score_matrix_mib=round(rec["probes"] * rec["classes"] * 4 / MIB, 1),
                cache_mib=round(rec["cache_bytes"] / MIB, 1),
                stage_seconds={k: v["seconds"] for k, v in rec["by_stage"].items()},
            )
        )
    return runs, figures


def rates_only(r: _Runner, base: dict[str, Any] | None, counts: list[int]) -> tuple[dict[str, Any], list[Any]]:
    """Rerun the growth run ``base`` on its own cache with only ``[rates]`` changed."""
    if base is None:
        r.notes.append("rates-only change: not measured (its growth run did not run)")
        return {}, []
    cache = Path(base["cache"])
    before = dir_bytes(cache)
    rec = r.evaluate(bench_config(base["subjects"], counts, RATES_AFTER), cache, tag=f"rates{base['samples']}")
    recomputed = {s: v["executed"] for s, v in rec["by_stage"].items() if s in EMBEDDING_STAGES}
    n = sum(recomputed.values())
    info = {
        "samples": base["samples"],
        "rates_after": RATES_AFTER,
        "first": {"wall_s": base["wall_s"], **base["tasks"]},
        "rerun": {"wall_s": rec["wall_s"], "peak_mib": rec["peak_mib"], **rec["tasks"]},
        "rerun_by_stage": {s: {"executed": v["executed"], "cached": v["cached"]} for s, v in rec["by_stage"].items()},
        "cache_mib_before": round(before / MIB, 1),
        "cache_mib_after": round(rec["cache_bytes"] / MIB, 1),
    }
    r.notes.append(
        f"rates-only change at {base['samples']:,} samples: {rec['tasks']['executed']} task(s) recomputed, "
        f"{rec['tasks']['cached']} reused; per stage (recomputed/reused): "
        + ", ".join(f"{s} {v['executed']}/{v['cached']}" for s, v in rec["by_stage"].items())
    )
    if n:
        r.notes.append(
            "rates-only change: any.gaussian_noise draws its noise per table and scales it by the table's spread, "
            "so it is not a per-sample anonymizer and each new part is anonymized again; per-sample anonymizers "
            "(Anonymizer.per_sample: noise seeded by sample id, blur, part removal, …) anonymize each data set once "
            "in shards and reuse them for any rates (tests/core/test_per_sample_anonymization.py)"
        )
    fig = figure(
        f"scale: anonymization/embedding tasks recomputed after a rates-only change ({base['samples']:,} samples)",
        value=n,
        unit="tasks",
        target="0",
        passed=n == 0,
        by_stage=recomputed,
        recomputed=rec["tasks"]["executed"],
        reused=rec["tasks"]["cached"],
        first_wall_s=base["wall_s"],
        rerun_wall_s=rec["wall_s"],
        cache_mib_before=info["cache_mib_before"],
        cache_mib_after=info["cache_mib_after"],
    )
    return info, [fig]


def parallel(
    r: _Runner, base: dict[str, Any] | None, counts: list[int] | None, rounds: int
) -> tuple[dict[str, Any], list[Any]]:
    """``--jobs 2`` vs ``--jobs 1``, cold, interleaved; quiet, then beside a CPU-bound process. ``counts``: the
    fixed identity set of the growth runs; None: every evaluation subject identified (the all-subjects case).

    Quiet rounds also run ``--jobs 1`` held to one core (``BIOANON_CORES=1``: one BLAS thread), for context:
    a default ``--jobs 1`` already runs its linear algebra on the cores other processes leave idle. The machine's
    busy CPU seconds during each quiet run (``machine_busy_s``) say how much of the second core it used, and the
    one-core run how much that gained. The target is the speed-up over the default ``--jobs 1``."""
    case = "fixed identity set" if counts else "every evaluation subject identified"
    if base is None:
        r.notes.append(f"parallel ({case}): not measured (its size did not run)")
        return {}, []
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    if usable < 2:
        r.notes.append(f"parallel: only {usable} usable core(s): --jobs 2 cannot be faster; measured anyway")
    cfg = bench_config(base["subjects"], counts)
    info: dict[str, Any] = {"samples": base["samples"], "cores": usable, "case": case}
    figures = []
    for mode in ("quiet", "loaded"):
        # run label -> (--jobs, extra environment); "1c": --jobs 1 on one core
        variants: dict[str, tuple[int, dict[str, str]]] = {"1": (1, {}), "2": (2, {})} | (
            {"1c": (1, {"BIOANON_CORES": "1"})} if mode == "quiet" else {}
        )
        walls: dict[str, list[float]] = {v: [] for v in variants}
        peaks: dict[str, list[float]] = {v: [] for v in variants}
        cpus: dict[str, list[float | None]] = {v: [] for v in variants}  # None off Linux
        # from each run's task timeline: the seconds before its first task, and its workers' idle seconds
        heads: dict[str, list[float | None]] = {v: [] for v in variants}
        idles: dict[str, list[float | None]] = {v: [] for v in variants}
        load = [round(os.getloadavg()[0], 2)]
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if mode == "loaded" else None
        try:
            for _ in range(rounds):
                for label, (jobs, env) in variants.items():
                    cache = r.root / f"par-{mode}-{label}"
                    tag = f"par-{mode}-j{label}" + ("" if counts else "-all")
                    rec = r.evaluate(cfg, cache, jobs=jobs, tag=tag, env=env)
                    shutil.rmtree(cache, ignore_errors=True)
                    walls[label].append(rec["wall_s"])
                    peaks[label].append(rec["peak_mib"])
                    cpus[label].append(rec["machine_busy_s"])
                    heads[label].append(rec["first_task_s"])
                    idles[label].append(rec["worker_idle_s"])
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        load.append(round(os.getloadavg()[0], 2))
        speedup = min(walls["1"]) / min(walls["2"])
        target = 1.6 if mode == "quiet" else 1.0
        info[mode] = {
            "jobs_1_s": walls["1"],
            "jobs_2_s": walls["2"],
            "peak_mib": peaks,
            "machine_busy_s": cpus,
            "first_task_s": heads,
            "worker_idle_s": idles,
            "load_average": load,
        }
        one_core: dict[str, Any] = {}
        if "1c" in walls:
            info[mode]["jobs_1_one_core_s"] = walls["1c"]
            one_core = {
                "jobs_1_one_core_s": walls["1c"],
                "speedup_over_one_core": round(min(walls["1c"]) / min(walls["2"]), 3),
            }
        figures.append(
            figure(
                f"scale: speed-up --jobs 2 / --jobs 1 at {base['samples']:,} samples ({case}), {mode}"
                + (" (a CPU-bound process beside it)" if mode == "loaded" else ""),
                value=speedup,
                target=f"≥ {target}",
                passed=speedup >= target,
                jobs_1_s=walls["1"],
                jobs_2_s=walls["2"],
                machine_busy_s_jobs_1=cpus["1"],
                machine_busy_s_jobs_2=cpus["2"],
                first_task_s_jobs_2=heads["2"],
                worker_idle_s_jobs_2=idles["2"],
                **one_core,
                peak_mib_jobs_1=max(peaks["1"]),
                peak_mib_jobs_2_largest_process=max(peaks["2"]),
                load_average=load,
                cores=usable,
            )
        )
    return info, figures


def metric_rows(folder: str) -> Any:
    """The metric rows of a results folder, sorted by their run columns (for comparing two runs)."""
    import pandas as pd

    from bioanon.evaluation.run import RUN_COLUMNS

    m = pd.read_parquet(Path(folder) / "metrics.parquet")
    keys = [c for c in (*RUN_COLUMNS, "metric") if c in m.columns and c != "params"]
    return m.sort_values(keys).reset_index(drop=True)[[*keys, "value", "ci_low", "ci_high"]]


def dask_case(r: _Runner, base: dict[str, Any] | None, counts: list[int]) -> tuple[dict[str, Any], list[Any]]:
    """The growth run ``base`` again on a local Dask cluster of 2 workers (``--executor dask --jobs 2``, a fresh
    cache): its metric rows must equal the local run's (value and CI bounds)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        r.notes.append("dask: not measured (distributed is not installed: pip install 'bioanon[dask]')")
        return {}, []
    if base is None or not base.get("folder"):
        r.notes.append("dask: not measured (its growth size did not run)")
        return {}, []
    cache = r.root / "dask"
    rec = r.evaluate(bench_config(base["subjects"], counts), cache, jobs=2, tag="dask", extra=("--executor", "dask"))
    shutil.rmtree(cache, ignore_errors=True)
    local, remote = metric_rows(base["folder"]), metric_rows(rec["folder"])
    cols = ["value", "ci_low", "ci_high"]
    if local.shape == remote.shape and local.drop(columns=cols).equals(remote.drop(columns=cols)):
        a, b = local[cols].to_numpy(float), remote[cols].to_numpy(float)
        both_nan = np.isnan(a) & np.isnan(b)
        gap = np.where(both_nan, 0.0, np.abs(a - b))
        differ = int((~np.isclose(a, b, rtol=1e-12, atol=1e-12) & ~both_nan).any(axis=1).sum())
        max_gap = float(np.nanmax(gap)) if gap.size else 0.0
    else:
        differ, max_gap = max(len(local), len(remote)), math.nan
    info = {"samples": base["samples"], "wall_s": rec["wall_s"], "local_wall_s": base["wall_s"], "rows": len(local)}
    fig = figure(
        f"scale: metric rows that differ (beyond 1e-12) between a local Dask cluster (2 workers) and the local "
        f"run at {base['samples']:,} samples",
        value=differ,
        unit="rows",
        target="0",
        passed=differ == 0,
        rows=len(local),
        largest_difference=max_gap,
        dask_wall_s=rec["wall_s"],
        local_wall_s=base["wall_s"],
    )
    return info, [fig]


# ------------------------------------------------------------------------------------------------- the voice case

VOICE_SR = 16_000  # LibriSpeech's rate
# (speakers, utterances per speaker, seconds per utterance); full: 39 × 9 = 351 evaluation utterances
VOICE_SIZES = {"speakers": 39, "attacker_speakers": 20, "utterances": 9, "duration": 6.0}
VOICE_QUICK_SIZES = {"speakers": 6, "attacker_speakers": 4, "utterances": 4, "duration": 1.0}
VOICE_RATES = {"background": 0.2, "evaluation": 0.8}  # with [attacker_dataset]: no attacker share
VOICE_RATES_AFTER = {"background": 0.3, "evaluation": 0.7}
VOICE_CACHE_TARGET = 1.3  # cache bytes / corpus bytes
_WORDS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")


def write_librispeech(
    root: Path, subset: str, *, speakers: int, utterances: int, duration: float, first_id: int, seed: int
) -> dict[str, Any]:
    """Write a synthetic corpus in LibriSpeech's layout under ``root/LibriSpeech``: ``<subset>/<speaker>/<chapter>/
    <speaker>-<chapter>-<utt>.flac`` (16 kHz, 16-bit FLAC; a speaker's utterances over two chapters),
    ``<speaker>-<chapter>.trans.txt`` per chapter and ``SPEAKERS.TXT`` next to the subset folder. The audio is
    ``voice.synthetic``'s (``speakers`` × ``utterances`` of ``duration`` seconds, seeded by ``seed``); speaker ids
    are ``first_id``, ``first_id + 1``, … (two corpora with distinct ranges have disjoint speakers). Returns the
    subset folder (``path``: what ``voice.librispeech`` reads), the speaker ids, the number of utterances and the
    bytes of the FLAC files."""
    import soundfile as sf

    import bioanon

    table = bioanon.load_dataset(
        "voice.synthetic",
        n_speakers=speakers,
        utterances_per_speaker=utterances,
        duration=duration,
        sample_rate=VOICE_SR,
        n_words=min(10, max(2, utterances)),
        with_features=False,
        seed=seed,
    )
    audio, subjects = table.payload("audio"), table.subjects
    words, gender = table.attribute("digit"), table.attribute("gender")
    names = {s: str(first_id + i) for i, s in enumerate(table.subject_names)}
    top = Path(root) / "LibriSpeech"
    folder = top / subset
    flac_bytes = 0
    lines: dict[Path, list[str]] = {}
    count: dict[str, int] = {}
    sex: dict[str, str] = {}
    for x, s, w, g in zip(audio, subjects, words, gender, strict=True):
        spk = names[s]
        k = count[spk] = count.get(spk, -1) + 1
        chapter = str(int(spk) * 10 + k % 2)  # two chapters per speaker
        utt = f"{spk}-{chapter}-{k // 2:04d}"
        d = folder / spk / chapter
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"{utt}.flac"
        sf.write(f, np.asarray(x, dtype=np.float32), VOICE_SR, format="FLAC", subtype="PCM_16")
        flac_bytes += f.stat().st_size
        lines.setdefault(d, []).append(f"{utt} {_WORDS[int(w)]} {_WORDS[(int(w) + 1) % 10]}")
        sex[spk] = "F" if str(g) == "female" else "M"
    for d, text in lines.items():
        (d / f"{d.parent.name}-{d.name}.trans.txt").write_text("\n".join(text) + "\n")
    header = ";ID  |SEX| SUBSET           |MINUTES| NAME\n"
    minutes = utterances * duration / 60
    rows = "".join(f"{spk:<5}| {sex[spk]} | {subset:<17}| {minutes:5.2f} | Reader {spk}\n" for spk in sorted(sex))
    with open(top / "SPEAKERS.TXT", "a") as fh:
        fh.write(("" if fh.tell() else header) + rows)
    return {"path": str(folder), "speakers": sorted(sex), "utterances": len(audio), "flac_bytes": flac_bytes}


def sample_rows(cache: Path) -> dict[str, int]:
    """Rows of the per-sample store of the cache at ``cache`` (``samples/<ns[:2]>/<namespace>/<key>.arrow``, one
    row per sample result, written by ``Cache.put_sample_rows``), by namespace; temporary and quarantined files
    are not counted."""
    import pyarrow as pa

    counts: dict[str, int] = {}
    for f in sorted((cache / "samples").glob("*/*/*.arrow")):
        with pa.memory_map(str(f)) as src:
            reader = pa.ipc.open_file(src)
            n = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        counts[f.parent.name] = counts.get(f.parent.name, 0) + n
    return counts


def _describe_table(path: Path) -> tuple[str, str]:
    """What a cached table is, from its file's schema alone (cheap): a description (rows, payload columns, source,
    last lineage step) and its payload columns joined by ``+``."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        reader = pa.ipc.open_file(src)
        schema = reader.schema
        rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    if b"bioanon.rows_of" in (schema.metadata or {}):  # Cache.put_rows: row positions of another entry
        base = schema.metadata[b"bioanon.rows_of"].decode()
        return f"row selection, {rows} rows of table {base}", "(row selection)"
    fixed = {"sample_id", "subject", "sample_rate"}
    payloads = [n for n in schema.names if n not in fixed and not n.startswith("attr.")]
    try:
        meta = json.loads((schema.metadata or {}).get(b"bioanon", b"{}"))
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    what = f"table, {rows} rows, payload {'+'.join(payloads) or 'none'}"
    if meta.get("source"):
        what += f", source {meta['source']}"
    steps = [s.get("step") for s in meta.get("lineage") or [] if isinstance(s, dict)]
    if steps:
        what += f", last step {steps[-1]}"
    return what, "+".join(payloads) or "none"


def cache_breakdown(cache: Path, top: int = 8) -> dict[str, Any]:
    """Where the bytes of the cache at ``cache`` go: MiB per kind of entry (``tables``, ``samples``, ``json``, …),
    MiB and count of the stored tables by payload (e.g. ``audio``: imported corpora; ``features``: templates) and
    the ``top`` largest entries, each with what it is (tables: rows, payloads, source and last lineage step, read
    from the file's schema)."""
    by_kind: dict[str, int] = {}
    by_payload: dict[str, dict[str, float]] = {}
    entries: list[tuple[int, str, str]] = []
    for root, _, files in os.walk(cache):
        for name in files:
            p = Path(root) / name
            size = p.lstat().st_size
            rel = p.relative_to(cache).as_posix()
            kind = rel.split("/", 1)[0] if "/" in rel else "(top)"
            by_kind[kind] = by_kind.get(kind, 0) + size
            what = {"samples": "per-sample rows", "json": "JSON record"}.get(kind, kind)
            if kind == "tables" and name.endswith(".arrow") and ".tmp-" not in name:
                try:
                    what, payload = _describe_table(p)
                except (OSError, ValueError) as exc:
                    what, payload = f"table (unreadable: {exc})", "?"
                rec = by_payload.setdefault(payload, {"tables": 0, "mib": 0.0})
                rec["tables"] += 1
                rec["mib"] += size / MIB
            entries.append((size, rel, what))
    entries.sort(key=lambda e: -e[0])
    return {
        "mib_by_kind": {k: round(v / MIB, 2) for k, v in sorted(by_kind.items())},
        "tables_by_payload": {
            k: {"tables": int(v["tables"]), "mib": round(v["mib"], 2)} for k, v in by_payload.items()
        },
        "largest": [{"entry": rel, "mib": round(size / MIB, 2), "what": what} for size, rel, what in entries[:top]],
    }


def voice_config(corpus: str, attacker: str, recognizer: str, rates: dict[str, float]) -> dict[str, Any]:
    """The voice case's config: LibriSpeech-shaped ``corpus`` and ``attacker`` (``[attacker_dataset]``) folders,
    templates by ``recognizer``, a template protection, a recognizer on the templates, naive and parrot."""
    return {
        "name": "scale-voice",
        "seed": 0,
        "repeats": 1,
        "dataset": {"source": "voice.librispeech", "path": corpus},
        "attacker_dataset": {"source": "voice.librispeech", "path": attacker},
        "rates": dict(rates),
        "templates": {"recognizer": recognizer, "fit": "background"},
        "anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.05]}}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive", "parrot"],
        "report": {"bootstrap": 100},
    }


def voice_recognizer() -> tuple[str | None, str]:
    """The template extractor of the voice case: ``voice.resemblyzer`` when installed, else ``voice.lda`` (MFCC
    statistics kept per sample, then an LDA fitted on the background), with a sentence saying which; None when the
    voice plugin (or soundfile) is missing."""
    import importlib.util

    import bioanon

    if importlib.util.find_spec("soundfile") is None:
        return None, "voice case: not measured (soundfile is not installed: pip install soundfile)"
    registry = bioanon.get_registry()
    if "voice.librispeech" not in registry:
        return None, "voice case: not measured (the voice plugin, bioanon-voice, is not installed)"
    if "voice.resemblyzer" in registry:
        return "voice.resemblyzer", "voice case: templates by voice.resemblyzer (pretrained d-vectors)"
    return "voice.lda", (
        "voice case: voice.resemblyzer is not installed (pip install --no-deps resemblyzer webrtcvad-wheels); "
        "templates by voice.lda instead: its per-sample rows are MFCC statistics, not d-vectors"
    )


def voice_case(r: _Runner, quick: bool) -> tuple[dict[str, Any], list[Any]]:
    """A LibriSpeech-shaped voice evaluation: a synthetic corpus in LibriSpeech's layout (``voice.librispeech``),
    a second corpus of other speakers as ``[attacker_dataset]``, ``[templates]`` by a pretrained speaker encoder,
    run cold, then on the same cache with only ``[rates]`` changed. Figures: the cold run (wall, peak RSS, cache),
    the embeddings computed by the rerun (rows added to the cache's per-sample store; target 0) and the cache's
    size over the corpus's FLAC bytes (target ≤ 1.3), with where the bytes go."""
    recognizer, said = voice_recognizer()
    r.notes.append(said)
    if recognizer is None:
        return {}, []
    sizes = VOICE_QUICK_SIZES if quick else VOICE_SIZES
    t0 = time.perf_counter()
    per = {"utterances": sizes["utterances"], "duration": sizes["duration"]}
    corpus = write_librispeech(
        r.root / "voice-corpus", "dev-clean", speakers=sizes["speakers"], first_id=1000, seed=0, **per
    )
    attacker = write_librispeech(
        r.root / "voice-attacker", "train-clean-100", speakers=sizes["attacker_speakers"], first_id=5000, seed=1, **per
    )
    write_s = round(time.perf_counter() - t0, 2)
    utterances = corpus["utterances"] + attacker["utterances"]
    corpus_bytes = corpus["flac_bytes"] + attacker["flac_bytes"]
    audio_samples = utterances * round(sizes["duration"] * VOICE_SR)
    cache = r.root / "voice-cache"
    cold = r.evaluate(voice_config(corpus["path"], attacker["path"], recognizer, VOICE_RATES), cache, tag="voice")
    rows_cold = sample_rows(cache)
    after = voice_config(corpus["path"], attacker["path"], recognizer, VOICE_RATES_AFTER)
    rerun = r.evaluate(after, cache, tag="voice-rates")
    rows_after = sample_rows(cache)
    breakdown = cache_breakdown(cache)
    shutil.rmtree(cache, ignore_errors=True)
    # the same cold run with --jobs 2: the templates of a fixed encoder are embedded in shards across the workers
    cache2 = r.root / "voice-cache-jobs2"
    cold2 = r.evaluate(
        voice_config(corpus["path"], attacker["path"], recognizer, VOICE_RATES), cache2, jobs=2, tag="voice-jobs2"
    )
    shutil.rmtree(cache2, ignore_errors=True)
    stored_cold, stored_after = sum(rows_cold.values()), sum(rows_after.values())
    recomputed = stored_after - stored_cold
    audio_tables = breakdown["tables_by_payload"].get("audio", {"tables": 0, "mib": 0.0})
    ratio = rerun["cache_bytes"] / corpus_bytes
    shape = {
        "speakers": len(corpus["speakers"]),
        "utterances": corpus["utterances"],
        "attacker_speakers": len(attacker["speakers"]),
        "attacker_utterances": attacker["utterances"],
        "seconds_per_utterance": sizes["duration"],
        "recognizer": recognizer,
    }
    label = f"{corpus['utterances']} + {attacker['utterances']} utterances, {recognizer} templates"
    info = {
        **shape,
        "corpus_mib": round(corpus_bytes / MIB, 2),
        "write_s": write_s,
        "rates": VOICE_RATES,
        "rates_after": VOICE_RATES_AFTER,
        "cold": {k: cold[k] for k in ("wall_s", "peak_mib", "cpu_s", "tasks", "by_stage")},
        "rerun": {k: rerun[k] for k in ("wall_s", "peak_mib", "cpu_s", "tasks", "by_stage")},
        "cold_jobs_2": {k: cold2[k] for k in ("wall_s", "peak_mib", "cpu_s", "tasks", "by_stage")},
        "cache_mib_cold": round(cold["cache_bytes"] / MIB, 2),
        "cache_mib_after": round(rerun["cache_bytes"] / MIB, 2),
        "cache_bytes_after": rerun["cache_bytes"],
        "corpus_bytes": corpus_bytes,
        "sample_rows_cold": rows_cold,
        "sample_rows_after": rows_after,
        "cache_breakdown": breakdown,
    }
    if stored_cold > utterances:
        r.notes.append(
            f"voice case: the cold run stored {stored_cold} per-sample rows for {utterances} utterances "
            f"(namespaces {rows_cold}): some utterance was embedded more than once"
        )
    elif stored_cold < utterances:  # embeddings computed outside the per-sample store are not counted
        r.notes.append(
            f"voice case: the cold run stored {stored_cold} per-sample rows for {utterances} utterances: "
            "embeddings computed without the per-sample store (BIOANON_FIT_MEMO=0?) are not counted"
        )
    if audio_tables["tables"] > 2:
        r.notes.append(
            f"voice case: {audio_tables['tables']} cached tables hold audio for 2 corpora: an audio table is stored "
            f"more than once ({[e for e in breakdown['largest'] if 'payload audio' in e['what']]})"
        )
    r.notes.append(
        f"voice case: cache {rerun['cache_bytes'] / MIB:.1f} MiB after the rerun for {corpus_bytes / MIB:.1f} MiB "
        f"of FLAC; {audio_tables['mib']:.1f} MiB of it in {audio_tables['tables']} table(s) with audio: "
        f"{audio_tables['mib'] * MIB / audio_samples:.2f} bytes per audio sample ({audio_samples:,} samples), "
        f"the 16-bit FLAC files {corpus_bytes / audio_samples:.2f}"
    )
    r.notes.append(
        f"voice case, rates-only change: {recomputed} embedding(s) computed ({stored_cold} per-sample rows before, "
        f"{stored_after} after); {rerun['tasks']['executed']} task(s) recomputed, {rerun['tasks']['cached']} reused; "
        "per stage (recomputed/reused): "
        + ", ".join(f"{s} {v['executed']}/{v['cached']}" for s, v in rerun["by_stage"].items())
    )
    stage_s = {s: (cold["by_stage"].get(s, {}).get("seconds"), v["seconds"]) for s, v in rerun["by_stage"].items()}
    figures = [
        figure(
            f"scale: voice case, cold run ({label}, [attacker_dataset], --jobs 1)",
            value=cold["wall_s"],
            unit="s",
            target="(recorded)",
            passed=True,
            peak_mib=cold["peak_mib"],
            cache_mib=info["cache_mib_cold"],
            corpus_mib=info["corpus_mib"],
            stage_seconds={k: v["seconds"] for k, v in cold["by_stage"].items()},
            tasks=cold["tasks"]["executed"],
            **shape,
        ),
        figure(
            f"scale: voice case, speed-up of a cold run with --jobs 2 over --jobs 1 ({label})",
            value=cold["wall_s"] / cold2["wall_s"],
            unit="×",
            target="≥ 1.0",
            passed=cold["wall_s"] >= cold2["wall_s"],
            jobs_1_s=cold["wall_s"],
            jobs_2_s=cold2["wall_s"],
            templates_s_jobs_1=cold["by_stage"].get("templates", {}).get("seconds"),
            templates_tasks=cold["by_stage"].get("templates", {}).get("executed"),
            peak_mib_jobs_2_largest_process=cold2["peak_mib"],
            cores=os.cpu_count(),
        ),
        figure(
            f"scale: voice case, embeddings recomputed after a rates-only change ({label})",
            value=recomputed,
            unit="embeddings",
            target="0 (and the cold run's embeddings in the per-sample store)",
            passed=recomputed == 0 and stored_cold > 0,
            stored_cold=stored_cold,
            stored_after=stored_after,
            utterances=utterances,
            rerun_by_stage={
                s: {"executed": v["executed"], "cached": v["cached"]} for s, v in rerun["by_stage"].items()
            },
            stage_seconds_cold_rerun=stage_s,
            first_wall_s=cold["wall_s"],
            rerun_wall_s=rerun["wall_s"],
            recognizer=recognizer,
        ),
        figure(
            f"scale: voice case, cache / corpus after a rates-only rerun ({label})",
            value=ratio,
            target=f"≤ {VOICE_CACHE_TARGET}",
            passed=ratio <= VOICE_CACHE_TARGET,
            cache_mib=info["cache_mib_after"],
            cache_mib_cold=info["cache_mib_cold"],
            corpus_mib=info["corpus_mib"],
            flac_bytes_per_sample=round(corpus_bytes / audio_samples, 3),
            cached_audio_bytes_per_sample=round(audio_tables["mib"] * MIB / audio_samples, 3),
            mib_by_kind=breakdown["mib_by_kind"],
            tables_by_payload=breakdown["tables_by_payload"],
            largest=breakdown["largest"][:3],
        ),
    ]
    return info, figures


def _only() -> set[str] | None:
    value = os.environ.get(ONLY_ENV, "")
    names = {n.strip() for n in value.split(",") if n.strip()}
    if not names:
        return None
    unknown = names - set(CASES)
    if unknown:
        raise SystemExit(f"--only: unknown case(s) {sorted(unknown)}; the cases are {', '.join(CASES)}")
    return names


def run(
    quick: bool = False,
    *,
    max_samples: int | None = None,
    time_cap_s: float | None = None,
    only: set[str] | None = None,
) -> dict[str, Any]:
    """Run the scale benchmark (``quick``: tiny sizes, for the smoke test). ``max_samples`` (default
    ``$BIOANON_BENCH_SCALE_MAX_SAMPLES``) leaves out every run above that many samples; ``time_cap_s`` (default
    ``$BIOANON_BENCH_SCALE_TIME_CAP``, else 20 min): no run is started whose estimated wall time is over it (a run
    past 1.5× it is killed). ``only`` (default ``$BIOANON_BENCH_SCALE_ONLY``, comma-separated; None: all): the
    cases of :data:`CASES` to run (``rates_only``, ``parallel`` and ``dask`` reuse growth runs: without
    ``growth`` they are not measured)."""
    max_samples = max_samples if max_samples is not None else _max_samples()
    if time_cap_s is None:
        time_cap_s = float(os.environ.get(TIME_CAP_ENV, "") or DEFAULT_TIME_CAP_S)
    only = only if only is not None else _only()

    def wanted(case: str) -> bool:
        return only is None or case in only

    subjects = QUICK_SUBJECTS if quick else SUBJECTS
    counts = QUICK_COUNTS if quick else COUNTS
    figures: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    everyone: list[dict[str, Any]] = []
    rates: dict[str, Any] = {}
    par: dict[str, Any] = {}
    dask: dict[str, Any] = {}
    voice: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bioanon-scale-") as tmp:
        r = _Runner(Path(tmp), time_cap_s)
        if quick:
            r.notes.append("quick: tiny sizes; start-up dominates, so the ratios say nothing about the targets")
        if max_samples is not None:
            r.notes.append(f"limited to ≤ {max_samples:,} samples per run")
        if only is not None:
            r.notes.append(f"only the case(s) {', '.join(c for c in CASES if c in only)}")
        if wanted("growth"):
            runs = growth(r, subjects, counts, max_samples)
            figures += growth_figures(runs, quick)
        by_subjects = {x["subjects"]: x for x in runs}
        if wanted("all_subjects"):
            everyone, figs = all_subjects(r, subjects[:2] if quick else subjects[:3], max_samples)
            figures += figs
        if wanted("rates_only"):
            rates, figs = rates_only(r, by_subjects.get(subjects[1]), counts)
            figures += figs
        # the parallel case: 128k samples (quick: 1,600), or the largest growth size below it that ran
        want = subjects[1] if quick else subjects[2]
        candidates = [x for x in runs if x["subjects"] <= want]
        par_base = candidates[-1] if candidates else None
        if wanted("parallel"):
            if par_base is not None and par_base["subjects"] != want:
                r.notes.append(
                    f"parallel: run at {par_base['samples']:,} samples instead of {want * SAMPLES_PER_SUBJECT:,} "
                    "(the larger size was not run)"
                )
            fixed, figs = parallel(r, par_base, counts, rounds=1 if quick else 2)
            figures += figs
            # the issue's own table identified every evaluation subject (the default selection): that case too
            every_candidates = [x for x in everyone if x["subjects"] <= want]
            every_base = every_candidates[-1] if every_candidates else None
            if every_base is not None and every_base["subjects"] != want:
                r.notes.append(
                    f"parallel (every evaluation subject identified): run at {every_base['samples']:,} samples "
                    f"instead of {want * SAMPLES_PER_SUBJECT:,} (the larger size was not run)"
                )
            every, figs = parallel(r, every_base, None, rounds=1 if quick else 2)
            figures += figs
            par = {"fixed_identity_set": fixed, "every_subject": every}
        if wanted("dask"):
            dask, figs = dask_case(r, par_base, counts)
            figures += figs
        if wanted("voice"):
            voice, figs = voice_case(r, quick)
            figures += figs
        for x in [*runs, *everyone]:
            x.pop("cache", None)
            x.pop("folder", None)
    return {
        "benchmark": "scale",
        "quick": quick,
        "figures": figures,
        "notes": r.notes,
        "growth": runs,
        "all_subjects": everyone,
        "rates_only": rates,
        "parallel": par,
        "dask": dask,
        "voice": voice,
        "limits": {"max_samples": max_samples, "time_cap_s": time_cap_s, "mem_available_mib": _mib(mem_available())},
    }


def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def _take_options() -> None:
    """``--max-samples N``, ``--time-cap S`` and ``--only CASES`` of the module's command line, passed on through
    the environment (the shared ``main`` knows only ``--quick`` and ``--json``)."""
    argv = sys.argv[1:]
    for flag, env in (("--max-samples", MAX_SAMPLES_ENV), ("--time-cap", TIME_CAP_ENV), ("--only", ONLY_ENV)):
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv):
                os.environ[env] = argv[i + 1]
                del argv[i : i + 2]
                break
            if a.startswith(flag + "="):
                os.environ[env] = a.split("=", 1)[1]
                del argv[i]
                break
    sys.argv[1:] = argv


if __name__ == "__main__":
    _take_options()
    main(run, __doc__)
