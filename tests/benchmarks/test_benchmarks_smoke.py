"""Every benchmark runs on tiny sizes, so none can rot (the full runs are never part of the test suite)."""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.run import BENCHMARKS, markdown  # noqa: E402 (importable only once ROOT is on sys.path)


@functools.cache
def _quick(name):
    """One quick run per benchmark, shared by the tests below."""
    return importlib.import_module(f"benchmarks.{name}").run(quick=True)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_quick(name):
    res = _quick(name)
    assert res["figures"], name
    for f in res["figures"]:
        assert {"name", "value", "unit", "target", "passed"} <= set(f)
    assert name in markdown([{"benchmark": name, **res}])


def test_runner_writes_results(tmp_path):
    from benchmarks.run import main

    out = tmp_path / "r.json"
    assert main(["table_io", "--quick", "--out", str(out)]) == 0
    assert out.is_file() and out.with_suffix(".md").read_text().startswith("| benchmark")
    import json

    out.write_text(json.dumps({**json.loads(out.read_text()), "gpu": {"kept": True}}))
    assert main(["end_to_end", "--quick", "--out", str(out)]) == 0  # another benchmark: both kept, gpu too
    doc = json.loads(out.read_text())
    assert [r["benchmark"] for r in doc["results"]] == ["table_io", "end_to_end"] and doc["gpu"] == {"kept": True}
    assert main(["table_io", "--quick", "--out", str(out)]) == 0  # a rerun replaces its own entry
    assert [r["benchmark"] for r in json.loads(out.read_text())["results"]] == ["end_to_end", "table_io"]


# ------------------------------------------------------------------------------ images and sequences (issue 10)


@pytest.mark.parametrize("name", ["images", "sequences"])
def test_loop_benchmarks_report_side_by_side_ratios(name):
    """Every case: a ratio = reference time / method time measured in the same run, both absolute times, peak
    memory, and the reference verified against the method before it was timed."""
    res = _quick(name)
    assert res["figures"] and not any("skipped" in n and "not installed" not in n for n in res["notes"])
    mod = importlib.import_module(f"benchmarks.{name}")
    installed = set(__import__("bioanon").list_methods())
    expected = {c.method_id for c in mod.CASES} & installed
    assert {c["method"] for c in res["cases"]} == expected
    by_method = {c["method"]: c for c in res["cases"]}
    for f in res["figures"]:
        case = by_method[f["name"].split(": ")[1].split(" vs ")[0]]
        assert f["method_s"] >= 0 and f[name] == res[name]  # the images / sequences count
        if "loop_s" in f:  # vs the per-item loop
            assert f["value"] == pytest.approx(case["loop_seconds"] / case["method_seconds"], rel=1e-9)
            assert min(case["method_seconds_all"]) == case["method_seconds"]
            assert f["target"] == ">= 1" and f["passed"] == (f["value"] >= 1.0)
            assert "method_peak_mib" in f and "loop_peak_mib" in f
        else:  # vs the pure-Python loop, extrapolated from a subset
            assert f["python_s_extrapolated"] > 0 and "extrapolated" in f["reference"]
            assert f["value"] == pytest.approx(case["python_seconds_extrapolated"] / case["method_seconds"], rel=1e-9)
    for case in res["cases"]:
        assert case["loop_max_" + ("diff" if name == "images" else "abs_diff")] is not None
    python_cases = {c.method_id for c in mod.CASES if c.python is not None} & installed
    assert {c["method"] for c in res["cases"] if "python_seconds_extrapolated" in c} == python_cases


def test_image_references_compute_the_same_as_the_methods():
    """A reference that is off by a grey level more than allowed is refused: the ratio compares like with
    like. (The quick run above checked every real reference against its method.)"""
    from benchmarks import images

    table = images.make_images(4, 32)
    case = images.Case("face.gaussian_blur", lambda m, t, x: images.blur_loop(m, t, x) // 2 + 1, "wrong")
    with pytest.raises(AssertionError, match="per-image loop reference differs"):
        images.bench_case(case, table, python_images=1, repeats=1)
    right = images.Case("face.pixel_relocation", images.relocation_loop, "right", python=images.relocation_python)
    figs, info = images.bench_case(right, table, python_images=1, repeats=1)
    assert info["loop_max_diff"] == info["python_max_diff"] == 0 and len(figs) == 2


def test_sequence_references_compute_the_same_as_the_methods():
    from benchmarks import sequences

    tables = sequences.make_tables(8, 12, 16)
    wrong = sequences.Case("gait.coarsen_time", "gait", lambda m, t, x: x.copy(), "no coarsening")
    with pytest.raises(AssertionError, match="per-sequence loop reference differs"):
        sequences.bench_case(wrong, tables["gait"], python_sequences=1, repeats=1)
    # the pure-Python distance and the per-sequence wavefront agree with the textbook definition
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 7, 3)), rng.normal(size=(2, 9, 3))
    for kind in ("dtw", "frechet", "motion_dtw"):
        band = 9 if kind != "motion_dtw" else 3
        if kind == "motion_dtw":
            b = b[:, :7]
        wave = sequences.wavefront(a, b, kind, band)
        assert wave == pytest.approx([sequences.textbook(a[j], b[j], kind, band) for j in range(2)], rel=1e-12)


# ------------------------------------------------------------------------------------------ memory profile


def test_memory_profile_sees_an_allocation_in_its_phase_and_names_its_line():
    """The sampler charges a 64 MiB array to the phase that held it, and the traced sites name the line that
    allocated it (here, in a function of the test standing in for bioanon's code)."""
    import time
    import tracemalloc

    from benchmarks import memory

    if memory.rss_parts() == (0, 0):
        pytest.skip("reads /proc/self/status (Linux)")
    with memory.Sampler(trace=True) as sampler:

        def samples_taken(n):  # wait for a state: the sampler took n more samples
            target = len(sampler.samples) + n
            while len(sampler.samples) < target:
                time.sleep(0.001)

        with sampler.phase("before"):
            samples_taken(2)
        with sampler.phase("holds 64 MiB"):
            held = np.ones(2**23)  # 64 MiB, every page touched
            samples_taken(3)
            del held
    assert not tracemalloc.is_tracing()
    rows = {r["phase"]: r for r in memory.phase_table({"samples": sampler.samples, "phases": sampler.phases})}
    assert rows["holds 64 MiB"]["anon_high_mib"] - rows["before"]["anon_high_mib"] >= 60
    sites = memory.top_sites(sampler.snapshot)
    assert sites[0]["mib"] >= 60 and "test_benchmarks_smoke.py" in sites[0]["site"], sites
