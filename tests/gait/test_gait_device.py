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


def _pool_config() -> dict:
    """gait.cnn against two noise levels, naive and parrot: enough tasks for a pool of two workers."""
    return {
        "name": "cuda-pool",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "parrot"],
        "dataset": {"source": "gait.synthetic", "params": {"n_subjects": 16, "sequences_per_subject": 6, "frames": 40}},
        "anonymizers": [{"id": "gait.noise", "name": "noise", "grid": {"scale": [0.5, 1.0, 2.0]}}],
        "recognizers": [{"id": "gait.cnn", "name": "cnn", "params": dict(TestGaitCnnDevice.cuda_params)}],
        "selection": {"selectors": ["random"], "subject_counts": []},
        "report": {"bootstrap": 50},
    }


def _top1(result) -> dict:
    """Top-1 by (setting, scenario)."""
    m = result.metrics
    return m[m["metric"] == "top1"].set_index(["setting", "scenario"])["value"].to_dict()


@needs_cuda
def test_cuda_tasks_run_in_the_worker_pool(tmp_path, monkeypatch):
    """``--jobs 2`` with gait.cnn on the GPU: the workers are forked from the preloaded worker server, which must
    not have started CUDA (a forked child of a process that did cannot use the GPU). The run finishes on the GPU
    in two workers and identifies as well as one job does (GPU training is not bit-reproducible, so the top-1
    values are compared with a margin)."""
    import json

    monkeypatch.setenv("BIOANON_CORES", "4")
    one = bioanon.evaluate(_pool_config(), out_dir=None, cache=tmp_path / "one", progress=False, jobs=1, device="cuda")
    two = bioanon.evaluate(
        _pool_config(), out_dir=tmp_path / "out", cache=tmp_path / "two", progress=False, jobs=2, device="cuda",
        report=False,
    )  # fmt: skip
    assert json.loads((two.run_dir / "environment.json").read_text())["jobs"] == 2
    assert two.executed == one.executed and two.executed >= 8
    a, b = _top1(one), _top1(two)
    assert a.keys() == b.keys() and len(a) >= 8
    assert max(abs(a[k] - b[k]) for k in a) < 0.3, (a, b)
    assert a[("scale=0.5", "clear")] > 0.4 and b[("scale=0.5", "clear")] > 0.4  # chance 1/16


def test_the_worker_server_preload_does_not_start_cuda():
    """The fork server imports every plugin (``bioanon.worker_preload``); none may start CUDA or its children
    could not use the GPU. Checked in a fresh interpreter (meaningful where CUDA exists, harmless elsewhere)."""
    import subprocess
    import sys

    code = (
        "import bioanon.worker_preload, sys\n"
        "t = sys.modules.get('torch')\n"
        "print('initialized' if t is not None and t.cuda.is_initialized() else 'clean')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "clean", out.stdout + out.stderr
