"""The local executor's worker pool (issue 16): results identical to one job and to Dask, warm reruns, failures,
accelerator tasks one per device, and the cases that run in the calling process."""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.evaluation.config import load_config
from bioanon.evaluation.tasks import TaskSpec
from bioanon.executors import LocalExecutor, resolve_jobs, task_devices

pytestmark = pytest.mark.slow


def _cfg():
    cfg = config(**SMALL)
    cfg["anonymizers"] = [
        {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0, 2.0, 3.0]}},
        {"id": "any.block_permutation", "name": "perm"},
    ]
    return cfg


def test_two_jobs_give_the_results_of_one(tmp_path, monkeypatch):
    from threadpoolctl import threadpool_limits

    # one thread per process on both sides (two workers sharing a budget of two cores get one each): the same
    # arithmetic on any BLAS and any machine, so the results must be equal, not merely close
    monkeypatch.setenv("BIOANON_CORES", "1")
    with threadpool_limits(1):
        one = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "one", progress=False, jobs=1)
    monkeypatch.setenv("BIOANON_CORES", "2")
    two = bioanon.evaluate(
        _cfg(), out_dir=tmp_path / "out", cache=tmp_path / "two", progress=False, jobs=2, report=False
    )
    assert two.executed == one.executed > 16 and two.cached == 0
    assert two.metrics.equals(one.metrics) and two.auc.equals(one.auc) and two.utility.equals(one.utility)
    env = json.loads((two.run_dir / "environment.json").read_text())
    assert env["jobs"] == 2
    # the timeline: every executed task once, on worker 1 or 2, in the order they started, inside the run
    timeline = env["tasks"]["timeline"]
    assert len(timeline) == two.executed and {r["worker"] for r in timeline} == {1, 2}
    starts = [r["start"] for r in timeline]
    assert starts == sorted(starts) and starts[0] >= 0
    assert all(r["seconds"] >= 0 and r["start"] + r["seconds"] <= env["duration_s"] + 0.01 for r in timeline)
    assert sum(r["seconds"] for r in timeline) == pytest.approx(
        sum(s["seconds"] for s in env["tasks"]["by_stage"].values()), abs=0.01 * len(timeline)
    )
    from bioanon.report import task_timeline

    plot = task_timeline(two.run_dir)
    assert plot.kind == "timeline" and f"{len(timeline)} tasks" in plot.caption and "workers were idle" in plot.caption
    again = bioanon.evaluate(_cfg(), out_dir=None, cache=tmp_path / "two", progress=False, jobs=2)
    assert again.executed == 0 and again.metrics.equals(one.metrics)  # warm: nothing recomputed


def test_failures_in_workers_are_reported_and_dependents_skipped(tmp_path, monkeypatch):
    from bioanon.builtin.datasets import SyntheticFeatures

    # a source that does not declare its attribute columns: the missing attribute fails in the workers
    monkeypatch.setattr(SyntheticFeatures, "attribute_names", None)
    cfg = _cfg()
    cfg["utility"] = [{"id": "any.attribute_accuracy", "params": {"attribute": "no_such_attribute"}}]
    with pytest.raises(bioanon.BioanonError, match="no_such_attribute"):
        bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "a", progress=False, jobs=2)
    r = bioanon.evaluate(cfg, out_dir=None, cache=tmp_path / "b", progress=False, jobs=2, keep_going=True)
    assert len(r.failures) == 5 and all("no_such_attribute" in f["error"] for f in r.failures)
    assert not r.metrics.empty


def test_runtime_registered_methods_run_in_this_process(tmp_path, register_bioanon_plugin):
    from evalconfigs import failing_recognizer_plugin

    register_bioanon_plugin(failing_recognizer_plugin("test.fails", ("features",), "boom"), "fails")
    cfg = config(**SMALL)
    cfg["recognizers"] = [{"id": "any.cosine_centroid"}, {"id": "test.fails"}]
    r = bioanon.evaluate(
        cfg, out_dir=tmp_path / "o", cache=tmp_path / "c", progress=False, jobs=2, keep_going=True, report=False
    )
    assert r.failures and all("boom" in f["error"] for f in r.failures)
    assert json.loads((r.run_dir / "environment.json").read_text())["jobs"] == 1


def _key(name: str) -> str:
    import hashlib

    return hashlib.md5(name.encode()).hexdigest()


