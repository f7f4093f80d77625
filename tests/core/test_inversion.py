"""any.mlp_inversion: a learned non-linear de-anonymizer (torch)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import bioanon  # noqa: E402
from bioanon.builtin.deanonymizers import RidgeInversion  # noqa: E402
from bioanon.builtin.inversion import MlpInversion  # noqa: E402
from bioanon.table import SampleTable  # noqa: E402
from bioanon.testing import check_method, make_table  # noqa: E402

FAST = {"threads": 1}  # tiny networks: one thread is fastest, and immune to a busy machine


def test_conforms():
    report = check_method(MlpInversion, params={**MlpInversion.example_params, **FAST})
    assert report.raise_for_failures().checks_run >= 15
    assert bioanon.get_registry().get("any.mlp_inversion") is MlpInversion


D = 8
_Q = np.linalg.qr(np.random.default_rng(0).standard_normal((D, D)))[0]


def _pairs(n, seed, prefix):
    """Clear features and a fixed non-linear anonymization of them: a saturating tanh of a fixed rotation
    (plus a small linear leak so that it stays invertible)."""
    x = np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)
    u = 2.0 * x @ _Q
    ids = np.array([f"{prefix}{i:05d}" for i in range(n)])

    def table(v):
        return SampleTable.from_arrays(subject=ids, sample_id=ids, payloads={"features": v.astype(np.float32)})

    return table(x), table(np.tanh(u) + 0.1 * u)


@pytest.fixture(scope="module")
def tanh_data():
    return _pairs(1500, 1, "a"), _pairs(500, 2, "t")


def _mse(m, anon, clear):
    return float(np.mean((m.transform(anon).payload("features") - clear.payload("features")) ** 2))


PARAMS = dict(hidden=(128,), epochs=40, lr=3e-3, **FAST)


@pytest.fixture(scope="module")
def fitted(tanh_data):
    (c_tr, a_tr), _ = tanh_data
    return MlpInversion(**PARAMS).fit(c_tr, a_tr)


def test_loss_falls(fitted):
    h = fitted.history_
    assert h[0]["epoch"] == 1 and "val_loss" in h[0]
    assert h[-1]["train_loss"] < 0.2 * h[0]["train_loss"], (h[0], h[-1])
    assert min(r["val_loss"] for r in h) < 0.5 * h[0]["val_loss"]
    assert 1 <= fitted.best_epoch_ <= len(h)


def test_beats_ridge_on_a_nonlinear_anonymization(fitted, tanh_data):
    (c_tr, a_tr), (c_te, a_te) = tanh_data
    ridge = _mse(RidgeInversion().fit(c_tr, a_tr), a_te, c_te)
    mlp = _mse(fitted, a_te, c_te)
    assert mlp < 0.7 * ridge, (mlp, ridge)  # held-out pairs; seed 0: ~0.05 vs ~0.10


def test_deterministic_and_leaves_global_state_alone(tanh_data):
    (c_tr, a_tr), (_, a_te) = tanh_data
    small = dict(PARAMS, epochs=3)
    rng_state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    a = MlpInversion(**small).fit(c_tr, a_tr).transform(a_te).payload("features")
    assert torch.equal(torch.random.get_rng_state(), rng_state) and torch.get_num_threads() == threads
    torch.manual_seed(12345)  # the global RNG does not matter
    b = MlpInversion(**small).fit(c_tr, a_tr).transform(a_te).payload("features")
    c = MlpInversion(**dict(small, seed=1)).fit(c_tr, a_tr).transform(a_te).payload("features")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_early_stopping_keeps_the_best_epoch():
    # targets unrelated to the inputs: the validation loss cannot keep falling, so training stops early
    rng = np.random.default_rng(3)
    ids = [f"s{i}" for i in range(60)]
    x = rng.standard_normal((60, 4)).astype(np.float32)
    clear = SampleTable.from_arrays(subject=ids, sample_id=ids, payloads={"features": x})
    anon = clear.with_payload("features", rng.standard_normal((60, 4)).astype(np.float32))
    m = MlpInversion(hidden=(64,), epochs=500, patience=3, validation=0.25, batch_size=8, **FAST).fit(clear, anon)
    assert len(m.history_) < 500
    assert m.best_epoch_ == len(m.history_) - 3
    assert m.history_[m.best_epoch_ - 1]["val_loss"] == min(r["val_loss"] for r in m.history_)


def test_keeps_payload_shape_and_dtype_and_checkpoints(tmp_path):
    table = make_table(payload="image")  # uint8 16×16×3
    m = MlpInversion(hidden=(32,), epochs=2, batch_size=8, **FAST).fit(table, table)
    out = m.transform(table)
    img = out.payload("image")
    assert img.dtype == np.uint8 and img.shape == table.payload("image").shape
    assert np.array_equal(out.sample_ids, table.sample_ids)
    path = tmp_path / "inv.pt"
    m.save_checkpoint(path)
    loaded = MlpInversion.load_checkpoint(path)
    assert loaded.get_params() == m.get_params() and loaded.history_ == m.history_
    np.testing.assert_array_equal(loaded.transform(table).payload("image"), img)
    with pytest.raises(RuntimeError, match="fit"):
        MlpInversion().transform(table)


# ----------------------------------------------------------------------------------------- device and weights

CUDA = torch.cuda.is_available()


def test_bf16_autocast_stays_close_to_fp32(tanh_data):
    (c_tr, a_tr), (_, a_te) = tanh_data
    small = dict(PARAMS, epochs=5, device="cpu")
    fp32 = MlpInversion(**small, precision="fp32").fit(c_tr, a_tr)
    out32 = fp32.transform(a_te).payload("features")
    fp32.precision = "bf16"  # the same network, inferred under bf16 autocast
    out16 = fp32.transform(a_te).payload("features")
    cos = np.sum(out32 * out16, 1) / (np.linalg.norm(out32, axis=1) * np.linalg.norm(out16, axis=1))
    assert cos.min() > 0.99, cos.min()
    trained16 = MlpInversion(**small, precision="bf16").fit(c_tr, a_tr)
    assert trained16.history_[-1]["train_loss"] < 0.5 * trained16.history_[0]["train_loss"]


def test_weights_fine_tune_from_a_checkpoint_and_misfits_are_named(tanh_data, tmp_path):
    (c_tr, a_tr), (c_te, a_te) = tanh_data
    small = dict(PARAMS, epochs=3)
    base = MlpInversion(**PARAMS).fit(c_tr, a_tr)
    ck = tmp_path / "inv.pt"
    base.save_checkpoint(ck)
    tuned = MlpInversion(**small, weights=str(ck)).fit(c_tr, a_tr)
    scratch = MlpInversion(**small).fit(c_tr, a_tr)
    assert tuned.preflight(c_tr) == []
    # three epochs from the trained weights beat three from scratch by far
    assert _mse(tuned, a_te, c_te) < 0.5 * _mse(scratch, a_te, c_te)
    wide = tmp_path / "wide.pt"
    MlpInversion(**dict(small, hidden=(32,))).fit(c_tr, a_tr).save_checkpoint(wide)
    problems = MlpInversion(**small, weights=str(wide)).preflight(c_tr)
    assert len(problems) == 1 and "mlp.0.weight: (32, 8) in the file, (128, 8) in the network" in problems[0]
    from bioanon.nettrain import WeightsError

    with pytest.raises(WeightsError, match=r"any\.mlp_inversion: weights .*wide\.pt.*mlp\.0\.weight"):
        MlpInversion(**small, weights=str(wide)).fit(c_tr, a_tr)


def test_trained_network_is_reused_from_the_weight_cache(tanh_data, tmp_path):
    from bioanon.cache import Cache
    from bioanon.nettrain import using_weight_cache

    (c_tr, a_tr), (_, a_te) = tanh_data
    small = dict(PARAMS, epochs=3)
    with using_weight_cache(Cache(tmp_path / "c")):
        first = MlpInversion(**small).fit(c_tr, a_tr)
        assert Cache(tmp_path / "c").info().n_blobs == 1
        again = MlpInversion(**dict(small, threads=2)).fit(c_tr, a_tr)  # threads: not part of the key
        assert Cache(tmp_path / "c").info().n_blobs == 1
        np.testing.assert_array_equal(
            first.transform(a_te).payload("features"), again.transform(a_te).payload("features")
        )
        MlpInversion(**dict(small, lr=1e-3)).fit(c_tr, a_tr)  # another network: trained and kept
        assert Cache(tmp_path / "c").info().n_blobs == 2


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_cuda_matches_cpu_within_tolerance(tanh_data):
    (c_tr, a_tr), (c_te, a_te) = tanh_data
    small = dict(PARAMS, epochs=20, precision="fp32")
    cpu = _mse(MlpInversion(**small, device="cpu").fit(c_tr, a_tr), a_te, c_te)
    gpu_m = MlpInversion(**small, device="cuda").fit(c_tr, a_tr)
    assert next(gpu_m.model_.parameters()).is_cuda
    gpu = _mse(gpu_m, a_te, c_te)
    assert abs(gpu - cpu) < 0.2 * cpu + 1e-3, (cpu, gpu)  # other kernels: close, not bitwise


def test_the_learning_check_tells_a_trained_inversion_from_a_collapsed_one(fitted, tanh_data):
    """On the pairs the fit held out: a trained inversion beats both trivial baselines (the anonymized input, the
    mean); one that cannot learn (a learning rate of 1e-12) is no better than the mean and is flagged."""
    from bioanon.evaluation.tasks import LEARNED_BELOW, learning_check

    (c_tr, a_tr), _ = tanh_data
    held = fitted.held_out_ids()
    assert len(held) == round(0.1 * 1500) and not np.isin(held, []).any()
    good = learning_check(fitted, c_tr, a_tr)
    assert good["checked"] and good["learned"] and good["pairs"] == len(held)
    assert good["error"] < 0.5 * min(good["identity_error"], good["mean_error"])  # seed 0: ~0.05 vs ~1
    stuck = MlpInversion(**{**PARAMS, "lr": 1e-12, "epochs": 2}).fit(c_tr, a_tr)
    bad = learning_check(stuck, c_tr, a_tr)
    assert bad["checked"] and not bad["learned"]
    assert bad["error"] > LEARNED_BELOW * bad["mean_error"], bad  # an untrained net outputs about the mean
    unchecked = learning_check(MlpInversion(**{**PARAMS, "validation": 0.0}).fit(c_tr, a_tr), c_tr, a_tr)
    assert unchecked == {"checked": False, "why": unchecked["why"]} and "held out no" in unchecked["why"]


def test_an_evaluation_flags_a_de_anonymizer_that_did_not_learn(tmp_path):
    """The run says so in one line naming the setting and repeat, the deanon rows of metrics.parquet carry the
    note, and the reversibility table does not call the setting irreversible on the strength of that model."""
    from evalconfigs import SMALL, config

    from bioanon.evaluation.scenarios import NOT_CONVERGED
    from bioanon.report import _reversibility
    from bioanon.report.results import _load

    cfg = config(
        **{
            **SMALL,
            "anonymizers": [{"id": "any.block_permutation", "name": "perm"}],
            "scenarios": ["naive", "deanon"],
            "deanonymizer": {"id": "any.mlp_inversion", "params": {**PARAMS, "lr": 1e-12, "epochs": 2}},
            "utility": [],
        }
    )
    r = bioanon.evaluate(cfg, out_dir=tmp_path, run_id="r", cache=tmp_path / "c", progress=False, report=False)
    lines = [w for w in r.warnings if NOT_CONVERGED in w]
    assert len(lines) == 1 and "perm repeat 0" in lines[0] and "any.mlp_inversion" in lines[0], r.warnings
    m = r.metrics
    deanon, others = m[m.scenario == "deanon"], m[m.scenario != "deanon"]
    assert len(deanon) and deanon.note.str.startswith(NOT_CONVERGED).all()
    assert not others.note.str.contains(NOT_CONVERGED).any()
    rev = _reversibility(_load(r.run_dir), (0.1, 0.5))
    assert len(rev) and (rev.category == f"not judged: {NOT_CONVERGED}").all()
