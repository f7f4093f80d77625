"""Device selection (bioanon.device), the trainer on a device with autocast, frozen parts, the trained-weight
cache, the user's weights files, presets, and how the device enters cache keys."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pytest

from bioanon import Method, param
from bioanon.device import (
    DeviceError,
    autocast,
    check_device_text,
    default_device,
    device_kind,
    resolve_device,
    resolve_precision,
    using_device,
)
from bioanon.errors import ParameterError

torch = pytest.importorskip("torch")

from torchcontract import blobs as _blobs  # noqa: E402

from bioanon.cache import Cache  # noqa: E402
from bioanon.nettrain import (  # noqa: E402
    WeightsError,
    batch_rows,
    check_weights,
    infer,
    load_weights,
    read_state_dict,
    softmax_head,
    take_rows,
    train_net,
    training_key,
    using_weight_cache,
)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error on a machine without CUDA")


# --------------------------------------------------------------------------------------------------- devices


def test_device_texts():
    for ok in ("", "auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"):
        assert check_device_text(ok)
    for bad in ("gpu", "CUDA", "cuda:", "cuda:x", "tpu", None, 0):
        assert not check_device_text(bad)
    with pytest.raises(DeviceError, match="'gpu' is not one of"):
        resolve_device("gpu", who="my.method")


def test_importing_device_does_not_import_torch():
    code = "import sys, bioanon.device; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_cpu_and_auto_resolve_here():
    assert resolve_device("cpu") == "cpu"
    auto = resolve_device("auto")
    assert auto == (f"cuda:{torch.cuda.current_device()}" if CUDA else auto)
    assert auto in ("cpu", "mps") or auto.startswith("cuda:")
    assert device_kind("cuda:3") == "cuda" and device_kind("cpu") == "cpu"


@no_cuda
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(DeviceError, match=r"face\.arcface: device 'cuda'.*CUDA is not available.*device='cpu'"):
        resolve_device("cuda", who="face.arcface")
    with pytest.raises(DeviceError, match="cuda:1"):
        resolve_device("cuda:1")


@needs_cuda
def test_cuda_index_out_of_range():
    with pytest.raises(DeviceError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


def test_run_device_order(monkeypatch):
    monkeypatch.delenv("BIOANON_DEVICE", raising=False)
    assert default_device() == "auto"
    monkeypatch.setenv("BIOANON_DEVICE", "cpu")
    assert default_device() == "cpu"
    with using_device("mps"):  # the run's setting beats the environment
        assert default_device() == "mps"
        with using_device(None):  # unset: unchanged
            assert default_device() == "mps"
    assert default_device() == "cpu"
    monkeypatch.setenv("BIOANON_DEVICE", "gpu")
    with pytest.raises(DeviceError, match="BIOANON_DEVICE='gpu'"):
        default_device()
    with pytest.raises(DeviceError):
        with using_device("gpu"):
            pass


def test_precision():
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    with pytest.raises(DeviceError):
        resolve_precision("fp8", "cpu")
    if CUDA:
        assert resolve_precision("auto", "cuda:0") in ("bf16", "fp16")


# --------------------------------------------------------------------------------------------------- trainer


def _net(d: int = 8, classes: int = 4):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 8))
            self.head = softmax_head(8, classes)

        def embed(self, x):
            return self.backbone(x)

        def loss(self, x, y):
            return self.head.loss(self.backbone(x), y)

    return Net()


def _train(x, y, calls=None, **kw):
    params = dict(epochs=12, batch_size=32, lr=1e-2, seed=0, threads=1)
    params.update(kw)
    classes = int(y.max()) + 1

    def batch(idx, rng):
        if calls is not None:
            calls.append(len(idx))
        return x[idx], y[idx]

    return train_net(lambda: _net(x.shape[1], classes), batch, len(x), **params)


def test_bf16_autocast_trains_and_infers_close_to_fp32():
    x, y = _blobs()
    fp32 = _train(x, y, device="cpu", precision="fp32")
    bf16 = _train(x, y, device="cpu", precision="bf16")
    assert bf16.losses[-1] < 0.5 * bf16.losses[0]
    e32 = infer(fp32.net.embed, x.numpy(), out_shape=(8,), precision="fp32")
    e16 = infer(fp32.net.embed, x.numpy(), out_shape=(8,), precision="bf16")
    assert e16.dtype == np.float32
    cos = (e32 * e16).sum(1) / np.linalg.norm(e32, axis=1) / np.linalg.norm(e16, axis=1)
    assert cos.min() > 0.99


def test_sgd_and_multistep():
    x, y = _blobs()
    t = _train(x, y, optimizer="sgd", lr=0.1, scheduler="multistep", milestones=(0.5, 0.75), epochs=8)
    assert [r["lr"] for r in t.history][:1] == [0.1]
    assert t.history[4]["lr"] == pytest.approx(0.01) and t.history[6]["lr"] == pytest.approx(0.001)
    assert t.losses[-1] < t.losses[0]


def test_freeze_keeps_the_backbone():
    x, y = _blobs()
    torch.manual_seed(0)
    start = _net().state_dict()
    trained = _train(x, y, init=lambda net: net.load_state_dict(start), freeze="backbone", epochs=3)
    after = trained.net.state_dict()
    for k in start:
        if k.startswith("backbone."):
            assert torch.equal(after[k], start[k]), k
    assert any(not torch.equal(after[k], start[k]) for k in start if k.startswith("head."))
    with pytest.raises(ParameterError, match="parameter 'freeze' = 'trunk'"):
        _train(x, y, freeze="trunk", epochs=1)


def test_weight_cache_reuses_training_across_calls(tmp_path):
    x, y = _blobs()
    cache = Cache(tmp_path / "cache")
    first, again = [], []
    with using_weight_cache(cache):
        a = _train(x, y, calls=first, store_key="ab" * 16)
        b = _train(x, y, calls=again, store_key="ab" * 16)
    assert first and not again  # the second call trained nothing
    assert b.history == a.history and b.best_epoch == a.best_epoch
    assert b.attempts == a.attempts and [t["epochs"] for t in b.attempts] == [len(a.history)]
    np.testing.assert_array_equal(
        infer(a.net.embed, x.numpy(), out_shape=(8,)), infer(b.net.embed, x.numpy(), out_shape=(8,))
    )
    assert cache.info().n_blobs == 1
    # without an active cache (or without a key) nothing is kept or reused
    again.clear()
    _train(x, y, calls=again, store_key="ab" * 16)
    assert again


def test_unreadable_trained_weights_are_retrained(tmp_path):
    x, y = _blobs()
    cache = Cache(tmp_path / "cache")
    key = "cd" * 16
    cache.put_blob(key, b"not a torch file")
    calls = []
    with using_weight_cache(cache), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train(x, y, calls=calls, store_key=key, epochs=2)
    assert calls and any("unreadable" in str(w.message) for w in caught)


def test_weight_cache_off_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOANON_WEIGHT_CACHE", "0")
    x, y = _blobs()
    cache = Cache(tmp_path / "cache")
    with using_weight_cache(cache):
        _train(x, y, store_key="ef" * 16, epochs=1)
    assert cache.info().n_blobs == 0


def test_training_key_covers_method_data_label_and_weights_file(tmp_path):
    @attrs.define(kw_only=True)
    class Net(Method):
        id: ClassVar[str] = "test.net"
        kind: ClassVar[str] = "recognizer"
        lr: float = param(0.1, help="lr")
        weights: str = param("", help="file")

    x = np.arange(12.0).reshape(3, 4)
    base = training_key(Net(), x, label="subject")
    assert training_key(Net(), x, label="subject") == base
    assert training_key(Net(lr=0.2), x, label="subject") != base
    assert training_key(Net(), x + 1, label="subject") != base
    assert training_key(Net(), x, label="sex") != base
    w = tmp_path / "w.pt"
    w.write_bytes(b"1")
    k1 = training_key(Net(weights=str(w)), x, label="subject")
    w.write_bytes(b"22")
    assert training_key(Net(weights=str(w)), x, label="subject") != k1  # same path, other content


# --------------------------------------------------------------------------------------------------- weights


def test_load_weights_full_and_backbone_checkpoints(tmp_path):
    torch.manual_seed(1)
    src = _net()
    full = tmp_path / "full.pt"
    torch.save(src.state_dict(), full)
    dst = _net()
    loaded = load_weights(dst, str(full), who="my.method")
    assert loaded and all(not k.startswith("head.") for k in loaded)
    assert torch.equal(dst.backbone[0].weight, src.backbone[0].weight)
    # a backbone-only checkpoint (as timm saves one), wrapped as a training checkpoint, with a classifier
    bb = {k: v for k, v in src.backbone.state_dict().items()} | {"fc.weight": torch.zeros(1000, 8)}
    wrapped = tmp_path / "bb.pth"
    torch.save({"state_dict": {"module." + k: v for k, v in bb.items()}, "epoch": 3}, wrapped)
    dst2 = _net()
    load_weights(dst2, str(wrapped), who="my.method")
    assert torch.equal(dst2.backbone[2].bias, src.backbone[2].bias)


def test_weights_that_do_not_fit_name_the_layer(tmp_path):
    other = tmp_path / "other.pt"
    torch.save(_net(d=5).state_dict(), other)
    with pytest.raises(
        WeightsError,
        match=r"my\.method: weights .*other\.pt.* layer backbone\.0\.weight: "
        r"\(16, 5\) in the file, \(16, 8\) in the network",
    ):
        load_weights(_net(d=8), str(other), who="my.method")
    problems = check_weights(lambda: _net(d=8), str(other), who="my.method")
    assert len(problems) == 1 and "backbone.0.weight" in problems[0]
    assert check_weights(lambda: _net(d=5), str(other), who="my.method") == []
    partial = tmp_path / "partial.pt"
    torch.save({k: v for k, v in _net().state_dict().items() if not k.startswith("backbone.2")}, partial)
    with pytest.raises(WeightsError, match="has no layer backbone.2.weight"):
        load_weights(_net(), str(partial))
    unrelated = tmp_path / "unrelated.pt"
    torch.save({"encoder.w": torch.zeros(3)}, unrelated)
    with pytest.raises(WeightsError, match="matches a layer"):
        load_weights(_net(), str(unrelated))


def test_weights_files_are_read_safely(tmp_path):
    with pytest.raises(WeightsError, match="no such file"):
        read_state_dict(str(tmp_path / "missing.pt"), who="m")

    class Evil:
        def __reduce__(self):
            return (print, ("code ran",))

    evil = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, evil)
    with pytest.raises(WeightsError, match="weights_only=True"):
        read_state_dict(str(evil), who="m")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00\x01 not torch")
    with pytest.raises(WeightsError, match="not a torch weights file"):
        read_state_dict(str(junk), who="m")
    empty = tmp_path / "empty.pt"
    torch.save({"epoch": 1}, empty)
    with pytest.raises(WeightsError, match="no state dict"):
        read_state_dict(str(empty), who="m")


# --------------------------------------------------------------------------------------------------- autocast


def test_autocast_fp32_is_a_no_op():
    with autocast(torch, "cpu", "fp32"):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(torch, "cpu", "bf16"):
        assert torch.is_autocast_enabled("cpu")


@needs_cuda
def test_training_on_cuda_matches_cpu_within_tolerance():
    x, y = _blobs()
    cpu = _train(x, y, device="cpu", precision="fp32")
    gpu = _train(x, y, device="cuda", precision="fp32")
    assert next(gpu.net.parameters()).device.type == "cuda"
    assert gpu.losses[-1] == pytest.approx(cpu.losses[-1], rel=0.05, abs=0.02)
    e_cpu = infer(cpu.net.embed, x.numpy(), out_shape=(8,))
    e_gpu = infer(gpu.net.embed, x.numpy(), out_shape=(8,), device="cuda")
    cos = (e_cpu * e_gpu).sum(1) / np.linalg.norm(e_cpu, axis=1) / np.linalg.norm(e_gpu, axis=1)
    assert np.median(cos) > 0.98


def test_cuda_graphs_are_ignored_on_the_cpu():
    x, y = _blobs()
    eager = _train(x, y, device="cpu", epochs=3)
    graphs = _train(x, y, device="cpu", epochs=3, cuda_graphs=True)
    assert graphs.losses == eager.losses
    for a, b in zip(eager.net.parameters(), graphs.net.parameters(), strict=True):
        assert torch.equal(a, b)


def _bn_net():
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))

        def loss(self, x, y):
            return nn.functional.cross_entropy(self.body(x)[:, :4], y)

    return Net()


def test_graphed_loss_keeps_batch_norm_statistics_and_one_graph_per_shape(monkeypatch):
    """The capture's warm-up passes (here a stand-in for ``make_graphed_callables`` that runs them on the CPU)
    would move the batch-norm running statistics: they are restored. Each shape is captured once."""
    from bioanon.nettrain import GraphedLoss

    made = []

    def fake_make_graphed(module, sample_args, num_warmup_iters):
        for _ in range(num_warmup_iters):
            module(*sample_args)
        made.append(tuple(t.shape for t in sample_args))
        return module

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", fake_make_graphed)
    net = _bn_net().train()
    x, y = _blobs(40)
    graphed = GraphedLoss(torch, net, lambda m, *t: m.loss(*t), "test.m")
    before = [b.clone() for b in net.buffers()]
    graphed(x[:16], y[:16])
    after_one = [b.clone() for b in net.buffers()]
    reference = _bn_net().train()
    reference.load_state_dict({k: v for k, v in net.state_dict().items()})
    for b, saved in zip(reference.buffers(), before, strict=True):
        b.copy_(saved)
    reference.loss(x[:16], y[:16])  # one eager pass from the statistics before the capture
    for a, b in zip(after_one, reference.buffers(), strict=True):
        assert torch.allclose(a, b)
    graphed(x[16:32], y[16:32])
    graphed(x[32:], y[32:])
    assert made == [(torch.Size([16, 8]), torch.Size([16])), (torch.Size([8, 8]), torch.Size([8]))]


def test_a_failed_graph_capture_trains_eagerly_and_says_so_once(monkeypatch, caplog):
    from bioanon.nettrain import GraphedLoss

    calls = []

    def failing(*a, **k):
        calls.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", failing)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    net = _bn_net().train()
    x, y = _blobs(40)
    graphed = GraphedLoss(torch, net, lambda m, *t: m.loss(*t), "test.m")
    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        value = graphed(x[:16], y[:16])
        graphed(x[16:], y[16:])
    assert value.requires_grad and torch.isfinite(value)
    assert len(calls) == 1 and caplog.text.count("CUDA graph capture failed") == 1
    assert "test.m" in caplog.text and "not permitted" in graphed.failed


class _ReplayByRunning:
    """A stand-in for a captured CUDA graph on the CPU: a replay runs the recorded step again, its gradients
    starting from None as in a captured step."""

    def __init__(self, opt, run):
        self.opt, self.run = opt, run

    def replay(self):
        self.opt.zero_grad(set_to_none=True)
        self.run()


def _fake_record(recorded):
    def record(self, run, warmup):
        for _ in range(warmup):  # the warm-up passes really run, and move every state a step moves
            self.opt.zero_grad(set_to_none=True)
            run()
        recorded.append(warmup)
        return _ReplayByRunning(self.opt, run)

    return record


def test_graphed_step_undoes_its_warm_up_and_replays_what_the_eager_step_computes(monkeypatch):
    """The whole-step graph's capture (its graphs here stand-ins that run the step on the CPU) warms up on the
    batch, which moves the weights, Adam's moments, the batch-norm statistics and the loss sum: all are put back,
    so the replayed training equals the eager one bit for bit. One capture per batch shape."""
    import copy

    from bioanon.nettrain import GraphedStep

    recorded = []
    monkeypatch.setattr(GraphedStep, "_record", _fake_record(recorded))
    x, y = _blobs(56)
    torch.manual_seed(0)
    net = _bn_net().train()
    ref = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    stepper = GraphedStep(torch, net, lambda m, *t: m.loss(*t), opt, contextlib.nullcontext, "test.m", "cpu")
    expected_total = 0.0
    for start in (0, 16, 32, 48, 0, 16):  # shapes 16, 16, 16, 8, 16, 16
        xb, yb = x[start : start + 16], y[start : start + 16]
        assert stepper.step([xb, yb], len(xb))
        ref_opt.zero_grad(set_to_none=True)
        value = ref.loss(xb, yb)
        value.backward()
        ref_opt.step()
        expected_total += float(value) * len(xb)
    assert recorded == [3, 1]  # the first shape warms up three times, the next once
    for a, b in zip([*net.parameters(), *net.buffers()], [*ref.parameters(), *ref.buffers()], strict=True):
        assert torch.equal(a, b)
    for p, q in zip(net.parameters(), ref.parameters(), strict=True):
        assert torch.equal(opt.state[p]["exp_avg_sq"], ref_opt.state[q]["exp_avg_sq"])
        assert float(opt.state[p]["step"]) == float(ref_opt.state[q]["step"]) == 6
    assert float(stepper.total) == pytest.approx(expected_total, rel=1e-12)


def test_a_failed_whole_step_capture_restores_the_state_and_steps_eagerly(monkeypatch, caplog):
    from bioanon.nettrain import GraphedStep

    def failing(self, run, warmup):
        run()  # a warm-up pass ran before the capture failed
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(GraphedStep, "_record", failing)
    net = _bn_net().train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    before = [t.clone() for t in [*net.parameters(), *net.buffers()]]
    stepper = GraphedStep(torch, net, lambda m, *t: m.loss(*t), opt, contextlib.nullcontext, "test.m", "cpu")
    x, y = _blobs(40)
    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        assert not stepper.step([x[:16], y[:16]], 16)
        assert not stepper.step([x[16:32], y[16:32]], 16)
    assert caplog.text.count("CUDA graph capture failed") == 1 and "not permitted" in stepper.failed
    for a, b in zip([*net.parameters(), *net.buffers()], before, strict=True):
        assert torch.equal(a, b)
    assert all(float(v.abs().sum()) == 0 for s in opt.state.values() for v in s.values()) and float(stepper.total) == 0


@needs_cuda
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_a_failed_cuda_graph_capture_trains_on_eagerly_with_dropout(optimizer, caplog):
    """A loss that reads a value on the host cannot be captured: the training says so once and goes on eagerly
    to the end, dropout included (a failed capture must not leave the device's random generator in capture
    mode, where every later dropout fails)."""
    x, y = _blobs()
    classes = int(y.max()) + 1
    nn = torch.nn

    class SyncingNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(x.shape[1], 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, classes))

        def loss(self, xb, yb):
            logits = self.body(xb)
            if float(logits.abs().max()) > 1e6:  # a host read: not allowed while a stream is captured
                logits = logits / 2
            return nn.functional.cross_entropy(logits, yb)

    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        trained = train_net(
            SyncingNet, lambda idx, rng: (x[idx], y[idx]), len(x), epochs=4, batch_size=32, lr=1e-2,
            optimizer=optimizer, device="cuda", precision="fp32", cuda_graphs=True,
        )  # fmt: skip
    assert caplog.text.count("CUDA graph capture failed") == 1, caplog.text
    assert "could not reset" not in caplog.text
    assert len(trained.history) == 4 and all(np.isfinite(trained.losses))
    # the device's generator draws again outside any capture
    assert torch.nn.functional.dropout(torch.ones(64, device="cuda"), 0.5).sum() > 0


@needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_cuda_graph_training_matches_eager_training(precision, optimizer, caplog, monkeypatch):
    """Without dropout the graphed steps compute what the eager ones do: the same losses and weights (up to the
    kernels' own rounding), no fallback. Adam trains in whole-step graphs, one for the full batches (the last,
    smaller one runs eagerly); SGD graphs its loss, one graph per batch shape. The warm-up fills the
    whole-step graphs' tensor learning rate in place."""
    import bioanon.nettrain as nettrain

    kind = nettrain.GraphedStep if optimizer == "adam" else nettrain.GraphedLoss
    captured = []
    real = kind._capture
    monkeypatch.setattr(kind, "_capture", lambda self, *a: captured.append(a[0]) or real(self, *a))
    x, y = _blobs()
    common = dict(device="cuda", precision=precision, epochs=4, warmup=2, optimizer=optimizer)
    eager = _train(x, y, **common)
    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        graphs = _train(x, y, cuda_graphs=True, **common)
    assert "capture failed" not in caplog.text
    assert len(captured) == len(set(captured)) == (1 if optimizer == "adam" or not len(x) % 32 else 2)
    assert [r["lr"] for r in graphs.history] == pytest.approx([r["lr"] for r in eager.history])
    assert graphs.losses[-1] < 0.8 * graphs.losses[0]  # it learns (SGD more slowly than Adam)
    assert graphs.losses == pytest.approx(eager.losses, rel=2e-2, abs=1e-3)
    for a, b in zip(eager.net.parameters(), graphs.net.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=2e-2, atol=2e-3)


