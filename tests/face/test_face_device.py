"""The face networks on a device (issue 15): face.fantomas (and its conv-only ablation), face.arcface and
face.perceptual_similarity train through bioanon.nettrain.train_net on ``device`` with ``precision`` autocast,
start from the user's ``weights`` (checked before any work), keep trained weights in the weight cache, and offer
the ``fast`` / ``paper`` presets. CPU tests run everywhere; the CUDA comparisons are skipped without a GPU.

Tolerances: bf16 autocast vs fp32 — embeddings cosine > 0.99, de-anonymized images within 3 grey levels on
average; CUDA vs CPU (fp32; cuDNN may use TF32) — the same fitted network gives images within 1 grey level on
average and embeddings with cosine > 0.999; the first epoch's training loss agrees within 5 %.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import bioanon
from bioanon.device import DeviceError, using_device
from bioanon.errors import ParameterError

torch = pytest.importorskip("torch")

from bioanon.cache import Cache  # noqa: E402
from bioanon.nettrain import WeightsError, using_weight_cache  # noqa: E402
from bioanon_face import arcface as arcface_module  # noqa: E402
from bioanon_face import fantomas as fantomas_module  # noqa: E402
from bioanon_face import perceptual as perceptual_module  # noqa: E402
from bioanon_face.arcface import ArcFace  # noqa: E402
from bioanon_face.fantomas import Fantomas, FantomasConv, ssim  # noqa: E402
from bioanon_face.perceptual import PerceptualSimilarity  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error on a machine without CUDA")

FANTOMAS = dict(features=2, resolution=(16, 16), epochs=2, batch_size=8, lr=1e-4, warmup=0, restarts=0, threads=1)
ARCFACE = dict(size=16, width=4, embedding_dim=8, epochs=2, batch_size=8, threads=1)
PERCEPTUAL = dict(size=16, width=2, epochs=2, batch_size=8, threads=1)


@pytest.fixture(scope="module")
def faces():
    """(clear, block-permuted) tiny grey synthetic faces (12 subjects × 3)."""
    t = bioanon.load_dataset("face.synthetic", n_subjects=12, samples_per_subject=3, size=(16, 16), channels=1, seed=5)
    return t, bioanon.get_method("face.block_permutation", block_size=4, key=1).transform(t)


@pytest.fixture(scope="module")
def colour():
    return bioanon.load_dataset("face.synthetic", n_subjects=6, samples_per_subject=4, size=(16, 16), seed=3)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# ------------------------------------------------------------------------------------------------------ SSIM


def test_ssim_follows_the_inputs_dtype_and_stays_float32_for_half_inputs():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(2, 3, 20, 18, generator=g, dtype=torch.float64)
    b = (a + 0.1 * torch.randn(a.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    ref = ssim(a, b)
    assert ref.dtype == torch.float64
    assert ssim(a.float(), b.float()).dtype == torch.float32
    assert torch.allclose(ssim(a.float(), b.float()).double(), ref, atol=1e-5)
    assert torch.allclose(ssim(a.float(), b).double(), ref, atol=1e-5)  # mixed dtypes are promoted
    half = ssim(a.bfloat16(), b.bfloat16())  # a network's output under autocast
    assert half.dtype == torch.float32
    assert torch.allclose(half, ssim(a.bfloat16().float(), b.bfloat16().float()), atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast does not reach inside
        inside = ssim(a.float(), b.float())
    assert inside.dtype == torch.float32 and torch.allclose(inside.double(), ref, atol=1e-5)


@needs_cuda
def test_ssim_on_a_cuda_tensor_matches_the_cpu():
    g = torch.Generator().manual_seed(1)
    a = torch.rand(2, 1, 24, 24, generator=g, dtype=torch.float64)
    b = torch.rand(2, 1, 24, 24, generator=g, dtype=torch.float64)
    on_gpu = ssim(a.cuda(), b.cuda())
    assert on_gpu.device.type == "cuda"
    assert torch.allclose(on_gpu.cpu(), ssim(a, b), atol=1e-10)
    assert torch.allclose(ssim(a.float().cuda(), b.float().cuda()).cpu().double(), ssim(a, b), atol=1e-5)


# -------------------------------------------------------------------------------------------------- Fantômas


def test_fantomas_trains_on_the_run_device_with_the_papers_schedule(faces):
    clear, anon = faces
    with using_device("cpu"):
        m = Fantomas(**FANTOMAS).fit(clear, anon)
    assert m.device_ == "cpu" and next(m.model_.parameters()).device.type == "cpu"
    assert len(m.history_) == 2 and {"train_loss", "val_loss", "lr"} <= set(m.history_[0])
    assert m.history_[0]["lr"] == 1e-4 and 1 <= m.best_epoch_ <= 2
    out = m.transform(anon).payload("image")
    assert out.shape == anon.payload("image").shape and out.dtype == np.uint8


@no_cuda
def test_a_missing_cuda_device_fails_before_training(faces):
    clear, anon = faces
    with pytest.raises(DeviceError, match=r"face\.fantomas: device 'cuda'"):
        Fantomas(device="cuda", **FANTOMAS).fit(clear, anon)


def test_fantomas_bf16_autocast_stays_close_to_fp32(faces):
    clear, anon = faces
    lively = {**FANTOMAS, "features": 4, "lr": 1e-2, "epochs": 3}  # (2 epochs at 1e-4 still output black)
    m = Fantomas(device="cpu", precision="fp32", **lively).fit(clear, anon)
    fp32 = m.transform(anon).payload("image").astype(np.float64)
    assert fp32.std() > 5.0
    m.precision = "bf16"  # the same fitted network, inferred under bf16 autocast
    bf16 = m.transform(anon).payload("image").astype(np.float64)
    assert np.mean(np.abs(fp32 - bf16)) < 3.0
    assert _cosines(fp32, bf16).min() > 0.99
    trained = Fantomas(device="cpu", precision="bf16", **FANTOMAS).fit(clear, anon)  # trains under autocast
    assert all(np.isfinite(r["train_loss"]) and np.isfinite(r["val_loss"]) for r in trained.history_)


def test_fantomas_weights_round_trip_and_a_mismatch_names_the_layer(faces, tmp_path):
    clear, anon = faces
    a = Fantomas(**FANTOMAS).fit(clear, anon)
    path = tmp_path / "fantomas_state.pt"
    torch.save(a.model_.state_dict(), path)
    b = Fantomas(weights=str(path), **{**FANTOMAS, "epochs": 1, "lr": 1e-12})
    assert b.preflight(clear) == []
    b.fit(clear, anon)  # starts from a's weights: with a vanishing learning rate it keeps them
    for (name, pa), pb in zip(a.model_.state_dict().items(), b.model_.state_dict().values(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-6), name
    wrong = Fantomas(weights=str(path), **{**FANTOMAS, "features": 3})
    problems = wrong.preflight(clear)
    assert (
        len(problems) == 1 and "encoder.0.weight: (2, 1, 3, 3) in the file, (3, 1, 3, 3) in the network" in problems[0]
    ), problems
    with pytest.raises(WeightsError, match=r"face\.fantomas: weights .*encoder\.0\.weight: \(2, 1, 3, 3\)"):
        wrong.fit(clear, anon)
    assert "no such file" in Fantomas(weights=str(tmp_path / "none.pt"), **FANTOMAS).preflight(clear)[0]
    a.save_checkpoint(tmp_path / "checkpoint.pt")  # a save_checkpoint file holds the state dict too
    assert Fantomas(weights=str(tmp_path / "checkpoint.pt"), **FANTOMAS).preflight(clear) == []


def test_fantomas_checkpoint_loads_onto_a_device(faces, tmp_path):
    clear, anon = faces
    m = Fantomas(**FANTOMAS).fit(clear, anon)
    m.save_checkpoint(tmp_path / "f.pt")
    loaded = Fantomas.load_checkpoint(tmp_path / "f.pt", device="cpu")
    assert loaded.device_ == "cpu" and loaded.device == "cpu"
    assert np.array_equal(loaded.transform(anon).payload("image"), m.transform(anon).payload("image"))


def test_fantomas_linear_layer_cap_names_the_parameters(faces):
    clear, anon = faces
    big = Fantomas(preset="paper", features=5)  # 224×224 with F = 5: 246 M weights > 200 M
    line = big.preflight(clear)
    assert len(line) == 1 and "'features' or 'resolution'" in line[0] and "features=5" in line[0]
    with pytest.raises(
        ParameterError,
        match=r"parameter 'features' = 5.*lower the parameter 'features' or "
        r"'resolution'",
    ):
        big.fit(clear, anon)
    assert Fantomas(preset="paper").preflight(clear) == []  # F = 4 at 224×224 fits the cap
    assert FantomasConv(preset="paper", features=64).preflight(clear) == []  # no linear layer, no cap


def test_fantomas_trains_once_per_data_in_the_weight_cache(faces, tmp_path, monkeypatch):
    clear, anon = faces
    calls = []
    real = fantomas_module.ssim_loss
    monkeypatch.setattr(fantomas_module, "ssim_loss", lambda o, t: calls.append(1) or real(o, t))
    with using_weight_cache(Cache(tmp_path / "cache")):
        first = Fantomas(**FANTOMAS).fit(clear, anon)
        trained_calls = len(calls)
        assert trained_calls > 0
        second = Fantomas(**FANTOMAS).fit(clear, anon)
        assert len(calls) == trained_calls  # loaded from the cache: no loss was computed
        assert second.history_ == first.history_ and second.best_epoch_ == first.best_epoch_
        assert np.array_equal(second.transform(anon).payload("image"), first.transform(anon).payload("image"))
        Fantomas(**{**FANTOMAS, "seed": 1}).fit(clear, anon)  # another network: trained
        assert len(calls) > trained_calls


def test_fantomas_presets_and_describe():
    d = Fantomas.describe()["presets"]
    assert d["fast"]["resolution"] == (64, 64) and d["paper"]["resolution"] == (224, 224)
    assert d["paper"]["features"] == 4 and d["paper"]["lr"] == 1e-4 and d["paper"]["batch_size"] == 64
    assert FantomasConv.describe()["presets"] == d
    m = Fantomas(preset="paper", features=2)  # an explicit value wins over the preset
    assert m.features == 2 and m.resolution == (224, 224) and m.epochs == 200
    assert m.with_params(preset="fast").resolution == (64, 64)
    assert Fantomas().resolution == (64, 64) and Fantomas().features == 16
    assert not FantomasConv(preset="paper").linear_layer
    doc = Fantomas.__doc__
    assert "§7.5" in doc and "224×224" in doc and "F = 4" in doc


# ---------------------------------------------------------------------------------------------------- ArcFace


def test_arcface_cpu_and_bf16_embeddings_stay_close(colour):
    m = ArcFace(device="cpu", precision="fp32", **ARCFACE).fit(colour)
    assert m.device_ == "cpu"
    fp32 = m.embed(colour)
    m.precision = "bf16"
    assert _cosines(fp32, m.embed(colour)).min() > 0.99
    trained = ArcFace(device="cpu", precision="bf16", **ARCFACE).fit(colour)
    assert all(np.isfinite(r["train_loss"]) for r in trained.history_)


def test_arcface_timm_checkpoint_freeze_and_mismatch(colour, tmp_path):
    timm = pytest.importorskip("timm")
    net = timm.create_model("resnet18", pretrained=False, num_classes=7, channels=(4, 8, 16, 32), stem_width=4)
    path = tmp_path / "timm_checkpoint.pth"
    torch.save({"epoch": 3, "arch": "resnet18", "state_dict": net.state_dict()}, path)  # a timm train.py file
    frozen = ArcFace(weights=str(path), freeze=True, **ARCFACE)
    assert frozen.preflight(colour) == []
    frozen.fit(colour)
    got = frozen.model_.backbone.state_dict()
    for name, value in net.state_dict().items():
        if not name.startswith("fc."):  # the classifier is not part of the backbone
            assert torch.equal(got[name].cpu(), value), name  # loaded, and kept fixed (BN statistics too)
    assert not any(p.requires_grad for p in frozen.model_.backbone.parameters())
    assert all(p.requires_grad for p in frozen.model_.neck.parameters())  # the embedding layer trains
    tuned = ArcFace(weights=str(path), **ARCFACE).fit(colour)  # fine-tuned: the backbone moves
    assert not torch.equal(tuned.model_.backbone.conv1.weight.detach().cpu(), net.conv1.weight)

    wrong = ArcFace(weights=str(path), **{**ARCFACE, "width": 8})
    problems = wrong.preflight(colour)
    assert (
        len(problems) == 1
        and "layer backbone.layer1.0.conv1.weight: (4, 64, 3, 3) in the file, (8, 64, 3, 3) in the network"
        in problems[0]
    ), problems
    with pytest.raises(WeightsError, match=r"face\.arcface: weights .*backbone\.layer1\.0\.conv1\.weight"):
        wrong.fit(colour)


def test_arcface_whole_network_state_dict_round_trip(colour, tmp_path):
    a = ArcFace(**ARCFACE).fit(colour)
    path = tmp_path / "arcface.pt"
    torch.save(a.model_.state_dict(), path)  # backbone, neck and a 6-class head
    b = ArcFace(weights=str(path), **{**ARCFACE, "epochs": 1, "lr": 1e-12, "dropout": 0.0})
    assert b.preflight(colour) == []
    half = colour.take(np.arange(0, len(colour), 2))  # other classes: the head is not loaded
    b.fit(half)
    sb = b.model_.state_dict()
    for name, value in a.model_.state_dict().items():
        if name.startswith("backbone.") and not name.endswith(("running_mean", "running_var", "num_batches_tracked")):
            assert torch.allclose(sb[name], value, atol=1e-6), name


def test_arcface_trains_once_in_the_weight_cache(colour, tmp_path, monkeypatch):
    calls = []
    real = arcface_module.augment
    monkeypatch.setattr(arcface_module, "augment", lambda *a, **k: calls.append(1) or real(*a, **k))
    with using_weight_cache(Cache(tmp_path / "cache")):
        first = ArcFace(**ARCFACE).fit(colour)
        n = len(calls)
        assert n > 0
        second = ArcFace(**ARCFACE).fit(colour)
        assert len(calls) == n and second.history_ == first.history_
        np.testing.assert_array_equal(second.embed(colour), first.embed(colour))


def test_arcface_presets_and_describe():
    d = ArcFace.describe()["presets"]
    paper = d["paper"]
    assert paper["size"] == 112 and paper["embedding_dim"] == 512 and paper["backbone"] == "resnet50"
    assert paper["width"] == 0 and paper["margin"] == 0.5 and paper["scale"] == 64.0
    assert paper["optimizer"] == "sgd" and paper["lr"] == 0.1 and paper["momentum"] == 0.9
    assert paper["weight_decay"] == 5e-4 and paper["batch_size"] == 512
    assert paper["scheduler"] == "multistep" and paper["milestones"] == (0.625, 0.875)
    assert d["fast"]["size"] == 64 and ArcFace().size == 64
    m = ArcFace(preset="paper", size=96)  # an explicit value (other than the default) wins over the preset
    assert m.size == 96 and m.backbone == "resnet50" and m.optimizer == "sgd"
    assert "Deng et al." in ArcFace.__doc__ and "§5.5" in ArcFace.__doc__


# ------------------------------------------------------------------------------------------------- perceptual


def test_perceptual_similarity_device_precision_and_cache(colour, tmp_path, monkeypatch):
    anon = bioanon.get_method("face.gaussian_blur", kernel=5).transform(colour)
    m = PerceptualSimilarity(device="cpu", precision="fp32", **PERCEPTUAL).fit(colour)
    assert m.device_ == "cpu"
    fp32 = m.measure(colour, anon)
    m.precision = "bf16"
    assert np.max(np.abs(m.measure(colour, anon) - fp32)) < 0.02
    calls = []
    real = perceptual_module.augment
    monkeypatch.setattr(perceptual_module, "augment", lambda *a, **k: calls.append(1) or real(*a, **k))
    with using_weight_cache(Cache(tmp_path / "cache")):
        first = PerceptualSimilarity(**PERCEPTUAL).fit(colour)
        n = len(calls)
        second = PerceptualSimilarity(**PERCEPTUAL).fit(colour)
        assert n > 0 and len(calls) == n and second.history_ == first.history_


# -------------------------------------------------------------------------------------------------- preflight


def test_preflight_reports_missing_torch(colour, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    for m in (Fantomas(), ArcFace(), PerceptualSimilarity()):
        lines = m.preflight(colour)
        assert any("needs torch, which is not installed" in line for line in lines), (m.id, lines)


# ------------------------------------------------------------------------------------------------------- CUDA


@needs_cuda
def test_fantomas_on_cuda_matches_the_cpu(faces):
    clear, anon = faces
    lively = {**FANTOMAS, "features": 4, "lr": 1e-2, "epochs": 3}
    cpu = Fantomas(device="cpu", precision="fp32", **lively).fit(clear, anon)
    gpu = Fantomas(device="cuda", precision="fp32", **lively).fit(clear, anon)
    assert gpu.device_.startswith("cuda") and next(gpu.model_.parameters()).is_cuda
    first_cpu, first_gpu = cpu.history_[0]["train_loss"], gpu.history_[0]["train_loss"]
    assert abs(first_gpu - first_cpu) <= 0.05 * abs(first_cpu), (first_cpu, first_gpu)
    cpu_out = cpu.transform(anon).payload("image").astype(np.float64)
    cpu.model_, cpu.device_ = cpu.model_.to(gpu.device_), gpu.device_  # the same network, inferred on the GPU
    assert np.mean(np.abs(cpu.transform(anon).payload("image") - cpu_out)) < 1.0
    auto = Fantomas(device="cuda", **FANTOMAS).fit(clear, anon)  # auto precision: bf16 (or fp16) autocast
    assert all(np.isfinite(r["train_loss"]) for r in auto.history_)


@needs_cuda
def test_arcface_on_cuda_matches_the_cpu(colour):
    # no dropout: its masks come from each device's own generator (on an H100 the first epoch's loss was 7.7 %
    # apart with dropout 0.2); initialization, batch order and augmentation are drawn on the host, so the same
    cpu = ArcFace(device="cpu", precision="fp32", **ARCFACE, dropout=0.0).fit(colour)
    gpu = ArcFace(device="cuda", precision="fp32", **ARCFACE, dropout=0.0).fit(colour)
    assert gpu.device_.startswith("cuda")
    first_cpu, first_gpu = cpu.history_[0]["train_loss"], gpu.history_[0]["train_loss"]
    assert abs(first_gpu - first_cpu) <= 0.05 * abs(first_cpu), (first_cpu, first_gpu)
    e_cpu = cpu.embed(colour)
    cpu.model_, cpu.device_ = cpu.model_.to(gpu.device_), gpu.device_
    assert _cosines(e_cpu, cpu.embed(colour)).min() > 0.999
    cpu.precision = "bf16"
    assert _cosines(e_cpu, cpu.embed(colour)).min() > 0.99


@needs_cuda
def test_perceptual_similarity_on_cuda_matches_the_cpu(colour):
    anon = bioanon.get_method("face.gaussian_blur", kernel=5).transform(colour)
    m = PerceptualSimilarity(device="cpu", precision="fp32", **PERCEPTUAL).fit(colour)
    cpu = m.measure(colour, anon)
    m.model_, m.device_ = m.model_.to("cuda"), "cuda:0"
    assert np.max(np.abs(m.measure(colour, anon) - cpu)) < 1e-3
    gpu = PerceptualSimilarity(device="cuda", **PERCEPTUAL).fit(colour)
    assert np.all(np.isfinite(gpu.measure(colour, anon)))
