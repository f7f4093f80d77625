"""A stored table's bytes are checked against its checksum once per run, not once per process and task: a read
records its use without giving the file a new identity every time (which made every other worker of the run hash
the table again), and the local executor's workers share the tables they checked with the run's other processes."""

from __future__ import annotations

import contextvars
import os
import time

import numpy as np
import pyarrow as pa
import pytest

import bioanon.cache.store as store
from bioanon.cache import Cache, CacheWarning
from bioanon.cache.store import TOUCH_EVERY_NS, add_checked_tables, checked_tables

KEY = "cd" * 16


def _table(n: int = 300) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({"x": rng.standard_normal(n), "y": np.arange(n)})


@pytest.fixture
def hashes(monkeypatch):
    """How many times a table's bytes were hashed (reads and writes)."""
    calls = []
    real = store._sha256_stream

    def counted(f):
        calls.append(1)
        return real(f)

    monkeypatch.setattr(store, "_sha256_stream", counted)
    return calls


def _forget_checked(path: str) -> None:
    """As in a process that never read the table."""
    with store._VERIFIED_LOCK:
        store._VERIFIED.pop(path, None)


def test_reading_a_fresh_entry_keeps_its_time_and_an_old_one_gets_a_new_one(tmp_path):
    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    path = cache.table_path(KEY)
    before = os.stat(path).st_mtime_ns
    assert cache.get_table(KEY) is not None
    assert os.stat(path).st_mtime_ns == before  # written just now: its identity stays
    old = time.time_ns() - 2 * TOUCH_EVERY_NS
    os.utime(path, ns=(old, old))
    assert cache.get_table(KEY) is not None
    assert os.stat(path).st_mtime_ns > old + TOUCH_EVERY_NS  # a use recorded: eviction sees it as new


def test_a_table_another_process_checked_is_read_without_hashing_it_again(tmp_path, hashes):
    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    path = cache.table_path(KEY)
    _forget_checked(path)
    hashes.clear()
    assert cache.get_table(KEY) is not None
    assert len(hashes) == 1  # checked on the first read
    assert path in checked_tables()
    shared = checked_tables()
    _forget_checked(path)  # another process of the run, which is given what this one checked
    add_checked_tables(shared)
    assert cache.get_table(KEY) is not None
    assert len(hashes) == 1
    # a file with another identity (rewritten, touched) is checked again
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    assert cache.get_table(KEY) is not None
    assert len(hashes) == 2


def test_a_damaged_table_is_still_found_when_another_process_checked_it_before(tmp_path):
    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    path = cache.table_path(KEY)
    _forget_checked(path)
    assert cache.get_table(KEY) is not None
    shared = checked_tables()
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    st = os.stat(path)
    with open(path, "wb") as f:
        f.write(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a write gives the file a new time
    _forget_checked(path)
    add_checked_tables(shared)
    with pytest.warns(CacheWarning, match="do not match its checksum"):
        assert cache.get_table(KEY) is None


def test_a_pool_task_reports_the_tables_it_checked_and_takes_those_the_run_checked(tmp_path, monkeypatch, hashes):
    import bioanon.evaluation.tasks as tasks_module
    from bioanon.context import RunContext
    from bioanon.executors import _bioanon_env, _run_timed

    cache = Cache(tmp_path)
    cache.put_table(KEY, _table())
    other = "ef" * 16
    cache.put_table(other, _table(50))
    for key in (KEY, other):
        _forget_checked(cache.table_path(key))
    assert cache.get_table(other) is not None  # checked by "the parent"
    given = {cache.table_path(other): checked_tables()[cache.table_path(other)]}
    _forget_checked(cache.table_path(other))
    hashes.clear()

    def reads_both(task, cache_, context=None):
        assert cache_.get_table(KEY) is not None and cache_.get_table(other) is not None
        return {"done": True}

    monkeypatch.setattr(tasks_module, "run_task", reads_both)
    # in a context of its own: a worker holds the run's context (RunContext.hold), which must not outlive the test
    run = contextvars.copy_context().run
    before = time.time()
    record, seconds, checked, started = run(_run_timed, None, cache, _bioanon_env(), RunContext(cache=cache), given)
    assert record == {"done": True} and seconds >= 0 and before <= started <= time.time()
    assert len(hashes) == 1  # only the table nobody had checked
    assert set(checked) == {cache.table_path(KEY)}  # what it checked itself goes back to the parent


def test_each_worker_is_told_of_a_checked_table_once_not_with_every_task(tmp_path, monkeypatch):
    """The run's checked tables travel to a worker as news: a table once, not the whole list with every task (with
    thousands of shard tasks and tables, that grew with tasks × tables)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import bioanon.executors as ex
    from bioanon.evaluation.tasks import TaskSpec
    from bioanon.executors import LocalExecutor

    given: dict[str, list[str]] = {}
    lock = threading.Lock()

    def fake_run(task, cache, env, context, checked):
        with lock:
            given.setdefault(threading.current_thread().name.split("_")[0], []).extend(checked)
        path = f"/nowhere/{task.label}.arrow"
        return {"done": task.label}, 0.0, {path: (1, 2, 3)}, time.time()  # each "checked" a table of its own

    monkeypatch.setattr(ex, "_run_timed", fake_run)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    with store._VERIFIED_LOCK:
        saved = dict(store._VERIFIED)
    try:
        tasks = [TaskSpec(f"{i:032x}", "noop", {"i": i}, (), "stage", f"t{i}") for i in range(40)]
        executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2)
        executor.make_pool = lambda jobs: [ThreadPoolExecutor(1, thread_name_prefix=f"slot{j}") for j in range(jobs)]
        assert executor.run(tasks).executed == 40
    finally:
        with store._VERIFIED_LOCK:
            store._VERIFIED.clear()
            store._VERIFIED.update(saved)
    assert set(given) == {"slot0", "slot1"}
    for paths in given.values():
        assert len(paths) == len(set(paths))  # never told twice
    assert any("/nowhere/" in p for paths in given.values() for p in paths)  # the other worker's tables reach it
