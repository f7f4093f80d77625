"""``[deanonymizer] augment`` (flipped and shifted copies of the attacker's images, anonymized by the evaluated
anonymizer, as more training pairs) and the learning check's identification on the held-out pairs."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

import bioanon
from bioanon.api import SampleTable, param
from bioanon.cache import Cache, fingerprint
from bioanon.context import RunContext
from bioanon.errors import ConfigError
from bioanon.evaluation.config import load_config

SIZE = 16  # images of SIZE×SIZE×1


@attrs.define(kw_only=True)
class _Images(bioanon.DatasetSource):
    """Seeded grey images: a smooth pattern per subject plus noise."""

    id: ClassVar[str] = "test.aug_images"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    needs_path: ClassVar[bool] = False

    n_subjects: int = param(10, help="subjects", low=2)
    samples: int = param(6, help="samples per subject", low=1)
    seed: int = param(0, help="seed")

    def load(self, path: Any = None) -> Any:
        rng = np.random.default_rng(self.seed)
        centres = rng.uniform(40, 215, size=(self.n_subjects, SIZE, SIZE, 1))
        subject = np.repeat(np.arange(self.n_subjects), self.samples)
        x = centres[subject] + rng.normal(0, 10, size=(len(subject), SIZE, SIZE, 1))
        return SampleTable.from_arrays(
            subject=np.array([f"s{i:02d}" for i in subject]),
            payloads={"image": np.clip(x, 0, 255).astype(np.uint8)},
        )


@attrs.define(kw_only=True)
class _Spy(bioanon.Deanonymizer):
    """Records the pairs its fit receives; returns its input."""

    id: ClassVar[str] = "test.aug_spy"
    payloads: ClassVar[tuple[str, ...]] = ("image",)
    seen: ClassVar[list[tuple[Any, Any]]] = []

    def fit(self, clear: Any, anonymized: Any) -> _Spy:
        _Spy.seen.append((clear, anonymized))
        return self

    def transform(self, table: Any) -> Any:
        return table


class _Plugin:
    @staticmethod
    @bioanon.hookimpl
    def register_datasets(register):
        register(_Images)

    @staticmethod
    @bioanon.hookimpl
    def register_deanonymizers(register):
        register(_Spy)


@pytest.fixture
def registry(register_bioanon_plugin):
    _Spy.seen.clear()
    return register_bioanon_plugin(_Plugin(), "aug_test")


def _config(**deanonymizer: Any) -> dict[str, Any]:
    return {
        "name": "aug",
        "repeats": 1,
        "dataset": {"source": "test.aug_images"},
        "rates": {"background": 0.2, "attacker": 0.4, "evaluation": 0.4},
        "anonymizers": [{"id": "any.block_permutation", "name": "perm", "params": {"block_size": 16, "key": 3}}],
        "deanonymizer": {"id": "test.aug_spy", **deanonymizer},
        "recognizers": [{"id": "any.cosine_centroid"}],
        "scenarios": ["naive", "deanon"],
        "selection": {"selectors": ["random"], "subject_counts": [4], "random_draws": 1},
        "utility": [],
        "report": {"bootstrap": 20},
    }


ANON = {"id": "any.block_permutation", "params": {"block_size": 16, "key": 3}}


def _run_op(registry, tmp_path, augment, background_rows: int):
    """The deanonymize op on an attacker set of 4 subjects (background: ``background_rows`` other images)."""
    from bioanon.evaluation.tasks import OPS

    table = _Images(n_subjects=8, samples=5).load()
    subjects = table.subjects
    attacker = table.filter(np.isin(subjects, ["s00", "s01", "s02", "s03"]))
    rest = table.filter(~np.isin(subjects, ["s00", "s01", "s02", "s03"]))
    background, evaluation = rest.take(np.arange(background_rows)), rest
    context = RunContext(registry=registry)
    anon = context.create(ANON["id"], **ANON["params"])
    if background_rows:
        anon.fit(background)
    else:
        anon.fit(attacker)
    cache = Cache(tmp_path / "cache")
    keys = {}
    for name, t in (
        ("clear_attacker", attacker),
        ("anon_attacker", anon.transform(attacker)),
        ("anon_evaluation", anon.transform(evaluation)),
        ("background", background),
    ):
        keys[name] = fingerprint(name)
        cache.put_table(keys[name], t)
    extra = {} if augment is None else {"augment": augment, "anonymizer": ANON, "background": keys["background"]}
    record = OPS["deanonymize"](
        cache,
        context=context,
        method={"id": "test.aug_spy", "params": {}},
        clear_attacker=keys["clear_attacker"],
        anon_attacker=keys["anon_attacker"],
        anon_evaluation=keys["anon_evaluation"],
        key=fingerprint("task"),
        **extra,
    )
    return attacker, anon, record


@pytest.mark.parametrize("background_rows", [5, 0])
def test_augment_multiplies_the_pairs_and_anonymizes_the_copies_with_the_same_anonymizer(
    registry, tmp_path, background_rows
):
    """flip + shift 2: 1 + 1 + 4 pairs per image; the copies' ids name their source and augmentation; the clear
    copies are the flipped / edge-padded shifted images and their anonymized twins the same fitted anonymizer's
    output on them (fitted on the background, or on the attacker set when the background is empty)."""
    from bioanon.augment import augment_table

    attacker, anon, record = _run_op(registry, tmp_path, {"flip": True, "shift": 2}, background_rows)
    (clear, anonymized) = _Spy.seen[-1]
    n = len(attacker)
    assert len(clear) == len(anonymized) == 6 * n and record["augmented_pairs"] == 5 * n
    ids = clear.sample_ids
    assert len(set(ids)) == len(ids) and np.array_equal(ids, anonymized.sample_ids)
    src = attacker.sample_ids
    assert np.array_equal(ids[n : 2 * n], [f"{i}#flip" for i in src])
    assert np.array_equal(ids[2 * n : 3 * n], [f"{i}#shift+2+0" for i in src])
    assert np.array_equal(clear.subjects, np.tile(attacker.subjects, 6))
    images = attacker.payload("image")
    assert np.array_equal(clear.payload("image")[n : 2 * n], images[:, :, ::-1])
    down = clear.payload("image")[2 * n : 3 * n]  # moved 2 rows down, the top row repeated
    assert np.array_equal(down[:, 2:], images[:, :-2]) and np.array_equal(down[:, :2], images[:, :1].repeat(2, 1))
    copies = augment_table(attacker, "image", True, 2)
    expected = anon.transform(copies).payload("image")
    assert np.array_equal(anonymized.payload("image")[n:], expected)
    assert not np.array_equal(expected, copies.payload("image"))  # the anonymizer did something


def test_without_augment_the_pairs_and_the_record_are_as_before(registry, tmp_path):
    attacker, _, record = _run_op(registry, tmp_path, None, 5)
    assert len(_Spy.seen[-1][0]) == len(attacker) and "augmented_pairs" not in record
    _run_op(registry, tmp_path / "b", {"flip": True, "shift": 0}, 5)
    assert len(_Spy.seen[-1][0]) == 2 * len(attacker)


def test_the_task_keys_are_unchanged_without_augment(registry, tmp_path):
    """Without augment the deanonymize task has its former arguments (so its key, and every cached result, stay);
    with it only the deanonymize task (and what reads its output) changes."""
    from bioanon.evaluation.run import build_plan

    data = _Images().load()
    plain = build_plan(load_config(_config()), Cache(tmp_path / "a"), data)
    aug = build_plan(load_config(_config(augment={"flip": True, "shift": 1})), Cache(tmp_path / "b"), data)
    de_plain = [t for t in plain.tasks if t.op == "deanonymize"]
    de_aug = [t for t in aug.tasks if t.op == "deanonymize"]
    assert set(de_plain[0].args) == {"method", "clear_attacker", "anon_attacker", "anon_evaluation"}
    assert de_aug[0].args["augment"] == {"flip": True, "shift": 1} and de_aug[0].key != de_plain[0].key
    before = {t.key for t in plain.tasks if t.op in ("split", "anonymize", "select")}
    assert before == {t.key for t in aug.tasks if t.op in ("split", "anonymize", "select")}


def test_an_evaluation_trains_on_the_augmented_pairs(registry, tmp_path):
    r = bioanon.evaluate(
        _config(augment={"flip": True}),
        out_dir=tmp_path,
        run_id="r",
        cache=tmp_path / "c",
        progress=False,
        report=False,
    )
    assert len(r.metrics) and any(c.sample_ids[-1].endswith("#flip") for c, _ in _Spy.seen)


def test_the_config_reads_and_writes_augment(registry):
    cfg = load_config(_config(augment={"flip": True, "shift": 2}))
    assert (cfg.augment.flip, cfg.augment.shift) == (True, 2)
    assert load_config(cfg.to_dict()) == cfg and load_config(_config()).augment is None
    assert cfg.to_dict()["deanonymizer"]["augment"] == {"flip": True, "shift": 2}
    import tomllib

    assert load_config(tomllib.loads(cfg.to_toml())) == cfg


@pytest.mark.parametrize(
    ("augment", "where"),
    [
        ({"flip": True, "rotate": 5}, "deanonymizer.augment.rotate"),
        ({"shift": -1}, "deanonymizer.augment.shift"),
        ({"shift": 1.5}, "deanonymizer.augment.shift"),
        ({"flip": "yes"}, "deanonymizer.augment.flip"),
        ("flip", "deanonymizer.augment: expected a table"),
    ],
)
def test_bad_augment_values_are_config_errors(registry, augment, where):
    with pytest.raises(ConfigError) as info:
        load_config(_config(augment=augment))
    assert any(p.startswith(where) for p in info.value.problems), info.value.problems


def test_augment_is_refused_for_data_that_are_not_images(registry):
    cfg = _config(augment={"flip": True})
    cfg["dataset"] = {"source": "any.synthetic"}
    cfg["deanonymizer"]["id"] = "any.ridge_inversion"
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert any(p.startswith("deanonymizer.augment:") and "image" in p for p in info.value.problems)


def test_a_shift_of_a_quarter_of_the_image_is_refused_against_the_data(registry):
    from bioanon.evaluation.checks import validate

    data = _Images().load()
    validate(_config(augment={"shift": SIZE // 4 - 1}), data=data)
    with pytest.raises(ConfigError, match=r"deanonymizer\.augment\.shift: 4 pixels"):
        validate(_config(augment={"shift": SIZE // 4}), data=data)


def test_held_out_pairs_keep_the_copies_with_their_source():
    """Without copies the split is the former one (a seeded permutation of the pairs); with copies the held-out
    positions are real pairs, and no copy of a held-out image is in training."""
    from bioanon.api import held_out_pairs

    ids = np.array([f"x{i}" for i in range(40)])
    val, tr = held_out_pairs(ids, 0.25, seed=5)
    perm = np.random.default_rng(5).permutation(40)
    assert np.array_equal(val, perm[:10]) and np.array_equal(tr, perm[10:])
    assert len(held_out_pairs(ids[:9], 0.25, seed=5)[0]) == 0  # fewer than 10 pairs: none held out
    both = np.concatenate([ids, np.char.add(ids, "#flip"), np.char.add(ids, "#shift-1+0")])
    val, tr = held_out_pairs(both, 0.25, seed=5)
    assert len(val) == 10 and np.isin(both[val], ids).all()
    sources = {s.split("#")[0] for s in both[tr]}
    assert not sources & set(both[val]) and len(tr) == 3 * 30


@attrs.define(kw_only=True)
class _Unpermute(bioanon.Deanonymizer):
    """Holds out given ids; restores by undoing a known column permutation (or not at all)."""

    id: ClassVar[str] = "test.unpermute"
    payloads: ClassVar[tuple[str, ...]] = ("features",)
    order: Any = None
    held: Any = None

    def fit(self, clear: Any, anonymized: Any) -> _Unpermute:
        return self

    def held_out_ids(self) -> Any:
        return self.held

    def transform(self, table: Any) -> Any:
        x = table.payload("features")
        return table if self.order is None else table.with_payload("features", x[:, np.argsort(self.order)])


def _features(n_subjects=12, per=6, dim=48, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_subjects, dim)) * 3
    subject = np.repeat(np.arange(n_subjects), per)
    x = (centres[subject] + rng.normal(size=(len(subject), dim))).astype(np.float32)
    return SampleTable.from_arrays(subject=np.array([f"p{i}" for i in subject]), payloads={"features": x})


def test_the_learning_check_measures_identification_on_the_held_out_pairs():
    """1-NN against the attacker's other clear images: clear and perfectly restored probes are recognized, the
    permuted ones not; a collapsed model's note gives the accuracies; no gallery image of a held-out subject: why."""
    from bioanon.evaluation.run import not_learned_note
    from bioanon.evaluation.tasks import learning_check

    clear = _features()
    order = np.random.default_rng(1).permutation(48)
    anonymized = clear.with_payload("features", clear.payload("features")[:, order])
    held = clear.sample_ids[::6]  # one image of each subject
    good = learning_check(_Unpermute(order=order, held=held), clear, anonymized)
    assert good["top1_probes"] == 12 and good["top1_clear"] >= 0.9 and good["top1_restored"] >= 0.9
    assert good["top1_anonymized"] <= 0.5 and good["learned"]
    bad = learning_check(_Unpermute(held=held), clear, anonymized)  # returns the anonymized input
    assert not bad["learned"] and bad["top1_restored"] <= 0.5
    note = not_learned_note({"learning": bad})
    assert "top-1" in note and f"clear {bad['top1_clear']:.2f}" in note and "restored" in note
    only = learning_check(_Unpermute(order=order, held=clear.sample_ids[:6]), clear, anonymized)  # all of p0
    assert "top1_clear" not in only and "no" in only["top1_why"]
