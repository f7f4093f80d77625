"""Every network bioanon trains goes through ``bioanon.nettrain.train_net`` (issue 15): no training loop, optimizer
or backward pass anywhere else in the core or the plugins."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINING = re.compile(r"\.backward\(|torch\.optim\.|\boptim\.(Adam|SGD|AdamW)\b|GradScaler\(")


def test_no_training_loop_outside_the_core_trainer():
    sources = sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "plugins").rglob("bioanon_*/**/*.py"))
    assert len(sources) > 40
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sources
        if p.name != "nettrain.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if TRAINING.search(line)
    ]
    assert not found, "training code outside bioanon.nettrain.train_net:\n" + "\n".join(found)
    assert TRAINING.search((ROOT / "core" / "nettrain.py").read_text())  # the pattern does find the trainer


def test_describe_shows_the_presets(capsys):
    import pytest

    pytest.importorskip("bioanon_face")
    from bioanon.cli import main

    assert main(["describe", "face.arcface"]) == 0
    out = capsys.readouterr().out
    assert "paper" in out and "fast" in out and "resnet50" in out and "preset" in out
