"""Typed, validated method parameters and the method contract."""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs
import numpy as np
import pytest

import bioanon
from bioanon import Anonymizer, ParameterError, fitted, param
from bioanon.methods import parse_param_text


@attrs.define(kw_only=True)
class Demo(Anonymizer):
    """A demo anonymizer with one parameter of every supported type."""

    id: ClassVar[str] = "any.demo"
    payloads: ClassVar[tuple[str, ...]] = ("features",)

    rate: float = param(0.5, help="a rate", low=0.0, high=1.0)
    count: int = param(3, help="a count", low=1)
    flag: bool = param(False, help="a flag")
    mode: Literal["a", "b"] = param("a", help="a mode")
    name: str = param("x", help="a name", choices=("x", "y"))
    sizes: tuple[int, ...] = param((1, 2), help="sizes", low=1)
    limit: float | None = param(None, help="optional limit", low=0.0, low_inclusive=False)
    workers: int = param(1, help="threads", low=1, affects_output=False)

    state_: np.ndarray | None = fitted()

    def transform(self, table):
        return table


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("rate", 1.5, r"in \[0, 1\]"),
        ("rate", "half", "float"),
        ("rate", float("nan"), "float"),
        ("count", 0, r"in \[1, inf\)"),
        ("count", 2.5, "int"),
        ("count", True, "int"),
        ("flag", 1, "bool"),
        ("mode", "c", "'a' | 'b'"),
        ("name", "z", "one of 'x', 'y'"),
        ("sizes", (1, 0), r"in \[1, inf\)"),
        ("sizes", (1, "a"), r"tuple\[int, ...\]"),
        ("limit", 0.0, r"in \(0, inf\)"),
    ],
)
def test_invalid_parameter_names_method_param_value_and_allowed(name, value, allowed):
    with pytest.raises(ParameterError, match=rf"any\.demo: parameter '{name}' = .* is invalid; allowed: .*{allowed}"):
        Demo(**{name: value})


def test_coercions_are_lossless():
    d = Demo(rate=1, sizes=[3, 4], limit=2, count=np.int64(5))
    assert d.rate == 1.0 and isinstance(d.rate, float)
    assert d.sizes == (3, 4) and d.limit == 2.0 and type(d.count) is int


def test_get_with_params_and_unfitted_copy():
    d = Demo(rate=0.2)
    d.state_ = np.ones(3)
    e = d.with_params(count=7)
    assert e.get_params() == {**d.get_params(), "count": 7}
    assert e.state_ is None, "with_params must return an unfitted copy"
    with pytest.raises(ParameterError, match="'rat'.*did you mean 'rate'"):
        d.with_params(rat=0.1)
    with pytest.raises(ParameterError, match="'count'"):
        d.with_params(count=-1)


def test_fingerprint_covers_params_but_not_runtime_options():
    base = Demo()
    assert base.fingerprint() == Demo().fingerprint()
    assert base.fingerprint() != Demo(rate=0.25).fingerprint()
    assert base.fingerprint() != Demo(sizes=(1, 3)).fingerprint()
    assert base.fingerprint() == Demo(workers=4).fingerprint()
    assert Demo(rate=1).fingerprint() == Demo(rate=1.0).fingerprint()


def test_describe():
    d = Demo.describe()
    assert d["id"] == "any.demo" and d["kind"] == "anonymizer"
    specs = {p["name"]: p for p in d["params"]}
    assert specs["rate"]["allowed"] == "in [0, 1]" and specs["rate"]["help"] == "a rate"
    assert specs["mode"]["type"] == "'a' | 'b'" and specs["limit"]["type"] == "float | None"
    assert specs["workers"]["affects_output"] is False
    assert d["summary"].startswith("A demo anonymizer")


def test_parse_param_text():
    assert parse_param_text("32", int) == 32
    assert parse_param_text("0.9", float) == 0.9
    assert parse_param_text("true", bool) is True
    assert parse_param_text("population", float | Literal["population"]) == "population"
    assert parse_param_text("1,2,3", tuple[int, ...]) == [1, 2, 3]
    assert parse_param_text("007", str) == "007"


def test_get_method_and_unknown_ids():
    m = bioanon.get_method("any.gaussian_noise", sigma=0.1)
    assert m.sigma == 0.1
    with pytest.raises(bioanon.UnknownMethodError, match="did you mean 'any.gaussian_noise'"):
        bioanon.get_method("any.gausian_noise")
    with pytest.raises(bioanon.UnknownMethodError, match="unknown dataset method id 'any.identity'"):
        bioanon.get_registry().get("any.identity", kind="dataset")


def test_registry_find_patterns():
    reg = bioanon.get_registry()
    assert [e.cls.id for e in reg.find(["any.gauss*"])] == ["any.gaussian_noise"]
    assert all(e.cls.kind == "dataset" for e in reg.find(kind="dataset"))
    with pytest.raises(bioanon.UnknownMethodError, match="did you mean 'anonymizer'"):
        reg.find(kind="anonymiser")


