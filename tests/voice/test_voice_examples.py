"""The voice example configs run (shrunken: fewer utterances, settings and repeats) on the real FSDD data and
show the expected direction: McAdams is attacked harder by the lazy/parrot attackers than by the naive one;
the random-set mean suppresses the speaker and keeps the digit."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import bioanon
from bioanon.evaluation.config import load_config

pytestmark = [pytest.mark.realdata]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _shrunk(name: str, root: Path, per_speaker: int, grid: dict) -> dict:
    with open(EXAMPLES / name, "rb") as fh:
        raw = tomllib.load(fh)
    raw["repeats"] = 1
    raw["dataset"]["path"] = str(root)
    raw["dataset"]["params"] = {**raw["dataset"].get("params", {}), "max_per_speaker": per_speaker}
    raw["report"] = {"bootstrap": 0}
    raw["anonymizers"] = raw["anonymizers"][:1]
    raw["anonymizers"][0]["grid"] = grid
    return raw


@pytest.mark.parametrize("name", ["voice-fsdd-mcadams.toml", "voice-fsdd-random-set-mean.toml"])
def test_voice_example_config_is_valid(name):
    cfg = load_config(EXAMPLES / name, check_paths=False)
    assert cfg.dataset.source == "voice.fsdd"
    assert cfg.dataset.path.endswith("shared/data/fsdd")  # relative to the TOML file
    assert {"naive", "lazy", "parrot"} <= set(cfg.scenarios)


def _top1(result):
    m = result.metrics
    return m[m.metric == "top1"]


def test_mcadams_example_lazy_and_parrot_beat_naive(shared_data):
    cfg = _shrunk("voice-fsdd-mcadams.toml", shared_data / "fsdd", 40, {"alpha": [0.5, 0.8]})
    result = bioanon.evaluate(cfg, out_dir=None, progress=False, report=False)
    assert not result.failures, result.failures
    acc = _top1(result).groupby(["setting", "scenario"]).value.max()  # worst case over the recognizers
    print("\nMcAdams top-1 (max over recognizers):\n" + acc.unstack().round(3).to_string())
    gains = [max(acc[(s, "lazy")], acc[(s, "parrot")]) - acc[(s, "naive")] for s in ("alpha=0.5", "alpha=0.8")]
    assert max(gains) > 0.05, f"lazy/parrot vs naive top-1 gains {gains}"
    for s in ("alpha=0.5", "alpha=0.8"):
        assert acc[(s, "naive")] < acc[(s, "clear")], acc
    u = result.utility.groupby(["setting", "measure"]).value.mean()
    print("utility:\n" + u.unstack().round(3).to_string())
    assert u[("alpha=0.5", "g_vd")] < u[("alpha=0.8", "g_vd")] < 0.0, u  # stronger α, less distinctive voices
    # digits of unseen speakers from a classifier trained on 2 clear speakers: weak, but above chance (0.1)
    # at the mild α and better than at the strong one
    assert u[("alpha=0.8", "digit_accuracy")] > max(0.15, u[("alpha=0.5", "digit_accuracy")]), u
    # PocketSphinx with the digit grammar (speaker-independent, unlike the classifier): WER 0.41 at α = 0.8,
    # 0.79 at the strong α = 0.5 (floor 1.0)
    assert u[("alpha=0.8", "wer")] < u[("alpha=0.5", "wer")] - 0.15 and u[("alpha=0.8", "wer")] < 0.7, u


def test_random_set_mean_example_keeps_digit_suppresses_speaker(shared_data):
    cfg = _shrunk("voice-fsdd-random-set-mean.toml", shared_data / "fsdd", 50, {"set_size": [32], "purity": [0.8]})
    result = bioanon.evaluate(cfg, out_dir=None, progress=False, report=False)
    assert not result.failures, result.failures
    top1 = _top1(result)
    acc = top1.groupby("scenario").value.max()  # worst case over the recognizers
    chance = float(top1.chance.mean())
    print(f"\nrandom-set mean top-1 (max over recognizers): {acc.round(3).to_dict()}, chance {chance:.3f}")
    attacks = acc.drop("clear")
    assert acc["clear"] > 0.8, acc
    assert attacks.max() < acc["clear"] - 0.3, acc
    u = result.utility.set_index("measure")
    print(f"utility: {u[['value', 'clear_value', 'floor']].round(3).to_dict('index')}")
    digit = u.loc["digit_accuracy"]
    assert digit.value > digit.floor + 0.5, digit  # floor = majority rate 0.1
    assert u.loc["g_vd"].value < -3.0, u.loc["g_vd"]  # the speakers are no longer distinct
