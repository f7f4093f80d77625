"""``gait.cnn`` on a device: the shared network contract (tests/torchcontract.py)."""

from __future__ import annotations

import pytest

import bioanon

pytest.importorskip("torch")

from torchcontract import NetworkContract, needs_cuda  # noqa: E402

import bioanon_gait.cnn as gait_cnn  # noqa: E402


class TestGaitCnnDevice(NetworkContract):
    method_id = "gait.cnn"
    module = gait_cnn
    params = {"epochs": 3, "channels": 8, "embedding_dim": 8, "threads": 1, "seed": 1}
    wider = {"channels": 16}
    first_layer = ("(8, 54, 5)", "(16, 54, 5)")
    cuda_params = {"epochs": 25, "channels": 24, "embedding_dim": 32}
    cuda_top1 = 0.4  # chance 1/8
    _cache: dict = {}

    def data(self, n_subjects: int = 6):
        if n_subjects not in self._cache:
            self._cache[n_subjects] = bioanon.load_dataset(
                "gait.synthetic", n_subjects=n_subjects, sequences_per_subject=3, frames=24, seed=3
            )
        return self._cache[n_subjects]

    def cuda_data(self):
        data = bioanon.load_dataset("gait.synthetic", n_subjects=16, sequences_per_subject=6, frames=40, seed=5)
        train, evaluation = data.split_subjects([0.5, 0.5], seed=0)
        return (train, *evaluation.split_within_subjects([0.5, 0.5], seed=0))


@needs_cuda
def test_cuda_graph_training_learns_as_the_eager_one(caplog, monkeypatch):
    """``cuda_graphs`` (the default) captures one graph per batch shape — several, since the random temporal
    crops vary in length — and trains to the accuracy of the eager steps (dropout draws differ, so the two
    trainings are not identical)."""
    import numpy as np

    import bioanon.nettrain as nettrain

    captured = []
    real = nettrain.GraphedStep._capture
    monkeypatch.setattr(nettrain.GraphedStep, "_capture", lambda self, *a: captured.append(a[0]) or real(self, *a))
    contract = TestGaitCnnDevice()
    train, gallery, probes = contract.cuda_data()
    top1 = {}
    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        for graphs in (False, True):
            rec = contract.make(device="cuda", cuda_graphs=graphs, **contract.cuda_params).fit(train).enroll(gallery)
            top1[graphs] = float(np.mean(rec.score(probes).predict() == probes.subjects))
    assert "capture failed" not in caplog.text
    assert len(captured) > 2 and len(set(captured)) == len(captured)  # one capture per shape, several shapes
    assert top1[True] > contract.cuda_top1 and abs(top1[True] - top1[False]) < 0.25, top1