def test_gaussian_noise_differs_between_tables_and_repeats_per_table():
    data = bioanon.load_dataset("any.synthetic", n_subjects=10, samples_per_subject=4)
    a, b = data.split_subjects([0.5, 0.5], seed=0)
    noise = bioanon.get_method("any.gaussian_noise", sigma=1.0, seed=5)
    na, nb = noise.transform(a), noise.transform(b)
    da = na.payload("features") - a.payload("features")
    db = nb.payload("features") - b.payload("features")
    assert not np.allclose(da[: len(db)], db[: len(da)])  # no shared noise sequence between the two sets
    assert np.array_equal(noise.transform(a).payload("features"), na.payload("features"))


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.standard_normal((3000, 70), dtype=np.float32) * 3 + 5,  # 210,000 values: several blocks
        lambda r: r.integers(0, 256, (40, 33, 31), dtype=np.uint8),  # integer images
        lambda r: (r.standard_normal((500, 90)) * 1e3)[:, ::3],  # float64, not contiguous
        lambda r: np.full((7, 5), 2.5, np.float32),  # constant: 0
    ],
)
def test_total_std_is_numpys_to_rounding_without_a_float64_copy(make):
    from bioanon.payloads import total_std

    x = make(np.random.default_rng(0))
    ref = float(np.std(x, dtype=np.float64))
    assert total_std(x, block=4096) == pytest.approx(ref, rel=1e-13, abs=1e-300)
    assert total_std(x) == pytest.approx(ref, rel=1e-13, abs=1e-300)
    assert np.isnan(total_std(np.zeros((0, 4), np.float32)))


def test_gaussian_noise_scale_is_the_float32_of_the_payload_std():
    """The relative noise is sigma times the payload's standard deviation, applied in float32: the anonymized
    values are those of a scale computed with numpy's std (the blockwise std only changes rounding far below
    float32's)."""
    from bioanon.payloads import table_rng

    data = bioanon.load_dataset("any.synthetic", n_subjects=30, samples_per_subject=10, dim=64, seed=2)
    noise = bioanon.get_method("any.gaussian_noise", sigma=0.7, seed=3)
    x = data.payload("features")
    scale = np.float32(0.7 * float(np.std(x, dtype=np.float64)))
    expected = x + table_rng(data, 3).standard_normal(x.shape, dtype=np.float32) * scale
    # equal in practice; the margin covers one float32 rounding of the scale on another BLAS's summation order
    np.testing.assert_allclose(noise.transform(data).payload("features"), expected, rtol=1e-6, atol=0)


def test_class_sums_equals_add_at():
    from bioanon.methods import class_sums

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 3, 4)).astype(np.float32)
    codes = rng.integers(0, 6, 200)
    ref = np.zeros((7, 12))
    np.add.at(ref, codes, x.reshape(200, 12))
    got = class_sums(x, codes, 7)
    assert got.dtype == np.float64 and got.shape == (7, 12)
    np.testing.assert_allclose(got, ref, atol=1e-9)
    assert not got[6].any()  # an empty class sums to zero


def test_parameters_are_checked_on_assignment_too():
    import bioanon
    from bioanon.errors import ParameterError

    m = bioanon.get_method("any.gaussian_noise", sigma=1.0)
    m.sigma = 2  # coerced as on construction
    assert m.sigma == 2.0 and isinstance(m.sigma, float)
    with pytest.raises(ParameterError, match=r"any.gaussian_noise: parameter 'sigma' = -5"):
        m.sigma = -5
    assert m.sigma == 2.0  # the invalid value is not stored
    with pytest.raises(ParameterError, match="sigma"):
        m.sigma = "loud"
    p = bioanon.get_method("any.pca_svm")
    with pytest.raises(ParameterError, match="kernel"):
        p.kernel = "cubic"
    p.kernel = "rbf"
    assert p.fingerprint() == bioanon.get_method("any.pca_svm", kernel="rbf").fingerprint()


def test_a_feature_recognizer_lets_its_training_samples_go_before_the_inner_fit():
    """``FeatureRecognizer.fit`` holds the training table only until its features are extracted: while the
    inner recognizer fits (a PCA of the features), the samples are freed unless the caller keeps them."""
    import gc
    import weakref

    from bioanon.builtin.recognizers import CentroidRecognizer
    from bioanon.methods import FeatureRecognizer
    from bioanon.testing import make_table

    made: list[weakref.ref] = []
    alive: list[bool] = []

    @attrs.define(kw_only=True)
    class Inner(CentroidRecognizer):
        def fit(self, train, label="subject"):
            gc.collect()
            alive.append(made[-1]() is not None)
            return super().fit(train, label)

    @attrs.define(kw_only=True)
    class Halves(FeatureRecognizer):
        id: ClassVar[str] = "test.halves"

        def inner_recognizer(self):
            return Inner()

        def feature_table(self, table):
            x = table.payload("features")
            return table.with_payload("features", x[:, : x.shape[1] // 2])

    def samples(seed):
        table = make_table(n_subjects=4, samples_per_subject=3, seed=seed)
        made.append(weakref.ref(table.arrow))  # (a SampleTable has no weak references; its Arrow table has)
        return table

    Halves().fit(samples(0))  # nobody else holds the training table
    kept = samples(1)
    Halves().fit(kept)
    assert alive == [False, True]
    assert len(kept) == 12
