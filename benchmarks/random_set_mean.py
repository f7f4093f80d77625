"""Benchmark of the random-set selective weighted mean (``bioanon.random_set_mean``, Algorithm 1).

    python -m benchmarks.random_set_mean [--n 100000 --d 512 --g 32] [--quick] [--json out.json]

One run reports, for the whole transform (set sampling + line-9 weighting, array in → array out, relevance
fitted beforehand):

* the speed-up over a straightforward per-record numpy implementation of Algorithm 1 (class pools computed
  once, then a loop over records that drops the record from its pool, draws the set with
  ``Generator.choice`` without replacement and applies line 9). The loop is timed on a random subsample of
  ``--naive-records`` records and extrapolated linearly to all N (every record costs the same: its pools are
  the full-size ones); the even more literal loop that filters all N records for every record is reported too;
* the ratio to a memory-bandwidth bound: the time to read N·g·D·4 bytes sequentially with the same number of
  threads (``torch.sum`` over a buffer larger than the cache, re-read until that many bytes were read; numpy
  in threads without torch);
* the peak extra resident memory of the transform (VmHWM after resetting it through /proc/self/clear_refs,
  minus the resident size before; measured in a fresh process at full size) against input + output + 512 MiB;
* for context, the method-level transform (table in → table out) and the relevance fit on its subsample.

The machine is shared and noisy: engine and bound are timed interleaved, ``--repeats`` times each, and the
ratios use the best time of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

TARGET_SPEEDUP = 10.0
TARGET_BANDWIDTH_RATIO = 1.5
MEMORY_SLACK = 512 << 20

FULL = {"n": 100_000, "d": 512, "g": 32}
QUICK = {"n": 6_000, "d": 48, "g": 8}
# the three configurations (``python -m benchmarks.run`` measures all; the module's CLI measures one)
CONFIGS = [dict(FULL), {"n": 100_000, "d": 4096, "g": 32}, {"n": 1_000_000, "d": 512, "g": 32, "memmap": True}]
QUICK_CONFIGS = [dict(QUICK), {"n": 3_000, "d": 32, "g": 8, "memmap": True}]


def make_data(n: int, d: int, n_classes: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d), dtype=np.float32), rng.integers(0, n_classes, size=n).astype(np.int64)


def memory_mapped_data(
    n: int, d: int, directory: str, n_classes: int = 4, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, Any]:
    """The same data saved as one Arrow record batch and loaded back memory-mapped as a SampleTable.

    Returns (the payload: a zero-copy view into the mapped file, whose pages are read on demand; codes; the
    table, which must outlive the view). The in-memory copy used to write the file is freed first."""
    from bioanon.table import SampleTable

    x, codes = make_data(n, d, n_classes, seed)
    path = os.path.join(directory, "rsm.arrow")
    SampleTable.from_arrays(
        subject=np.char.add("s", (np.arange(n) % 500).astype(str)),
        payloads={"features": x},
        attributes={"label": codes},
    ).save(path)
    del x
    table = SampleTable.load(path, memory_map=True)
    return table.payload("features"), codes, table


def selection(d: int, retention: float, seed: int = 0) -> np.ndarray:
    from bioanon.random_set_mean import feature_count

    mask = np.zeros(d, dtype=bool)
    mask[np.random.default_rng(seed).permutation(d)[: feature_count(retention, d)]] = True
    return mask


def naive_algorithm1(
    x: np.ndarray,
    codes: np.ndarray,
    selected: np.ndarray,
    *,
    set_size: int,
    n_same: int,
    weight: float,
    rows: np.ndarray,
    seed: int = 0,
    pools: str = "precomputed",
) -> np.ndarray:
    """Algorithm 1 record by record, as one would write it directly: for every record, its pools without itself,
    ``Generator.choice`` without replacement, the sum over G (d included) and line 9.

    ``pools="precomputed"`` builds each class's pool once; ``"per_record"`` filters all N records for every
    record (the most literal reading of line 8)."""
    rng = np.random.default_rng(seed)
    everyone = np.arange(len(x))
    if pools == "precomputed":
        same_pool = {c: everyone[codes == c] for c in np.unique(codes)}
        other_pool = {c: everyone[codes != c] for c in same_pool}
    out = np.empty((len(rows), x.shape[1]), dtype=np.float32)
    xi = selected.astype(np.float32)
    for k, i in enumerate(rows):
        d = x[i]
        if pools == "precomputed":
            same, other = same_pool[codes[i]], other_pool[codes[i]]
            same = same[same != i]
        else:
            same = everyone[(codes == codes[i]) & (everyone != i)]
            other = everyone[codes != codes[i]]
        members = np.concatenate(
            [[i], rng.choice(same, n_same - 1, replace=False), rng.choice(other, set_size - n_same, replace=False)]
        )
        total = x[members].sum(axis=0)
        out[k] = ((weight - 1) * d + total) / ((weight - 1) + set_size) * xi + total / set_size * (1 - xi)
    return out


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def bandwidth_reader(total_bytes: int, threads: int, min_buffer: int = 256 << 20):
    """A function that reads ``total_bytes`` sequentially from a buffer larger than the cache, in threads."""
    n = max(min_buffer, 1 << 20) // 4
    buf = np.ones(n, dtype=np.float32)
    passes, rest = divmod(total_bytes // 4, n)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_numpy(buf)

        def read() -> None:
            old = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                for _ in range(passes):
                    t.sum()
                if rest:
                    t[:rest].sum()
            finally:
                torch.set_num_threads(old)

        return read, "torch.sum"
    from concurrent.futures import ThreadPoolExecutor

    parts = np.array_split(buf, threads)

    def read() -> None:  # pragma: no cover - only without torch
        with ThreadPoolExecutor(threads) as pool:
            for _ in range(passes):
                list(pool.map(np.add.reduce, parts))
            if rest:
                list(pool.map(np.add.reduce, np.array_split(buf[:rest], threads)))

    return read, "numpy add.reduce in threads"


_MEMORY_SNIPPET = r"""
import json, sys, numpy as np
from bioanon import random_set_mean as E
n, d, g, n_same, backend = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
rng = np.random.default_rng(0)
x = rng.standard_normal((n, d), dtype=np.float32)
codes = rng.integers(0, 4, size=n)
sel = np.zeros(d, bool); sel[: max(1, d // 10)] = True
E.random_set_mean(x[:4096], codes[:4096], sel, set_size=min(g, 64), n_same=min(n_same, 32), weight=100.0,
                  backend=backend)  # load torch and its kernels before measuring
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset VmHWM to the current resident size
    reset = True
except OSError:
    reset = False
before = status("VmRSS")
out = E.random_set_mean(x, codes, sel, set_size=g, n_same=n_same, weight=100.0, backend=backend)
print(json.dumps({"before": before, "peak": status("VmHWM"), "reset": reset, "out_bytes": out.nbytes}))
"""


def measure_memory(n: int, d: int, g: int, n_same: int, backend: str) -> dict[str, Any]:
    """Peak extra resident memory of the transform, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_SNIPPET, str(n), str(d), str(g), str(n_same), backend],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["extra"] = res["peak"] - res["before"]
    return res


def run(quick: bool = False, **one: Any) -> dict[str, Any]:
    """Every configuration of the issue (N=100k×D=512, D=4,096, N=1M memory-mapped), or, given any keyword of
    :func:`measure`, that one configuration. Figures are prefixed with their configuration."""
    if one:
        return measure(quick, **one)
    configs, figures = [], []
    for cfg in QUICK_CONFIGS if quick else CONFIGS:
        res = measure(quick, **cfg)
        _print(res)
        tag = f"N={res['n']:,} D={res['d']}" + (" memory-mapped" if res.get("memmap") else "")
        figures += [{**f, "name": f"{tag}: {f['name']}"} for f in res["figures"]]
        configs.append({k: v for k, v in res.items() if k != "figures"})
    return {
        "benchmark": "random_set_mean",
        "quick": quick,
        "configs": configs,
        "figures": figures,
        "targets_met": all(f["passed"] for f in figures),
    }


def measure(
    quick: bool = False,
    *,
    n: int | None = None,
    d: int | None = None,
    g: int | None = None,
    purity: float = 0.9,
    retention: float = 0.1,
    weight: float = 100.0,
    repeats: int | None = None,
    naive_records: int | None = None,
    backend: str = "auto",
    memory: bool | None = None,
    method: bool | None = None,
    memmap: bool = False,
) -> dict[str, Any]:
    """Measure one configuration; return a JSON-able dict (``speedup_vs_naive``, ``ratio_to_bandwidth_bound``,
    ... ``figures``). ``memmap``: the records are read from a memory-mapped Arrow table (written first)."""
    import tempfile

    if memmap:
        with tempfile.TemporaryDirectory(prefix="bioanon-rsm-bench-") as tmp:
            return _measure(
                quick, n, d, g, purity, retention, weight, repeats, naive_records, backend, memory, method, tmp
            )
    return _measure(quick, n, d, g, purity, retention, weight, repeats, naive_records, backend, memory, method, None)


def _measure(
    quick, n, d, g, purity, retention, weight, repeats, naive_records, backend, memory, method, memmap_dir
) -> dict[str, Any]:
    from bioanon import random_set_mean as E

    size = dict(QUICK if quick else FULL)
    size.update({k: v for k, v in (("n", n), ("d", d), ("g", g)) if v is not None})
    n_, d_, g_ = size["n"], size["d"], size["g"]
    repeats = repeats or (1 if quick else 5)
    naive_records = min(n_, naive_records or (50 if quick else 2000))
    memory = (not quick) if memory is None else memory
    method = (not quick) if method is None else method
    threads = _cores()

    E._torch()  # let the engine import torch first (as in a fresh process using bioanon), before the bound does
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    mapped = None
    if memmap_dir is None:
        x, codes = make_data(n_, d_)
    else:
        x, codes, mapped = memory_mapped_data(n_, d_, memmap_dir)
        memory = False  # the fresh-process memory figure is measured on in-memory data only
    sel = selection(d_, retention)
    n_same = E.purity_count(purity, g_)

    def engine() -> np.ndarray:
        return E.random_set_mean(
            x, codes, sel, set_size=g_, n_same=n_same, weight=weight, backend=backend, threads=threads
        )

    total_bytes = n_ * g_ * d_ * 4
    read, bound_how = bandwidth_reader(total_bytes, threads, min_buffer=(16 << 20) if quick else (256 << 20))
    engine()  # warm-up: lazy torch import, kernel JIT, page cache
    read()
    t_engine, t_bound = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = engine()
        t_engine.append(time.perf_counter() - t0)
        del res  # freeing the output is the caller's business, not the transform's
        t0 = time.perf_counter()
        read()
        t_bound.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    sets = E.sample_sets(codes, g_, n_same, seed=0, threads=threads)
    t_sample = time.perf_counter() - t0
    del sets

    naive: dict[str, dict[str, float]] = {}
    for pools, count in (("precomputed", naive_records), ("per_record", max(1, naive_records // 5))):
        rows = np.sort(np.random.default_rng(1).choice(n_, count, replace=False))
        t0 = time.perf_counter()
        naive_algorithm1(x, codes, sel, set_size=g_, n_same=n_same, weight=weight, rows=rows, pools=pools)
        sub = time.perf_counter() - t0
        naive[pools] = {"records_timed": count, "seconds_subsample": sub, "seconds_extrapolated": sub * n_ / count}
    t_naive = naive["precomputed"]["seconds_extrapolated"]

    best_engine, best_bound = min(t_engine), min(t_bound)
    result: dict[str, Any] = {
        "quick": quick,
        "n": n_,
        "d": d_,
        "g": g_,
        "memmap": memmap_dir is not None,
        "purity": purity,
        "n_same": n_same,
        "retention": retention,
        "weight": weight,
        "threads": threads,
        "backend": backend if backend != "auto" else ("torch" if _has_torch() else "numpy"),
        "repeats": repeats,
        "loadavg_1min_before": load_before,
        "engine_seconds": best_engine,
        "engine_seconds_all": t_engine,
        "sampling_seconds": t_sample,
        "bound_seconds": best_bound,
        "bound_seconds_all": t_bound,
        "bound_method": bound_how,
        "bound_bytes": total_bytes,
        "bound_gbps": total_bytes / best_bound / 1e9,
        "naive": naive,
        "naive_seconds_extrapolated": t_naive,
        "speedup_vs_naive": t_naive / best_engine,
        "speedup_vs_naive_per_record_pools": naive["per_record"]["seconds_extrapolated"] / best_engine,
        "ratio_to_bandwidth_bound": best_engine / best_bound,
    }
    if method:
        result.update(_method_figures(x, codes, purity, g_, retention, weight, backend, table=mapped))
    if memory:
        mem = measure_memory(n_, d_, g_, n_same, backend)
        result["memory"] = mem
        if "extra" in mem:
            budget = mem["out_bytes"] + MEMORY_SLACK
            result["peak_extra_bytes"] = mem["extra"]
            result["memory_budget_extra_bytes"] = budget
    figures = [
        _figure(
            "speedup_vs_naive",
            result["speedup_vs_naive"],
            f">= {TARGET_SPEEDUP:g}",
            result["speedup_vs_naive"] >= TARGET_SPEEDUP,
        ),
        _figure(
            "ratio_to_bandwidth_bound",
            result["ratio_to_bandwidth_bound"],
            f"<= {TARGET_BANDWIDTH_RATIO:g}",
            result["ratio_to_bandwidth_bound"] <= TARGET_BANDWIDTH_RATIO,
        ),
    ]
    if "peak_extra_bytes" in result:
        figures.append(
            _figure(
                "peak_extra_memory_mib",
                result["peak_extra_bytes"] / 2**20,
                f"<= output + 512 = {result['memory_budget_extra_bytes'] / 2**20:.0f}",
                result["peak_extra_bytes"] <= result["memory_budget_extra_bytes"],
                unit="MiB",
            )
        )
    result["figures"] = figures
    result["targets_met"] = all(f["passed"] for f in figures)
    return result


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(name: str, value: float, target: str, passed: bool, unit: str = "×") -> dict[str, Any]:
    return {"name": name, "value": float(value), "unit": unit, "target": target, "passed": bool(passed)}


def _method_figures(
    x: np.ndarray,
    codes: np.ndarray,
    purity: float,
    g: int,
    retention: float,
    weight: float,
    backend: str,
    table: Any = None,
) -> dict[str, Any]:
    """Method level: relevance fit on its subsample, and transform of a table (payload in, payload out) —
    ``table`` when given (the memory-mapped one), else one built from ``x``."""
    from bioanon.builtin.random_set_mean import RandomSetMean
    from bioanon.table import SampleTable

    n = len(x)
    if table is None:
        table = SampleTable.from_arrays(
            subject=np.char.add("s", (np.arange(n) % 500).astype(str)),
            payloads={"features": x},
            attributes={"label": codes},
        )
    m = RandomSetMean(attribute="label", set_size=g, purity=purity, retention=retention, weight=weight, backend=backend)
    t0 = time.perf_counter()
    m.fit(table)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.transform(table)
    t_transform = time.perf_counter() - t0
    return {
        "method_fit_seconds": t_fit,
        "method_fit_samples": m.relevance_samples,
        "method_transform_seconds": t_transform,
    }


def _naive_text(t: dict[str, float], note: str) -> str:
    return f"{t['seconds_subsample']:.2f} s for {t['records_timed']} records × N/{t['records_timed']}; {note}"


def _print(result: dict[str, Any]) -> None:
    r = result
    print(
        f"random_set_mean benchmark: N={r['n']} D={r['d']} g={r['g']} (n_same={r['n_same']}), "
        f"{r['threads']} threads, backend {r['backend']}, best of {r['repeats']}, "
        f"load average {r['loadavg_1min_before']:.1f} before"
        + (" — quick: tiny sizes, the ratios say nothing about the targets" if r.get("quick") else "")
    )
    rows = [
        (
            "engine transform (sampling + line 9)",
            f"{r['engine_seconds']:.3f} s",
            "runs: " + " ".join(f"{t:.3f}" for t in r["engine_seconds_all"]),
        ),
        ("  set sampling alone (same threads)", f"{r['sampling_seconds']:.3f} s", ""),
        (
            "bandwidth bound (read N·g·D·4 B)",
            f"{r['bound_seconds']:.3f} s",
            f"{r['bound_bytes'] / 2**30:.2f} GiB at {r['bound_gbps']:.1f} GB/s, {r['bound_method']}",
        ),
        (
            "naive per-record numpy (extrapolated)",
            f"{r['naive_seconds_extrapolated']:.1f} s",
            _naive_text(r["naive"]["precomputed"], "class pools computed once; the speed-up target's baseline"),
        ),
        (
            "  same, pools filtered per record",
            f"{r['naive']['per_record']['seconds_extrapolated']:.1f} s",
            _naive_text(r["naive"]["per_record"], f"speed-up {r['speedup_vs_naive_per_record_pools']:.0f}×"),
        ),
    ]
    if "method_transform_seconds" in r:
        rows.append(
            (
                "method transform (table → table)",
                f"{r['method_transform_seconds']:.3f} s",
                "incl. payload checks and Arrow output",
            )
        )
        rows.append(
            (
                "method fit (relevance, RF)",
                f"{r['method_fit_seconds']:.3f} s",
                f"on a {r['method_fit_samples']}-record subsample",
            )
        )
    if "memory" in r:
        mem = r["memory"]
        rows.append(
            (
                "peak extra resident memory",
                f"{mem['extra'] / 2**20:.0f} MiB" if "extra" in mem else "n/a",
                f"output {mem.get('out_bytes', 0) / 2**20:.0f} MiB"
                + ("" if mem.get("reset", True) else "; VmHWM not reset"),
            )
        )
    w = max(len(a) for a, _, _ in rows)
    for a, b, c in rows:
        print(f"  {a:<{w}}  {b:>10}  {c}")
    print()
    for f in r["figures"]:
        print(
            f"  {f['name']:<26} {f['value']:8.2f} {f['unit']:<3}  target {f['target']:<16} "
            f"{'PASS' if f['passed'] else 'FAIL'}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.random_set_mean", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, help="records (default 100000; quick 6000)")
    ap.add_argument("--d", type=int, help="values per record (default 512; quick 48)")
    ap.add_argument("--g", type=int, help="set size (default 32; quick 8)")
    ap.add_argument("--purity", type=float, default=0.9)
    ap.add_argument("--retention", type=float, default=0.1)
    ap.add_argument("--weight", type=float, default=100.0)
    ap.add_argument("--repeats", type=int, help="timed runs of engine and bound (default 5; quick 1)")
    ap.add_argument(
        "--naive-records",
        type=int,
        help="records the naive loop is timed on (default 2000; a fifth for the per-record-pools loop)",
    )
    ap.add_argument("--backend", choices=("auto", "torch", "numpy"), default="auto")
    ap.add_argument("--memmap", action="store_true", help="read the records from a memory-mapped Arrow table")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, no memory subprocess")
    ap.add_argument("--json", help="write the result as JSON to this path")
    a = ap.parse_args(argv)
    result = measure(
        a.quick,
        n=a.n,
        d=a.d,
        g=a.g,
        purity=a.purity,
        retention=a.retention,
        weight=a.weight,
        repeats=a.repeats,
        naive_records=a.naive_records,
        backend=a.backend,
        memmap=a.memmap,
    )
    _print(result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