def _task(name, deps=(), device=""):
    method = {"id": "x.net", "params": {"device": device}} if device else {"id": "x.plain", "params": {}}
    return TaskSpec(_key(name), "noop", {"method": method}, tuple(_key(d) for d in deps), "stage", name)


def test_accelerator_tasks_run_one_per_device(tmp_path, monkeypatch):
    import bioanon.executors as ex

    active: dict[str, int] = {}
    peak: dict[str, int] = {}
    order: list[str] = []
    lock = threading.Lock()

    def fake_run(task, cache, env, context, checked):
        dev = next(iter(task_devices(task)), "cpu")
        with lock:
            active[dev] = active.get(dev, 0) + 1
            peak[dev] = max(peak.get(dev, 0), active[dev])
        time.sleep(0.05)
        with lock:
            active[dev] -= 1
            order.append(task.label)
        return {"done": task.label}, 0.05, {}, time.time() - 0.05

    monkeypatch.setattr(ex, "_run_timed", fake_run)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    tasks = [
        _task("a"),
        _task("g1", device="cuda:0"),
        _task("g2", device="cuda:0"),
        _task("g3", device="cuda:1"),
        _task("b", deps=("g1",)),
        _task("c"),
        _task("d", deps=("b", "g2")),
    ]
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=4)
    executor.make_pool = lambda jobs: ThreadPoolExecutor(jobs)
    report = executor.run(tasks)
    assert report.executed == 7 and report.jobs == 4
    assert peak["cuda:0"] == 1 and peak["cuda:1"] == 1 and peak["cpu"] >= 2
    assert order.index("b") > order.index("g1") and order.index("d") > max(order.index("b"), order.index("g2"))
    assert task_devices(_task("x", device="cuda:0")) == {"cuda:0"} and task_devices(_task("y")) == frozenset()


def test_tasks_that_share_a_fit_run_on_one_worker(tmp_path, monkeypatch):
    """Score tasks that fit the same recognizer on the same data (one affinity) go to the worker that ran the
    first of them, which keeps the fit; a worker with nothing of its own takes new work, never a task whose fit
    its owner is computing."""
    import attrs

    import bioanon.executors as ex

    ran_on: dict[str, str] = {}

    def fake_run(task, cache, env, context, checked):
        started = time.time()
        time.sleep(0.02)
        ran_on[task.label] = threading.current_thread().name
        return {"done": task.label}, 0.02, {}, started

    monkeypatch.setattr(ex, "_run_timed", fake_run)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    tasks = [attrs.evolve(_task(f"{a}{i}"), affinity=a) for a in ("A", "B") for i in range(4)]
    tasks += [_task(f"free{i}") for i in range(3)]
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2)
    executor.make_pool = lambda jobs: [ThreadPoolExecutor(1, thread_name_prefix=f"slot{j}") for j in range(jobs)]
    report = executor.run(tasks)
    assert report.executed == 11 and report.jobs == 2
    for a in ("A", "B"):
        assert len({ran_on[f"{a}{i}"] for i in range(4)}) == 1, ran_on
    assert ran_on["A0"] != ran_on["B0"]


def test_the_timeline_records_each_task_on_the_worker_that_ran_it(tmp_path, monkeypatch):
    """The executor's timeline: each executed task once, with its stage, the worker slot it ran on (1 .. jobs),
    and the start and seconds the worker measured."""
    import bioanon.executors as ex

    ran_on: dict[str, int] = {}

    def fake_run(task, cache, env, context, checked):
        ran_on[task.label] = int(threading.current_thread().name.removeprefix("slot").split("_")[0])
        started = time.time()
        time.sleep(0.02)
        return {"done": task.label}, 0.02, {}, started

    monkeypatch.setattr(ex, "_run_timed", fake_run)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    tasks = [_task(f"t{i}") for i in range(6)] + [_task("last", deps=("t0", "t5"))]
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2)
    executor.make_pool = lambda jobs: [ThreadPoolExecutor(1, thread_name_prefix=f"slot{j}") for j in range(jobs)]
    before = time.time()
    report = executor.run(tasks)
    after = time.time()
    assert report.executed == 7 and len(report.timeline) == 7
    assert sorted(r["task"] for r in report.timeline) == sorted(t.label for t in tasks)
    for r in report.timeline:
        assert r["worker"] == ran_on[r["task"]] + 1 and r["seconds"] == 0.02 and r["stage"] == "stage"
        assert before - 0.02 <= r["start"] <= after
    last = next(r for r in report.timeline if r["task"] == "last")
    # it started once t0 and t5 had finished
    assert all(last["start"] > r["start"] for r in report.timeline if r["task"] in ("t0", "t5"))
    since = report.timeline_since(before)
    assert [r["start"] for r in since] == sorted(r["start"] for r in since) and since[0]["start"] >= -0.02


