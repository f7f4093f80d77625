"""Local worker processes: the pool dies with the process that made it (a SIGKILLed run leaves no workers, no fork
server and no open copy of its stdout/stderr behind: a supervisor reading its output gets end-of-file), and a
local Dask cluster listens on 127.0.0.1 only unless BIOANON_DASK_HOST says otherwise."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fork servers are POSIX")

DEADLINE = 30.0  # seconds for the orphans to go (they go within about a second)

# a run with a pool of 2 workers, each in a long task; it writes the pids of the workers and of the fork server
# to PIDS, then waits (or, with "kill-self", SIGKILLs itself as the out-of-memory killer would)
SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing.forkserver, os, signal, sys, time
    from pathlib import Path

    def hold(folder):
        (Path(folder) / str(os.getpid())).touch()
        time.sleep(300)

    if __name__ == "__main__":
        from bioanon.executors import _pool

        folder, pids, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
        futures = [worker.submit(hold, str(folder)) for worker in _pool(2)]
        while len(list(folder.iterdir())) < 2:  # both workers are in their task
            time.sleep(0.05)
        server = multiprocessing.forkserver._forkserver._forkserver_pid
        workers = [int(p.name) for p in folder.iterdir()]
        pids.write_text(json.dumps({"workers": workers, "server": server}))
        print("started", flush=True)
        if mode == "kill-self":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(300)
    """
)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        import psutil
    except ImportError:
        stat = Path(f"/proc/{pid}/stat")
        if not Path("/proc/self/stat").exists():
            pytest.skip("needs psutil or /proc to see other processes")
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return False
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[int]) -> list[int]:
    """Poll until none of ``pids`` runs (or the deadline passes); those still running."""
    end = time.monotonic() + DEADLINE
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < end:
        time.sleep(0.1)
    return left


def _kill(pids: list[int]) -> None:
    for pid in pids:  # leave nothing behind when the test fails
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _command(tmp_path: Path, mode: str) -> tuple[list[str], Path]:
    script, folder, pids = tmp_path / "run.py", tmp_path / "started", tmp_path / "pids.json"
    script.write_text(SCRIPT)
    folder.mkdir()
    return [sys.executable, str(script), str(folder), str(pids), mode], pids


@posix_only
def test_a_sigkilled_run_leaves_no_workers_or_fork_server(tmp_path):
    command, pids_file = _command(tmp_path, "wait")
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pids: list[int] = []
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started", "the run did not start its pool"
        found = json.loads(pids_file.read_text())
        pids = [*found["workers"], found["server"]]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=DEADLINE)
        left = _wait_gone(pids)
        assert not left, f"processes {left} outlived their SIGKILLed parent ({DEADLINE:.0f} s)"
        assert child.stdout.read() == ""  # end-of-file: no process holds the run's stdout any more
    finally:
        child.kill()
        _kill(pids)


@posix_only
def test_a_supervisor_reading_a_killed_runs_output_gets_end_of_file(tmp_path):
    command, pids_file = _command(tmp_path, "kill-self")
    pids: list[int] = []
    try:
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run's stdout/stderr stayed open {DEADLINE:.0f} s after it was killed")
        finally:
            if pids_file.exists():
                found = json.loads(pids_file.read_text())
                pids = [*found["workers"], found["server"]]
        assert out.returncode == -signal.SIGKILL and out.stdout == "started\n"
        assert pids and not _wait_gone(pids)
    finally:
        _kill(pids)


def _listening() -> set[tuple[int, str, int]]:
    """The TCP/UDP sockets listening in this process and its children: (pid, address, port)."""
    import psutil

    me = psutil.Process()
    found = set()
    for proc in [me, *me.children(recursive=True)]:
        try:
            found |= {
                (proc.pid, c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet") if c.status == "LISTEN"
            }
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def test_a_local_dask_cluster_listens_on_loopback_only(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed", reason="the Dask executor needs the 'dask' extra")
    pytest.importorskip("psutil", reason="needs psutil to list the cluster's sockets")
    from bioanon.cache import Cache
    from bioanon.executors import DaskExecutor

    monkeypatch.delenv("BIOANON_DASK_HOST", raising=False)
    seen = {}

    class Recording(distributed.LocalCluster):  # the executor's cluster, with what listens once it is up
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.update(sockets=_listening() - before, dashboard=self.dashboard_link, scheduler=self.scheduler_address)

    monkeypatch.setattr(distributed, "LocalCluster", Recording)
    before = _listening()
    DaskExecutor(Cache(tmp_path), jobs=1, progress=False).run([])
    # the scheduler and its dashboard, the worker and its nanny: each with its own port
    assert len(seen["sockets"]) >= 4, seen
    assert {ip for _, ip, _ in seen["sockets"]} == {"127.0.0.1"}, f"a service listens beyond this machine: {seen}"
    assert seen["scheduler"].startswith("tcp://127.0.0.1:") and seen["dashboard"].startswith("http://127.0.0.1:")


def test_dask_host_setting(monkeypatch):
    from bioanon.errors import ConfigError
    from bioanon.executors import dask_host

    monkeypatch.delenv("BIOANON_DASK_HOST", raising=False)
    assert dask_host() == "127.0.0.1"
    monkeypatch.setenv("BIOANON_DASK_HOST", " 0.0.0.0 ")
    assert dask_host() == "0.0.0.0"
    for bad in ("tcp://10.0.0.1:8786", "10.0.0.1:8786", "::1", "a b"):
        monkeypatch.setenv("BIOANON_DASK_HOST", bad)
        with pytest.raises(ConfigError, match="BIOANON_DASK_HOST=.* IPv4 address or a host name"):
            dask_host()
