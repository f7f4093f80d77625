"""voice.kaldi: Kaldi-style data directories with VoicePrivacy enrolment/trial lists, evaluated end to end
(role-based enrolment split, EER per sex and per subset, VoicePrivacy scenario names in the report), and the
per-group breakdown against a hand-computed case."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bioanon
from bioanon.errors import DataError
from bioanon.evaluation.scoring import breakdown_metrics

# per sex: 6 evaluation speakers (2 enrolment + 3 trial utterances each) and 2 training-only speakers
N_EVAL, N_TRAIN, N_ENROL, N_TRIAL = 6, 2, 2, 3


def _write_kaldi(root: Path) -> dict:
    """A VoicePrivacy-style ``data/`` folder under ``root`` made of synthetic speech: ``libri_dev_enrolls``
    (with ``enrolls``), ``libri_dev_trials_f`` / ``libri_dev_trials_m`` (with ``trials``) and ``train`` (no
    lists); wav.scp paths are relative to ``root`` (the recipe folder), as Kaldi recipes write them."""
    import soundfile as sf

    from bioanon_voice.synthetic import SyntheticVoice

    per = N_ENROL + N_TRIAL
    t = SyntheticVoice(
        n_speakers=40, utterances_per_speaker=per, duration=0.3, sample_rate=8000, with_features=False, seed=1
    ).load()
    gender = dict(zip(t.subjects, t.attribute("gender"), strict=True))
    by_sex = {
        s: [spk for spk in t.subject_names if gender[spk] == g][: N_EVAL + N_TRAIN]
        for s, g in (("f", "female"), ("m", "male"))
    }
    assert all(len(v) == N_EVAL + N_TRAIN for v in by_sex.values())
    audio = t.payload("audio")
    rows_of = {spk: np.flatnonzero(t.subjects == spk) for spk in t.subject_names}
    (root / "wav").mkdir(parents=True)
    dirs: dict[str, dict[str, list[str]]] = {}

    def add(subset: str, file: str, line: str) -> None:
        dirs.setdefault(subset, {}).setdefault(file, []).append(line)

    words = ["one", "two", "three", "four", "five"]
    truth = {"sex": {}, "role": {}, "subset": {}}
    for sex, speakers in by_sex.items():
        for k, spk in enumerate(speakers):
            sid = f"{sex}{k}"
            train = k >= N_EVAL
            for j, row in enumerate(rows_of[spk]):
                utt = f"{sid}-{j}"
                sf.write(root / "wav" / f"{utt}.wav", audio[row], 8000)
                subset = "train" if train else ("libri_dev_enrolls" if j < N_ENROL else f"libri_dev_trials_{sex}")
                add(subset, "wav.scp", f"{utt} wav/{utt}.wav")
                add(subset, "utt2spk", f"{utt} {sid}")
                add(subset, "text", f"{utt} {words[j % 5].upper()} {words[(j + k) % 5].upper()}")
                truth["sex"][utt], truth["subset"][utt] = sex, subset
                if not train and j < N_ENROL:
                    add(subset, "enrolls", utt)
                    truth["role"][utt] = "enrolment"
                elif not train:
                    add(subset, "trials", f"{sid} {utt} target")
                    other = f"{sex}{(k + 1) % N_EVAL}"
                    add(subset, "trials", f"{other} {utt} nontarget")
                    truth["role"][utt] = "trial"
                if f"{sid} {sex}" not in dirs[subset].setdefault("spk2gender", []):
                    add(subset, "spk2gender", f"{sid} {sex}")
    data = root / "data"
    for subset, files in dirs.items():
        (data / subset).mkdir(parents=True)
        for name, lines in files.items():
            (data / subset / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return truth


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache for the evaluations of this module, so they share their splits, anonymizations and scores."""
    return tmp_path_factory.mktemp("kaldi-cache")


@pytest.fixture(scope="module")
def kaldi_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("vpc")
    truth = _write_kaldi(root)
    return root / "data", truth


