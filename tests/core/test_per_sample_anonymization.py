"""Per-sample anonymizers (``Anonymizer.per_sample``) anonymize each data set once, in shards that are separate
cached tasks, and every part of every split is a row selection of that: the metrics equal one transform per part,
a rates-only change anonymizes nothing again, and a false claim fails the conformance check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from evalconfigs import config

import bioanon
from bioanon.api import SampleTable
from bioanon.builtin.anonymizers import BlockPermutation, GaussianNoise
from bioanon.cache import Cache
from bioanon.evaluation import tasks
from bioanon.testing import check_method


def _table(ids, offset=0):
    return SampleTable.from_arrays(
        subject=np.array([f"s{i // 2}" for i in ids], dtype=object),
        sample_id=[f"x{i}" for i in ids],
        payloads={"features": (np.arange(2 * len(ids), dtype=np.float32).reshape(-1, 2) + offset)},
    )


def test_a_concatenation_reads_back_as_its_parts_in_order_and_a_missing_part_as_a_miss(tmp_path):
    cache = Cache(tmp_path)
    parts = [_table([0, 1, 2]), _table([3, 4], offset=100)]
    keys = ["a1" * 16, "b2" * 16]
    for k, t in zip(keys, parts, strict=True):
        cache.put_table(k, t)
    whole_key, rows_key = "c3" * 16, "d4" * 16
    cache.put_concat(whole_key, keys)
    whole = cache.get_table(whole_key)
    assert whole.sample_ids.tolist() == ["x0", "x1", "x2", "x3", "x4"]
    np.testing.assert_array_equal(whole.payload("features"), np.concatenate([p.payload("features") for p in parts]))
    # a row selection of a concatenation: the rows of both parts, in the selection's order
    cache.put_rows(rows_key, whole_key, [4, 0, 3])
    assert cache.get_table(rows_key).sample_ids.tolist() == ["x4", "x0", "x3"]
    assert Path(cache.table_path(whole_key)).stat().st_size < Path(cache.table_path(keys[0])).stat().st_size
    Path(cache.table_path(keys[1])).unlink()
    assert cache.get_table(whole_key) is None and cache.get_table(rows_key) is None  # a part is gone: a miss


def test_parts_with_other_columns_are_no_concatenation(tmp_path):
    cache = Cache(tmp_path)
    other = SampleTable.from_arrays(
        subject=np.array(["s9"], dtype=object), sample_id=["y"], payloads={"imu": np.zeros((1, 2, 3), np.float32)}
    )
    cache.put_table("a1" * 16, _table([0]))
    cache.put_table("b2" * 16, other)
    cache.put_concat("c3" * 16, ["a1" * 16, "b2" * 16])
    with pytest.warns(Warning, match="different columns"):
        assert cache.get_table("c3" * 16) is None


@pytest.mark.parametrize("n_rows", [0, 1, 255, 256, 1000, 100_000])
@pytest.mark.parametrize("row_bytes", [4.0, 1024.0, 2.0**20])
def test_shards_cover_every_row_once_in_about_equal_parts(n_rows, row_bytes):
    bounds = tasks.shard_bounds(n_rows, row_bytes)
    assert [b for _, b in bounds][-1:] == ([n_rows] if n_rows else [])
    assert all(a < b for a, b in bounds) and all(
        b == a2 for (_, b), (a2, _) in zip(bounds[:-1], bounds[1:], strict=True)
    )
    sizes = [b - a for a, b in bounds]
    if sizes:
        assert max(sizes) - min(sizes) <= 1
        per_shard = max(tasks.SHARD_MIN_ROWS, tasks.SHARD_BYTES // row_bytes)  # rows of a full shard
        assert len(sizes) == 1 or per_shard / 2 <= min(sizes) <= max(sizes) <= per_shard


def _config(rates=(0.2, 0.4, 0.4), anonymizer="any.block_permutation"):
    """320 samples of 40 subjects, two settings of ``anonymizer``, two repeats."""
    return config(
        name="per-sample",
        seed=3,
        dataset={"source": "any.synthetic", "params": {"n_subjects": 40, "samples_per_subject": 8, "dim": 8}},
        rates=dict(zip(("background", "attacker", "evaluation"), rates, strict=True)),
        anonymizers=[{"id": anonymizer, "grid": {"key": [1, 2]}}],
        recognizers=[{"id": "any.cosine_centroid"}],
        selection={"selectors": ["random"], "subject_counts": [6], "random_draws": 1},
        utility=[],
        report={"bootstrap": 20},
    )


@pytest.fixture
def small_shards(monkeypatch):
    """Shards of 100 rows (the synthetic set has 320): several shards per data set."""
    monkeypatch.setattr(tasks, "SHARD_MIN_ROWS", 100)
    monkeypatch.setattr(tasks, "SHARD_BYTES", 1)


def _metrics(result):
    m = result.metrics.sort_values(list(result.metrics.columns[:8])).reset_index(drop=True)
    return m.select_dtypes("number").to_numpy()


def test_a_per_sample_anonymizer_runs_in_shards_with_the_metrics_of_one_transform_per_part(
    tmp_path, small_shards, monkeypatch
):
    calls: list[int] = []
    transform = BlockPermutation.transform
    monkeypatch.setattr(BlockPermutation, "transform", lambda self, t: calls.append(len(t)) or transform(self, t))
    cache = Cache(tmp_path / "cache")
    sharded = bioanon.evaluate(_config(), out_dir=None, cache=cache, progress=False, report=False, jobs=1)
    # 2 settings × 4 shards of the 320 samples, shared by both repeats: each sample anonymized once per setting
    assert sorted(calls) == [80] * 8
    calls.clear()
    monkeypatch.setattr(BlockPermutation, "per_sample", False)  # the per-part path: one transform per part
    whole = bioanon.evaluate(_config(), out_dir=None, cache=Cache(tmp_path / "c2"), progress=False, report=False)
    assert len(calls) == 2 * 2 * 2  # settings × repeats × (attacker, evaluation)
    np.testing.assert_array_equal(_metrics(sharded), _metrics(whole))


def test_a_part_not_found_in_the_anonymized_whole_is_anonymized_on_its_own(tmp_path, small_shards, monkeypatch):
    sharded = bioanon.evaluate(_config(), out_dir=None, cache=Cache(tmp_path / "c1"), progress=False, report=False)
    monkeypatch.setattr(tasks, "_rows_in", lambda whole, part: None)  # e.g. a data set whose sample ids repeat
    apart = bioanon.evaluate(_config(), out_dir=None, cache=Cache(tmp_path / "c2"), progress=False, report=False)
    np.testing.assert_array_equal(_metrics(sharded), _metrics(apart))


def test_attacker_data_from_another_data_set_is_anonymized_in_its_own_shards(tmp_path, small_shards, monkeypatch):
    def synthetic(seed):
        return {
            "source": "any.synthetic",
            "params": {"n_subjects": 30, "samples_per_subject": 8, "dim": 8, "seed": seed},
        }

    cfg = _config()
    cfg.update(dataset=synthetic(3), attacker_dataset={**synthetic(11), "subject_prefix": "xdb:"}, repeats=1)
    cfg["rates"] = {"background": 0.3, "evaluation": 0.7}
    cfg["anonymizers"] = [{"id": "any.block_permutation", "params": {"key": 4}}]
    calls: list[int] = []
    transform = BlockPermutation.transform
    monkeypatch.setattr(BlockPermutation, "transform", lambda self, t: calls.append(len(t)) or transform(self, t))
    sharded = bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "a"), progress=False, report=False)
    assert sorted(calls) == [80] * 6  # 240 samples of each data set in 3 shards
    monkeypatch.setattr(BlockPermutation, "per_sample", False)
    apart = bioanon.evaluate(cfg, out_dir=None, cache=Cache(tmp_path / "b"), progress=False, report=False)
    np.testing.assert_array_equal(_metrics(sharded), _metrics(apart))


def test_a_rates_only_change_anonymizes_no_sample_again(tmp_path, small_shards, monkeypatch):
    cache = Cache(tmp_path / "cache")
    bioanon.evaluate(_config(), out_dir=None, cache=cache, progress=False, report=False, jobs=1)
    calls: list[int] = []
    transform = BlockPermutation.transform
    monkeypatch.setattr(BlockPermutation, "transform", lambda self, t: calls.append(len(t)) or transform(self, t))
    r = bioanon.evaluate(_config((0.1, 0.5, 0.4)), out_dir=None, cache=cache, progress=False, report=False, jobs=1)
    assert calls == [] and len(r.metrics)


def test_a_false_per_sample_claim_fails_the_conformance_check():
    class TableNoise(GaussianNoise):  # draws per table and scales by the table's spread: not per sample
        per_sample = True

    report = check_method(TableNoise)
    assert [name for name, _ in report.failed] == ["rows_independent"], str(report)
    assert check_method(BlockPermutation).failed == []


# --------------------------------------------------------------------------------------------- sharded templates


def _encoder_plugin(embedded: list[int], per_sample: bool = True, method_id: str = "test.fixed_encoder"):
    """A plugin registering ``method_id``: a fixed map of the features (nothing to fit),
    which records how many samples it embeds."""
    from typing import ClassVar

    import attrs

    from bioanon.methods import CentroidRecognizer

    @attrs.define(kw_only=True)
    class FixedEncoder(CentroidRecognizer):
        id: ClassVar[str] = method_id
        payloads: ClassVar[tuple[str, ...]] = ("features",)
        embeds_per_sample: ClassVar[bool] = per_sample

        def fit(self, train, label="subject"):
            return self

        def embed(self, table):
            embedded.append(len(table))
            f = table.payload("features")
            x = f[:, :6] * np.float32(1.5) - f[:, 2:]  # row by row (no BLAS: the same bits for any block of rows)
            return x / np.sqrt(np.square(x).sum(axis=1, keepdims=True))

    class Plugin:
        @staticmethod
        @bioanon.hookimpl
        def register_recognizers(register):
            register(FixedEncoder)

    return Plugin()


def _templates_config(rates=(0.2, 0.4, 0.4), encoder="test.fixed_encoder"):
    cfg = _config(rates, anonymizer="any.gaussian_noise")
    cfg["anonymizers"] = [{"id": "any.gaussian_noise", "grid": {"sigma": [0.5]}}]
    cfg["templates"] = {"recognizer": encoder, "fit": "background"}
    return cfg


def test_an_encoder_that_embeds_each_sample_alone_embeds_each_data_set_once_in_shards(
    tmp_path, small_shards, register_bioanon_plugin
):
    embedded: list[int] = []
    register_bioanon_plugin(_encoder_plugin(embedded), "encoder")
    cache = Cache(tmp_path / "cache")
    bioanon.evaluate(_templates_config(), out_dir=None, cache=cache, progress=False, report=False, jobs=1)
    assert sorted(embedded) == [80] * 4  # 4 shards of the 320 samples, for both repeats
    embedded.clear()
    again = bioanon.evaluate(
        _templates_config((0.1, 0.5, 0.4)), out_dir=None, cache=cache, progress=False, report=False, jobs=1
    )
    assert embedded == [] and len(again.metrics)  # other rates: no sample embedded again


def test_sharded_templates_give_the_metrics_of_templates_per_part(tmp_path, small_shards, register_bioanon_plugin):
    calls: list[int] = []
    register_bioanon_plugin(_encoder_plugin(calls), "encoder")
    register_bioanon_plugin(_encoder_plugin(calls, per_sample=False, method_id="test.whole_encoder"), "whole")
    sharded = bioanon.evaluate(_templates_config(), out_dir=None, cache=Cache(tmp_path / "a"), progress=False)
    assert sorted(calls) == [80] * 4
    calls.clear()
    whole = bioanon.evaluate(
        _templates_config(encoder="test.whole_encoder"), out_dir=None, cache=Cache(tmp_path / "b"), progress=False
    )
    assert len(calls) == 2 * 3  # per repeat: attacker, evaluation and background parts
    np.testing.assert_array_equal(_metrics(sharded), _metrics(whole))
