"""The evaluation config: loading, defaults, resolution, round trips and every class of validation error."""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pytest

import bioanon
from bioanon import (
    Anonymizer,
    ConfigError,
    DatasetSource,
    Deanonymizer,
    Selector,
    UtilityMeasure,
    param,
)
from bioanon.evaluation.config import (
    DatasetSpec,
    EvalConfig,
    MethodSpec,
    Rates,
    ReportSpec,
    load_config,
)
from bioanon.registry import Entry, Registry

# --------------------------------------------------------------------------------------------------- fakes


@attrs.define(kw_only=True)
class FolderSource(DatasetSource):
    """A dataset source that reads a folder (needs a path)."""

    id: ClassVar[str] = "test.folder"
    trait: ClassVar[str] = "test"
    needs_path: ClassVar[bool] = True
    scale: float = param(1.0, help="scale", low=0.0)

    def load(self, path=None):
        raise NotImplementedError


@attrs.define(kw_only=True)
class Pairs(Anonymizer):
    """An anonymizer with a tuple parameter, a None default and a cross-parameter check."""

    id: ClassVar[str] = "test.pairs"
    trait: ClassVar[str] = "test"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    sizes: tuple[int, ...] = param((1, 2), help="sizes", low=1)
    mode: str | None = param(None, help="mode (None = automatic)")
    limit: int | None = param(3, help="limit")
    strict: bool = param(False, help="at most two sizes")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.strict and len(self.sizes) > 2:
            raise ValueError("strict allows at most two sizes")

    def transform(self, table):
        return table


@attrs.define(kw_only=True)
class Undo(Deanonymizer):
    """A de-anonymizer."""

    id: ClassVar[str] = "test.undo"
    trait: ClassVar[str] = "test"
    alpha: float = param(1.0, help="ridge", low=0.0)


@attrs.define(kw_only=True)
class SelectFirst(Selector):
    """Select the first n subjects."""

    id: ClassVar[str] = "test.select_first"
    trait: ClassVar[str] = "test"
    seed: int = param(0, help="seed")

    def select(self, table, n, *, attacker=None):
        return sorted(set(table.subjects))[:n]


@attrs.define(kw_only=True)
class FakeRandom(Selector):
    """Stands in for any.select_random."""

    id: ClassVar[str] = "any.select_random"
    seed: int = param(0, help="seed")

    def select(self, table, n, *, attacker=None):
        return sorted(set(table.subjects))[:n]


@attrs.define(kw_only=True)
class MeanError(UtilityMeasure):
    """A utility measure."""

    id: ClassVar[str] = "test.mean_error"
    trait: ClassVar[str] = "test"
    attribute: str = param("group", help="attribute")

    def measure(self, original, anonymized):
        return np.zeros(len(original))


@attrs.define(kw_only=True)
class OtherTraitSource(DatasetSource):
    """Generates data of another trait."""

    id: ClassVar[str] = "other.synthetic"
    trait: ClassVar[str] = "other"
    needs_path: ClassVar[bool] = False

    def load(self, path=None):
        raise NotImplementedError


@attrs.define(kw_only=True)
class NeedsMissingPackage(Anonymizer):
    """Declares an optional package that is not installed."""

    id: ClassVar[str] = "test.needs_missing"
    trait: ClassVar[str] = "test"
    requires: ClassVar[dict[str, str]] = {"bioanon_no_such_package": "pip install no-such-package"}

    def transform(self, table):
        return table


class FakePlugin:
    @bioanon.hookimpl
    def register_datasets(self, register):
        register(FolderSource)
        register(OtherTraitSource)

    @bioanon.hookimpl
    def register_anonymizers(self, register):
        register(Pairs, aliases=("test.pair_alias",))
        register(NeedsMissingPackage)

    @bioanon.hookimpl
    def register_deanonymizers(self, register):
        register(Undo)

    @bioanon.hookimpl
    def register_selectors(self, register):
        register(SelectFirst, aliases=("first",))

    @bioanon.hookimpl
    def register_utility_measures(self, register):
        register(MeanError)


@pytest.fixture
def registry(register_bioanon_plugin):
    return register_bioanon_plugin(FakePlugin(), "config_test_plugin")


