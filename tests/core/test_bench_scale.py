"""benchmarks.scale (issue 29): its configs, the size estimates that skip a run, the exponent, the orchestration
(with a fake ``bioanon evaluate``) and one quick run of the real thing."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import scale  # noqa: E402 (importable only once ROOT is on sys.path)


def test_configs_are_valid_and_the_identity_set_is_fixed():
    from bioanon.evaluation.config import load_config

    for subjects, counts in ((scale.SUBJECTS[0], scale.COUNTS), (scale.QUICK_SUBJECTS[0], scale.QUICK_COUNTS)):
        cfg = load_config(scale.bench_config(subjects, counts))
        n_eval = round(subjects * cfg.rates.evaluation)
        assert max(counts) <= n_eval  # every size selects the same numbers of subjects
        assert cfg.selection.subject_counts == tuple(sorted(counts, reverse=True))
    assert load_config(scale.bench_config(400, None)).selection.subject_counts == ()  # every evaluation subject
    before = load_config(scale.bench_config(1600, scale.COUNTS)).to_dict()
    after = load_config(scale.bench_config(1600, scale.COUNTS, scale.RATES_AFTER)).to_dict()
    assert {k for k in before if before[k] != after[k]} == {"rates"}  # a rates-only change


def test_estimates_skip_a_run_over_memory_disk_or_time():
    prev = {"samples": 8000, "wall_s": 10.0, "peak_mib": 400.0, "cache_bytes": 100 * scale.MIB}
    est = scale.estimate(prev, 32000)
    assert est["wall_s"] == pytest.approx(10 * 4 * 1.3) and est["peak_bytes"] == pytest.approx(400 * 4 * 1.3 * 2**20)
    assert scale.estimate(prev, 32000, power=2)["wall_s"] == pytest.approx(10 * 16 * 1.3)
    ok = {"memory": 8 * 2**30, "disk": 8 * 2**30, "time_cap_s": 1200.0}
    assert scale.skip_reason(est, **ok) is None
    assert "MemAvailable" in scale.skip_reason(est, **{**ok, "memory": 2**30})
    assert "free disk" in scale.skip_reason(est, **{**ok, "disk": 2**20})
    assert "time cap" in scale.skip_reason(est, **{**ok, "time_cap_s": 30.0})
    assert scale.skip_reason(est, memory=None, disk=None, time_cap_s=1e9) is None


def test_exponent_and_memory_target():
    assert scale.loglog_exponent([1, 4, 16], [2.0, 8.0, 32.0]) == pytest.approx(1.0)
    assert scale.loglog_exponent([1, 4, 16], [1.0, 4.5, 4.5**2]) == pytest.approx(scale.EXPONENT_TARGET)
    assert scale.EXPONENT_TARGET == pytest.approx(math.log(4.5) / math.log(4))
    assert scale.rss_limit_bytes(8000) == 3 * 8000 * 256 * 4 + 300 * 2**20


def test_module_options_go_through_the_environment(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["scale", "--max-samples", "32000", "--quick", "--time-cap=60"])
    for name in (scale.MAX_SAMPLES_ENV, scale.TIME_CAP_ENV):  # set, then unset: monkeypatch restores both after
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    scale._take_options()
    assert sys.argv == ["scale", "--quick"]
    import os

    assert os.environ[scale.MAX_SAMPLES_ENV] == "32000" and os.environ[scale.TIME_CAP_ENV] == "60"


def _fake_evaluate(calls):
    """A stand-in for one ``bioanon evaluate``: time and memory linear in the samples."""

    def evaluate(self, cfg, cache, jobs=1, tag="run", extra=()):
        p = cfg["dataset"]["params"]
        n = p["n_subjects"] * p["samples_per_subject"]
        calls.append((tag, n, jobs, cfg.get("rates")))
        anon = 2 if "rates" in cfg or not tag.startswith("rates") else 0
        return {
            "wall_s": 1.0 + n / 1000 / jobs,
            "peak_mib": 200.0 + n / 100,
            "cpu_s": 1.0,
            "tasks": {"executed": 19, "cached": 0, "failed": 0},
            "by_stage": {
                "split": {"executed": 1, "cached": 0, "seconds": 0.1},
                "anonymize": {"executed": anon, "cached": 0, "seconds": 0.2},
            },
            "classes": 8,
            "probes": 80,
            "cache_bytes": n * 1024,
        }

    return evaluate


def test_orchestration_skips_what_would_not_fit(monkeypatch):
    calls = []
    monkeypatch.setattr(scale._Runner, "evaluate", _fake_evaluate(calls))
    monkeypatch.delenv(scale.MAX_SAMPLES_ENV, raising=False)
    # room for 8k and 32k (≈ 520 MiB · 1.3) but not for 128k
    monkeypatch.setattr(scale, "mem_available", lambda: 1500 * scale.MIB)
    res = scale.run(quick=False, max_samples=None, time_cap_s=1e6)
    growth = [n for tag, n, _, _ in calls if tag.startswith("growth")]
    assert growth == [8000, 32000]
    assert any("128,000 samples skipped" in n and "MemAvailable" in n for n in res["notes"])
    # all subjects is extrapolated as quadratic: 280 MiB at 8k → 16 × 1.3 × 280 MiB at 32k, over the 1,500
    assert [n for tag, n, _, _ in calls if tag.startswith("all")] == [8000]
    assert any(n.startswith("all subjects at 32,000 samples skipped") for n in res["notes"])
    assert [(n, r) for tag, n, _, r in calls if tag.startswith("rates")] == [(32000, scale.RATES_AFTER)]
    par = [(n, j) for tag, n, j, _ in calls if tag.startswith("par")]
    assert par == [(32000, 1), (32000, 2)] * 4  # 128k did not run: the largest size that did; 2 rounds × 2 modes
    names = [f["name"] for f in res["figures"]]
    assert sum("peak RSS" in n for n in names) == 3 and sum("speed-up" in n for n in names) == 2
    rates = next(f for f in res["figures"] if "rates-only" in f["name"])
    assert rates["value"] == 2 and rates["passed"] is False
    slope = next(f for f in res["figures"] if "exponent" in f["name"])
    assert slope["passed"] == (slope["value"] <= scale.EXPONENT_TARGET)


def test_max_samples_limits_every_case(monkeypatch):
    calls = []
    monkeypatch.setattr(scale._Runner, "evaluate", _fake_evaluate(calls))
    monkeypatch.setenv(scale.MAX_SAMPLES_ENV, "8000")
    res = scale.run(quick=False)
    assert {n for _, n, _, _ in calls} == {8000}
    assert any("rates-only change: not measured" in n for n in res["notes"])
    assert not any("exponent" in f["name"] for f in res["figures"])  # one size: no slope


@pytest.mark.slow
def test_quick_run_measures_every_case():
    res = scale.run(quick=True, max_samples=None)
    assert res["benchmark"] == "scale" and res["quick"] is True
    assert [g["samples"] for g in res["growth"]] == [20 * s for s in scale.QUICK_SUBJECTS]
    for g in res["growth"]:
        assert g["peak_mib"] > 50 and g["wall_s"] > 0 and g["cache_bytes"] > g["payload_bytes"]
        assert g["classes"] == max(scale.QUICK_COUNTS) and g["tasks"]["failed"] == 0
    # every evaluation subject; on a busy machine the larger run may be skipped by its time estimate, with a note
    everyone = [a["classes"] for a in res["all_subjects"]]
    skipped = any(n.startswith("all subjects at 1,600 samples skipped") for n in res["notes"])
    assert everyone == [8, 32] or (everyone == [8] and skipped), (everyone, res["notes"])
    names = [f["name"] for f in res["figures"]]
    assert sum("peak RSS" in n for n in names) == 3 + len(everyone) and sum("speed-up" in n for n in names) == 2
    assert any("exponent" in n for n in names)
    dask = [f for f in res["figures"] if "Dask" in f["name"]]
    if not any("distributed is not installed" in n for n in res["notes"]):
        # measured and reported; not asserted equal: a worker's single-threaded BLAS may move a last bit, and
        # a histogram-based metric (D↔sys) can turn that into a visible difference on some machines
        assert len(dask) == 1 and dask[0]["rows"] > 0 and dask[0]["value"] >= 0, dask
    rates = next(f for f in res["figures"] if "rates-only" in f["name"])
    stages = res["rates_only"]["rerun_by_stage"]
    assert rates["value"] == sum(v["executed"] for s, v in stages.items() if s in scale.EMBEDDING_STAGES)
    for f in res["figures"]:
        assert {"name", "value", "unit", "target", "passed"} <= set(f)
