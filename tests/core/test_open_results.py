"""`bioanon.open_results` (and `EvaluationResult.load`): a results folder opens as the result its evaluation
returned, and what is not a finished results folder is refused with a message naming it."""

from __future__ import annotations

import json
import shutil

import attrs
import pandas as pd
import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.errors import BioanonError
from bioanon.evaluation.run import EvaluationResult
from bioanon.evaluation.rundir import RESULTS_FORMAT, STATUS_FILE
from bioanon.report import ResultsNotFoundError, render_report


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("open-results")
    result = bioanon.evaluate(config(**SMALL), out_dir=tmp / "out", run_id="r", cache=tmp / "cache", progress=False)
    return result


def _copy(result, tmp_path, name="copy"):
    return shutil.copytree(result.run_dir, tmp_path / name)


def _set_status(folder, **changes):
    status = json.loads((folder / STATUS_FILE).read_text())
    (folder / STATUS_FILE).write_text(json.dumps(status | changes))


def _assert_same(opened, result):
    for field in attrs.fields(EvaluationResult):
        a, b = getattr(result, field.name), getattr(opened, field.name)
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(b, a, obj=field.name)
        else:
            assert b == a, field.name


def test_a_results_folder_opens_as_the_result_its_evaluation_returned(evaluated, tmp_path):
    assert "open_results" in bioanon.__all__
    assert json.loads((evaluated.run_dir / STATUS_FILE).read_text())["format"] == RESULTS_FORMAT
    opened = bioanon.open_results(evaluated.run_dir)
    assert isinstance(opened, EvaluationResult)
    assert evaluated.config["name"] == "test" and evaluated.report_path is not None
    _assert_same(opened, evaluated)
    _assert_same(EvaluationResult.load(str(evaluated.run_dir)), evaluated)
    for view in ("summary", "curves", "headline"):
        pd.testing.assert_frame_equal(getattr(opened, view)(), getattr(evaluated, view)(), obj=view)
    assert opened._repr_html_() == evaluated._repr_html_()

    copy = _copy(evaluated, tmp_path)  # the report is made again from the opened folder
    (copy / "report.html").unlink()
    reopened = bioanon.open_results(copy)
    assert reopened.report_path is None and reopened.run_dir == copy
    assert render_report(reopened.run_dir).is_file()
    assert bioanon.open_results(copy).report_path == copy / "report.html"


def test_what_is_not_a_results_folder_is_refused_naming_it(tmp_path):
    with pytest.raises(ResultsNotFoundError, match=f"{tmp_path / 'nowhere'}: no such results folder"):
        bioanon.open_results(tmp_path / "nowhere")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    with pytest.raises(ResultsNotFoundError, match=f"{tmp_path / 'other'}: not a results folder.*<out>/<run id>"):
        bioanon.open_results(tmp_path / "other")
    (tmp_path / "other" / STATUS_FILE).write_text("{not json")
    with pytest.raises(BioanonError, match="status.json: unreadable"):
        bioanon.open_results(tmp_path / "other")


def test_a_folder_of_a_newer_format_is_refused(evaluated, tmp_path):
    copy = _copy(evaluated, tmp_path)
    _set_status(copy, format=RESULTS_FORMAT + 1)
    with pytest.raises(
        BioanonError, match=f"{copy}: written by a newer bioanon .*format {RESULTS_FORMAT + 1}.*upgrade"
    ):
        bioanon.open_results(copy)


def test_an_unfinished_run_is_refused_without_results_and_opens_with_a_warning_with_them(evaluated, tmp_path):
    copy = _copy(evaluated, tmp_path)
    _set_status(copy, state="interrupted", tasks_saved=3, tasks_total=9)
    with pytest.warns(UserWarning, match=f"{copy}: the evaluation did not finish .*interrupted, 3 of 9 tasks"):
        opened = bioanon.open_results(copy)
    pd.testing.assert_frame_equal(opened.metrics, evaluated.metrics)

    (copy / "metrics.parquet").unlink()
    with pytest.raises(BioanonError, match=f"{copy}: the evaluation did not finish and wrote no results.*resume"):
        bioanon.open_results(copy)
    _set_status(copy, state="complete")  # complete but a results file is gone
    with pytest.raises(ResultsNotFoundError, match="metrics.parquet not found"):
        bioanon.open_results(copy)
    _set_status(copy, state="running")  # its process is gone (no lock)
    with pytest.raises(BioanonError, match="ended without finishing"):
        bioanon.open_results(copy)


def test_a_folder_written_before_status_markers_opens(evaluated, tmp_path):
    copy = _copy(evaluated, tmp_path)
    (copy / STATUS_FILE).unlink()
    pd.testing.assert_frame_equal(bioanon.open_results(copy).metrics, evaluated.metrics)
