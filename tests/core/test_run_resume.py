"""A rerun of an interrupted (or failed) run of the same config resumes into its results folder, which ends
complete; another config, a completed run or a folder held by a live run gets a new folder as before."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys

import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.evaluation import run as run_module
from bioanon.evaluation.rundir import LOCK_FILE, RunInterrupted, read_status


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


def _interrupted_run(tmp_path, monkeypatch, cfg) -> RunInterrupted:
    """Run ``cfg`` with default run ids and stop it with Ctrl-C once its tasks ran (before the results are
    written): the run's own KeyboardInterrupt handling marks its folder interrupted."""

    with monkeypatch.context() as m:
        m.setattr(run_module, "_results", _ctrl_c)
        with pytest.raises(RunInterrupted) as stopped:
            bioanon.evaluate(cfg, out_dir=tmp_path / "res", cache=tmp_path / "c", progress=False, report=False)
    return stopped.value


def _run(tmp_path, cfg, **kwargs):
    return bioanon.evaluate(cfg, out_dir=tmp_path / "res", cache=tmp_path / "c", progress=False, report=False, **kwargs)


def test_a_rerun_of_the_same_config_resumes_into_the_interrupted_folder(tmp_path, monkeypatch, caplog):
    stopped = _interrupted_run(tmp_path, monkeypatch, config(**SMALL))
    folder = stopped.run_dir
    first = read_status(folder)
    assert first["state"] == "interrupted" and first["config_digest"]
    with caplog.at_level(logging.INFO, logger="bioanon"):
        again = _run(tmp_path, config(**SMALL))
    assert again.run_dir == folder
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == [folder.name]  # no second folder
    status = read_status(folder)
    assert status["state"] == "complete" and status["config_digest"] == first["config_digest"]
    assert status["started"] == first["started"]
    assert [r["state"] for r in status["resumed"]] == ["interrupted"]
    assert not (folder / LOCK_FILE).exists()
    assert (folder / "metrics.parquet").exists()
    env = json.loads((folder / "environment.json").read_text())
    assert env["tasks"]["executed"] == 0 and env["tasks"]["cached"] == stopped.total  # the cache was reused
    said = [r.getMessage() for r in caplog.records if "resum" in r.getMessage()]
    assert len(said) == 1 and str(folder) in said[0], said


def test_another_config_or_a_completed_run_gets_a_new_folder(tmp_path, monkeypatch):
    folder = _interrupted_run(tmp_path, monkeypatch, config(**SMALL)).run_dir
    other = _run(tmp_path, config(**{**SMALL, "seed": 7}))
    assert other.run_dir != folder
    assert read_status(folder)["state"] == "interrupted"  # left as it was
    done = _run(tmp_path, config(**SMALL))
    assert done.run_dir == folder
    assert _run(tmp_path, config(**SMALL)).run_dir not in (folder, other.run_dir)  # it completed: a new run


def test_a_failed_run_resumes_and_data_given_directly_counts_in_the_config(tmp_path, monkeypatch):
    table = bioanon.load_dataset("any.synthetic", n_subjects=60, samples_per_subject=8, dim=16, seed=1)
    with monkeypatch.context() as m:
        m.setattr(run_module, "_results", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            _run(tmp_path, config(**SMALL), data=table)
    (folder,) = (tmp_path / "res").iterdir()
    assert read_status(folder)["state"] == "failed"
    other_data = bioanon.load_dataset("any.synthetic", n_subjects=60, samples_per_subject=8, dim=16, seed=2)
    assert _run(tmp_path, config(**SMALL), data=other_data).run_dir != folder
    resumed = _run(tmp_path, config(**SMALL), data=table)
    assert resumed.run_dir == folder and read_status(folder)["state"] == "complete"


def _lock_as(folder, pid: int) -> None:
    (folder / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "then"}))


def test_a_folder_held_by_a_live_run_is_not_taken_one_whose_run_died_is(tmp_path, monkeypatch):
    folder = _interrupted_run(tmp_path, monkeypatch, config(**SMALL)).run_dir
    _lock_as(folder, os.getpid())  # a live process (this one) holds it
    r = _run(tmp_path, config(**SMALL))
    assert r.run_dir != folder and not (folder / "metrics.parquet").exists()
    assert read_status(folder)["state"] == "interrupted"
    # a run killed without a word: its status still says running, its lock's process is gone
    status = read_status(r.run_dir)
    (r.run_dir / "status.json").write_text(json.dumps({**status, "state": "running"}))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _lock_as(r.run_dir, int(dead.stdout))
    again = _run(tmp_path, config(**SMALL))
    assert again.run_dir == r.run_dir and read_status(r.run_dir)["state"] == "complete"
    assert [s["state"] for s in read_status(r.run_dir)["resumed"]] == ["failed"]  # marked failed when found


def test_an_explicit_run_id_resumes_its_folder_of_the_same_config(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(run_module, "_results", _ctrl_c)
        with pytest.raises(RunInterrupted):
            _run(tmp_path, config(**SMALL), run_id="r")
    first = read_status(tmp_path / "res" / "r")
    assert first["state"] == "interrupted"
    _run(tmp_path, config(**SMALL), run_id="r")
    status = read_status(tmp_path / "res" / "r")
    assert status["state"] == "complete" and status["started"] == first["started"]
    assert [r["state"] for r in status["resumed"]] == ["interrupted"]
    _run(tmp_path, config(**{**SMALL, "seed": 7}), run_id="r")  # another config taking the id over: a new run
    assert "resumed" not in read_status(tmp_path / "res" / "r")