@pytest.fixture
def registry_with_random(registry):
    """The test registry plus a stand-in for any.select_random (alias "random"), independent of whether the
    real one is installed."""
    entries = {k: registry[k] for k in registry}
    entries["any.select_random"] = Entry(FakeRandom, "test", ("random",))
    return Registry(entries)


FULL_TOML = """\
name = "demo"
seed = 3
repeats = 2
label = "subject"
scenarios = ["naive", "lazy", "parrot", "parrot:0.50", "deanon"]

[dataset]
source = "test.folder"
path = "data/x"
params = { scale = 2 }

[rates]
background = 0.2
attacker = 0.3
evaluation = 0.5
enrolment = 0.6

[[anonymizers]]
id = "any.gaussian_noise"
name = "noise"
params = { relative = false }
grid = { sigma = [0.5, 1], seed = [0, 1] }

[[anonymizers]]
id = "test.pair_alias"
params = { sizes = [3, 4] }

[[anonymizers]]
id = "any.identity"

[deanonymizer]
id = "test.undo"
params = { alpha = 2 }

[[recognizers]]
id = "any.cosine_centroid"
params = {}

[selection]
selectors = ["first", { id = "test.select_first", name = "first-7", params = { seed = 7 } }]
subject_counts = [5, 20, 10, 10]
random_draws = 3

[[utility]]
id = "test.mean_error"
params = { attribute = "activity" }

[report]
bootstrap = 200
confidence = 0.9
per_probe_scores = true
"""