def test_kaldi_source_reads_columns_and_lists(kaldi_dir):
    data, truth = kaldi_dir
    t = bioanon.load_dataset("voice.kaldi", str(data))
    n = (N_EVAL + N_TRAIN) * 2 * (N_ENROL + N_TRIAL)
    assert len(t) == n and t.num_subjects == 2 * (N_EVAL + N_TRAIN)
    assert set(t.attribute_names) <= set(bioanon.get_registry().get("voice.kaldi").attribute_names)
    assert t.metadata["protocol"] == "voiceprivacy" and t.metadata["sample_rate"] == 8000
    ids = list(t.sample_ids)
    assert set(ids) == set(truth["sex"])
    for col in ("sex", "subset"):
        assert dict(zip(ids, t.attribute(col), strict=True)) == truth[col]
    role = dict(zip(ids, t.attribute("role"), strict=True))
    assert {u: r for u, r in role.items() if r is not None} == truth["role"]
    assert sum(r is None for r in role.values()) == 2 * N_TRAIN * (N_ENROL + N_TRIAL)  # train: no list
    text = dict(zip(ids, t.attribute("text"), strict=True))
    assert text["f0-0"] == "ONE ONE" and text["m1-2"] == "THREE FOUR"
    # one data directory, chosen by name; no lists there: no role column, no protocol
    one = bioanon.load_dataset("voice.kaldi", str(data / "train"))
    assert "role" not in one.attribute_names and "protocol" not in one.metadata
    assert set(one.attribute("subset")) == {"train"}
    sub = bioanon.load_dataset("voice.kaldi", str(data), subsets=("libri_dev_trials_f",))
    assert set(sub.attribute("role")) == {"trial"} and set(sub.attribute("sex")) == {"f"}


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _error(path: Path, **params) -> str:
    with pytest.raises(DataError) as e:
        bioanon.load_dataset("voice.kaldi", str(path), **params)
    return str(e.value)


def test_kaldi_bad_inputs_name_file_and_line(kaldi_dir, tmp_path):
    data, _ = kaldi_dir
    d = _copy(data / "libri_dev_trials_f", tmp_path / "vpc" / "data" / "trials_f")
    (tmp_path / "vpc" / "wav").symlink_to(data.parent / "wav")
    assert len(bioanon.load_dataset("voice.kaldi", str(d))) == N_EVAL * N_TRIAL  # the copy itself is fine

    def edit(name: str, fn) -> None:
        f = d / name
        f.write_text(fn(f.read_text(encoding="utf-8")), encoding="utf-8")

    scp = (d / "wav.scp").read_text(encoding="utf-8")
    u2s = (d / "utt2spk").read_text(encoding="utf-8")
    # an utterance of utt2spk that wav.scp lacks
    edit("utt2spk", lambda s: s + "ghost f0\n")
    msg = _error(d)
    assert "utt2spk, line" in msg and "'ghost'" in msg and "wav.scp" in msg
    (d / "utt2spk").write_text(u2s, encoding="utf-8")
    # an unknown utterance in the trials list
    edit("trials", lambda s: "f0 nobody target\n" + s)
    msg = _error(d)
    assert "trials, line 1" in msg and "'nobody'" in msg
    edit("trials", lambda s: s.split("\n", 1)[1])
    # a target trial of the wrong speaker
    edit("trials", lambda s: s.replace(" target", " nontarget", 1))
    assert "trials, line 1" in _error(d)
    edit("trials", lambda s: s.replace(" nontarget", " target", 1))
    # decode-only pipes are read (the file itself), any other command is refused naming the line
    lines = scp.splitlines()
    u0, p0 = lines[0].split()
    u1, p1 = lines[1].split()
    decoded = [f"{u0} sox {p0} -t wav - |", f"{u1} flac -d -c -s {p1} |", *lines[2:]]
    (d / "wav.scp").write_text("\n".join(decoded) + "\n", encoding="utf-8")
    t = bioanon.load_dataset("voice.kaldi", str(d))
    assert len(t) == N_EVAL * N_TRIAL and {u0, u1} <= set(t.sample_ids)
    for cmd in (f"sox {p0} -t wav - speed 1.1 |", f"sph2pipe -f wav {p0} |", f"{p0}.ark:12"):
        (d / "wav.scp").write_text("\n".join([f"{u0} {cmd}", *lines[1:]]) + "\n", encoding="utf-8")
        msg = _error(d)
        assert "wav.scp, line 1" in msg and "not supported" in msg, msg
    # a missing audio file
    edit("wav.scp", lambda s: "f0-2 wav/missing.wav\n" + scp.split("\n", 1)[1])
    msg = _error(d)
    assert "wav.scp, line 1" in msg and "missing.wav" in msg and "not found" in msg
    (d / "wav.scp").write_text(scp, encoding="utf-8")
    # a bad sex, a missing utt2spk, a missing path
    edit("spk2gender", lambda s: s.replace(" f\n", " x\n", 1))
    assert "spk2gender, line 1" in _error(d)
    edit("spk2gender", lambda s: s.replace(" x\n", " f\n", 1))
    (d / "utt2spk").unlink()
    assert "no utt2spk" in _error(d)
    assert "no such file" in _error(tmp_path / "nowhere")
    assert "no wav.scp" in _error(tmp_path / "vpc" / "wav")


