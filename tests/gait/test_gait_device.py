"""``gait.cnn`` on a device: the shared network contract (tests/torchcontract.py)."""

from __future__ import annotations

import pytest

import bioanon

pytest.importorskip("torch")

from torchcontract import NetworkContract  # noqa: E402

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
