"""``[rates] background = 0`` under ``[attacker_dataset]`` for a protection whose output columns its fit chooses
(issue 32, item 1).

Without a background such a protection (``any.ive`` drops the features a forest finds telling) is fitted on each
set it transforms: the attacker data and the evaluated data lose different features, the columns no longer line
up and the classifiers fall below chance, which reads as protection. Validation and ``evaluate`` refuse the
setting before any work, naming the protection and the fix; protections fitted once on a background, and
background 0 without ``[attacker_dataset]``, still run (the latter with the general warning)."""

from __future__ import annotations

from typing import ClassVar

import attrs
import pytest

import bioanon
from bioanon.api import Anonymizer
from bioanon.cache import Cache
from bioanon.errors import ConfigError
from bioanon.evaluation import run as run_module
from bioanon.evaluation.checks import validate
from bioanon.evaluation.config import load_config
from bioanon.evaluation.run import build_plan

IVE = {"id": "any.ive", "name": "ive", "params": {"attribute": "group", "per_step": 1, "steps": 2, "n_estimators": 5}}
FIX = "give a background share > 0"


def _synthetic(seed: int, n: int = 12) -> dict:
    return {"source": "any.synthetic", "params": {"n_subjects": n, "samples_per_subject": 6, "dim": 16, "seed": seed}}


def _config(background: float, *, cross: bool = True, anonymizers: list | None = None) -> dict:
    cfg = {
        "name": "bg0",
        "label": "group",
        "dataset": _synthetic(3),
        "anonymizers": anonymizers or [IVE],
        "recognizers": [{"id": "any.attribute_svm"}],
        "scenarios": ["naive"],
        "selection": {"selectors": ["random"], "subject_counts": [], "random_draws": 1},
        "report": {"bootstrap": 0},
    }
    if cross:
        cfg["attacker_dataset"] = {**_synthetic(11), "subject_prefix": "x:"}
        cfg["rates"] = {"background": background, "evaluation": 1 - background}
    else:
        cfg["rates"] = {"background": background, "attacker": 0.5, "evaluation": 0.5 - background}
    return cfg


def _refusal(text: str, method_id: str, where: str = "anonymizers[0]") -> None:
    for part in (where, method_id, "[rates] background = 0", "[attacker_dataset]", FIX, "e.g. 0.2", "fitted once"):
        assert part in text, (part, text)


@pytest.fixture
def no_work(monkeypatch):
    """Fail if an evaluation gets as far as importing its data."""

    def refuse(*args, **kwargs):
        raise AssertionError("the evaluation started working")

    monkeypatch.setattr(run_module, "import_data", refuse)


def test_ive_with_background_zero_and_attacker_data_is_refused_by_validation():
    cfg = _config(0.0)
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    _refusal(str(info.value), "any.ive")
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    _refusal(str(info.value), "any.ive")


def test_evaluate_refuses_before_any_task(tmp_path, no_work):
    with pytest.raises(ConfigError) as info:
        bioanon.evaluate(_config(0.0), out_dir=None, cache=Cache(tmp_path / "cache"), progress=False, report=False)
    _refusal(str(info.value), "any.ive")


def test_evaluate_refuses_an_already_validated_config_changed_to_background_zero(tmp_path, no_work):
    """An EvalConfig is not validated again by load_config: the check still runs at the start of evaluate."""
    cfg = load_config(_config(0.2))
    changed = attrs.evolve(cfg, rates=attrs.evolve(cfg.rates, background=0.0, evaluation=1.0))
    with pytest.raises(ConfigError) as info:
        bioanon.evaluate(changed, out_dir=None, cache=Cache(tmp_path / "cache"), progress=False, report=False)
    _refusal(str(info.value), "any.ive")
    with pytest.raises(ConfigError) as info:
        validate(changed)
    _refusal(str(info.value), "any.ive")


def test_a_background_share_validates():
    cfg = load_config(_config(0.2))
    assert cfg.rates.background == 0.2 and cfg.attacker_dataset is not None
    validate(_config(0.2))


def test_protections_whose_columns_do_not_depend_on_the_fit_still_run_without_background():
    validate(_config(0.0, anonymizers=[{"id": "any.gaussian_noise", "params": {"sigma": 0.5}}]))


def test_background_zero_without_attacker_data_only_warns(tmp_path):
    cfg = load_config(_config(0.0, cross=False))
    validate(cfg)
    data = bioanon.load_dataset("any.synthetic", n_subjects=12, samples_per_subject=6, dim=16, seed=3)
    plan = build_plan(cfg, Cache(tmp_path / "cache"), data)
    warning = [w for w in plan.warnings if "rates.background = 0" in w]
    assert len(warning) == 1, plan.warnings
    assert "any.ive" in warning[0], warning  # the warning names the protection whose columns its fit chooses


def test_a_chain_with_ive_and_a_grid_are_refused():
    chain = {
        "id": "any.chain",
        "name": "noise+ive",
        "params": {
            "steps": [
                {"id": "any.gaussian_noise", "params": {"sigma": 0.1}},
                {"id": IVE["id"], "params": IVE["params"]},
            ]
        },
    }
    swept = {**IVE, "params": {k: v for k, v in IVE["params"].items() if k != "steps"}, "grid": {"steps": [1, 2]}}
    noise = {"id": "any.gaussian_noise", "params": {"sigma": 0.5}}
    with pytest.raises(ConfigError) as info:
        load_config(_config(0.0, anonymizers=[noise, chain, swept]))
    text = str(info.value)
    assert "anonymizers[0]" not in text, text
    _refusal(text, "any.chain", "anonymizers[1]")
    _refusal(text, "any.ive", "anonymizers[2]")


def test_pfrnet_declares_it():
    from bioanon.builtin.pfrnet import Pfrnet
    from bioanon.builtin.templates import Ive

    assert Ive.fit_defines_columns and Pfrnet.fit_defines_columns
    assert not Anonymizer.fit_defines_columns


@attrs.define(kw_only=True)
class _Project(Anonymizer):
    """Keeps the features with the largest variance on the fitting data (test only)."""

    id: ClassVar[str] = "test.variance_select"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    needs_fit: ClassVar[bool] = True
    fit_defines_columns: ClassVar[bool] = True


class _Plugin:
    @staticmethod
    @bioanon.hookimpl
    def register_anonymizers(register):
        register(_Project)


def test_a_plugin_method_declaring_the_property_is_refused(register_bioanon_plugin):
    register_bioanon_plugin(_Plugin(), "variance_select")
    with pytest.raises(ConfigError) as info:
        load_config(_config(0.0, anonymizers=[{"id": "test.variance_select"}]))
    _refusal(str(info.value), "test.variance_select")
    load_config(_config(0.2, anonymizers=[{"id": "test.variance_select"}]))