class _Scores:
    def __init__(self, scores, classes):
        self.scores, self.classes = np.asarray(scores, float), np.asarray(classes)


def test_breakdown_against_hand_computed_case():
    """Speakers A, B female, C, D male; one probe each. Within the female group the mated scores are
    {0.9, 0.4} and the non-mated {0.5, 0.1}: ROC convex hull (P_fa, P_miss) = (1, 0), (0.5, 0), (0, 0.5),
    (0, 1), so EER = 0.25; PAV of the pooled sorted labels N T N T gives posteriors 0, ½, ½, 1, i.e. LLRs
    −∞, 0, 0, +∞ at the empirical prior, so min Cllr = ½(½·1 + ½·1) = 0.5 bits. The male group is separated
    (EER 0, min Cllr 0). The high cross-sex scores must not enter (same-sex trials only)."""
    classes = ["A", "B", "C", "D"]
    S = [
        [0.9, 0.5, 0.95, 0.95],  # probe of A
        [0.1, 0.4, 0.95, 0.95],  # probe of B
        [0.99, 0.99, 0.8, 0.2],  # probe of C
        [0.99, 0.99, 0.3, 0.7],
    ]  # probe of D
    rows = breakdown_metrics(
        _Scores(S, classes),
        np.array(classes),
        {"sex": np.array(["f", "f", "m", "m"], dtype=object), "subset": np.array(["x", "x", None, "x"], dtype=object)},
    )
    got = {(r["by"], r["group"], r["metric"]): r for r in rows}
    assert got[("sex", "f", "eer")]["value"] == pytest.approx(0.25)
    assert got[("sex", "f", "min_cllr")]["value"] == pytest.approx(0.5)
    assert got[("sex", "m", "eer")]["value"] == pytest.approx(0.0)
    assert got[("sex", "m", "min_cllr")]["value"] == pytest.approx(0.0, abs=1e-12)
    f = got[("sex", "f", "eer")]
    assert (f["n_probes"], f["n_subjects"], f["n_mated"], f["n_nonmated"]) == (2, 2, 2, 2)
    # the missing value belongs to no group; subset x has probes of A, B, D (3 mated, 6 non-mated)
    assert {k[1] for k in got if k[0] == "subset"} == {"x"}
    assert got[("subset", "x", "eer")]["n_nonmated"] == 6
    # a group meeting a single subject has no non-mated scores: NaN with a note
    one = breakdown_metrics(_Scores(S, classes), np.array(classes), {"who": np.array(["a", "b", "b", "b"])})
    a = [r for r in one if r["group"] == "a"]
    assert all(math.isnan(r["value"]) and "non-mated" in r["note"] for r in a)


def _config(data: Path) -> dict:
    return {
        "name": "vpc",
        "seed": 0,
        "repeats": 1,
        "dataset": {"source": "voice.kaldi", "path": str(data)},
        "rates": {"background": 0.0, "attacker": 0.25, "evaluation": 0.75, "enrolment": 0.5},
        "anonymizers": [{"id": "voice.pitch_shift", "name": "pitch", "params": {"semitones": 4.0}}],
        "recognizers": [{"id": "voice.lda"}],
        "scenarios": ["naive", "lazy", "parrot"],
        "selection": {"selectors": ["random"], "random_draws": 1},
        "report": {"bootstrap": 0},
    }


