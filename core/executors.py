"""Executors of the evaluation's task graph.

The plan is a list of :class:`~bioanon.evaluation.tasks.TaskSpec` in dependency order. Tasks exchange cache
keys, never data, so an executor only has to run each task once its dependencies are done. The local executor
runs them on this machine: with ``jobs=1`` here, one after another, with a progress bar per stage; with more
jobs in a pool of worker processes (no server to start) that read the data memory-mapped from the cache. The
Dask executor runs them on a cluster (or on a local one it starts).

Both run every task with the run's :class:`~bioanon.context.RunContext` active. A worker process gets the context
pickled with the task, without its registry and stores: it builds the registry from the installed entry points
(as it always did) and starts with empty stores. A pool worker keeps the context of the run it serves for the
following tasks of that run (its fits and computed arrays are reused), a Dask task starts from an empty one.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import logging
import math
import os
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .allocator import arrow_memory_returned_when_freed, free_memory_returned, large_buffers_returned
from .cache import Cache
from .cache.store import add_checked_tables, checked_tables
from .context import RunContext, active_context
from .errors import BioanonError, ConfigError, TooFewValuesError
from .log import progress_bar

if TYPE_CHECKING:  # types only
    from concurrent.futures import ProcessPoolExecutor

log = logging.getLogger(__name__)


@attrs.define
class ExecutionReport:
    """What an executor did: tasks executed, tasks found complete in the cache, failures, and every record."""

    executed: int = 0
    cached: int = 0
    failed: dict[str, str] = attrs.field(factory=dict)  # task key -> error
    skipped: dict[str, str] = attrs.field(factory=dict)  # task key -> failed dependency
    records: dict[str, Any] = attrs.field(factory=dict)
    by_stage: dict[str, dict[str, float]] = attrs.field(factory=dict)  # counts and "seconds"
    jobs: int = 1  # tasks that could run at once (worker processes; 1: in the calling process)
    #: Each task executed, in the order they finished: ``task`` (its label), ``stage``, ``worker`` (0: the
    #: calling process; 1 .. jobs: the pool's slot that ran it, each slot one worker process), ``start``
    #: (``time.time()``, as the process that ran it read it) and ``seconds``.
    #: Empty for the Dask executor (its dashboard shows where each task ran).
    timeline: list[dict[str, Any]] = attrs.field(factory=list)

    def count(self, stage: str, what: str, seconds: float = 0.0) -> None:
        s = self.by_stage.setdefault(stage, {"executed": 0, "cached": 0, "failed": 0, "seconds": 0.0})
        s[what] += 1
        s["seconds"] = round(s["seconds"] + seconds, 6)

    def ran(self, task: Any, seconds: float, worker: int, end: float | None = None) -> None:
        """Count ``task`` as executed in ``seconds`` on ``worker`` (0: the calling process), ending at ``end``
        (``time.time()``; now when not given), and add it to the :attr:`timeline`."""
        self.executed += 1
        self.count(task.stage, "executed", seconds)
        end = time.time() if end is None else end
        self.timeline.append(
            {"task": task.label, "stage": task.stage, "worker": worker, "start": end - seconds, "seconds": seconds}
        )

    def timeline_since(self, started: float) -> list[dict[str, Any]]:
        """The :attr:`timeline` with each ``start`` in seconds since ``started`` (``time.time()`` of the run's
        start), in the order the tasks started, rounded to milliseconds: what a run folder records."""
        return [
            t | {"start": round(t["start"] - started, 3), "seconds": round(t["seconds"], 3)}
            for t in sorted(self.timeline, key=lambda t: t["start"])
        ]


class TaskFailed(BioanonError):
    """A task of the evaluation failed (the message names the task and the cause)."""


#: The errors that fail only their task (and the tasks that depend on it) when ``keep_going`` is None, the
#: default: a data problem of one setting, such as a part of the split that holds one value of the attribute a
#: protection is fitted to suppress (:class:`~bioanon.errors.TooFewValuesError`). Any other error stops the run.
SETTING_FAILURES: tuple[type[BaseException], ...] = (TooFewValuesError,)


def stops_run(keep_going: bool | None, error: BaseException) -> bool:
    """Whether a task failing with ``error`` stops the run: always with ``keep_going=False``, never with
    ``True``, and with None (the default) unless it is a data problem of the task's setting
    (:data:`SETTING_FAILURES`), which fails that task and what depends on it while the other settings finish."""
    if keep_going is None:
        return not isinstance(error, SETTING_FAILURES)
    return not keep_going


JOBS_ENV = "BIOANON_JOBS"


def resolve_jobs(jobs: int | None = None) -> int:
    """The number of worker processes: ``jobs`` when > 0, else ``$BIOANON_JOBS``, else the usable cores."""
    from .torchutil import cores

    if jobs is not None and jobs > 0:
        return int(jobs)
    env = os.environ.get(JOBS_ENV, "").strip()
    if env:
        if not env.isdigit():
            raise ConfigError(f"{JOBS_ENV}={env!r} is not a number of jobs (a positive integer; 0 = every core)")
        if int(env) > 0:
            return int(env)
    return cores()


MIN_TASKS_PER_WORKER = 4  # below, starting workers (each imports the methods' packages) costs more than it saves


def widest_level(tasks: Sequence[Any]) -> int:
    """The most tasks that can run at once: the largest number of ``tasks`` at one depth of their graph (a
    task's depth is one more than its deepest dependency among ``tasks``)."""
    depth: dict[str, int] = {}
    for t in tasks:  # plan order: dependencies come first
        depth[t.key] = 1 + max((depth[d] for d in t.deps if d in depth), default=0)
    counts: dict[int, int] = {}
    for d in depth.values():
        counts[d] = counts.get(d, 0) + 1
    return max(counts.values(), default=0)


def task_devices(task: Any) -> frozenset[str]:
    """The accelerators (``cuda:N``, ``mps``) the task's methods run on (their ``device`` parameters, resolved
    when the plan was made)."""
    from .evaluation.tasks import method_dicts

    devices = (str(m["params"].get("device", "")) for m in method_dicts(task.args))
    return frozenset(d for d in devices if d.startswith("cuda") or d == "mps")


def reusable_records(cache: Cache, tasks: Sequence[Any]) -> dict[str, Any]:
    """The records of the ``tasks`` that need not run again: cached, with their output tables present; and, for
    a task whose output another task about to run reads, those tables read whole and matching their checksums.
    A record that fails either check is removed with a warning naming its task (see
    :func:`~bioanon.evaluation.tasks.reusable_record`), and its task runs again — which may in turn call for the
    tables of the tasks it depends on to be checked."""
    from .evaluation.tasks import reusable_record

    by_key = {t.key: t for t in tasks}
    records: dict[str, Any] = {}
    for key, t in by_key.items():
        record = reusable_record(cache, t)
        if record is not None:
            records[key] = record
    checked: set[str] = set()
    while True:
        needed = {d for k, t in by_key.items() if k not in records for d in t.deps if d in records} - checked
        if not needed:
            return records
        for key in needed:
            checked.add(key)
            if reusable_record(cache, by_key[key], deep=True, record=records[key]) is None:
                del records[key]


class LocalExecutor:
    """Run tasks on this machine, skipping those already complete in the cache.

    With ``jobs=1`` the tasks run in this process in plan order. With more, ready tasks (their dependencies done)
    run in a pool of ``jobs`` worker processes, each with ``cores // jobs`` threads for numpy, BLAS and torch;
    workers read every table memory-mapped from the cache (the data are never copied per worker) and tasks on
    an accelerator run at most one per device at a time. Tasks that fit the same model on the same data (their
    :attr:`~bioanon.evaluation.tasks.TaskSpec.affinity`) go to one worker where they can, which fits it once.
    Otherwise a free worker starts the ready task expected to take longest (:class:`ExpectedSeconds`, learned
    from the run's finished tasks of the same kind), so that the run does not end with one long task running
    alone while the other workers wait.
    Results are identical to ``jobs=1``: a task's output depends only on its inputs' keys. At most as many
    workers as tasks can run at once (:func:`widest_level`). Runs in this process anyway when methods were
    registered at run time (``register_plugin``: a worker could not find them) or when fewer than
    ``MIN_TASKS_PER_WORKER`` tasks per worker are left to run (starting a worker costs more than it saves).

    Parameters
    ----------
    cache : the cache every task reads and writes.
    keep_going : on a failure, record it, skip the tasks that depend on it, and finish the rest; False: stop at
        any failure; None (default): finish the rest after a data problem of one setting only (:func:`stops_run`).
    progress : show progress (per stage with one job; tasks done / total across workers with more).
    jobs : worker processes (None or 0: ``$BIOANON_JOBS``, else the usable cores).
    context : the run's context (default: the active one, else a fresh one per task).
    preload : modules this process imports on a thread of its own while its workers run the tasks (it only
        waits for them meanwhile): what the caller needs after the tasks (e.g. pandas for the results tables) is
        then ready when they end, not imported on the run's critical path. Not when the tasks run in this
        process (the import would compete with them, and hold its memory during them).
    """

    make_pool = staticmethod(lambda jobs: _pool(jobs))  # (tests run the scheduler on threads)

    def __init__(
        self,
        cache: Cache,
        *,
        keep_going: bool | None = None,
        progress: bool = True,
        jobs: int | None = 1,
        context: RunContext | None = None,
        preload: Sequence[str] = (),
    ):
        self.cache, self.keep_going, self.progress = cache, keep_going, progress
        self.jobs = resolve_jobs(jobs)
        self.context = context
        self.preload = tuple(preload)
        self._idle = IdleCores()

    def _may_use_pool(self, context: RunContext) -> bool:
        """Whether the tasks may run in worker processes at all (more than one job, and methods a worker finds)."""
        return self.jobs > 1 and not _runtime_plugins() and _default_registry(context)

    def start_workers_early(self, least_tasks: int | None = None) -> bool:
        """Call before the work that precedes :meth:`run` (e.g. importing the data): where the tasks may run in
        worker processes, the server they are forked from starts now and imports what they need in the
        background (:func:`start_worker_server`), so that the first task of each worker does not wait for it.

        ``least_tasks``: what the caller knows of the plan to come, the fewest tasks it can have. Too few for
        worker processes (fewer than ``MIN_TASKS_PER_WORKER`` per job: :meth:`run` would run them in this
        process), no server starts: its imports, a second of one core, would only compete with this process's
        (about 0.2-0.5 s of a 3.5 s run of the SEBA-shaped case on two cores). Whether a server was started."""
        if least_tasks is not None and least_tasks < MIN_TASKS_PER_WORKER * min(self.jobs, 2):
            return False
        context = self.context if self.context is not None else (active_context() or RunContext(cache=self.cache))
        return bool(self._may_use_pool(context)) and start_worker_server()

    def run(self, tasks: Sequence[Any]) -> ExecutionReport:
        report = ExecutionReport()
        todo = [t for t in dict((t.key, t) for t in tasks).values()]
        reusable = reusable_records(self.cache, todo)
        left = [t for t in todo if t.key not in reusable]
        jobs = min(self.jobs, widest_level(left))
        context = self.context if self.context is not None else (active_context() or RunContext(cache=self.cache))
        if jobs > 1 and len(left) >= MIN_TASKS_PER_WORKER * jobs and self._may_use_pool(context):
            report.jobs = jobs
            return self._run_pool(todo, report, jobs, context, reusable)
        log.info("running %d task(s) in this process", len(left))
        return self._run_here(tasks, report, context, reusable)

    # -- in this process ------------------------------------------------------------------------------------
    def _run_task_here(self, task: Any, context: RunContext) -> Any:
        """One task in this process, its BLAS on the cores other processes leave idle (:class:`IdleCores`)."""
        from .evaluation.tasks import run_task
        from .payloads import blas_threads
        from .torchutil import cores

        try:
            with blas_threads(self._idle.threads(cores())):
                return run_task(task, self.cache, context)
        finally:
            free_memory_returned()

    def _run_here(
        self, tasks: Sequence[Any], report: ExecutionReport, context: RunContext, reusable: dict[str, Any]
    ) -> ExecutionReport:
        bad: set[str] = set()
        stages: dict[str, list[Any]] = {}
        for t in tasks:
            stages.setdefault(t.stage, []).append(t)
        for stage, group in stages.items():
            log.debug("stage %s: %d task(s)", stage, len(group))
            bar = progress_bar(group, progress=self.progress, desc=f"{stage:>11}", unit="task", leave=True)
            for t in bar:
                missing = [d for d in t.deps if d in bad]
                if missing:
                    bad.add(t.key)
                    report.skipped[t.key] = f"{t.label}: a task it depends on failed"
                    continue
                if t.key in report.records:  # the same task twice in one plan
                    continue
                record = reusable.get(t.key)
                if record is not None:
                    report.cached += 1
                    report.count(stage, "cached")
                else:
                    start = time.perf_counter()
                    try:
                        record = self._run_task_here(t, context)
                    except Exception as exc:  # noqa: BLE001 - reported with the task's name
                        msg = f"{t.label}: {type(exc).__name__}: {exc}"
                        if stops_run(self.keep_going, exc):
                            raise TaskFailed(msg) from exc
                        bad.add(t.key)
                        report.failed[t.key] = msg + "\n" + traceback.format_exc(limit=3)
                        report.count(stage, "failed")
                        continue
                    report.ran(t, time.perf_counter() - start, worker=0)
                report.records[t.key] = record
            bar.close()
        return report

    # -- in a pool of worker processes ----------------------------------------------------------------------
    def _run_pool(
        self, tasks: list[Any], report: ExecutionReport, jobs: int, context: RunContext, reusable: dict[str, Any]
    ) -> ExecutionReport:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        keys = {t.key for t in tasks}
        waiting: dict[str, set[str]] = {}
        dependents: dict[str, list[Any]] = {}
        ready: list[Any] = []  # in the order to start them: the highest rank first, then the first ready
        devices_of: dict[str, frozenset[str]] = {}
        for t in tasks:
            record = reusable.get(t.key)
            if record is not None:
                report.records[t.key] = record
                report.cached += 1
                report.count(t.stage, "cached")
        for t in tasks:
            if t.key in report.records:
                continue
            deps = {d for d in t.deps if d in keys and d not in report.records}
            waiting[t.key] = deps
            devices_of[t.key] = task_devices(t)  # once per task: the scheduler asks at every pick
            for d in deps:
                dependents.setdefault(d, []).append(t)
            if not deps:
                ready.append(t)
        log.info("running %d task(s) on %d worker processes", len(waiting), jobs)
        expected = ExpectedSeconds([t for t in tasks if t.key in waiting], dependents)
        came = {t.key: i for i, t in enumerate(ready)}  # when each task became ready: the order among equals

        def start_order(task: Any) -> tuple[float, int]:
            return -expected.rank(task), came[task.key]

        ready.sort(key=start_order)
        pool = self.make_pool(jobs)
        _import_in_background(self.preload)
        slots = list(pool) if isinstance(pool, list) else [pool] * jobs  # one executor per worker, or a shared one
        told: list[dict[str, Any]] = [{} for _ in range(jobs)]  # the checked tables each worker was given
        env = _bioanon_env()
        running: dict[Any, Any] = {}  # future -> (task, its accelerators, its slot)
        busy: set[str] = set()  # accelerators with a task on them
        owner: dict[str, int] = {}  # affinity -> the slot that ran its first task (it holds the fit)
        bar = progress_bar(total=len(waiting), progress=self.progress, desc="      tasks", unit="task", leave=True)

        def skip(task: Any) -> None:  # its dependency failed: so do its dependents
            report.skipped[task.key] = f"{task.label}: a task it depends on failed"
            bar.update(1)
            for t in dependents.get(task.key, ()):
                if t.key not in report.skipped:
                    skip(t)

        try:
            while ready or running:
                taken = {slot: task for task, _, slot in running.values()}
                for steal in (False, True):  # every free worker picks, then those left with nothing may steal
                    for slot in range(jobs):
                        t = None if slot in taken else _next_task(ready, slot, owner, taken, busy, devices_of, steal)
                        if t is None:
                            continue
                        devices = devices_of[t.key]
                        ready.remove(t)
                        busy |= devices
                        taken[slot] = t
                        if t.affinity:
                            owner.setdefault(t.affinity, slot)
                        with _main_hidden():  # a worker started here must not run the caller's script again
                            news = _news(checked_tables(), told[slot])
                            future = slots[slot].submit(_run_timed, t, self.cache, env, context, news)
                        running[future] = (t, devices, slot)
                if not running:  # only accelerator tasks are ready and their devices are taken: cannot happen
                    raise BioanonError("the local executor has ready tasks it cannot start")  # pragma: no cover
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    t, devices, slot = running.pop(fut)
                    busy -= devices
                    bar.update(1)
                    bar.set_postfix_str(t.stage, refresh=False)
                    try:
                        record, seconds, checked, started = fut.result()
                    except BrokenProcessPool as exc:  # the pool is unusable: stop, whatever keep_going says
                        raise TaskFailed(
                            f"{t.label}: a worker process died while running it (out of memory, or killed); the "
                            f"tasks done so far are cached and the same command resumes — with fewer --jobs if "
                            f"memory ran out"
                        ) from exc
                    except Exception as exc:  # noqa: BLE001 - reported with the task's name
                        msg = f"{t.label}: {type(exc).__name__}: {exc}"
                        if stops_run(self.keep_going, exc):
                            raise TaskFailed(msg) from exc
                        report.failed[t.key] = msg
                        report.count(t.stage, "failed")
                        for d in dependents.get(t.key, ()):
                            if d.key not in report.skipped:  # another failed dependency skipped it already
                                skip(d)
                        continue
                    report.records[t.key] = record
                    report.ran(t, seconds, worker=slot + 1, end=started + seconds)  # the worker's clock
                    version = expected.version
                    expected.learn(t, seconds)
                    if expected.version != version:
                        ready.sort(key=start_order)
                    add_checked_tables(checked)  # the tables it checked: the next tasks need not hash them again
                    for d in dependents.get(t.key, ()):
                        deps = waiting[d.key]
                        deps.discard(t.key)
                        if not deps and d.key not in report.skipped:
                            came[d.key] = len(came)
                            bisect.insort(ready, d, key=start_order)
        except BaseException:
            for fut in running:
                fut.cancel()
            raise
        finally:
            bar.close()
        return report


def _import_in_background(modules: Sequence[str]) -> None:
    """Import ``modules`` on a daemon thread (those not imported yet); a module that fails to import is left for
    its user to meet."""
    import importlib
    import threading

    wanted = [m for m in modules if m not in sys.modules]
    if not wanted:
        return

    def run() -> None:
        for name in wanted:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - whoever needs it imports it again and reports the error
                continue

    threading.Thread(target=run, name="bioanon-preload", daemon=True).start()


#: how far (a share of itself) a kind's mean seconds may move before :class:`ExpectedSeconds` ranks the tasks again
RERANK_SHIFT = 0.2


class ExpectedSeconds:
    """How long each task of a run is expected to take, learned while the run goes, and its rank: the order in
    which a free worker should start the ready tasks, the longest first, so that no long task is left to run
    alone at the end while the other workers sit idle.

    A task is expected to take the mean seconds of the finished tasks of its
    :attr:`~bioanon.evaluation.tasks.TaskSpec.kind` (one recognizer's attack in one scenario costs about the same
    at every setting). Nothing is known of a kind until one of its tasks has finished: such a task ranks first
    (it may be long, and running it early says what its kind costs). A task without a kind is expected to take
    the mean of every finished task. Its rank is that plus the longest chain of expected seconds of the tasks
    that wait for it: a task others depend on starts before an equal one that none does, and a task that one of
    a kind not measured yet waits for ranks first too (tasks ranked alike start in the order they became ready).
    The ranks are worked out again (over the whole plan, backwards: no recursion) only when an estimate is new or has
    moved by more than :data:`RERANK_SHIFT` of itself since they last were, not with every task that finishes:
    :attr:`version` says when.

    Parameters
    ----------
    tasks : the tasks to rank (those left to run), in plan order: each after the tasks it depends on.
    dependents : task key -> the tasks that wait for it.
    """

    def __init__(self, tasks: Sequence[Any], dependents: Mapping[str, Sequence[Any]]) -> None:
        self._dependents = dependents
        self._order = list(reversed(tasks))  # every task after those that wait for it
        self._plain = any(not getattr(t, "kind", "") for t in self._order)  # tasks without a kind: learn the mean
        self._seconds: dict[str, tuple[float, int]] = {}  # kind ("": every task) -> (total seconds, tasks)
        self._ranked_with: dict[str, float] = {}  # kind -> the estimate the ranks were worked out with
        self._ranks: dict[str, float] | None = None
        self.version = 0  # changes whenever the ranks do

    def learn(self, task: Any, seconds: float) -> None:
        """Count ``task`` as done in ``seconds``."""
        changed = False
        own = getattr(task, "kind", "")
        for kind in {own, ""} if self._plain or not own else {own}:
            total, n = self._seconds.get(kind, (0.0, 0))
            total, n = total + float(seconds), n + 1
            self._seconds[kind] = (total, n)
            mean, used = total / n, self._ranked_with.get(kind)
            if used is None or abs(mean - used) > RERANK_SHIFT * max(used, 1e-9):
                self._ranked_with[kind] = mean
                changed = True
        if changed:
            self._ranks = None
            self.version += 1

    def seconds(self, task: Any) -> float:
        """The seconds ``task`` is expected to take (infinite when nothing is known of its kind yet)."""
        total, n = self._seconds.get(getattr(task, "kind", ""), (0.0, 0))
        return total / n if n else math.inf

    def rank(self, task: Any) -> float:
        """The expected seconds of ``task`` and of the longest chain of tasks that wait for it."""
        if self._ranks is None:
            ranks: dict[str, float] = {}
            for t in self._order:
                waiting = self._dependents.get(t.key, ())
                ranks[t.key] = self.seconds(t) + max((ranks.get(d.key, 0.0) for d in waiting), default=0.0)
            self._ranks = ranks
        rank = self._ranks.get(task.key)
        if rank is None:  # not one of the tasks given: ranked now, and kept until the ranks change
            rank = self._ranks[task.key] = self.seconds(task)
        return rank


def _next_task(
    ready: list[Any],
    slot: int,
    owner: Mapping[str, int],
    taken: Mapping[int, Any],
    busy: set[str],
    devices_of: Mapping[str, frozenset[str]],
    steal: bool,
) -> Any:
    """The ready task the free worker ``slot`` runs next (None: none for it now), skipping tasks whose
    accelerators (``devices_of``, by task key) are taken. First a task whose affinity
    (:attr:`~bioanon.evaluation.tasks.TaskSpec.affinity`) this worker owns: its fit is there. Then one without
    affinity, or with a new one. With ``steal`` (once every free worker had its pick), a task another worker
    owns, fitting it again here rather than leaving this worker idle; not when that worker is fitting it now
    (running a task of the same affinity: the fit is ready there soon). Each time the first such task of
    ``ready``, which the pool keeps in the order to start them (:class:`ExpectedSeconds`)."""
    startable = [t for t in ready if not (devices_of[t.key] & busy)]
    for t in startable:
        if t.affinity and owner.get(t.affinity) == slot:
            return t
    for t in startable:
        if not t.affinity or t.affinity not in owner:
            return t
    if steal:
        for t in startable:
            other = taken.get(owner[t.affinity])
            if other is None or other.affinity != t.affinity:
                return t
    return None


def _runtime_plugins() -> bool:
    """Whether this process's methods differ from what a worker would load from the environment: plugins
    registered at run time, or a plugin manager with other switches installed (tests)."""
    from .plugins import PluginManager, get_plugin_manager

    pm, fresh = get_plugin_manager(), PluginManager()
    return bool(pm._extra) or (pm.autoload, pm.disabled, pm.include_builtin) != (
        fresh.autoload,
        fresh.disabled,
        fresh.include_builtin,
    )


def _default_registry(context: RunContext) -> bool:
    """Whether ``context``'s registry is the one a worker builds from the environment (else a worker could not
    find the run's methods: the tasks run in this process)."""
    from .plugins import get_plugin_manager

    return context.registry is get_plugin_manager().registry


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Inside the block, new worker processes (spawn / fork server) do not import the ``__main__`` module: a
    user's script that calls ``bioanon.evaluate`` without an ``if __name__ == "__main__"`` guard would otherwise
    run again in every worker. Workers only need bioanon's own modules."""
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = {
        k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__
    }
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__spec__ = None
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)
            if "__spec__" not in saved:
                main.__dict__.pop("__spec__", None)


