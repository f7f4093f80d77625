"""Every public function of ``bioanon`` and ``bioanon.api`` takes its documented arguments by keyword, and a wrong
keyword is a bioanon error naming the parameter and the accepted ones, never a bare TypeError."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

import bioanon
import bioanon.api as api
from bioanon.errors import BioanonError, ParameterError, PluginError


def _public_functions():
    for module in (bioanon, api):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield pytest.param(obj, id=f"{module.__name__}.{name}")


@pytest.mark.parametrize("function", list(_public_functions()))
def test_no_public_function_has_a_positional_only_parameter(function):
    positional_only = [
        p.name for p in inspect.signature(function).parameters.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY
    ]
    assert positional_only == [], f"{function.__qualname__}: positional-only {positional_only}"


def _face_folder(root: Path) -> Path:
    """Two people with two tiny grey images each."""
    cv2 = pytest.importorskip("cv2")
    for person in ("p1", "p2"):
        (root / person).mkdir(parents=True)
        for i in range(2):
            cv2.imwrite(str(root / person / f"{i}.png"), np.random.default_rng(i).integers(0, 255, (12, 10), np.uint8))
    return root


def test_load_dataset_takes_the_source_and_the_path_by_keyword(tmp_path):
    root = _face_folder(tmp_path / "faces")
    table = bioanon.load_dataset(source_id="face.folder", path=root, size=(8, 8))
    assert len(table) == 4
    assert sorted(set(table.subjects)) == ["p1", "p2"]
    assert len(bioanon.load_dataset("face.folder", path=str(root))) == 4
    assert len(api.current_context().load_dataset(source_id="face.folder", path=root)) == 4


def test_a_wrong_keyword_names_the_parameter_and_the_accepted_ones(tmp_path):
    root = _face_folder(tmp_path / "faces")
    with pytest.raises(ParameterError, match=r"face\.folder.*'pth'.*did you mean 'path'.*accepted: path, size") as err:
        bioanon.load_dataset("face.folder", pth=root)
    assert err.value.param == "pth"
    with pytest.raises(ParameterError, match=r"'sgma'.*did you mean 'sigma'.*accepted: .*seed"):
        bioanon.get_method("any.gaussian_noise", sgma=0.3)
    with pytest.raises(ParameterError, match=r"'sgma'.*did you mean 'sigma'"):
        bioanon.get_method("any.gaussian_noise").with_params(sgma=0.3)
    with pytest.raises(ParameterError, match=r"bioanon\.evaluate.*'outdir'.*did you mean 'out_dir'.*accepted: .*data"):
        bioanon.evaluate({}, outdir=tmp_path)
    with pytest.raises(ParameterError, match=r"bioanon\.anonymize.*'methods'.*not both"):
        bioanon.anonymize(bioanon.load_dataset("any.synthetic"), "any.identity", methods=["any.identity"])


def test_the_other_public_functions_take_their_arguments_by_keyword():
    noise = bioanon.get_method(method_id="any.gaussian_noise", sigma=0.3)
    assert noise.sigma == 0.3
    table = bioanon.load_dataset(source_id="any.synthetic", n_subjects=6, samples_per_subject=3)
    assert bioanon.anonymize(table=table, methods=[noise]).lineage[-1]["step"] == "any.gaussian_noise"
    assert bioanon.anonymize(table, noise, "any.identity").lineage[-1]["step"] == "any.chain"
    assert bioanon.list_methods(patterns=["any.gauss*"], kind="anonymizer") == ["any.gaussian_noise"]
    assert bioanon.list_methods(patterns="any.gauss*") == bioanon.list_methods("any.gauss*")
    assert bioanon.example(name="quickstart").is_file()
    assert api.get_method(method_id="any.identity").id == "any.identity"
    assert api.make_table(n_subjects=3, samples_per_subject=2, seed=1).num_rows == 6


def test_a_method_cannot_declare_a_parameter_the_public_functions_take_by_keyword():
    import attrs

    from bioanon.registry import validate_method_class

    @attrs.define(kw_only=True)
    class Clash(bioanon.DatasetSource):
        id = "any.clash"
        path: str = bioanon.param("", help="a path")

        def load(self, path=None):
            raise NotImplementedError

    with pytest.raises(PluginError, match=r"any\.clash.*\['path'\]"):
        validate_method_class(Clash, "dataset")


def test_errors_are_bioanon_errors():
    assert issubclass(ParameterError, BioanonError)
