"""Random kill points (issue 33, item 7): a small evaluation run by the CLI is stopped with SIGKILL or Ctrl-C
(SIGINT) at a seeded random state — after its k-th task record reached the cache — and run again: the rerun
resumes into the same folder and its results are byte-identical to those of an uninterrupted run."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys

import pytest
from faultkit import (
    DEADLINE,
    cli_env,
    count,
    evaluate_command,
    fault_rng,
    fault_tries,
    json_records,
    small_toml,
    tally_lines,
    wait_for,
)
from sigint import sigint_reaches_children

import bioanon
from bioanon.evaluation.rundir import LOCK_FILE, read_status

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and SIGINT of a child are POSIX")

#: the files of a results folder that hold results (the others record times, hosts and versions)
RESULTS = ("metrics.parquet", "tradeoff.parquet", "auc.parquet", "utility.parquet")


def _results(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in RESULTS}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """An uninterrupted run: its config, its results and how many task records it stored."""
    root = tmp_path_factory.mktemp("uninterrupted")
    toml = small_toml(root / "eval.toml")
    bioanon.evaluate(toml, out_dir=root / "out", run_id="r", cache=root / "cache", progress=False, report=False)
    return toml, _results(root / "out" / "r"), json_records(root / "cache")


def _kill_and_resume(tmp_path, toml, sig: int, k: int, expected: dict[str, bytes]) -> list[str]:
    """Run, send ``sig`` once the cache holds ``k`` records, run again to the end; the problems found (none: held)."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    command = [*evaluate_command(toml, out, "r"), "--quiet", "--no-report"]
    with sigint_reaches_children():  # else, in a suite run as a background job, SIGINT would never arrive
        proc = subprocess.Popen(
            command, env=cli_env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
    problems = []
    try:
        if wait_for(lambda: json_records(cache) >= k, proc, f"record {k} of the run"):
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if "Traceback" in err:
        problems.append(f"the stopped run printed a traceback: {err}")
    if proc.returncode not in (0, -signal.SIGKILL if sig == signal.SIGKILL else 130):
        problems.append(f"the stopped run exited {proc.returncode}: {err}")
    again = subprocess.run(command, env=cli_env(cache), capture_output=True, text=True, timeout=DEADLINE)
    if again.returncode != 0:
        return [*problems, f"the rerun exited {again.returncode}: {again.stderr}"]
    folder = out / "r"
    status = read_status(folder) or {}
    if status.get("state") != "complete" or (folder / LOCK_FILE).exists():
        problems.append(
            f"the rerun left the folder {status.get('state')!r}, lock there: {(folder / LOCK_FILE).exists()}"
        )
    differ = [name for name, data in _results(folder).items() if data != expected[name]]
    if differ:
        problems.append(f"{differ} differ from those of the uninterrupted run")
    return problems


@pytest.mark.slow  # about 10 s a try: a run stopped part-way and a full rerun
@posix_only
def test_random_kill_points_resume_to_byte_identical_results(uninterrupted, tmp_path):
    toml, expected, records = uninterrupted
    rng = fault_rng("kill points")
    failed = []
    for i in range(fault_tries(2)):
        sig = (signal.SIGKILL, signal.SIGINT)[i % 2]
        k = rng.randint(1, records)
        probe = f"{signal.Signals(sig).name} after record k of {records}, rerun byte-identical"
        problems = _kill_and_resume(tmp_path / f"try{i}", toml, sig, k, expected)
        count(probe, not problems)
        failed += [f"{signal.Signals(sig).name} at record {k}: {p}" for p in problems]
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _pool_busy(cache, k: int, pid: int) -> bool:
    """Whether the cache holds ``k`` records and the run ``pid`` has its workers (and fork server) running."""
    return json_records(cache) >= k and len(_children(pid)) >= 2


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow  # the worker pool takes seconds to start
@posix_only
def test_a_sigkilled_run_with_workers_leaves_none_and_resumes(uninterrupted, tmp_path):
    """With a pool of 2 workers, SIGKILL of the main process at a random record: its workers and fork server go,
    the killed run's stderr ends, and the rerun's results are byte-identical."""
    pytest.importorskip("psutil", reason="lists the run's worker processes")
    import time

    toml, expected, records = uninterrupted
    rng = fault_rng("pool kill")
    failed = []
    for i in range(fault_tries(1)):
        cache, out = tmp_path / f"try{i}" / "cache", tmp_path / f"try{i}" / "out"
        command = [*evaluate_command(toml, out, "r"), "--quiet", "--no-report"]
        env = cli_env(cache, BIOANON_JOBS="2")
        k = rng.randint(1, records - 1)
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        workers: list[int] = []
        problems = []
        try:
            if wait_for(functools.partial(_pool_busy, cache, k, proc.pid), proc, "the pool at work"):
                workers = _children(proc.pid)
                proc.send_signal(signal.SIGKILL)
            try:
                proc.communicate(timeout=60)  # end-of-file: no worker holds the killed run's stderr
            except subprocess.TimeoutExpired:
                problems.append("the killed run's stderr stayed open")
            end = time.monotonic() + 60
            while (left := [p for p in workers if _running(p)]) and time.monotonic() < end:
                time.sleep(0.1)
            if left:
                problems.append(f"processes {left} outlived the killed run")
        finally:
            if proc.poll() is None:
                proc.kill()
            for p in workers:
                if _running(p):
                    os.kill(p, signal.SIGKILL)
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE)
        if again.returncode != 0:
            problems.append(f"the rerun exited {again.returncode}: {again.stderr}")
        elif _results(out / "r") != expected:
            problems.append("the rerun's results differ from the uninterrupted run's")
        count("SIGKILL with 2 workers: no process left, rerun byte-identical", not problems)
        failed += [f"SIGKILL at record {k}: {p}" for p in problems]
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)
