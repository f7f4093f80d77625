"""Sample-table benchmarks: streaming a large memory-mapped Arrow file, and splitting a million rows.

Targets (issue "Performance"): iterating a 2 GB Arrow file memory-mapped in batches (``SampleTable.stream``)
with peak RSS under 300 MB; a subject-disjoint split of 1,000,000 rows in under a second of CPU. The streaming
run happens in a fresh subprocess so its peak RSS is its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import cpu_timed, figure, main, timed

MB = 1024 * 1024


def write_big_file(path: Path, total_bytes: int, dim: int = 512, batch_rows: int = 8192) -> int:
    """Write an Arrow IPC file of ``features`` rows (float32 × dim) of about ``total_bytes``; return rows."""
    from bioanon.table import SampleTable

    rows = max(batch_rows, total_bytes // (4 * dim))
    template = SampleTable.from_arrays(
        subject=np.array(["s"] * 1), payloads={"features": np.zeros((1, dim), np.float32)}
    )
    schema = template.arrow.schema
    rng = np.random.default_rng(0)
    written = 0
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        while written < rows:
            n = min(batch_rows, rows - written)
            ids = pa.array([f"{i:09d}" for i in range(written, written + n)])
            subj = pa.array([f"s{i // 40:06d}" for i in range(written, written + n)])
            x = rng.standard_normal((n, dim), dtype=np.float32)
            feats = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
            writer.write_batch(pa.record_batch([ids, subj, feats], schema=schema))
            written += n
    return written


STREAM = """
import sys, resource, time
from bioanon.table import SampleTable
t0 = time.perf_counter()
total, rows = 0.0, 0
for batch in SampleTable.stream(sys.argv[1], 65536):
    total += float(batch.payload("features").sum())  # touches every value
    rows += batch.num_rows
seconds = time.perf_counter() - t0
# VmHWM: the peak of this process's own address space. ru_maxrss would not do: Linux carries the parent's
# high-water mark across fork + exec, so a child of a large benchmark runner would report the runner's peak.
try:
    peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(peak, seconds, rows)
"""


def run(quick: bool = False, workdir: str | None = None) -> dict[str, Any]:
    """Run the table benchmarks (``quick``: tiny sizes, for the smoke test)."""
    from bioanon.table import SampleTable

    figures = []
    size = 8 * MB if quick else 2048 * MB
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "big.arrow"
        t_write, rows = timed(lambda: write_big_file(path, size))
        out = subprocess.run(
            [sys.executable, "-c", STREAM, str(path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "BIOANON_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )
        rss, seconds, n = out.stdout.split()
        rss_mb = int(rss) / MB
        figures.append(
            figure(
                "table: stream a memory-mapped Arrow file, peak RSS",
                value=rss_mb,
                unit="MB",
                target="< 300 MB",
                passed=rss_mb < 300,
                file_mb=round(path.stat().st_size / MB),
                rows=int(n),
                seconds=round(float(seconds), 3),
                write_seconds=round(t_write, 3),
            )
        )
    n_rows = 20_000 if quick else 1_000_000
    subjects = np.repeat(np.arange(n_rows // 100), 100)
    table = SampleTable.from_arrays(
        subject=subjects.astype(str), payloads={"features": np.zeros((n_rows, 1), np.float32)}
    )
    cpu, _ = cpu_timed(lambda: table.split_subjects([0.2, 0.4, 0.4], seed=0))
    figures.append(
        figure(
            f"table: subject-disjoint split of {n_rows:,} rows, CPU time",
            value=cpu,
            unit="s",
            target="< 1 s",
            passed=cpu < 1.0,
            rows=n_rows,
            subjects=n_rows // 100,
        )
    )
    cpu_w, _ = cpu_timed(lambda: table.split_within_subjects([0.5, 0.5], seed=0))
    figures.append(
        figure(
            f"table: within-subject split of {n_rows:,} rows, CPU time",
            value=cpu_w,
            unit="s",
            target="(context)",
            passed=True,
        )
    )
    return {"benchmark": "table_io", "quick": quick, "figures": figures}


if __name__ == "__main__":
    main(run, __doc__)
