"""--skip-bad-files: an unreadable image is skipped, listed in the run's warnings, and the run completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np


def test_evaluate_skips_and_lists_bad_files(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "faces"
    for s in range(12):
        d = root / f"person{s:02d}"
        d.mkdir(parents=True)
        base = rng.integers(0, 255, (16, 16), dtype=np.uint8)
        for i in range(4):
            img = np.clip(base.astype(int) + rng.integers(-10, 10, (16, 16)), 0, 255).astype(np.uint8)
            cv2.imwrite(str(d / f"{i}.png"), img)
    (root / "person03" / "broken.png").write_bytes(b"\x89PNG not really")
    cfg = tmp_path / "eval.toml"
    cfg.write_text(f"""
name = "skip"
scenarios = ["naive"]
[dataset]
source = "face.folder"
path = "{root}"
[[anonymizers]]
id = "any.gaussian_noise"
[[recognizers]]
id = "any.cosine_centroid"
[selection]
subject_counts = [3]
random_draws = 1
[report]
bootstrap = 0
""")
    env = {**os.environ, "BIOANON_CACHE": str(tmp_path / "cache")}
    cmd = [
        sys.executable,
        "-m",
        "bioanon.cli",
        "evaluate",
        str(cfg),
        "--out",
        str(tmp_path / "out"),
        "--run-id",
        "r",
        "--quiet",
        "--no-report",
    ]
    failed = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert failed.returncode == 2 and "broken.png" in failed.stderr
    ok = subprocess.run(cmd + ["--skip-bad-files"], capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    warnings = json.loads((tmp_path / "out" / "r" / "warnings.json").read_text())
    assert any("skipped" in w and "broken.png" in w for w in warnings), warnings