def test_batch_rows_index_like_numpy_on_the_cpu():
    x = torch.arange(20.0).reshape(10, 2)
    idx = np.array([7, 2, 2, 9])
    rows = batch_rows(idx, x)
    assert rows.dtype == torch.int64 and rows.device.type == "cpu"
    assert torch.equal(x[rows], x[idx])
    assert torch.equal(x[batch_rows(np.array([[1, 3], [0, 0]], dtype=np.int32), x)], x[torch.tensor([[1, 3], [0, 0]])])


def test_take_rows_indexes_every_tensor_with_one_index_per_device(monkeypatch):
    import bioanon.nettrain as nettrain

    x, y = torch.arange(20.0).reshape(10, 2), torch.arange(10) * 3
    idx = np.array([4, 0, 4])
    made = []
    real = nettrain.batch_rows
    monkeypatch.setattr(nettrain, "batch_rows", lambda i, like: made.append(like.device) or real(i, like))
    xb, yb = take_rows(idx, x, y)
    assert torch.equal(xb, x[idx]) and torch.equal(yb, y[idx]) and len(made) == 1


@needs_cuda
def test_take_rows_across_a_gpu_and_pinned_cpu_tensor():
    x, y = torch.arange(20.0).reshape(10, 2).pin_memory(), torch.arange(10, device="cuda") * 3
    idx = np.array([9, 1])
    xb, yb = take_rows(idx, x, y)
    assert xb.device.type == "cpu" and yb.device.type == "cuda"
    assert torch.equal(xb, x[idx]) and torch.equal(yb.cpu(), y.cpu()[idx])


