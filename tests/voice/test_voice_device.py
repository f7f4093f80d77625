"""``voice.xvector`` and ``voice.resemblyzer`` on a device: CPU runs everywhere, CUDA compared with the CPU where
there is a GPU, bf16 autocast against fp32, the x-vector's crops made from frames staged on the device, the user's
weights (round trip, mismatch, preflight, freeze), the trained-weight cache and the fast/paper presets."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon

torch = pytest.importorskip("torch")

import bioanon_voice.xvector as xv  # noqa: E402
from bioanon.cache import Cache  # noqa: E402
from bioanon.device import DeviceError  # noqa: E402
from bioanon.errors import ParameterError  # noqa: E402
from bioanon.nettrain import WeightsError, using_weight_cache  # noqa: E402
from bioanon_voice.resemblyzer_encoder import resemblyzer_available  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")
needs_resemblyzer = pytest.mark.skipif(not resemblyzer_available(),
                                       reason="resemblyzer (with webrtcvad and torch) is not installed")
PARAMS = {"epochs": 3, "channels": 8, "embedding_dim": 8, "crop_frames": 20, "threads": 1, "seed": 1}
_DATA: dict = {}


def _data(n_speakers: int = 6):
    if n_speakers not in _DATA:
        _DATA[n_speakers] = bioanon.load_dataset("voice.synthetic", n_speakers=n_speakers, utterances_per_speaker=4,
                                                 seed=3)
    return _DATA[n_speakers]


def _xv(**kw):
    return xv.XVector(**(PARAMS | {"device": "cpu"} | kw))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture
def spy(monkeypatch):
    """Records, for every training run of voice.xvector, each batch's indices and tensors."""
    runs: list[list[tuple]] = []
    real = xv.train_net

    def train_net(build, batch, n, **kw):
        seen: list[tuple] = []
        runs.append(seen)

        def counted(idx, rng):
            out = batch(idx, rng)
            seen.append((np.array(idx), *out))
            return out

        return real(build, counted, n, **kw)

    monkeypatch.setattr(xv, "train_net", train_net)
    return runs


# ------------------------------------------------------------------------------------------------- x-vector

def test_cpu_crops_are_windows_of_the_staged_frames(spy):
    m = _xv(crop_frames=50)  # longer than the 0.4 s utterances: they are tiled
    m.fit(_data())
    assert m.device_ == "cpu" and next(m.model_.parameters()).device.type == "cpu"
    frames = [xv._at_least(f, 50) for f in m._frames(_data())]
    for idx, x, y in spy[0][:3]:
        assert x.device.type == "cpu" and tuple(x.shape) == (len(idx), m.n_mels, 50)
        for i, crop in zip(idx, x.numpy()):
            f = frames[i]
            assert any(np.array_equal(crop, f[:, o:o + 50]) for o in range(f.shape[1] - 49)), i
    e = m.embed(_data())
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-5)


def test_bf16_autocast_embeddings_match_fp32():
    m = _xv(precision="fp32").fit(_data())
    e32 = m.embed(_data())
    m.precision = "bf16"  # same weights, bf16 autocast at inference (CPU autocast supports bf16)
    assert _cosines(e32, m.embed(_data())).min() > 0.99


def test_weights_round_trip_freeze_and_mismatch(tmp_path):
    src = _xv().fit(_data())
    path = tmp_path / "xvector.pt"
    torch.save(src.model_.state_dict(), path)
    # another number of training speakers: the head is not loaded; the frozen TDNN stays as loaded
    tuned = _xv(weights=str(path), freeze=True, epochs=2).fit(_data(4))
    assert tuned.preflight(_data(4)) == []
    before, after = src.model_.backbone.state_dict(), tuned.model_.backbone.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert not torch.equal(src.model_.embedding.weight, tuned.model_.embedding.weight)
    free = _xv(weights=str(path), epochs=2).fit(_data(4))
    assert not torch.equal(free.model_.backbone[0].weight, src.model_.backbone[0].weight)
    wide = _xv(weights=str(path), channels=16)
    problems = wide.preflight(_data())
    assert len(problems) == 1 and "backbone.0.weight" in problems[0], problems
    assert "(8, 30, 5) in the file, (16, 30, 5) in the network" in problems[0]
    with pytest.raises(WeightsError, match=r"backbone\.0\.weight: \(8, 30, 5\) in the file"):
        wide.fit(_data())
    assert "no such file" in _xv(weights=str(tmp_path / "none.pt")).preflight(_data())[0]


def test_weight_cache_trains_once(tmp_path, spy):
    cache = Cache(tmp_path / "cache")
    with using_weight_cache(cache):
        a = _xv().fit(_data())
        b = _xv().fit(_data())
    assert len(spy) == 2 and spy[0] and not spy[1]  # the second fit drew no batch: it came from the cache
    np.testing.assert_array_equal(a.embed(_data()), b.embed(_data()))
    assert cache.info().n_blobs == 1


