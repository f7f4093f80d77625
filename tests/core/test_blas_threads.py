"""BLAS threads on the hot path (issue 29): ``blas_threads`` limits every loaded BLAS to one thread inside its
block and restores the limits after it; a local pool's workers get ``cores // jobs`` threads (at least one)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg  # noqa: F401 - SciPy's own OpenBLAS is loaded, so the check covers both libraries
from threadpoolctl import threadpool_info, threadpool_limits

from bioanon.api import blas_threads


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_blas_threads_limits_every_blas_library_and_restores_the_limits():
    assert _blas_threads(), "no BLAS library found by threadpoolctl"
    # start from two threads (on any machine, a one-core one included): the limit to one must be visible
    with threadpool_limits(2, user_api="blas"):
        assert set(_blas_threads()) == {2}
        with blas_threads():
            assert set(_blas_threads()) == {1}
            np.linalg.eigh(np.eye(3)[None].repeat(4, axis=0))  # works inside the block
        assert set(_blas_threads()) == {2}  # restored
        with blas_threads(1), pytest.raises(ZeroDivisionError):
            1 / 0  # noqa: B018
        assert set(_blas_threads()) == {2}  # restored after an exception too


@pytest.mark.slow
def test_pool_workers_get_their_share_of_the_cores(monkeypatch):
    """Two workers sharing a budget of two cores: one thread each for BLAS and OpenMP, ``$BIOANON_CORES=1``
    (torch and the methods' ``threads=0`` follow it); libraries loaded later read the same limit from the
    environment (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``)."""
    from bioanon.executors import _pool, _worker_settings

    monkeypatch.setenv("BIOANON_CORES", "2")
    assert _worker_settings(2) == (2, 1) and _worker_settings(3) == (3, 1) and _worker_settings(1) == (1, 2)
    workers = _pool(2)
    assert len(workers) == 2
    infos = [f.result(timeout=120) for f in [w.submit(threadpool_info) for w in workers]]
    envs = [f.result(timeout=120) for f in [w.submit(os.getenv, "BIOANON_CORES") for w in workers]]
    threads = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}
    limits = [f.result(timeout=120) for f in [w.submit(os.getenv, name) for w in workers for name in sorted(threads)]]
    assert all(info for info in infos) and {lib["num_threads"] for info in infos for lib in info} == {1}
    assert set(envs) == {"1"} and set(limits) == {"1"}


def test_idle_cores_leaves_out_the_cores_other_processes_keep_busy(monkeypatch):
    """The in-process runner's BLAS threads: the cores less those other processes kept busy since the last look
    (this process's own CPU time does not count against it), at least one; every core where it cannot look."""
    from bioanon.executors import IdleCores

    samples = iter(
        [
            (0.0, 10.0, 1.0),  # (wall s, busy CPU s of the machine, own CPU s)
            (1.0, 11.0, 1.0),  # another process kept one core busy for the second
            (2.0, 12.0, 2.0),  # only this process was busy
            (3.0, 16.0, 2.0),  # four cores' worth busy elsewhere
            None,  # /proc/stat unreadable
        ]
    )
    monkeypatch.setattr(IdleCores, "_sample", staticmethod(lambda: next(samples)))
    idle = IdleCores()
    assert idle.threads(2) == 1
    assert idle.threads(2) == 2
    assert idle.threads(2) == 1
    assert idle.threads(4) == 4


def test_idle_cores_first_look_waits_only_for_what_is_left(monkeypatch):
    """The first call looks back to when the object was made: made long enough before (as an executor is before
    the data are read), nothing waits; made just before, the call waits only for the rest of FIRST_LOOK_S."""
    from bioanon import executors
    from bioanon.executors import IdleCores

    slept: list[float] = []
    monkeypatch.setattr(executors.time, "sleep", slept.append)
    samples = iter([(0.0, 10.0, 1.0), (2.0, 12.0, 1.0), (2.01, 12.0, 1.0)])
    monkeypatch.setattr(IdleCores, "_sample", staticmethod(lambda: next(samples)))
    idle = IdleCores()
    assert idle.threads(2) == 1 and slept == []  # two seconds since it was made: one core kept busy elsewhere
    assert idle.threads(2) == 2 and slept == []  # a later call never waits, however short its window

    samples = iter([(0.0, 10.0, 1.0), (0.01, 10.0, 1.0), (0.05, 10.0, 1.0)])
    idle = IdleCores()
    assert idle.threads(2) == 2
    assert slept == [pytest.approx(IdleCores.FIRST_LOOK_S - 0.01)]


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_idle_cores_sees_a_busy_process():
    import subprocess
    import sys
    import time

    from bioanon.executors import IdleCores

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        stat = Path(f"/proc/{busy.pid}/stat")
        while int(stat.read_text().rsplit(")", 1)[1].split()[11]) < 5:  # utime: it has started spinning
            time.sleep(0.01)
        idle = IdleCores()
        idle.threads(2)
        time.sleep(0.3)
        assert idle.threads(2) == 1  # one of two cores taken by the busy process
    finally:
        busy.kill()
        busy.wait()


def test_machine_busy_seconds_counts_this_process_cpu():
    from bioanon.executors import machine_busy_seconds

    if machine_busy_seconds() is None:
        pytest.skip("no /proc/stat here")
    start_busy, start_own = machine_busy_seconds(), sum(os.times()[:2])
    x = np.ones(10_000)
    while sum(os.times()[:2]) - start_own < 0.3:  # spin until this process has used 0.3 s of CPU
        x = np.sqrt(x + 1.0)
    own = sum(os.times()[:2]) - start_own
    busy = machine_busy_seconds() - start_busy
    assert busy >= own - 0.05  # every process's busy time, ours among it (ticks of 10 ms)