@needs_cuda
def test_batch_rows_on_cuda_do_not_wait_for_the_gpu():
    x = torch.arange(20.0, device="cuda").reshape(10, 2)
    idx = np.array([7, 2, 2, 9])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a synchronizing copy raises
    try:
        picked = x[batch_rows(idx, x)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert picked.device.type == "cuda" and torch.equal(picked.cpu(), x.cpu()[idx])
    torch.cuda.set_sync_debug_mode("error")
    try:  # the check can fail: a numpy index makes torch copy it to the GPU synchronously
        with pytest.raises(RuntimeError, match="synchroniz"):
            x[idx]
    finally:
        torch.cuda.set_sync_debug_mode("default")


# --------------------------------------------------------------------------------------------------- presets


@attrs.define(kw_only=True)
class _Preset(Method):
    id: ClassVar[str] = "test.preset"
    kind: ClassVar[str] = "recognizer"
    presets: ClassVar[dict] = {"fast": {}, "paper": {"size": 224, "lr": 1e-4}}
    preset: str = param("fast", help="settings", choices=("fast", "paper"))
    size: int = param(64, help="input size")
    lr: float = param(1e-3, help="learning rate")
    epochs: int = param(10, help="epochs")


def test_presets_fill_the_defaults_and_explicit_values_win():
    assert (_Preset().size, _Preset().lr) == (64, 1e-3)
    paper = _Preset(preset="paper")
    assert (paper.size, paper.lr, paper.epochs) == (224, 1e-4, 10)
    assert _Preset(preset="paper", size=112).size == 112
    back = paper.with_params(preset="fast")
    assert (back.size, back.lr) == (64, 1e-3)
    assert _Preset().with_params(preset="paper").size == 224
    assert _Preset(preset="paper", size=112).with_params(preset="fast").size == 112  # the user's value stays
    explicit = _Preset(preset="paper", size=64)  # given, though equal to the declared default: it wins
    assert (explicit.size, explicit.lr) == (64, 1e-4)
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(explicit)) == explicit == copy.deepcopy(explicit)
    assert _Preset(preset="paper") == _Preset(preset="paper")  # a copy or unpickling sets nothing
    assert paper.fingerprint() != _Preset().fingerprint()
    assert _Preset.describe()["presets"] == {"fast": {}, "paper": {"size": 224, "lr": 1e-4}}
    with pytest.raises(ParameterError, match="preset"):
        _Preset(preset="slow")


