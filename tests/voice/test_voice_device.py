"""``voice.xvector`` and ``voice.resemblyzer`` on a device: the shared network contract (tests/torchcontract.py)
for the x-vector, its crops made from frames staged on the device, its fast/paper presets, and Resemblyzer on its
device (CUDA compared with the CPU where there is a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import bioanon

torch = pytest.importorskip("torch")

from torchcontract import NetworkContract, cosines, needs_cuda  # noqa: E402

import bioanon_voice.xvector as xv  # noqa: E402
from bioanon.errors import ParameterError  # noqa: E402
from bioanon_voice.resemblyzer_encoder import resemblyzer_available  # noqa: E402

needs_resemblyzer = pytest.mark.skipif(
    not resemblyzer_available(), reason="resemblyzer (with webrtcvad and torch) is not installed"
)
_DATA: dict = {}


def _data(n_speakers: int = 6):
    if n_speakers not in _DATA:
        _DATA[n_speakers] = bioanon.load_dataset(
            "voice.synthetic", n_speakers=n_speakers, utterances_per_speaker=4, seed=3
        )
    return _DATA[n_speakers]


# ------------------------------------------------------------------------------------------------- x-vector


class TestXVectorDevice(NetworkContract):
    method_id = "voice.xvector"
    module = xv
    params = {"epochs": 3, "channels": 8, "embedding_dim": 8, "crop_frames": 20, "threads": 1, "seed": 1}
    wider = {"channels": 16}
    first_layer = ("(8, 30, 5)", "(16, 30, 5)")
    # 8 speakers, 8 enrolment utterances each: the CPU reaches 0.77-0.86 over seeds (12 speakers with 4 each gave
    # 0.23-0.40, as weak as an MFCC SVM there, so a threshold of 0.3 was a coin flip on any device)
    cuda_params = {"epochs": 30, "channels": 32, "embedding_dim": 32, "crop_frames": 30}
    cuda_top1 = 0.5  # chance 1/8

    def data(self, n_subjects: int = 6):
        return _data(n_subjects)

    def cuda_data(self):
        data = bioanon.load_dataset("voice.synthetic", n_speakers=8, utterances_per_speaker=16, seed=0)
        enrol, probes = data.split_within_subjects([0.5, 0.5], seed=0)
        return enrol, enrol, probes

    def test_cpu_crops_are_windows_of_the_staged_frames(self, spy):
        m = self.make(crop_frames=50)  # longer than the 0.4 s utterances: they are tiled
        m.fit(_data())
        frames = [xv._at_least(f, 50) for f in m._frames(_data())]
        for idx, x, _y in spy[0][:3]:
            assert x.device.type == "cpu" and tuple(x.shape) == (len(idx), m.n_mels, 50)
            for i, crop in zip(idx, x.numpy(), strict=True):
                f = frames[i]
                assert any(np.array_equal(crop, f[:, o : o + 50]) for o in range(f.shape[1] - 49)), i


def test_presets_fast_is_todays_default_and_paper_is_table_1():
    fast, paper = xv.XVector(), xv.XVector(preset="paper")
    assert (fast.n_mels, fast.channels, fast.embedding_dim, fast.crop_frames, fast.epochs, fast.loss) == (
        30,
        64,
        64,
        60,
        30,
        "aam",
    )
    assert (
        paper.n_mels,
        paper.channels,
        paper.frame_layers,
        paper.pool_channels,
        paper.embedding_dim,
        paper.crop_frames,
        paper.loss,
    ) == (24, 512, 5, 1500, 512, 300, "softmax")
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
    assert cosines(e32, e16).min() > 0.99
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
    assert cosines(e_cpu, e_gpu).min() > 0.999


def test_fast_preset_trains_on_one_thread_paper_on_every_core():
    """The fast network's small batches run fastest on one torch thread (on two busy cores, two threads made a
    fit ten times slower); the paper network uses every core; an explicit value wins; threads never enter the
    fingerprint."""
    fast, paper = xv.XVector(), xv.XVector(preset="paper")
    assert (fast.threads, paper.threads) == (1, 0)
    assert xv.XVector(threads=0).threads == 0 and xv.XVector(preset="paper", threads=2).threads == 2
    assert paper.with_params(preset="fast").threads == 1
    assert fast.fingerprint() == xv.XVector(threads=0).fingerprint()
