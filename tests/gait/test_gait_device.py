"""``gait.cnn`` on a device: CPU runs everywhere, CUDA compared with the CPU where there is a GPU, bf16 autocast
against fp32, the user's weights (round trip, mismatch, preflight, freeze) and the trained-weight cache."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon

torch = pytest.importorskip("torch")

import bioanon_gait.cnn as gait_cnn  # noqa: E402
from bioanon.cache import Cache  # noqa: E402
from bioanon.device import DeviceError  # noqa: E402
from bioanon.errors import ParameterError  # noqa: E402
from bioanon.nettrain import WeightsError, using_weight_cache  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")
PARAMS = {"epochs": 3, "channels": 8, "embedding_dim": 8, "threads": 1, "seed": 1}
_DATA: dict = {}


def _data(n_subjects: int = 6):
    if n_subjects not in _DATA:
        _DATA[n_subjects] = bioanon.load_dataset("gait.synthetic", n_subjects=n_subjects, sequences_per_subject=3,
                                                 frames=24, seed=3)
    return _DATA[n_subjects]


def _cnn(**kw):
    return bioanon.get_method("gait.cnn", **(PARAMS | {"device": "cpu"} | kw))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture
def spy(monkeypatch):
    """Records, for every training run of gait.cnn, the batches it drew and the devices of their tensors."""
    runs: list[list[tuple[str, ...]]] = []
    real = gait_cnn.train_net

    def train_net(build, batch, n, **kw):
        seen: list[tuple[str, ...]] = []
        runs.append(seen)

        def counted(idx, rng):
            out = batch(idx, rng)
            seen.append(tuple(str(t.device) for t in out))
            return out

        return real(build, counted, n, **kw)

    monkeypatch.setattr(gait_cnn, "train_net", train_net)
    return runs


def test_cpu_fit_keeps_the_device_and_batches_there(spy):
    m = _cnn().fit(_data())
    assert m.device_ == "cpu" and next(m.model_.parameters()).device.type == "cpu"
    assert spy[0] and all(d == ("cpu", "cpu") for d in spy[0])
    e = m.embed(_data())
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-5)


def test_bf16_autocast_embeddings_match_fp32():
    m = _cnn(precision="fp32").fit(_data())
    e32 = m.embed(_data())
    m.precision = "bf16"  # same weights, bf16 autocast at inference (CPU autocast supports bf16)
    e16 = m.embed(_data())
    assert _cosines(e32, e16).min() > 0.99


def test_weights_round_trip_freeze_and_mismatch(tmp_path):
    src = _cnn().fit(_data())
    path = tmp_path / "gait.pt"
    torch.save(src.model_.state_dict(), path)
    # another number of training subjects: the head is not loaded; the frozen backbone stays as loaded
    tuned = _cnn(weights=str(path), freeze=True, epochs=2).fit(_data(4))
    assert tuned.preflight(_data(4)) == []
    before, after = src.model_.backbone.state_dict(), tuned.model_.backbone.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert not torch.equal(src.model_.embedding.weight, tuned.model_.embedding.weight)  # the rest trained
    # unfrozen, the loaded backbone is fine-tuned
    free = _cnn(weights=str(path), epochs=2).fit(_data(4))
    assert not torch.equal(free.model_.backbone[0].weight, src.model_.backbone[0].weight)
    # a file for another network: one clear error naming the layer and both shapes, found by preflight too
    wide = _cnn(weights=str(path), channels=16)
    problems = wide.preflight(_data())
    assert len(problems) == 1 and "backbone.0.weight" in problems[0], problems
    assert "(8, 54, 5) in the file, (16, 54, 5) in the network" in problems[0]
    with pytest.raises(WeightsError, match=r"backbone\.0\.weight: \(8, 54, 5\) in the file"):
        wide.fit(_data())
    missing = _cnn(weights=str(tmp_path / "none.pt")).preflight(_data())
    assert len(missing) == 1 and "no such file" in missing[0]


def test_weight_cache_trains_once(tmp_path, spy):
    cache = Cache(tmp_path / "cache")
    with using_weight_cache(cache):
        a = _cnn().fit(_data())
        b = _cnn().fit(_data())
    assert len(spy) == 2 and spy[0] and not spy[1]  # the second fit drew no batch: it came from the cache
    np.testing.assert_array_equal(a.embed(_data()), b.embed(_data()))
    assert cache.info().n_blobs == 1
    with using_weight_cache(cache):
        _cnn(seed=2).fit(_data())  # other parameters: trained anew
    assert spy[2]


def test_device_param_is_checked():
    with pytest.raises(ParameterError, match="device"):
        _cnn(device="gpu")
    if not CUDA:
        with pytest.raises(DeviceError, match="gait.cnn: device 'cuda'"):
            _cnn(device="cuda").fit(_data())


@needs_cuda
def test_cuda_matches_cpu(spy):
    cpu = _cnn(precision="fp32").fit(_data())
    e_cpu = cpu.embed(_data())
    # the CPU-trained network on the GPU: fp32 within 1e-3 cosine, bf16 within 1e-2
    cpu.model_.to("cuda:0")
    cpu.device_ = "cuda:0"
    assert _cosines(e_cpu, cpu.embed(_data())).min() > 0.999
    cpu.precision = "bf16"
    assert _cosines(e_cpu, cpu.embed(_data())).min() > 0.99
    # trained on the GPU: tensors staged there, batches indexed there, a working recognizer
    data = bioanon.load_dataset("gait.synthetic", n_subjects=16, sequences_per_subject=6, frames=40, seed=5)
    train, evaluation = data.split_subjects([0.5, 0.5], seed=0)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=0)
    top1 = {}
    for dev in ("cpu", "cuda"):
        rec = _cnn(device=dev, epochs=25, channels=24, embedding_dim=32).fit(train).enroll(gallery)
        top1[dev] = float(np.mean(rec.score(probes).predict() == probes.subjects))
        assert rec.device_.split(":")[0] == dev
    assert all(d == ("cuda:0", "cuda:0") for d in spy[-1])
    assert top1["cuda"] > 0.4 and abs(top1["cuda"] - top1["cpu"]) < 0.25, top1  # chance 1/8
