"""FeatureSpace: a wide PCA that keeps its training samples as its basis (no projection as large as they are), and
transforms in blocks (no centred copy of the input, no scaled copy of a large projection)."""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest

from bioanon.builtin import recognizers as rec
from bioanon.builtin.recognizers import FeatureSpace
from bioanon.table import SampleTable


def _wide(n: int = 60, d: int = 700, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)) * rng.uniform(0.5, 3, d) + rng.uniform(-5, 5, d)).astype(np.float32)


def test_a_wide_pca_may_keep_its_samples_as_basis_and_transforms_alike() -> None:
    x = _wide()
    explicit = FeatureSpace.pca(x)
    basis = FeatureSpace.pca(x, keep_samples=True)
    assert explicit.explicit is not None and explicit.basis is None
    assert basis.explicit is None and basis.basis is not None
    assert np.shares_memory(basis.basis, x)  # the samples themselves, no copy
    assert not basis.basis.flags.writeable and x.flags.writeable  # read-only through the space only
    assert basis.n_components == explicit.n_components == len(x) - 1
    np.testing.assert_array_equal(basis.projection, explicit.projection)  # the same directions, computed alike
    q = _wide(25, seed=1)
    a, b = explicit.transform(q), basis.transform(q)
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 * float(np.abs(a).max()))
    # composed with a further map (LDA): still the same space
    m = np.random.default_rng(2).standard_normal((explicit.n_components, 4))
    np.testing.assert_allclose(
        basis.then(m).transform(q), explicit.then(m).transform(q), rtol=1e-4, atol=1e-4 * float(np.abs(a).max())
    )
    assert copy.deepcopy(basis) is basis  # immutable: shared by copies


def test_the_basis_only_when_it_costs_no_more_than_a_projection() -> None:
    x = _wide(60, 700)
    assert FeatureSpace.pca(x, 10, keep_samples=True).basis is None  # 10 of 59 components: a small projection
    assert FeatureSpace.pca(x, keep_samples=False).basis is None  # the caller may change x
    big = _wide(200, 700)
    assert FeatureSpace.pca(big[:60], keep_samples=True).basis is None  # a view of a larger array
    assert FeatureSpace.pca(_wide(700, 60), keep_samples=True).basis is None  # a tall set: its own path
    arrow_backed = SampleTable.from_arrays(subject=[f"s{i}" for i in range(60)], payloads={"features": x})
    view = arrow_backed.payload("features")
    assert FeatureSpace.pca(view, keep_samples=True).basis is not None  # a whole Arrow payload: immutable


def test_a_feature_space_has_one_form() -> None:
    x = _wide(10, 40)
    with pytest.raises(ValueError, match="either"):
        FeatureSpace(x.mean(0), x.std(0), None)
    with pytest.raises(ValueError, match="either"):
        FeatureSpace(x.mean(0), x.std(0), np.zeros((40, 3), np.float32), x, np.zeros((10, 3), np.float32))


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 4001])
def test_transform_in_blocks_equals_the_whole_product(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Blocks of rows and of projection columns (forced small here) give each value as the whole product does."""
    x = _wide(80, 300)
    space = FeatureSpace.pca(x)
    q = _wide(rows, 300, seed=3)
    whole = (q - space.mean) @ space.scaled_projection
    monkeypatch.setattr(rec, "SCALED_BLOCK_BYTES", 300 * 4 * 7)  # 7 columns / rows of 300 floats a block
    blocked = space.transform(q)
    assert blocked.shape == whole.shape and blocked.dtype == whole.dtype
    np.testing.assert_allclose(blocked, whole, rtol=1e-6, atol=1e-6 * float(np.abs(whole).max()))


def test_an_svm_on_a_wide_set_is_as_accurate_with_the_basis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recognizers keep their training samples as basis: the same decisions up to float rounding."""
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((6, 500)) * 2
    y = np.repeat(np.arange(6), 10)
    x = (centres[y] + rng.standard_normal((60, 500))).astype(np.float32)
    table = SampleTable.from_arrays(subject=[f"s{i}" for i in y], payloads={"features": x})
    probes_x = (centres[y] + rng.standard_normal((60, 500))).astype(np.float32)
    probes = SampleTable.from_arrays(subject=[f"s{i}" for i in y], payloads={"features": probes_x})
    fitted = rec.PcaSvm(n_components=1.0).fit(table)
    assert fitted.space_.basis is not None
    monkeypatch.setattr(FeatureSpace, "pca", _explicit_pca(FeatureSpace.pca))
    reference = rec.PcaSvm(n_components=1.0).fit(table)
    assert reference.space_.basis is None
    a = fitted.enroll(table).score(probes)
    b = reference.enroll(table).score(probes)
    np.testing.assert_allclose(np.asarray(a.scores), np.asarray(b.scores), atol=1e-3)


def _explicit_pca(pca):
    def explicit(x, *args, keep_samples=False, **kwargs):
        return pca(x, *args, **kwargs)

    return explicit


def test_map_payload_runs_per_chunk_without_joining_the_payload() -> None:
    rng = np.random.default_rng(5)
    parts = [
        SampleTable.from_arrays(
            subject=[f"s{i}" for i in range(k)],
            sample_id=[f"{j}-{i}" for i in range(k)],
            payloads={"pose": rng.standard_normal((k, 4, 2, 3)).astype(np.float32)},
        )
        for j, k in enumerate((5, 7))
    ]
    table = SampleTable(pa.concat_tables([parts[0].arrow, parts[0].arrow.slice(0, 0), parts[1].arrow]))
    assert table.arrow.column("pose").num_chunks == 3
    seen = []

    def features(x: np.ndarray) -> np.ndarray:
        seen.append(len(x))
        return x.reshape(len(x), -1).sum(axis=1, keepdims=True) * 2

    out = table.map_payload("pose", features)
    assert seen == [5, 7]  # each chunk on its own (the empty one skipped); the payload never joined
    np.testing.assert_array_equal(out, table.payload("pose").reshape(12, -1).sum(axis=1, keepdims=True) * 2)
    with pytest.raises(Exception, match="result rows"):
        table.map_payload("pose", lambda x: x[:1])
