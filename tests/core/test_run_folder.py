"""The run folder: created before any work with a status marker, one run per folder, a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from evalconfigs import SMALL, config
from sigint import sigint_reaches_children

import bioanon
from bioanon.errors import BioanonError
from bioanon.evaluation import run as run_module
from bioanon.evaluation.config import load_config
from bioanon.evaluation.rundir import LOCK_FILE, RunFolder, read_status


def _json_count(cache_dir) -> int:
    d = cache_dir / "json"
    return sum(1 for _ in d.rglob("*.json")) if d.exists() else 0


def test_unwritable_out_fails_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(BioanonError, match="cannot create the results folder .*a-file"):
        bioanon.evaluate(config(**SMALL), out_dir=blocker / "results", cache=tmp_path / "cache", progress=False)
    assert _json_count(tmp_path / "cache") == 0  # nothing was computed


def test_status_marker_and_lock_follow_the_run(tmp_path, register_bioanon_plugin):
    from evalconfigs import failing_recognizer_plugin

    r = bioanon.evaluate(
        config(**SMALL), out_dir=tmp_path, run_id="ok", cache=tmp_path / "c", progress=False, report=False
    )
    status = read_status(r.run_dir)
    assert status["state"] == "complete" and status["tasks"]["failed"] == 0
    assert not (r.run_dir / LOCK_FILE).exists()
    register_bioanon_plugin(failing_recognizer_plugin("test.fails", ("features",), "boom"), "fails")
    bad = config(**SMALL)
    bad["recognizers"] = [{"id": "test.fails"}]  # valid, and fails while scoring: after the folder is made
    with pytest.raises(BioanonError):
        bioanon.evaluate(bad, out_dir=tmp_path, run_id="bad", cache=tmp_path / "c", progress=False, keep_going=False)
    status = read_status(tmp_path / "bad")
    assert status["state"] == "failed" and "boom" in status["error"]
    assert not (tmp_path / "bad" / LOCK_FILE).exists()
    tiny = config(**SMALL)
    tiny["dataset"] = {"source": "any.synthetic", "params": {"n_subjects": 2}}  # refused by validation: no folder
    with pytest.raises(BioanonError):
        bioanon.evaluate(tiny, out_dir=tmp_path, run_id="tiny", cache=tmp_path / "c", progress=False)
    assert not (tmp_path / "tiny").exists()


def test_concurrent_runs_of_one_config_get_distinct_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "_run_id", lambda cfg: "same-second")
    held = RunFolder.open(tmp_path, None, "same-second")  # a live run (this process) owns the first folder
    r = bioanon.evaluate(config(**SMALL), out_dir=tmp_path, cache=tmp_path / "c", progress=False, report=False)
    assert r.run_dir == tmp_path / "same-second-2"
    assert not (held.path / "metrics.parquet").exists()
    # an explicit run id owned by a live run is refused, naming the folder
    with pytest.raises(BioanonError, match="in use by another evaluation"):
        bioanon.evaluate(config(**SMALL), out_dir=tmp_path, run_id="same-second", cache=tmp_path / "c", progress=False)
    held.close("complete")
    # a stale lock (its process is gone) is taken over
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    (tmp_path / "same-second" / LOCK_FILE).write_text(
        json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "started": "then"})
    )
    r = bioanon.evaluate(
        config(**SMALL), out_dir=tmp_path, run_id="same-second", cache=tmp_path / "c", progress=False, report=False
    )
    assert read_status(r.run_dir)["state"] == "complete"


#: An anonymizer (``pause.gate``) that, at its setting ``step = 5``, says it has started (``<gate>.ready``) and
#: then waits until the test releases it (``<gate>.release``): the Ctrl-C test interrupts the run at a known state
#: (the settings before done, the fifth running) instead of guessing a time.
GATE_PLUGIN = """
import time
from pathlib import Path
from typing import ClassVar
import attrs
import bioanon
from bioanon import Anonymizer, param

@attrs.define(kw_only=True)
class Gate(Anonymizer):
    \"\"\"Identity, except that setting 5 waits for the test's release file.\"\"\"
    id: ClassVar[str] = "pause.gate"
    trait: ClassVar[str] = "any"
    payloads: ClassVar[tuple] = ("features",)
    step: int = param(1, help="setting")
    gate: str = param("", help="file prefix")

    def transform(self, table):
        if self.step == 5:
            Path(self.gate + ".ready").touch()
            while not Path(self.gate + ".release").exists():
                time.sleep(0.02)
        return table

@bioanon.hookimpl
def register_anonymizers(register):
    register(Gate)
"""
GATED_CLI = f"""
import sys, types
mod = types.ModuleType("pause_plugin")
exec({GATE_PLUGIN!r}, mod.__dict__)
from bioanon.plugins import get_plugin_manager
get_plugin_manager().register_plugin(mod, "pause")
from bioanon.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_test_s_children_get_ctrl_c_even_where_the_suite_ignores_it():
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job of a non-interactive shell
    try:
        inherited = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
        with sigint_reaches_children():
            default = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
        restored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (inherited, default, restored) == ("False", "True", True)


@pytest.mark.slow
def test_ctrl_c_prints_one_line_exits_130_and_resumes(tmp_path, register_bioanon_plugin):
    import types

    mod = types.ModuleType("pause_plugin")
    exec(GATE_PLUGIN, mod.__dict__)  # noqa: S102 - the test's own plugin, to write the config here
    register_bioanon_plugin(mod, "pause")
    gate = tmp_path / "gate"
    cfg = config(
        **{
            **SMALL,
            "anonymizers": [
                {"id": "pause.gate", "name": "gate", "params": {"gate": str(gate)}, "grid": {"step": [1, 2, 5, 7]}}
            ],
        }
    )
    toml = tmp_path / "eval.toml"
    toml.write_text(load_config(cfg).to_toml())
    cache_dir = tmp_path / "cache"
    # faulthandler: should the run hang after the SIGINT, a SIGABRT makes it print every thread's stack, and the
    # failure shows where it was (it showed the run still waiting at the gate: the suite ran as a background job,
    # with SIGINT ignored, which the run inherited; sigint_reaches_children below)
    env = {**os.environ, "BIOANON_CACHE": str(cache_dir), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-c", GATED_CLI, "evaluate", str(toml), "--out", str(tmp_path / "res")]
    cmd += ["--run-id", "r", "--quiet", "--no-report"]
    with sigint_reaches_children():  # also where the suite runs with SIGINT ignored (a background job)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not (tmp_path / "gate.ready").exists():  # a state: the fifth setting is running
            if proc.poll() is not None:
                pytest.fail(f"the run ended before the gate: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=60)
            pytest.fail(f"the run had not exited 300 s after the SIGINT; its threads then:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted:" in lines[0] and "resume" in lines[0], err
    status = read_status(tmp_path / "res" / "r")
    assert status["state"] == "interrupted" and 0 < status["tasks_saved"] < status["tasks_total"]
    (tmp_path / "gate.release").touch()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert read_status(tmp_path / "res" / "r")["state"] == "complete"
    env_json = json.loads((tmp_path / "res" / "r" / "environment.json").read_text())
    assert env_json["tasks"]["cached"] >= status["tasks_saved"] - 1  # the saved work was reused
