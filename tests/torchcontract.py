"""The device contract of a network recognizer (a ``backbone``, an ``embedding`` layer and a training ``head``),
tested once for every such method: CPU runs everywhere, CUDA compared with the CPU where there is a GPU, bf16
autocast against fp32, the user's weights (round trip, mismatch, preflight, freeze) and the trained-weight cache.

A test module subclasses :class:`NetworkContract` as ``Test…`` and sets the method, its small parameters, the
data and the shapes its first layer has in the mismatch test."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

import bioanon

torch = pytest.importorskip("torch")

from bioanon.cache import Cache  # noqa: E402
from bioanon.device import DeviceError  # noqa: E402
from bioanon.errors import ParameterError  # noqa: E402
from bioanon.nettrain import WeightsError, using_weight_cache  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")


def blobs(n: int = 200, d: int = 8, classes: int = 4, seed: int = 0):
    """Linearly separable Gaussian blobs: (x float32, y int64) tensors."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, d)) * 3.0
    y = rng.integers(0, classes, n)
    x = (centres[y] + 0.5 * rng.standard_normal((n, d))).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


class NetworkContract:
    method_id: ClassVar[str]
    module: ClassVar[Any]  # the module whose train_net the method calls (spied on)
    params: ClassVar[dict]  # small, fast parameters
    wider: ClassVar[dict]  # parameters that widen backbone.0 (for the mismatch test)
    first_layer: ClassVar[tuple[str, str]]  # backbone.0.weight's shape in the file and in the wider network
    cuda_params: ClassVar[dict]  # parameters of the CUDA-vs-CPU accuracy comparison
    cuda_top1: ClassVar[float]  # the top-1 both devices must reach there
    _cache: ClassVar[dict]

    def data(self, n_subjects: int = 6) -> Any:
        """A small table of ``n_subjects`` subjects (memoized per class)."""
        raise NotImplementedError

    def cuda_data(self) -> tuple[Any, Any, Any]:
        """(training, enrolment, probe) tables for the CUDA-vs-CPU accuracy comparison."""
        raise NotImplementedError

    def make(self, **kw: Any) -> Any:
        return bioanon.get_method(self.method_id, **(self.params | {"device": "cpu"} | kw))

    @pytest.fixture
    def spy(self, monkeypatch):
        """Records, for every training run, each batch's indices and tensors."""
        runs: list[list[tuple]] = []
        real = self.module.train_net

        def train_net(build, batch, n, **kw):
            seen: list[tuple] = []
            runs.append(seen)

            def counted(idx, rng):
                out = batch(idx, rng)
                seen.append((np.array(idx), *out))
                return out

            return real(build, counted, n, **kw)

        monkeypatch.setattr(self.module, "train_net", train_net)
        return runs

    def test_cpu_fit_keeps_the_device_and_batches_there(self, spy):
        m = self.make().fit(self.data())
        assert m.device_ == "cpu" and next(m.model_.parameters()).device.type == "cpu"
        assert spy[0] and all(t.device.type == "cpu" for _, *tensors in spy[0] for t in tensors)
        np.testing.assert_allclose(np.linalg.norm(m.embed(self.data()), axis=1), 1.0, rtol=1e-5)

    def test_bf16_autocast_embeddings_match_fp32(self):
        m = self.make(precision="fp32").fit(self.data())
        e32 = m.embed(self.data())
        m.precision = "bf16"  # same weights, bf16 autocast at inference (CPU autocast supports bf16)
        assert cosines(e32, m.embed(self.data())).min() > 0.99

    def test_weights_round_trip_freeze_and_mismatch(self, tmp_path):
        src = self.make().fit(self.data())
        path = tmp_path / "net.pt"
        torch.save(src.model_.state_dict(), path)
        # another number of training subjects: the head is not loaded; the frozen backbone stays as loaded
        tuned = self.make(weights=str(path), freeze=True, epochs=2).fit(self.data(4))
        assert tuned.preflight(self.data(4)) == []
        before, after = src.model_.backbone.state_dict(), tuned.model_.backbone.state_dict()
        for k in before:
            assert torch.equal(before[k], after[k]), k
        assert not torch.equal(src.model_.embedding.weight, tuned.model_.embedding.weight)  # the rest trained
        free = self.make(weights=str(path), epochs=2).fit(self.data(4))  # unfrozen: fine-tuned
        assert not torch.equal(free.model_.backbone[0].weight, src.model_.backbone[0].weight)
        # a file for another network: one clear error naming the layer and both shapes, found by preflight too
        wide = self.make(weights=str(path), **self.wider)
        problems = wide.preflight(self.data())
        in_file, in_net = self.first_layer
        assert (
            len(problems) == 1 and f"backbone.0.weight: {in_file} in the file, {in_net} in the network" in problems[0]
        ), problems
        with pytest.raises(WeightsError, match=r"backbone\.0\.weight: " + re_escape(in_file) + " in the file"):
            wide.fit(self.data())
        missing = self.make(weights=str(tmp_path / "none.pt")).preflight(self.data())
        assert len(missing) == 1 and "no such file" in missing[0]

    def test_weight_cache_trains_once(self, tmp_path, spy):
        cache = Cache(tmp_path / "cache")
        with using_weight_cache(cache):
            a = self.make().fit(self.data())
            b = self.make().fit(self.data())
        assert len(spy) == 2 and spy[0] and not spy[1]  # the second fit drew no batch: it came from the cache
        np.testing.assert_array_equal(a.embed(self.data()), b.embed(self.data()))
        assert cache.info().n_blobs == 1
        with using_weight_cache(cache):
            self.make(seed=2).fit(self.data())  # other parameters: trained anew
        assert spy[2]

    def test_device_param_is_checked(self):
        with pytest.raises(ParameterError, match="device"):
            self.make(device="gpu")
        if not CUDA:
            with pytest.raises(DeviceError, match=f"{self.method_id}: device 'cuda'"):
                self.make(device="cuda").fit(self.data())

    @needs_cuda
    def test_cuda_batches_do_not_wait_for_the_gpu(self, monkeypatch):
        """Drawing a training batch on CUDA makes no synchronizing copy (torch's sync debug mode raises on one):
        a small network is launch-bound, and a stall per batch drains the GPU's queue."""
        real = self.module.train_net
        drawn: list[bool] = []

        def train_net(build, batch, n, **kw):
            rng = np.random.default_rng(0)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                tensors = batch(rng.permutation(n)[:4], rng)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            drawn.append(all(t.device.type == "cuda" for t in tensors))
            return real(build, batch, n, **kw)

        monkeypatch.setattr(self.module, "train_net", train_net)
        self.make(device="cuda").fit(self.data())
        assert drawn == [True]

    @needs_cuda
    def test_cuda_matches_cpu(self, spy):
        cpu = self.make(precision="fp32").fit(self.data())
        e_cpu = cpu.embed(self.data())
        # the CPU-trained network on the GPU: fp32 within 1e-3 cosine, bf16 within 1e-2
        cpu.model_.to("cuda:0")
        cpu.device_ = "cuda:0"
        assert cosines(e_cpu, cpu.embed(self.data())).min() > 0.999
        cpu.precision = "bf16"
        assert cosines(e_cpu, cpu.embed(self.data())).min() > 0.99
        # trained on the GPU: tensors staged there, batches indexed there, a working recognizer
        train, gallery, probes = self.cuda_data()
        top1 = {}
        for dev in ("cpu", "cuda"):
            rec = self.make(device=dev, **self.cuda_params).fit(train).enroll(gallery)
            top1[dev] = float(np.mean(rec.score(probes).predict() == probes.subjects))
            assert rec.device_.split(":")[0] == dev
        assert all(t.device.type == "cuda" for _, *tensors in spy[-1] for t in tensors)
        assert top1["cuda"] > self.cuda_top1 and abs(top1["cuda"] - top1["cpu"]) < 0.25, top1


def re_escape(text: str) -> str:
    import re

    return re.escape(text)
