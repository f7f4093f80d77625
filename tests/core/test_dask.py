"""The Dask executor on a LocalCluster with 2 workers: identical results, a killed worker, failures."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import bioanon
from bioanon.cache import Cache

distributed = pytest.importorskip("distributed", reason="the Dask executor needs the 'dask' extra")

from evalconfigs import SMALL, config  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40) as lc,
        Client(lc) as client,
    ):
        yield lc, client


def _cfg():
    cfg = config(**SMALL)
    cfg["anonymizers"] = [
        {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0, 2.0, 3.0]}},
        {"id": "any.block_permutation", "name": "perm"},
    ]
    return cfg


def test_dask_results_identical_to_local(cluster, tmp_path):
    _, client = cluster
    local = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "local", progress=False)
    dask = bioanon.evaluate(
        _cfg(), out_dir=None, cache=Cache(tmp_path / "dask"), progress=False, executor="dask", scheduler=client
    )
    assert dask.executed == local.executed and dask.cached == 0
    assert dask.metrics.equals(local.metrics)
    assert dask.auc.equals(local.auc)
    again = bioanon.evaluate(
        _cfg(), out_dir=None, cache=Cache(tmp_path / "dask"), progress=False, executor="dask", scheduler=client
    )
    assert again.executed == 0 and again.metrics.equals(local.metrics)


def test_killed_worker_task_is_retried_elsewhere(cluster, tmp_path):
    lc, client = cluster
    local = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "local", progress=False)

    def kill_when_running(victim: int, cache: Cache, killed: threading.Event, finished: threading.Event) -> None:
        """Kill ``victim`` once tasks are running and some results are cached; give up when ``finished``."""
        deadline = time.time() + 60
        while time.time() < deadline and not finished.is_set():
            try:
                running = any(client.processing().values())
            except OSError:  # the scheduler did not answer in time (a loaded machine): ask again
                continue
            if running and cache.info().n_json >= 3:
                os.kill(victim, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.005)

    for attempt in range(3):  # the kill must land while tasks are running; a run that finishes first retries
        client.wait_for_workers(2, timeout=60)
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        cache = Cache(tmp_path / f"dask{attempt}")
        killed, finished = threading.Event(), threading.Event()
        killer = threading.Thread(target=kill_when_running, args=(victim, cache, killed, finished), daemon=True)
        killer.start()
        result = bioanon.evaluate(_cfg(), out_dir=None, cache=cache, progress=False, executor="dask", scheduler=client)
        finished.set()
        killer.join(timeout=70)
        assert result.metrics.equals(local.metrics)
        if killed.is_set():
            break
    assert killed.is_set(), "the worker was never killed while tasks were running"
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()


def test_dask_keep_going_reports_failures(cluster, tmp_path, monkeypatch):
    from bioanon.builtin.datasets import SyntheticFeatures

    # a source that does not declare its attribute columns: the missing attribute fails in the workers
    monkeypatch.setattr(SyntheticFeatures, "attribute_names", None)
    _, client = cluster
    cfg = _cfg()
    cfg["recognizers"] = [{"id": "any.cosine_centroid"}, {"id": "any.pca_svm", "params": {"kernel": "rbf"}}]
    # a selection larger than one class's data cannot fail here; use an attribute absent from the data instead
    cfg["utility"] = [{"id": "any.attribute_accuracy", "params": {"attribute": "no_such_attribute"}}]
    with pytest.raises(bioanon.BioanonError, match="no_such_attribute"):
        bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "a", progress=False, executor="dask", scheduler=client)
    r = bioanon.evaluate(
        cfg, out_dir=None, cache=tmp_path / "b", progress=False, executor="dask", scheduler=client, keep_going=True
    )
    assert len(r.failures) == 5 and all("no_such_attribute" in f["error"] for f in r.failures)
    assert not r.metrics.empty


def test_dask_without_a_scheduler_starts_a_local_cluster(tmp_path, monkeypatch):
    from threadpoolctl import threadpool_limits

    monkeypatch.setenv("BIOANON_CORES", "1")  # one thread, as each single-threaded Dask worker: equal results
    with threadpool_limits(1):
        local = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "local", progress=False, jobs=1)
    monkeypatch.delenv("BIOANON_CORES")
    dask = bioanon.evaluate(
        _cfg(), out_dir=tmp_path / "out", cache=tmp_path / "dask", progress=False, executor="dask", jobs=2, report=False
    )
    assert dask.executed == local.executed and dask.metrics.equals(local.metrics)
    import json

    assert json.loads((dask.run_dir / "environment.json").read_text())["jobs"] == 2