def _bioanon_env() -> dict[str, str]:
    """The ``BIOANON_*`` settings of this process (a worker takes them for each task)."""
    return {k: v for k, v in os.environ.items() if k.startswith("BIOANON_") and k != "BIOANON_CORES"}


def _plugin_switches() -> tuple[str, ...]:
    return tuple(
        os.environ.get(k, "")
        for k in ("BIOANON_DISABLE_PLUGINS", "BIOANON_DISABLE_PLUGIN_AUTOLOAD", "BIOANON_STRICT_PLUGINS")
    )


def _run_timed(
    task: Any, cache: Cache, env: Mapping[str, str], context: RunContext, checked: Mapping[str, Any]
) -> tuple[Any, float, dict[str, Any], float]:
    """In a worker: run the task with the caller's ``BIOANON_*`` settings and the run's context; its record,
    seconds, the tables it checked against their checksums, and when it started (``time.time()``: the machine's
    clock, which the worker shares with the caller). The worker keeps the run's context
    (:meth:`RunContext.hold`) for its next tasks of the same run. ``checked``: the tables the run's other processes
    checked (:func:`~bioanon.cache.store.checked_tables`) and it was not told of before, which it reads without
    hashing them again."""
    from .evaluation.tasks import run_task

    before = _plugin_switches()
    for k in [k for k in os.environ if k.startswith("BIOANON_") and k != "BIOANON_CORES"]:
        if k not in env:
            del os.environ[k]
    os.environ.update(env)
    if _plugin_switches() != before:  # plugins enabled or disabled since this worker built its registry
        from .plugins import reset_plugin_manager

        reset_plugin_manager(None)
    add_checked_tables(checked)
    known = checked_tables()
    started, start = time.time(), time.perf_counter()
    try:
        record = run_task(task, cache, context.hold())
    finally:
        free_memory_returned()
    seconds = time.perf_counter() - start
    return record, seconds, _news(checked_tables(), known), started


