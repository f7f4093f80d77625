"""A selection of subjects alone (a random draw: ``Selector.subjects_only``) is made once per repeat from the clear
tables, and each recognizer's clear level on it is computed once for every anonymizer setting, with the values a
selection made per setting gives."""

from __future__ import annotations

from typing import ClassVar

import attrs
from evalconfigs import SMALL, config

import bioanon
from bioanon.builtin.selectors import RandomSelection
from bioanon.cache import Cache


@attrs.define(kw_only=True)
class RandomPerSetting(RandomSelection):
    """The random draw, declared as depending on the anonymized data: selected again for every setting."""

    id: ClassVar[str] = "test.random_per_setting"
    subjects_only: ClassVar[bool] = False


class Plugin:
    @staticmethod
    @bioanon.hookimpl
    def register_selectors(register):
        register(RandomPerSetting)


def _cfg(selector_id: str) -> dict:
    return config(
        **{
            **SMALL,
            "anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 3.0, 5.0]}}],
            "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}],
            "selection": {
                "selectors": [{"id": selector_id, "name": "random", "params": {"seed": 0}}],
                "subject_counts": [12],
                "random_draws": 1,
            },
        }
    )


def test_a_random_selection_and_its_clear_level_are_computed_once_for_every_setting(
    tmp_path, register_bioanon_plugin, monkeypatch
):
    register_bioanon_plugin(Plugin(), "per_setting")
    # one BLAS thread in every task of both runs (not as many as the machine's load leaves idle): the same
    # arithmetic, to the last bit, however busy the machine is
    monkeypatch.setenv("BIOANON_CORES", "1")
    shared = bioanon.evaluate(_cfg("any.select_random"), out_dir=None, cache=Cache(tmp_path / "a"), progress=False)
    per_setting = bioanon.evaluate(
        _cfg("test.random_per_setting"), out_dir=None, cache=Cache(tmp_path / "b"), progress=False
    )
    # 3 settings: 2 selections fewer, and 2 recognizers × 2 settings clear levels fewer
    assert per_setting.executed - shared.executed == 2 + 2 * 2, (per_setting.executed, shared.executed)
    cols = ["anonymizer", "setting", "recognizer", "scenario", "selector", "n_subjects", "draw", "metric"]
    a = shared.metrics.sort_values(cols).reset_index(drop=True)
    b = per_setting.metrics.sort_values(cols).reset_index(drop=True)
    assert len(a) == len(b) and (a.scenario == "clear").sum() > 0
    # the same subjects and the same clear data: the same rows, every setting named, the same numbers (the same
    # computation, on one thread)
    assert set(a.setting) == set(b.setting) and len(set(a.setting)) == 3
    for col in a.columns:
        assert a[col].equals(b[col]), col
    clear = a[a.scenario == "clear"]
    assert clear.groupby(["recognizer", "metric"]).value.nunique().max() == 1  # one clear level per recognizer
