"""``motion.cnn`` on a device: the shared network contract (tests/torchcontract.py)."""

from __future__ import annotations

import pytest

import bioanon

pytest.importorskip("torch")

from torchcontract import NetworkContract  # noqa: E402

import bioanon_motion.cnn as motion_cnn  # noqa: E402


class TestMotionCnnDevice(NetworkContract):
    method_id = "motion.cnn"
    module = motion_cnn
    params = {"epochs": 3, "width": 4, "embedding_dim": 8, "threads": 1, "seed": 1}
    wider = {"width": 8}
    first_layer = ("(4, 6, 7)", "(8, 6, 7)")
    cuda_params = {"epochs": 12, "width": 32, "embedding_dim": 64}
    cuda_top1 = 0.4  # chance 1/15
    _cache: dict = {}

    def data(self, n_subjects: int = 6):
        if n_subjects not in self._cache:
            self._cache[n_subjects] = bioanon.load_dataset(
                "motion.synthetic", n_subjects=n_subjects, windows_per_subject=4, seed=3
            )
        return self._cache[n_subjects]

    def cuda_data(self):
        data = bioanon.load_dataset("motion.synthetic", n_subjects=30, windows_per_subject=12)
        train, evaluation = data.split_subjects([0.5, 0.5], seed=0)
        return (train, *evaluation.split_within_subjects([0.5, 0.5], seed=0))