def test_the_scheduler_reads_each_task_s_devices_once(tmp_path, monkeypatch):
    """The accelerators of a task are worked out once, not at every pick: reading them at every pick over every
    ready task made scheduling quadratic (42 s of overhead for 2,000 tasks)."""
    import bioanon.executors as ex

    calls: list[str] = []
    original = ex.task_devices
    monkeypatch.setattr(ex, "task_devices", lambda task: calls.append(task.key) or original(task))
    monkeypatch.setattr(
        ex, "_run_timed", lambda task, cache, env, context, checked: ({"done": task.label}, 0.0, {}, time.time())
    )
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    tasks = [_task(f"t{i}") for i in range(60)] + [_task("g", device="cuda:0"), _task("h", deps=("t0",))]
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2)
    executor.make_pool = lambda jobs: [ThreadPoolExecutor(1) for _ in range(jobs)]
    assert executor.run(tasks).executed == 62
    assert sorted(calls) == sorted(t.key for t in tasks)


_SETS = {"clear_attacker": "c" * 32, "anon_attacker": "a" * 32, "clear_evaluation": "e" * 32}


def _score_task(scenario, **extra):
    """A score task of ``any.cosine_centroid`` in ``scenario`` (``extra``: other arguments, or changed ones)."""
    from bioanon.evaluation.tasks import make_task

    args = {"recognizer": {"id": "any.cosine_centroid", "params": {}}, "label": "subject", "sets": _SETS}
    args |= {"seed": 1, "selections": [], "scenario": scenario, **extra}
    return make_task("score", args, (), stage="score", label="s")


def test_score_tasks_get_the_affinity_of_their_fit():
    from bioanon.evaluation.tasks import make_task

    def affinity(scenario, **extra):
        return _score_task(scenario, **extra).affinity

    assert affinity("naive") == affinity("clear") != affinity("parrot") != ""  # clear and naive train on clear
    assert affinity("naive", sets={**_SETS, "clear_attacker": "d" * 32}) != affinity("naive")
    assert affinity("naive", attacker_fit="enrolment") == ""  # a fit per selection: nothing to share
    assert make_task("select", {"n": 1}, (), stage="select", label="s").affinity == ""


def _kind_task(name, kind, deps=(), affinity=""):
    import attrs

    return attrs.evolve(_task(name, deps), kind=kind, affinity=affinity)


def test_a_free_worker_starts_the_longest_task_first():
    """Once a task of a kind has finished, its kind's mean seconds rank the tasks: the longest first, a task of
    a kind not measured yet before all (it may be long), one without a kind as the mean of every task, the
    tasks waiting for a task adding theirs to its rank; the ranks follow the estimates as they firm up, and a
    long chain of tasks is ranked without recursion."""
    import math

    from bioanon.executors import ExpectedSeconds

    head, tail = _kind_task("head", "short"), _kind_task("tail", "long", deps=("head",))
    short1, short2, long1 = _kind_task("s2", "short"), _kind_task("s3", "short"), _kind_task("l1", "long")
    new, plain = _kind_task("n", "never seen"), _task("plain")
    expected = ExpectedSeconds([head, tail, short1, short2, long1, new, plain], {head.key: [tail]})
    assert expected.rank(long1) == math.inf and expected.version == 0
    expected.learn(_kind_task("l0", "long"), 2.0)
    expected.learn(_kind_task("s0", "short"), 0.25)
    expected.learn(_kind_task("s1", "short"), 0.75)
    assert expected.seconds(short1) == 0.5 and expected.seconds(long1) == 2.0 and expected.seconds(plain) == 1.0
    assert expected.rank(head) == 2.5 and expected.rank(long1) == 2.0 and expected.rank(new) == math.inf
    ranked = sorted([short1, long1, new, plain, short2, head], key=lambda t: -expected.rank(t))
    assert [t.label for t in ranked] == ["n", "head", "l1", "plain", "s2", "s3"]
    version = expected.version
    for seconds in (2.5, 2.5):  # four short tasks: a mean of 1.5
        expected.learn(_kind_task("s", "short"), seconds)
    assert expected.version > version and expected.rank(head) == 3.5 and expected.rank(short1) == 1.5
    chain = [_kind_task("c0", "link")] + [_kind_task(f"c{i}", "link", deps=(f"c{i - 1}",)) for i in range(1, 3000)]
    along = ExpectedSeconds(chain, {chain[i].key: [chain[i + 1]] for i in range(len(chain) - 1)})
    along.learn(chain[0], 0.5)
    assert along.rank(chain[0]) == 1500.0 and along.rank(chain[-1]) == 0.5


