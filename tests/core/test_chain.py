"""any.chain: the one way to compose anonymizers; gait.chain is its deprecated alias."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bioanon
import bioanon.testing
from bioanon.errors import ConfigError, ParameterError
from bioanon.evaluation.config import load_config

NOISE = {"id": "any.gaussian_noise", "params": {"sigma": 0.5, "seed": 3}}
PERMUTE = {"id": "any.block_permutation", "params": {"block_size": 2, "key": 1}}


def _table():
    return bioanon.testing.make_table(payload="features")


def test_a_chain_applies_its_steps_in_order():
    t = _table()
    chain = bioanon.get_method("any.chain", steps=[NOISE, PERMUTE])
    out = chain.fit(t).transform(t).payload("features")
    ref = t
    for step in (NOISE, PERMUTE):
        ref = bioanon.get_method(step["id"], **step["params"]).fit_transform(ref)
    np.testing.assert_array_equal(out, ref.payload("features"))
    # order matters: the other order is another chain with another output and another fingerprint
    other = bioanon.get_method("any.chain", steps=[PERMUTE, NOISE])
    assert not np.array_equal(other.fit(t).transform(t).payload("features"), out)
    assert other.fingerprint() != chain.fingerprint()
    # the fingerprint covers every step's parameters (defaults applied)
    changed = bioanon.get_method("any.chain", steps=[NOISE, {**PERMUTE, "params": {"block_size": 2, "key": 2}}])
    assert changed.fingerprint() != chain.fingerprint()
    same = bioanon.get_method(
        "any.chain", steps=[NOISE, {**PERMUTE, "params": {**PERMUTE["params"], "shuffle_within": False}}]
    )
    assert same.fingerprint() == chain.fingerprint()
    # assigning the steps builds them again (validated as at construction)
    same.steps = [PERMUTE]
    assert same.fingerprint() == bioanon.get_method("any.chain", steps=[PERMUTE]).fingerprint()
    assert [m.id for m in same.methods_] == ["any.block_permutation"]
    with pytest.raises(ParameterError, match="steps"):
        same.steps = []


def test_each_step_is_fitted_on_the_previous_steps_output():
    seen = []

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def fit(self, data):
            seen.append(data.payload("features").copy())
            return self

        def fit_transform(self, data):
            return self.fit(data).transform(data)

        def transform(self, data):
            return self.inner.transform(data)

    t = _table()
    chain = bioanon.get_method("any.chain", steps=[NOISE, PERMUTE])
    first = chain.methods_[0]
    chain.methods_ = [Spy(m) for m in chain.methods_]
    chain.fit(t)
    np.testing.assert_array_equal(seen[0], t.payload("features"))
    np.testing.assert_array_equal(seen[1], first.transform(t).payload("features"))


def test_bad_steps_name_the_step():
    with pytest.raises(
        ParameterError,
        match=r"steps\[1\].*unknown anonymizer 'any.gausian_noise'; did you mean "
        r"'any.gaussian_noise'",
    ):
        bioanon.get_method("any.chain", steps=[PERMUTE, {"id": "any.gausian_noise"}])
    with pytest.raises(ParameterError, match=r"steps\[0\].*no parameter 'sigm'; did you mean 'sigma'"):
        bioanon.get_method("any.chain", steps=[{"id": "any.gaussian_noise", "params": {"sigm": 1}}])
    with pytest.raises(ParameterError, match=r"steps\[1\].*any.gaussian_noise: parameter 'sigma'"):
        bioanon.get_method("any.chain", steps=[NOISE, {"id": "any.gaussian_noise", "params": {"sigma": -1}}])
    with pytest.raises(ParameterError, match=r"steps\[0\].*any.pca_svm is a recognizer, not an anonymizer"):
        bioanon.get_method("any.chain", steps=[{"id": "any.pca_svm"}])
    for bad in ([], [{"id": "any.identity", "param": {}}], ["any.identity"], [{"params": {}}]):
        with pytest.raises(ParameterError, match="steps"):
            bioanon.get_method("any.chain", steps=bad)


TOML = """
name = "chain"
[dataset]
source = "any.synthetic"
params = { n_subjects = 6, samples_per_subject = 4 }
[[anonymizers]]
id = "any.chain"
params = { steps = [{ id = "any.gaussian_noise", params = { sigma = 0.5, seed = 3 } },
                    { id = "any.block_permutation", params = { block_size = 2, key = 1 } }] }
[[recognizers]]
id = "any.cosine_centroid"
"""


def test_a_chain_round_trips_through_toml(tmp_path):
    if "any.cosine_centroid" not in bioanon.list_methods():
        pytest.skip("no any.cosine_centroid")
    path = tmp_path / "chain.toml"
    path.write_text(TOML)
    cfg = load_config(path)
    chain = cfg.anonymizers[0].create()
    assert [m.id for m in chain.methods_] == ["any.gaussian_noise", "any.block_permutation"]
    text = cfg.to_toml()
    again = tmp_path / "again.toml"
    again.write_text(text)
    back = load_config(again)
    assert back.anonymizers == cfg.anonymizers
    assert back.anonymizers[0].create().fingerprint() == chain.fingerprint()
    path.write_text(TOML.replace("sigma = 0.5", "sigm = 0.5"))
    with pytest.raises(ConfigError, match=r"anonymizers\[0\]\.params\.steps.*steps\[0\].*did you mean 'sigma'"):
        load_config(path)


def test_gait_chain_is_an_alias_that_warns_once_and_runs_as_any_chain():
    if "gait.chain" not in bioanon.list_methods():
        pytest.skip("bioanon-gait is not installed")
    from bioanon_gait.anonymizers import chain_steps

    t = bioanon.testing.make_table(payload="pose")
    old_steps = ["coarsen_time:factor=2", '{"id": "gait.noise", "params": {"scale": 0.3}}']
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default for a DeprecationWarning shown: once per place
        for _ in range(3):  # from one place of the user's code: one warning, pointing there
            old = bioanon.get_method("gait.chain", steps=old_steps, seed=5)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning) and "gait.chain" in str(w.message)]
    assert len(deprecations) == 1 and "any.chain" in str(deprecations[0].message)
    assert deprecations[0].filename == __file__  # attributed to the caller, not to bioanon's internals
    steps = chain_steps(old_steps, seed=5)
    assert steps == (
        {"id": "gait.coarsen_time", "params": {"factor": 2}},
        {"id": "gait.noise", "params": {"scale": 0.3, "seed": 6}},
    )
    new = bioanon.get_method("any.chain", steps=steps)
    assert isinstance(old, type(new))
    np.testing.assert_array_equal(old.fit(t).transform(t).payload("pose"), new.fit(t).transform(t).payload("pose"))
    np.testing.assert_array_equal(
        old.as_any_chain().fit(t).transform(t).payload("pose"), new.transform(t).payload("pose")
    )
