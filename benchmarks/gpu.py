"""GPU benchmarks: the same work timed on the CPU and on a CUDA GPU of one machine (issue 15, item 5).

    python -m benchmarks.gpu                 # CPU vs cuda, full sizes (several minutes; needs a CUDA GPU)
    python -m benchmarks.gpu --device cuda:1 # another GPU
    python -m benchmarks.gpu --quick         # tiny sizes on the CPU only (a smoke run of the harness)
    python -m benchmarks.gpu --cases arcface xvector

What is timed, each case on the CPU (every core, unless ``--threads``) and then on the GPU:

* ``gait_eval``: a whole ``bioanon.evaluate`` of ``gait.cnn`` (its default training) on 200 synthetic walkers
  (``gait.synthetic``), naive and parrot attackers against Gaussian joint noise, end to end — data, anonymization,
  training, scoring, metrics — with ``evaluate(cfg, device=...)``;
* ``arcface``: ``face.arcface`` training, 2 epochs (ResNet-18 at its full width, 112×112 px) on 2,000 synthetic
  faces (``face.synthetic``);
* ``fantomas``: ``face.fantomas`` at 224×224 px, 5 epochs on 400 block-permuted synthetic faces;
* ``xvector``: ``voice.xvector`` training, 2 epochs (512 TDNN channels, 2 s crops) on 2,000 synthetic utterances;
* ``gait_eval_eager`` (GPU only): ``gait_eval`` with ``cuda_graphs = false``, the same run without CUDA graphs;
* ``fantomas_paper`` (GPU only; issue 30): ``face.fantomas`` with its ``paper`` preset (224×224, SSIM, Adam 1e-4,
  batch 64, plateau schedule, at most 200 epochs, early stop after 20) and the convolution-only ablation
  ``face.fantomas_conv`` with the same preset, trained on the block-permuted (16 px blocks, fixed key) images of
  24 ORL subjects and judged on the other 16: top-1 identification of eigenfaces (enrolled on clear images) on
  clear, block-permuted and restored probes, seconds per epoch. The ORL folder is ``--orl`` (default
  ``../shared/data/att_faces``); without it the case is skipped with a note.

For the training cases the timed region is the network training (the calls of ``bioanon.nettrain.train_net``;
the whole ``fit`` for a method that trains with a loop of its own); ``fit_s`` is the whole ``fit`` with its
input preparation. Before timing, each device runs the same job once on a few samples (CUDA context, kernel
loading, lazy imports). Per device: wall seconds; on the GPU also its utilization (``nvidia-smi`` sampled every
0.2 s in a background thread: mean and max during the timed region) and peak memory
(``torch.cuda.max_memory_allocated``, and the most ``nvidia-smi`` saw in use). Per case: the speed-up
(CPU seconds / GPU seconds). The machine's CPU cores, torch threads and GPU name are recorded.

Targets (recorded with pass/fail beside the figures, never asserted; issue 29): the ``gait.cnn`` evaluation at
least 5× faster end to end on the GPU than on every CPU core, with the GPU busy at least 50 % of its training
time; the same utilization for the training cases; ``fantomas_paper``: Fantômas restores at least 0.8 of the clear
top-1, the conv-only ablation less than half of it.

The figures go under the ``"gpu"`` key of ``benchmarks/results.json`` (written atomically; the other benchmarks'
keys are kept). On a machine without a CUDA GPU the run says so, skips, writes nothing and exits 0. A quick run
never replaces full figures. A method parameter this checkout's method does not have (e.g. ``device`` on a
method not yet ported to the GPU) is left out and listed in the case's ``dropped_params``; ``ran_on`` records
where the trained network actually was.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import figure, read_results, update_results

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
ORL = HERE.parent.parent / "shared" / "data" / "att_faces"
SPEEDUP_TARGET = 5.0  # the gait.cnn evaluation, end to end (issue 29; issue 15 asked 10)
UTIL_TARGET = 50.0  # % GPU utilization during training (issue 29; issue 15 asked 60)

# sizes per case; "quick" runs in seconds on two CPU cores
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "gait_eval": {"subjects": 200, "sequences": 8, "frames": 60, "recognizer": {}, "bootstrap": 200},
        "gait_eval_eager": {
            "subjects": 200,
            "sequences": 8,
            "frames": 60,
            "recognizer": {"cuda_graphs": False},
            "bootstrap": 200,
        },
        "fantomas_paper": {
            "size": 224,
            "block": 16,
            "params": {},
            # Fantômas alone, other schedules at 224 px: the paper's for 5x the epochs (ORL's 216 training pairs
            # make 4 steps an epoch; the paper's sets, thousands), and the fast preset's rate, batch and warm-up
            "variants": {
                "paper_1000_epochs": {"epochs": 1000, "restarts": 0},
                "fast_schedule": {"lr": 1e-3, "batch_size": 16, "warmup": 5, "epochs": 60, "restarts": 0},
            },
        },
        "arcface": {
            "subjects": 200,
            "images": 10,
            "size": 112,
            "warmup": 64,
            "params": {"size": 112, "backbone": "resnet18", "width": 0, "batch_size": 64, "epochs": 2},
        },
        "fantomas": {
            "subjects": 40,
            "images": 10,
            "size": 224,
            "warmup": 32,
            # features=4: the widest linear layer face.fantomas allows at 224 px (157 M weights)
            "params": {"resolution": (224, 224), "features": 4, "batch_size": 64, "epochs": 5, "patience": 0},
        },
        "xvector": {
            "speakers": 100,
            "utterances": 20,
            "duration": 3.0,
            "warmup": 64,
            "params": {"channels": 512, "embedding_dim": 256, "crop_frames": 200, "batch_size": 64, "epochs": 2},
        },
    },
    "quick": {
        "gait_eval_eager": {
            "subjects": 8,
            "sequences": 4,
            "frames": 16,
            "bootstrap": 10,
            "recognizer": {"epochs": 1, "channels": 4, "embedding_dim": 4, "cuda_graphs": False},
        },
        "fantomas_paper": {
            "size": 32,
            "block": 8,
            "params": {"resolution": (32, 32), "epochs": 2, "patience": 0, "restarts": 0},
            "variants": {"fast_schedule": {"lr": 1e-3, "batch_size": 16, "warmup": 1, "epochs": 2}},
        },
        "gait_eval": {
            "subjects": 8,
            "sequences": 4,
            "frames": 16,
            "bootstrap": 10,
            "recognizer": {"epochs": 1, "channels": 4, "embedding_dim": 4},
        },
        "arcface": {
            "subjects": 4,
            "images": 3,
            "size": 32,
            "warmup": 6,
            "params": {"size": 32, "width": 4, "embedding_dim": 8, "batch_size": 4, "epochs": 1},
        },
        "fantomas": {
            "subjects": 4,
            "images": 3,
            "size": 16,
            "warmup": 6,
            "params": {
                "resolution": (16, 16),
                "features": 2,
                "batch_size": 4,
                "epochs": 1,
                "patience": 0,
                "validation": 0.0,
            },
        },
        "xvector": {
            "speakers": 3,
            "utterances": 3,
            "duration": 0.3,
            "warmup": 6,
            "params": {"channels": 4, "embedding_dim": 4, "crop_frames": 10, "batch_size": 4, "epochs": 1},
        },
    },
}


# ------------------------------------------------------------------------------------------ GPU utilization


class GpuSampler:
    """``nvidia-smi`` utilization (%) and memory in use (MiB) of one GPU every ``interval`` seconds, in a
    background thread, each sample with its ``time.perf_counter()`` stamp. ``error`` says why there are none."""

    def __init__(self, index: int, interval: float = 0.2) -> None:
        self.interval, self.samples, self.error = interval, [], None
        self.cmd = [
            shutil.which("nvidia-smi") or "nvidia-smi",
            "--query-gpu=utilization.gpu,memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            _smi_id(index),
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                out = subprocess.run(self.cmd, capture_output=True, text=True, timeout=5, check=True).stdout
                util, mem = (float(v) for v in out.strip().splitlines()[0].split(","))
                self.samples.append((t, util, mem))
            except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
                self.error = f"nvidia-smi failed: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(max(0.0, self.interval - (time.perf_counter() - t)))

    def __enter__(self) -> GpuSampler:
        if shutil.which(self.cmd[0]) is None:
            self.error = "nvidia-smi not found: no utilization figures"
        else:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def stats(self, spans: list[tuple[float, float]]) -> dict[str, Any]:
        """Mean and max utilization and the most memory in use over the samples inside ``spans``."""
        inside = [(u, m) for t, u, m in self.samples if any(a <= t <= b for a, b in spans)]
        if not inside:
            return {
                "gpu_util_mean": None,
                "gpu_util_max": None,
                "gpu_mem_used_max_mib": None,
                "util_samples": 0,
                **({"util_error": self.error} if self.error else {}),
            }
        util = [u for u, _ in inside]
        return {
            "gpu_util_mean": round(sum(util) / len(util), 1),
            "gpu_util_max": max(util),
            "gpu_mem_used_max_mib": max(m for _, m in inside),
            "util_samples": len(inside),
        }


def _smi_id(index: int) -> str:
    """The ``nvidia-smi -i`` id of torch's CUDA device ``index`` (through ``CUDA_VISIBLE_DEVICES``)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if index < len(visible) else str(index)