def _news(checked: Mapping[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``checked`` (tables checked against their checksums) that ``known`` lacks or holds with
    another identity, now added to ``known``: each process is told of a table once, not with every task."""
    news = {path: ident for path, ident in checked.items() if known.get(path) != ident}
    known.update(news)
    return news


_POOLS: dict[tuple[int, int], list[ProcessPoolExecutor]] = {}


def _worker_settings(jobs: int) -> tuple[int, int]:
    from .torchutil import cores

    return jobs, max(1, cores() // jobs)


class IdleCores:
    """How many BLAS threads this process's next task should run: its cores less those other processes have kept
    busy lately (Linux: ``/proc/stat``'s busy time of all cores less this process's own CPU time, since the
    previous call; the first call looks back to when this object was made, at least :data:`FIRST_LOOK_S`, so
    an executor made before the data are read waits for nothing). OpenBLAS threads wait by spinning, so two
    threads on a two-core machine where another process keeps a core busy run the SEBA-shaped case 15-25 % slower
    than one thread (5.2-6.0 s against 4.2-5.1 s), while on a quiet machine the two run alike. Elsewhere, or when
    ``/proc/stat`` cannot be read: every core."""

    #: The shortest look back of the first call (seconds): it waits for the rest when made just before.
    FIRST_LOOK_S = 0.05

    def __init__(self) -> None:
        self._last: tuple[float, float, float] | None = self._sample()
        self._first = True

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        """(wall seconds, busy CPU seconds of the whole machine, this process's CPU seconds), or None."""
        busy = machine_busy_seconds()
        if busy is None:
            return None
        own = os.times()
        return time.monotonic(), busy, own.user + own.system

    def threads(self, cores: int) -> int:
        """``cores`` less the cores other processes kept busy since the last call (at least 1)."""
        now = self._sample()
        first, self._first = self._first, False
        if first and self._last is not None and now is not None and now[0] - self._last[0] < self.FIRST_LOOK_S:
            time.sleep(self.FIRST_LOOK_S - (now[0] - self._last[0]))
            now = self._sample()
        last, self._last = self._last, now
        if now is None or last is None or now[0] - last[0] <= 0:
            return max(1, cores)
        others = max(0.0, (now[1] - last[1]) - (now[2] - last[2])) / (now[0] - last[0])
        return max(1, min(cores, round(cores - others)))


def machine_busy_seconds() -> float | None:
    """The CPU seconds every core of the machine has been busy since boot (Linux: ``/proc/stat``), all processes
    together; None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if len(ticks) < 5 or hz <= 0:
        return None
    # user nice system idle iowait irq softirq steal: idle and iowait are the idle time
    return (sum(ticks) - ticks[3] - ticks[4]) / hz


def _init_worker(threads: int) -> None:
    """A worker's share of the machine: ``threads`` for numpy/BLAS (threadpoolctl), torch and ``threads=0``; its
    Arrow buffers and large ones given back when freed (:func:`arrow_memory_returned_when_freed`,
    :func:`large_buffers_returned`); and its life bound to the
    process that made the pool (:func:`_die_with_parent`)."""
    _die_with_parent()
    arrow_memory_returned_when_freed()
    large_buffers_returned()
    os.environ["BIOANON_CORES"] = str(threads)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    try:
        from threadpoolctl import threadpool_limits

        global _LIMITS
        _LIMITS = threadpool_limits(threads)
    except ImportError:  # pragma: no cover - scikit-learn brings it
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


_LIMITS: Any = None


def _die_with_parent() -> None:
    """In a pool worker: exit as soon as the process that made the pool dies, even by SIGKILL, so that no worker
    (nor the fork server) outlives a killed run, holding memory and the run's stdout/stderr open.

    Everywhere: a daemon thread blocks on the parent's sentinel (a pipe the parent holds open, or its process
    handle on Windows) and ends the worker when it is ready, i.e. when the parent is gone. Linux, workers of the
    fork server: the worker also gives back its copy of the fork server's "alive" pipe, so that the fork server
    exits as soon as the parent does (not only once every worker did), and asks the kernel to SIGKILL the worker
    when the fork server goes (``PR_SET_PDEATHSIG``): a worker busy in native code that holds the interpreter
    lock still dies at once."""
    import multiprocessing
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:  # not a child process
        return
    if sys.platform.startswith("linux") and _leave_fork_server():
        _kill_on_parent_death()

    def watch() -> None:
        parent.join()  # returns when the parent has died (a pool's workers end before it closes its end)
        os._exit(1)

    threading.Thread(target=watch, name="bioanon-parent-watchdog", daemon=True).start()


def _leave_fork_server() -> bool:
    """In a worker started by the fork server: close its copy of the server's "alive" pipe (which otherwise keeps
    the server running while the worker lives, and the worker while the server lives); whether it did. A process
    the worker starts itself with a fork server gets its own server."""
    try:
        from multiprocessing import forkserver

        server: Any = forkserver._forkserver  # private: its fds are not a public API
        with server._lock:
            fd = server._forkserver_alive_fd
            if server.get_inherited_fds() is None or server._forkserver_pid is not None or fd is None:
                return False  # not a worker of a fork server (or one this Python version lays out otherwise)
            os.close(fd)
            server._forkserver_alive_fd = None
            server._forkserver_address = None
        return True
    except (AttributeError, ImportError, OSError):  # pragma: no cover - other Python versions
        return False


def _kill_on_parent_death() -> None:
    """Linux: the kernel SIGKILLs this process when its parent (here the single-threaded fork server) dies."""
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # pragma: no cover - no prctl: the watchdog thread still ends the worker
        return
    if os.getppid() != parent:  # the parent died before the request: nobody will send the signal
        os._exit(1)


def _worker_context() -> Any:
    """The multiprocessing context of the pool's workers: a fork server that has imported what a worker needs
    (:mod:`bioanon.worker_preload`) where the platform has one, else spawn."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["bioanon.worker_preload"])  # takes effect when the server starts
    return ctx


def start_worker_server() -> bool:
    """Start the fork server the pool's workers are forked from, if it is not running, and return at once: it
    imports what a worker needs (:mod:`bioanon.worker_preload`, about a second of one core) in the background,
    while this process goes on, e.g. importing the run's data. Whether a server is (now) running: False where the
    platform has none (workers are spawned and import for themselves)."""
    import multiprocessing
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    _worker_context()
    forkserver.ensure_running()
    return True


def _pool(jobs: int) -> list[ProcessPoolExecutor]:
    """``jobs`` worker processes, each its own single-worker pool (so that the scheduler chooses which worker
    runs a task: :func:`_next_task`), kept for the next run with the same settings (their workers have the
    packages imported already). Workers start from a fork server with what they need imported (no copy of this
    process's memory, no threads inherited)."""
    from concurrent.futures import ProcessPoolExecutor

    settings = _worker_settings(jobs)
    pools = _POOLS.get(settings)
    if pools is not None and not any(getattr(p, "_broken", False) for p in pools):
        return pools
    _close_pools()
    ctx = _worker_context()
    pools = [
        ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_init_worker, initargs=settings[1:])
        for _ in range(jobs)
    ]
    _POOLS[settings] = pools
    return pools