def minimal(**over):
    """A small valid config dict (generator data set, explicit selector so no dependency on any.select_random)."""
    cfg = {
        "dataset": {"source": "any.synthetic", "params": {"n_subjects": 60}},
        "anonymizers": [{"id": "any.gaussian_noise"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
        "selection": {"selectors": ["test.select_first"]},
    }
    cfg.update(over)
    return cfg


def problems(source, **kw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(source, **kw)
    err = info.value
    lines = err.problems
    # every problem is also a line of the message
    assert all(("  " + p) in str(err).splitlines() for p in lines)
    return lines


def write_full(tmp_path: Path) -> Path:
    (tmp_path / "data" / "x").mkdir(parents=True)
    path = tmp_path / "eval.toml"
    path.write_text(FULL_TOML)
    return path


# --------------------------------------------------------------------------------------------------- valid configs


def test_full_toml_loads_resolved(tmp_path, registry):
    cfg = load_config(write_full(tmp_path), registry=registry)
    assert (cfg.name, cfg.seed, cfg.repeats, cfg.label) == ("demo", 3, 2, "subject")
    assert cfg.scenarios == ("naive", "lazy", "parrot", "parrot:0.5", "deanon")
    assert cfg.all_scenarios() == ("clear", "chance") + cfg.scenarios
    assert cfg.dataset == DatasetSpec("test.folder", str(tmp_path / "data" / "x"), {"scale": 2.0})
    assert cfg.rates == Rates(0.2, 0.3, 0.5, 0.6)
    noise, pairs, identity = cfg.anonymizers
    assert noise.name == "noise" and noise.id == "any.gaussian_noise"
    assert noise.params == {"relative": False, "payload": ""}  # completed with defaults, grid keys excluded
    assert noise.grid == {"sigma": (0.5, 1.0), "seed": (0, 1)}
    assert pairs.id == "test.pairs" and pairs.name == "test.pair_alias"  # alias resolved; name = id as written
    assert pairs.params == {"sizes": (3, 4), "mode": None, "limit": 3, "strict": False}
    assert identity.params == {} and identity.settings() == [{}]
    assert cfg.deanonymizer == MethodSpec("test.undo", {"alpha": 2.0}, {}, "test.undo")
    assert [r.id for r in cfg.recognizers] == ["any.cosine_centroid"]
    assert cfg.recognizers[0].params == {"center": True, "payload": "", "declared_comparator": True}
    sel = cfg.selection
    assert [(s.id, s.name, s.params) for s in sel.selectors] == [
        ("test.select_first", "first", {"seed": 0}),
        ("test.select_first", "first-7", {"seed": 7}),
    ]
    assert sel.subject_counts == (20, 10, 5) and sel.random_draws == 3
    assert cfg.utility == (MethodSpec("test.mean_error", {"attribute": "activity"}),)
    assert cfg.report == ReportSpec(200, 0.9, True)


def test_round_trips_through_dict_json_and_toml(tmp_path, registry):
    cfg = load_config(write_full(tmp_path), registry=registry)
    d = cfg.to_dict()
    assert json.loads(json.dumps(d)) == d  # JSON-able: tuples became lists
    assert d["anonymizers"][1]["params"]["sizes"] == [3, 4]
    assert d["anonymizers"][0]["grid"] == {"sigma": [0.5, 1.0], "seed": [0, 1]}
    again = load_config(d, registry=registry)
    assert again == cfg
    assert load_config(json.loads(json.dumps(d)), registry=registry) == cfg
    assert again.to_dict() == d
    text = cfg.to_toml()
    tomllib.loads(text)
    out = tmp_path / "elsewhere" / "resolved.toml"
    out.parent.mkdir()
    out.write_text(text)
    assert load_config(out, registry=registry) == cfg  # absolute dataset path survives the move
    # the comparison must be able to fail
    assert load_config({**d, "seed": 4}, registry=registry) != cfg
    assert load_config(cfg) is cfg


def test_to_toml_none_values(registry):
    cfg = load_config(minimal(anonymizers=[{"id": "test.pairs"}]), registry=registry)
    assert cfg.anonymizers[0].params["mode"] is None
    assert "mode" not in cfg.to_toml()  # None default: left out, reads back the same
    assert load_config(tomllib.loads(cfg.to_toml()), registry=registry) == cfg
    cfg = load_config(minimal(anonymizers=[{"id": "test.pairs", "params": {"limit": None}}]), registry=registry)
    with pytest.raises(ValueError, match=r"anonymizers\[0\]\.params\.limit"):
        cfg.to_toml()
    assert load_config(cfg.to_dict(), registry=registry) == cfg  # JSON keeps it


def test_defaults_filled(registry_with_random):
    cfg = load_config(
        {
            "dataset": {"source": "any.synthetic", "params": {"n_subjects": 60}},
            "anonymizers": [{"id": "any.identity"}],
            "recognizers": [{"id": "any.cosine_centroid"}],
        },
        registry=registry_with_random,
    )
    assert (cfg.name, cfg.seed, cfg.repeats, cfg.label) == ("evaluation", 0, 1, "subject")
    assert cfg.scenarios == ("naive", "parrot")
    assert cfg.rates == Rates(0.2, 0.4, 0.4, 0.5)
    assert cfg.deanonymizer is None and cfg.utility == ()
    assert cfg.selection.selectors == (MethodSpec("any.select_random", {"seed": 0}, name="random"),)
    assert cfg.selection.subject_counts == () and cfg.selection.random_draws == 5
    assert cfg.report == ReportSpec(1000, 0.95, False)
    assert cfg.dataset.path is None
    assert cfg.dataset.params["n_subjects"] == 60 and cfg.dataset.params["seed"] == 0
    assert set(cfg.dataset.params) == {p["name"] for p in cfg.dataset.create().param_specs()}
    d = cfg.to_dict()
    assert d["scenarios"] == ["naive", "parrot"] and d["report"]["bootstrap"] == 1000
    assert "deanonymizer" not in d and "path" not in d["dataset"]
    assert load_config(d, registry=registry_with_random) == cfg

    with_deanon = load_config({**minimal(), "deanonymizer": {"id": "test.undo"}}, registry=registry_with_random)
    assert with_deanon.scenarios == ("naive", "parrot", "deanon")


def test_default_registry_is_the_process_registry(registry):
    cfg = load_config(minimal(anonymizers=[{"id": "test.pair_alias"}]))
    assert cfg.anonymizers[0].id == "test.pairs"


def test_grid_cartesian_product_in_written_order(registry):
    cfg = load_config(
        minimal(anonymizers=[{"id": "any.gaussian_noise", "grid": {"sigma": [1, 0.5, 2], "seed": [5, 1]}}]),
        registry=registry,
    )
    spec = cfg.anonymizers[0]
    settings = spec.settings()
    assert [(s["sigma"], s["seed"]) for s in settings] == [
        (1.0, 5), (1.0, 1), (0.5, 5), (0.5, 1), (2.0, 5), (2.0, 1),
    ]  # fmt: skip
    assert all(s["relative"] is True and s["payload"] == "" for s in settings)
    assert spec.setting_label(settings[3]) == "sigma=0.5, seed=1"
    m = spec.create(settings[3])
    assert (m.id, m.sigma, m.seed) == ("any.gaussian_noise", 0.5, 1)
    assert spec.create({"sigma": 2.0, "seed": 0}).sigma == 2.0  # the grid part alone is enough
    with pytest.raises(ValueError, match="sigma, seed"):
        spec.create()
    # keys in the other order give the other product
    spec2 = load_config(
        minimal(anonymizers=[{"id": "any.gaussian_noise", "grid": {"seed": [5, 1], "sigma": [1, 0.5]}}]),
        registry=registry,
    ).anonymizers[0]
    assert [(s["seed"], s["sigma"]) for s in spec2.settings()] == [(5, 1.0), (5, 0.5), (1, 1.0), (1, 0.5)]
    assert spec2.setting_label(spec2.settings()[1]) == "seed=5, sigma=0.5"
    no_grid = cfg.recognizers[0]
    assert no_grid.settings() == [no_grid.params] and no_grid.setting_label(no_grid.params) == ""
    assert no_grid.create().id == "any.cosine_centroid"


def test_method_spec_by_hand_uses_registry(registry):
    spec = MethodSpec("any.gaussian_noise", {"relative": False}, {"sigma": [0.1, 0.2]})
    assert spec.name == "any.gaussian_noise" and spec.grid == {"sigma": (0.1, 0.2)}
    assert [m.sigma for m in map(spec.create, spec.settings())] == [0.1, 0.2]


def test_relative_path_resolution(tmp_path, registry, monkeypatch):
    (tmp_path / "data").mkdir()
    sub = tmp_path / "configs"
    sub.mkdir()
    cfg_file = sub / "eval.toml"
    body = FULL_TOML.replace('path = "data/x"', 'path = "../data"')
    cfg_file.write_text(body)
    assert load_config(cfg_file, registry=registry).dataset.path == str(tmp_path / "data")
    # base_dir overrides the file's directory
    (tmp_path / "other" / "data").mkdir(parents=True)
    cfg_file.write_text(FULL_TOML.replace('path = "data/x"', 'path = "data"'))
    got = load_config(cfg_file, registry=registry, base_dir=tmp_path / "other")
    assert got.dataset.path == str(tmp_path / "other" / "data")
    # a dict: base_dir, else the current directory
    d = tomllib.loads(FULL_TOML.replace('path = "data/x"', 'path = "data"'))
    assert load_config(d, registry=registry, base_dir=tmp_path).dataset.path == str(tmp_path / "data")
    monkeypatch.chdir(tmp_path / "other")
    assert load_config(d, registry=registry).dataset.path == str(tmp_path / "other" / "data")
    # absolute paths are kept; a missing path is reported unless check_paths=False
    d["dataset"]["path"] = str(tmp_path / "nope")
    assert problems(d, registry=registry) == [f"dataset.path: no such file or directory: {str(tmp_path / 'nope')!r}"]
    assert load_config(d, registry=registry, check_paths=False).dataset.path == str(tmp_path / "nope")


def test_aliases_resolved_to_canonical_ids(registry):
    cfg = load_config(
        minimal(
            anonymizers=[{"id": "test.pair_alias", "name": "p"}],
            selection={"selectors": ["first", {"id": "first", "name": "again"}]},
        ),
        registry=registry,
    )
    assert cfg.anonymizers[0].id == "test.pairs" and cfg.anonymizers[0].name == "p"
    assert [s.id for s in cfg.selection.selectors] == ["test.select_first", "test.select_first"]
    assert cfg.to_dict()["selection"]["selectors"][0]["id"] == "test.select_first"


# --------------------------------------------------------------------------------------------------- errors


def test_unknown_keys_with_suggestions(registry):
    cfg = minimal(
        repets=2,
        selection={"selectors": ["first"], "subject_count": [5]},
        anonymizers=[{"id": "any.gaussian_noise", "sigma": 0.3, "parms": {}}],
        recognizers=[{"id": "any.cosine_centroid", "scenarios": ["naive"]}],
        report={"xyz": 1},
    )
    cfg["dataset"]["n_subjects"] = 60
    assert problems(cfg, registry=registry) == [
        "repets: unknown key; did you mean 'repeats'?",
        "dataset.n_subjects: unknown key; method parameters go in params (params.n_subjects = ...)",
        "anonymizers[0].sigma: unknown key; method parameters go in params (params.sigma = ...)",
        "anonymizers[0].parms: unknown key; did you mean 'params'?",
        "recognizers[0].scenarios: unknown key; 'scenarios' is a top-level key: in TOML, top-level keys must "
        "come before the first [table] header",
        "selection.subject_count: unknown key; did you mean 'subject_counts'?",
        "report.xyz: unknown key; allowed: bootstrap, confidence, per_probe_scores, paper_protocol, "
        "reversibility_thresholds, breakdown",
    ]


def test_wrong_types_and_ranges(registry):
    cfg = minimal(
        name="",
        seed=-1,
        repeats="2",
        label=3,
        anonymizers=[
            {"id": "any.identity"},
            {"id": "any.gaussian_noise", "grid": {"sigma": 0.5, "seed": []}},
        ],
        selection={"selectors": ["first"], "subject_counts": [10, 1, "5"], "random_draws": 0},
        report={"bootstrap": -1, "confidence": 1.0, "per_probe_scores": "yes"},
    )
    assert problems(cfg, registry=registry) == [
        "name: expected a non-empty string, got '' (str)",
        "seed: expected an integer ≥ 0, got -1 (int)",
        "repeats: expected an integer ≥ 1, got '2' (str)",
        "label: expected a non-empty string, got 3 (int)",
        "anonymizers[1].grid.sigma: expected a non-empty list of values, got 0.5 (float)",
        "anonymizers[1].grid.seed: expected a non-empty list of values, got [] (list)",
        "selection.subject_counts[1]: expected an integer ≥ 2, got 1 (int)",
        "selection.subject_counts[2]: expected an integer ≥ 2, got '5' (str)",
        "selection.random_draws: expected an integer ≥ 1, got 0 (int)",
        "report.bootstrap: expected an integer ≥ 0, got -1 (int)",
        "report.confidence: expected a number in (0, 1), got 1.0 (float)",
        "report.per_probe_scores: expected true or false, got 'yes' (str)",
    ]
    assert problems(minimal(repeats=True), registry=registry) == ["repeats: expected an integer ≥ 1, got True (bool)"]
    assert problems(minimal(name="a/b"), registry=registry) == [
        "name: expected a name without path separators, got 'a/b' (str)"
    ]


def test_structure_errors(registry):
    assert problems(minimal(anonymizers={"id": "any.identity"}), registry=registry) == [
        "anonymizers: expected a list of tables, got a single table: write [[anonymizers]], not [anonymizers]"
    ]
    assert problems(minimal(recognizers=[]), registry=registry) == [
        "recognizers: expected at least one [[recognizers]] table, got an empty list"
    ]
    assert problems(minimal(dataset="any.synthetic"), registry=registry) == [
        "dataset: expected a table, got 'any.synthetic' (str)"
    ]
    assert problems(minimal(recognizers=["any.cosine_centroid"]), registry=registry) == [
        "recognizers[0]: expected a table with an id, got 'any.cosine_centroid' (str)"
    ]
    assert problems(
        minimal(recognizers=[{"id": "any.cosine_centroid", "grid": {"center": [True, False]}}]), registry=registry
    ) == ["recognizers[0].grid: unknown key; only anonymizers take a grid (list one table per setting instead)"]
    assert problems(minimal(anonymizers=[{"id": "any.gaussian_noise", "params": 0.5}]), registry=registry) == [
        "anonymizers[0].params: expected a table of parameters, got 0.5 (float)"
    ]
    for bad in (42, [1, 2]):
        with pytest.raises(ConfigError, match="path or a mapping"):
            load_config(bad, registry=registry)  # type: ignore[arg-type]


def test_missing_required_keys(registry):
    assert problems({"selection": {"selectors": ["first"]}}, registry=registry) == [
        "dataset.source: missing required key (the [dataset] table names a dataset source)",
        "anonymizers: missing required key (at least one [[anonymizers]] table)",
        "recognizers: missing required key (at least one [[recognizers]] table)",
    ]
    cfg = minimal(dataset={"params": {}}, anonymizers=[{"params": {"sigma": 1}}])
    assert problems(cfg, registry=registry) == [
        "dataset.source: missing required key (a registered dataset source id)",
        "anonymizers[0].id: missing required key (a registered anonymizer id)",
    ]


def test_missing_default_selector_is_reported(registry):
    without = Registry(
        {k: registry[k] for k in registry if k != "any.select_random" and "random" not in registry[k].aliases}
    )
    cfg = minimal()
    del cfg["selection"]
    assert problems(cfg, registry=without) == [
        "selection.selectors: the default selector 'random' is not installed; list the selectors explicitly"
    ]


def test_rates(registry):
    bad_sum = {"background": 0.2, "attacker": 0.4, "evaluation": 0.5, "enrolment": 0.5}
    assert problems(minimal(rates=bad_sum), registry=registry) == [
        "rates: background + attacker + evaluation must sum to 1, got 0.2 + 0.4 + 0.5 = 1.1"
    ]
    ranges = {"background": 1, "attacker": 0.5, "evaluation": 0.5, "enrolment": 1}
    assert problems(minimal(rates=ranges), registry=registry) == [
        "rates.background: expected a number in (0, 1), got 1 (int); 0 = no background",
        "rates.enrolment: expected a number in (0, 1), got 1 (int)",
    ]
    # SEBA's two-share form (evaluation = the rest) must leave an evaluation share; other partial forms are refused
    assert problems(minimal(rates={"background": 0.5, "attacker": 0.5}), registry=registry) == [
        "rates: background + attacker = 0.5 + 0.5 = 1 leaves no evaluation share (evaluation = 1 - background - "
        "attacker must be > 0)"
    ]
    assert problems(minimal(rates={"background": 0.5, "evaluation": 0.5}), registry=registry) == [
        "rates.attacker: missing: give all of background, attacker and evaluation (they must sum to 1), background "
        "and attacker (evaluation = the rest), or none"
    ]
    ok = load_config(minimal(rates={"background": 0.1, "attacker": 0.2, "evaluation": 0.7}), registry=registry)
    assert ok.rates == Rates(0.1, 0.2, 0.7, 0.5)
    assert load_config(minimal(rates={"enrolment": 0.25}), registry=registry).rates.enrolment == 0.25


def test_unknown_and_wrong_kind_method_ids(registry):
    cfg = minimal(
        dataset={"source": "any.synthetc"},
        anonymizers=[{"id": "any.gaussian_noise"}, {"id": "any.cosine_centroid"}],
        recognizers=[{"id": "any.cosine_centroi"}, {"id": "zzz.nothing_like_it"}],
        selection={"selectors": ["frist", 3]},
        utility=[{"id": "test.undo"}],
    )
    assert problems(cfg, registry=registry) == [
        "dataset.source: unknown dataset source 'any.synthetc'; did you mean 'any.synthetic'?",
        "anonymizers[1].id: 'any.cosine_centroid' is a recognizer, not an anonymizer",
        "recognizers[0].id: unknown recognizer 'any.cosine_centroi'; did you mean 'any.cosine_centroid'?",
        "recognizers[1].id: unknown recognizer 'zzz.nothing_like_it'; run `bioanon methods --kind recognizer` to "
        "list the installed ones",
        "selection.selectors[0]: unknown selector 'frist'; did you mean 'first'?",
        "selection.selectors[1]: expected a selector id or a table, got 3 (int)",
        "utility[0].id: 'test.undo' is a deanonymizer, not a utility measure",
    ]


def test_method_parameters_validated_for_every_grid_setting(registry):
    cfg = minimal(
        anonymizers=[
            {"id": "any.gaussian_noise", "grid": {"sigma": [0.5, 1.0, -1], "seed": [0, 1]}},
            {"id": "any.gaussian_noise", "name": "b", "params": {"sigma": -2, "sigmaa": 1}, "grid": {"sed": [1]}},
            {"id": "any.gaussian_noise", "name": "c", "params": {"seed": 1}, "grid": {"seed": [2]}},
            {"id": "test.pairs", "params": {"strict": True}, "grid": {"sizes": [[1], [1, 2, 3], [0]]}},
            {"id": "any.identity", "params": {"x": 1}},
            {"id": "any.gaussian_noise", "name": "e", "params": {"sigma": -3}, "grid": {"seed": [1, "x"]}},
        ],
        recognizers=[{"id": "any.cosine_centroid", "params": {"center": "yes"}}],
    )
    assert problems(cfg, registry=registry) == [
        "anonymizers[0].grid.sigma[2]: any.gaussian_noise: parameter 'sigma' = -1 is invalid; allowed: in [0, inf)",
        "anonymizers[1].params.sigmaa: unknown parameter of any.gaussian_noise; did you mean 'sigma'?",
        "anonymizers[1].grid.sed: unknown parameter of any.gaussian_noise; did you mean 'seed'?",
        "anonymizers[1].params.sigma: any.gaussian_noise: parameter 'sigma' = -2 is invalid; allowed: in [0, inf)",
        "anonymizers[2].grid.seed: also given in params; give it in one place",
        "anonymizers[3].grid.sizes[2]: test.pairs: parameter 'sizes' = [0] is invalid; allowed: in [1, inf)",
        "anonymizers[3]: test.pairs(strict=True, sizes=[1, 2, 3]) failed: ValueError: strict allows at most two sizes",
        "anonymizers[4].params.x: unknown parameter of any.identity; any.identity takes no parameters",
        # a bad fixed parameter does not hide a bad grid value of the same entry
        "anonymizers[5].params.sigma: any.gaussian_noise: parameter 'sigma' = -3 is invalid; allowed: in [0, inf)",
        "anonymizers[5].grid.seed[1]: any.gaussian_noise: parameter 'seed' = 'x' is invalid; allowed: int",
        "recognizers[0].params.center: any.cosine_centroid: parameter 'center' = 'yes' is invalid; allowed: bool",
    ]


def test_dataset_path_rules(tmp_path, registry):
    cfg = minimal()
    cfg["dataset"]["path"] = "somewhere"
    assert problems(cfg, registry=registry, base_dir=tmp_path) == [
        "dataset.path: not allowed: any.synthetic generates its data and takes no path"
    ]
    assert problems(minimal(dataset={"source": "test.folder"}), registry=registry) == [
        "dataset.path: missing required key: test.folder reads a data set from disk; give its path"
    ]
    assert problems(minimal(dataset={"source": "test.folder", "path": 3}), registry=registry) == [
        "dataset.path: expected a path (string), got 3 (int)",
        "dataset.path: missing required key: test.folder reads a data set from disk; give its path",
    ]
    assert problems(minimal(dataset={"source": "any.synthetic", "params": {"n_subjects": 1}}), registry=registry) == [
        "dataset.params.n_subjects: any.synthetic: parameter 'n_subjects' = 1 is invalid; allowed: in [2, inf)"
    ]


def test_scenarios(registry):
    cfg = minimal(scenarios=["naive", "parot", "parrot:1.5", "parrot:x", "deanon", "clear", "naive", "parrot:.25"])
    assert problems(cfg, registry=registry) == [
        "scenarios[1]: unknown scenario 'parot'; did you mean 'parrot'?",
        "scenarios[2]: the parrot share must be in (0, 1), got 'parrot:1.5'",
        "scenarios[3]: expected 'parrot:<share>' with a number share in (0, 1), got 'parrot:x'",
        "scenarios[4]: 'deanon' needs a de-anonymizer: add a [deanonymizer] table",
        "scenarios[5]: 'clear' is always evaluated; do not list it",
        "scenarios[6]: duplicate scenario 'naive'",
    ]
    assert problems(minimal(scenarios="naive"), registry=registry) == [
        "scenarios: expected a non-empty list of scenario names, got 'naive' (str)"
    ]
    assert problems(minimal(scenarios=["naive"], deanonymizer={"id": "test.undo"}), registry=registry) == [
        "deanonymizer: given but unused: add 'deanon' to scenarios or remove [deanonymizer]"
    ]
    assert problems(minimal(scenarios=["lazzy:0.5"]), registry=registry) == [
        "scenarios[0]: unknown scenario 'lazzy:0.5'; did you mean 'lazy:0.5'?"
    ]
    ok = load_config(minimal(scenarios=["parrot:.25", "lazy"]), registry=registry)
    assert ok.scenarios == ("parrot:0.25", "lazy")


def test_duplicate_names(registry):
    cfg = minimal(
        anonymizers=[
            {"id": "any.gaussian_noise"},
            {"id": "any.gaussian_noise", "params": {"sigma": 1.0}},
            {"id": "any.identity", "name": "x"},
            {"id": "any.gaussian_noise", "name": "x"},
        ],
        recognizers=[{"id": "any.cosine_centroid"}, {"id": "any.cosine_centroid", "params": {"center": False}}],
    )
    assert problems(cfg, registry=registry) == [
        "anonymizers[1].name: duplicate name 'any.gaussian_noise' (also anonymizers[0]); give each a distinct name",
        "anonymizers[3].name: duplicate name 'x' (also anonymizers[2]); give each a distinct name",
        "recognizers[1].name: duplicate name 'any.cosine_centroid' (also recognizers[0]); give each a distinct name",
    ]


def test_many_problems_in_one_error(tmp_path, registry):
    path = tmp_path / "bad.toml"
    path.write_text(
        textwrap.dedent(
            """\
            repeats = "2"
            scenarios = ["naive", "parot"]

            [dataset]
            source = "any.synthetic"

            [[anonymizers]]
            id = "any.gaussian_noise"
            grid = { sigma = 0.5 }

            [[recognizers]]
            id = "any.cosine_centroi"

            [selection]
            selectors = ["first"]
            subject_count = [5]
            """
        )
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, registry=registry)
    msg = str(info.value)
    lines = msg.splitlines()
    assert lines[0] == f"invalid evaluation config {path} (5 problems):"
    assert lines[1:] == [
        "  repeats: expected an integer ≥ 1, got '2' (str)",
        "  anonymizers[0].grid.sigma: expected a non-empty list of values, got 0.5 (float)",
        "  recognizers[0].id: unknown recognizer 'any.cosine_centroi'; did you mean 'any.cosine_centroid'?",
        "  scenarios[1]: unknown scenario 'parot'; did you mean 'parrot'?",
        "  selection.subject_count: unknown key; did you mean 'subject_counts'?",
    ]
    assert isinstance(info.value, bioanon.BioanonError) and isinstance(info.value, ValueError)


def test_toml_syntax_error_and_missing_file(tmp_path, registry):
    path = tmp_path / "broken.toml"
    path.write_text('name = "x"\nseed = \n')
    [line] = problems(path, registry=registry)
    assert line.startswith(f"{path}: invalid TOML: ") and "line 2" in line
    missing = tmp_path / "nope.toml"
    assert problems(missing, registry=registry) == [f"{missing}: no such config file"]
    assert problems(str(tmp_path), registry=registry) == [f"{tmp_path}: is a directory, not a config file"]


def test_config_is_frozen(registry):
    cfg = load_config(minimal(), registry=registry)
    assert isinstance(cfg, EvalConfig)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cfg.seed = 2  # type: ignore[misc]


def test_methods_must_suit_the_data_and_have_their_packages(registry):
    cfg = minimal(
        dataset={"source": "other.synthetic"},
        anonymizers=[{"id": "test.pairs"}, {"id": "any.gaussian_noise"}, {"id": "test.needs_missing"}],
        utility=[{"id": "test.mean_error"}],
    )
    assert problems(cfg, registry=registry) == [
        "anonymizers[0].id: test.pairs is a test method, but the data set other.synthetic holds other data; use "
        "other.* or any.* methods (`bioanon methods 'other.*' 'any.*' --kind anonymizer`)",
        "anonymizers[2].id: test.pairs is a test method, but the data set other.synthetic holds other data; use "
        "other.* or any.* methods (`bioanon methods 'other.*' 'any.*' --kind anonymizer`)".replace(
            "test.pairs", "test.needs_missing"
        ),
        "anonymizers[2].id: test.needs_missing needs bioanon_no_such_package, which cannot be imported here: "
        "pip install no-such-package",
        "selection.selectors[0]: test.select_first is a test method, but the data set other.synthetic holds other "
        "data; use other.* or any.* methods (`bioanon methods 'other.*' 'any.*' --kind selector`)",
        "utility[0].id: test.mean_error is a test method, but the data set other.synthetic holds other data; use "
        "other.* or any.* methods (`bioanon methods 'other.*' 'any.*' --kind utility`)",
    ]
    # an any.* source (features of any origin) is checked on its payloads once loaded, not by trait
    assert "test.needs_missing needs" in "\n".join(
        problems(minimal(anonymizers=[{"id": "test.needs_missing"}]), registry=registry)
    )
