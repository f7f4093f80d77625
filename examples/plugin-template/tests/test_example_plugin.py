"""Tests of the example plugin, using bioanon's testing support (fixtures come from the pytest plugin
``bioanon.testing``, which the project's ``pyproject.toml`` loads: ``addopts = "-p bioanon.testing"``)."""

from __future__ import annotations

import numpy as np
import pytest

from bioanon.api import ParameterError, check_method, get_registry, list_methods
from bioanon_example.anonymizers import Quantize
from bioanon_example.recognizers import NearestNeighbour


@pytest.mark.parametrize("cls", [Quantize, NearestNeighbour])
def test_conformance(cls):
    report = check_method(cls)
    report.raise_for_failures()
    assert report.checks_run >= 10, str(report)


def test_installed_plugin_is_discovered():
    assert {"example.quantize", "example.nearest_neighbour"} <= set(list_methods("example.*"))
    assert get_registry()["example.quantize"].distribution == "bioanon-example"


def test_quantize_rejects_zero_step():
    with pytest.raises(ParameterError, match="example.quantize.*'step'"):
        Quantize(step=0)


def _top1(recognizer, gallery, probes) -> float:
    scores = recognizer.enroll(gallery).score(probes)
    return float(np.mean(scores.predict() == probes.subjects))


def test_nearest_neighbour_identifies_and_coarse_quantization_hides(make_sample_table):
    table = make_sample_table(n_subjects=8, samples_per_subject=6, seed=1)
    gallery, probes = table.split_within_subjects([0.5, 0.5], seed=0)
    clear = _top1(NearestNeighbour(), gallery, probes)
    assert clear > 0.9  # chance is 1/8
    q = Quantize(step=1000.0)
    hidden = _top1(NearestNeighbour(), q.transform(gallery), q.transform(probes))
    assert hidden < 0.3
