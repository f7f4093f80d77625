"""Tests of bioanon.report on synthetic results directories that follow the pipeline's schema."""

from __future__ import annotations

import html
import json
import math
import struct
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioanon import metrics as m
from bioanon import report
from bioanon.errors import BioanonError

ANONS = {"noise": ["sigma=0.5", "sigma=1", "sigma=2"], "blur": ["k=3", "k=5", "k=9"]}
RECS = ["knn", "cnn"]
SCENARIOS = ["clear", "naive", "parrot"]
SELECTORS = {"random": 3, "classification": 1}  # selector → number of draws
COUNTS = [10, 5]
REPEATS = [0, 1]
METRIC_NAMES = ["top1", "top5", "cna1", "balanced_accuracy", "per_subject_accuracy", "eer", "min_cllr", "linkability"]
MEASURE = "wer"
PLANTED = ("noise", 1, "cnn", "parrot", 0.987)  # a top-1 value that must be the headline of noise setting 1
WARNINGS = [
    "attacker too weak: knn reaches 0.12 on clear data (< 2 × chance 0.1)",
    "too few samples per subject: 3 < 4 for <subject 7> & others",
]
FAILURES = [{"task": "anonymize blur k=9 repeat 1", "error": "RuntimeError: out of memory <gpu0> & more"}]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_run(root: Path, *, anons=ANONS, deanon: bool = False, utility: bool = True, seed: int = 0,
             selectors=SELECTORS, counts=COUNTS) -> Path:  # fmt: skip
    """Write a synthetic RUN_DIR with the pipeline's schema."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    scenarios = SCENARIOS + (["deanon"] if deanon else [])
    rows = []
    for aname, settings in anons.items():
        for si, setting in enumerate(settings):
            for rep in REPEATS:
                for sel, draws in selectors.items():
                    for n in counts:
                        chance = 1.0 / n
                        for draw in range(draws):
                            for rec in RECS:
                                for scen in scenarios:
                                    for metric in METRIC_NAMES:
                                        if metric == "top1":
                                            if scen == "clear":
                                                v = rng.uniform(0.85, 0.95)
                                            else:
                                                v = rng.uniform(chance, max(0.8 - 0.2 * si, 0.3))
                                            is_planted = (aname, si, rec, scen) == PLANTED[:4]
                                            if is_planted and sel == "random" and n == max(counts):
                                                v = PLANTED[4]
                                            lo, hi, ch = max(v - 0.05, 0), min(v + 0.05, 1), chance
                                        elif metric in ("eer", "min_cllr", "linkability"):
                                            v, lo, hi, ch = rng.uniform(0, 0.5), math.nan, math.nan, math.nan
                                        else:
                                            v = rng.uniform(0, 1)
                                            lo, hi, ch = v - 0.03, v + 0.03, chance
                                        rows.append((aname, setting, si, rep, sel, n, draw, rec, scen, metric, v,
                                                     lo, hi, ch, 4 * n))  # fmt: skip
    met = pd.DataFrame(rows, columns=list(report.METRICS_COLUMNS))
    met.to_parquet(root / "metrics.parquet")

    config = {
        "name": "synthetic-run",
        "seed": 7,
        "repeats": len(REPEATS),
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 50}},
        "anonymizers": [{"id": f"any.{a}", "name": a, "params": {}, "grid": {"p": s}} for a, s in anons.items()],
        "recognizers": [{"id": r, "params": {}} for r in RECS],
        "scenarios": scenarios[1:],
        "selection": {"selectors": [{"id": s} for s in selectors], "subject_counts": list(counts), "random_draws": 3},
        "utility": [{"id": MEASURE}] if utility else [],
        "report": {"bootstrap": 1000, "confidence": 0.95},
    }
    (root / "config.json").write_text(json.dumps(config))
    env = {
        "bioanon": "0.1.0",
        "plugins": {"bioanon-face": "0.1.0"},
        "python": "3.12.1",
        "platform": "Linux-x86_64",
        "seed": 7,
        "started": "2025-01-02T03:04:05",
        "finished": "2025-01-02T04:05:06",
        "duration_s": 3661.0,
    }
    (root / "environment.json").write_text(json.dumps(env))
    (root / "warnings.json").write_text(json.dumps(WARNINGS))
    (root / "failures.json").write_text(json.dumps(FAILURES))
    if not utility:
        return root

    urows, trows, arows = [], [], []
    for aname, settings in anons.items():
        for si, setting in enumerate(settings):
            norm = max(1.0 - 0.35 * si, 0.0)
            for rep in REPEATS:
                v = 0.1 + 0.9 * (1 - norm)
                urows.append((aname, setting, si, rep, MEASURE, v, v - 0.02, v + 0.02, 0.1, 1.0, norm))
    for aname, settings in anons.items():
        for sel in selectors:
            for n in counts:
                for dn in (False, True):
                    xs, ys = [], []
                    for si, setting in enumerate(settings):
                        x = min(0.45 * si + (0.0 if dn else 0.1) + (0.05 if aname == "blur" else 0.0), 1.0)
                        y = max(1.0 - 0.35 * si, 0.0)
                        if aname == "noise" and si == 0 and sel == "classification" and n == 5:
                            x = math.nan  # undefined privacy: must be dropped, not crash
                        trows.append((aname, setting, si, sel, n, MEASURE, dn, 0.5, "cnn", "parrot", 0.9, 1 / n, x, y))
                        if not math.isnan(x):
                            xs.append(x)
                            ys.append(y)
                    arows.append([aname, sel, n, MEASURE, dn, m.tradeoff_auc(xs, ys), False])
    auc = pd.DataFrame(arows, columns=list(report.AUC_COLUMNS))
    low = auc.groupby(["anonymizer", "selector", "n_subjects", "measure"])["auc"].transform("min")
    auc["counted"] = auc["auc"] == low
    pd.DataFrame(urows, columns=list(report.UTILITY_COLUMNS)).to_parquet(root / "utility.parquet")
    pd.DataFrame(trows, columns=list(report.TRADEOFF_COLUMNS)).to_parquet(root / "tradeoff.parquet")
    auc.to_parquet(root / "auc.parquet")
    return root


def ref_headline(met: pd.DataFrame, selector: str = "random") -> dict:
    """Slow reference: per setting, mean over repeats/draws per (recognizer, scenario), max over attacks."""
    t = met[(met["metric"] == "top1") & (met["selector"] == selector)]
    out = {}
    for (anon, idx), g in t.groupby(["anonymizer", "setting_index"]):
        n = g["n_subjects"].max()
        vals = defaultdict(list)
        for r in g[g["n_subjects"] == n].itertuples():
            vals[(r.recognizer, r.scenario)].append(r.value)
        means = {k: sum(v) / len(v) for k, v in vals.items()}
        att = {k: v for k, v in means.items() if k[1] != "clear"}
        best = max(att, key=att.get)
        clear = max(v for k, v in means.items() if k[1] == "clear")
        out[(anon, idx)] = (att[best], best, clear, n)
    return out


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("run") / "RUN")
    out = report.render_report(run)
    return run, out, out.read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------------------------


def test_render_writes_html_and_pngs(rendered):
    run, out, text = rendered
    assert out == run / "report.html" and out.is_file()
    pngs = sorted(p.name for p in (run / "plots").glob("*.png"))
    kinds = defaultdict(int)
    for name in pngs:
        kinds[name.split("_")[0]] += 1
    assert kinds == {"overview": 1, "tradeoff": len(SELECTORS) * len(COUNTS), "subjects": len(ANONS),
                     "scenarios": len(ANONS)}  # fmt: skip
    for name in pngs:
        w, h = png_size(run / "plots" / name)
        assert w >= 600 and h >= 400, (name, w, h)  # 150 dpi figures
        assert name not in text  # the PNGs are for slides; the HTML carries its own plots
    assert text.count('<svg id="plot') == 2 * len(pngs)  # each plot laid out for a desktop and for a phone
    # no temp files left behind by the atomic writes
    assert not [p for p in run.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_html_sections_and_content(rendered):
    run, _, text = rendered
    assert text.startswith("<!DOCTYPE html>")
    for sid in ("headline", "warnings", "auc", "utility", "tradeoff", "subjects", "scenarios", "metrics", "config"):
        assert f'<section id="{sid}">' in text
    assert "reversibility" not in text.split("<nav>")[1].split("</nav>")[0]  # no deanon scenario → no section
    assert "synthetic-run" in text and "0.1.0" in text and "bioanon-face" in text and "1 h 1 min" in text
    for w in WARNINGS:
        assert html.escape(w) in text
    assert 'class="warn"' in text
    assert html.escape(FAILURES[0]["error"]) in text and FAILURES[0]["task"] in text
    auc = pd.read_parquet(run / "auc.parquet")
    for v in auc["auc"]:
        assert report._fmt(v) in text
    for v in auc.loc[auc["counted"], "auc"]:
        assert f'<span class="counted">{report._fmt(v)}' in text
    hl = report.headline(run)
    for r in hl.itertuples():
        assert f'<span class="big">{report._fmt(r.top1)}</span>' in text
        assert report._fmt(r.clear) in text and report._fmt(r.chance) in text
        assert html.escape(f"{r.recognizer} / {r.scenario}") in text
    util = pd.read_parquet(run / "utility.parquet")
    assert report._fmt(util["normalized"].iloc[-1]) in text
    assert "<pre>" in text and "&quot;subject_counts&quot;" in text
    # the compact metrics table carries all four summary metrics
    for label in ("top-1", "EER", "min Cllr", "D↔sys"):
        assert f"<th>{html.escape(label)}</th>" in text


def test_headline_picks_true_maximum(rendered):
    run, _, _ = rendered
    met = pd.read_parquet(run / "metrics.parquet")
    ref = ref_headline(met)
    hl = report.headline(run)
    assert len(hl) == sum(len(s) for s in ANONS.values())
    assert list(hl["anonymizer"]) == [a for a, s in ANONS.items() for _ in s]  # config order, then setting order
    assert list(hl["setting"]) == [x for s in ANONS.values() for x in s]
    for r in hl.itertuples():
        top, (rec, scen), clear, n = ref[(r.anonymizer, r.setting_index)]
        assert r.top1 == pytest.approx(top)
        assert (r.recognizer, r.scenario) == (rec, scen)
        assert r.clear == pytest.approx(clear)
        assert r.n_subjects == n == max(COUNTS) and r.selector == "random"
        assert r.chance == pytest.approx(1 / n)
        assert r.privacy == pytest.approx(m.privacy_level(top, clear, 1 / n))
        assert r.scenario != "clear"
    planted = hl[(hl["anonymizer"] == PLANTED[0]) & (hl["setting_index"] == PLANTED[1])].iloc[0]
    assert (planted.recognizer, planted.scenario, planted.top1) == (PLANTED[2], PLANTED[3], pytest.approx(PLANTED[4]))


def test_headline_uses_first_selector_of_config(tmp_path):
    run = make_run(tmp_path / "run", selectors={"classification": 1, "random": 3}, utility=False)
    hl = report.headline(run)
    assert set(hl["selector"]) == {"classification"}
    ref = ref_headline(pd.read_parquet(run / "metrics.parquet"), "classification")
    for r in hl.itertuples():
        assert r.top1 == pytest.approx(ref[(r.anonymizer, r.setting_index)][0])


def test_subject_curves_random_draw_spread(rendered):
    run, _, _ = rendered
    res = report._load(run)
    met = res.metrics
    t1 = met[(met["metric"] == "top1") & (met["anonymizer"] == "blur") & (met["setting_index"] == 2)]
    cur = report._subject_curves(res, t1)
    assert len(cur) == len(SELECTORS) * len(COUNTS)
    for r in cur.itertuples():
        g = t1[(t1["selector"] == r.selector) & (t1["n_subjects"] == r.n_subjects) & (t1["scenario"] != "clear")]
        means = g.groupby(["recognizer", "scenario"])["value"].mean()
        assert r.worst == pytest.approx(means.max()) and (r.recognizer, r.scenario) == means.idxmax()
        of_worst = g[(g["recognizer"] == r.recognizer) & (g["scenario"] == r.scenario)]
        per_draw = of_worst.groupby("draw")["value"].mean()
        assert r.n_draws == SELECTORS[r.selector] == len(per_draw)
        assert r.lo == pytest.approx(per_draw.min()) and r.hi == pytest.approx(per_draw.max())
        assert r.lo <= r.worst <= r.hi <= r.best
        assert r.best == pytest.approx(g.groupby(["draw", "recognizer", "scenario"])["value"].mean().max())
    # at the largest n of the first selector the curve is the headline figure
    hl = report.headline(run)
    top = hl[(hl["anonymizer"] == "blur") & (hl["setting_index"] == 2)]["top1"].iloc[0]
    assert cur[(cur["selector"] == "random") & (cur["n_subjects"] == 10)]["worst"].iloc[0] == pytest.approx(top)


def test_tradeoff_series_counted_and_envelope(rendered):
    run, _, _ = rendered
    res = report._load(run)
    tr, auc = res.tradeoff, res.auc
    part = tr[(tr["selector"] == "random") & (tr["n_subjects"] == 10)]
    a = auc[(auc["selector"] == "random") & (auc["n_subjects"] == 10)]
    series = report._tradeoff_series(part, a, res.anonymizers)
    assert [(s["anonymizer"], s["deanon"]) for s in series] == [(x, d) for x in ANONS for d in (False, True)]
    for s in series:
        row = a[(a["anonymizer"] == s["anonymizer"]) & (a["deanon"] == s["deanon"])].iloc[0]
        assert s["counted"] == bool(row["counted"]) and s["auc"] == pytest.approx(row["auc"])
        px, py = m.tradeoff_envelope(s["x"], s["y"])
        np.testing.assert_array_equal(s["px"], px)
        np.testing.assert_array_equal(s["py"], py)
        assert s["counted"] == s["deanon"]  # de-anonymization lowers privacy → lower AUC counts
    # without AUC rows the variant with the lower area counts; NaN points are dropped
    part = tr[(tr["selector"] == "classification") & (tr["n_subjects"] == 5)]
    series = report._tradeoff_series(part, auc.iloc[:0], res.anonymizers)
    noise = [s for s in series if s["anonymizer"] == "noise"]
    assert [s["counted"] for s in noise] == [False, True]
    assert all(s["dropped"] == 1 and len(s["x"]) == 2 for s in noise)


def test_renders_without_utility_and_removes_stale_plots(tmp_path):
    run = make_run(tmp_path / "run", anons={"noise": ANONS["noise"]}, selectors={"random": 3}, counts=[8, 4])
    report.render_report(run)
    assert list((run / "plots").glob("tradeoff_*.png"))
    for f in ("utility.parquet", "tradeoff.parquet", "auc.parquet", "failures.json", "environment.json"):
        (run / f).unlink()
    text = report.render_report(run).read_text(encoding="utf-8")
    assert not list((run / "plots").glob("tradeoff_*.png"))  # stale curves of the earlier rendering are gone
    assert list((run / "plots").glob("subjects_*.png")) and list((run / "plots").glob("scenarios_*.png"))
    assert "No AUC results" in text and "No utility measures" in text and "No privacy–utility points" in text
    assert "environment.json not found" in text and "No failed tasks" in text


def test_renders_with_empty_optional_files_and_deanon(tmp_path):
    run = make_run(tmp_path / "run", utility=False, deanon=True,
                   anons={"noise": ["sigma=0.5", "sigma=1", "sigma=2", "sigma=4", "sigma=8"]})  # fmt: skip
    for f, cols in (("utility", report.UTILITY_COLUMNS), ("tradeoff", report.TRADEOFF_COLUMNS),
                    ("auc", report.AUC_COLUMNS)):  # fmt: skip
        pd.DataFrame(columns=list(cols)).to_parquet(run / f"{f}.parquet")
    (run / "warnings.json").write_text("[]")
    text = report.render_report(run).read_text(encoding="utf-8")
    assert "No sanity warnings" in text and "No AUC results" in text
    assert '<section id="reversibility">' in text and "configurable" in text
    # five settings: the plots show the first, middle and last and say so
    assert "showing 3 of 5 settings" in text
    hl = report.headline(run)
    rev = report._reversibility(report._load(run), report.REVERSIBILITY_THRESHOLDS)
    assert len(rev) == 5 and rev["category"].isin(
        ["irreversible", "partially reversible", "highly reversible", "undefined"]).all()  # fmt: skip
    for r in rev.itertuples():
        assert f">{r.category}</td>" in text
    assert set(hl["scenario"]) <= {"naive", "parrot", "deanon"}


def test_html_special_characters_are_escaped(tmp_path):
    name = '_noi$e <b>&"x'
    run = make_run(tmp_path / "run", anons={name: ["s<1>", "s&2", "s=3"], "blur": ["k=3", "k=5", "k=9"]},
                   selectors={"random": 2}, counts=[5])  # fmt: skip
    text = report.render_report(run).read_text(encoding="utf-8")
    assert html.escape(name) in text and html.escape("s<1>") in text
    assert "<b>&" not in text and "s<1>" not in text and 's&2"' not in text
    for p in (run / "plots").glob("*.png"):  # file names stay plain and are quoted safely
        assert all(c.isalnum() or c in "_-.=" for c in p.name), p.name
        png_size(p)


def test_missing_metrics_parquet_is_a_clear_error(tmp_path):
    run = make_run(tmp_path / "run", utility=False)
    (run / "metrics.parquet").unlink()
    with pytest.raises(report.ResultsNotFoundError, match="metrics.parquet") as exc:
        report.render_report(run)
    assert isinstance(exc.value, FileNotFoundError) and isinstance(exc.value, BioanonError)
    with pytest.raises(report.ResultsNotFoundError, match="metrics.parquet"):
        report.headline(run)
    assert not (run / "report.html").exists()
    with pytest.raises(report.ResultsNotFoundError, match="run directory not found"):
        report.render_report(tmp_path / "nope")


def test_malformed_results_name_the_file_and_column(tmp_path):
    run = make_run(tmp_path / "run", utility=False)
    pd.read_parquet(run / "metrics.parquet").drop(columns=["scenario"]).to_parquet(run / "metrics.parquet")
    with pytest.raises(report.ReportError, match=r"metrics\.parquet lacks the column\(s\) scenario"):
        report.render_report(run)
    run2 = make_run(tmp_path / "run2", utility=False)
    (run2 / "config.json").write_text("{not json")
    with pytest.raises(report.ReportError, match="config.json"):
        report.render_report(run2)


def test_number_formatting():
    assert report._fmt(0.42) == "0.420"
    assert report._fmt(math.nan) == "–" and report._fmt(None) == "–"
    assert report._fmt(3) == "3" and report._fmt(1.23456e-5) == "1.23e-05" and report._fmt(123456.0) == "1.23e+05"
    assert report._fmt_ci(0.5, 0.4, 0.6) == "0.500 [0.400, 0.600]" and report._fmt_ci(0.5, math.nan, 0.6) == "0.500"


def test_import_is_light():
    code = (
        "import sys, bioanon.report\n"
        "heavy = [m for m in ('matplotlib', 'pandas', 'matplotlib.pyplot') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_crowded_tradeoff_points_are_numbered_with_a_key():
    from bioanon.report import _point_labels

    labels, key = _point_labels([0.1, 0.5, 0.9], [0.2, 0.5, 0.9], ["a=1", "a=2", "a=3"])
    assert labels == ["a=1", "a=2", "a=3"] and key == []  # far apart: the settings themselves
    labels, key = _point_labels([0.70, 0.72, 0.95, 0.3], [1.0, 1.0, 1.0, 0.5], ["g=8", "g=32", "", "g=128"])
    assert labels == ["1", "2", "", "3"]
    assert key == ["1 = g=8", "2 = g=32", "3 = g=128"]
    labels, key = _point_labels([0.0, 0.0, 0.5], [1.0, 1.0, 0.2], ["k=1", "k=2", "k=3"])  # two points coincide
    assert labels == ["1, 2", "", "3"] and key == ["1 = k=1", "2 = k=2", "3 = k=3"]


def test_undefined_metrics_are_explained_never_a_bare_nan(tmp_path):
    """Issue 18 item 4: a metric that cannot be computed (linkability from < 20 mated scores) is a row with a
    note; the report shows 'undefined' and the reason."""
    run = make_run(tmp_path / "run", utility=False)
    met = pd.read_parquet(run / "metrics.parquet")
    met["note"] = ""
    link = met["metric"] == "linkability"
    met.loc[link, "value"] = math.nan
    why = "undefined: 12 mated scores, fewer than the 20 needed for 2 histogram bins"
    met.loc[link, "note"] = why
    met.to_parquet(run / "metrics.parquet")
    text = report.render_report(run).read_text(encoding="utf-8")
    section = text[text.index('id="metrics"') :]
    assert "undefined<sup>1</sup>" in section and why in section
    assert ">nan<" not in text.lower() and "nan [" not in text.lower()


def test_attribute_headline_is_balanced_accuracy_with_both_chance_levels(tmp_path):
    """Issue 18 item 2: for an attribute label the headline is balanced accuracy against uniform chance, and
    plain accuracy stands beside it with the majority-class rate."""
    run = make_run(tmp_path / "run", utility=False)
    met = pd.read_parquet(run / "metrics.parquet")
    bal = met[met["metric"] == "top1"].copy()
    bal["metric"] = "balanced_accuracy"
    bal["value"] = bal["value"] * 0.5 + 0.25
    bal["chance"] = 0.5
    top = met[met["metric"] == "top1"].copy()
    top["chance"] = 0.8  # majority-class rate of a skewed binary attribute
    met = pd.concat([top, bal], ignore_index=True)
    met.to_parquet(run / "metrics.parquet")
    cfg = json.loads((run / "config.json").read_text()) if (run / "config.json").exists() else {}
    cfg["label"] = "sex"
    (run / "config.json").write_text(json.dumps(cfg))
    hl = report.headline(run)
    assert (hl["metric"] == "balanced_accuracy").all()
    assert np.allclose(hl["chance"], 0.5) and np.allclose(hl["majority"], 0.8)
    ref = bal[(bal["selector"] == hl["selector"].iloc[0]) & (bal["n_subjects"] == hl["n_subjects"].iloc[0])]
    assert hl["value"].max() == pytest.approx(
        ref[ref["scenario"] != "clear"]
        .groupby(["anonymizer", "setting_index", "recognizer", "scenario"])["value"]
        .mean()
        .max()
    )
    text = report.render_report(run).read_text(encoding="utf-8")
    head = text[text.index('id="headline"') : text.index('id="warnings"')]
    for phrase in ("balanced accuracy", "uniform chance", "majority-class rate", "<code>sex</code>"):
        assert phrase in head, phrase


# ---------------------------------------------------------------------------------------------- a report to share


def test_html_is_one_self_contained_file(tmp_path):
    """Issue 20 item 4: the HTML needs no other file (plots inline as SVG), names no absolute path and not the run
    folder's location, and reserves each plot's box (width, height, viewBox) so the page does not jump."""
    import re

    run = make_run(tmp_path / "secret-place" / "RUN", deanon=True)
    cfg = json.loads((run / "config.json").read_text())
    cfg["dataset"]["params"]["root"] = "/home/alice/private/orl_faces"
    cfg["cache"] = "/srv"
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "warnings.json").write_text(json.dumps([f"skipped {tmp_path}/data/broken.png (unreadable)"]))
    text = report.render_report(run).read_text(encoding="utf-8")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    refs = re.findall(r"""\b(?:src|href|xlink:href|action|data)\s*=\s*["']([^"']*)""", text)
    assert refs and all(r.startswith(("#", "data:")) for r in refs), [r for r in refs if not r.startswith("#")]
    assert not re.findall(r"url\((?!#)", text) and "@import" not in text and "<link" not in text
    assert "<img" not in text and "<script" not in text and ".png" not in text.replace("broken.png", "")
    for secret in (str(tmp_path), "secret-place", "/home/alice", "private/", '"/srv"'):
        assert secret not in text, secret
    assert "…/orl_faces" in text and "skipped …/broken.png" in text and "…/srv" in text
    svgs = re.findall(r"<svg\b[^>]*>", text)
    assert len(svgs) == 2 * len(list((run / "plots").glob("*.png"))) >= 12  # desktop and phone layouts
    for tag in svgs:
        w, h = re.search(r' width="(\d+)"', tag), re.search(r' height="(\d+)"', tag)
        vb = re.search(r' viewBox="0 0 ([0-9.]+) ([0-9.]+)"', tag)
        assert w and h and vb and 'role="img"' in tag and "aria-label=" in tag, tag
        assert int(h[1]) / int(w[1]) == pytest.approx(float(vb[2]) / float(vb[1]), rel=0.01)
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # plots do not share clip paths, glyphs or markers
    assert 2 * text.count("<figcaption>How to read:") == len(svgs)  # every plot says how to read it
    assert text.count('<div class="scroll"><table') == text.count("<table")  # wide tables scroll in a box


def _outside(fig) -> list[str]:
    """Drawn texts of a figure that reach beyond its edges (clipped when saved); the figure's tight bounding box
    (everything drawn: titles, tick labels in view, legends) must lie inside it."""
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    tight = fig.get_tightbbox(r)  # inches
    w, h = fig.get_size_inches()
    if tight.x0 >= -0.01 and tight.y0 >= -0.01 and tight.x1 <= w + 0.01 and tight.y1 <= h + 0.01:
        return []
    inside = fig.bbox.expanded(1.0, 1.0)
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    texts = [t for t, b in boxes if not (inside.contains(*b.min) and inside.contains(*b.max))]
    return [f"tight bbox {tight.bounds} beyond {w:.2f} x {h:.2f} in"] + texts


def test_titles_and_labels_fit_their_figure(tmp_path):
    long = "a-rather-long-anonymizer-name-used-for-testing"
    run = make_run(tmp_path / "run", anons={long: ["one-setting-with-a-long-label-value=123456"]},
                   selectors={"random": 2}, counts=[6, 3], deanon=True)  # fmt: skip
    figs = report.plots(run)
    assert {f.kind for f in figs} == {"overview", "tradeoff", "subjects", "scenarios", "reversibility"}
    for f in figs:
        assert not _outside(f.figure), (f.kind, _outside(f.figure))


def test_single_point_series_are_points_with_a_note(tmp_path):
    """One subject count: every series is one point, drawn as a marker (not an invisible one-point line), the
    legend lists only what is drawn, and the caption says why there are no curves."""
    from matplotlib.lines import Line2D

    run = make_run(tmp_path / "run", anons={"noise": ANONS["noise"]}, selectors={"random": 3}, counts=[8],
                   utility=False)  # fmt: skip
    (fig,) = report.plots(run, kinds=["subjects"])
    assert "single points" in fig.caption and "n = 8" in fig.caption
    drawn = set()
    for ax in fig.figure.axes:
        for ln in ax.get_lines():
            if ln.get_label().startswith("_"):
                continue
            assert len(ln.get_xdata()) == 1, ln.get_label()
            assert ln.get_linestyle() == "None" and ln.get_marker() not in ("None", "", None), ln.get_label()
            drawn.add(ln.get_label())
    bars = {c.get_label() for ax in fig.figure.axes for c in ax.collections if len(c.get_paths())}
    assert bars == {"random: range over draws"}  # three draws: their range is a bar at n = 8
    (legend,) = fig.figure.legends
    for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True):
        assert t.get_text() in drawn | bars, t.get_text()
        if t.get_text() in drawn:  # the key shows the marker, not a line that is not in the plot
            assert isinstance(h, Line2D) and h.get_linestyle() == "None", t.get_text()
    assert {t.get_text() for t in legend.get_texts()} >= {"random", "chance (1/n)", "random: best draw"}


