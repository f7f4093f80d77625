"""Arrow ↔ numpy without pandas (bioanon.arrow_numpy): pyarrow loads pandas only when something needs it, and
converts pandas objects exactly as before once pandas is loaded; the conversions equal pyarrow's own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from bioanon.arrow_numpy import from_values, scalar, to_numpy


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


PANDAS_RIGHT = """
    import datetime
    import numpy as np, pandas as pd, pyarrow as pa
    dates = pa.array([datetime.date(2020, 1, 1), pd.NaT], from_pandas=True)
    assert dates.null_count == 1 and dates.to_pylist()[0] == datetime.date(2020, 1, 1), dates
    assert pa.array([1.0, pd.NA], from_pandas=True).null_count == 1
    assert pa.array(pd.Series([1.0, np.nan])).null_count == 1  # a Series: NaN is null, as pyarrow gives it
    table = pa.Table.from_pandas(pd.DataFrame({"o": ["a", pd.NA], "t": [pd.Timestamp("2020"), pd.NaT]}))
    assert table.column("o").null_count == 1 and table.column("t").null_count == 1
    assert pa.table({"x": [1, 2]}).to_pandas()["x"].tolist() == [1, 2]
    print("ok")
"""


@pytest.mark.parametrize("pyarrow_first", [False, True])
def test_numpy_arrays_convert_without_pandas_and_pandas_objects_convert_as_before(pyarrow_first: bool) -> None:
    """After ``import bioanon`` (pyarrow imported before it or after), numpy arrays go to Arrow without loading
    pandas; once pandas is imported, pyarrow treats NaT, NA and Series as it does without bioanon."""
    first = "import pyarrow\n" if pyarrow_first else ""
    out = _run(
        first
        + """
import sys
import bioanon
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from bioanon.arrow_numpy import from_values, scalar, to_numpy
arr = pa.array(np.arange(5, dtype=np.float32))
assert to_numpy(arr).tolist() == [0, 1, 2, 3, 4]
assert to_numpy(pa.array(np.array(["a", "b"]))).tolist() == ["a", "b"]
assert to_numpy(pc.greater(arr, scalar(2.0))).tolist() == [False, False, False, True, True]
assert from_values(["x", "y"]).to_pylist() == ["x", "y"] and from_values([1, 2]).type == pa.int64()
assert "pandas" not in sys.modules, "pandas loaded by a numpy conversion"
"""
        + textwrap.dedent(PANDAS_RIGHT)
    )
    assert out.strip() == "ok"


def test_pandas_imported_first_is_left_alone() -> None:
    out = _run("import pandas\nimport bioanon\n" + textwrap.dedent(PANDAS_RIGHT))
    assert out.strip() == "ok"


def test_an_evaluation_loads_pandas_only_for_its_results(tmp_path) -> None:
    """No task of an evaluation (gait features, PCA, SVM; synthetic features, noise, cosine, LDA; the metrics)
    makes pyarrow load pandas: about 40 MiB and a quarter of a second of every process. Only the results tables do,
    at the end of the run."""
    out = _run(
        f"""
        import sys, traceback
        import bioanon
        from bioanon.evaluation.run import evaluate

        class Watch:
            before_results = []
            def find_spec(self, name, path=None, target=None):
                if name == "pandas":
                    stack = traceback.extract_stack()
                    if not any(f.name == "_results" for f in stack):
                        Watch.before_results.append("".join(traceback.format_list(stack[-10:])))
                return None

        sys.meta_path.insert(0, Watch())
        gait = {{
            "name": "gait", "seed": 0, "repeats": 1,
            "dataset": {{"source": "gait.synthetic",
                         "params": {{"n_subjects": 8, "sequences_per_subject": 6, "frames": 24}}}},
            "anonymizers": [{{"id": "gait.noise", "name": "noise", "params": {{"scale": 1.0}}}}],
            "recognizers": [{{"id": "gait.svm"}}],
            "scenarios": ["naive", "parrot"],
            "selection": {{"selectors": ["random"], "subject_counts": [3], "random_draws": 1}},
            "report": {{"bootstrap": 10}},
        }}
        synthetic = {{
            "name": "synthetic", "seed": 0, "repeats": 1,
            "dataset": {{"source": "any.synthetic", "params": {{"n_subjects": 20, "samples_per_subject": 6}}}},
            "anonymizers": [{{"id": "any.gaussian_noise", "name": "noise", "grid": {{"sigma": [0.5, 1.0]}}}}],
            "recognizers": [{{"id": "any.cosine_centroid"}}, {{"id": "any.lda_cosine"}}],
            "scenarios": ["naive", "parrot"],
            "report": {{"bootstrap": 10}},
        }}
        for cfg in (gait, synthetic):
            evaluate(cfg, out_dir={str(tmp_path / "out")!r}, cache={str(tmp_path / "cache")!r}, jobs=1, report=False,
                     progress=False)
        assert not Watch.before_results, Watch.before_results[0]
        assert "pandas" in sys.modules  # the results tables
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


