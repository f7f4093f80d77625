"""Every benchmark runs on tiny sizes, so none can rot (the full runs are never part of the test suite)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.run import BENCHMARKS, markdown  # noqa: E402


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_quick(name):
    res = importlib.import_module(f"benchmarks.{name}").run(quick=True)
    assert res["figures"], name
    for f in res["figures"]:
        assert {"name", "value", "unit", "target", "passed"} <= set(f)
    assert name in markdown([{"benchmark": name, **res}])


def test_runner_writes_results(tmp_path):
    from benchmarks.run import main

    out = tmp_path / "r.json"
    assert main(["table_io", "--quick", "--out", str(out)]) == 0
    assert out.is_file() and out.with_suffix(".md").read_text().startswith("| benchmark")
