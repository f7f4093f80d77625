"""Random run ids, concurrent starts and a full disk (issue 33, item 7): ids that are paths are refused and
nothing is created outside ``--out``; of concurrent starts on one folder exactly one takes its lock; a write that
finds the disk full ends the run with a clear error (a patched writer runs out of space after a seeded number of
bytes)."""

from __future__ import annotations

import errno
import multiprocessing
import sys
from pathlib import Path

import pytest
from faultkit import count, fault_rng, fault_tries, small_toml, tally_lines

from bioanon import fileio
from bioanon.errors import BioanonError
from bioanon.evaluation.rundir import LOCK_FILE, RunFolder

PIECES = ["..", ".", "/", "\\", "x", "run", "~", "ü", "😀", " ", "-", "%2e%2e", "\t", "a" * 300, "$HOME", "*"]


def _outside(root: Path) -> set[str]:
    """What ``root`` holds outside ``zone/out`` (the test's --out)."""
    inside = root / "zone" / "out"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p != inside and inside not in p.parents}


def test_random_run_ids_stay_inside_out_or_are_refused(tmp_path):
    out = tmp_path / "zone" / "out"
    out.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (out / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    before = _outside(tmp_path)
    rng = fault_rng("run ids")
    failed = []
    for _ in range(100):
        run_id = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.1:
            run_id = str(tmp_path / "outside" / run_id)  # absolute
        elif rng.random() < 0.1:
            run_id = "link/" + run_id if rng.random() < 0.5 else "link"
        problem = None
        try:
            folder = RunFolder.open(out, run_id, "default")
        except BioanonError:
            pass
        except Exception as exc:  # noqa: BLE001 - what the probe looks for
            problem = f"raised {type(exc).__name__}: {exc}"
        else:
            inside = folder.path.resolve().parent == out.resolve()
            folder.close("complete")
            if not inside:
                problem = f"made the run folder {folder.path}"
        outside = _outside(tmp_path) - before
        if outside:
            problem = f"wrote outside --out: {sorted(outside)}"
        count("random run id: refused, or a folder inside --out", problem is None)
        if problem:
            failed.append(f"run id {run_id!r}: {problem}")
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)


def _start(folder: str, barrier, results) -> None:
    barrier.wait()
    try:
        results.put(RunFolder._lock(Path(folder), explicit=False))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(repr(exc))
    barrier.wait()  # the winner stays alive (its lock live) until all have tried


@pytest.mark.skipif(sys.platform != "linux", reason="forks the starters")
def test_of_a_random_number_of_concurrent_starts_exactly_one_takes_the_lock(tmp_path):
    """Rounds of 2–8 starters, some finding a stale lock of a run that is gone: one winner each time."""
    import json
    import socket
    import subprocess

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    rng = fault_rng("concurrent starts")
    ctx = multiprocessing.get_context("fork")
    failed = []
    for r in range(fault_tries(5)):
        folder = tmp_path / f"r{r}"
        folder.mkdir()
        stale = rng.random() < 0.5
        if stale:
            (folder / LOCK_FILE).write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "started": "x"}))
        n = rng.randint(2, 8)
        barrier, results = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_start, args=(str(folder), barrier, results)) for _ in range(n)]
        for p in procs:
            p.start()
        try:
            got = [results.get(timeout=60) for _ in range(n)]
        finally:
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
        held = got.count(True) == 1 and got.count(False) == n - 1
        count("concurrent starts on one folder: exactly one takes the lock", held)
        if not held:
            failed.append(f"round {r} ({n} starters, stale lock: {stale}): {got}")
    assert not failed, "\n".join(failed)


class _Full:
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, f, room: list[int]):
        self._f, self._room = f, room

    def write(self, data) -> int:
        size = len(memoryview(data).cast("B"))
        if size > self._room[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room[0] -= size
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)


def test_a_full_disk_while_writing_results_gives_a_clear_error(tmp_path, monkeypatch, capsys):
    """The results folder's writer runs out of space after a seeded number of bytes: exit 2, one clear message."""
    import bioanon
    from bioanon.cli import main

    toml = small_toml(tmp_path / "eval.toml")
    cache = tmp_path / "cache"
    bioanon.evaluate(toml, out_dir=None, cache=cache, progress=False, report=False)  # the tasks, cached
    real = fileio.atomic_write
    rng = fault_rng("disk full")
    failed = []
    for i in range(fault_tries(3)):
        given = rng.randrange(0, 20_000)
        room = [given]

        def full(path, write, room=room):
            return real(path, lambda f: write(_Full(f, room)))

        try:
            with monkeypatch.context() as m:
                for module in [x for x in list(sys.modules.values()) if getattr(x, "atomic_write", None) is real]:
                    m.setattr(module, "atomic_write", full)
                code = main(
                    ["evaluate", str(toml), "--out", str(tmp_path / "out"), "--run-id", f"r{i}"]
                    + ["--cache-dir", str(cache), "--quiet", "--no-report"]
                )
            err = capsys.readouterr().err
            problem = None if code == 2 and "space" in err and "Traceback" not in err else f"exit {code}: {err}"
            if code == 0:
                problem = None  # everything fitted in the room given
        except BaseException as exc:  # noqa: BLE001 - what the probe looks for
            problem = f"raised {type(exc).__name__}: {exc}"
        count("disk full while writing results: exit 2 with a clear error", problem is None)
        if problem:
            failed.append(f"room {given} bytes: {problem}")
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)