# ----------------------------------------------------------------------------------------------- the cases


@contextlib.contextmanager
def training_spans(*modules: Any) -> Iterator[list[tuple[float, float]]]:
    """Record the (start, end) of every ``bioanon.nettrain.train_net`` call inside the block (it synchronizes
    a CUDA device before returning), including calls through a plugin module's own ``train_net`` name."""
    import bioanon.nettrain as nettrain

    original = nettrain.train_net
    spans: list[tuple[float, float]] = []

    def timed_train_net(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spans.append((t0, time.perf_counter()))

    patched = [nettrain] + [m for m in modules if getattr(m, "train_net", None) is original]
    for m in patched:
        m.train_net = timed_train_net
    try:
        yield spans
    finally:
        for m in patched:
            m.train_net = original


def make_method(method_id: str, params: dict[str, Any], device: str, threads: int) -> tuple[Any, list[str]]:
    """The method with ``params`` plus ``device``/``threads`` — only those its class has; and the dropped names."""
    import bioanon

    cls = bioanon.get_registry().get(method_id)
    names = {f.name for f in cls.param_fields()}
    wanted = {**params, "device": device, "threads": threads}
    return cls(**{k: v for k, v in wanted.items() if k in names}), sorted(set(wanted) - names)


def ran_on(method: Any) -> str | None:
    """The device of the fitted network's first parameter."""
    net = getattr(method, "model_", None)
    try:
        return str(next(net.parameters()).device)
    except (AttributeError, StopIteration, TypeError):
        return None


@dataclass
class Case:
    key: str
    title: str
    methods: tuple[str, ...]  # every id the case needs (skipped with a note when one is not installed)
    training: bool  # the utilization target applies
    prepare: Callable[[dict[str, Any]], Any]  # the data, made once, untimed
    job: Callable[[Any, dict[str, Any], str, int, bool], dict[str, Any]]  # (data, sizes, device, threads, warm-up)
    on_cpu: bool = True  # False: timed on the GPU only (a variant of another case, or too slow on the CPU)


def _gait_config(s: dict[str, Any], subjects: int) -> dict[str, Any]:
    return {
        "name": "bench-gpu-gait",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "parrot"],
        "dataset": {
            "source": "gait.synthetic",
            "params": {"n_subjects": subjects, "sequences_per_subject": s["sequences"], "frames": s["frames"]},
        },
        "anonymizers": [{"id": "gait.noise", "name": "noise", "params": {"scale": 3.0}}],
        "recognizers": [{"id": "gait.cnn", "name": "cnn", "params": dict(s["recognizer"])}],
        "selection": {"selectors": ["random"], "subject_counts": []},
        "report": {"bootstrap": s["bootstrap"]},
    }


