"""Notebook use: rich displays of tables, methods and results, the result views (summary, curves, plot), and
evaluate() without an output folder writing into the cache, not the working directory."""

from __future__ import annotations

import os

import numpy as np
import pytest
from evalconfigs import SMALL, config
from matplotlib.figure import Figure

import bioanon
from bioanon.errors import BioanonError


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    here = tmp_path_factory.mktemp("cwd")
    old = os.getcwd()
    os.chdir(here)
    try:
        res = bioanon.evaluate(config(**SMALL), cache=here.parent / "cache", progress=False, report=False)
    finally:
        os.chdir(old)
    return res, here


@pytest.fixture(scope="module")
def result(run):
    return run[0]


def test_evaluate_without_out_writes_into_the_cache_not_the_working_directory(run):
    result, cwd = run
    assert list(cwd.iterdir()) == []
    cache_root = (cwd.parent / "cache").resolve()
    assert result.run_dir is not None and result.run_dir.resolve().parent == cache_root / "runs"
    assert (result.run_dir / "metrics.parquet").is_file()
    assert bioanon.evaluate(config(**SMALL), out_dir=None, progress=False, report=False).run_dir is None


def test_summary_has_one_row_per_setting_with_levels(result):
    s = result.summary()
    hl = result.headline()
    assert len(s) == len(hl) == 2  # noise sigma 1 and 3
    assert {"worst_accuracy", "clear_accuracy", "chance", "privacy", "utility[any.cosine_similarity]"} <= set(s)
    assert s.privacy.between(-0.5, 1.5).all()
    # privacy restates the worst case between the clear level (0) and chance (1)
    expected = (s.clear_accuracy - s.worst_accuracy) / (s.clear_accuracy - s.chance)
    np.testing.assert_allclose(s.privacy, expected.clip(lower=0), atol=1e-9)
    # more noise hides more and keeps less
    by = s.set_index("setting")
    assert by.privacy.iloc[1] >= by.privacy.iloc[0] - 0.05
    assert by["utility[any.cosine_similarity]"].iloc[1] < by["utility[any.cosine_similarity]"].iloc[0]


def test_curves_are_the_headline_selection_in_sweep_order(result):
    c = result.curves()
    assert set(c.selector) == {"random"} and set(c.n_subjects) == {12}
    assert list(c.setting_index) == sorted(c.setting_index)
    assert set(c.measure) == {"any.cosine_similarity"}


def test_plots_are_figures(result):
    fig = result.plot()
    assert isinstance(fig, Figure)
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    legend = [t.get_text() for lg in legends for t in lg.get_texts()]
    assert any("AUC" in t for t in legend), legend
    head = result.plot("headline")
    assert isinstance(head, Figure) and head.axes[0].get_ylabel() == "top1"
    assert len(head.axes[0].get_xticklabels()) == 2
    every = result.plots()
    assert {p.kind for p in every} >= {"tradeoff", "subjects", "scenarios"}
    assert all(isinstance(p.figure, Figure) and p.caption.startswith("How to read") for p in every)
    with pytest.raises(BioanonError, match="unknown plot kind"):
        result.plot("pie")


def test_single_setting_is_drawn_as_a_point():
    one = config(**(SMALL | {"anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "params": {"sigma": 2.0}}]}))
    res = bioanon.evaluate(one, out_dir=None, progress=False, report=False)
    lines = [ln for ax in res.plot().axes for ln in ax.lines if len(ln.get_xdata()) == 1]
    assert lines and all(ln.get_linestyle() == "None" and ln.get_marker() not in (None, "None", "") for ln in lines)


def test_plot_without_utility_says_why():
    res = bioanon.evaluate(config(**(SMALL | {"utility": []})), out_dir=None, progress=False, report=False)
    with pytest.raises(BioanonError, match="no utility measure"):
        res.plot()
    assert isinstance(res.plot("headline"), Figure)


def test_rich_displays(result):
    html = result._repr_html_()
    assert "EvaluationResult" in html and str(result.run_dir) in html and "worst_accuracy" in html
    table = bioanon.load_dataset("any.synthetic", n_subjects=4, samples_per_subject=3)
    t = table._repr_html_()
    assert "12 samples, 4 subjects" in t and "features [" in t and "<table>" in t
    noisy = bioanon.anonymize(table, bioanon.get_method("any.gaussian_noise", sigma=0.5))
    assert "any.gaussian_noise" in noisy._repr_html_()
    m = bioanon.get_method("any.gaussian_noise", sigma=0.25)._repr_html_()
    assert "any.gaussian_noise" in m and "sigma" in m and "0.25 (set)" in m
