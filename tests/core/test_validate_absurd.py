"""`bioanon validate` refuses, from the config alone, values that would only fail later (issue 33, point 9): infinite
or absurd method parameters, a bootstrap or a grid too large to plan or compute, subject counts that the data set
the config generates cannot reach, and a weights file that the safe loader refuses."""

from __future__ import annotations

import textwrap

import pytest

import bioanon.evaluation.run as run_module
from bioanon.cli import main
from bioanon.errors import ParameterError
from bioanon.evaluation.config import MAX_BOOTSTRAP, MAX_GRID_SETTINGS, MAX_PLAN_SCORINGS
from bioanon.methods import FLOAT_PARAM_LIMIT, float_problem

BASE = textwrap.dedent("""
    name = "absurd"
    {top}
    [dataset]
    source = "any.synthetic"
    params = {{ n_subjects = 30 }}
    [[anonymizers]]
    id = "any.gaussian_noise"
    {anonymizer}
    [[recognizers]]
    id = "any.cosine_centroid"
    {rest}
""")


def _validate(tmp_path, capsys, *, top="", anonymizer="grid = { sigma = [1.0, 2.0] }", rest="", data=False):
    """Exit code and stderr of `bioanon validate` on the base config with the given parts."""
    path = tmp_path / "c.toml"
    path.write_text(BASE.format(top=top, anonymizer=anonymizer, rest=rest))
    code = main(["validate", str(path), *(["--data"] if data else [])])
    return code, capsys.readouterr().err


@pytest.fixture(autouse=True)
def _no_planning(monkeypatch, tmp_path):
    """Every refusal here comes from the config alone: building a plan fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("validate built a plan")

    monkeypatch.setattr(run_module, "build_plan", refuse)
    monkeypatch.setenv("BIOANON_CACHE", str(tmp_path / "cache"))


def test_the_base_config_is_valid(tmp_path, capsys):
    assert _validate(tmp_path, capsys)[0] == 0


@pytest.mark.parametrize(
    "anonymizer, where",
    [
        ("params = { sigma = inf }", "anonymizers[0].params.sigma"),
        ("params = { sigma = 1e308 }", "anonymizers[0].params.sigma"),
        ("grid = { sigma = [1.0, inf] }", "anonymizers[0].grid.sigma[1]"),
        ("grid = { sigma = [1.0, 1e300] }", "anonymizers[0].grid.sigma[1]"),
    ],
)
def test_infinite_and_absurd_parameters_are_refused(tmp_path, capsys, anonymizer, where):
    code, err = _validate(tmp_path, capsys, anonymizer=anonymizer)
    assert code == 2
    assert where in err and "finite number in [0, 1e+12]" in err


def test_the_float_bound_follows_the_declaration():
    assert float_problem(1e30) and float_problem(float("nan")) and float_problem((1.0, float("inf")))
    assert not float_problem(FLOAT_PARAM_LIMIT) and not float_problem(3) and not float_problem("x")
    from bioanon.builtin.anonymizers import GaussianNoise

    with pytest.raises(ParameterError, match="sigma"):
        GaussianNoise(sigma=float("inf"))
    assert GaussianNoise(sigma=1e6).sigma == 1e6


def test_a_huge_bootstrap_is_refused(tmp_path, capsys):
    code, err = _validate(tmp_path, capsys, rest="[report]\nbootstrap = 1000000000000")
    assert code == 2
    assert "report.bootstrap" in err and f"{MAX_BOOTSTRAP:,}" in err and "1000000000000" in err


def test_a_huge_grid_is_refused_before_any_setting_is_built(tmp_path, capsys, monkeypatch):
    from bioanon.evaluation import config as config_module

    construct = config_module._Validator.construct

    def checked(self, cls, params, sweep, path):
        assert sum(len(v) for v in sweep.values()) < 100, "the grid's settings were constructed"
        return construct(self, cls, params, sweep, path)

    monkeypatch.setattr(config_module._Validator, "construct", checked)
    values = ", ".join(str(0.001 * i) for i in range(100_000))
    code, err = _validate(tmp_path, capsys, anonymizer=f"grid = {{ sigma = [{values}] }}")
    assert code == 2
    assert "anonymizers[0].grid" in err and "100,000 settings" in err and f"at most {MAX_GRID_SETTINGS:,}" in err


def test_a_grid_product_is_counted(tmp_path, capsys):
    many = ", ".join(str(i) for i in range(200))
    code, err = _validate(tmp_path, capsys, anonymizer=f"grid = {{ sigma = [{many}], seed = [{many}] }}")
    assert code == 2 and "40,000 settings" in err and "sigma: 200 values, seed: 200 values" in err


def test_a_plan_with_too_many_scorings_is_refused(tmp_path, capsys):
    values = ", ".join(str(i) for i in range(1000))
    code, err = _validate(
        tmp_path,
        capsys,
        top="repeats = 50",
        anonymizer=f"grid = {{ sigma = [{values}] }}",
        rest='[selection]\nselectors = ["random"]\nrandom_draws = 5',
    )
    assert code == 2
    assert "anonymizers: the evaluation would compute" in err and f"at most {MAX_PLAN_SCORINGS:,}" in err
    assert "50 repeat(s) × 1,000 anonymizer setting(s) × 5 selection(s)" in err


@pytest.mark.parametrize("data", [False, True])
def test_unreachable_subject_counts_are_refused(tmp_path, capsys, data):
    code, err = _validate(tmp_path, capsys, rest="[selection]\nsubject_counts = [1000]", data=data)
    assert code == 2
    assert "selection.subject_counts: no count in [1000] is reachable" in err and "30 subjects" in err


def test_a_count_beyond_the_data_beside_a_reachable_one_is_left_to_the_run(tmp_path, capsys):
    # (the run skips 1000 with a warning and evaluates 6 subjects)
    assert _validate(tmp_path, capsys, rest="[selection]\nsubject_counts = [1000, 6]")[0] == 0


def test_a_malicious_weights_file_is_refused_by_validate(tmp_path, capsys):
    torch = pytest.importorskip("torch")

    class Evil:
        def __reduce__(self):
            return (print, ("code ran",))

    evil = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, evil)
    rest = f'[deanonymizer]\nid = "any.mlp_inversion"\nparams = {{ weights = "{evil}" }}'
    code, err = _validate(tmp_path, capsys, top='scenarios = ["naive", "deanon"]', rest=rest)
    assert code == 2
    assert "deanonymizer.params.weights" in err and "weights_only=True" in err
    assert "code ran" not in capsys.readouterr().out