def _arrays() -> list[pa.Array | pa.ChunkedArray]:
    rng = np.random.default_rng(0)
    out: list[pa.Array | pa.ChunkedArray] = []
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32"):
        out.append(pa.array((rng.standard_normal(11) * 50).astype(dtype)))
    f64 = pa.array(rng.standard_normal(13))
    bools = pa.array(rng.random(21) > 0.5)
    text = pa.array(["a", "bé", "", "ccc", "d"] * 3)
    out += [f64, f64.slice(3, 7), bools, bools.slice(5, 9), bools.slice(0, 0), text, text.slice(2, 6)]
    out += [pa.array(["x", "y"] * 4).dictionary_encode(), pa.array(["x", "y"], pa.large_string())]
    out += [
        pa.chunked_array([f64.slice(0, 4), f64.slice(4)]),
        pa.chunked_array([bools.slice(1, 3), bools]),
        pa.chunked_array([text, text.slice(1, 2)]),
        pa.chunked_array([], pa.float32()),
        pa.chunked_array([pa.array([], pa.int32())]),
    ]
    out += [pa.array([1.5, None, 3.0]), pa.array([1, None]), pa.array(["a", None])]  # nulls: pyarrow's own
    return out


@pytest.mark.parametrize("values", _arrays(), ids=lambda a: f"{type(a).__name__}:{a.type}:{len(a)}")
def test_to_numpy_equals_pyarrows_conversion(values) -> None:
    mine = to_numpy(values)
    theirs = np.asarray(values.to_numpy(zero_copy_only=False) if isinstance(values, pa.Array) else values.to_numpy())
    assert mine.dtype == theirs.dtype
    assert mine.shape == theirs.shape
    np.testing.assert_array_equal(mine, theirs)


def test_to_numpy_of_numbers_is_a_view() -> None:
    base = np.arange(10, dtype=np.float32)
    arr = pa.array(base).slice(2, 5)
    view = to_numpy(arr)
    assert np.shares_memory(view, base)
    assert view.tolist() == [2, 3, 4, 5, 6]
    assert not view.flags.writeable


@pytest.mark.parametrize(
    "values",
    [
        [1, 2, 3],
        [1.5, 2],
        [True, False],
        ["a", "é"],
        np.arange(3),
        np.array(["p", "q"]),
        [np.int64(4)],
        [np.float32(1.5)],
        [True, 1],
        [2**70],
        [1, None],
        ["a", None],
        [],
        [1, "a"],
        [[1, 2]],
        np.array(["a", "b"], dtype=object),
    ],
    ids=repr,
)
def test_from_values_equals_pa_array(values) -> None:
    try:
        theirs = pa.array(values)
    except (pa.ArrowException, OverflowError) as exc:  # the same refusal
        with pytest.raises(type(exc)):
            from_values(values)
        return
    mine = from_values(values)
    assert mine.type == theirs.type
    assert mine.to_pylist() == theirs.to_pylist()


def test_from_values_with_a_type_and_scalars() -> None:
    assert from_values(["1", "2"], type=pa.string()).type == pa.string()
    assert from_values([1, 2], type=pa.int32()).type == pa.int32()
    assert from_values(np.arange(3), type=pa.float64()).to_pylist() == [0.0, 1.0, 2.0]
    assert scalar(3).as_py() == 3 and scalar(3).type == pa.int64()
    assert scalar("x").as_py() == "x" and scalar(True).type == pa.bool_()
    assert scalar(1.0, pa.float32()).type == pa.float32()
    assert scalar(None).as_py() is None


def test_pandas_imported_past_the_hook_is_set_right_by_pandas_check_right() -> None:
    out = _run(
        """
        import sys
        import bioanon, pyarrow as pa
        from bioanon import arrow_numpy
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, arrow_numpy._AfterImport)]
        import numpy as np, pandas as pd
        assert not pa.lib._pandas_api.have_pandas  # pyarrow still thinks pandas is not loaded
        arrow_numpy.pandas_check_right()  # what bioanon's own pandas conversions call first
        assert pa.lib._pandas_api.have_pandas
        assert pa.array(pd.Series([1.0, np.nan])).null_count == 1
        print("ok")
        """
    )
    assert out.strip() == "ok"