def test_the_pool_learns_task_costs_and_starts_long_ones_first(tmp_path, monkeypatch):
    """Through the executor: once the first long and the first short task have finished, the pool starts the
    long ones left before the short ones, whatever their order in the plan (workers that run each task at
    once, so that the order is the scheduler's alone)."""
    from concurrent.futures import Future

    import bioanon.executors as ex

    started: list[str] = []

    def fake_run(task, cache, env, context, checked):
        started.append(task.label)
        return {"done": task.label}, (1.0 if task.kind == "long" else 0.1), {}, time.time()

    class AtOnce:  # a worker slot that runs the task as it is submitted
        def submit(self, fn, *args):
            future: Future = Future()
            future.set_result(fn(*args))
            return future

    monkeypatch.setattr(ex, "_run_timed", fake_run)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    tasks = [_kind_task(f"{k}{i}", "long" if k == "L" else "short") for i in range(3) for k in ("L", "S")]
    tasks.append(_kind_task("after S0", "long", deps=("S0",)))  # ready later: placed by its rank, after equals
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2)
    executor.make_pool = lambda jobs: [AtOnce() for _ in range(jobs)]
    report = executor.run(tasks)
    assert report.executed == 7 and report.jobs == 2
    assert started == ["L0", "S0", "L1", "L2", "after S0", "S1", "S2"]


def test_tasks_of_one_recognizer_and_scenario_share_a_kind():
    from bioanon.evaluation.tasks import task_kind

    def kind(scenario, **extra):
        return _score_task(scenario, **extra).kind

    assert kind("naive") == kind("naive", sets={**_SETS, "anon_attacker": "b" * 32}, seed=2)  # another setting
    assert kind("naive") != kind("parrot") and kind("naive") != kind("naive", recognizer={"id": "any.lda_cosine"})
    assert task_kind("anonymize", {"method": {"id": "any.gaussian_noise", "params": {"sigma": 1}}}) == task_kind(
        "anonymize", {"method": {"id": "any.gaussian_noise", "params": {"sigma": 2}}}
    )
    assert task_kind("split", {"seed": 3}) == "split"


def test_small_or_narrow_plans_run_in_this_process(tmp_path):
    from bioanon.executors import widest_level

    chain = [_task("a"), _task("b", deps=("a",)), _task("c", deps=("b",))]
    fan = [_task("r")] + [_task(f"x{i}", deps=("r",)) for i in range(5)] + [_task("z", deps=("x0", "x4"))]
    assert widest_level(chain) == 1 and widest_level(fan) == 5 and widest_level([]) == 0
    tiny = bioanon.evaluate(
        config(**SMALL)
        | {
            "anonymizers": [{"id": "any.gaussian_noise", "name": "n"}],
            "recognizers": [{"id": "any.cosine_centroid"}],
            "scenarios": ["naive"],
            "utility": [],
        },
        out_dir=tmp_path / "o",
        cache=tmp_path / "c",
        progress=False,
        jobs=2,
        report=False,
    )
    env = json.loads((tiny.run_dir / "environment.json").read_text())
    assert env["jobs"] == 1  # 5 tasks: not worth it
    assert len(env["tasks"]["timeline"]) == tiny.executed and {r["worker"] for r in env["tasks"]["timeline"]} == {0}
    from bioanon.report import task_timeline

    assert "ran one after the other" in task_timeline(tiny.run_dir).caption