def test_task_timeline_draws_each_task_and_says_what_went_idle(tmp_path):
    """The timeline plot: one bar per task on its process's lane, and a caption with the wait for the first task
    and the workers' idle time, computed from the bars (here 2 workers over 1.0-5.0 s, 6.0 s busy: 2.0 s idle)."""
    from bioanon.report import ReportError, task_timeline

    rows = [
        {"task": "split", "stage": "split", "worker": 1, "start": 1.0, "seconds": 0.5},
        {"task": "a", "stage": "score", "worker": 1, "start": 1.5, "seconds": 3.5},
        {"task": "b", "stage": "score", "worker": 2, "start": 1.5, "seconds": 2.0},
    ]
    plot = task_timeline({"tasks": {"timeline": rows}})
    assert plot.kind == "timeline"
    assert "3 tasks, 6.0 s of work in 5.0 s on 2 process(es)" in plot.caption
    assert "started 1.0 s after the run" in plot.caption and "idle 2.0 s" in plot.caption and "25%" in plot.caption
    ax = plot.figure.axes[0]
    bars = sorted((p.get_x(), p.get_width(), p.get_y()) for p in ax.patches)
    assert [(x, w) for x, w, _ in bars] == [(1.0, 0.5), (1.5, 2.0), (1.5, 3.5)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 1", "worker 2"]
    # a run of three workers, one of which ran nothing: idle throughout (3 x 4.0 s - 6.0 s busy), and drawn
    three = task_timeline({"jobs": 3, "tasks": {"timeline": rows}})
    assert "The 3 workers were idle 6.0 s" in three.caption and "50%" in three.caption
    assert [t.get_text() for t in three.figure.axes[0].get_yticklabels()] == ["worker 1", "worker 2", "worker 3"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "environment.json").write_text(json.dumps({"tasks": {"timeline": []}}))
    with pytest.raises(ReportError, match="no task timeline"):
        task_timeline(run)
    with pytest.raises(ReportError, match="does not exist"):
        task_timeline(tmp_path / "nothing")


def test_plots_from_tables_in_memory(rendered):
    run, _, _ = rendered
    tables = {k: pd.read_parquet(run / f"{k}.parquet") for k in ("metrics", "utility", "tradeoff", "auc")}
    tables["config"] = json.loads((run / "config.json").read_text())
    figs = report.plots(tables)
    from_dir = report.plots(run)
    assert [(f.kind, f.slug, f.caption) for f in figs] == [(f.kind, f.slug, f.caption) for f in from_dir]
    assert [f.kind for f in report.plots(tables, kinds=["scenarios"])] == ["scenarios"] * len(ANONS)
    with pytest.raises(report.ReportError, match="unknown kind"):
        report.plots(run, kinds=["pie"])
    with pytest.raises(report.ReportError, match=r"table 'metrics' lacks the column\(s\) scenario"):
        report.plots({"metrics": tables["metrics"].drop(columns=["scenario"])})


# ------------------------------------------------------------------------------- the opening table, phones, cache


def _rows_of_first_table(text: str) -> tuple[str, list[str]]:
    """The class of the page's first table and its body rows' HTML."""
    start = text.index("<table")
    table = text[start : text.index("</table>", start)]
    cls = table[: table.index(">")]
    return cls, table.split("<tbody>")[1].split("<tr>")[1:]


def test_opening_table_pairs_each_settings_worst_case_with_its_utility(rendered):
    """The report opens with one table pairing each setting's worst case (with its CI and the recognizer and
    scenario that achieved it) with its utility, and one plot of utility against worst-case privacy."""
    run, _, text = rendered
    head = text[text.index('<section id="headline">') : text.index('<section id="warnings">')]
    assert text.index("<table") > text.index('<section id="headline">')  # the first table of the page is here
    cls, rows = _rows_of_first_table(text)
    assert 'class="headline cards"' in cls
    ref = ref_headline(pd.read_parquet(run / "metrics.parquet"))
    util = pd.read_parquet(run / "utility.parquet").groupby(["anonymizer", "setting_index"])["normalized"].mean()
    met = pd.read_parquet(run / "metrics.parquet")
    assert len(rows) == len(ref) == sum(len(s) for s in ANONS.values())
    for row, (anon, idx) in zip(rows, [(a, i) for a, s in ANONS.items() for i in range(len(s))], strict=True):
        top, (rec, scen), clear, n = ref[(anon, idx)]
        attack = met[(met["anonymizer"] == anon) & (met["setting_index"] == idx) & (met["metric"] == "top1")
                     & (met["selector"] == "random") & (met["n_subjects"] == n) & (met["recognizer"] == rec)
                     & (met["scenario"] == scen)]  # fmt: skip
        assert f">{anon}</td>" in row and f">{ANONS[anon][idx]}</td>" in row
        assert f'<span class="big">{report._fmt(top)}</span>' in row
        ci = f"[{report._fmt(attack['ci_low'].mean())}, {report._fmt(attack['ci_high'].mean())}]"
        assert ci in row, (ci, row)
        assert html.escape(f"{rec} / {scen}") in row
        assert f'data-label="utility: {MEASURE}">{report._fmt(util[(anon, idx)])}</td>' in row
        assert f'data-label="privacy x">{report._fmt(m.privacy_level(top, clear, 1 / n))}</td>' in row
    # the plot of the same pairs follows the table, before any other section
    assert head.count('<svg id="plot') == 2 and "Privacy and utility per setting" not in head.split("<table")[0]
    (fig,) = report.plots(run, kinds=["overview"])
    xs = sorted(x for ln in fig.figure.axes[0].get_lines() if not ln.get_label().startswith("_")
                for x in ln.get_xdata())  # fmt: skip
    hl = report.headline(run)
    np.testing.assert_allclose(xs, sorted(np.clip(hl["privacy"], 0, 1)))


def test_summary_and_report_share_the_pairing(rendered):
    """The report's opening table and EvaluationResult.summary() pair privacy and utility with one function."""
    from bioanon.report.tables import _pairing, pair_utility

    run, _, _ = rendered
    res = report._load(run)
    p = _pairing(res)
    assert f"utility[{MEASURE}]" in p.columns
    expect = [max(1.0 - 0.35 * i, 0.0) for s in ANONS.values() for i in range(len(s))]
    np.testing.assert_allclose(p[f"utility[{MEASURE}]"], expect)
    np.testing.assert_allclose(p["privacy"], m.privacy_level(p["value"], p["clear"], p["chance"]))
    assert "utility[" not in "".join(pair_utility(report.headline(run), None).columns)


def _count_renders(monkeypatch) -> list[int]:
    from bioanon.report import page

    calls: list[int] = []
    real = page._all_plots

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(page, "_all_plots", counting)
    return calls


def test_unchanged_results_are_not_rendered_again(tmp_path, monkeypatch):
    """The report is cached by the content of the results: an unchanged rerun (same folder, or a new folder
    beside it) reuses the body and PNGs and writes only the header anew; changed metrics render again."""
    import shutil

    run = make_run(tmp_path / "out" / "run-1", anons={"noise": ANONS["noise"]}, selectors={"random": 2}, counts=[6])
    calls = _count_renders(monkeypatch)
    first = report.render_report(run).read_text(encoding="utf-8")
    assert calls and (pngs := sorted(p.name for p in (run / "plots").glob("*.png")))
    n = len(calls)
    env = json.loads((run / "environment.json").read_text())
    env["started"], env["duration_s"] = "2031-05-06T07:08:09", 1.5  # a rerun: other times, same results
    (run / "environment.json").write_text(json.dumps(env))
    again = report.render_report(run).read_text(encoding="utf-8")
    assert len(calls) == n  # not rendered again
    assert "2031-05-06T07:08:09" in again and "1.5 s" in again
    assert again.split("</header>")[1] == first.split("</header>")[1]
    # a rerun into a new folder beside it: the body and the PNGs come from the earlier one
    other = tmp_path / "out" / "run-2"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("report.html", "plots"))
    text = report.render_report(other).read_text(encoding="utf-8")
    assert len(calls) == n
    assert sorted(p.name for p in (other / "plots").glob("*.png")) == pngs
    assert "<b>results folder</b> run-2" in text and text.split("</header>")[1] == first.split("</header>")[1]
    # changed metrics: rendered again, with the new values
    met = pd.read_parquet(other / "metrics.parquet")
    met.loc[(met["metric"] == "top1") & (met["scenario"] != "clear"), "value"] = 0.123
    met.to_parquet(other / "metrics.parquet")
    text = report.render_report(other).read_text(encoding="utf-8")
    assert len(calls) > n and '<span class="big">0.123</span>' in text
    # deleted PNGs, or force: rendered again
    n = len(calls)
    for p in (other / "plots").glob("*.png"):
        p.unlink()
    report.render_report(other)
    assert len(calls) > n and sorted(p.name for p in (other / "plots").glob("*.png")) == pngs
    n = len(calls)
    report.render_report(other, force=True)
    assert len(calls) > n


