"""The face example config runs end to end on ORL: naive, parrot and Fantômas-de-anonymized attackers, SSIM and
detection utility, privacy–utility AUCs and the report's plot. Shrunk to stay fast (fewer settings, epochs and
pixels); the config itself is validated unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import bioanon
from bioanon.evaluation.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "face-orl.toml"


def test_face_example_config_is_valid():
    cfg = load_config(EXAMPLE, check_paths=False)
    assert cfg.dataset.source == "face.orl" and cfg.dataset.path.endswith("shared/data/att_faces")
    assert {a.id for a in cfg.anonymizers} >= {
        "face.gaussian_blur",
        "face.pixelation",
        "face.eye_mask",
        "face.block_permutation",
        "face.dp_snow",
        "face.k_same_pixel",
    }
    assert set(cfg.scenarios) == {"naive", "parrot", "deanon"} and cfg.deanonymizer.id == "face.fantomas"
    assert {u.id for u in cfg.utility} == {"face.ssim", "face.detection_rate"}


@pytest.mark.slow
def test_face_example_runs_shrunk(shared_data, tmp_path):
    import tomllib

    raw = tomllib.loads(EXAMPLE.read_text())
    raw["dataset"]["path"] = str(shared_data / "att_faces")
    raw["dataset"]["params"]["size"] = [32, 28]
    raw["repeats"] = 1
    raw["anonymizers"] = [a for a in raw["anonymizers"] if a["name"] in ("blur", "block_permutation")]
    raw["deanonymizer"]["params"].update(resolution=[32, 28], epochs=8, threads=1)
    raw["recognizers"] = [r for r in raw["recognizers"] if r["id"] == "face.eigenfaces"]
    raw["report"] = {"bootstrap": 0}
    res = bioanon.evaluate(raw, out_dir=tmp_path / "out", cache=tmp_path / "cache", progress=False)
    assert not res.failures, res.failures
    top1 = res.metrics[res.metrics.metric == "top1"]
    assert set(top1.scenario) >= {"clear", "naive", "parrot", "deanon"}
    assert set(res.utility.measure) >= {"face.ssim", "face.detection_rate"}, set(res.utility.measure)
    assert len(res.auc) and res.auc.auc.notna().any()
    assert (res.auc.deanon.astype(bool)).any()  # the AUC after de-anonymization is reported too
    assert any(p.suffix in (".png", ".svg") for p in (tmp_path / "out").rglob("*"))
