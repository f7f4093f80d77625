"""Progress where no bar can be drawn: with stderr a file or a pipe, an evaluation logs progress lines
(``tasks: 40/133 done (30 %), …``) to the ``bioanon.progress`` logger; on a terminal it draws bars and logs none."""

from __future__ import annotations

import io
import logging
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon import executors
from bioanon import log as bioanon_log
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.executors import LocalExecutor

LINE = re.compile(r"^(?P<desc>[\w ]+): (?P<n>\d+)/(?P<total>\d+) done \((?P<pct>\d+) %\), .+ elapsed(, ~.+ left)?$")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _lines(caplog) -> dict[str, list[tuple[int, int]]]:
    """The progress lines logged, as (done, total) per description, in order."""
    out: dict[str, list[tuple[int, int]]] = {}
    for record in caplog.records:
        if record.name == "bioanon.progress":
            assert record.levelno == logging.INFO
            m = LINE.match(record.getMessage())
            assert m, record.getMessage()
            out.setdefault(m["desc"], []).append((int(m["n"]), int(m["total"])))
    return out


def _check_counts(lines: dict[str, list[tuple[int, int]]]) -> None:
    assert lines
    for desc, counts in lines.items():
        done = [n for n, _ in counts]
        assert done == sorted(set(done)), (desc, counts)  # increasing
        assert counts[-1][0] == counts[-1][1] > 0, (desc, counts)  # the last says N/N


def _pipe(monkeypatch) -> io.StringIO:
    """stderr a pipe, not a terminal (set in the test: pytest swaps stderr between a fixture and the test)."""
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    return pipe


@pytest.fixture
def piped(monkeypatch, caplog):
    """INFO logged, a line per step (no waiting for time)."""
    monkeypatch.setenv("BIOANON_PROGRESS_EVERY", "0")
    monkeypatch.delenv("BIOANON_PROGRESS", raising=False)
    caplog.set_level(logging.INFO, logger="bioanon")
    return caplog


def test_one_job_logs_lines_per_stage_when_stderr_is_not_a_terminal(tmp_path, piped, monkeypatch):
    pipe = _pipe(monkeypatch)
    result = bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "c", jobs=1)
    lines = _lines(piped)
    _check_counts(lines)
    assert {"split", "score"} <= set(lines), lines
    assert sum(counts[-1][1] for counts in lines.values()) == result.executed + result.cached
    assert len(lines["score"]) > 1  # a line per task here
    assert "\r" not in pipe.getvalue() and "%|" not in pipe.getvalue()  # no bar frames


def test_worker_pool_logs_task_lines(tmp_path, piped, monkeypatch):
    _pipe(monkeypatch)
    monkeypatch.setattr(executors, "MIN_TASKS_PER_WORKER", 1)
    executor = LocalExecutor(Cache(tmp_path / "c"), progress=True, jobs=2)
    executor.make_pool = lambda jobs: ThreadPoolExecutor(jobs)
    result = bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "c", executor=executor)
    lines = _lines(piped)
    assert set(lines) == {"tasks"}, lines
    _check_counts(lines)
    assert lines["tasks"][-1][1] == result.executed and len(lines["tasks"]) == result.executed


def test_dask_logs_task_lines(tmp_path, piped, monkeypatch):
    _pipe(monkeypatch)
    distributed = pytest.importorskip("distributed", reason="the Dask executor needs the 'dask' extra")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        result = bioanon.evaluate(
            config(**SMALL), out_dir=None, cache=tmp_path / "c", executor="dask", scheduler=client
        )
    lines = _lines(piped)
    assert set(lines) == {"tasks"}, lines
    _check_counts(lines)
    assert lines["tasks"][-1][1] == result.executed


def test_a_terminal_gets_bars_and_no_lines(tmp_path, piped, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "c", jobs=1)
    assert _lines(piped) == {}
    assert "score" in terminal.getvalue() and "task" in terminal.getvalue()  # the bars


def test_no_lines_when_progress_is_off_or_logging_quiet(tmp_path, piped, monkeypatch):
    _pipe(monkeypatch)
    bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "c", jobs=1, progress=False)
    assert _lines(piped) == {}
    monkeypatch.setenv("BIOANON_PROGRESS", "0")
    for _ in bioanon_log.progress_bar(range(3), desc="things"):
        pass
    assert _lines(piped) == {} and bioanon_log.progress_mode(True) is None
    monkeypatch.delenv("BIOANON_PROGRESS")
    assert bioanon_log.progress_mode(True) == "log" and bioanon_log.progress_mode(False) is None
    with bioanon_log.cli_logging(logging.WARNING):  # bioanon -q
        assert bioanon_log.progress_mode(True) is None and bioanon_log.progress_mode(None) is None
    piped.set_level(logging.WARNING, logger="bioanon")  # a library user who did not ask for INFO
    assert bioanon_log.progress_mode(True) is None
    monkeypatch.setenv("BIOANON_PROGRESS_EVERY", "soon")
    with pytest.raises(ConfigError, match="BIOANON_PROGRESS_EVERY='soon'"):
        bioanon_log.progress_every()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_every_tenth_or_every_interval_never_more_often_than_the_gap(caplog):
    caplog.set_level(logging.INFO, logger="bioanon")
    clock = _Clock()
    bar = bioanon_log.ProgressLog(total=100, desc="   tasks", unit="task", every=30, clock=clock)

    def step(n: int, at: float) -> list[str]:
        caplog.clear()
        clock.now = at
        bar.update(n)
        return [r.getMessage() for r in caplog.records if r.name == "bioanon.progress"]

    assert step(20, 1.0) == []  # a fifth done, but within the gap of 5 s since the start
    assert step(1, 6.0) == ["tasks: 21/100 done (21 %), 6 s elapsed, ~23 s left"]
    assert step(5, 12.0) == []  # less than a tenth more, less than 30 s
    assert step(5, 13.0) == ["tasks: 31/100 done (31 %), 13 s elapsed, ~29 s left"]
    assert step(1, 42.0) == []  # 29 s since the last line
    assert step(1, 43.0) == ["tasks: 33/100 done (33 %), 43 s elapsed, ~1 min 27 s left"]
    caplog.clear()
    clock.now = 3700.0
    bar.update(67)
    bar.close()
    bar.close()
    assert [r.getMessage() for r in caplog.records] == ["tasks: 100/100 done (100 %), 1 h 1 min elapsed"]

    caplog.clear()  # work quicker than the gap: no line at all
    quick = bioanon_log.ProgressLog(range(5), desc="split", every=30, clock=clock)
    assert list(quick) == list(range(5)) and caplog.records == []
    slow = bioanon_log.ProgressLog(desc="files", unit="file", every=30, clock=clock)  # no total
    clock.now += 31
    slow.update(3)
    assert [r.getMessage() for r in caplog.records] == ["files: 3 done, 31 s elapsed"]