@atexit.register
def _close_pools() -> None:
    for pools in _POOLS.values():
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
    _POOLS.clear()


def dask_host() -> str:
    """The address a local Dask cluster listens on, for every service (scheduler, workers, nannies, dashboard):
    ``$BIOANON_DASK_HOST`` (e.g. ``0.0.0.0`` to reach them from other machines), else ``127.0.0.1`` (this machine
    only)."""
    host = os.environ.get("BIOANON_DASK_HOST", "").strip() or "127.0.0.1"
    if ":" in host or "/" in host or any(c.isspace() for c in host):
        raise ConfigError(
            f"BIOANON_DASK_HOST={host!r} is not an address for the local Dask cluster: give an IPv4 address or a "
            "host name without port or scheme (e.g. 127.0.0.1, the default, or 0.0.0.0 for every interface)"
        )
    return host


def local_dask_cluster(n_workers: int) -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes, every service (the
    dashboard included, on a free port) bound to :func:`dask_host`."""
    from distributed import LocalCluster

    host = dask_host()
    return LocalCluster(  # type: ignore[no-untyped-call]  # distributed has no annotations
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host=host,
        dashboard_address=f"{host}:0",
        silence_logs=40,
    )


def _run_on_worker(task: Any, cache: Cache, context: RunContext | None, *dependencies: Any) -> Any:
    """Executed on a Dask worker: the dependencies' records are only awaited, data comes from the cache; the
    task runs with the run's context (rebuilt on the worker, empty stores)."""
    from .evaluation.tasks import run_task

    return run_task(task, cache, context)