def test_kaldi_end_to_end_per_sex_eer_and_voiceprivacy_names(kaldi_dir, shared_cache, tmp_path):
    data, truth = kaldi_dir
    cfg = _config(data)
    result = bioanon.evaluate(cfg, out_dir=tmp_path / "runs", cache=shared_cache, progress=False)
    assert not result.failures, result.failures
    run = result.run_dir
    # the split follows the lists: training-only speakers are attacker data, evaluation subjects are probed with
    # their trial utterances only (3 per subject)
    lineage = json.loads((run / "lineage.json").read_text())[0]["subjects"]
    train_spk = {f"{s}{k}" for s in "fm" for k in range(N_EVAL, N_EVAL + N_TRAIN)}
    assert train_spk <= set(lineage["attacker"]) and not train_spk & set(lineage["evaluation"])
    n_eval = len(lineage["evaluation"])
    m = result.metrics
    assert set(m.n_probes) == {n_eval * N_TRIAL}
    # per-group rows in the results (and the file), for every scenario
    b = pd.read_parquet(run / "breakdown.parquet")
    assert result.breakdown is not None and len(result.breakdown) == len(b) > 0
    sex = b[b.by == "sex"]
    assert set(sex.group) == {"f", "m"} and set(sex.metric) == {"eer", "min_cllr"}
    assert set(sex.scenario) == {"clear", "naive", "lazy", "parrot"}
    assert set(b[b.by == "subset"].group) == {"libri_dev_trials_f", "libri_dev_trials_m"}  # enrolls: no probes
    for _, r in sex.iterrows():
        assert r.n_probes == N_TRIAL * r.group_subjects and 0.0 <= r.value <= 1.0 + 1e-9
    clear = sex[(sex.scenario == "clear") & (sex.metric == "eer")]
    assert clear.value.min() < 0.3  # the clear attack verifies well in one sex at least (synthetic voices)
    assert any("not enrolled and probed: 4 of 16 subjects" in w for w in result.warnings), result.warnings
    # subset and sex groups coincide here (trials_f = female trials)
    for g, sub in (("f", "libri_dev_trials_f"), ("m", "libri_dev_trials_m")):
        a = sex[sex.group == g].set_index(["scenario", "metric"]).value
        c = b[(b.by == "subset") & (b.group == sub)].set_index(["scenario", "metric"]).value
        pd.testing.assert_series_equal(a.sort_index(), c.sort_index(), check_names=False)
    env = json.loads((run / "environment.json").read_text())
    assert env["data"] == {"protocol": "voiceprivacy", "enrolment": "role", "breakdown": ["sex", "subset"]}
    # the report: the per-group table, VoicePrivacy names, the role-based split
    html = result.report_path.read_text(encoding="utf-8").replace("<wbr>", "")  # headers may break after . and _
    assert "EER and min Cllr per group" in html and "sex = f" in html and "sex = m" in html
    assert "subset = libri_dev_trials_f" in html
    for name, sid in (("ignorant", "naive"), ("lazy-informed", "lazy"), ("semi-informed", "parrot")):
        assert f"{name} ({sid})" in html
    assert "role</code> column" in html
    # results keep bioanon's ids
    assert set(m.scenario) == {"clear", "naive", "lazy", "parrot"}
    # an explicit breakdown, and one naming a missing column (refused before any work)
    cfg2 = {**cfg, "report": {"bootstrap": 0, "breakdown": ["sex"]}}
    r2 = bioanon.evaluate(cfg2, out_dir=None, cache=shared_cache, progress=False, report=False)
    assert set(r2.breakdown.by) == {"sex"}
    cfg3 = {**cfg, "report": {"bootstrap": 0, "breakdown": ["age"]}}
    with pytest.raises(bioanon.ConfigError, match="report.breakdown: .* no attribute column 'age'"):
        bioanon.evaluate(cfg3, out_dir=None, cache=shared_cache, progress=False, report=False)