def test_single_point_plots_are_sentences_in_the_report(tmp_path):
    """One setting and one subject count: the report says each one-dot plot's values in a sentence."""
    run = make_run(tmp_path / "run", anons={"noise": ["sigma=1"]}, selectors={"random": 2}, counts=[8])
    text = report.render_report(run).read_text(encoding="utf-8")
    pngs = {p.name.split("_")[0] for p in (run / "plots").glob("*.png")}
    assert pngs == {"scenarios"}  # the bar chart has bars; the others would be one dot each
    assert text.count('<p class="single">') == 3
    assert "only one subject count (n = 8) was evaluated" in text and "one setting per anonymizer" in text
    hl = report.headline(run).iloc[0]
    subjects = text[text.index('<section id="subjects">') :]
    assert f"sigma=1, selector random: {report._fmt(hl.value)}" in subjects
    assert text.count('<svg id="plot') == 2


def test_phone_layouts_fit_and_their_text_is_large_enough(tmp_path):
    """The phone layout of every plot is NARROW_WIDTH wide, keeps its text inside and writes no text smaller than
    8 pt (≥ 10 CSS px at the width a 375 px phone shows it)."""
    from matplotlib.text import Text

    from bioanon.report.figures import NARROW_WIDTH, _all_plots

    run = make_run(tmp_path / "run", deanon=True)
    parts = _all_plots(report._load(run), narrow=True)
    figs = parts["overview"] + parts["tradeoff"] + parts["subjects"] + parts["scenarios"] + parts["reversibility"][2]
    assert {f.kind for f in figs} == {"overview", "tradeoff", "subjects", "scenarios", "reversibility"}
    for f in figs:
        assert f.figure.get_figwidth() == pytest.approx(NARROW_WIDTH), f.kind
        assert not _outside(f.figure), (f.kind, _outside(f.figure))
        sizes = [t.get_fontsize() for t in f.figure.findobj(Text) if t.get_visible() and t.get_text()]
        assert min(sizes) >= 8, (f.kind, min(sizes))
    assert NARROW_WIDTH * 96 <= 375 - 2 * 12 - 2 * 6  # the page's side padding and the figure's frame