def gait_eval_job(_data: Any, s: dict[str, Any], device: str, threads: int, warmup: bool) -> dict[str, Any]:
    import bioanon
    import bioanon_gait.cnn as cnn

    cfg = _gait_config(s, 6 if warmup else s["subjects"])
    if warmup:
        cfg["recognizers"][0]["params"] |= {"epochs": 1}
    names = {f.name for f in bioanon.get_registry().get("gait.cnn").param_fields()}
    if threads and "threads" in names:
        cfg["recognizers"][0]["params"]["threads"] = threads
    with tempfile.TemporaryDirectory() as tmp, training_spans(cnn) as spans:  # a fresh cache: nothing reused
        r = bioanon.evaluate(cfg, out_dir=None, cache=Path(tmp) / "cache", progress=False, report=False, device=device)
    return {
        "train_spans": list(spans),
        "tasks": r.executed,
        "config": cfg,
        "stage_seconds": {k: round(v["seconds"], 3) for k, v in r.stages.items()},
        "method_device_param": "device" in names,
    }


def orl_data(s: dict[str, Any]) -> Any:
    """ORL at ``size`` px: the attacker's 24 subjects (clear, block-permuted) and the other 16's gallery and
    probes (half of each subject's images each)."""
    import bioanon

    orl = bioanon.load_dataset("face.orl", str(s["orl"]), size=[s["size"], s["size"]])
    attacker, evaluation = orl.split_subjects([0.6, 0.4], seed=0)
    gallery, probes = evaluation.split_within_subjects([0.5, 0.5], seed=1)
    perm = bioanon.get_method("face.block_permutation", block_size=s["block"], key=1)
    return attacker, perm.transform(attacker), gallery, probes, perm.transform(probes)