def test_presets_fast_is_todays_default_and_paper_is_table_1():
    fast, paper = xv.XVector(), xv.XVector(preset="paper")
    assert (fast.n_mels, fast.channels, fast.embedding_dim, fast.crop_frames, fast.epochs, fast.loss) == \
        (30, 64, 64, 60, 30, "aam")
    assert (paper.n_mels, paper.channels, paper.frame_layers, paper.pool_channels, paper.embedding_dim,
            paper.crop_frames, paper.loss) == (24, 512, 5, 1500, 512, 300, "softmax")
    assert xv.XVector(preset="paper", epochs=5).epochs == 5  # an explicit value wins
    assert paper.with_params(preset="fast").channels == 64
    assert paper.fingerprint() != fast.fingerprint()
    described = bioanon.get_registry().get("voice.xvector").describe()["presets"]
    assert described["paper"]["channels"] == 512 and described["fast"]["channels"] == 64
    # the paper network, built on the meta device: Snyder et al. 2018, Table 1
    with torch.device("meta"):
        net = paper._builder(torch, 100)()
    convs = [tuple(c.weight.shape) for c in net.backbone if isinstance(c, torch.nn.Conv1d)]
    assert convs == [(512, 24, 5), (512, 512, 3), (512, 512, 3), (512, 512, 1), (1500, 512, 1)]
    assert [c.dilation[0] for c in net.backbone if isinstance(c, torch.nn.Conv1d)] == [1, 2, 3, 1, 1]
    assert tuple(net.embedding.weight.shape) == (512, 3000)  # segment6
    linears = [tuple(m.weight.shape) for m in net.head.modules() if isinstance(m, torch.nn.Linear)]
    assert linears == [(512, 512), (100, 512)]  # segment7, softmax
    assert "Table 1" in (xv.XVector.__doc__ or "")


def test_device_param_is_checked():
    with pytest.raises(ParameterError, match="device"):
        _xv(device="gpu")
    if not CUDA:
        with pytest.raises(DeviceError, match="voice.xvector: device 'cuda'"):
            _xv(device="cuda").fit(_data())


@needs_cuda
def test_cuda_matches_cpu(spy):
    cpu = _xv(precision="fp32").fit(_data())
    e_cpu = cpu.embed(_data())
    cpu.model_.to("cuda:0")
    cpu.device_ = "cuda:0"
    assert _cosines(e_cpu, cpu.embed(_data())).min() > 0.999
    cpu.precision = "bf16"
    assert _cosines(e_cpu, cpu.embed(_data())).min() > 0.99
    data = bioanon.load_dataset("voice.synthetic", n_speakers=12, utterances_per_speaker=8, seed=0)
    enrol, probes = data.split_within_subjects([0.5, 0.5], seed=0)
    top1 = {}
    for dev in ("cpu", "cuda"):
        rec = _xv(device=dev, epochs=15, channels=32, embedding_dim=32, crop_frames=30).fit(enrol).enroll(enrol)
        top1[dev] = float(np.mean(rec.score(probes).predict() == probes.subjects))
        assert rec.device_.split(":")[0] == dev
    assert all(x.device.type == "cuda" and y.device.type == "cuda" for _, x, y in spy[-1])
    assert top1["cuda"] > 0.3 and abs(top1["cuda"] - top1["cpu"]) < 0.25, top1  # chance 1/12


# ----------------------------------------------------------------------------------------------- resemblyzer

@needs_resemblyzer
def test_resemblyzer_runs_on_its_device_param():
    from bioanon_voice.resemblyzer_encoder import Resemblyzer, encoder

    r = Resemblyzer(device="cpu")
    e32 = r.embed(_data())
    assert e32.shape == (len(_data()), 256)
    assert next(encoder(r.id, "cpu").parameters()).device.type == "cpu"
    assert r.preflight(_data()) == []
    e16 = Resemblyzer(device="cpu", precision="bf16").embed(_data())
    assert _cosines(e32, e16).min() > 0.99
    with pytest.raises(ParameterError, match="device"):
        Resemblyzer(device="gpu")


@needs_resemblyzer
@needs_cuda
def test_resemblyzer_cuda_matches_cpu():
    from bioanon_voice.resemblyzer_encoder import Resemblyzer, encoder

    e_cpu = Resemblyzer(device="cpu").embed(_data())
    r = Resemblyzer(device="cuda")
    e_gpu = r.embed(_data())
    assert next(encoder(r.id, "cuda:0").parameters()).device.type == "cuda"
    assert _cosines(e_cpu, e_gpu).min() > 0.999