class DaskExecutor:
    """Run the task graph on a ``dask.distributed`` cluster.

    Each task is submitted with its dependencies' futures; a worker runs it against the shared cache (a local
    directory every worker reaches, or an object store through ``pyarrow.fs``), so workers exchange
    fingerprints, never data. A task that was running on a worker that died is rescheduled by the scheduler;
    a task that raises is retried ``retries`` times. Results are identical to the local executor's.

    Parameters
    ----------
    cache : the shared cache (its root must be reachable from every worker).
    scheduler : the scheduler address (``tcp://host:8786``); or pass ``client``. With neither, a local cluster
        of ``jobs`` single-threaded worker processes is started for the run and closed after it (as Dask's own
        ``Client()`` does), every service of it, the dashboard included, on 127.0.0.1 unless
        ``$BIOANON_DASK_HOST`` names another address (:func:`local_dask_cluster`).
    client : an existing ``distributed.Client``.
    keep_going, progress : as for :class:`LocalExecutor`.
    retries : retries of a task that raised.
    jobs : workers of the local cluster (None or 0: ``$BIOANON_JOBS``, else the usable cores).
    context : the run's context (default: the active one); its registry must be the one the workers build from
        their installed entry points.
    """

    def __init__(
        self,
        cache: Cache,
        *,
        scheduler: str | None = None,
        client: Any = None,
        keep_going: bool | None = None,
        progress: bool = True,
        retries: int = 1,
        jobs: int | None = None,
        context: RunContext | None = None,
    ):
        self.cache, self.scheduler, self.client = cache, scheduler, client
        self.keep_going, self.progress, self.retries = keep_going, progress, retries
        self.jobs = jobs
        self.context = context

    def run(self, tasks: Sequence[Any]) -> ExecutionReport:
        try:
            from distributed import Client, as_completed
        except ImportError as exc:  # pragma: no cover - dask is an optional extra
            raise BioanonError("the Dask executor needs `pip install 'bioanon[dask]'`") from exc

        context = self.context if self.context is not None else active_context()
        cluster = None
        if self.client is not None:
            client = self.client
        elif self.scheduler is not None:
            client = Client(self.scheduler)  # type: ignore[no-untyped-call]  # distributed has no annotations
        else:  # a local cluster for this run
            cluster = local_dask_cluster(resolve_jobs(self.jobs))
            client = Client(cluster)  # type: ignore[no-untyped-call]
        report = ExecutionReport(
            jobs=sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values()) or 1
        )
        try:
            futures: dict[str, Any] = {}
            labels: dict[str, Any] = {}
            by_key = {t.key: t for t in tasks}
            erred: dict[str, str] = {}
            pending = []
            reusable = reusable_records(self.cache, tasks)
            # a task's Dask key names the cache it writes to: the same task of a run on another cache (whose
            # future a shared client may still hold) must run again, not hand back the other cache's record
            from .cache import fingerprint

            where = fingerprint(self.cache.uri)[:12]
            for t in tasks:
                if t.key in futures:
                    continue
                if t.key in reusable:
                    report.cached += 1
                    report.count(t.stage, "cached")
                    report.records[t.key] = reusable[t.key]
                    continue
                deps = [futures[d] for d in t.deps if d in futures]
                fut = client.submit(
                    _run_on_worker,
                    t,
                    self.cache,
                    context,
                    *deps,
                    key=f"bioanon-{t.stage}-{t.key}-{where}",
                    retries=self.retries,
                    pure=False,
                )
                futures[t.key], labels[fut.key] = fut, t
                pending.append(fut)
            log.info("running %d task(s) on a Dask cluster of %d worker thread(s)", len(pending), report.jobs)
            bar = progress_bar(total=len(pending), progress=self.progress, desc="   tasks", unit="task")
            for fut in as_completed(pending):  # type: ignore[no-untyped-call]  # distributed has no annotations
                t = labels[fut.key]
                bar.update(1)
                # a future can be yielded in a transient state when its worker died (its task is then
                # rescheduled), so wait for the outcome instead of reading ``status``
                try:
                    record = fut.result()
                except Exception as error:  # noqa: BLE001 - reported with the task's label
                    failure = error
                else:
                    report.records[t.key] = record
                    report.executed += 1
                    report.count(t.stage, "executed")
                    continue
                if stops_run(self.keep_going, failure):
                    for f in pending:
                        f.cancel()
                    raise TaskFailed(f"{t.label}: {type(failure).__name__}: {failure}") from failure
                erred[t.key] = f"{t.label}: {type(failure).__name__}: {failure}"
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
            if cluster is not None:
                cluster.close()
        return report