# ---------------------------------------------------------------------------------------- fingerprints & keys


@attrs.define(kw_only=True)
class _OnDevice(Method):
    id: ClassVar[str] = "test.on_device"
    kind: ClassVar[str] = "recognizer"
    lr: float = param(0.1, help="lr")
    threads: int = param(0, help="threads", affects_output=False)
    device: str = param("", help="device", check=check_device_text, affects_output=False)


def test_fingerprint_has_the_device_kind_not_the_index(monkeypatch):
    cpu = _OnDevice(device="cpu")
    assert cpu.fingerprint() == _OnDevice(device="cpu", threads=4).fingerprint()
    assert _OnDevice(device="cuda:0").fingerprint() == _OnDevice(device="cuda:1").fingerprint()
    assert _OnDevice(device="cuda:0").fingerprint() != cpu.fingerprint()
    assert _OnDevice(device="mps").fingerprint() != cpu.fingerprint()
    with using_device("cpu"):
        assert _OnDevice().fingerprint() == cpu.fingerprint()  # '' is the run's device


def test_task_keys_ignore_threads_and_gpu_index_but_not_the_device_kind(monkeypatch):
    from bioanon.evaluation import tasks

    class Registry:
        def create(self, method_id, **params):
            return _OnDevice(**params)

    def key(**params):
        return tasks.task_key(
            "score", {"recognizer": {"id": "test.on_device", "params": params}, "seed": 1}, (), Registry()
        )

    assert key(device="cpu", threads=1) == key(device="cpu", threads=8)
    assert key(device="cuda:0") == key(device="cuda:1")
    assert key(device="cuda:0") != key(device="cpu")
    assert key(device="cpu", lr=0.2) != key(device="cpu")
