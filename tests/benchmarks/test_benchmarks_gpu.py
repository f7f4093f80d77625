"""benchmarks.gpu: a quick CPU run of the harness, the skip without a GPU, how results.json is written, the
targets' verdicts and the utilization sampler (with a stand-in nvidia-smi). The full run needs a CUDA GPU."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu  # noqa: E402

torch = pytest.importorskip("torch")


def _installed() -> set[str]:
    import bioanon

    registry = bioanon.get_registry()
    keys = {c.key for c in gpu.CASES if all(m in registry for m in c.methods)}
    return keys if gpu.ORL.is_dir() else keys - {"fantomas_paper"}  # (skipped without the ORL folder)


def test_quick_run_on_the_cpu_records_every_case(tmp_path):
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"results": [{"benchmark": "table_io"}], "machine": {"cpus": 2}}))
    assert gpu.main(["--quick", "--results", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["results"] == [{"benchmark": "table_io"}] and doc["machine"] == {"cpus": 2}  # other keys kept
    res = doc["gpu"]
    assert res["quick"] is True and res["devices"] == ["cpu"] and res["figures"] == []  # no GPU: no ratios
    assert res["machine"]["cpu_count"] >= 1 and res["machine"]["torch_threads"] >= 1
    assert set(res["cases"]) == _installed() and res["cases"]
    for key, case in res["cases"].items():
        assert set(case["runs"]) == {"cpu"}, key
        run = case["runs"]["cpu"]
        assert "error" not in run, run
        assert run["seconds"] > 0 and run["cpu_threads"] >= 1
        if key in ("gait_eval", "gait_eval_eager"):
            assert run["tasks"] > 0 and run["train_s"] > 0  # gait.cnn trained inside the evaluation
            assert run["config"]["recognizers"][0]["id"] == "gait.cnn"
        elif key == "fantomas_paper":  # both models trained and judged (tiny: the figures say nothing)
            assert set(run["top1"]) == {"clear", "naive", "fantomas", "conv_only", *case["sizes"]["variants"]}
            assert all(0.0 <= v <= 1.0 for v in run["top1"].values()) and run["top1"]["clear"] > run["chance"]
            assert all(m["epochs_run"] >= 1 and m["ran_on"] == "cpu" for m in run["models"].values())
        else:
            assert run["timed_region"] in ("train_net", "fit") and run["fit_s"] >= run["seconds"]
            assert run["ran_on"] == "cpu" and run["epochs_run"] >= 1 and run["seconds_per_epoch"] > 0
            assert run["params"]["epochs"] == case["sizes"]["params"]["epochs"]
    # the networks that train through bioanon.nettrain.train_net are timed there
    for key in {"arcface", "xvector"} & set(res["cases"]):
        assert res["cases"][key]["runs"]["cpu"]["timed_region"] == "train_net"


def test_without_cuda_the_run_says_it_skips_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "results.json"
    before = json.dumps({"gpu": {"quick": False, "date": "earlier", "figures": [1]}, "results": []})
    out.write_text(before)
    assert gpu.main(["--results", str(out)]) == 0
    said = capsys.readouterr().out
    assert "no CUDA GPU" in said and "skipped" in said and "nothing written" in said
    assert out.read_text() == before
    missing = tmp_path / "none.json"
    assert gpu.main(["--results", str(missing), "--device", "cuda:0"]) == 0
    assert not missing.exists()


def test_a_quick_run_never_replaces_full_figures(tmp_path):
    out = tmp_path / "results.json"
    full = json.dumps({"gpu": {"quick": False, "date": "earlier"}})
    out.write_text(full)
    assert gpu.write({"quick": True}, out) is False and out.read_text() == full
    assert gpu.write({"quick": False, "date": "now"}, out) is True
    assert json.loads(out.read_text())["gpu"]["date"] == "now"
    assert not list(tmp_path.glob(".results.json.*"))  # the atomic write left no temporary file


def _runs(cpu_s: float, gpu_s: float, **gpu_extra):
    return {
        "cpu": {"device": "cpu", "seconds": cpu_s, "cpu_threads": 16},
        "cuda:0": {
            "device": "cuda:0",
            "seconds": gpu_s,
            "gpu_util_mean": 70.0,
            "gpu_util_max": 99.0,
            "peak_allocated_mib": 512.0,
            "util_samples": 10,
            **gpu_extra,
        },
    }


def test_targets_are_recorded_with_their_verdict():
    by_key = {c.key: c for c in gpu.CASES}
    fig, busy = gpu._case_figures(
        by_key["gait_eval"], "gait", _runs(60.0, 10.0, method_device_param=True, gpu_util_mean_training=55.0)
    )
    assert fig["value"] == pytest.approx(6.0) and fig["target"] == ">= 5" and fig["passed"]
    assert fig["cpu_s"] == 60.0 and fig["gpu_s"] == 10.0 and fig["cpu_threads"] == 16
    assert busy["value"] == 55.0 and busy["target"] == ">= 50 %" and busy["passed"]
    fig, busy = gpu._case_figures(by_key["gait_eval"], "gait", _runs(60.0, 15.0, method_device_param=True))
    assert not fig["passed"] and not busy["passed"] and math.isnan(busy["value"])  # 4×, no utilization figure
    fig, _ = gpu._case_figures(by_key["gait_eval"], "gait", _runs(60.0, 5.0, method_device_param=False))
    assert not fig["passed"] and fig["method_on_gpu"] is False  # fast, but not because of the GPU
    speed, util = gpu._case_figures(by_key["arcface"], "arcface", _runs(20.0, 1.0, ran_on="cuda:0"))
    assert speed["value"] == pytest.approx(20.0) and speed["target"] == "(context)"
    assert util["unit"] == "%" and util["value"] == 70.0 and util["target"] == ">= 50 %" and util["passed"]
    _, util = gpu._case_figures(by_key["xvector"], "x", _runs(2.0, 1.0, ran_on="cuda:0", gpu_util_mean=40.0))
    assert not util["passed"]
    _, util = gpu._case_figures(by_key["xvector"], "x", _runs(2.0, 1.0, ran_on=None, gpu_util_mean=None))
    assert math.isnan(util["value"]) and not util["passed"] and util["method_on_gpu"] is False
    assert gpu._case_figures(by_key["xvector"], "x", {"cpu": {"error": "boom"}}) == []


def test_the_sampler_reads_nvidia_smi_in_the_background(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\necho "$@" >> ' + str(tmp_path / "args") + "\necho '75, 1234'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    with gpu.GpuSampler(1, interval=0.05) as sampler:
        t0 = time.perf_counter()
        time.sleep(0.4)
        t1 = time.perf_counter()
    assert sampler.error is None
    stats = sampler.stats([(t0, t1)])
    assert stats["gpu_util_mean"] == 75.0 and stats["gpu_util_max"] == 75.0
    assert stats["gpu_mem_used_max_mib"] == 1234.0 and stats["util_samples"] >= 2
    assert "-i 5" in (tmp_path / "args").read_text()  # torch's cuda:1 is the second visible GPU
    assert sampler.stats([(t1 + 10, t1 + 20)])["gpu_util_mean"] is None


def test_the_sampler_without_nvidia_smi_gives_no_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with gpu.GpuSampler(0) as sampler:
        pass
    stats = sampler.stats([(0.0, float("inf"))])
    assert stats["gpu_util_mean"] is None and "nvidia-smi" in stats["util_error"]


def test_the_runner_keeps_the_gpu_figures(tmp_path):
    from benchmarks.run import BENCHMARKS, main

    assert "gpu" not in BENCHMARKS  # its own command (make bench-gpu), its own key
    out = tmp_path / "r.json"
    out.write_text(json.dumps({"gpu": {"quick": False, "figures": []}}))
    assert main(["table_io", "--quick", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gpu"] == {"quick": False, "figures": []} and doc["results"][0]["benchmark"] == "table_io"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_quick_run_on_the_gpu(tmp_path):
    out = tmp_path / "results.json"
    assert gpu.main(["--quick", "--device", "cuda", "--results", str(out)]) == 0
    res = json.loads(out.read_text())["gpu"]
    assert res["devices"][0] == "cpu" and res["devices"][1].startswith("cuda:")
    assert res["machine"]["gpu"]["name"]
    for case in res["cases"].values():
        run = case["runs"][res["devices"][1]]
        assert "error" not in run, run
        assert run["peak_allocated_mib"] >= 0 and "gpu_util_mean" in run
        if "cpu" in case["runs"]:  # GPU-only cases (the eager comparison) have no speed-up
            assert case["speedup"] > 0
    assert res["figures"]


def test_the_paper_preset_restoration_is_judged_against_clear_level():
    by_key = {c.key: c for c in gpu.CASES}
    models = {k: {"seconds_per_epoch": 0.2, "epochs_run": 50} for k in ("fantomas", "conv_only")}
    run = {"device": "cuda:0", "seconds": 30.0, "models": models, "chance": 1 / 16}
    good = run | {"top1": {"clear": 0.9, "naive": 0.1, "fantomas": 0.8, "conv_only": 0.2}}
    restored, ablation = gpu._case_figures(by_key["fantomas_paper"], "f", {"cuda:0": good})
    assert restored["value"] == pytest.approx(0.8 / 0.9) and restored["passed"] and ablation["passed"]
    assert restored["fantomas_s_per_epoch"] == 0.2 and restored["chance"] == 0.062
    bad = run | {"top1": {"clear": 0.9, "naive": 0.1, "fantomas": 0.6, "conv_only": 0.5}}
    restored, ablation = gpu._case_figures(by_key["fantomas_paper"], "f", {"cuda:0": bad})
    assert not restored["passed"] and not ablation["passed"]
    assert gpu._case_figures(by_key["fantomas_paper"], "f", {"cpu": good}) == []  # judged on a GPU run only
