"""The voice case (issue 16): a 10-speaker voice evaluation with the strong attackers, timed cold, with the time
of each stage and the gain of reusing within a process what a fixed function computed (``reuse_computed``).

The issue reports "a 10-speaker voice evaluation with the strong attackers took 702 s on 2 cores" without its
config; this is the case rebuilt from that description: 10 speakers of ``voice.synthetic`` (20 utterances of
0.4 s each at 8 kHz), McAdams at three α, VTLN warping and additive noise at two SNRs (6 settings); the
attackers ``voice.svm``, ``voice.lda``, ``voice.xvector`` (trained from scratch, the fast preset)
and the pretrained ``voice.resemblyzer`` when installed; naive, lazy and parrot scenarios; 2 repeats; digit
accuracy as utility. Each run is a fresh ``bioanon evaluate`` process with a fresh cache: with every core,
with one, and with one and the in-process reuse turned off (``BIOANON_FIT_MEMO=0``: every recognizer refitted
and every feature recomputed, as before the reuse existed); the results of the last two must be identical. Their
ratio is taken on CPU time (all threads), which a busy machine disturbs far less than wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import child_env, figure, main


def voice_config(quick: bool, resemblyzer: bool) -> dict[str, Any]:
    """The voice case's config (``quick``: 6 speakers, short training, no Resemblyzer: a smoke run)."""
    xvector = {"id": "voice.xvector", "params": {"epochs": 2} if quick else {}}
    recognizers = [{"id": "voice.svm"}, {"id": "voice.lda"}, xvector]
    if resemblyzer and not quick:  # (loading the encoder alone takes seconds)
        recognizers.append({"id": "voice.resemblyzer"})
    return {
        "name": "voice-case",
        "seed": 0,
        "repeats": 1 if quick else 2,
        "scenarios": ["naive", "lazy", "parrot"],
        "dataset": {
            "source": "voice.synthetic",
            "params": {
                "n_speakers": 6 if quick else 10,
                "utterances_per_speaker": 4 if quick else 20,
                "with_features": False,
            },
        },
        "rates": {
            "background": 0.0 if quick else 0.2,
            "attacker": 0.5 if quick else 0.4,
            "evaluation": 0.5 if quick else 0.4,
            "enrolment": 0.5,
        },
        "anonymizers": [
            {"id": "voice.mcadams", "name": "mcadams", "grid": {"alpha": [0.7] if quick else [0.5, 0.7, 0.9]}},
            {"id": "voice.frequency_warp", "name": "vtln"},
            {"id": "voice.noise", "name": "noise", "grid": {"snr_db": [10.0] if quick else [20.0, 5.0]}},
        ],
        "recognizers": recognizers,
        "selection": {"selectors": ["random"], "subject_counts": [2] if quick else [4], "random_draws": 1},
        "utility": [{"id": "voice.content_accuracy", "params": {"attribute": "digit"}}],
        "report": {"bootstrap": 20 if quick else 200},
    }


def _run(config: Path, out: Path, cache: Path, jobs: int, reuse: bool = True) -> dict[str, Any]:
    """Wall and CPU seconds, peak resident MB, the seconds per stage and the metrics of a fresh
    ``bioanon evaluate``."""
    import pyarrow.parquet as pq

    cmd = [
        sys.executable,
        "-c",
        "import sys; from bioanon.cli import main; sys.exit(main(sys.argv[1:]))",
        "evaluate",
        str(config),
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        "--jobs",
        str(jobs),
        "--quiet",
        "--no-report",
    ]
    env = {k: v for k, v in child_env().items() if k != "BIOANON_FIT_MEMO"}
    if not reuse:
        env["BIOANON_FIT_MEMO"] = "0"
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"bioanon evaluate failed: {err[-1500:]}")
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    stages = json.loads((run_dir / "environment.json").read_text())["tasks"]["by_stage"]
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "stage_s": {k: round(v["seconds"], 2) for k, v in stages.items()},
        "metrics": pq.read_table(run_dir / "metrics.parquet"),
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Run the voice case cold: every core, one core, one core without in-process reuse."""
    from bioanon.evaluation.config import load_config
    from bioanon.torchutil import cores
    from bioanon_voice.resemblyzer_encoder import resemblyzer_available

    n = cores()
    resemblyzer = resemblyzer_available()
    notes = (
        []
        if resemblyzer
        else [
            "voice.resemblyzer left out: resemblyzer is not installed "
            "(pip install --no-deps resemblyzer webrtcvad-wheels)"
        ]
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        config = tmp / "voice.toml"
        config.write_text(load_config(voice_config(quick, resemblyzer)).to_toml())
        runs = {}
        for name, jobs, reuse in (("all_cores", n, True), ("one_core", 1, True), ("one_core_no_reuse", 1, False)):
            runs[name] = _run(config, tmp / f"out-{name}", tmp / f"cache-{name}", jobs, reuse)
    identical = runs["one_core"]["metrics"].equals(runs["one_core_no_reuse"]["metrics"])
    ctx = {name: {k: v for k, v in r.items() if k != "metrics"} for name, r in runs.items()}
    del ctx["all_cores"]["cpu_s"]  # the parent process's only: its workers' CPU time is not counted there
    # CPU seconds (every thread of the process): on a machine shared with other work the wall times of runs
    # minutes apart meet different loads, their CPU times far less
    ratio = runs["one_core"]["cpu_s"] / runs["one_core_no_reuse"]["cpu_s"]
    figures = [
        figure(
            f"voice case: cold run on every core ({n}), 10 speakers, strong attackers",
            unit="s",
            value=runs["all_cores"]["seconds"],
            target="(recorded; the issue's own config took 702 s)",
            passed=True,
            cores=n,
            **ctx["all_cores"],
        ),
        figure(
            "voice case: CPU time with in-process reuse / without (--jobs 1; results identical)",
            value=ratio,
            target="< 1 and identical results",
            passed=ratio < 1 and identical,
            identical=identical,
            one_core=ctx["one_core"],
            one_core_no_reuse=ctx["one_core_no_reuse"],
        ),
    ]
    notes.append(
        "the issue does not give the config of its 702 s run; this case is rebuilt from its description "
        "(see benchmarks/voice_case.py)"
    )
    return {"benchmark": "voice_case", "quick": quick, "figures": figures, "notes": notes}


if __name__ == "__main__":
    main(run, __doc__)
