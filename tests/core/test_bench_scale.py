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
    monkeypatch.setattr(sys, "argv", ["scale", "--only", "voice,growth"])
    monkeypatch.setenv(scale.ONLY_ENV, "")
    scale._take_options()
    assert sys.argv == ["scale"] and scale._only() == {"voice", "growth"}
    monkeypatch.setenv(scale.ONLY_ENV, "voices")
    with pytest.raises(SystemExit, match="unknown case"):
        scale._only()


def _fake_evaluate(calls):
    """A stand-in for one ``bioanon evaluate``: time and memory linear in the samples."""

    def evaluate(self, cfg, cache, jobs=1, tag="run", extra=(), env=None):
        p = cfg["dataset"]["params"]
        n = p["n_subjects"] * p["samples_per_subject"]
        calls.append((tag, n, jobs, cfg.get("rates")))
        assert tag.startswith("par-quiet-j1c") == ((env or {}) == {"BIOANON_CORES": "1"}), (tag, env)
        anon = 2 if "rates" in cfg or not tag.startswith("rates") else 0
        cores = int((env or {}).get("BIOANON_CORES", 2))
        return {
            "wall_s": 1.0 + n / 1000 / jobs * (1.5 if cores == 1 else 1.0),
            "peak_mib": 200.0 + n / 100,
            "cpu_s": 1.0,
            "machine_busy_s": 1.0 + n / 1000,
            "first_task_s": 0.5,
            "worker_idle_s": 0.25 * (jobs - 1),
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


def _no_voice(monkeypatch):
    """Leave out the voice case (tested on its own below): the fake evaluation knows the synthetic configs only."""
    monkeypatch.setattr(scale, "voice_case", lambda r, quick: ({}, []))


def test_orchestration_skips_what_would_not_fit(monkeypatch):
    calls = []
    monkeypatch.setattr(scale._Runner, "evaluate", _fake_evaluate(calls))
    _no_voice(monkeypatch)
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
    par = [(tag.split("-")[2], n) for tag, n, _, _ in calls if tag.startswith("par") and not tag.endswith("-all")]
    # 128k did not run: the largest size that did; 2 rounds quiet (with --jobs 1 on one core), 2 loaded
    quiet, loaded = [("j1", 32000), ("j2", 32000), ("j1c", 32000)], [("j1", 32000), ("j2", 32000)]
    assert par == quiet * 2 + loaded * 2
    # every subject identified: at the largest all-subjects size that ran
    assert [(tag.split("-")[2], n) for tag, n, _, _ in calls if tag.endswith("-all")] == [
        (j, 8000) for j, _ in quiet * 2 + loaded * 2
    ]
    names = [f["name"] for f in res["figures"]]
    assert sum("peak RSS" in n for n in names) == 3 and sum("speed-up" in n for n in names) == 4
    assert sum("every evaluation subject identified), quiet" in n for n in names) == 1
    fixed = [f for f in res["figures"] if "speed-up" in f["name"] and "fixed identity set" in f["name"]]
    q, lo = (next(f for f in fixed if f", {mode}" in f["name"]) for mode in ("quiet", "loaded"))
    assert q["value"] == pytest.approx(33 / 17) and q["speedup_over_one_core"] == pytest.approx(49 / 17, abs=1e-3)
    assert q["jobs_1_one_core_s"] == [49.0, 49.0] and q["machine_busy_s_jobs_2"] == [33.0, 33.0]
    assert q["first_task_s_jobs_2"] == [0.5, 0.5] and q["worker_idle_s_jobs_2"] == [0.25, 0.25]
    assert "speedup_over_one_core" not in lo and lo["value"] == pytest.approx(33 / 17)
    rates = next(f for f in res["figures"] if "rates-only" in f["name"])
    assert rates["value"] == 2 and rates["passed"] is False
    slope = next(f for f in res["figures"] if "exponent" in f["name"])
    assert slope["passed"] == (slope["value"] <= scale.EXPONENT_TARGET)


def test_max_samples_limits_every_case(monkeypatch):
    calls = []
    monkeypatch.setattr(scale._Runner, "evaluate", _fake_evaluate(calls))
    _no_voice(monkeypatch)
    monkeypatch.setenv(scale.MAX_SAMPLES_ENV, "8000")
    res = scale.run(quick=False)
    assert {n for _, n, _, _ in calls} == {8000}
    assert any("rates-only change: not measured" in n for n in res["notes"])
    assert not any("exponent" in f["name"] for f in res["figures"])  # one size: no slope


def test_only_runs_the_cases_named(monkeypatch):
    calls = []
    monkeypatch.setattr(scale._Runner, "evaluate", _fake_evaluate(calls))
    voice = []
    monkeypatch.setattr(scale, "voice_case", lambda r, quick: (voice.append(quick) or {"ran": True}, []))
    res = scale.run(quick=True, only={"voice"})
    assert calls == [] and voice == [True] and res["voice"] == {"ran": True}
    res = scale.run(quick=True, only={"growth"})
    assert {tag[:6] for tag, *_ in calls} == {"growth"} and voice == [True]
    assert not any("rates-only" in f["name"] or "speed-up" in f["name"] for f in res["figures"])
    n_calls = len(calls)
    res = scale.run(quick=True, only={"rates_only"})  # it reruns a growth run's cache: none ran
    assert len(calls) == n_calls and any("rates-only change: not measured" in n for n in res["notes"])


def _voice_installed():
    pytest.importorskip("soundfile")
    import bioanon

    if "voice.librispeech" not in bioanon.get_registry():
        pytest.skip("the voice plugin is not installed")


def test_librispeech_writer_gives_what_the_librispeech_source_reads(tmp_path):
    _voice_installed()
    import bioanon

    a = scale.write_librispeech(
        tmp_path / "a", "dev-clean", speakers=3, utterances=3, duration=0.2, first_id=100, seed=0
    )
    b = scale.write_librispeech(
        tmp_path / "b", "train-clean-100", speakers=2, utterances=2, duration=0.2, first_id=500, seed=1
    )
    top = tmp_path / "a" / "LibriSpeech"
    assert a["path"] == str(top / "dev-clean") and (top / "SPEAKERS.TXT").is_file()
    flacs = sorted(p.relative_to(top).as_posix() for p in top.rglob("*.flac"))
    assert len(flacs) == 9 and flacs[0] == "dev-clean/100/1000/100-1000-0000.flac"
    assert (top / "dev-clean/100/1000/100-1000.trans.txt").is_file()
    assert a["flac_bytes"] == sum(p.stat().st_size for p in top.rglob("*.flac"))
    table = bioanon.load_dataset("voice.librispeech", a["path"])
    assert table.num_rows == a["utterances"] == 9 and table.subject_names == a["speakers"] == ["100", "101", "102"]
    assert table.metadata["sample_rate"] == 16000
    assert set(table.attribute_names) == {"chapter", "text", "gender", "subset"}
    assert set(table.attribute("subset")) == {"dev-clean"} and set(table.attribute("gender")) <= {"F", "M"}
    assert all(isinstance(t, str) and t for t in table.attribute("text"))  # every utterance has its transcript
    assert sorted(set(table.attribute("chapter"))) == ["1000", "1001", "1010", "1011", "1020", "1021"]
    lengths = {len(x) for x in table.payload("audio")}
    assert lengths == {round(0.2 * 16000)}
    other = bioanon.load_dataset("voice.librispeech", b["path"])
    assert other.num_rows == 4 and not set(other.subject_names) & set(table.subject_names)  # disjoint speakers


def test_sample_rows_counts_the_per_sample_store_and_the_breakdown_names_the_tables(tmp_path):
    import numpy as np

    from bioanon.cache import Cache
    from bioanon.table import SampleTable

    cache = Cache(tmp_path / "cache", fsync=False)
    assert scale.sample_rows(tmp_path / "cache") == {}
    one, two = "a" * 32, "b" * 32
    cache.put_sample_rows(one, ["d1", "d2", "d3"], np.zeros((3, 4), np.float32))
    cache.put_sample_rows(one, ["d4", "d5"], np.ones((2, 4), np.float32))
    cache.put_sample_rows(one, ["d4", "d5"], np.ones((2, 4), np.float32))  # the same entry: stored once
    cache.put_sample_rows(two, ["d1"], np.zeros((1, 256), np.float32))
    (tmp_path / "cache" / "samples" / "aa" / one / "x.arrow.tmp-1-2").write_bytes(b"half written")
    assert scale.sample_rows(tmp_path / "cache") == {one: 5, two: 1}

    audio = [np.zeros(1000 + 10 * i, np.float32) for i in range(4)]
    table = SampleTable.from_arrays(
        subject=np.array(["s1", "s1", "s2", "s2"], dtype=object),
        payloads={"audio": audio},
        metadata={"source": "voice.librispeech", "sample_rate": 16000},
    )
    cache.put_table("c" * 32, table)
    cache.put_rows("d" * 32, "c" * 32, [0, 2])
    out = scale.cache_breakdown(tmp_path / "cache", top=2)
    assert out["tables_by_payload"]["audio"]["tables"] == 1
    assert out["tables_by_payload"]["(row selection)"]["tables"] == 1
    assert set(out["mib_by_kind"]) >= {"tables", "samples"}
    biggest = out["largest"][0]
    assert biggest["entry"] == f"tables/cc/{'c' * 32}.arrow"
    assert biggest["what"] == "table, 4 rows, payload audio, source voice.librispeech"
    assert len(out["largest"]) == 2


@pytest.mark.parametrize(
    ("cold_rows", "rerun_rows", "passed", "note"),
    [
        (40, 2, False, None),  # the rerun embedded two utterances again
        (40, 0, True, None),
        (0, 0, False, "embeddings computed without the per-sample store"),  # nothing to count: not a pass
        (42, 0, True, "some utterance was embedded more than once"),
    ],
)
def test_voice_case_counts_the_embeddings_a_rerun_stored(tmp_path, monkeypatch, cold_rows, rerun_rows, passed, note):
    """The voice case's figures from a faked corpus (40 utterances in all) and faked runs that store
    ``cold_rows`` then ``rerun_rows`` per-sample rows."""
    import numpy as np

    from bioanon.cache import Cache

    monkeypatch.setattr(scale, "voice_recognizer", lambda: ("voice.resemblyzer", "voice case: templates by it"))

    def corpus(root, subset, *, speakers, utterances, duration, first_id, seed):
        return {
            "path": str(root),
            "speakers": [str(first_id + i) for i in range(speakers)],
            "utterances": speakers * utterances,
            "flac_bytes": 1000 * speakers * utterances,
        }

    monkeypatch.setattr(scale, "write_librispeech", corpus)
    configs, jobs_of = [], []

    def evaluate(self, cfg, cache, jobs=1, tag="run", extra=()):
        configs.append(cfg)
        jobs_of.append(jobs)
        store = Cache(cache, fsync=False)
        n = cold_rows if len(configs) == 1 else rerun_rows
        store.put_sample_rows("e" * 32, [f"{tag}{i}" for i in range(n)], np.zeros((n, 256), np.float32))
        store.put_json("f" * 32, {"run": tag})  # so that the cache is never empty
        stages = {"templates": {"executed": 1, "cached": 0, "seconds": 1.0}}
        return {
            "wall_s": 2.0,
            "peak_mib": 500.0,
            "cpu_s": 2.0,
            "tasks": {"executed": 7, "cached": 0, "failed": 0},
            "by_stage": stages,
            "cache_bytes": scale.dir_bytes(cache),
        }

    monkeypatch.setattr(scale._Runner, "evaluate", evaluate)
    r = scale._Runner(tmp_path, 60.0)
    info, figures = scale.voice_case(r, quick=True)
    q = scale.VOICE_QUICK_SIZES
    assert (q["speakers"] + q["attacker_speakers"]) * q["utterances"] == 40  # what the fake corpus holds
    assert [c["rates"] for c in configs] == [scale.VOICE_RATES, scale.VOICE_RATES_AFTER, scale.VOICE_RATES]
    assert jobs_of == [1, 1, 2] and configs[2] == configs[0]  # the cold run again with --jobs 2
    before, after = ({k: v for k, v in c.items() if k != "rates"} for c in configs[:2])
    assert before == after  # a rates-only change
    assert configs[0]["templates"]["recognizer"] == "voice.resemblyzer" and "attacker_dataset" in configs[0]
    cold, speedup, recomputed, ratio = figures
    assert speedup["value"] == 1.0 and speedup["passed"] and speedup["jobs_2_s"] == 2.0
    assert recomputed["value"] == rerun_rows and recomputed["passed"] is passed
    assert recomputed["stored_cold"] == cold_rows and recomputed["stored_after"] == cold_rows + rerun_rows
    assert recomputed["utterances"] == 40
    assert any(note in n for n in r.notes) if note else not any("per-sample rows for" in n for n in r.notes)
    assert ratio["value"] == info["cache_bytes_after"] / 40_000 and info["cache_bytes_after"] > 0
    assert ratio["passed"] == (ratio["value"] <= scale.VOICE_CACHE_TARGET)
    assert cold["peak_mib"] == 500.0 and cold["unit"] == "s"


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
    n_speedups = 5 if res["voice"] else 4  # --jobs 2 quiet and loaded, two configs (and the voice case's cold run)
    assert (
        sum("peak RSS" in n for n in names) == 3 + len(everyone) and sum("speed-up" in n for n in names) == n_speedups
    )
    assert any("exponent" in n for n in names)
    dask = [f for f in res["figures"] if "Dask" in f["name"]]
    if not any("distributed is not installed" in n for n in res["notes"]):
        # measured and reported; not asserted equal: a worker's single-threaded BLAS may move a last bit, and
        # a histogram-based metric (D↔sys) can turn that into a visible difference on some machines
        assert len(dask) == 1 and dask[0]["rows"] > 0 and dask[0]["value"] >= 0, dask
    rates = next(f for f in res["figures"] if "rates-only" in f["name"])
    stages = res["rates_only"]["rerun_by_stage"]
    assert rates["value"] == sum(v["executed"] for s, v in stages.items() if s in scale.EMBEDDING_STAGES)
    voice = [f for f in res["figures"] if "voice case" in f["name"]]
    if res["voice"]:  # the voice plugin and soundfile are installed
        q = scale.VOICE_QUICK_SIZES
        n = (q["speakers"] + q["attacker_speakers"]) * q["utterances"]
        cold, speedup, recomputed, ratio = voice
        assert speedup["jobs_1_s"] > 0 and speedup["jobs_2_s"] > 0
        assert cold["value"] > 0 and cold["peak_mib"] > 50 and cold["tasks"] > 0
        assert recomputed["utterances"] == n and recomputed["stored_cold"] > 0
        assert recomputed["value"] == recomputed["stored_after"] - recomputed["stored_cold"]
        assert ratio["value"] > 0 and ratio["tables_by_payload"]["audio"]["tables"] >= 2
    else:
        assert voice == [] and any(n.startswith("voice case: not measured") for n in res["notes"])
    for f in res["figures"]:
        assert {"name", "value", "unit", "target", "passed"} <= set(f)
