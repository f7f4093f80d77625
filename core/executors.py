"""Executors of the evaluation's task graph.

The plan is a list of :class:`~bioanon.evaluation.tasks.TaskSpec` in dependency order. Tasks exchange cache
keys, never data, so an executor only has to run each task once its dependencies are done. The local executor
runs them here, one after another, with a progress bar per stage.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import attrs

from .cache import Cache
from .errors import BioanonError


@attrs.define
class ExecutionReport:
    """What an executor did: tasks executed, tasks found complete in the cache, failures, and every record."""

    executed: int = 0
    cached: int = 0
    failed: dict[str, str] = attrs.field(factory=dict)  # task key -> error
    skipped: dict[str, str] = attrs.field(factory=dict)  # task key -> failed dependency
    records: dict[str, Any] = attrs.field(factory=dict)
    by_stage: dict[str, dict[str, int]] = attrs.field(factory=dict)

    def count(self, stage: str, what: str, seconds: float = 0.0) -> None:
        s = self.by_stage.setdefault(stage, {"executed": 0, "cached": 0, "failed": 0, "seconds": 0.0})
        s[what] += 1
        s["seconds"] = round(s["seconds"] + seconds, 6)


class TaskFailed(BioanonError):
    """A task of the evaluation failed (the message names the task and the cause)."""


class LocalExecutor:
    """Run tasks in this process, in plan order, skipping those already complete in the cache.

    Parameters
    ----------
    cache : the cache every task reads and writes.
    keep_going : on a failure, record it, skip the tasks that depend on it, and finish the rest.
    progress : show a progress bar per stage (on stderr).
    """

    def __init__(self, cache: Cache, *, keep_going: bool = False, progress: bool = True):
        self.cache, self.keep_going, self.progress = cache, keep_going, progress

    def run(self, tasks: Sequence[Any]) -> ExecutionReport:
        from tqdm.auto import tqdm

        from .evaluation.tasks import run_task

        report = ExecutionReport()
        bad: set[str] = set()
        stages: dict[str, list[Any]] = {}
        for t in tasks:
            stages.setdefault(t.stage, []).append(t)
        for stage, group in stages.items():
            bar = tqdm(group, desc=f"{stage:>11}", unit="task", disable=not self.progress, file=sys.stderr,
                       leave=True, dynamic_ncols=True)
            for t in bar:
                missing = [d for d in t.deps if d in bad]
                if missing:
                    bad.add(t.key)
                    report.skipped[t.key] = f"{t.label}: a task it depends on failed"
                    continue
                if t.key in report.records:  # the same task twice in one plan
                    continue
                record = self.cache.get_json(t.key)
                if record is not None:
                    report.cached += 1
                    report.count(stage, "cached")
                else:
                    start = time.perf_counter()
                    try:
                        record = run_task(t, self.cache)
                    except Exception as exc:  # noqa: BLE001 - reported with the task's name
                        msg = f"{t.label}: {type(exc).__name__}: {exc}"
                        if not self.keep_going:
                            raise TaskFailed(msg) from exc
                        bad.add(t.key)
                        report.failed[t.key] = msg + "\n" + traceback.format_exc(limit=3)
                        report.count(stage, "failed")
                        continue
                    report.executed += 1
                    report.count(stage, "executed", time.perf_counter() - start)
                report.records[t.key] = record
            bar.close()
        return report


def _run_on_worker(task: Any, cache: Cache, *dependencies: Any) -> Any:
    """Executed on a Dask worker: the dependencies' records are only awaited, data comes from the cache."""
    from .evaluation.tasks import run_task

    return run_task(task, cache)


class DaskExecutor:
    """Run the task graph on a ``dask.distributed`` cluster.

    Each task is submitted with its dependencies' futures; a worker runs it against the shared cache (a local
    directory every worker reaches, or an object store through ``pyarrow.fs``), so workers exchange
    fingerprints, never data. A task that was running on a worker that died is rescheduled by the scheduler;
    a task that raises is retried ``retries`` times. Results are identical to the local executor's.

    Parameters
    ----------
    cache : the shared cache (its root must be reachable from every worker).
    scheduler : the scheduler address (``tcp://host:8786``); or pass ``client``.
    client : an existing ``distributed.Client``.
    keep_going, progress : as for :class:`LocalExecutor`.
    retries : retries of a task that raised.
    """

    def __init__(self, cache: Cache, *, scheduler: str | None = None, client: Any = None, keep_going: bool = False,
                 progress: bool = True, retries: int = 1):
        if scheduler is None and client is None:
            raise BioanonError("the Dask executor needs a scheduler address (--scheduler tcp://HOST:8786)")
        self.cache, self.scheduler, self.client = cache, scheduler, client
        self.keep_going, self.progress, self.retries = keep_going, progress, retries

    def run(self, tasks: Sequence[Any]) -> ExecutionReport:
        try:
            from distributed import Client, as_completed
        except ImportError as exc:  # pragma: no cover - dask is an optional extra
            raise BioanonError("the Dask executor needs `pip install 'bioanon[dask]'`") from exc
        from tqdm.auto import tqdm

        client = self.client or Client(self.scheduler)
        report = ExecutionReport()
        try:
            futures: dict[str, Any] = {}
            labels: dict[str, Any] = {}
            by_key = {t.key: t for t in tasks}
            erred: dict[str, str] = {}
            pending = []
            for t in tasks:
                if t.key in futures:
                    continue
                if self.cache.has_json(t.key):
                    report.cached += 1
                    report.count(t.stage, "cached")
                    report.records[t.key] = self.cache.get_json(t.key)
                    continue
                deps = [futures[d] for d in t.deps if d in futures]
                fut = client.submit(_run_on_worker, t, self.cache, *deps, key=f"bioanon-{t.stage}-{t.key}",
                                    retries=self.retries, pure=False)
                futures[t.key], labels[fut.key] = fut, t
                pending.append(fut)
            bar = tqdm(total=len(pending), desc="   tasks", unit="task", disable=not self.progress, file=sys.stderr)
            for fut in as_completed(pending):
                t = labels[fut.key]
                bar.update(1)
                # a future can be yielded in a transient state when its worker died (its task is then
                # rescheduled), so wait for the outcome instead of reading ``status``
                try:
                    record = fut.result()
                except Exception as error:  # noqa: BLE001 - reported with the task's label
                    exc = error
                else:
                    report.records[t.key] = record
                    report.executed += 1
                    report.count(t.stage, "executed")
                    continue
                if not self.keep_going:
                    for f in pending:
                        f.cancel()
                    raise TaskFailed(f"{t.label}: {type(exc).__name__}: {exc}") from exc
                erred[t.key] = f"{t.label}: {type(exc).__name__}: {exc}"
            # a task whose dependency failed errs with the dependency's exception: report it as skipped
            for key, msg in erred.items():
                task = by_key[key]
                if any(d in erred for d in task.deps):
                    report.skipped[key] = f"{task.label}: a task it depends on failed"
                else:
                    report.failed[key] = msg
                    report.count(task.stage, "failed")
            bar.close()
        finally:
            if self.client is None:
                client.close()
        return report