def test_jobs_setting(monkeypatch, tmp_path):
    cfg = load_config(config(run={"jobs": 3}))
    assert cfg.run.jobs == 3 and load_config(cfg.to_dict()) == cfg
    import tomllib

    assert load_config(tomllib.loads(cfg.to_toml())) == cfg
    with pytest.raises(ConfigError, match=r"run\.jobs: expected a number of worker processes"):
        load_config(config(run={"jobs": -1}))
    monkeypatch.setenv("BIOANON_JOBS", "5")
    assert resolve_jobs(None) == 5 and resolve_jobs(2) == 2
    monkeypatch.setenv("BIOANON_JOBS", "0")
    assert resolve_jobs(None) >= 1  # every usable core
    monkeypatch.setenv("BIOANON_JOBS", "many")
    with pytest.raises(bioanon.BioanonError, match="BIOANON_JOBS='many'"):
        resolve_jobs(None)
    with pytest.raises(bioanon.BioanonError, match="jobs must be"):
        bioanon.evaluate(config(**SMALL), out_dir=None, progress=False, jobs=-2)


def test_cli_jobs_option(tmp_path, capsys):
    from bioanon.cli import main

    path = tmp_path / "c.toml"
    path.write_text(load_config(config(**SMALL)).to_toml())
    assert main(["evaluate", str(path), "--jobs", "2", "--out", str(tmp_path / "r"), "--quiet", "--no-report"]) == 0
    run = next((tmp_path / "r").iterdir())
    assert json.loads((run / "environment.json").read_text())["jobs"] == 2
    with pytest.raises(SystemExit):
        main(["evaluate", str(path), "--jobs", "two"])
    assert "expected a number of worker processes" in capsys.readouterr().err


def test_a_script_without_a_main_guard_is_not_run_again_by_workers(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parents[1])!r})\n"
        "import bioanon\nfrom evalconfigs import SMALL, config\n"
        "print('script ran', flush=True)\n"
        f"r = bioanon.evaluate(config(**SMALL), out_dir=None, cache={str(tmp_path / 'c')!r}, progress=False, "
        "jobs=2)\nprint('tasks', r.executed)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in __import__("os").environ.items() if k != "BIOANON_JOBS"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("script ran") == 1 and "tasks" in out.stdout


def _die(task, cache, env, context, checked):  # a worker that dies mid-task (e.g. killed by the out-of-memory killer)
    import os

    os._exit(3)


def test_a_dead_worker_stops_the_run_with_a_clear_error(tmp_path, monkeypatch):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import bioanon.executors as ex

    monkeypatch.setattr(ex, "_run_timed", _die)
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    executor = LocalExecutor(Cache(tmp_path), progress=False, jobs=2, keep_going=True)
    executor.make_pool = lambda jobs: ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
    with pytest.raises(
        bioanon.BioanonError,
        match=r"a worker process died while running it .* same command "
        r"resumes",
    ):
        executor.run([_task("a"), _task("b"), _task("c")])


# in a pool worker, before its first task: whether the registry of installed methods is built, and which of the
# libraries a task needs are imported (evaluated by eval, a built-in, so nothing of this module is pickled)
_WORKER_STATE = (
    "(lambda s: {'registry': getattr(getattr(s.modules.get('bioanon.plugins'), '_default', None), '_registry', None)"
    " is not None, 'modules': sorted(m for m in ('pandas', 'scipy.linalg', 'scipy.sparse', 'bioanon.evaluation.tasks')"
    " if m in s.modules)})(__import__('sys'))"
)


