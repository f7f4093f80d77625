"""Data checks on import (bioanon.sanity) and the policy ``[dataset] on_bad``: a feature value beyond a
float32-safe bound, non-finite and mixed-type attribute cells, too short or too loud audio; an error by default
naming the column and the samples, dropped with "skip", kept with a warning with "warn"."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.errors import DataError
from bioanon.evaluation.config import DatasetSpec, load_config
from bioanon.evaluation.data import import_dataset
from bioanon.fileio import parse_cell, uniform_column
from bioanon.sanity import check_data, find_problems
from bioanon.table import LOAD_WARNINGS, SampleTable


def _table(features=None, attributes=None, n=6):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32) if features is None else features
    return SampleTable.from_arrays(
        subject=np.array([f"s{i % 2}" for i in range(n)], dtype=object),
        sample_id=np.array([f"id{i}" for i in range(n)], dtype=object),
        payloads={"features": x},
        attributes=attributes or {},
    )


def _import(tmp_path, table, **kw):
    path = tmp_path / "data.arrow"
    table.save(path)
    return import_dataset(DatasetSpec("any.table", str(path), {}, **kw), None)[0]


def test_feature_beyond_float32_safe_bound(tmp_path):
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    x[3, 2] = 3e38
    t = _table(x)
    with pytest.raises(DataError, match=r"(?s)'features'.*beyond.*'id3'.*on_bad = \"skip\""):
        _import(tmp_path, t)
    skipped = _import(tmp_path, t, on_bad="skip")
    assert list(skipped.sample_ids) == ["id0", "id1", "id2", "id4", "id5"]
    assert "id3" in skipped.metadata[LOAD_WARNINGS][-1] and "dropped" in skipped.metadata[LOAD_WARNINGS][-1]
    kept = _import(tmp_path, t, on_bad="warn")
    assert len(kept) == 6 and "'features'" in kept.metadata[LOAD_WARNINGS][-1]


def test_clean_data_passes_unchanged(tmp_path):
    t = _table(attributes={"age": np.array([20, 30, 40, 50, 60, 70])})
    assert find_problems(t) == []
    assert check_data(t) is t


@pytest.mark.parametrize("cell", ["nan", "inf", "x"])
def test_attribute_cell_not_a_number(tmp_path, cell):
    # the metadata reader's cells: numbers, and one `nan` / `inf` / `x` (a mixed column is read as text)
    values = uniform_column([parse_cell(c) for c in ["21", "35", cell, "44", "52", "60"]])
    t = _table(attributes={"age": np.array(values, dtype=object if isinstance(values[0], str) else float)})
    with pytest.raises(DataError, match=r"'attr\.age'.*'id2'"):
        _import(tmp_path, t)
    skipped = _import(tmp_path, t, on_bad="skip")
    assert "id2" not in list(skipped.sample_ids) and len(skipped) == 5
    age = skipped.attribute("age")
    assert np.issubdtype(age.dtype, np.number) and list(age) == [21, 35, 44, 52, 60]  # numbers again
    kept = _import(tmp_path, t, on_bad="warn")
    assert len(kept) == 6 and "attr.age" in kept.metadata[LOAD_WARNINGS][-1]


def test_text_column_is_not_mixed():
    t = _table(attributes={"accent": np.array(["us", "uk", "us", "in", "uk", "us"], dtype=object)})
    assert find_problems(t) == []


def test_skip_of_every_sample_is_an_error(tmp_path):
    x = np.full((6, 4), 1e31, np.float32)
    with pytest.raises(DataError, match="every sample"):
        _import(tmp_path, _table(x), on_bad="skip")


def test_config_key_on_bad(tmp_path):
    base = {
        "name": "t",
        "dataset": {"source": "any.synthetic"},
        "anonymizers": [{"id": "any.identity"}],
        "recognizers": [{"id": "any.cosine_centroid"}],
    }
    assert load_config({**base, "dataset": {"source": "any.synthetic", "on_bad": "skip"}}).dataset.on_bad == "skip"
    assert load_config(base).dataset.on_bad == "error"
    with pytest.raises(Exception, match=r"dataset\.on_bad"):
        load_config({**base, "dataset": {"source": "any.synthetic", "on_bad": "ignore"}})
