"""Deprecated aliases of renamed method ids (issue 19 item 7): the old id creates the new class, warns once with
the new id, and results are labelled with the new id; moved plugin modules still import, with a warning."""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pytest

import bioanon
from bioanon.api import Anonymizer
from bioanon.errors import PluginError
from bioanon.evaluation.config import load_config
from bioanon.registry import Entry, Registry

# every id renamed by the naming rule: old id -> new id (the table in docs/plugins.md)
RENAMED = {
    "motion.features_rf": "motion.random_forest",
    "motion.features_svm": "motion.svm",
    "motion.features_lda": "motion.lda",
    "motion.features_knn": "motion.knn",
    "voice.mfcc_svm": "voice.svm",
    "voice.mfcc_logreg": "voice.logistic_regression",
    "voice.mfcc_lda": "voice.lda",
}


def _installed(new: str) -> None:
    if new not in bioanon.list_methods():
        pytest.skip(f"the plugin of {new} is not installed")


def _deprecations(caught, old: str) -> list:
    return [w for w in caught if issubclass(w.category, DeprecationWarning) and repr(old) in str(w.message)]


@attrs.define(kw_only=True)
class _Renamed(Anonymizer):
    """A stand-in method whose id was renamed."""

    id: ClassVar[str] = "test.new_name"
    trait: ClassVar[str] = "test"

    def transform(self, table):
        return table


def _fresh(**entry) -> Registry:
    return Registry({"test.new_name": Entry(_Renamed, "test", **entry)})


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_old_id_creates_the_new_class(old, new):
    _installed(new)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        method = bioanon.get_method(old)
    assert type(method) is bioanon.get_registry().get(new)
    assert method.id == new
    assert old in bioanon.get_registry()[new].deprecated_aliases
    # old ids are not suggested for typos, the new one is
    assert old not in bioanon.get_registry().suggest(old + "x")


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_old_id_warns_once_naming_the_new_id(old, new):
    _installed(new)
    registry = Registry(dict(bioanon.get_registry().items()))  # fresh: nothing warned yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert old in registry  # membership does not warn
        assert _deprecations(caught, old) == []
        first = registry.create(old)
        registry.get(old)
        _ = registry[old]
        registry.get(new)
    found = _deprecations(caught, old)
    assert len(found) == 1, [str(w.message) for w in caught]
    assert repr(new) in str(found[0].message)
    assert found[0].filename == __file__  # attributed to the caller, not to bioanon's internals
    assert first.id == new


def test_warn_once_is_per_alias_and_plain_aliases_never_warn():
    registry = _fresh(aliases=("short", "test.old_a", "test.old_b"), deprecated_aliases=("test.old_a", "test.old_b"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert registry.get("short") is _Renamed
        assert registry.get("test.old_a") is _Renamed and registry.get("test.old_a") is _Renamed
        assert registry.get("test.old_b") is _Renamed
    assert [str(w.message).split()[2] for w in caught] == ["'test.old_a'", "'test.old_b'"]
    assert registry.current_id("test.old_a") == "test.new_name"
    assert registry.current_id("short") == "short" and registry.current_id("test.new_name") == "test.new_name"
    assert registry.find(["test.old_a"]) == [registry["test.new_name"]]


def test_a_deprecated_alias_must_be_an_alias():
    with pytest.raises(PluginError, match=r"test.new_name: deprecated aliases \['test.old'\]"):
        Entry(_Renamed, "test", deprecated_aliases=("test.old",))


def test_plugins_register_deprecated_aliases(register_bioanon_plugin):
    class Plugin:
        @bioanon.hookimpl
        def register_anonymizers(self, register):
            register(_Renamed, aliases=("test.short",), deprecated_aliases=("test.old_name",))

    registry = register_bioanon_plugin(Plugin(), "alias_test_plugin")
    entry = registry["test.new_name"]
    assert entry.aliases == ("test.short", "test.old_name") and entry.deprecated_aliases == ("test.old_name",)
    with pytest.warns(DeprecationWarning, match="'test.old_name' is deprecated: use 'test.new_name'"):
        assert registry.get("test.old_name") is _Renamed


def test_results_are_labelled_with_the_new_id(tmp_path):
    """A config written with old ids resolves to the new ids, and the run's metrics name the new id."""
    _installed("motion.knn")
    config = {
        "name": "renamed",
        "seed": 0,
        "repeats": 1,
        "label": "subject",
        "dataset": {"source": "motion.synthetic", "params": {"n_subjects": 16, "windows_per_subject": 6}},
        "anonymizers": [{"id": "motion.gaussian_noise", "name": "noise", "params": {"sigma": 0.5}}],
        "recognizers": [{"id": "motion.features_knn"}, {"id": "motion.features_svm", "name": "mine"}],
        "scenarios": ["naive"],
        "selection": {"selectors": ["random"], "subject_counts": [], "random_draws": 1},
        "report": {"bootstrap": 0},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cfg = load_config(config)
        result = bioanon.evaluate(config, out_dir=None, progress=False, report=False)
    assert [(r.id, r.name) for r in cfg.recognizers] == [("motion.knn", "motion.knn"), ("motion.svm", "mine")]
    assert not result.failures, result.failures
    assert set(np.unique(result.metrics.recognizer)) == {"motion.knn", "mine"}


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("bioanon_gait.walker", "bioanon_gait.synthetic", ["SyntheticGait", "PACES"]),
        ("bioanon_voice.synth", "bioanon_voice.synthetic", ["SyntheticVoice", "synth_vowels", "resonator"]),
        ("bioanon_motion.datasets", "bioanon_motion.sources", ["CsvRecordings", "MotionSense", "PhoneGait"]),
        ("bioanon_motion.datasets", "bioanon_motion.synthetic", ["SyntheticMotion"]),
    ],
)
def test_moved_modules_still_import_with_a_warning(old, new, names, monkeypatch):
    pytest.importorskip(old.split(".")[0])
    target = importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old, raising=False)  # import it afresh (and forget it afterwards)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from .*{new}"):
        module = importlib.import_module(old)
    for name in names:
        assert getattr(module, name) is getattr(target, name)
