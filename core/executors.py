"""Executors of the evaluation's task graph.

The plan is a list of :class:`~bioanon.evaluation.tasks.TaskSpec` in dependency order. Tasks exchange cache
keys, never data, so an executor only has to run each task once its dependencies are done. The local executor
runs them here, one after another, with a progress bar per stage.
"""

from __future__ import annotations

import sys
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

    def count(self, stage: str, what: str) -> None:
        s = self.by_stage.setdefault(stage, {"executed": 0, "cached": 0, "failed": 0})
        s[what] += 1


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
                    report.count(stage, "executed")
                report.records[t.key] = record
            bar.close()
        return report