def _eigenfaces_top1(gallery: Any, probes: Any, subjects: Any) -> float:
    import numpy as np

    import bioanon

    rec = bioanon.get_method("face.eigenfaces").fit(gallery)
    rec.enroll(gallery)
    return float(np.mean(rec.score(probes).predict() == subjects))


def fantomas_paper_job(data: Any, s: dict[str, Any], device: str, threads: int, warmup: bool) -> dict[str, Any]:
    """Both models with the paper preset, and Fantômas with each schedule of ``variants``; top-1 of clear,
    block-permuted and restored probes."""
    import bioanon_face.fantomas as fantomas

    attacker, anon_attacker, gallery, probes, anon_probes = data
    if warmup:
        attacker, anon_attacker = _head(attacker, 16), _head(anon_attacker, 16)
    params = {"preset": "paper", "device": device, "threads": threads, **s["params"]}
    params |= {"epochs": 1, "restarts": 0} if warmup else {}
    out: dict[str, Any] = {"models": {}}
    models = [("fantomas", fantomas.Fantomas, {}), ("conv_only", fantomas.FantomasConv, {"restarts": 0})]
    models += [(k, fantomas.Fantomas, v) for k, v in s.get("variants", {}).items() if not warmup]
    with training_spans(fantomas) as spans:
        for key, cls, extra in models:
            t0 = time.perf_counter()
            model = cls(**(params | extra)).fit(attacker, anon_attacker)
            fit_s = time.perf_counter() - t0
            trained_epochs = sum(a["epochs"] for a in model.attempts_ or []) or len(model.history_ or [])
            out["models"][key] = {
                "params": extra,
                "fit_s": round(fit_s, 2),
                "epochs_run": len(model.history_ or []),  # of the kept training
                "epochs_trained": trained_epochs,  # restarts included
                "attempts": model.attempts_,
                "best_epoch": model.best_epoch_,
                "seed_used": model.seed_used_,
                "learned": model.learned_,
                "seconds_per_epoch": round(fit_s / max(trained_epochs, 1), 4),  # the fit's seconds per epoch trained
                "restored": None if warmup else model.transform(anon_probes),
                "ran_on": ran_on(model),
            }
    if not warmup:
        subjects = probes.subjects
        out["top1"] = {
            "clear": _eigenfaces_top1(gallery, probes, subjects),
            "naive": _eigenfaces_top1(gallery, anon_probes, subjects),
        }
        for key, m in out["models"].items():
            out["top1"][key] = _eigenfaces_top1(gallery, m.pop("restored"), subjects)
        out["chance"] = 1.0 / len(set(subjects))
    else:
        for m in out["models"].values():
            m.pop("restored")
    out["train_spans"] = list(spans)
    out["epochs_run"] = out["models"]["fantomas"]["epochs_run"]
    return out


def arcface_data(s: dict[str, Any]) -> Any:
    import bioanon

    return bioanon.load_dataset(
        "face.synthetic", n_subjects=s["subjects"], samples_per_subject=s["images"], size=(s["size"], s["size"]), seed=0
    )


