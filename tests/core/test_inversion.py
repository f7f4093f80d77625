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
