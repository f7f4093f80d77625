"""Run ids are names, never paths; the run lock is taken atomically and judged stale only when its process is
gone; runs that were killed are marked failed; a killed write leaves no temp file behind (issue 33)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.errors import ConfigError
from bioanon.evaluation.rundir import LOCK_FILE, RunFolder, read_status
from bioanon.export import read_table, write_table


def _evaluate(tmp_path, **kw):
    return bioanon.evaluate(
        config(**SMALL), out_dir=tmp_path / "zone" / "out", cache=tmp_path / "cache", progress=False, report=False, **kw
    )


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _contents(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("kind", ["traversal", "absolute", "victim", "hidden", "not-a-string"])
def test_a_run_id_that_is_a_path_is_refused_before_anything_is_written(tmp_path, kind):
    outside = tmp_path / "outside"
    (outside / "victim").mkdir(parents=True)
    (outside / "victim" / "config.json").write_text("theirs")
    before = _contents(outside)
    run_id = {
        "traversal": "../../outside/x",
        "absolute": str(outside / "abs"),
        "victim": "../../outside/victim",
        "hidden": ".x",
        "not-a-string": 3,
    }[kind]
    with pytest.raises(ConfigError, match=r"--run-id \(run_id=\).*not a path"):
        _evaluate(tmp_path, run_id=run_id)
    assert _contents(outside) == before  # nothing new outside --out, the victim's file untouched
    assert (outside / "victim" / "config.json").read_text() == "theirs"
    assert not (tmp_path / "cache" / "json").exists()  # refused before any work


def test_the_cli_names_the_run_id_option(tmp_path, capsys):
    from bioanon.cli import main

    toml = tmp_path / "c.toml"
    toml.write_text(
        textwrap.dedent("""
        name = "t"
        repeats = 1
        [dataset]
        source = "any.synthetic"
        params = { n_subjects = 20, samples_per_subject = 4, dim = 8 }
        [[anonymizers]]
        id = "any.identity"
        [[recognizers]]
        id = "any.cosine_centroid"
        [selection]
        selectors = ["random"]
        subject_counts = [4]
        random_draws = 1
        """)
    )
    out, cache = str(tmp_path / "out"), str(tmp_path / "cache")
    code = main(["evaluate", str(toml), "--out", out, "--cache-dir", cache, "--run-id", "../escaped", "--no-report"])
    assert code == 2
    assert "--run-id" in capsys.readouterr().err
    assert not (tmp_path / "escaped").exists()


def test_a_run_id_through_a_symbolic_link_to_outside_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "zone" / "out"
    out.mkdir(parents=True)
    (out / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match="symbolic link"):
        _evaluate(tmp_path, run_id="link")
    assert _contents(outside) == []
    # --out itself may be a link: the run folder is inside the folder it points to
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out-link").symlink_to(real, target_is_directory=True)
    folder = RunFolder.open(tmp_path / "out-link", "r1", "default")
    folder.close("complete")
    assert (real / "r1" / "status.json").is_file()


ROUNDS, RACERS = 20, 8


def _racer(root, barrier, results) -> None:
    from pathlib import Path

    for r in range(ROUNDS):
        barrier.wait()
        try:
            won = RunFolder._lock(Path(root) / f"r{r}", explicit=False)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            won = repr(exc)
        results.put((r, won))
    barrier.wait()  # the winners stay alive (their locks live) until every round is judged


@pytest.mark.skipif(sys.platform != "linux", reason="forks racers")
def test_exactly_one_of_concurrent_starts_takes_the_lock(tmp_path):
    for r in range(ROUNDS):
        (tmp_path / f"r{r}").mkdir()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(RACERS), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(tmp_path), barrier, results)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    try:
        got = [results.get(timeout=60) for _ in range(ROUNDS * RACERS)]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    errors = [w for _, w in got if not isinstance(w, bool)]
    assert errors == []
    winners = [sum(1 for r, w in got if r == i and w is True) for i in range(ROUNDS)]
    assert winners == [1] * ROUNDS
    for r in range(ROUNDS):  # the lock holds its owner from the moment it exists
        owner = json.loads((tmp_path / f"r{r}" / LOCK_FILE).read_text())
        assert {"pid", "host", "start"} <= set(owner)


def _lock_as(folder, **owner) -> None:
    (folder / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "started": "then", **owner}))


def _my_start() -> str:
    with open(f"/proc/{os.getpid()}/stat") as f:
        stat = f.read()
    return stat[stat.rfind(")") + 2 :].split()[19]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process start times from /proc")
def test_a_lock_is_stale_only_when_its_process_is_gone(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    _lock_as(folder, pid=_dead_pid())
    assert RunFolder._lock(folder, explicit=False)  # the pid is gone: stale, taken
    _lock_as(folder, pid=os.getpid(), start=_my_start())
    assert not RunFolder._lock(folder, explicit=False)  # alive with its start time: held
    _lock_as(folder, pid=os.getpid(), start=str(int(_my_start()) + 1))
    assert RunFolder._lock(folder, explicit=False)  # the pid was reused by another process: stale
    # an empty lock is one being written: held for a moment, not stale at once
    (folder / LOCK_FILE).write_text("")
    assert not RunFolder._lock(folder, explicit=False)
    old = time.time() - 3600
    os.utime(folder / LOCK_FILE, (old, old))
    assert RunFolder._lock(folder, explicit=False)  # left empty long ago: stale


def test_a_killed_run_is_marked_failed_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    for name, pid in (("killed", _dead_pid()), ("alive", os.getpid())):
        (out / name).mkdir(parents=True)
        status = {"state": "running", "started": "2026-01-01T00:00:00", "pid": pid, "config_digest": "x"}
        (out / name / "status.json").write_text(json.dumps(status))
        _lock_as(out / name, pid=pid)
    (out / "ended").mkdir()
    (out / "ended" / "status.json").write_text(json.dumps({"state": "complete", "started": "then"}))
    _lock_as(out / "ended", pid=_dead_pid())  # killed between its last status and unlocking
    folder = RunFolder.open(out, None, "next")
    killed = read_status(out / "killed")
    assert killed["state"] == "failed" and "killed?" in killed["note"]
    assert killed["started"] == "2026-01-01T00:00:00" and killed["config_digest"] == "x"
    assert not (out / "killed" / LOCK_FILE).exists() and not (out / "ended" / LOCK_FILE).exists()
    assert read_status(out / "alive")["state"] == "running" and (out / "alive" / LOCK_FILE).exists()
    assert read_status(out / "ended")["state"] == "complete"
    folder.close("complete")


KILLED_WRITER = """
import os, signal, sys
import bioanon
from bioanon import table_io
from bioanon.export import write_table

def dies(arrow, sink):
    sink.write(b"x" * 100_000)
    sink.flush()
    os.kill(os.getpid(), signal.SIGKILL)

table_io._write_ipc = dies
write_table(bioanon.load_dataset("any.synthetic", n_subjects=4, samples_per_subject=2, dim=4), sys.argv[1])
"""


def test_a_killed_anonymize_writes_temp_file_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "anon.arrow"
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_WRITER), str(target)], env=os.environ)
    assert killed.returncode == -signal.SIGKILL
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".anon.arrow.")]  # it left its temp file
    from bioanon.fileio import temp_prefix

    live = tmp_path / f"{temp_prefix(target)}busy.tmp"  # a write going on in this (live) process stays
    live.write_bytes(b"y")
    table = bioanon.load_dataset("any.synthetic", n_subjects=4, samples_per_subject=2, dim=4)
    write_table(table, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["anon.arrow", live.name])
    assert len(read_table(target)) == len(table)