def _in_fresh_python(code: str, tmp_path) -> dict:
    import os
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=os.environ)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_workers_start_with_the_methods_and_libraries_imported(tmp_path):
    """The pool's fork server imports what a task needs and builds the registry once: a worker forked from it
    has them before its first task (it used to spend about a second of the run's critical path on them). It
    does not hold pandas (40 MiB in every worker), which no task of an evaluation needs."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform has no fork server: workers are spawned and import for themselves")
    state = _in_fresh_python(
        "import json, sys\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from bioanon.executors import _worker_context, start_worker_server\n"
        "if __name__ == '__main__':\n"
        "    assert start_worker_server()\n"
        "    assert 'scipy.sparse' not in sys.modules  # the server imports it, not this process\n"
        "    with ProcessPoolExecutor(1, mp_context=_worker_context()) as pool:\n"
        f"        print(json.dumps(pool.submit(eval, {_WORKER_STATE!r}).result(timeout=240)))\n",
        tmp_path,
    )
    assert state == {
        "registry": True,
        "modules": ["bioanon.evaluation.tasks", "scipy.linalg", "scipy.sparse"],  # not pandas: no task needs it
    }


def test_one_job_starts_no_worker_server(tmp_path):
    state = _in_fresh_python(
        "import json, multiprocessing.forkserver as fs\n"
        "from bioanon.cache import Cache\n"
        "from bioanon.executors import LocalExecutor\n"
        f"LocalExecutor(Cache({str(tmp_path / 'c')!r}), jobs=1).start_workers_early()\n"
        "print(json.dumps({'server': fs._forkserver._forkserver_pid is not None}))\n",
        tmp_path,
    )
    assert state == {"server": False}


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_caller_imports_what_it_needs_next_while_its_workers_run(tmp_path, monkeypatch, jobs):
    """``preload``: with worker processes, this process (idle meanwhile) imports the modules on a thread; when the
    tasks run in this process, it does not (the import would compete with them)."""
    import bioanon.executors as ex

    name = "bioanon_preload_probe"
    (tmp_path / f"{name}.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    threads: list[str] = []
    real = ex._import_in_background

    def watched(modules):
        threads.append(",".join(modules))
        real(modules)

    monkeypatch.setattr(ex, "_import_in_background", watched)
    monkeypatch.setattr(
        ex, "_run_timed", lambda task, cache, env, context, checked: ({"done": task.label}, 0.0, {}, time.time())
    )
    monkeypatch.setattr(ex, "MIN_TASKS_PER_WORKER", 1)
    executor = LocalExecutor(Cache(tmp_path / "cache"), progress=False, jobs=jobs, preload=(name,))
    executor.make_pool = lambda jobs: ThreadPoolExecutor(jobs)
    monkeypatch.setattr(executor, "_may_use_pool", lambda context: jobs > 1)
    monkeypatch.setattr(executor, "_run_task_here", lambda task, context: {"done": task.label})
    report = executor.run([_task("a"), _task("b")])
    assert report.executed == 2
    if jobs == 1:
        assert not threads and name not in sys.modules
    else:
        assert threads == [name]
        for t in [t for t in threading.enumerate() if t.name == "bioanon-preload"]:
            t.join(timeout=60)  # wait for the state: the thread has finished
        assert name in sys.modules


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # two repeats, three settings, two selectors with two counts and random draws
        {
            "repeats": 1,
            "anonymizers": [{"id": "any.gaussian_noise", "name": "noise"}],
            "scenarios": ["parrot"],
            "recognizers": [{"id": "any.cosine_centroid"}],
            "selection": {"selectors": ["random"]},
            "utility": [],
        },
        {"repeats": 1, "scenarios": ["naive"], "utility": [], "selection": {"selectors": ["classification"]}},
    ],
)
def test_least_tasks_bounds_the_plan_from_below(tmp_path, overrides):
    """What the executor is told before the data are read (whether its workers' server is worth starting): never
    more tasks than the plan has; as many on a plain case of one setting, one recognizer and one selection."""
    from evalconfigs import config

    from bioanon.cache import Cache
    from bioanon.evaluation.config import load_config
    from bioanon.evaluation.run import build_plan, least_tasks, load_data

    cfg = load_config(config(**overrides))
    plan = build_plan(cfg, Cache(tmp_path / "c"), load_data(cfg))
    least = least_tasks(cfg)
    assert 1 <= least <= len(plan.tasks)
    if overrides.get("repeats") == 1 and len(overrides.get("recognizers", [])) == 1:
        # split, anonymize, select, clear level, parrot: only the selection is not counted
        assert least == len([t for t in plan.tasks if t.op != "select"])


def test_a_plan_too_small_for_workers_starts_no_worker_server(tmp_path):
    """Told that the plan has fewer tasks than workers would take on (as the SEBA-shaped case), the executor
    starts no server: its imports would only compete with this process's. Told more, it starts one."""
    state = _in_fresh_python(
        "import json, multiprocessing.forkserver as fs\n"
        "from bioanon.cache import Cache\n"
        "from bioanon.executors import MIN_TASKS_PER_WORKER, LocalExecutor\n"
        "if __name__ == '__main__':\n"
        f"    ex = LocalExecutor(Cache({str(tmp_path / 'c')!r}), jobs=2)\n"
        "    few = ex.start_workers_early(2 * MIN_TASKS_PER_WORKER - 1)\n"
        "    before = fs._forkserver._forkserver_pid is not None\n"
        "    many = ex.start_workers_early(2 * MIN_TASKS_PER_WORKER)\n"
        "    print(json.dumps({'few': few, 'before': before, 'many': many,\n"
        "                      'after': fs._forkserver._forkserver_pid is not None}))\n",
        tmp_path,
    )
    assert state == {"few": False, "before": False, "many": True, "after": True}