def test_kaldi_text_gives_wer_in_the_report(kaldi_dir, shared_cache, tmp_path):
    """The ``text`` column feeds ``voice.asr_wer`` (VoicePrivacy's utility measure) beside the per-sex EER."""
    pytest.importorskip("pocketsphinx", reason="voice.asr_wer needs pocketsphinx (pip install 'bioanon-voice[asr]')")
    data, _ = kaldi_dir
    cfg = {
        **_config(data),
        "utility": [
            {
                "id": "voice.asr_wer",
                "name": "wer",
                "params": {"vocabulary": ["one", "two", "three", "four", "five"], "words": "any"},
            }
        ],
    }
    result = bioanon.evaluate(cfg, out_dir=tmp_path / "runs", cache=shared_cache, progress=False)
    assert not result.failures, result.failures
    u = result.utility
    assert list(u.measure) == ["wer"] and np.isfinite(u.value).all() and np.isfinite(u.clear_value).all()
    html = result.report_path.read_text(encoding="utf-8")
    assert "wer" in html and "sex = f" in html and "ignorant (naive)" in html


def test_kaldi_voiceprivacy_setup_with_attacker_dataset(kaldi_dir, shared_cache):
    """The challenge's setup: the attacker trains on another directory ([attacker_dataset]), every listed speaker
    is evaluated (rates 0 / 1), enrolled on its enrolls utterances and probed with its trials."""
    data, _ = kaldi_dir
    lists = ["libri_dev_enrolls", "libri_dev_trials_f", "libri_dev_trials_m"]
    cfg = {
        **_config(data),
        "dataset": {"source": "voice.kaldi", "path": str(data), "params": {"subsets": lists}},
        "attacker_dataset": {"source": "voice.kaldi", "path": str(data), "params": {"subsets": ["train"]}},
        "rates": {"background": 0.0, "evaluation": 1.0},
    }
    result = bioanon.evaluate(cfg, out_dir=None, cache=shared_cache, progress=False, report=False)
    assert not result.failures, result.failures
    assert set(result.metrics.n_probes) == {2 * N_EVAL * N_TRIAL}
    sex = result.breakdown[result.breakdown.by == "sex"]
    assert set(sex.n_probes) == {N_EVAL * N_TRIAL} and set(sex.group_subjects) == {N_EVAL}


def test_breakdown_config_key():
    from bioanon.evaluation.config import load_config

    base = {
        "dataset": {"source": "any.synthetic"},
        "anonymizers": [{"id": "any.gaussian_noise"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
    }
    assert load_config(base).report.breakdown == "auto"
    cfg = load_config({**base, "report": {"breakdown": ["group", "attr.age"]}})
    assert cfg.report.breakdown == ("group", "age")
    assert load_config(cfg.to_dict()) == cfg
    import tomllib

    assert tomllib.loads(cfg.to_toml())["report"]["breakdown"] == ["group", "age"]
    assert tomllib.loads(load_config(base).to_toml())["report"]["breakdown"] == "auto"
    with pytest.raises(bioanon.ConfigError, match="report.breakdown"):
        load_config({**base, "report": {"breakdown": "sex"}})


def test_scenario_names_only_for_voiceprivacy_data():
    from bioanon.report import _from_frames

    metrics = pd.DataFrame(
        [
            {
                "anonymizer": "a",
                "setting": "",
                "setting_index": 0,
                "repeat": 0,
                "selector": "random",
                "n_subjects": 4,
                "draw": 0,
                "recognizer": "r",
                "scenario": s,
                "metric": "top1",
                "value": 0.5,
                "ci_low": np.nan,
                "ci_high": np.nan,
                "chance": 0.25,
                "n_probes": 8,
            }
            for s in ("clear", "naive", "lazy", "parrot:0.5")
        ]
    )
    plain = _from_frames({"metrics": metrics})
    assert [plain.scenario(s) for s in metrics.scenario] == ["clear", "naive", "lazy", "parrot:0.5"]
    vpc = _from_frames({"metrics": metrics, "environment": {"data": {"protocol": "voiceprivacy"}}})
    assert [vpc.scenario(s) for s in metrics.scenario] == [
        "clear",
        "ignorant (naive)",
        "lazy-informed (lazy)",
        "semi-informed (parrot:0.5)",
    ]