def fantomas_data(s: dict[str, Any]) -> Any:
    import bioanon

    clear = arcface_data(s)
    return clear, bioanon.get_method("face.block_permutation", block_size=max(4, s["size"] // 7)).transform(clear)


def xvector_data(s: dict[str, Any]) -> Any:
    import bioanon

    return bioanon.load_dataset(
        "voice.synthetic",
        n_speakers=s["speakers"],
        utterances_per_speaker=s["utterances"],
        duration=s["duration"],
        with_features=False,
        seed=0,
    )


def _fit_job(method_id: str, module: str, fit: Callable[[Any, Any, int | None], Any]):
    """A training case's job: ``fit(method, data, n)`` on all the data, or on its first ``n`` samples."""

    def job(data: Any, s: dict[str, Any], device: str, threads: int, warmup: bool) -> dict[str, Any]:
        import importlib

        params = dict(s["params"]) | ({"epochs": 1} if warmup else {})
        method, dropped = make_method(method_id, params, device, threads)
        with training_spans(importlib.import_module(module)) as spans:
            fit(method, data, s["warmup"] if warmup else None)
        history = getattr(method, "history_", None)
        return {
            "train_spans": list(spans),
            "ran_on": ran_on(method),
            "dropped_params": dropped,
            "epochs_run": len(history) if history else params.get("epochs"),
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in method.get_params().items()},
        }

    return job


def _head(table: Any, n: int | None) -> Any:
    return table if n is None else table.take(list(range(min(n, table.num_rows))))


CASES = [
    Case(
        "gait_eval",
        "gait.cnn evaluation end to end, {subjects} synthetic subjects",
        ("gait.cnn", "gait.synthetic", "gait.noise"),
        False,
        lambda s: None,
        gait_eval_job,
    ),
    Case(
        "arcface",
        "face.arcface training at {size} px, {epochs} epochs, {n} synthetic faces",
        ("face.arcface", "face.synthetic"),
        True,
        arcface_data,
        _fit_job("face.arcface", "bioanon_face.arcface", lambda m, t, n: m.fit(_head(t, n))),
    ),
    Case(
        "fantomas",
        "face.fantomas training at {size} px, {epochs} epochs, {n} block-permuted faces",
        ("face.fantomas", "face.synthetic", "face.block_permutation"),
        True,
        fantomas_data,
        _fit_job("face.fantomas", "bioanon_face.fantomas", lambda m, d, n: m.fit(_head(d[0], n), _head(d[1], n))),
    ),
    Case(
        "xvector",
        "voice.xvector training, {epochs} epochs, {n} synthetic utterances",
        ("voice.xvector", "voice.synthetic"),
        True,
        xvector_data,
        _fit_job("voice.xvector", "bioanon_voice.xvector", lambda m, t, n: m.fit(_head(t, n))),
    ),
]
CASES += [
    Case(
        "gait_eval_eager",
        "gait.cnn evaluation end to end without CUDA graphs, {subjects} synthetic subjects",
        ("gait.cnn", "gait.synthetic", "gait.noise"),
        False,
        lambda s: None,
        gait_eval_job,
        on_cpu=False,
    ),
    Case(
        "fantomas_paper",
        "face.fantomas and face.fantomas_conv, paper preset at {size} px, block-permuted ORL",
        ("face.fantomas", "face.fantomas_conv", "face.orl", "face.block_permutation", "face.eigenfaces"),
        True,
        orl_data,
        fantomas_paper_job,
        on_cpu=False,
    ),
]
CASE_KEYS = [c.key for c in CASES]


def _title(case: Case, s: dict[str, Any]) -> str:
    n = s.get("subjects", s.get("speakers", 0)) * s.get("images", s.get("utterances", 1))
    return case.title.format(
        n=n, epochs=s.get("params", {}).get("epochs"), **{k: v for k, v in s.items() if k not in ("params",)}
    )


# ----------------------------------------------------------------------------------------------- measuring


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def measure(case: Case, data: Any, s: dict[str, Any], device: str, threads: int, warm: bool) -> dict[str, Any]:
    """One device's run of a case: warm-up (``warm``), then the timed job, utilization and peak memory."""
    import torch

    from bioanon.torchutil import cores

    cuda = device.startswith("cuda")
    if warm:
        case.job(data, s, device, threads, True)
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    sampler = GpuSampler(torch.device(device).index or 0) if cuda else contextlib.nullcontext()
    with sampler:
        _sync(torch, device)
        t0 = time.perf_counter()
        info = case.job(data, s, device, threads, False)
        _sync(torch, device)
        t1 = time.perf_counter()
    spans = info.pop("train_spans")
    train_s = sum(b - a for a, b in spans)
    rec: dict[str, Any] = {"device": device, "seconds": round(t1 - t0, 3)}
    if case.training:
        rec["fit_s"] = rec["seconds"]
        rec["timed_region"] = "train_net" if spans else "fit"
        if spans:
            rec["seconds"] = round(train_s, 3)
        if info.get("epochs_run"):
            rec["seconds_per_epoch"] = round(rec["seconds"] / info["epochs_run"], 3)
    elif spans:
        rec["train_s"] = round(train_s, 3)  # the share of the evaluation spent training networks
    if cuda:
        rec["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
        rec.update(sampler.stats(spans if case.training and spans else [(t0, t1)]))
        if not case.training and spans:
            rec["gpu_util_mean_training"] = sampler.stats(spans)["gpu_util_mean"]
        torch.cuda.empty_cache()
    else:
        rec["cpu_threads"] = threads or cores()
    rec.update(info)
    return rec


def machine(devices: list[str]) -> dict[str, Any]:
    import torch

    from bioanon.device import describe_device
    from bioanon.torchutil import cores

    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cores_available": cores(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
    }
    gpu = next((d for d in devices if d != "cpu"), None)
    if gpu is not None:
        desc = describe_device(gpu)
        out["gpu"] = {k: desc[k] for k in ("name", "memory_gb", "capability", "cuda", "cudnn") if k in desc}
    return out


def _restoration_figures(title: str, gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The paper preset's restoration: Fantômas near clear level (≥ 0.8 of it), the conv-only ablation not."""
    top1 = gpu["top1"]
    context = {k: round(v, 3) for k, v in top1.items()} | {"chance": round(gpu["chance"], 3)}
    context |= {f"{k}_s_per_epoch": m["seconds_per_epoch"] for k, m in gpu["models"].items()}
    context |= {f"{k}_epochs": m.get("epochs_trained", m["epochs_run"]) for k, m in gpu["models"].items()}
    ratio = top1["fantomas"] / max(top1["clear"], 1e-9)
    return [
        figure(
            f"gpu: {title}, Fantômas top-1 / clear top-1", value=ratio, target=">= 0.8", passed=ratio >= 0.8, **context
        ),  # fmt: skip
        figure(
            f"gpu: {title}, conv-only top-1 / clear top-1",
            value=top1["conv_only"] / max(top1["clear"], 1e-9),
            target="< 0.5",
            passed=top1["conv_only"] < 0.5 * top1["clear"],
            **context,
        ),
    ]


def _case_figures(case: Case, title: str, runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    cpu = runs.get("cpu")
    gpu = next((r for d, r in runs.items() if d != "cpu"), None)
    if case.key == "fantomas_paper":
        return _restoration_figures(title, gpu) if gpu is not None and "top1" in gpu else []
    if cpu is None or gpu is None or "error" in cpu or "error" in gpu:
        return []
    speedup = cpu["seconds"] / max(gpu["seconds"], 1e-9)
    on_gpu = gpu.get("method_device_param", (gpu.get("ran_on") or "").startswith("cuda"))
    context = {
        "cpu_s": cpu["seconds"],
        "gpu_s": gpu["seconds"],
        "cpu_threads": cpu["cpu_threads"],
        "gpu_util_mean": gpu.get("gpu_util_mean"),
        "gpu_util_max": gpu.get("gpu_util_max"),
        "gpu_peak_allocated_mib": gpu.get("peak_allocated_mib"),
        "method_on_gpu": on_gpu,
    }
    if "seconds_per_epoch" in cpu and "seconds_per_epoch" in gpu:
        context |= {"cpu_s_per_epoch": cpu["seconds_per_epoch"], "gpu_s_per_epoch": gpu["seconds_per_epoch"]}
    figs = []
    if case.key == "gait_eval":
        figs.append(
            figure(
                f"gpu: {title}, CPU / GPU wall time",
                value=speedup,
                target=f">= {SPEEDUP_TARGET:g}",
                passed=on_gpu and speedup >= SPEEDUP_TARGET,
                **context,
            )
        )
        figs.append(_util_figure(f"gpu: {title}, GPU utilization while training", gpu.get("gpu_util_mean_training"),
                                 method_on_gpu=on_gpu))  # fmt: skip
    else:
        figs.append(
            figure(f"gpu: {title}, CPU / GPU training time", value=speedup, target="(context)", passed=True, **context)
        )
        figs.append(
            _util_figure(
                f"gpu: {title}, GPU utilization during training",
                gpu.get("gpu_util_mean"),
                gpu_util_max=gpu.get("gpu_util_max"),
                util_samples=gpu.get("util_samples"),
                method_on_gpu=on_gpu,
            )
        )
    return figs


def _util_figure(name: str, util: float | None, **context: Any) -> dict[str, Any]:
    """A GPU-utilization figure against :data:`UTIL_TARGET` (NaN and failed without samples)."""
    return figure(
        name,
        value=util if util is not None else float("nan"),
        unit="%",
        target=f">= {UTIL_TARGET:g} %",
        passed=util is not None and util >= UTIL_TARGET,
        **context,
    )


def run(
    quick: bool = False,
    device: str = "cuda",
    cases: list[str] | None = None,
    threads: int = 0,
    devices: list[str] | None = None,
    warm: bool | None = None,
    orl: Path | None = None,
) -> dict[str, Any]:
    """Time the cases on ``devices`` (default: the CPU and ``device``; ``quick``: the CPU only, tiny sizes);
    ``warm``: run each job once on a few samples before timing it (default: unless ``quick``); ``orl``: the ORL
    folder of the ``fantomas_paper`` case (default ``../shared/data/att_faces``). A case that is timed on the GPU
    only (``on_cpu`` False) skips the CPU, except in a quick run on the CPU alone."""
    import bioanon

    devices = devices or (["cpu"] if quick else ["cpu", device])
    sizes = SIZES["quick" if quick else "full"]
    registry = bioanon.get_registry()
    started = time.perf_counter()
    res: dict[str, Any] = {
        "benchmark": "gpu",
        "quick": quick,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "devices": devices,
        "machine": machine(devices),
        "cases": {},
        "figures": [],
        "notes": [],
        "targets": {"gait_eval_speedup": f">= {SPEEDUP_TARGET:g}", "gpu_util_training": f">= {UTIL_TARGET:g} %"},
    }
    if any(d.startswith("cuda") for d in devices):
        import torch

        torch.ones(8, device=next(d for d in devices if d.startswith("cuda"))).sum().item()  # CUDA context
    for case in CASES:
        if cases and case.key not in cases:
            continue
        missing = [m for m in case.methods if m not in registry]
        if missing:
            res["notes"].append(f"{case.key} skipped: {', '.join(missing)} not installed")
            continue
        s = dict(sizes[case.key])
        if case.key == "fantomas_paper":
            s["orl"] = str(orl or ORL)
            if not Path(s["orl"]).is_dir():
                res["notes"].append(f"fantomas_paper skipped: no ORL folder at {s['orl']} (--orl)")
                continue
        title = _title(case, s)
        print(f"gpu benchmark: {title}", file=sys.stderr, flush=True)
        data = case.prepare(s)
        runs: dict[str, dict[str, Any]] = {}
        for dev in devices:
            if dev == "cpu" and not case.on_cpu and len(devices) > 1:
                continue
            try:
                runs[dev] = measure(case, data, s, dev, threads, warm=not quick if warm is None else warm)
            except Exception as exc:  # noqa: BLE001 - one failing case must not hide the others
                runs[dev] = {"device": dev, "error": f"{type(exc).__name__}: {exc}"}
            print(f"  {dev}: {runs[dev].get('seconds', runs[dev].get('error'))}", file=sys.stderr, flush=True)
        del data
        entry: dict[str, Any] = {"title": title, "sizes": s, "runs": runs}
        if len(devices) > 1 and all(d in runs and "seconds" in runs[d] for d in devices[:2]):
            entry["speedup"] = round(runs[devices[0]]["seconds"] / max(runs[devices[1]]["seconds"], 1e-9), 2)
        for r in (r for d, r in runs.items() if d != "cpu"):
            if r.get("dropped_params") and "device" in r["dropped_params"]:
                res["notes"].append(
                    f"{case.methods[0]} has no device parameter on this checkout: it trained on "
                    f"{r.get('ran_on')} in the {r['device']} run"
                )
            if r.get("method_device_param") is False:
                res["notes"].append(
                    f"{case.methods[0]} has no device parameter on this checkout: its "
                    f"{r['device']} evaluation trained on the CPU"
                )
        res["cases"][case.key] = entry
        res["figures"] += _case_figures(case, title, runs)
    graphs, eager = (res["cases"].get(k, {}).get("runs", {}) for k in ("gait_eval", "gait_eval_eager"))
    on_gpu = [(graphs[d], eager[d]) for d in graphs if d != "cpu" and d in eager]
    if on_gpu and all("seconds" in r for r in on_gpu[0]):
        g, e = on_gpu[0]
        res["figures"].append(
            figure(
                "gpu: gait.cnn evaluation, without / with CUDA graphs (GPU wall time)",
                value=e["seconds"] / max(g["seconds"], 1e-9),
                target="(context)",
                passed=True,
                graphs_s=g["seconds"],
                eager_s=e["seconds"],
                graphs_util_training=g.get("gpu_util_mean_training"),
                eager_util_training=e.get("gpu_util_mean_training"),
            )
        )
    res["notes"] = sorted(set(res["notes"]))
    res["seconds"] = round(time.perf_counter() - started, 2)
    return res


# ---------------------------------------------------------------------------------------------- command line


def no_gpu(device: str) -> str | None:
    """Why ``device`` cannot be benchmarked here (None: it can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not device.startswith("cuda"):
        return f"--device {device!r}: this benchmark compares the CPU with a CUDA GPU (cuda or cuda:N)"
    if not torch.cuda.is_available():
        return f"no CUDA GPU on this machine (torch {torch.__version__}: torch.cuda.is_available() is False)"
    from bioanon.device import DeviceError, resolve_device

    try:
        resolve_device(device, name="--device")
    except DeviceError as exc:
        return str(exc)
    return None


def write(res: dict[str, Any], path: Path) -> bool:
    """Put ``res`` under ``"gpu"`` in ``path`` (other keys kept); a quick run never replaces full figures."""
    old = read_results(path).get("gpu")
    if res["quick"] and isinstance(old, dict) and old.get("quick") is False:
        print(
            f"gpu benchmark: {path} holds full GPU figures ({old.get('date')}); a quick run does not replace them",
            file=sys.stderr,
        )
        return False
    update_results(path, gpu=res)
    return True


def show(res: dict[str, Any]) -> None:
    m = res["machine"]
    gpu = m.get("gpu", {}).get("name", "no GPU")
    print(f"GPU benchmarks{' — quick: tiny sizes on the CPU, the figures say nothing' if res['quick'] else ''}")
    print(
        f"  machine: {m['cpu_count']} CPUs ({m['cores_available']} available, torch {m['torch_threads']} "
        f"threads), {gpu}, torch {m['torch']}"
    )
    for c in res["cases"].values():
        parts = []
        for dev, r in c["runs"].items():
            if "error" in r:
                parts.append(f"{dev} ERROR {r['error']}")
                continue
            extra = ""
            if r.get("gpu_util_mean") is not None:
                extra = f" (util {r['gpu_util_mean']:.0f}/{r['gpu_util_max']:.0f} %, {r['peak_allocated_mib']:.0f} MiB)"
            parts.append(f"{dev} {r['seconds']:.2f} s{extra}")
        speed = f"  {c['speedup']:.1f}×" if "speedup" in c else ""
        print(f"  {c['title']}: {', '.join(parts)}{speed}")
    for f in res["figures"]:
        print(
            f"  {f['name']:<86} {f['value']:7.1f}{f['unit']}  target {f['target']:<8} "
            f"{'PASS' if f['passed'] else 'FAIL'}"
        )
    for note in res["notes"]:
        print(f"  note: {note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes on the CPU only (a smoke run); with --device also on that device",
    )
    ap.add_argument("--device", default=None, help="the GPU to compare with the CPU (default: cuda)")
    ap.add_argument("--cases", nargs="+", choices=CASE_KEYS, default=None, help="only these cases (default: all)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of the methods (default 0: every core)")
    ap.add_argument("--results", default=str(RESULTS), help="the results file (default: benchmarks/results.json)")
    ap.add_argument("--orl", default=str(ORL), help="the ORL folder of the fantomas_paper case")
    a = ap.parse_args(argv)
    if a.quick and a.device is None:
        devices = ["cpu"]
    else:
        device = a.device or "cuda"
        reason = no_gpu(device)
        if reason is not None:
            print(f"gpu benchmark: {reason} — the GPU section is skipped; nothing written to {a.results}")
            return 0
        from bioanon.device import resolve_device

        devices = ["cpu", resolve_device(device, name="--device")]
    res = run(quick=a.quick, cases=a.cases, threads=a.threads, devices=devices, orl=Path(a.orl))
    show(res)
    if write(res, Path(a.results)):
        print(f'gpu benchmark: written under "gpu" in {a.results}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
